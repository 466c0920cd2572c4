import numpy as np


def backward(q, k, v, o, lse, do, mask=None, causal=False, block_q=16, block_k=16):
    n_q, d = q.shape
    n_k = k.shape[0]
    scale = 1.0 / np.sqrt(d)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), (n_q, n_k))
    D = (do * o).sum(axis=1)                     # (Nq,) = rowsum(dO ∘ O) = rowsum(P ∘ dP)
    seen = np.isfinite(lse)                      # rows with at least one allowed key
    lse_safe = np.where(seen, lse, 0.0)
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for k0 in range(0, n_k, block_k):
        k1 = min(k0 + block_k, n_k)
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            s = scale * q[q0:q1] @ k[k0:k1].T                         # (rows, cols)
            allowed = np.broadcast_to(seen[q0:q1, None], s.shape)
            if mask is not None:
                allowed = allowed & mask[q0:q1, k0:k1]
            if causal:
                allowed = allowed & (np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None])
            p = np.where(allowed, np.exp(np.where(allowed, s, 0.0) - lse_safe[q0:q1, None]), 0.0)
            dv[k0:k1] += p.T @ do[q0:q1]
            dp = do[q0:q1] @ v[k0:k1].T
            ds = p * (dp - D[q0:q1, None])
            dq[q0:q1] += scale * ds @ k[k0:k1]
            dk[k0:k1] += scale * ds.T @ q[q0:q1]
    return dq, dk, dv
