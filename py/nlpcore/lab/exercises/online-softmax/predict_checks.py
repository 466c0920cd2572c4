"""Checks of online-softmax's Predict step: the two predictions against the IO model's count and
IOCounter's measurement.

Two phases each: ``collect`` calls the learner's code and returns plain data; ``judge``
computes the expected values once the learner's code is gone.
"""
from __future__ import annotations

import numpy as np

from nlpcore import hardware
from nlpcore.kernels import io_model
from nlpcore.lab.judging import expect_number, relative_close
from nlpcore.lab.model import CheckFailed


# The Predict step's setting (also written in its starter).
A100_M = hardware.A100_SRAM_FP16_ELEMENTS  # the paper's SRAM size M, in fp16 elements
PREDICT_N, PREDICT_D, PREDICT_M = 512, 64, A100_M
PREDICT_BC = io_model.block_sizes(PREDICT_M, PREDICT_D)[1]  # Bc = ceil(M / 4d), for a hint
PREDICT_RTOL = 0.20
# Predict before you measure: the IO model and the kernel that the counter runs are refused.
PREDICT_REFUSES = (
    "nlpcore.kernels.io_model", "nlpcore.kernels.trace",        # the closed forms and the counter
    "nlpcore.kernels.flash_np",                                 # the kernel the counter runs
    "nlpcore.web.lessons", "nlpcore.web.viz", "nlpcore.web.lab")  # pages' functions that call them


_MEASURED: dict = {}   # filled by build(), before any learner code runs (the snapshot keeps it)


def measured_flash() -> int:
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


def collect_prediction(ns):
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


def check_recorded(collected):
    s, f = _number(collected, "standard"), _number(collected, "flash")
    if s <= 0 or f <= 0:
        raise CheckFailed("predictions must be positive element counts",
                          expected="standard > 0 and flash > 0", got="%g, %g" % (s, f))
    return "recorded: standard = %.6g, flash = %.6g elements (ratio %.2f×)" % (s, f, s / f)


def check_standard(collected):
    want = io_model.standard_accesses(PREDICT_N, PREDICT_N, PREDICT_D)
    return relative_close("standard", _number(collected, "standard"), want, PREDICT_RTOL,
                          what="io_model.standard_accesses counts")


def check_flash(collected):
    want = measured_flash()
    br, bc = io_model.block_sizes(PREDICT_M, PREDICT_D)
    return relative_close("flash", _number(collected, "flash"), want, PREDICT_RTOL,
                          what="IOCounter measured (Br=%d, Bc=%d)" % (br, bc))
