"""Checks of online-softmax's Probe step: exponents and Figure 2 ratios from the IO model and the
measurements it is given.

Two phases each: ``collect`` calls the learner's code and returns plain data; ``judge``
computes the expected values once the learner's code is gone.
"""
from __future__ import annotations

import copy

import numpy as np

from nlpcore import hardware, measured
from nlpcore.kernels import io_model
from nlpcore.lab.judging import call_learner, expect_number, relative_close
from nlpcore.lab.model import CheckFailed

A100_M = hardware.A100_SRAM_FP16_ELEMENTS  # the paper's SRAM size M, in fp16 elements


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


def collect_probe(ns):
    return {"io_model": _learner_probe(ns, io_model, h200_figure2()),
            "fake": _learner_probe(ns, _PowerLawModel(), _FAKE_H200)}


def _probed(got, key):
    if isinstance(got[key], CheckFailed):
        raise got[key]
    return got[key]


THEORY = {"slope_n": 2.0, "slope_m": -1.0, "slope_d": 2.0}


def check_slopes(collected):
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


def check_figure2(collected):
    h200 = h200_figure2()
    got = collected["io_model"]
    want = expected_probe(io_model, h200)
    texts = [relative_close(key, _probed(got, key), want[key], 0.01, what="io_model.figure2() gives")
             for key in ("figure2_ratio", "baseline_ratio")]
    fig = io_model.figure2()
    return "; ".join(texts) + ("; the paper measured %.1f× on an A100 — attention alone misses the mask "
                               "and dropout passes, the baseline's count has them" % fig["paper_ratio"])


def check_h200(collected):
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


def check_measures(collected):
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
