import math

N = 512
d = 64
M = 98304

# Standard (Algorithm 0): read Q, K (2Nd), write S (N²), read S and write P (2N²),
# read P and V (N² + Nd), write O (Nd).
standard = 4 * N * N + 4 * N * d

# FlashAttention (Algorithm 1): K and V are read once (2Nd); for every one of the
# Tc = ceil(N / Bc) key tiles, all of Q is read and all of O is read and written back
# (3Nd per key tile), plus the small row statistics m and l.
Bc = math.ceil(M / (4 * d))
Tc = math.ceil(N / Bc)
flash = 2 * N * d + Tc * 3 * N * d
