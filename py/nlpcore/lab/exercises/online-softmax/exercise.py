"""Exercise ``online-softmax``: predict HBM traffic, build the (m, l) monoid, tile attention,
probe Theorem 2 with the IO model.

Sources: Milakov & Gimelshein 2018 (arXiv:1805.02867) for the online normaliser; Dao et al.
2022 (arXiv:2205.14135) Algorithm 0/1, Theorem 2 and Figure 2; Rabe & Staats 2021
(arXiv:2112.05682) for attention computed in chunks with the same rescaling.
"""
from __future__ import annotations

import copy

import numpy as np

from nlpcore import hardware, measured
from nlpcore.kernels import io_model, reference
from nlpcore.kernels import online_softmax as lib
from nlpcore.lab.judging import (assert_close, assert_tiled, call_learner, expect_array,
                                 expect_number, peak_memory, plain_array, plain_tuple,
                                 relative_close, rng, shapes_of)
from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, LIBRARY_KERNELS, Step

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions

# The Predict step's setting (also written in its starter).
A100_M = hardware.A100_SRAM_FP16_ELEMENTS  # the paper's SRAM size M, in fp16 elements
PREDICT_N, PREDICT_D, PREDICT_M = 512, 64, A100_M
_PREDICT_BC = io_model.block_sizes(PREDICT_M, PREDICT_D)[1]  # Bc = ceil(M / 4d), for a hint
PREDICT_RTOL = 0.20
# Predict before you measure: the IO model and the kernel that the counter runs are refused.
_PREDICT_REFUSES = ("nlpcore.kernels.io_model", "nlpcore.kernels.flash_np", "nlpcore.kernels.trace")


# ------------------------------------------------------------------------------------------
# Step 1 -- Predict
# ------------------------------------------------------------------------------------------

_MEASURED: dict = {}   # filled by build(), before any learner code runs (the snapshot keeps it)


def _measured_flash() -> int:
    """Forward accesses of flash_np on N×d inputs with the paper's blocks, counted by IOCounter
    when flash_np is available (else the closed form, which tests hold equal to it); counted
    once, by build()."""
    if "flash" not in _MEASURED:
        _MEASURED["flash"] = _count_flash()
    return _MEASURED["flash"]


def _count_flash() -> int:
    try:
        from nlpcore.kernels import flash_np
    except ImportError:
        return io_model.flash_accesses(PREDICT_N, PREDICT_N, PREDICT_D, PREDICT_M)
    br, bc = io_model.block_sizes(PREDICT_M, PREDICT_D)
    x = np.zeros((PREDICT_N, PREDICT_D), dtype=np.float32)
    counter = io_model.IOCounter()
    flash_np.forward(x, x, x, block_q=br, block_k=bc, io=counter)
    return counter.reads + counter.writes


def _collect_prediction(ns):
    """Phase 1: the two predictions as plain floats (or why they are not numbers)."""
    out = {}
    for name in ("standard", "flash"):
        try:
            out[name] = expect_number(name, ns.get(name))
        except CheckFailed as fail:
            out[name] = fail
    return out


def _number(collected, name):
    value = collected[name]
    if isinstance(value, CheckFailed):
        raise value
    return value


def _check_recorded(collected):
    s, f = _number(collected, "standard"), _number(collected, "flash")
    if s <= 0 or f <= 0:
        raise CheckFailed("predictions must be positive element counts",
                          expected="standard > 0 and flash > 0", got="%g, %g" % (s, f))
    return "recorded: standard = %.6g, flash = %.6g elements (ratio %.2f×)" % (s, f, s / f)


def _check_standard(collected):
    want = io_model.standard_accesses(PREDICT_N, PREDICT_N, PREDICT_D)
    return relative_close("standard", _number(collected, "standard"), want, PREDICT_RTOL,
                          what="io_model.standard_accesses counts")


def _check_flash(collected):
    want = _measured_flash()
    br, bc = io_model.block_sizes(PREDICT_M, PREDICT_D)
    return relative_close("flash", _number(collected, "flash"), want, PREDICT_RTOL,
                          what="IOCounter measured (Br=%d, Bc=%d)" % (br, bc))


# ------------------------------------------------------------------------------------------
# Step 2 -- Scratch: the monoid
# ------------------------------------------------------------------------------------------

def _state(value, what):
    """Phase 1: a learner's state (m, l) as two plain arrays."""
    return plain_tuple(value, ("m", "l"), what)


def _compare_state(what, got, want, shapes):
    assert_close("m", got[0], np.asarray(want[0]), shapes=shapes, dtype="float64", context=what)
    return assert_close("l", got[1], np.asarray(want[1]), shapes=shapes, dtype="float64",
                        context=what)


def _blocks():
    r = rng(1)
    x = r.randn(4, 7) * 3.0
    x[1] = -np.inf                       # a fully masked row
    x[2, :3] = -np.inf                   # partly masked
    x[3] += 40.0                         # large values
    return x


def _collect_from_block(ns):
    x = _blocks()
    return _state(call_learner(ns["from_block"], x.copy(), shapes=shapes_of(x=x),
                               context="from_block(x)"), "from_block(x)")


def _judge_from_block(got):
    x = _blocks()
    _compare_state("from_block(x) with x (4, 7) incl. an all -inf row", got, lib.from_block(x),
                   shapes_of(x=x))
    return "m = row max, l = Σ exp(x - m); the all -inf row gives (-inf, 0)"


def _states():
    r = rng(2)
    xs = [r.randn(3, 5) * 4.0 + off for off in (0.0, 30.0, -30.0)]
    xs[1][0] = -np.inf                   # one row of the second block is fully masked
    return xs


def _identity_state():
    return (np.full(3, -np.inf), np.zeros(3))


def _combine(ns, a, b):
    """Phase 1: the learner's combine(a, b) on copies, as plain arrays."""
    return _state(call_learner(ns["combine"], tuple(np.array(t) for t in a),
                               tuple(np.array(t) for t in b), context="combine"), "combine")


def _lib_state(x):
    state = lib.from_block(x)
    return (np.asarray(state.m), np.asarray(state.l))


def _collect_identity(ns):
    ident = _identity_state()
    out = []
    for x in _states():
        a = _lib_state(x)
        out.append((_combine(ns, ident, a), _combine(ns, a, ident)))
    return out, _combine(ns, ident, ident)


def _judge_identity(collected):
    pairs, both = collected
    shapes = {"m": [3], "l": [3]}
    for x, (left, right) in zip(_states(), pairs):
        a = _lib_state(x)
        _compare_state("combine(identity, a)", left, a, shapes)
        _compare_state("combine(a, identity)", right, a, shapes)
    _compare_state("combine(identity, identity)", both, _identity_state(), shapes)
    return "(-inf, 0) is neutral on both sides, also for fully masked rows (no NaN)"


def _collect_assoc(ns):
    a, b, c = [_lib_state(x) for x in _states()]
    left = _combine(ns, _combine(ns, a, b), c)
    right = _combine(ns, a, _combine(ns, b, c))
    return left, right, _combine(ns, a, b), _combine(ns, b, a)


def _judge_assoc(collected):
    left, right, ab, ba = collected
    shapes = {"m": [3], "l": [3]}
    _compare_state("(a ⊕ b) ⊕ c vs a ⊕ (b ⊕ c), block maxima 30 apart", left, right, shapes)
    _compare_state("a ⊕ b vs b ⊕ a", ab, ba, shapes)
    return "associative and commutative on blocks whose maxima differ by 30"


def _pieces():
    x = np.concatenate(_states(), axis=1)           # (3, 15)
    return x, [x[:, :4], x[:, 4:11], x[:, 11:]]


def _collect_pieces(ns):
    _, parts = _pieces()
    got = _state(call_learner(ns["from_block"], parts[0].copy(), context="from_block"),
                 "from_block")
    for part in parts[1:]:
        piece = _state(call_learner(ns["from_block"], part.copy(), context="from_block"),
                       "from_block")
        got = _combine(ns, got, piece)
    return got


def _judge_pieces(got):
    x, _ = _pieces()
    _compare_state("from_block(x1) ⊕ from_block(x2) ⊕ from_block(x3) vs from_block(x)",
                   got, _lib_state(x), shapes_of(x=x))
    return "combining the states of the pieces gives the state of the whole"


def _softmax_cases():
    r = rng(3)
    plain = r.randn(4, 37) * 2.0
    big = r.randn(2, 20) * 5.0 + 1000.0          # exp would overflow without the max
    masked = r.randn(3, 19)
    masked[0, :10] = -np.inf                    # the first blocks of a row are masked
    masked[2] = -np.inf                         # a fully masked row gives zeros
    return [("x (4, 37), block 8 (ragged tail)", plain, 8),
            ("x (4, 37), block 1", plain, 1),
            ("x (4, 37), block 64 (one block)", plain, 64),
            ("x (2, 20) ≈ 1000 (overflow test), block 6", big, 6),
            ("x (3, 19) with masked entries and an all -inf row, block 4", masked, 4)]


def _collect_online_softmax(ns):
    """Phase 1: each case's output, and the widths of the blocks online_softmax handed to the
    learner's from_block (it must fold the blocks, not reduce the whole row at once)."""
    out = []
    for label, x, block in _softmax_cases():
        widths = []
        from_block = ns["from_block"]

        def counting(blk, *args, **kwargs):
            widths.append(int(np.shape(blk)[-1]) if np.ndim(blk) else -1)
            return from_block(blk, *args, **kwargs)
        ns["from_block"] = counting
        try:
            got = call_learner(ns["online_softmax"], x.copy(), block, shapes=shapes_of(x=x),
                               context=label)
        finally:
            ns["from_block"] = from_block
        out.append((plain_array(got), list(widths)))
    return out


def _judge_online_softmax(collected):
    worst = 0.0
    for (label, x, block), (got, widths) in zip(_softmax_cases(), collected):
        n = x.shape[-1]
        blocks = -(-n // block)
        if len(widths) < blocks or max(widths) > block:
            raise CheckFailed(
                "%s: online_softmax must stream over the blocks -- call from_block on each "
                "block of at most block_size columns and fold the states with combine -- but it "
                "called from_block on widths %s" % (label, widths[:12] or "never"),
                expected="from_block called on %d blocks of width <= %d" % (blocks, block),
                got="%d calls, widths %s" % (len(widths), widths[:12]))
        want = lib.online_softmax(x, n)
        worst = max(worst, assert_close("softmax", got, want, shapes=shapes_of(x=x),
                                        dtype="float64", context=label))
    return "5 inputs, streamed block by block; max |Δ| = %.2g" % worst


# ------------------------------------------------------------------------------------------
# Step 3 -- Compose: tiled forward
# ------------------------------------------------------------------------------------------

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

# The memory check: one case where a full Nq×Nk float64 score matrix (4 MiB), or one query tile
# against every key (2 MiB), is above what tiles need (tiled_budget: 1.5 MiB). Values are
# spot-checked on the first SPOT_ROWS rows (the other checks test them in full).
TILED_CASE = ("Nq=128, Nk=4096, d=2, blocks 64×256", 128, 4096, 2, 2, 64, 256)
SPOT_ROWS = 16


def _compose_inputs(n_q, n_k, d, dv, scale):
    r = rng(10 + n_q + n_k)
    return r.randn(n_q, d) * scale, r.randn(n_k, d), r.randn(n_k, dv)


def _collect_compose(ns):
    out = []
    for label, n_q, n_k, d, dv, bq, bk, causal, scale in COMPOSE_CASES:
        q, k, v = _compose_inputs(n_q, n_k, d, dv, scale)
        got = call_learner(ns["attention"], q.copy(), k.copy(), v.copy(), bq, bk,
                           causal=causal, shapes=shapes_of(q=q, k=k, v=v), context=label)
        out.append(plain_tuple(got, ("o", "lse"), "attention"))
    return out


def _judge_compose(name, output):
    """The judge of one output ("o" or "lse") on the cases of check ``name``: each check compares
    only its own output, so a wrong o never shows up as the lse check's message."""
    index = {"o": 0, "lse": 1}[output]

    def judge(collected):
        worst = 0.0
        for i in CHECK_CASES[name]:
            label, n_q, n_k, d, dv, bq, bk, causal, scale = COMPOSE_CASES[i]
            q, k, v = _compose_inputs(n_q, n_k, d, dv, scale)
            want = reference.forward(q, k, v, causal=causal)[index]
            shapes = shapes_of(q=q, k=k, v=v)
            worst = max(worst, assert_close(output, collected[i][index], want, shapes=shapes,
                                            dtype="float64", context=label))
        return "%d cases, max |Δ| %s = %.2g against reference.forward (float64)" % (
            len(CHECK_CASES[name]), output, worst)
    return judge


def _collect_tiled(ns):
    label, n_q, n_k, d, dv, bq, bk = TILED_CASE
    r = rng(99)
    q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
    out, peak = peak_memory(call_learner, ns["attention"], q, k, v, bq, bk, causal=False,
                            shapes=shapes_of(q=q, k=k, v=v), context=label)
    return plain_tuple(out, ("o", "lse"), "attention"), peak


def _judge_tiled(collected):
    (o, lse), peak = collected
    label, n_q, n_k, d, dv, bq, bk = TILED_CASE
    r = rng(99)
    q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
    shapes = shapes_of(q=q, k=k, v=v)
    expect_array("o", o, (n_q, dv), shapes)
    expect_array("lse", lse, (n_q,), shapes)
    want_o, want_lse = reference.forward(q[:SPOT_ROWS], k, v)
    context = label + ", rows 0..%d" % (SPOT_ROWS - 1)
    assert_close("o", o[:SPOT_ROWS], want_o, shapes=shapes, dtype="float64", context=context)
    assert_close("lse", lse[:SPOT_ROWS], want_lse, shapes=shapes, dtype="float64",
                 context=context)
    io_bytes = 8 * (n_q * d + n_k * d + n_k * dv + n_q * dv + n_q)
    return assert_tiled(peak, n_q=n_q, n_k=n_k, io_bytes=io_bytes, block_q=bq, block_k=bk,
                        context=label, shapes=shapes)


# ------------------------------------------------------------------------------------------
# Step 4 -- Probe a claim
# ------------------------------------------------------------------------------------------

PROBE_NS = [1024, 2048, 4096, 8192, 16384]
PROBE_MS = [16384, 32768, 65536, 131072]
PROBE_DS = [16, 32, 64, 128]
SLOPE_ATOL = 0.02


def _fit(xs, ys):
    return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


PROBE_KEYS = ("slope_n", "slope_m", "slope_d", "figure2_ratio", "baseline_ratio", "measured_ratio",
              "measured_speedup")


def h200_figure2() -> dict:
    """The H200's Figure 2 measurement handed to ``probe`` (nlpcore.measured, shipped with the
    site); a CheckFailed names what is missing when this build has no record."""
    h200 = measured.figure2_h200()
    if not h200 or not all((h200.get(k) or {}).get("hbm_gb") for k in ("baseline", "triton")):
        raise CheckFailed("this build has no H200 measurement (bench/results/io_h200.json)",
                          expected="the record bench/io_h200.py writes", got="none")
    return h200


def expected_probe(model, h200) -> dict:
    """What a correct probe reports for ``model`` and the measurement ``h200`` (the grader's own)."""
    fig = model.figure2()
    return {
        "slope_n": _fit(PROBE_NS, [model.flash_accesses(n, n, 64, A100_M) for n in PROBE_NS]),
        "slope_m": _fit(PROBE_MS, [model.flash_accesses(4096, 4096, 64, m) for m in PROBE_MS]),
        "slope_d": _fit(PROBE_DS, [model.flash_accesses(4096, 4096, d, A100_M) for d in PROBE_DS]),
        "figure2_ratio": fig["standard_gb"] / fig["flash_gb"],
        "baseline_ratio": fig["baseline_standard_gb"] / fig["baseline_flash_gb"],
        "measured_ratio": h200["baseline"]["hbm_gb"] / h200["triton"]["hbm_gb"],
        "measured_speedup": h200["baseline"]["runtime_ms"] / h200["triton"]["runtime_ms"],
    }


def _learner_probe(ns, model, h200):
    """Phase 1: the learner's probe(model, h200) as {key: float or the CheckFailed}; it gets a
    copy of the measurement, so nothing it does to it reaches the judge."""
    out = call_learner(ns["probe"], model, copy.deepcopy(h200), context="probe(model, h200)")
    if not isinstance(out, dict):
        raise CheckFailed("probe must return a dict", expected="dict with " + ", ".join(PROBE_KEYS),
                          got=type(out).__name__)
    missing = [k for k in PROBE_KEYS if k not in out]
    if missing:
        raise CheckFailed("probe's dict lacks %s" % ", ".join(missing),
                          expected="keys " + ", ".join(PROBE_KEYS),
                          got="keys %s" % sorted(map(str, out)))
    plain = {}
    for key in PROBE_KEYS:
        try:
            plain[key] = expect_number(key, out[key])
        except CheckFailed as fail:
            plain[key] = fail
    return plain


def _collect_probe(ns):
    return {"io_model": _learner_probe(ns, io_model, h200_figure2()),
            "fake": _learner_probe(ns, _PowerLawModel(), _FAKE_H200)}


def _probed(got, key):
    if isinstance(got[key], CheckFailed):
        raise got[key]
    return got[key]


THEORY = {"slope_n": 2.0, "slope_m": -1.0, "slope_d": 2.0}


def _check_slopes(collected):
    h200 = h200_figure2()
    got = collected["io_model"]
    want = expected_probe(io_model, h200)
    lines = []
    for key in ("slope_n", "slope_m", "slope_d"):
        g = _probed(got, key)
        if abs(g - want[key]) > SLOPE_ATOL:
            raise CheckFailed("%s = %.4f but the IO model's accesses give %.4f" % (key, g, want[key]),
                              expected="%.4f" % want[key], got="%.4f" % g,
                              tolerance="|Δ| <= %g" % SLOPE_ATOL, max_abs_err=abs(g - want[key]))
        lines.append("%s = %.3f (Theorem 2: %g)" % (key, g, THEORY[key]))
    return "; ".join(lines) + ". Below the Θ exponents because the N·d terms (reading K, V " \
        "once, writing lse) do not shrink with M."


def _check_figure2(collected):
    h200 = h200_figure2()
    got = collected["io_model"]
    want = expected_probe(io_model, h200)
    texts = [relative_close(key, _probed(got, key), want[key], 0.01, what="io_model.figure2() gives")
             for key in ("figure2_ratio", "baseline_ratio")]
    fig = io_model.figure2()
    return "; ".join(texts) + ("; the paper measured %.1f× on an A100 — attention alone misses the mask "
                               "and dropout passes, the baseline's count has them" % fig["paper_ratio"])


def _check_h200(collected):
    h200 = h200_figure2()
    got = collected["io_model"]
    want = expected_probe(io_model, h200)
    texts = [relative_close(key, _probed(got, key), want[key], 0.01, what="the H200 record gives")
             for key in ("measured_ratio", "measured_speedup")]
    fig = io_model.figure2()
    return "; ".join(texts) + (
        ". The model predicts %.1f× less traffic; the %s's counters saw %.1f× (PyTorch's softmax "
        "backward adds a pass, and our kernel skips the tiles above the diagonal); the speed-up is "
        "%.1f× against the paper's %.1f× on an A100" % (
            fig["baseline_ratio"], h200["gpu"], want["measured_ratio"], want["measured_speedup"],
            fig["paper"]["standard_ms"] / fig["paper"]["flash_ms"]))


class _PowerLawModel:
    """A stand-in IO model with known exponents, to see that ``probe`` measures."""

    @staticmethod
    def flash_accesses(n_q, n_k, d, sram_elems, **_):
        return float(n_q) ** 1.5 * float(d) ** 3 / float(sram_elems) ** 0.5

    @staticmethod
    def standard_accesses(n_q, n_k, d, **_):
        return 4.0 * n_q * n_k

    @staticmethod
    def figure2():
        return {"standard_gb": 30.0, "flash_gb": 5.0, "ratio": 6.0, "baseline_standard_gb": 44.0,
                "baseline_flash_gb": 4.0, "baseline_ratio": 11.0}

    block_sizes = staticmethod(io_model.block_sizes)


# Made-up measurements: a probe that returns the real record's numbers fails on these.
_FAKE_H200 = {"baseline": {"hbm_gb": 30.0, "runtime_ms": 12.0, "model_gb": 29.0},
              "triton": {"hbm_gb": 2.5, "runtime_ms": 1.5, "model_gb": 2.0}, "gpu": "made-up GPU"}


def _check_measures(collected):
    got = collected["fake"]
    want = {"slope_n": 1.5, "slope_m": -0.5, "slope_d": 3.0, "figure2_ratio": 6.0, "baseline_ratio": 11.0,
            "measured_ratio": 12.0, "measured_speedup": 8.0}
    for key, w in want.items():
        g = _probed(got, key)
        if abs(g - w) > 1e-6 * max(1.0, abs(w)):
            raise CheckFailed("given a model whose accesses are N^1.5·d^3/M^0.5 and whose "
                              "Figure 2 ratios are 6 and 11 (and made-up measurements of 12× and "
                              "8×), probe reported %s = %.4g: it must compute from what it is "
                              "given, not return fixed numbers" % (key, g),
                              expected="%s = %g" % (key, w), got="%.6g" % g,
                              tolerance="1e-6 relative")
    return "given a made-up model and made-up measurements it reports theirs"


# ------------------------------------------------------------------------------------------

def build() -> Exercise:
    _measured_flash()
    predict = Step(
        id="predict", kind="Predict", title="Predict the HBM traffic", minutes=15,
        statement=HERE.statement("predict", N=PREDICT_N, d=PREDICT_D, M=PREDICT_M,
                                 sram_kib=hardware.A100_SRAM_BYTES // 1024),
        starter=HERE.starter("predict"), solution=HERE.solution("predict"),
        hints=(
            "Standard: count each matrix once per read and once per write. $S$ is written, read, "
            "then $P$ is written, read: that is already $4N^2$.",
            "Flash: $K$ and $V$ are read once. The outer loop runs over "
            "$T_c = \\lceil N / B_c \\rceil$ key tiles, and each iteration reads all of $Q$ and "
            "reads and writes all of $O$.",
            "$B_c = \\lceil %d / %d \\rceil = %d$, so $T_c = \\lceil %d / %d \\rceil = %d$."
            % (PREDICT_M, 4 * PREDICT_D, _PREDICT_BC, PREDICT_N, _PREDICT_BC,
               -(-PREDICT_N // _PREDICT_BC)),
        ),
        required=("standard", "flash"), record=("standard", "flash"),
        refuse=_PREDICT_REFUSES,
        checks=(
            Check("recorded", "prediction recorded", collect=_collect_prediction,
                  judge=_check_recorded),
            Check("standard", "standard attention within 20% of the count",
                  collect=_collect_prediction, judge=_check_standard),
            Check("flash", "FlashAttention within 20% of IOCounter",
                  collect=_collect_prediction, judge=_check_flash),
        ))
    scratch = Step(
        id="scratch", kind="Scratch", title="The online-softmax monoid", minutes=25,
        statement=HERE.statement("scratch"),
        starter=HERE.starter("scratch"), solution=HERE.solution("scratch"),
        hints=(
            "`m = x.max(axis=-1)`, then `l = exp(x - m[..., None]).sum(axis=-1)`.",
            "Where `m` is $-\\infty$ no element has been seen: subtract 0 instead, "
            "`np.where(np.isfinite(m), m, 0)`, so `exp(-inf - 0) = 0`.",
            "`online_softmax`: start from the identity, fold `from_block(x[..., s:s+B])` for "
            "`s in range(0, N, B)`, then return `exp(x - m) / l` (0 where `l == 0`).",
        ),
        required=("from_block", "combine", "online_softmax"),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("from-block", "from_block reduces a block to (m, l)",
                  collect=_collect_from_block, judge=_judge_from_block),
            Check("identity", "identity law: (-inf, 0) is neutral",
                  collect=_collect_identity, judge=_judge_identity),
            Check("associative", "associativity (and commutativity)",
                  collect=_collect_assoc, judge=_judge_assoc),
            Check("pieces", "combining pieces = reducing the whole",
                  collect=_collect_pieces, judge=_judge_pieces),
            Check("softmax", "online_softmax streams the blocks and matches softmax "
                  "(ragged, overflow, masked)",
                  collect=_collect_online_softmax, judge=_judge_online_softmax),
        ))
    compose = Step(
        id="compose", kind="Compose", title="Compose the tiled forward", minutes=30,
        statement=HERE.statement("compose"),
        starter=HERE.starter("compose"), solution=HERE.solution("compose"),
        hints=(
            "`m_new = np.maximum(m, s.max(axis=1))`; `alpha = np.exp(m - m_new)` rescales both "
            "`l` and `acc` (broadcast `alpha[:, None]` for `acc`).",
            "Causal: `s = np.where(cols <= rows, s, -np.inf)` with `rows = np.arange(q0, q1)[:, None]`"
            " and `cols = np.arange(k0, k1)[None, :]`.",
            "Causal is top-left aligned: row i sees keys 0..i whatever Nk is, so with Nq > Nk "
            "the rows past Nk see every key. Key tile 0 holds key 0, which every row may "
            "attend, so each row's m is finite after the first tile; tiles that start after "
            "the tile's last row (k0 > q1 - 1) can be skipped.",
            "Scores of several hundred overflow exp: always subtract the running max before "
            "exponentiating, and rescale l and acc by exp(m - m_new) when it grows.",
        ),
        required=("attention",),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("ragged", "o on ragged sizes, dv ≠ d, blocks > N",
                  collect=_collect_compose, judge=_judge_compose("ragged", "o")),
            Check("causal", "o with the causal mask, Nq = Nk, Nq < Nk and Nq > Nk",
                  collect=_collect_compose, judge=_judge_compose("causal", "o")),
            Check("large", "large logits (scores in the hundreds)",
                  collect=_collect_compose, judge=_judge_compose("large", "o")),
            Check("lse", "lse (log-sum-exp) on every case",
                  collect=_collect_compose, judge=_judge_compose("lse", "lse")),
            Check("tiled", "memory stays at tile size (no Nq×Nk array)",
                  collect=_collect_tiled, judge=_judge_tiled),
        ))
    probe = Step(
        id="probe", kind="Probe a claim", title="Θ(N²d²/M) and Figure 2, modelled and measured", minutes=25,
        statement=HERE.statement("probe"),
        starter=HERE.starter("probe"), solution=HERE.solution("probe"),
        hints=(
            "`io_model.flash_accesses(n, n, 64, %d)` is the forward count for one head." % A100_M,
            "`np.polyfit(np.log(xs), np.log(ys), 1)[0]` is the slope.",
            "`fig = io_model.figure2(); fig['standard_gb'] / fig['flash_gb']`.",
            "`h200['baseline']['hbm_gb'] / h200['triton']['hbm_gb']` is the measured traffic ratio.",
        ),
        required=("probe",),
        checks=(
            Check("slopes", "exponents in N, M, d match the IO model",
                  collect=_collect_probe, judge=_check_slopes),
            Check("figure2", "Figure 2 ratios from the IO model (attention alone, as the baseline)",
                  collect=_collect_probe, judge=_check_figure2),
            Check("h200", "Figure 2 measured on an H200: traffic ratio and speed-up",
                  collect=_collect_probe, judge=_check_h200),
            Check("measures", "probe measures the model and measurements it is given",
                  collect=_collect_probe, judge=_check_measures),
        ))
    return Exercise(
        id="online-softmax", title="Online softmax, tiled attention and the IO model",
        tier="browser", minutes=90,
        summary=("Predict the HBM traffic, build the (m, ℓ) monoid from scratch, compose the "
                 "tiled forward from it, then probe Theorem 2 with the IO model."),
        steps=(predict, scratch, compose, probe),
        sources=("Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
                 "arXiv:1805.02867",
                 "Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithms 0–1, Theorem 2, "
                 "Figure 2)",
                 "Rabe & Staats 2021, Self-attention does not need O(n²) memory, "
                 "arXiv:2112.05682"))
