"""Naive attention: materialise S and P, then multiply. The oracle for every other kernel.

    S = scale · Q Kᵀ            (..., Nq, Nk)
    P = softmax(S) row-wise      (..., Nq, Nk)   masked entries of S are -inf, so P is 0 there
    O = P V                      (..., Nq, dv)
    lse = log Σ_j exp(S_ij)      (..., Nq)       natural log, of the *scaled* scores

This is what the FlashAttention paper calls "standard attention" (its Algorithm 0): it writes
the N×N matrices S and P to memory, which is exactly the memory traffic FlashAttention avoids.
Here it is the readable, trustworthy definition the tiled kernels are checked against.

Precision: float64 inputs are computed in float64; float32 in float32; float16 (and other
16-bit floats) in float32, with outputs cast back to the input dtype.

Dropout: given a keep-mask (bool, broadcastable to (..., Nq, Nk)) and the drop probability p,
O = (P ∘ keep / (1 − p)) V, with lse still that of the undropped P. The mask is an input here (the
tiled kernels draw theirs; ``flash_np.keep_mask`` returns it), so a test applies one mask to both.

A row whose every key is masked has no softmax: we define its output as o = 0, lse = -inf and
its gradients as 0 — the convention FlashAttention-style kernels use — and never produce NaN.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from ._checks import allowed_tile, attention_inputs, check_backward_inputs, unbroadcast
from .dropout import check_dropout


def _probabilities(x):
    """P (..., Nq, Nk) and lse (..., Nq) computed directly from the definition."""
    acc = x.acc
    s = np.matmul(x.q.astype(acc), np.swapaxes(x.k.astype(acc), -1, -2)) * acc.type(x.scale)  # (..., Nq, Nk)
    allowed = allowed_tile(x, (0, s.shape[-2]), (0, s.shape[-1]))  # the whole matrix is one tile
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)  # (..., Nq, 1); -inf for a fully masked row
    m = np.where(np.isfinite(m), m, 0)  # shift by 0 there, so exp(-inf - 0) = 0, not NaN
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)  # (..., Nq, 1); 0 for a fully masked row
    p = np.divide(p, l, out=np.zeros_like(p), where=l > 0)
    lse = np.full(l.shape, -np.inf, dtype=acc)
    np.log(l, out=lse, where=l > 0)
    lse = (lse + m)[..., 0]  # (..., Nq)
    return p, lse


def _keep_scale(x, keep, dropout_p):
    """keep / (1 − p) broadcast to (..., Nq, Nk) in the accumulation dtype, or None (no dropout)."""
    if keep is None:
        return None
    p, _ = check_dropout(dropout_p, 0)
    keep = np.asarray(keep)
    if keep.dtype != np.bool_:
        raise TypeError("keep must be a boolean array (True = entry kept), got dtype {}".format(keep.dtype))
    want = x.batch + (x.q.shape[-2], x.k.shape[-2])
    try:
        keep = np.broadcast_to(keep, want)
    except ValueError:
        raise ValueError("keep must broadcast to (..., Nq, Nk) = {}, got shape {}".format(want, keep.shape)) from None
    return keep.astype(x.acc) / x.acc.type(1.0 - p)


def forward(
    q, k, v, *, causal: bool = False, mask=None, scale=None, keep=None, dropout_p: float = 0.0
) -> Tuple[np.ndarray, np.ndarray]:
    """O = softmax(scale · Q Kᵀ + mask) V, the plain way.

    Args:
        q: (..., Nq, d) queries.
        k: (..., Nk, d) keys.
        v: (..., Nk, dv) values. Leading axes of q, k, v (and mask) broadcast.
        causal: if True, query i may attend key j only when j <= i (top-left aligned).
        mask: optional boolean array broadcastable to (..., Nq, Nk); True = may attend.
            A key-padding mask has shape (..., 1, Nk).
        scale: score scale, default 1/sqrt(d).
        keep: optional dropout keep-mask, bool broadcastable to (..., Nq, Nk) (True = kept).
        dropout_p: the drop probability in [0, 1) that ``keep`` was drawn with (sets 1 / (1 − p)).

    Returns:
        o: (..., Nq, dv) in q's dtype; rows with no allowed key are 0. With ``keep``,
            o = (P ∘ keep / (1 − p)) V.
        lse: (..., Nq) log-sum-exp of the scaled scores, in the accumulation dtype
            (float32 for 16-bit inputs); -inf for rows with no allowed key.
    """
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    z = _keep_scale(x, keep, dropout_p)
    p, lse = _probabilities(x)
    if z is not None:
        p = p * z  # P̃ = P ∘ keep / (1 − p)
    o = np.matmul(p, x.v.astype(x.acc))  # (..., Nq, dv)
    return o.astype(np.asarray(q).dtype), lse


def backward(
    q, k, v, o, lse, do, *, causal: bool = False, mask=None, scale=None, keep=None, dropout_p: float = 0.0
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of O = softmax(scale · Q Kᵀ) V with respect to q, k and v, the plain way.

    P is recomputed from q and k (``o`` and ``lse`` are only shape-checked, so this oracle does
    not trust the kernel under test). With dP = dO Vᵀ:

        dV = Pᵀ dO
        dS = P ∘ (dP − rowsum(P ∘ dP))        the softmax Jacobian, applied row by row
        dQ = scale · dS K,   dK = scale · dSᵀ Q

    With a keep-mask, Z = keep / (1 − p): dV = (P ∘ Z)ᵀ dO and dP = (dO Vᵀ) ∘ Z.

    Args:
        q, k, v, causal, mask, scale, keep, dropout_p: as in :func:`forward`.
        o: (..., Nq, dv) forward output; lse: (..., Nq) forward log-sum-exp.
        do: (..., Nq, dv) gradient of the loss with respect to o.

    Returns:
        dq (..., Nq, d), dk (..., Nk, d), dv (..., Nk, dv) with the shapes and dtypes of q, k, v
        (gradients of broadcast inputs are summed over the broadcast axes).
        Rows with no allowed key contribute nothing.
    """
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    _, _, do = check_backward_inputs(x, o, lse, do)
    z = _keep_scale(x, keep, dropout_p)
    acc = x.acc
    p, _ = _probabilities(x)  # (..., Nq, Nk)
    do = do.astype(acc)
    dp = np.matmul(do, np.swapaxes(x.v.astype(acc), -1, -2))  # (..., Nq, Nk)
    if z is None:
        dv = np.matmul(np.swapaxes(p, -1, -2), do)  # (..., Nk, dv)
    else:
        dv = np.matmul(np.swapaxes(p * z, -1, -2), do)  # (P ∘ Z)ᵀ dO
        dp = dp * z
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))  # (..., Nq, Nk)
    dq = np.matmul(ds, x.k.astype(acc)) * acc.type(x.scale)  # (..., Nq, d)
    dk = np.matmul(np.swapaxes(ds, -1, -2), x.q.astype(acc)) * acc.type(x.scale)  # (..., Nk, d)
    q, k, v = (np.asarray(t) for t in (q, k, v))
    return (
        unbroadcast(dq, q.shape).astype(q.dtype),
        unbroadcast(dk, k.shape).astype(k.dtype),
        unbroadcast(dv, v.shape).astype(v.dtype),
    )
