"""Exercise ``online-softmax``: predict HBM traffic, build the (m, l) monoid, tile attention,
probe Theorem 2 with the IO model.

Sources: Milakov & Gimelshein 2018 (arXiv:1805.02867) for the online normaliser; Dao et al.
2022 (arXiv:2205.14135) Algorithm 0/1, Theorem 2 and Figure 2; Rabe & Staats 2021
(arXiv:2112.05682) for attention computed in chunks with the same rescaling.
"""
from __future__ import annotations

import numpy as np

from nlpcore import hardware, measured
from nlpcore.kernels import io_model, reference
from nlpcore.kernels import online_softmax as lib
from nlpcore.lab.framework import (Folder, CheckFailed, Check, Exercise, Step, assert_close, call_learner,
                        expect_number, relative_close, rng, shapes_of)

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions

# The Predict step's setting (also written in its starter).
A100_M = hardware.A100_SRAM_FP16_ELEMENTS  # the paper's SRAM size M, in fp16 elements
PREDICT_N, PREDICT_D, PREDICT_M = 512, 64, A100_M
_PREDICT_BC = io_model.block_sizes(PREDICT_M, PREDICT_D)[1]  # Bc = ceil(M / 4d), for a hint
PREDICT_RTOL = 0.20


# ------------------------------------------------------------------------------------------
# Step 1 -- Predict
# ------------------------------------------------------------------------------------------

def _measured_flash() -> int:
    """Forward accesses of flash_np on N×d inputs with the paper's blocks, counted by IOCounter
    when flash_np is available (else the closed form, which tests hold equal to it)."""
    try:
        from nlpcore.kernels import flash_np
    except ImportError:
        return io_model.flash_accesses(PREDICT_N, PREDICT_N, PREDICT_D, PREDICT_M)
    br, bc = io_model.block_sizes(PREDICT_M, PREDICT_D)
    x = np.zeros((PREDICT_N, PREDICT_D), dtype=np.float32)
    counter = io_model.IOCounter()
    flash_np.forward(x, x, x, block_q=br, block_k=bc, io=counter)
    return counter.reads + counter.writes


def _check_recorded(ns):
    s = expect_number("standard", ns.get("standard"))
    f = expect_number("flash", ns.get("flash"))
    if s <= 0 or f <= 0:
        raise CheckFailed("predictions must be positive element counts",
                          expected="standard > 0 and flash > 0", got="%g, %g" % (s, f))
    return "recorded: standard = %.6g, flash = %.6g elements (ratio %.2f×)" % (s, f, s / f)


def _check_standard(ns):
    want = io_model.standard_accesses(PREDICT_N, PREDICT_N, PREDICT_D)
    return relative_close("standard", ns.get("standard"), want, PREDICT_RTOL,
                          what="io_model.standard_accesses counts")


def _check_flash(ns):
    want = _measured_flash()
    br, bc = io_model.block_sizes(PREDICT_M, PREDICT_D)
    text = relative_close("flash", ns.get("flash"), want, PREDICT_RTOL,
                          what="IOCounter measured (Br=%d, Bc=%d)" % (br, bc))
    return text


# ------------------------------------------------------------------------------------------
# Step 2 -- Scratch: the monoid
# ------------------------------------------------------------------------------------------

def _state(ns, value, what):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed("%s must return a pair (m, l)" % what, expected="(m, l)",
                          got=type(value).__name__)
    return np.asarray(value[0], dtype=np.float64), np.asarray(value[1], dtype=np.float64)


def _compare_state(what, got, want, shapes):
    assert_close("m", got[0], want[0], shapes=shapes, dtype="float64", context=what)
    return assert_close("l", got[1], want[1], shapes=shapes, dtype="float64", context=what)


def _blocks():
    r = rng(1)
    x = r.randn(4, 7) * 3.0
    x[1] = -np.inf                       # a fully masked row
    x[2, :3] = -np.inf                   # partly masked
    x[3] += 40.0                         # large values
    return x


def _check_from_block(ns):
    x = _blocks()
    shapes = shapes_of(x=x)
    got = _state(ns, ns["from_block"](x.copy()), "from_block(x)")
    want = lib.from_block(x)
    _compare_state("from_block(x) with x (4, 7) incl. an all -inf row", got, want, shapes)
    return "m = row max, l = Σ exp(x - m); the all -inf row gives (-inf, 0)"


def _states():
    r = rng(2)
    xs = [r.randn(3, 5) * 4.0 + off for off in (0.0, 30.0, -30.0)]
    xs[1][0] = -np.inf                   # one row of the second block is fully masked
    return xs


def _check_identity(ns):
    combine = ns["combine"]
    ident = (np.full(3, -np.inf), np.zeros(3))
    shapes = {"m": [3], "l": [3]}
    for x in _states():
        a = lib.from_block(x)
        a = (np.asarray(a.m), np.asarray(a.l))
        _compare_state("combine(identity, a)", _state(ns, combine(ident, a), "combine"), a, shapes)
        _compare_state("combine(a, identity)", _state(ns, combine(a, ident), "combine"), a, shapes)
    _compare_state("combine(identity, identity)", _state(ns, combine(ident, ident), "combine"),
                   ident, shapes)
    return "(-inf, 0) is neutral on both sides, also for fully masked rows (no NaN)"


def _check_assoc(ns):
    combine = ns["combine"]
    a, b, c = [tuple(np.asarray(t) for t in lib.from_block(x)) for x in _states()]
    shapes = {"m": [3], "l": [3]}
    left = _state(ns, combine(_state(ns, combine(a, b), "combine"), c), "combine")
    right = _state(ns, combine(a, _state(ns, combine(b, c), "combine")), "combine")
    _compare_state("(a ⊕ b) ⊕ c vs a ⊕ (b ⊕ c), block maxima 30 apart", left, right, shapes)
    swapped = _state(ns, combine(b, a), "combine")
    _compare_state("a ⊕ b vs b ⊕ a", _state(ns, combine(a, b), "combine"), swapped, shapes)
    return "associative and commutative on blocks whose maxima differ by 30"


def _check_homomorphism(ns):
    x = np.concatenate(_states(), axis=1)           # (3, 15)
    shapes = shapes_of(x=x)
    parts = [x[:, :4], x[:, 4:11], x[:, 11:]]
    combine, from_block = ns["combine"], ns["from_block"]
    got = _state(ns, from_block(parts[0]), "from_block")
    for part in parts[1:]:
        got = _state(ns, combine(got, _state(ns, from_block(part), "from_block")), "combine")
    want = lib.from_block(x)
    _compare_state("from_block(x1) ⊕ from_block(x2) ⊕ from_block(x3) vs from_block(x)",
                   got, want, shapes)
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


def _check_online_softmax(ns):
    worst = 0.0
    for label, x, block in _softmax_cases():
        got = call_learner(ns["online_softmax"], x.copy(), block, shapes=shapes_of(x=x),
                           context=label)
        want = lib.online_softmax(x, x.shape[-1])
        worst = max(worst, assert_close("softmax", got, want, shapes=shapes_of(x=x),
                                        dtype="float64", context=label))
    return "5 inputs, max |Δ| = %.2g" % worst


# ------------------------------------------------------------------------------------------
# Step 3 -- Compose: tiled forward
# ------------------------------------------------------------------------------------------

COMPOSE_CASES = [
    # (label, n_q, n_k, d, dv, block_q, block_k, causal)
    ("ragged: Nq=37, Nk=53, d=16, blocks 8×16", 37, 53, 16, 16, 8, 16, False),
    ("Nk not a multiple, dv ≠ d: Nq=20, Nk=45, d=8, dv=12, blocks 7×10", 20, 45, 8, 12, 7, 10, False),
    ("blocks larger than N: Nq=5, Nk=6, d=4, blocks 16×16", 5, 6, 4, 4, 16, 16, False),
    ("causal: N=45, d=16, blocks 16×8", 45, 45, 16, 16, 16, 8, True),
    ("causal, block 1: N=9, d=4, blocks 1×1", 9, 9, 4, 4, 1, 1, True),
]


def _check_compose(case_slice, with_lse):
    def run(ns):
        worst = 0.0
        for label, n_q, n_k, d, dv, bq, bk, causal in COMPOSE_CASES[case_slice]:
            r = rng(10 + n_q + n_k)
            q, k, v = r.randn(n_q, d), r.randn(n_k, d), r.randn(n_k, dv)
            want_o, want_lse = reference.forward(q, k, v, causal=causal)
            out = call_learner(ns["attention"], q.copy(), k.copy(), v.copy(), bq, bk,
                               causal=causal, shapes=shapes_of(q=q, k=k, v=v), context=label)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise CheckFailed("attention must return (o, lse)", expected="(o, lse)",
                                  got=type(out).__name__)
            shapes = shapes_of(q=q, k=k, v=v)
            worst = max(worst, assert_close("o", out[0], want_o, shapes=shapes,
                                            dtype="float64", context=label))
            if with_lse:
                worst = max(worst, assert_close("lse", out[1], want_lse, shapes=shapes,
                                                dtype="float64", context=label))
        return "max |Δ| = %.2g against reference.forward (float64)" % worst
    return run


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
    out = ns["probe"](model, h200)
    if not isinstance(out, dict):
        raise CheckFailed("probe must return a dict", expected="dict with " + ", ".join(PROBE_KEYS),
                          got=type(out).__name__)
    missing = [k for k in PROBE_KEYS if k not in out]
    if missing:
        raise CheckFailed("probe's dict lacks %s" % ", ".join(missing),
                          expected="keys " + ", ".join(PROBE_KEYS), got="keys %s" % sorted(out))
    return out


THEORY = {"slope_n": 2.0, "slope_m": -1.0, "slope_d": 2.0}


def _check_slopes(ns):
    h200 = h200_figure2()
    got = _learner_probe(ns, io_model, h200)
    want = expected_probe(io_model, h200)
    lines = []
    for key in ("slope_n", "slope_m", "slope_d"):
        g = expect_number(key, got[key])
        if abs(g - want[key]) > SLOPE_ATOL:
            raise CheckFailed("%s = %.4f but the IO model's accesses give %.4f" % (key, g, want[key]),
                              expected="%.4f" % want[key], got="%.4f" % g,
                              tolerance="|Δ| <= %g" % SLOPE_ATOL, max_abs_err=abs(g - want[key]))
        lines.append("%s = %.3f (Theorem 2: %g)" % (key, g, THEORY[key]))
    return "; ".join(lines) + ". Below the Θ exponents because the N·d terms (reading K, V " \
        "once, writing lse) do not shrink with M."


def _check_figure2(ns):
    h200 = h200_figure2()
    got = _learner_probe(ns, io_model, h200)
    want = expected_probe(io_model, h200)
    texts = [relative_close(key, got[key], want[key], 0.01, what="io_model.figure2() gives")
             for key in ("figure2_ratio", "baseline_ratio")]
    fig = io_model.figure2()
    return "; ".join(texts) + ("; the paper measured %.1f× on an A100 — attention alone misses the mask "
                               "and dropout passes, the baseline's count has them" % fig["paper_ratio"])


def _check_h200(ns):
    h200 = h200_figure2()
    got = _learner_probe(ns, io_model, h200)
    want = expected_probe(io_model, h200)
    texts = [relative_close(key, got[key], want[key], 0.01, what="the H200 record gives")
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


def _check_measures(ns):
    fake = _PowerLawModel()
    got = _learner_probe(ns, fake, _FAKE_H200)
    want = {"slope_n": 1.5, "slope_m": -0.5, "slope_d": 3.0, "figure2_ratio": 6.0, "baseline_ratio": 11.0,
            "measured_ratio": 12.0, "measured_speedup": 8.0}
    for key, w in want.items():
        g = expect_number(key, got[key])
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
        checks=(
            Check("recorded", "prediction recorded", _check_recorded),
            Check("standard", "standard attention within 20% of the count", _check_standard),
            Check("flash", "FlashAttention within 20% of IOCounter", _check_flash),
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
        checks=(
            Check("from-block", "from_block reduces a block to (m, l)", _check_from_block),
            Check("identity", "identity law: (-inf, 0) is neutral", _check_identity),
            Check("associative", "associativity (and commutativity)", _check_assoc),
            Check("pieces", "combining pieces = reducing the whole", _check_homomorphism),
            Check("softmax", "online_softmax matches softmax (ragged, overflow, masked)",
                  _check_online_softmax),
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
            "In a causal tile a row may still have seen no key (m = -inf): shift by 0 there, as in "
            "the previous step, so you never compute exp(-inf - (-inf)).",
        ),
        required=("attention",),
        checks=(
            Check("ragged", "o on ragged sizes, dv ≠ d, blocks > N", _check_compose(slice(0, 3), False)),
            Check("causal", "o with the causal mask", _check_compose(slice(3, 5), False)),
            Check("lse", "lse (log-sum-exp) on every case", _check_compose(slice(0, 5), True)),
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
            Check("slopes", "exponents in N, M, d match the IO model", _check_slopes),
            Check("figure2", "Figure 2 ratios from the IO model (attention alone, as the baseline)",
                  _check_figure2),
            Check("h200", "Figure 2 measured on an H200: traffic ratio and speed-up", _check_h200),
            Check("measures", "probe measures the model and measurements it is given", _check_measures),
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
