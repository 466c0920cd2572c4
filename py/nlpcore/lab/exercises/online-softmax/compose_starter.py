import numpy as np


def attention(q, k, v, block_q, block_k, causal=False):
    """Tiled exact attention, one query tile at a time, streaming over key tiles.

    q (Nq, d), k (Nk, d), v (Nk, dv) -> o (Nq, dv), lse (Nq,)   [float64]
    scale = 1/sqrt(d); causal: query i may attend key j iff j <= i.
    """
    n_q, d = q.shape
    n_k, dv = v.shape
    scale = 1.0 / np.sqrt(d)
    o = np.zeros((n_q, dv))
    lse = np.full(n_q, -np.inf)
    for q0 in range(0, n_q, block_q):
        q1 = min(q0 + block_q, n_q)
        m = np.full(q1 - q0, -np.inf)      # running max per row of this query tile
        l = np.zeros(q1 - q0)              # running sum of exp(s - m)
        acc = np.zeros((q1 - q0, dv))      # running, unnormalised output
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)
            s = scale * q[q0:q1] @ k[k0:k1].T          # (rows, cols) scores of this tile
            # TODO: apply the causal mask, update m, rescale l and acc, add this tile.
            raise NotImplementedError("attention: update (m, l, acc) for one key tile")
        # TODO: normalise acc by l and write o[q0:q1], lse[q0:q1].
    return o, lse
