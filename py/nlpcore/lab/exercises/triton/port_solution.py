import numpy as np

# SOLUTION BEGIN
# LOG2E = 1.4426950408889634   # log2(e): exp(x) = exp2(x · log2 e)  STARTER
# LN2 = 0.6931471805599453     # ln(2):   log(x) = log2(x) · ln 2  STARTER
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# SOLUTION END


def key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal):
    # SOLUTION BEGIN
    # """(full_end, end): key blocks [0, full_end) need no mask, [full_end, end) do.  STARTER
    m0 = pid_m * BLOCK_M
    if causal:
        end = min(m0 + BLOCK_M, n_k)
        full_end = min(m0, n_k) // BLOCK_N * BLOCK_N
    else:
        end = n_k
        full_end = n_k // BLOCK_N * BLOCK_N
    return full_end, end
    # SOLUTION END

    # SOLUTION BEGIN
    # Non-causal: every key is seen; only the ragged last block needs a mask.  STARTER
    # Causal: keys after the program's last row (m0 + BLOCK_M - 1) are never seen, and blocks  STARTER
    # that start at or after m0 may straddle the diagonal. Both bounds are multiples of BLOCK_N  STARTER
    # except `end`, which stops at n_k (or at m0 + BLOCK_M under causal).  STARTER
    # """  STARTER
    # raise NotImplementedError("key_range: the loop bounds of one program")  STARTER

def _load(x, rows, n):
    """tl.load(ptrs, mask=rows < n, other=0): out-of-range rows read as zeros."""
    out = np.zeros((len(rows), x.shape[1]), dtype=np.float32)
    ok = rows < n
    out[ok] = x[rows[ok]]
    return out
    # SOLUTION END


def program(q, k, v, pid_m, BLOCK_M, BLOCK_N, causal, qk_scale):
    # SOLUTION BEGIN
    # """What program pid_m of the Triton forward computes, in NumPy float32.  STARTER
# STARTER
    # q (Nq, d), k (Nk, d), v (Nk, d) float32; qk_scale = scale · log2(e) (base-2 units).  STARTER
    # Returns o (BLOCK_M, d) and lse (BLOCK_M,) for rows m0 = pid_m·BLOCK_M ... m0+BLOCK_M-1  STARTER
    # (rows past Nq are loaded as zeros, like tl.load(mask=..., other=0), and are not checked).  STARTER
    # lse is the natural-log logsumexp of the scaled scores.  STARTER
    # """  STARTER
    # raise NotImplementedError("program: load the q block, loop over key blocks with exp2")  STARTER
    n_q, n_k = q.shape[0], k.shape[0]
    m0 = pid_m * BLOCK_M
    offs_m = m0 + np.arange(BLOCK_M)
    offs_n = np.arange(BLOCK_N)
    qb = _load(q, offs_m, n_q)                                   # (Br, d)
    m_i = np.full(BLOCK_M, -np.inf, dtype=np.float32)
    l_i = np.zeros(BLOCK_M, dtype=np.float32)
    acc = np.zeros((BLOCK_M, v.shape[1]), dtype=np.float32)
    full_end, end = key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal)
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + offs_n                                  # (Bc,)
        kb, vb = _load(k, cols, n_k), _load(v, cols, n_k)        # (Bc, d)
        s = (qb @ kb.T) * np.float32(qk_scale)                   # (Br, Bc), log2 units
        if start_n >= full_end:                                  # the masked blocks
            allowed = cols[None, :] < n_k
            if causal:
                allowed = allowed & (cols[None, :] <= offs_m[:, None])
            s = np.where(allowed, s, -np.inf)
        m_new = np.maximum(m_i, s.max(axis=1))
        p = np.exp2(s - m_new[:, None])
        alpha = np.exp2(m_i - m_new)
        l_i = l_i * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None] + p @ vb
        m_i = m_new
    lse = (m_i + np.log2(l_i)) * np.float32(LN2)
    return acc / l_i[:, None], lse
    # SOLUTION END
