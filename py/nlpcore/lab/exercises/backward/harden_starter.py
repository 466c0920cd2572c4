import numpy as np


def forward(q, k, v, mask=None, causal=False, block_q=16, block_k=16):
    """Tiled attention forward. Works on the happy path; harden it.

    q (Nq, d), k (Nk, d), v (Nk, dv); mask: bool, broadcastable to (Nq, Nk), True = may attend
    (a key-padding mask is (1, Nk)); causal: query i may attend key j iff j <= i.
    Returns o (Nq, dv) in q's dtype and lse (Nq,) in the accumulation dtype.
    """
    n_q, d = q.shape
    n_k, dv = v.shape
    scale = 1.0 / np.sqrt(d)
    o = np.zeros((n_q, dv))
    lse = np.zeros(n_q)
    for q0 in range(0, n_q, block_q):
        q1 = q0 + block_q
        m = np.full(block_q, -np.inf)
        l = np.zeros(block_q)
        acc = np.zeros((block_q, dv))
        for k0 in range(0, n_k - block_k + 1, block_k):
            k1 = k0 + block_k
            s = scale * q[q0:q1] @ k[k0:k1].T
            if mask is not None:
                s = np.where(mask[q0:q1, k0:k1], s, -np.inf)
            if causal:
                s = np.where(np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=1))
            p = np.exp(s - m_new[:, None])
            alpha = np.exp(m - m_new)
            l = alpha * l + p.sum(axis=1)
            acc = alpha[:, None] * acc + p @ v[k0:k1]
            m = m_new
        o[q0:q1] = acc / l[:, None]
        lse[q0:q1] = m + np.log(l)
    return o, lse
