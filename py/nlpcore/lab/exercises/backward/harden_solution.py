import numpy as np


def forward(q, k, v, mask=None, causal=False, block_q=16, block_k=16):
    # SOLUTION BEGIN
    # """Tiled attention forward. Works on the happy path; harden it.  STARTER
# STARTER
    # q (Nq, d), k (Nk, d), v (Nk, dv); mask: bool, broadcastable to (Nq, Nk), True = may attend  STARTER
    # (a key-padding mask is (1, Nk)); causal: query i may attend key j iff j <= i.  STARTER
    # Returns o (Nq, dv) in q's dtype and lse (Nq,) in the accumulation dtype.  STARTER
    # """  STARTER
    # SOLUTION END
    n_q, d = q.shape
    n_k, dv = v.shape
    # SOLUTION BEGIN
    # scale = 1.0 / np.sqrt(d)  STARTER
    # o = np.zeros((n_q, dv))  STARTER
    # lse = np.zeros(n_q)  STARTER
    acc_dtype = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype     # float16 accumulates in float32
    qa, ka, va = (np.asarray(x, dtype=acc_dtype) for x in (q, k, v))  # no copy when already acc_dtype
    scale = acc_dtype.type(1.0 / np.sqrt(d))
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), (n_q, n_k))   # (1, Nk) padding -> (Nq, Nk)
    o = np.zeros((n_q, dv), dtype=acc_dtype)
    lse = np.full(n_q, -np.inf, dtype=acc_dtype)
    # SOLUTION END
    for q0 in range(0, n_q, block_q):
        # SOLUTION BEGIN
        # q1 = q0 + block_q  STARTER
        # m = np.full(block_q, -np.inf)  STARTER
        # l = np.zeros(block_q)  STARTER
        # acc = np.zeros((block_q, dv))  STARTER
        # for k0 in range(0, n_k - block_k + 1, block_k):  STARTER
            # k1 = k0 + block_k  STARTER
            # s = scale * q[q0:q1] @ k[k0:k1].T  STARTER
        q1 = min(q0 + block_q, n_q)                                 # ragged last query tile
        m = np.full(q1 - q0, -np.inf, dtype=acc_dtype)
        l = np.zeros(q1 - q0, dtype=acc_dtype)
        acc = np.zeros((q1 - q0, dv), dtype=acc_dtype)
        for k0 in range(0, n_k, block_k):
            k1 = min(k0 + block_k, n_k)                             # ragged last key tile
            s = scale * (qa[q0:q1] @ ka[k0:k1].T)
        # SOLUTION END
            if mask is not None:
                s = np.where(mask[q0:q1, k0:k1], s, -np.inf)
            if causal:
                s = np.where(np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=1))
            # SOLUTION BEGIN
            # p = np.exp(s - m_new[:, None])  STARTER
            # alpha = np.exp(m - m_new)  STARTER
            shift = np.where(np.isfinite(m_new), m_new, 0).astype(acc_dtype)   # no exp(-inf + inf)
            p = np.exp(s - shift[:, None])
            alpha = np.exp(m - shift)
            # SOLUTION END
            l = alpha * l + p.sum(axis=1)
            # SOLUTION BEGIN
            # acc = alpha[:, None] * acc + p @ v[k0:k1]  STARTER
            acc = alpha[:, None] * acc + p @ va[k0:k1]
            # SOLUTION END
            m = m_new
        # SOLUTION BEGIN
        # o[q0:q1] = acc / l[:, None]  STARTER
        # lse[q0:q1] = m + np.log(l)  STARTER
    # return o, lse  STARTER
        seen = l > 0                                                # rows with at least one key
        safe_l = np.where(seen, l, 1)
        o[q0:q1] = np.where(seen[:, None], acc / safe_l[:, None], 0)
        lse[q0:q1] = np.where(seen, m + np.log(safe_l), -np.inf)
    return o.astype(q.dtype), lse
        # SOLUTION END
