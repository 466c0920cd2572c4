"""Exercise ``backward``: harden a tiled forward, then write the recomputing backward.

Sources: Dao et al. 2022 (arXiv:2205.14135) Algorithm 2 and 4 and Appendix B.2 (the backward
pass recomputes P from Q, K and the saved statistics); Dao 2023 FlashAttention-2
(arXiv:2307.08691), which saves lse = m + log ℓ instead of ℓ and m, and precomputes
D = rowsum(dO ∘ O).
"""
from __future__ import annotations

import numpy as np

from nlpcore.kernels import reference
from nlpcore.lab.framework import (Folder, CheckFailed, Check, Exercise, Step, assert_close, call_learner,
                        flash_bar, rng, shapes_of)

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions


def _call_forward(ns, q, k, v, context="", **kw):
    shapes = shapes_of(q=q, k=k, v=v)
    if kw.get("mask") is not None:
        shapes["mask"] = list(np.shape(kw["mask"]))
    out = call_learner(ns["forward"], q.copy(), k.copy(), v.copy(), shapes=shapes,
                       context=context, **kw)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise CheckFailed("forward must return (o, lse)", expected="(o, lse)",
                          got=type(out).__name__)
    return out


def _forward_case(label, n_q, n_k, d, dv, mask=None, causal=False, block_q=16, block_k=16,
                  seed=0):
    def run(ns):
        r = rng(seed)
        q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
        m = None if mask is None else mask(n_q, n_k)
        want_o, want_lse = reference.forward(q, k, v, causal=causal, mask=m)
        ctx = "%s, blocks %d×%d" % (label, block_q, block_k)
        o, lse = _call_forward(ns, q, k, v, context=ctx, mask=m, causal=causal,
                               block_q=block_q, block_k=block_k)
        shapes = shapes_of(q=q, k=k, v=v)
        if m is not None:
            shapes["mask"] = list(m.shape)
        err = assert_close("o", o, want_o, shapes=shapes, dtype="float64", context=ctx)
        err = max(err, assert_close("lse", lse, want_lse, shapes=shapes, dtype="float64",
                                    context=ctx))
        return "%s: max |Δ| = %.2g (float64)" % (label, err)
    return run


def _padding(n_q, n_k):
    m = np.ones((1, n_k), dtype=bool)          # key-padding mask (1, Nk): last 11 keys padded
    m[0, n_k - 11:] = False
    return m


def _empty_rows(n_q, n_k):
    m = rng(5).rand(n_q, n_k) < 0.7
    m[[0, 7, n_q - 1]] = False                 # three queries may attend nothing
    m[[20, 21], :16] = False                   # two see nothing in the first key tile
    return m


def _check_float16(ns):
    r = rng(7)
    n_q, n_k, d = 48, 64, 32
    q, k, v = (r.randn(n, d).astype(np.float16) for n in (n_q, n_k, n_k))
    q = (q * 2).astype(np.float16)             # sharper softmax, larger scores
    shapes = shapes_of(q=q, k=k, v=v)
    o, lse = _call_forward(ns, q, k, v, context="float16 inputs, blocks 16×16", block_q=16,
                           block_k=16)
    o_arr, lse_arr = np.asarray(o), np.asarray(lse)
    if o_arr.dtype != np.float16:
        raise CheckFailed("o must have q's dtype", expected="o.dtype = float16",
                          got="o.dtype = %s" % o_arr.dtype, shapes=shapes)
    if lse_arr.dtype.kind != "f" or lse_arr.dtype.itemsize < 4:
        raise CheckFailed("lse must be kept in the accumulation dtype (at least float32)",
                          expected="lse.dtype = float32", got="lse.dtype = %s" % lse_arr.dtype,
                          shapes=shapes)
    want_o, want_lse = reference.forward(q.astype(np.float64), k.astype(np.float64),
                                         v.astype(np.float64))
    naive_o, naive_lse = _naive_half(q, k, v)
    err_o = flash_bar("o", o_arr, want_o, naive_o, shapes=shapes, context="float16 inputs")
    err_l = flash_bar("lse", lse_arr, want_lse, naive_lse, shapes=shapes,
                      context="float16 inputs")
    return ("o float16, lse %s; max |Δ| vs float64: o %.2g, lse %.2g (bar: 2× plain float16 "
            "attention + 1e-3)" % (lse_arr.dtype, err_o, err_l))


def _naive_half(q, k, v):
    """Plain attention computed entirely in float16 (the low-precision baseline)."""
    s = (q @ k.T) * np.float16(1.0 / np.sqrt(q.shape[-1]))     # float16 (Nq, Nk)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True, dtype=np.float16)
    o = (p / l) @ v
    lse = (m + np.log(l))[:, 0]
    return o, lse


# ------------------------------------------------------------------------------------------
# Backward
# ------------------------------------------------------------------------------------------

def _call_backward(ns, q, k, v, o, lse, do, context="", **kw):
    shapes = shapes_of(q=q, k=k, v=v, do=do)
    if kw.get("mask") is not None:
        shapes["mask"] = list(np.shape(kw["mask"]))
    out = call_learner(ns["backward"], q.copy(), k.copy(), v.copy(), np.array(o), np.array(lse),
                       do.copy(), shapes=shapes, context=context, **kw)
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise CheckFailed("backward must return (dq, dk, dv)", expected="(dq, dk, dv)",
                          got=type(out).__name__)
    return out


def _backward_case(label, n_q, n_k, d, dv, mask=None, causal=False, block_q=16, block_k=16,
                   seed=0, zero_rows=False):
    def run(ns):
        r = rng(seed)
        q, k, v, do = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv), r.randn(n_q, dv)
        m = None if mask is None else mask(n_q, n_k)
        o, lse = reference.forward(q, k, v, causal=causal, mask=m)
        want = reference.backward(q, k, v, o, lse, do, causal=causal, mask=m)
        ctx = "%s, blocks %d×%d" % (label, block_q, block_k)
        got = _call_backward(ns, q, k, v, o, lse, do, context=ctx, mask=m, causal=causal,
                             block_q=block_q, block_k=block_k)
        shapes = shapes_of(q=q, k=k, v=v, do=do)
        if m is not None:
            shapes["mask"] = list(m.shape)
        err = 0.0
        for name, g, w in zip(("dq", "dk", "dv"), got, want):
            err = max(err, assert_close(name, g, w, shapes=shapes, dtype="float64", context=ctx))
        if zero_rows:
            empty = ~np.isfinite(lse)
            dq = np.asarray(got[0])
            if np.abs(dq[empty]).max() != 0:
                raise CheckFailed("rows with no allowed key must get dq = 0", shapes=shapes,
                                  expected="0", got="%.3g" % np.abs(dq[empty]).max())
        return "%s: max |Δ| = %.2g against reference.backward (float64)" % (label, err)
    return run


def _check_finite_differences(ns):
    """Gradients of loss = Σ o ∘ w against central differences of the naive forward."""
    r = rng(11)
    n_q, n_k, d, dv = 5, 6, 3, 2
    q, k, v, w = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv), r.randn(n_q, dv)
    shapes = shapes_of(q=q, k=k, v=v)
    o, lse = reference.forward(q, k, v, causal=True)
    got = _call_backward(ns, q, k, v, o, lse, w, context="Nq=5, Nk=6, d=3, causal, blocks 2×4",
                         causal=True, block_q=2, block_k=4)
    eps = 1e-6
    args = {"q": q, "k": k, "v": v}
    worst = 0.0
    for (name, x), g in zip(args.items(), got):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            plus, minus = dict(args), dict(args)
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps
            xm[idx] -= eps
            plus[name], minus[name] = xp, xm
            f_plus = (reference.forward(plus["q"], plus["k"], plus["v"], causal=True)[0] * w).sum()
            f_minus = (reference.forward(minus["q"], minus["k"], minus["v"], causal=True)[0] * w).sum()
            numeric[idx] = (f_plus - f_minus) / (2 * eps)
        worst = max(worst, assert_close("d" + name, g, numeric, shapes=shapes, dtype="float64",
                                        atol=1e-6, rtol=1e-5,
                                        context="central differences, eps = 1e-6, causal"))
    return "matches central differences of the naive forward: max |Δ| = %.2g" % worst


def build() -> Exercise:
    harden = Step(
        id="harden", kind="Harden", title="Harden a tiled forward", minutes=30,
        statement=HERE.statement("harden"),
        starter=HERE.starter("harden"), solution=HERE.solution("harden"),
        hints=(
            "Ragged: clamp `q1 = min(q0 + block_q, n_q)` and loop keys over "
            "`range(0, n_k, block_k)` with `k1 = min(...)`; size `m`, `l`, `acc` by `q1 - q0`.",
            "Empty rows: shift by `np.where(np.isfinite(m_new), m_new, 0)`; at the end, where "
            "`l == 0` write 0 to o and -inf to lse.",
            "float16: cast q, k, v to float32 before the matmuls and `o.astype(q.dtype)` at the "
            "end; keep lse in float32.",
        ),
        required=("forward",),
        checks=(
            Check("plain", "happy path: N multiple of blocks",
                  _forward_case("Nq=32, Nk=48, d=16", 32, 48, 16, 16, seed=1)),
            Check("ragged", "ragged blocks",
                  _forward_case("Nq=37, Nk=53, d=16, dv=8", 37, 53, 16, 8, seed=2)),
            Check("padding", "key-padding mask (1, Nk)",
                  _forward_case("Nq=32, Nk=48, last 11 keys padded", 32, 48, 16, 16,
                                mask=_padding, seed=3)),
            Check("empty-rows", "empty rows give o = 0, lse = -inf (no NaN)",
                  _forward_case("Nq=32, Nk=48, random mask, 3 empty rows, 2 rows with an empty first tile, causal", 32, 48,
                                8, 8, mask=_empty_rows, causal=True, seed=4)),
            Check("float16", "float16 inputs: dtype and accuracy bar", _check_float16),
        ))
    scratch = Step(
        id="scratch", kind="Scratch", title="The recomputing backward", minutes=45,
        statement=HERE.statement("scratch"),
        starter=HERE.starter("scratch"), solution=HERE.solution("scratch"),
        hints=(
            "`D = (do * o).sum(axis=1)`. Why is it equal to rowsum(P ∘ dP)? Because "
            "$O = PV$, so $\\sum_j P_{ij} (dO_i \\cdot V_j) = dO_i \\cdot O_i$.",
            "Masked entries (mask, causal, or a row whose lse is -inf) must give P = 0: build a "
            "boolean `allowed` for the tile and use `np.where(allowed, np.exp(...), 0)`, taking "
            "the exp of a safe value where not allowed.",
            "Loop keys outside, queries inside (the paper's Algorithm 4): dK_j, dV_j accumulate over i; "
            "dQ_i accumulates over j.",
        ),
        required=("backward",),
        checks=(
            Check("reference", "matches reference.backward on ragged sizes",
                  _backward_case("Nq=37, Nk=29, d=8, dv=6", 37, 29, 8, 6, block_q=16,
                                 block_k=8, seed=21)),
            Check("masks", "causal + key padding",
                  _backward_case("Nq=Nk=40, d=8, causal, last 11 keys padded", 40, 40, 8, 8,
                                 mask=_padding, causal=True, seed=22)),
            Check("empty-rows", "rows with no key: zero gradients, no NaN",
                  _backward_case("Nq=30, Nk=40, 3 empty rows", 30, 40, 8, 8,
                                 mask=_empty_rows, seed=23, zero_rows=True)),
            Check("finite-diff", "matches finite differences", _check_finite_differences),
        ))
    return Exercise(
        id="backward", title="Backward pass: harden, then recompute",
        tier="browser", minutes=75,
        summary=("Make a tiled forward survive padding masks, empty rows, ragged blocks and "
                 "float16, then write the backward pass that recomputes P with "
                 "D = rowsum(dO∘O)."),
        steps=(harden, scratch),
        sources=("Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithms 2 and 4, "
                 "Appendix B)",
                 "Dao 2023, FlashAttention-2, arXiv:2307.08691 (D = rowsum(dO∘O), lse only)"))
