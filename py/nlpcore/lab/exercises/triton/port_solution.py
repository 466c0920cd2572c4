import numpy as np

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal):
    m0 = pid_m * BLOCK_M
    if causal:
        end = min(m0 + BLOCK_M, n_k)
        full_end = min(m0, n_k) // BLOCK_N * BLOCK_N
    else:
        end = n_k
        full_end = n_k // BLOCK_N * BLOCK_N
    return full_end, end


def _load(x, rows, n):
    """tl.load(ptrs, mask=rows < n, other=0): out-of-range rows read as zeros."""
    out = np.zeros((len(rows), x.shape[1]), dtype=np.float32)
    ok = rows < n
    out[ok] = x[rows[ok]]
    return out


def program(q, k, v, pid_m, BLOCK_M, BLOCK_N, causal, qk_scale):
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
