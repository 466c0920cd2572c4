"""Named wrong answers of the backward exercise: each row changes its step's solution and names the
checks that must fail (``fails=None``: every graded check). One generic test runs them all
(tests/exercises/test_wrong_answers.py); a row's name is its test id, so adding a row renames
nothing. ``old`` must occur exactly once in the solution (a tuple: several places at once).
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

# the backward with the whole (Nq, Nk) P at once
DENSE_BACKWARD = """\
    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled
    allowed = np.isfinite(lse)[:, None] & np.ones(s.shape, bool)
    if mask is not None:
        allowed = allowed & np.broadcast_to(mask, s.shape)
    if causal:
        allowed = allowed & (np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None])
    p = np.where(allowed, np.exp(np.where(allowed, s, 0) - np.where(np.isfinite(lse), lse, 0)[:, None]), 0)
    dp = do @ v.T
    ds = p * (dp - (do * o).sum(axis=1)[:, None])
    scale = 1 / np.sqrt(q.shape[1])
    return scale * ds @ k, scale * ds.T @ q, p.T @ do
"""

# one query row at a time against all Nk keys (masks, empty rows and float16 handled)
ONE_ROW_FORWARD = """\
    full = None if mask is None else np.broadcast_to(mask, (q.shape[0], k.shape[0]))
    acc = np.float32 if q.dtype.itemsize < 4 else q.dtype
    o, lse = np.zeros((q.shape[0], v.shape[1]), acc), np.full(q.shape[0], -np.inf, acc)
    for i in range(q.shape[0]):                             # one query row against ALL keys
        s = k.astype(acc) @ q[i].astype(acc) / np.sqrt(q.shape[1])   # (Nk,)
        allowed = np.ones(k.shape[0], bool) if full is None else full[i]
        if causal:
            allowed = allowed & (np.arange(k.shape[0]) <= i)
        if not allowed.any():
            continue
        s = np.where(allowed, s, -np.inf)
        m = s.max()
        p = np.exp(s - m)
        o[i] = p @ v.astype(acc) / p.sum()
        lse[i] = m + np.log(p.sum())
    return o.astype(q.dtype), lse
"""

# the backward one query row at a time against all Nk keys
ONE_ROW_BACKWARD = """\
    scale = 1 / np.sqrt(q.shape[1])
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    full = None if mask is None else np.broadcast_to(mask, (q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):                             # one query row against ALL keys
        if not np.isfinite(lse[i]):
            continue
        allowed = np.ones(k.shape[0], bool) if full is None else full[i]
        if causal:
            allowed = allowed & (np.arange(k.shape[0]) <= i)
        p = np.where(allowed, np.exp(scale * (k @ q[i]) - lse[i]), 0.0)    # (Nk,)
        ds = p * (v @ do[i] - do[i] @ o[i])
        dv += p[:, None] * do[i]
        dq[i] = scale * ds @ k
        dk += scale * ds[:, None] * q[i]
    return dq, dk, dv
"""

WRONG_ANSWERS = [
    Wrong('o-not-in-q-dtype', 'harden',
          'return o.astype(q.dtype), lse',
          'return o, lse',
          fails=['float16']),
    Wrong('shift-by-minus-inf', 'harden',
          'shift = np.where(np.isfinite(m_new), m_new, 0).astype(acc_dtype)',
          'shift = m_new',
          fails=['empty-rows']),
    Wrong('key-tile-off-by-one', 'harden',
          'k1 = min(k0 + block_k, n_k)',
          'k1 = k0 + block_k - 1',
          fails=['padding', 'plain', 'ragged']),
    Wrong('ds-without-D', 'scratch',
          'ds = p * (dp - D[q0:q1, None])',
          'ds = p * dp',
          fails=['empty-rows', 'finite-diff', 'masks', 'reference']),
    Wrong('dq-without-scale', 'scratch',
          'dq[q0:q1] += scale * ds @ k[k0:k1]',
          'dq[q0:q1] += ds @ k[k0:k1]',
          fails=['empty-rows', 'finite-diff', 'masks', 'reference']),
    Wrong('calls-reference', 'harden',
          '    n_q, d = q.shape\n',
          '    from nlpcore.kernels.reference import forward as f\n    return f(q, k, v, causal=causal, mask=mask)\n    n_q, d = q.shape\n',
          fails=None),
    Wrong('calls-reference-backward', 'scratch',
          '    n_q, d = q.shape\n',
          '    from nlpcore.kernels import reference\n    return reference.backward(q, k, v, o, lse, do, causal=causal, mask=mask)\n    n_q, d = q.shape\n',
          fails=None),
    Wrong('full-score-matrix', 'harden',
          '    n_q, d = q.shape\n',
          '    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled\n    if causal:\n        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)\n    m = s.max(axis=1, keepdims=True)\n    p = np.exp(s - m)\n    l = p.sum(axis=1, keepdims=True)\n    if mask is not None:\n        pass\n    return p @ v / l, (m + np.log(l))[:, 0]\n    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('dense-backward', 'scratch',
          '    n_q, d = q.shape\n',
          DENSE_BACKWARD + '    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('float16-accumulation', 'harden',
          ('acc_dtype = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype', 'return o.astype(q.dtype), lse'),
          ('acc_dtype = q.dtype', 'return o.astype(q.dtype), lse.astype(np.float32)'),
          fails=['float16']),
    Wrong('one-row-against-all-keys', 'harden',
          '    n_q, d = q.shape\n',
          ONE_ROW_FORWARD + '    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('one-row-against-all-keys', 'scratch',
          '    n_q, d = q.shape\n',
          ONE_ROW_BACKWARD + '    n_q, d = q.shape\n',
          fails=['tiled']),
]
