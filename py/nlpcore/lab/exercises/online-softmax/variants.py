"""Known wrong variants of the tiled forward, computed by the judge to name a likely mistake.

When a learner's o or lse misses the reference, the judge recomputes the case with each
plausible slip below and says which one the output matches (to the grader's tolerance). The
variants are written for that purpose only: plain NumPy, query tiles outside, key tiles inside.
"""
from __future__ import annotations

import numpy as np

# name -> (what the message says, keyword arguments of tiled())
VARIANTS = (
    ("l-not-rescaled", "the running sum ℓ is not rescaled by exp(m_old - m_new) when the max "
     "grows", dict(rescale_l=False)),
    ("acc-not-rescaled", "the running output acc is not rescaled by exp(m_old - m_new) when the "
     "max grows", dict(rescale_acc=False)),
    ("scale-1/d", "the scores are scaled by 1/d instead of 1/√d", dict(scale="1/d")),
    ("no-scale", "the scores are not scaled by 1/√d", dict(scale="1")),
    ("strict-causal", "the causal mask is strict (j < i): a query must also see its own key",
     dict(strict=True)),
    ("bottom-right-causal", "the causal mask is aligned bottom-right (j <= i + Nk - Nq); this lab "
     "aligns it top-left, as PyTorch's is_causal: j <= i", dict(bottom_right=True)),
    ("last-tile-lse", "lse is the log-sum-exp of the last key tile only: carry (m, ℓ) over all "
     "key tiles", dict(last_tile_lse=True)),
)


def tiled(q, k, v, block_q, block_k, causal, *, rescale_l=True, rescale_acc=True, scale=None,
          strict=False, bottom_right=False, last_tile_lse=False):
    """Tiled attention with the named slips switched on: o (Nq, dv), lse (Nq,)."""
    n_q, d = q.shape
    n_k, dv = v.shape
    factor = {None: 1.0 / np.sqrt(d), "1/d": 1.0 / d, "1": 1.0}[scale]
    o, lse = np.zeros((n_q, dv)), np.full(n_q, -np.inf)
    offset = (n_k - n_q) if bottom_right else 0
    with np.errstate(all="ignore"):
        for q0 in range(0, n_q, block_q):
            q1 = min(q0 + block_q, n_q)
            m, l, acc = np.full(q1 - q0, -np.inf), np.zeros(q1 - q0), np.zeros((q1 - q0, dv))
            last = (m, l)
            for k0 in range(0, n_k, block_k):
                k1 = min(k0 + block_k, n_k)
                s = factor * q[q0:q1] @ k[k0:k1].T                   # (rows, cols)
                if causal:
                    rows, cols = np.arange(q0, q1)[:, None] + offset, np.arange(k0, k1)[None, :]
                    s = np.where(cols < rows if strict else cols <= rows, s, -np.inf)
                m_new = np.maximum(m, s.max(axis=1))
                shift = np.where(np.isfinite(m_new), m_new, 0.0)
                p = np.exp(s - shift[:, None])
                alpha = np.exp(m - shift)
                l = (alpha if rescale_l else 1.0) * l + p.sum(axis=1)
                acc = (alpha[:, None] if rescale_acc else 1.0) * acc + p @ v[k0:k1]
                tile_max = s.max(axis=1)
                tile_shift = np.where(np.isfinite(tile_max), tile_max, 0.0)
                last = (tile_max, np.exp(s - tile_shift[:, None]).sum(axis=1))
                m = m_new
            seen = l > 0
            o[q0:q1] = np.where(seen[:, None], acc / np.where(seen, l, 1.0)[:, None], 0.0)
            m_out, l_out = last if last_tile_lse else (m, l)
            lse[q0:q1] = np.where(l_out > 0, m_out + np.log(np.where(l_out > 0, l_out, 1.0)),
                                  -np.inf)
    return o, lse


def likely_mistake(got, index, q, k, v, block_q, block_k, causal, close) -> str:
    """The description of the first variant whose output ``index`` (0: o, 1: lse) ``got``
    matches by ``close(got, want) -> bool``; "" when none does."""
    for _, text, kwargs in VARIANTS:
        if not causal and ("strict" in kwargs or "bottom_right" in kwargs):
            continue
        want = tiled(q, k, v, block_q, block_k, causal, **kwargs)[index]
        if close(got, want):
            return text
    return ""
