# Predict before you measure: HBM accesses (reads + writes, in elements) of ONE attention
# forward pass for one head, with
N = 512       # sequence length (queries = keys = N), BERT-base's
d = 64        # head dimension (dv = d)
M = 98304     # on-chip SRAM in elements (192 KiB of fp16 on an A100)
# Standard attention writes S and P to HBM and reads them back (Algorithm 0).
# FlashAttention picks Bc = ceil(M / 4d), Br = min(Bc, d) and streams K/V tiles (Algorithm 1).
# Replace the two None's with numbers (or formulas in N, d, M). Within 20% passes.
standard = None
flash = None
