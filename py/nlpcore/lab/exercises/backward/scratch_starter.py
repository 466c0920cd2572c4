import numpy as np


def backward(q, k, v, o, lse, do, mask=None, causal=False, block_q=16, block_k=16):
    """Gradients of o = softmax(scale · q kᵀ) v, recomputing P tile by tile (float64).

    q (Nq, d), k (Nk, d), v (Nk, dv), o (Nq, dv), lse (Nq,), do (Nq, dv) -> dq, dk, dv
    mask/causal as in the forward. Rows with lse = -inf (no allowed key) get zero gradients.
    """
    n_q, d = q.shape
    n_k = k.shape[0]
    scale = 1.0 / np.sqrt(d)
    D = None  # TODO: D = rowsum(dO ∘ O), shape (Nq,)
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for k0 in range(0, n_k, block_k):
        k1 = min(k0 + block_k, n_k)
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            # TODO: recompute S and P = exp(S - lse) for this tile (masked entries -> 0),
            #       then dV_j += Pᵀ dO_i, dP = dO_i V_jᵀ, dS = P ∘ (dP - D_i),
            #       dQ_i += scale · dS K_j, dK_j += scale · dSᵀ Q_i
            raise NotImplementedError("backward: one (query tile, key tile) pair")
    return dq, dk, dv
