# SOLUTION BEGIN
# # Predict before you measure: HBM accesses (reads + writes, in elements) of ONE attention  STARTER
# # forward pass for one head, with  STARTER
# N = 512       # sequence length (queries = keys = N), BERT-base's  STARTER
# d = 64        # head dimension (dv = d)  STARTER
# M = 98304     # the paper's SRAM in fp16 elements (an A100 SM's 192 KiB of L1 + shared memory)  STARTER
# # Standard attention writes S and P to HBM and reads them back (Algorithm 0).  STARTER
# # FlashAttention picks Bc = ceil(M / 4d), Br = min(Bc, d) and streams K/V tiles (Algorithm 1).  STARTER
# # Replace the two None's with numbers (or formulas in N, d, M). Within 20% passes.  STARTER
# standard = None  STARTER
# flash = None  STARTER
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
# SOLUTION END
