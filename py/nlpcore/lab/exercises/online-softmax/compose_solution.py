import numpy as np


def attention(q, k, v, block_q, block_k, causal=False):
    # SOLUTION BEGIN
    # """Tiled exact attention, one query tile at a time, streaming over key tiles.  STARTER
# STARTER
    # q (Nq, d), k (Nk, d), v (Nk, dv) -> o (Nq, dv), lse (Nq,)   [float64]  STARTER
    # scale = 1/sqrt(d); causal: query i may attend key j iff j <= i.  STARTER
    # """  STARTER
    # SOLUTION END
    n_q, d = q.shape
    n_k, dv = v.shape
    scale = 1.0 / np.sqrt(d)
    o = np.zeros((n_q, dv))
    lse = np.full(n_q, -np.inf)
    for q0 in range(0, n_q, block_q):
        q1 = min(q0 + block_q, n_q)
        # SOLUTION BEGIN
        # m = np.full(q1 - q0, -np.inf)      # running max per row of this query tile  STARTER
        # l = np.zeros(q1 - q0)              # running sum of exp(s - m)  STARTER
        # acc = np.zeros((q1 - q0, dv))      # running, unnormalised output  STARTER
        m = np.full(q1 - q0, -np.inf)
        l = np.zeros(q1 - q0)
        acc = np.zeros((q1 - q0, dv))
        # SOLUTION END
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            # SOLUTION BEGIN
            # s = scale * q[q0:q1] @ k[k0:k1].T          # (rows, cols) scores of this tile  STARTER
            # # TODO: apply the causal mask, update m, rescale l and acc, add this tile.  STARTER
            # raise NotImplementedError("attention: update (m, l, acc) for one key tile")  STARTER
        # # TODO: normalise acc by l and write o[q0:q1], lse[q0:q1].  STARTER
            if causal and k0 > q1 - 1:
                break                                   # every later tile is above the diagonal
            s = scale * q[q0:q1] @ k[k0:k1].T           # (rows, cols)
            if causal:
                rows = np.arange(q0, q1)[:, None]
                cols = np.arange(k0, k1)[None, :]
                s = np.where(cols <= rows, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            p = np.exp(s - shift[:, None])             # (rows, cols)
            alpha = np.exp(m - shift)                  # rescales what was summed so far
            l = alpha * l + p.sum(axis=1)
            acc = alpha[:, None] * acc + p @ v[k0:k1]
            m = m_new
        seen = l > 0
        o[q0:q1] = np.where(seen[:, None], acc / np.where(seen, l, 1.0)[:, None], 0.0)
        lse[q0:q1] = np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf)
            # SOLUTION END
    return o, lse
