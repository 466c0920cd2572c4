"""Exercise ``backward``: harden a tiled forward, then write the recomputing backward.

Sources: Dao et al. 2022 (arXiv:2205.14135) Algorithm 2 and 4 and Appendix B.2 (the backward
pass recomputes P from Q, K and the saved statistics); Dao 2023 FlashAttention-2
(arXiv:2307.08691), which saves lse = m + log ℓ instead of ℓ and m, and precomputes
D = rowsum(dO ∘ O).
"""
from __future__ import annotations

import importlib

import numpy as np

from nlpcore.kernels import flash_np, reference
from nlpcore.lab import working_set
from nlpcore.lab.judging import (assert_close, is_close, call_learner, expect_array, flash_bar,
                                 measured_outside, outside_growth,
                                 plain_tuple, rng, shapes_of)
from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, LIBRARY_KERNELS, Step

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions


def _call_forward(ns, q, k, v, context="", **kw):
    """Phase 1: the learner's forward on copies, as plain arrays (o, lse)."""
    return _forward_on(ns, q.copy(), k.copy(), v.copy(), context=context, **kw)


def _forward_on(ns, q, k, v, context="", plain=True, **kw):
    """Phase 1: the learner's forward on these arrays (copies made by the caller, outside any
    memory measurement), as plain arrays (o, lse) (``plain=False``: as returned)."""
    shapes = shapes_of(q=q, k=k, v=v)
    if kw.get("mask") is not None:
        shapes["mask"] = list(np.shape(kw["mask"]))
    out = call_learner(ns["forward"], q, k, v, shapes=shapes, context=context, **kw)
    return plain_tuple(out, ("o", "lse"), "forward") if plain else out


def _padding(n_q, n_k):
    m = np.ones((1, n_k), dtype=bool)          # key-padding mask (1, Nk): last 11 keys padded
    m[0, n_k - 11:] = False
    return m


def _empty_rows(n_q, n_k):
    m = rng(5).rand(n_q, n_k) < 0.7
    m[[0, 7, n_q - 1]] = False                 # three queries may attend nothing
    m[[20, 21], :16] = False                   # two see nothing in the first key tile
    return m


class _Case:
    """One forward/backward case: sizes, mask, causal, blocks; builds the same inputs in both
    phases from its seed."""

    def __init__(self, label, n_q, n_k, d, dv, mask=None, causal=False, block_q=16,
                 block_k=16, seed=0, scale=1.0):
        self.label, self.n_q, self.n_k, self.d, self.dv = label, n_q, n_k, d, dv
        self.mask_fn, self.causal, self.block_q, self.block_k = mask, causal, block_q, block_k
        self.seed, self.scale = seed, scale
        self.context = "%s, blocks %d×%d" % (label, block_q, block_k)

    def inputs(self):
        r = rng(self.seed)
        q, k = r.randn(self.n_q, self.d) * self.scale, r.randn(self.n_k, self.d)
        v, do = r.randn(self.n_k, self.dv), r.randn(self.n_q, self.dv)
        mask = None if self.mask_fn is None else self.mask_fn(self.n_q, self.n_k)
        return q, k, v, do, mask

    def shapes(self):
        q, k, v, do, mask = self.inputs()
        shapes = shapes_of(q=q, k=k, v=v)
        if mask is not None:
            shapes["mask"] = list(mask.shape)
        return shapes

    def kwargs(self, mask):
        return dict(mask=mask, causal=self.causal, block_q=self.block_q, block_k=self.block_k)


def _variants():
    """online-softmax's known slips (:mod:`variants`), shared: the judge names the one an output
    matches."""
    return importlib.import_module("nlpcore.lab.exercises.online-softmax.variants")


def _name_the_slip(fail: CheckFailed, hint: str) -> None:
    if hint:
        fail.message += ". It matches a known slip: %s" % hint
        fail.details["likely_mistake"] = hint


def _forward_check(case):
    def collect(ns):
        q, k, v, _, mask = case.inputs()
        return _call_forward(ns, q, k, v, context=case.context, **case.kwargs(mask))

    def judge(got):
        q, k, v, _, mask = case.inputs()
        want_o, want_lse = reference.forward(q, k, v, causal=case.causal, mask=mask)
        shapes = case.shapes()
        try:
            err = assert_close("o", got[0], want_o, shapes=shapes, dtype="float64",
                               context=case.context)
            err = max(err, assert_close("lse", got[1], want_lse, shapes=shapes,
                                        dtype="float64", context=case.context))
        except CheckFailed as fail:
            _name_the_slip(fail, _variants().likely_mistake(
                got[0], 0, q, k, v, case.block_q, case.block_k, case.causal, is_close, mask=mask))
            raise
        return "%s: max |Δ| = %.2g (float64)" % (case.label, err)
    return dict(collect=collect, judge=judge)


# float16 cases (label, Nq, Nk, d, q scale, v scale, v offset, seed): q doubled (sharper softmax,
# larger scores), and a long row of 2048 keys with values 0.5 ± 0.3, where running sums kept in
# float16 drift over 128 key tiles (o ~2.5×, lse ~40× past the bar; rounding P to float16
# before P·V and dividing in float16 stays within it, ~0.5×).
HALF_CASES = (("float16, Nq=48, Nk=64, d=32, blocks 16×16", 48, 64, 32, 2.0, 1.0, 0.0, 7),
              ("float16, Nq=16, Nk=2048, d=16, v = 0.5 ± 0.3, blocks 16×16", 16, 2048, 16, 1.0,
               0.3, 0.5, 8))


def _half_inputs(case):
    _, n_q, n_k, d, q_scale, v_scale, v_offset, seed = case
    r = rng(seed)
    q, k = r.randn(n_q, d) * q_scale, r.randn(n_k, d)
    v = r.randn(n_k, d) * v_scale + v_offset
    return tuple(x.astype(np.float16) for x in (q, k, v))


def _collect_float16(ns):
    return [_call_forward(ns, *_half_inputs(case), context=case[0], block_q=16, block_k=16)
            for case in HALF_CASES]


def same_precision(q, k, v):
    """Plain attention in float16, as flash-attention's tests compute their same-precision
    yardstick (``attention_ref(upcast=False)``): each matmul accumulates in float32 and rounds
    its output to float16, the softmax runs in float32 and P is rounded to float16. Returns
    o (float16) and lse (float32, from the float16 scores)."""
    f32 = np.float32
    s = (q.astype(f32) @ k.astype(f32).T).astype(np.float16).astype(f32)        # (Nq, Nk)
    s = (s * f32(1.0 / np.sqrt(q.shape[1]))).astype(np.float16).astype(f32)
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - m)
    l = e.sum(axis=1, keepdims=True)
    p = (e / l).astype(np.float16)
    o = (p.astype(f32) @ v.astype(f32)).astype(np.float16)
    return o, (m + np.log(l))[:, 0]


def flash_atol(want_o) -> float:
    """flash-attention's output allowance: twice the rounding noise of float16 at the size of
    the output (``2·max|o_ref + 0.3 - 0.3 - o_ref|`` with o_ref in float16)."""
    f32, f16 = np.float32, np.float16
    ref = np.asarray(want_o).astype(f16)
    # as PyTorch adds a Python float to a float16 tensor: in float32, rounded to float16
    up = (ref.astype(f32) + f32(0.3)).astype(f16)
    noisy = (up.astype(f32) - f32(0.3)).astype(f16)
    return 2.0 * float(np.abs(noisy.astype(np.float64) - ref.astype(np.float64)).max())


def _judge_float16(collected):
    """flash-attention's bar (tests/test_flash_attn.py): o's error against float64 may be at
    most twice that of plain attention in the same precision (:func:`same_precision`), plus
    twice float16's rounding noise at o's size; lse likewise, plus a few float32 ulps. A
    kernel that keeps its running sums in float16 fails the long case by ~6×; one that rounds
    P to float16 before P·V, or divides in float16, passes."""
    texts = []
    for case, (o, lse) in zip(HALF_CASES, collected):
        q, k, v = _half_inputs(case)
        shapes = shapes_of(q=q, k=k, v=v)
        expect_array("o", o, (q.shape[0], v.shape[1]), shapes)
        expect_array("lse", lse, (q.shape[0],), shapes)
        if o.dtype != np.float16:
            raise CheckFailed("%s: o must have q's dtype" % case[0], expected="o.dtype = float16",
                              got="o.dtype = %s" % o.dtype, shapes=shapes)
        if lse.dtype.kind != "f" or lse.dtype.itemsize < 4:
            raise CheckFailed("%s: lse must be kept in the accumulation dtype (at least float32)"
                              % case[0], expected="lse.dtype = float32",
                              got="lse.dtype = %s" % lse.dtype, shapes=shapes)
        want_o, want_lse = reference.forward(*(x.astype(np.float64) for x in (q, k, v)))
        base_o, base_lse = same_precision(q, k, v)
        lse_extra = FLOAT16_LSE_ULPS * float(np.finfo(np.float32).eps) * float(np.abs(want_lse).max())
        err_o = flash_bar("o", o, want_o, base_o, shapes=shapes, extra=flash_atol(want_o),
                          context=case[0] + ", vs plain float16 attention")
        err_l = flash_bar("lse", lse, want_lse, base_lse, shapes=shapes, extra=lse_extra,
                          context=case[0] + ", vs plain float16 attention")
        texts.append("%s: max |Δ| o %.2g, lse %.2g" % (case[0], err_o, err_l))
    return "; ".join(texts) + (" (bar: 2× plain float16 attention + float16 rounding noise, as "
                               "flash-attention's tests)")


FLOAT16_LSE_ULPS = 4        # lse's bar: 2 × err(same precision) + this many float32 ulps


# The memory checks' size: a float64 row against all Nk keys (128 KiB) is larger than what a
# tiled kernel needs beyond its outputs (row statistics and tiles: 75 KiB; lab.working_set),
# with 128 tiles, to grade in well under a second in the page. Values are spot-checked on the
# first SPOT_ROWS rows.
TILED = ("Nq=4, Nk=16384, d=2", 4, 16384, 2, 4, 128)
SPOT_ROWS = 16


def _tiled_forward_check():
    label, n_q, n_k, d, bq, bk = TILED

    def inputs():
        r = rng(98)
        return r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, d)

    def collect(ns):
        q, k, v = inputs()
        out, peak = working_set.measure(_forward_on, ns, q, k, v, context=label, block_q=bq,
                                block_k=bk, plain=False)
        tiled = plain_tuple(out, ("o", "lse"), "forward"), peak
        if not measured_outside() or peak > budget:
            return tiled + (None,)
        big_label, _, _, _, _, big_bq, big_bk = working_set.OUTSIDE_CASE   # (see compose)
        q, k, v = _outside_inputs(working_set.OUTSIDE_CASE, 96)[:3]
        o, lse = _forward_on(ns, q, k, v, context=big_label, block_q=big_bq, block_k=big_bk)
        return tiled + ((o, lse),)

    budget = working_set.budget(out_bytes=8 * (n_q * d + n_q), n_q=n_q, block_q=bq, block_k=bk,
                                width=d)

    def judge(collected):
        (o, lse), peak, outside = collected
        notes = [judge_tiled(o, lse, peak)]
        if outside_growth() is not None:
            q, k, v = _outside_inputs(working_set.OUTSIDE_CASE, 96)[:3]
            notes.append(_judge_outside(working_set.OUTSIDE_CASE, outside, ("o", "lse"),
                                        lambda rows: reference.forward(q[rows], k, v), q, k, v))
        return "; ".join(notes)

    def judge_tiled(o, lse, peak):
        q, k, v = inputs()
        shapes = shapes_of(q=q, k=k, v=v)
        expect_array("o", o, (n_q, d), shapes)
        expect_array("lse", lse, (n_q,), shapes)
        want_o, want_lse = reference.forward(q[:SPOT_ROWS], k, v)
        context = label + ", rows 0..%d" % (min(SPOT_ROWS, n_q) - 1)
        assert_close("o", o[:SPOT_ROWS], want_o, shapes=shapes, dtype="float64", context=context)
        assert_close("lse", lse[:SPOT_ROWS], want_lse, shapes=shapes, dtype="float64",
                     context=context)
        return working_set.assert_tiled(peak, n_q=n_q, n_k=n_k, out_bytes=8 * (n_q * d + n_q),
                                        block_q=bq, block_k=bk, width=d, shapes=shapes,
                                        context=label + ", blocks %d×%d" % (bq, bk))
    return dict(collect=collect, judge=judge)


# ------------------------------------------------------------------------------------------
# Backward
# ------------------------------------------------------------------------------------------

def _call_backward(ns, q, k, v, o, lse, do, context="", **kw):
    """Phase 1: the learner's backward on copies, as plain arrays (dq, dk, dv)."""
    return _backward_on(ns, q.copy(), k.copy(), v.copy(), np.array(o), np.array(lse), do.copy(),
                        context=context, **kw)


def _backward_on(ns, q, k, v, o, lse, do, context="", plain=True, **kw):
    """Phase 1: the learner's backward on these arrays (copies made by the caller, outside any
    memory measurement), as plain arrays (dq, dk, dv) (``plain=False``: as returned)."""
    shapes = shapes_of(q=q, k=k, v=v, do=do)
    if kw.get("mask") is not None:
        shapes["mask"] = list(np.shape(kw["mask"]))
    out = call_learner(ns["backward"], q, k, v, o, lse, do, shapes=shapes, context=context, **kw)
    return plain_tuple(out, ("dq", "dk", "dv"), "backward") if plain else out


def _backward_check(case, zero_rows=False):
    """The o and lse the learner's backward receives come from the library's tiled forward."""
    def collect(ns):
        q, k, v, do, mask = case.inputs()
        o, lse = flash_np.forward(q, k, v, causal=case.causal, mask=mask)
        return _call_backward(ns, q, k, v, o, lse, do, context=case.context,
                              **case.kwargs(mask))

    def judge(got):
        q, k, v, do, mask = case.inputs()
        o, lse = reference.forward(q, k, v, causal=case.causal, mask=mask)
        want = reference.backward(q, k, v, o, lse, do, causal=case.causal, mask=mask)
        shapes = case.shapes()
        shapes["do"] = list(do.shape)
        err = 0.0
        try:
            for name, g, w in zip(("dq", "dk", "dv"), got, want):
                err = max(err, assert_close(name, g, w, shapes=shapes, dtype="float64",
                                            context=case.context))
        except CheckFailed as fail:
            _name_the_slip(fail, _variants().likely_backward_mistake(
                got, q, k, v, o, lse, do, case.causal, is_close, mask=mask))
            raise
        if zero_rows:
            empty = ~np.isfinite(lse)
            dq = np.asarray(got[0])
            if np.abs(dq[empty]).max() != 0:
                raise CheckFailed("rows with no allowed key must get dq = 0", shapes=shapes,
                                  expected="0", got="%.3g" % np.abs(dq[empty]).max())
        return "%s: max |Δ| = %.2g against reference.backward (float64)" % (case.label, err)
    return dict(collect=collect, judge=judge)


FD_CASE = _Case("Nq=5, Nk=6, d=3, causal", 5, 6, 3, 2, causal=True, block_q=2, block_k=4,
                seed=11)


def _collect_finite_differences(ns):
    q, k, v, w, _ = FD_CASE.inputs()
    o, lse = flash_np.forward(q, k, v, causal=True)          # the backward's saved o and lse
    return _call_backward(ns, q, k, v, o, lse, w, context=FD_CASE.context, causal=True,
                          block_q=2, block_k=4)


def _judge_finite_differences(got):
    """Gradients of loss = Σ o ∘ w against central differences of the naive forward."""
    q, k, v, w, _ = FD_CASE.inputs()
    shapes = shapes_of(q=q, k=k, v=v)
    eps = 1e-6
    args = {"q": q, "k": k, "v": v}
    worst = 0.0
    for (name, x), g in zip(args.items(), got):
        # every entry nudged at once along a leading batch axis: (x.size, *x.shape) inputs
        nudge = np.eye(x.size).reshape((x.size,) + x.shape) * eps
        batch = {n: np.broadcast_to(a, (x.size,) + a.shape) for n, a in args.items()}
        losses = []
        for sign in (1.0, -1.0):
            moved = dict(batch, **{name: x + sign * nudge})
            o = reference.forward(moved["q"], moved["k"], moved["v"], causal=True)[0]
            losses.append((o * w).sum(axis=(1, 2)))             # (x.size,)
        numeric = ((losses[0] - losses[1]) / (2 * eps)).reshape(x.shape)
        worst = max(worst, assert_close("d" + name, g, numeric, shapes=shapes, dtype="float64",
                                        atol=1e-6, rtol=1e-5,
                                        context="central differences, eps = 1e-6, causal"))
    return "matches central differences of the naive forward: max |Δ| = %.2g" % worst


OUTSIDE_CHUNK = 32          # query rows of o, lse the grader computes at once for the backward case


def _forward_in_chunks(q, k, v):
    """(o, lse) of plain softmax attention, OUTSIDE_CHUNK query rows at a time (the learner
    process's whole peak is measured: the grader's own arrays must stay small there)."""
    n, d = q.shape
    o, lse = np.zeros((n, v.shape[1])), np.zeros(n)
    for r0 in range(0, n, OUTSIDE_CHUNK):
        s = q[r0:r0 + OUTSIDE_CHUNK] @ k.T / np.sqrt(d)            # (rows, Nk) scores
        m = s.max(axis=1)
        p = np.exp(s - m[:, None])
        l = p.sum(axis=1)
        o[r0:r0 + OUTSIDE_CHUNK] = p @ v / l[:, None]
        lse[r0:r0 + OUTSIDE_CHUNK] = m + np.log(l)
    return o, lse


def _outside_inputs(case, seed):
    """q, k, v, dO of a case measured from outside the learner's process (working_set)."""
    label, n_q, n_k, d, dv, bq, bk = case
    r = rng(seed)
    return r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv), r.randn(n_q, dv)


def _judge_outside(case, got, names, want, q, k, v) -> str:
    """Rows of the outside case drawn for this grade (:func:`working_set.judge_rows`) against
    ``want(rows)``, then the operating system's count of the learner process's peak growth
    (:func:`nlpcore.lab.working_set.assert_outside`). ``got``: the whole outputs, one per name,
    each with a row per query (o, dq) or one number per query (lse)."""
    label, n_q, n_k = case[:3]
    if got is None or any(g is None for g in got):
        raise CheckFailed("%s: your code's process did not run this case, which the grader "
                          "measures from outside it" % label, expected=" and ".join(names),
                          got="nothing")
    shapes = shapes_of(q=q, k=k, v=v)
    rows = working_set.judge_rows(n_q)
    context = working_set.rows_context(label, rows)
    for name, g, w in zip(names, got, want(rows)):
        g = expect_array(name, g, (n_q,) + tuple(np.shape(w)[1:]), shapes)
        assert_close(name, g[rows], w, shapes=shapes, dtype="float64", context=context)
    return working_set.assert_outside(outside_growth(), n_q=n_q, n_k=n_k, context=label)


def _tiled_backward_check():
    label, n_q, n_k, d, bq, bk = TILED

    def inputs():
        r = rng(97)
        return r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, d), r.randn(n_q, d)

    def collect(ns):
        q, k, v, do = inputs()
        o, lse = flash_np.forward(q, k, v, block_q=bq, block_k=bk)
        out, peak = working_set.measure(_backward_on, ns, q, k, v, o, lse, do, context=label,
                                block_q=bq, block_k=bk, plain=False)
        tiled = plain_tuple(out, ("dq", "dk", "dv"), "backward"), peak
        if not measured_outside() or peak > budget:
            return tiled + (None,)
        case = working_set.OUTSIDE_BACKWARD_CASE       # (see online-softmax/compose_checks.py)
        big_label, n, _, _, _, big_bq, big_bk = case
        q, k, v, do = _outside_inputs(case, 95)
        o, lse = _forward_in_chunks(q, k, v)
        dq, _, _ = _backward_on(ns, q, k, v, o, lse, do, context=big_label, block_q=big_bq,
                                block_k=big_bk)
        return tiled + (dq,)

    budget = working_set.budget(out_bytes=8 * (n_q * d + 2 * n_k * d), n_q=n_q, block_q=bq,
                                block_k=bk, width=d)

    def judge(collected):
        grads, peak, outside = collected
        notes = [judge_tiled(grads, peak)]
        if outside_growth() is not None:
            q, k, v, do = _outside_inputs(working_set.OUTSIDE_BACKWARD_CASE, 95)

            def want(rows):                 # dq of a row needs only that row's q, o, lse, dO
                o, lse = reference.forward(q[rows], k, v)
                return reference.backward(q[rows], k, v, o, lse, do[rows])[:1]
            notes.append(_judge_outside(working_set.OUTSIDE_BACKWARD_CASE, (outside,), ("dq",),
                                        want, q, k, v))
        return "; ".join(notes)

    def judge_tiled(grads, peak):
        q, k, v, do = inputs()
        shapes = shapes_of(q=q, k=k, v=v, do=do)
        for name, g, n in zip(("dq", "dk", "dv"), grads, (n_q, n_k, n_k)):
            expect_array(name, g, (n, d), shapes)
        rows = slice(0, SPOT_ROWS)       # dq of a row needs only that row's q, o, lse, dO
        o, lse = reference.forward(q[rows], k, v)
        want_dq = reference.backward(q[rows], k, v, o, lse, do[rows])[0]
        assert_close("dq", grads[0][rows], want_dq, shapes=shapes, dtype="float64",
                     context=label + ", rows 0..%d" % (min(SPOT_ROWS, n_q) - 1))
        # outputs dq (Nq, d), dk and dv (Nk, d)
        return working_set.assert_tiled(peak, n_q=n_q, n_k=n_k,
                                        out_bytes=8 * (n_q * d + 2 * n_k * d), block_q=bq,
                                        block_k=bk, width=d, shapes=shapes,
                                        context=label + ", blocks %d×%d" % (bq, bk))
    return dict(collect=collect, judge=judge)


_BACKWARD_CASES = {
    "reference": (_Case("Nq=37, Nk=29, d=8, dv=6", 37, 29, 8, 6, block_q=16, block_k=8,
                        seed=21), False),
    "masks": (_Case("Nq=Nk=40, d=8, causal, last 11 keys padded", 40, 40, 8, 8,
                    mask=_padding, causal=True, seed=22), False),
    "causal-rect": (_Case("Nq=24 < Nk=40, d=8, causal (top-left)", 24, 40, 8, 8, causal=True,
                          block_q=8, block_k=16, seed=24), False),
    "empty-rows": (_Case("Nq=30, Nk=40, 3 empty rows", 30, 40, 8, 8, mask=_empty_rows,
                         seed=23), True),
    "large": (_Case("Nq=24, Nk=40, d=8, large logits (scores ~ ±1000)", 24, 40, 8, 8,
                    block_q=8, block_k=8, seed=25, scale=400.0), False),
}


def build() -> Exercise:
    harden = Step(
        id="harden", kind="Harden", title="Harden a tiled forward", minutes=30,
        statement=HERE.statement("harden", tiled_nq=TILED[1], tiled_nk=TILED[2],
                                 outside_nq=working_set.OUTSIDE_CASE[1], outside_nk=working_set.OUTSIDE_CASE[2]),
        starter=HERE.starter("harden"), solution=HERE.solution("harden"),
        hints=(
            "Ragged: clamp `q1 = min(q0 + block_q, n_q)` and loop keys over "
            "`range(0, n_k, block_k)` with `k1 = min(...)`; size `m`, `l`, `acc` by `q1 - q0`.",
            "Empty rows: shift by `np.where(np.isfinite(m_new), m_new, 0)`; at the end, where "
            "`l == 0` write 0 to o and -inf to lse.",
            "float16: cast q, k, v to float32 with `np.asarray(x, dtype=np.float32)` before the "
            "matmuls (it does not copy inputs already float32; `x.astype` always copies, and a "
            "whole copy of K or V is over the tiled budget) and `o.astype(q.dtype)` at the end; "
            "keep lse in float32.",
        ),
        required=("forward",),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("plain", "happy path: N multiple of blocks",
                  **_forward_check(_Case("Nq=32, Nk=48, d=16", 32, 48, 16, 16, seed=1))),
            Check("ragged", "ragged blocks",
                  **_forward_check(_Case("Nq=37, Nk=53, d=16, dv=8", 37, 53, 16, 8, seed=2))),
            Check("padding", "key-padding mask (1, Nk)",
                  **_forward_check(_Case("Nq=32, Nk=48, last 11 keys padded", 32, 48, 16, 16,
                                         mask=_padding, seed=3))),
            Check("empty-rows", "empty rows give o = 0, lse = -inf (no NaN)",
                  **_forward_check(_Case("Nq=32, Nk=48, random mask, 3 empty rows, 2 rows "
                                         "with an empty first tile, causal", 32, 48, 8, 8,
                                         mask=_empty_rows, causal=True, seed=4))),
            Check("causal-rect", "causal with Nq ≠ Nk (top-left aligned)",
                  **_forward_check(_Case("Nq=45 > Nk=20, causal", 45, 20, 8, 8, causal=True,
                                         block_q=16, block_k=8, seed=6))),
            Check("large", "large logits (scores ~ ±1000) without overflow",
                  **_forward_check(_Case("Nq=24, Nk=40, d=8, scores ~ ±1000", 24, 40, 8, 8,
                                         block_q=8, block_k=8, seed=8, scale=400.0))),
            Check("float16", "float16 inputs: dtype, and flash-attention's same-precision bar",
                  collect=_collect_float16, judge=_judge_float16),
            Check("tiled", "memory stays at tile size (no Nq×Nk array)",
                  **_tiled_forward_check()),
        ))
    scratch = Step(
        id="scratch", kind="Scratch", title="The recomputing backward", minutes=45,
        statement=HERE.statement("scratch", tiled_nq=TILED[1], tiled_nk=TILED[2],
                                 outside_nq=working_set.OUTSIDE_BACKWARD_CASE[1], outside_nk=working_set.OUTSIDE_BACKWARD_CASE[2]),
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
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("reference", "matches reference.backward on ragged sizes",
                  **_backward_check(*_BACKWARD_CASES["reference"])),
            Check("masks", "causal + key padding", **_backward_check(*_BACKWARD_CASES["masks"])),
            Check("causal-rect", "causal with Nq < Nk (top-left aligned)",
                  **_backward_check(*_BACKWARD_CASES["causal-rect"])),
            Check("empty-rows", "rows with no key: zero gradients, no NaN",
                  **_backward_check(*_BACKWARD_CASES["empty-rows"])),
            Check("large", "large logits", **_backward_check(*_BACKWARD_CASES["large"])),
            Check("finite-diff", "matches finite differences",
                  collect=_collect_finite_differences, judge=_judge_finite_differences),
            Check("tiled", "memory stays at tile size (no Nq×Nk array)", **_tiled_backward_check()),
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
