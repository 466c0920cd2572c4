"""The guided lab's answer checks: truths come from the library or the page's own observation,
answers are strictly typed, wrong answers fail with a message that fits the step."""
from __future__ import annotations

import pathlib

import pytest

from nlpcore.kernels import io_model, tiling
from nlpcore.lab import guided
from nlpcore.web import exercises as web_exercises

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEEN = {"status": "match", "maxAbsErr": 2.5e-7, "params": {"d": guided.TILE_D},
        "plan": {"bytes_used": tiling.plan(guided.TILE_D).bytes_used}}
TIMED = {"timing": {"adapter": "test", "d": guided.TIMING_D, "rows": [
    {"n": 64, "tiled_ms": 1.0, "naive_ms": 0.8}, {"n": 1024, "tiled_ms": 4.0, "naive_ms": 10.0}]}}


def test_the_seed_lab_sixty_minutes_of_predict_run_measure_explain():
    assert guided.TITLE == "FlashAttention: Exact Attention That Respects the Memory Hierarchy"
    assert (guided.CODE, guided.TIER, guided.MINUTES) == ("F08.01", "browser", 60)
    assert sum(step["minutes"] for step in guided.STEPS) == guided.MINUTES
    kinds = {step["kind"] for step in guided.STEPS}
    assert kinds == {"Predict", "Run", "Measure", "Explain"}
    assert guided.TITLE in (ROOT / "site" / "lab.html").read_text(encoding="utf-8")
    assert guided.TITLE in (ROOT / "site" / "index.html").read_text(encoding="utf-8")
    ids = [s["id"] for s in guided.STEPS]
    assert len(ids) == len(set(ids))


def test_export_hides_the_right_choice():
    for item in guided.export():
        assert "right" not in item["answer"]
        for choice in item["answer"].get("choices", []):
            assert isinstance(choice, str)


def test_causal_skip_counts_the_trace():
    br, bc = io_model.block_sizes(guided.VIZ_M, guided.VIZ_D)
    t = guided.VIZ_N // br
    assert guided.skipped_tiles(guided.VIZ_N, guided.VIZ_D, guided.VIZ_M) == t * (t - 1) // 2
    assert guided.check("causal-skip", t * (t - 1) // 2)["status"] == "pass"
    assert guided.check("causal-skip", str(t * (t - 1) // 2))["status"] == "pass"
    assert guided.check("causal-skip", t * t)["status"] == "fail"


@pytest.mark.parametrize("bad", [True, False, 1.9, "1.9", "15.0", "2e1", None, [15], "fifteen"])
def test_integer_answers_are_strict(bad):
    out = guided.check("causal-skip", bad)
    assert out["status"] == "fail" and "whole number" in out["message"]


@pytest.mark.parametrize("bad", [True, "nan", "inf", float("nan"), None, "lots"])
def test_number_answers_are_strict(bad):
    assert guided.check("io-ratio", bad)["status"] == "fail"


def test_io_ratio_prompt_and_checker_agree_about_rounding():
    truth = io_model.standard_accesses(4096, 4096, 64) / io_model.flash_accesses(4096, 4096, 64, 98304)
    assert guided.check("io-ratio", "%.3f" % truth)["status"] == "pass"
    assert guided.check("io-ratio", "%.2f×" % truth)["status"] == "pass"
    shortcut = guided.io_ratio_shortcut()
    assert abs(shortcut - truth) > 0.05 * truth  # why the prompt says to round T_c up
    out = guided.check("io-ratio", shortcut)
    assert out["status"] == "fail" and "rounding" in out["message"]
    assert guided.check("io-ratio", truth * 1.1)["status"] == "fail"
    do = guided._step("io-ratio")["do"]
    assert "Round T_c up" in do and "⌈N/B_c⌉" in do


def test_small_m_is_the_io_model_crossover():
    m = guided.smallest_winning_m()
    n, d = guided.SMALL_M_N, guided.SMALL_M_D
    assert io_model.flash_accesses(n, n, d, m) < io_model.standard_accesses(n, n, d)
    assert io_model.flash_accesses(n, n, d, m // 2) >= io_model.standard_accesses(n, n, d)
    assert guided.check("small-m", m)["status"] == "pass"
    assert "still moves more" in guided.check("small-m", m // 2)["message"]
    assert "smaller M does too" in guided.check("small-m", m * 2)["message"]
    assert "power of two" in guided.check("small-m", m + 1)["message"]


def test_compare_steps_need_an_observed_passing_run():
    assert "Run the comparison" in guided.check("run-compare", 1e-7)["message"]
    assert guided.check("run-compare", "2.5e-7", SEEN)["status"] == "pass"
    assert guided.check("run-compare", 1e-3, SEEN)["status"] == "fail"
    feedback = guided.check("run-compare", 1e-3, SEEN)["message"]
    assert "data-" not in feedback and "verdict line" in feedback  # no DOM attribute names
    for status in ("mismatch", "error"):  # a failed run's number is never "right"
        out = guided.check("run-compare", "2.5e-7", dict(SEEN, status=status))
        assert out["status"] == "fail" and status in out["message"]


def test_tile_bytes_is_an_integer_from_the_plan():
    used = tiling.plan(guided.TILE_D).bytes_used
    assert guided.check("tile-bytes", used, SEEN)["status"] == "pass"
    assert guided.check("tile-bytes", str(used), SEEN)["status"] == "pass"
    assert guided.check("tile-bytes", used + 0.5, SEEN)["status"] == "fail"
    assert guided.check("tile-bytes", 16384 + 1, SEEN)["status"] == "fail"
    assert "d = %d" % guided.TILE_D in guided.check("tile-bytes", 1, dict(SEEN, params={"d": 7}))["message"]
    assert guided.check("tile-bytes", used, dict(SEEN, status="mismatch"))["status"] == "fail"


def test_tile_refuse_follows_the_plan():
    seen = {"status": "error", "params": {"d": guided.REFUSE_D}, "error": "no tile plan fits"}
    right = 0 if guided.plan_refuses() else 1
    assert guided.check("tile-refuse", right, seen)["status"] == "pass"
    assert guided.check("tile-refuse", 2, seen)["status"] == "fail"
    assert "d = %d" % guided.REFUSE_D in guided.check("tile-refuse", right, SEEN)["message"]


@pytest.mark.parametrize("step", ["predict-agree", "why-not-zero", "memory-bound"])
def test_choices_have_their_own_wrong_answer_messages(step):
    spec = guided._step(step)
    right = spec["answer"]["right"]
    assert guided.check(step, right)["status"] == "pass"
    assert guided.check(step, str(right))["status"] == "pass"
    assert guided.check(step, True)["status"] == "fail"
    assert guided.check(step, None)["status"] == "fail"
    assert guided.check(step, len(spec["answer"]["choices"]))["status"] == "fail"
    for index, choice in enumerate(spec["answer"]["choices"]):
        if index != right:
            out = guided.check(step, index)
            assert out["status"] == "fail" and choice["why"] in out["message"]


def test_wrong_answer_messages_are_not_shared_between_steps():
    messages = {}
    for step in ("why-not-zero", "memory-bound", "predict-agree"):
        spec = guided._step(step)
        wrong = [i for i in range(len(spec["answer"]["choices"])) if i != spec["answer"]["right"]]
        messages[step] = {guided.check(step, i)["message"] for i in wrong}
    assert not messages["why-not-zero"] & messages["memory-bound"]


def test_timing_steps_read_the_learners_own_measurement():
    for step in ("time-it", "small-n", "fraction-of-peak"):
        assert "Time the shaders first" in guided.check(step, 1)["message"]
    assert guided.check("time-it", "2.5", TIMED)["status"] == "pass"
    assert guided.check("time-it", "2.0", TIMED)["status"] == "fail"
    assert guided.check("small-n", 1, TIMED)["status"] == "pass"  # naive was faster at N = 64
    assert guided.check("small-n", 0, TIMED)["status"] == "fail"
    gflops = 4 * 1024 ** 2 * guided.TIMING_D / 4e-3 / 1e9
    assert guided.check("fraction-of-peak", "%.4g" % gflops, TIMED)["status"] == "pass"
    assert guided.check("fraction-of-peak", gflops * 2, TIMED)["status"] == "fail"
    broken = {"timing": {"rows": [{"n": 64, "tiled_ms": True, "naive_ms": 1.0}]}}
    assert "Time the shaders first" in guided.check("time-it", 1, broken)["message"]


@pytest.mark.parametrize("kernel,passes", [("tiled", None), ("naive", 3)])
def test_timing_spec_is_a_dispatch_of_the_named_shader(kernel, passes):
    spec = web_exercises.lab_timing_spec(100, kernel)
    assert spec["meta"]["n_q"] == 100 and spec["meta"]["d"] == guided.TIMING_D
    assert (len(spec["passes"]) if "passes" in spec else None) == passes


@pytest.mark.parametrize("n,kernel", [(0, "tiled"), (True, "tiled"), (8193, "naive"), (64, "fast")])
def test_timing_spec_refuses_bad_arguments(n, kernel):
    with pytest.raises(ValueError, match="n: |kernel: "):
        web_exercises.lab_timing_spec(n, kernel)


def test_unknown_step_is_a_value_error():
    with pytest.raises(ValueError, match="step must be one of"):
        guided.check("nope", 1)
