import numpy as np

LOG2E = 1.4426950408889634   # log2(e): exp(x) = exp2(x · log2 e)
LN2 = 0.6931471805599453     # ln(2):   log(x) = log2(x) · ln 2


def key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal):
    """(full_end, end): key blocks [0, full_end) need no mask, [full_end, end) do.

    Non-causal: every key is seen; only the ragged last block needs a mask.
    Causal: keys after the program's last row (m0 + BLOCK_M - 1) are never seen, and blocks
    that start at or after m0 may straddle the diagonal. Both bounds are multiples of BLOCK_N
    except `end`, which stops at n_k (or at m0 + BLOCK_M under causal).
    """
    raise NotImplementedError("key_range: the loop bounds of one program")


def program(q, k, v, pid_m, BLOCK_M, BLOCK_N, causal, qk_scale):
    """What program pid_m of the Triton forward computes, in NumPy float32.

    q (Nq, d), k (Nk, d), v (Nk, d) float32; qk_scale = scale · log2(e) (base-2 units).
    Returns o (BLOCK_M, d) and lse (BLOCK_M,) for rows m0 = pid_m·BLOCK_M ... m0+BLOCK_M-1
    (rows past Nq are loaded as zeros, like tl.load(mask=..., other=0), and are not checked).
    lse is the natural-log logsumexp of the scaled scores.
    """
    raise NotImplementedError("program: load the q block, loop over key blocks with exp2")
