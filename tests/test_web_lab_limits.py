"""lab.prepare's precision control and its refusal of runs that would take too long in the page
(issue 16, defects 4.11 and 4.12), in CPython."""
from __future__ import annotations

import time

import numpy as np
import pytest

from nlpcore import tolerances
from nlpcore.web import lab


def test_a_run_over_the_work_limit_is_refused_before_any_work():
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"too long.*1024\^2 x 136 = 570425344"):
        lab.prepare(n=1024, d=136, heads=4)
    assert time.perf_counter() - started < 0.5  # refused before drawing inputs or running
    assert lab.score_macs(1024, 136, 4) > lab.MAX_SCORE_MACS


def test_the_largest_run_at_the_limit_is_admitted():
    assert lab.score_macs(1024, 128, 4) == lab.MAX_SCORE_MACS
    out = lab.prepare(n=1024, d=128, heads=4)
    assert out["cpu"]["ok"] and out["mirror_steps"] == lab.mirror_steps(1024, 4, lab.tiling.plan(128))


@pytest.mark.parametrize("n, d, causal, padding", [(77, 32, True, 3), (130, 80, False, 0),
                                                   (19, 16, False, 19)])
def test_float16_inputs_run_through_both_cpu_paths(n, d, causal, padding):
    out = lab.prepare(n=n, d=d, causal=causal, padding=padding, heads=2, precision="float16")
    cpu = out["cpu"]
    assert out["args"]["precision"] == "float16"
    assert cpu["ok"], cpu
    assert cpu["rtol"] == tolerances.PAGE_FLOAT16["mirror_vs_flash_np"].rtol
    if padding < n:
        # flash_np's o is float16: more than the float32 bar, within half an ulp of float16.
        assert cpu["o_max_abs"] > tolerances.PAGE["mirror_vs_flash_np"].atol
        q, _, _, _ = lab.make_inputs(n, d, padding, 2, 0, "float16")
        assert q.dtype == np.float16


def test_float16_inputs_are_the_float32_draw_rounded():
    q32, k32, v32, _ = lab.make_inputs(10, 8, 0, 1, 5)
    q16, k16, v16, _ = lab.make_inputs(10, 8, 0, 1, 5, "float16")
    for a, b in ((q32, q16), (k32, k16), (v32, v16)):
        assert np.array_equal(a.astype(np.float16), b)


def test_an_unknown_precision_is_refused_by_name():
    with pytest.raises(ValueError, match="precision: expected one of float32, float16, got 'bfloat16'"):
        lab.prepare(n=8, d=8, precision="bfloat16")
