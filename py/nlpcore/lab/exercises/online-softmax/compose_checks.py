"""Checks of online-softmax's Compose step: the tiled forward against the naive reference, and its
working set.

Two phases each: ``collect`` calls the learner's code and returns plain data; ``judge``
computes the expected values once the learner's code is gone.
"""
from __future__ import annotations

import numpy as np

from nlpcore.kernels import reference
from nlpcore.lab import working_set
from . import variants
from nlpcore.lab.judging import (assert_close, is_close, call_learner, expect_array, measured_outside,
                                 outside_growth, plain_tuple, rng, shapes_of)
from nlpcore.lab import model
from nlpcore.lab.model import CheckFailed


COMPOSE_CASES = [
    # (label, n_q, n_k, d, dv, block_q, block_k, causal, score scale)
    ("ragged: Nq=37, Nk=53, d=16, blocks 8×16", 37, 53, 16, 16, 8, 16, False, 1.0),
    ("Nk not a multiple, dv ≠ d: Nq=20, Nk=45, d=8, dv=12, blocks 7×10", 20, 45, 8, 12, 7, 10, False, 1.0),
    ("blocks larger than N: Nq=5, Nk=6, d=4, blocks 16×16", 5, 6, 4, 4, 16, 16, False, 1.0),
    ("causal: N=45, d=16, blocks 16×8", 45, 45, 16, 16, 16, 8, True, 1.0),
    ("causal, block 1: N=9, d=4, blocks 1×1", 9, 9, 4, 4, 1, 1, True, 1.0),
    ("causal, Nq=20 < Nk=45 (top-left: row i sees keys 0..i), blocks 8×16", 20, 45, 8, 8, 8, 16, True, 1.0),
    ("causal, Nq=45 > Nk=20 (rows past Nk see every key), blocks 16×8", 45, 20, 8, 8, 16, 8, True, 1.0),
    ("large logits (scores ~ ±1000: exp overflows unless shifted), Nq=24, Nk=40, blocks 8×8",
     24, 40, 8, 8, 8, 8, False, 400.0),
    ("large logits, causal, Nq=24, Nk=40, blocks 8×8", 24, 40, 8, 8, 8, 8, True, 400.0),
]
CHECK_CASES = {"ragged": (0, 1, 2), "causal": (3, 4, 5, 6), "large": (7, 8),
               "lse": tuple(range(len(COMPOSE_CASES)))}

# The memory check: one case where a float64 row against all Nk keys (128 KiB) is larger than
# everything a tiled kernel needs (outputs, row statistics, tiles: 75 KiB; lab.working_set),
# with few enough tiles (128) to grade in well under a second in the page. Tiles number more
# than 12·Nq whatever the blocks (the bound must stay below one row), hence Nq = 4. Values are
# spot-checked on the first SPOT_ROWS rows (the other checks test them in full).
TILED_CASE = ("Nq=4, Nk=16384, d=2, blocks 4×128", 4, 16384, 2, 2, 4, 128)
SPOT_ROWS = 16


def _compose_inputs(n_q, n_k, d, dv, scale):
    r = rng(10 + n_q + n_k)
    return r.randn(n_q, d) * scale, r.randn(n_k, d), r.randn(n_k, dv)


def collect_compose(ns):
    out = []
    for label, n_q, n_k, d, dv, bq, bk, causal, scale in COMPOSE_CASES:
        q, k, v = _compose_inputs(n_q, n_k, d, dv, scale)
        try:                                # a case that raises fails only its own checks
            got = call_learner(ns["attention"], q.copy(), k.copy(), v.copy(), bq, bk,
                               causal=causal, shapes=shapes_of(q=q, k=k, v=v), context=label)
            out.append(plain_tuple(got, ("o", "lse"), "attention"))
        except CheckFailed as fail:
            out.append(fail)
    return out


def judge_compose(name, output):
    """The judge of one output ("o" or "lse") on the cases of check ``name``: each check compares
    only its own output, so a wrong o never shows up as the lse check's message. Every case is
    judged; a failure carries the per-case table (shape, seed, verdict, max |Δ|) and, when the
    output matches a known slip (:mod:`variants`), names it."""
    index = {"o": 0, "lse": 1}[output]

    def judge(collected):
        rows, first, worst = [], None, 0.0
        for i in CHECK_CASES[name]:
            label, n_q, n_k, d, dv, bq, bk, causal, scale = COMPOSE_CASES[i]
            q, k, v = _compose_inputs(n_q, n_k, d, dv, scale)
            want = reference.forward(q, k, v, causal=causal)[index]
            shapes = shapes_of(q=q, k=k, v=v)
            if isinstance(collected[i], CheckFailed):       # this case raised
                rows.append([label, _shape_text(n_q, n_k, d, dv), _seed(n_q, n_k), "fail", "-",
                             "-"])
                first = first or collected[i]
                continue
            got = collected[i][index]
            try:
                _transposed(output, got, want, label, shapes)
                err = assert_close(output, got, want, shapes=shapes, dtype="float64",
                                   context=label)
            except CheckFailed as fail:
                hint = variants.likely_mistake(got, index, q, k, v, bq, bk, causal, is_close)
                if hint:
                    fail.message += ". It matches a known slip: %s" % hint
                rows.append([label, _shape_text(n_q, n_k, d, dv), _seed(n_q, n_k), "fail",
                             fail.details.get("max_abs_err", "-"), hint or "-"])
                first = first or fail
                continue
            worst = max(worst, err)
            rows.append([label, _shape_text(n_q, n_k, d, dv), _seed(n_q, n_k), "pass", err, "-"])
        table = {"columns": ["case", "shapes", "seed", "verdict", "max |Δ|", "likely mistake"],
                 "rows": rows}
        if first is not None:
            failed = sum(r[3] == "fail" for r in rows)
            first.message = "%d of %d cases fail; the first: %s" % (failed, len(rows), first.message)
            first.details["table"] = table
            raise first
        return "%d cases, max |Δ| %s = %.2g against reference.forward (float64)" % (
            len(CHECK_CASES[name]), output, worst)
    return judge


def _transposed(output, got, want, label, shapes):
    """A clearer failure for an o returned transposed, (dv, Nq) instead of (Nq, dv)."""
    shape = getattr(got, "shape", None)
    if output == "o" and shape is not None and len(shape) == 2 and tuple(shape) == want.shape[::-1] \
            and shape[0] != shape[1]:
        raise CheckFailed("%s: o has shape %s, the transpose of (Nq, dv) = %s: return o with one "
                          "row per query" % (label, list(shape), list(want.shape)),
                          expected="shape %s" % list(want.shape), got="shape %s" % list(shape),
                          shapes=shapes)


def _shape_text(n_q, n_k, d, dv):
    return "q (%d, %d), k (%d, %d), v (%d, %d)" % (n_q, d, n_k, d, n_k, dv)


def tiled_values() -> dict:
    """The memory cases' sizes, for the statement (numbers from the code, not typed twice)."""
    outside = working_set.OUTSIDE_CASE
    return {"tiled_nq": TILED_CASE[1], "tiled_nk": TILED_CASE[2], "outside_nq": outside[1],
            "outside_nk": outside[2]}


def _seed(n_q, n_k):
    """The grade's seed, shown per case: ``nlpcore.lab.grade(exercise, step, code, seed=...)``
    rebuilds the same inputs."""
    return model.grade_seed()


def _outside_inputs():
    label, n_q, n_k, d, dv, bq, bk = working_set.OUTSIDE_CASE
    r = rng(98)
    return r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)


def collect_tiled(ns):
    label, n_q, n_k, d, dv, bq, bk = TILED_CASE
    r = rng(99)
    q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
    out, peak = working_set.measure(call_learner, ns["attention"], q, k, v, bq, bk, causal=False,
                            shapes=shapes_of(q=q, k=k, v=v), context=label)
    tiled = plain_tuple(out, ("o", "lse"), "attention"), peak
    if not measured_outside() or peak > _budget():
        return tiled + (None,)              # (over the budget: the judge fails it on that)
    # The case whose memory the operating system measures (CPython), run where the measured
    # peak was within the budget, so that code which talks that peak down is caught here, and
    # honest untiled code does not pay for it. All its rows go back; the judge checks some.
    label, n_q, n_k, d, dv, bq, bk = working_set.OUTSIDE_CASE
    q, k, v = _outside_inputs()
    o, lse = plain_tuple(call_learner(ns["attention"], q, k, v, bq, bk, causal=False,
                                      shapes=shapes_of(q=q, k=k, v=v), context=label),
                         ("o", "lse"), "attention")
    return tiled + ((o, lse),)


def _budget() -> int:
    label, n_q, n_k, d, dv, bq, bk = TILED_CASE
    return working_set.budget(out_bytes=8 * (n_q * dv + n_q), n_q=n_q, block_q=bq, block_k=bk,
                              width=max(d, dv))


def judge_tiled(collected):
    (o, lse), peak, outside = collected
    notes = [_judge_tiled(o, lse, peak)]
    growth = outside_growth()
    if growth is not None:                  # the operating system's count, from the runner
        label, n_q, n_k, d, dv, bq, bk = working_set.OUTSIDE_CASE
        if outside is None:
            raise CheckFailed("%s: your code's process did not run this case, which the grader "
                              "measures from outside it" % label, expected="o and lse", got="nothing")
        q, k, v = _outside_inputs()
        shapes = shapes_of(q=q, k=k, v=v)
        got_o = expect_array("o", outside[0], (n_q, dv), shapes)
        got_lse = expect_array("lse", outside[1], (n_q,), shapes)
        rows = working_set.judge_rows(n_q)
        want_o, want_lse = reference.forward(q[rows], k, v)
        context = working_set.rows_context(label, rows)
        assert_close("o", got_o[rows], want_o, shapes=shapes, dtype="float64", context=context)
        assert_close("lse", got_lse[rows], want_lse, shapes=shapes, dtype="float64",
                     context=context)
        notes.append(working_set.assert_outside(growth, n_q=n_q, n_k=n_k, context=label))
    return "; ".join(notes)


def _judge_tiled(o, lse, peak):
    label, n_q, n_k, d, dv, bq, bk = TILED_CASE
    r = rng(99)
    q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
    shapes = shapes_of(q=q, k=k, v=v)
    expect_array("o", o, (n_q, dv), shapes)
    expect_array("lse", lse, (n_q,), shapes)
    want_o, want_lse = reference.forward(q[:SPOT_ROWS], k, v)
    context = label + ", rows 0..%d" % (min(SPOT_ROWS, n_q) - 1)
    assert_close("o", o[:SPOT_ROWS], want_o, shapes=shapes, dtype="float64", context=context)
    assert_close("lse", lse[:SPOT_ROWS], want_lse, shapes=shapes, dtype="float64",
                 context=context)
    return working_set.assert_tiled(peak, n_q=n_q, n_k=n_k, out_bytes=8 * (n_q * dv + n_q),
                                    block_q=bq, block_k=bk, width=max(d, dv), context=label,
                                    shapes=shapes)
