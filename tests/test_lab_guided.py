"""The guided lab's answer checks: truths come from the library, wrong answers fail."""
from __future__ import annotations

import pytest

from nlpcore.kernels import io_model, tiling
from nlpcore.lab import guided


def test_causal_skip_counts_the_trace():
    br, bc = io_model.block_sizes(guided.VIZ_M, guided.VIZ_D)
    t = guided.VIZ_N // br
    assert guided.skipped_tiles(guided.VIZ_N, guided.VIZ_D, guided.VIZ_M) == t * (t - 1) // 2
    assert guided.check("causal-skip", t * (t - 1) // 2)["status"] == "pass"
    assert guided.check("causal-skip", t * t)["status"] == "fail"


def test_io_ratio_within_five_percent():
    truth = io_model.standard_accesses(4096, 4096, 64) / io_model.flash_accesses(4096, 4096, 64, 98304)
    assert guided.check("io-ratio", "%.3f" % truth)["status"] == "pass"
    assert guided.check("io-ratio", truth * 1.1)["status"] == "fail"
    assert guided.check("io-ratio", "lots")["status"] == "fail"


def test_compare_steps_need_an_observed_run():
    assert "run the comparison" in guided.check("run-compare", 1e-7)["message"]
    d = guided.TILE_D
    seen = {"status": "match", "maxAbsErr": 2.5e-7, "params": {"d": d},
            "plan": {"bytes_used": tiling.plan(d).bytes_used, "br": 1, "bc": 2}}
    assert guided.check("run-compare", "2.5e-7", seen)["status"] == "pass"
    assert guided.check("run-compare", 1e-3, seen)["status"] == "fail"
    assert guided.check("tile-bytes", tiling.plan(d).bytes_used, seen)["status"] == "pass"
    assert guided.check("tile-bytes", 16384 + 1, seen)["status"] == "fail"
    assert "d = %d" % d in guided.check("tile-bytes", 1, dict(seen, params={"d": 7}))["message"]


@pytest.mark.parametrize("step,right", [("why-not-zero", guided.WHY_ANSWER),
                                        ("memory-bound", guided.BOUND_ANSWER)])
def test_choices(step, right):
    assert guided.check(step, right)["status"] == "pass"
    assert guided.check(step, (right + 1) % 3)["status"] == "fail"
    assert guided.check(step, None)["status"] == "fail"


def test_unknown_step_is_a_value_error():
    with pytest.raises(ValueError, match="step must be one of"):
        guided.check("nope", 1)
