import numpy as np


def backward(q, k, v, o, lse, do, mask=None, causal=False, block_q=16, block_k=16):
    # SOLUTION BEGIN
    # """Gradients of o = softmax(scale · q kᵀ) v, recomputing P tile by tile (float64).  STARTER
# STARTER
    # q (Nq, d), k (Nk, d), v (Nk, dv), o (Nq, dv), lse (Nq,), do (Nq, dv) -> dq, dk, dv  STARTER
    # mask/causal as in the forward. Rows with lse = -inf (no allowed key) get zero gradients.  STARTER
    # """  STARTER
    # SOLUTION END
    n_q, d = q.shape
    n_k = k.shape[0]
    scale = 1.0 / np.sqrt(d)
    # SOLUTION BEGIN
    # D = None  # TODO: D = rowsum(dO ∘ O), shape (Nq,)  STARTER
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), (n_q, n_k))
    D = (do * o).sum(axis=1)                     # (Nq,) = rowsum(dO ∘ O) = rowsum(P ∘ dP)
    seen = np.isfinite(lse)                      # rows with at least one allowed key
    lse_safe = np.where(seen, lse, 0.0)
    # SOLUTION END
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for k0 in range(0, n_k, block_k):
        k1 = min(k0 + block_k, n_k)
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            # SOLUTION BEGIN
            # # TODO: recompute S and P = exp(S - lse) for this tile (masked entries -> 0),  STARTER
            # #       then dV_j += Pᵀ dO_i, dP = dO_i V_jᵀ, dS = P ∘ (dP - D_i),  STARTER
            # #       dQ_i += scale · dS K_j, dK_j += scale · dSᵀ Q_i  STARTER
            # raise NotImplementedError("backward: one (query tile, key tile) pair")  STARTER
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
            # SOLUTION END
    return dq, dk, dv
