"""nlpcore.web.viz: the visualizer's trace and the module page's "run it" cells.

The visualizer must end on io_model's closed form, and its steps must be the kernel's own
events (or faithful per-outer-iteration summaries of them). These tests hold viz to that,
independently of the browser.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from nlpcore.kernels import flash_np, io_model
from nlpcore.web import call, call_json, viz

# (n, d, sram, causal, loop_order, mode): ragged sizes, both loop orders, both passes.
CASES = [
    (24, 4, 64, False, "kv_outer", "forward"),
    (50, 8, 128, True, "kv_outer", "forward"),
    (50, 8, 128, True, "q_outer", "forward"),
    (20, 16, 512, False, "q_outer", "forward"),
    (50, 8, 128, False, "kv_outer", "backward"),
    (100, 4, 64, True, "kv_outer", "backward"),
]


@pytest.mark.parametrize("n, d, sram, causal, loop_order, mode", CASES)
def test_trace_ends_on_the_closed_form(n, d, sram, causal, loop_order, mode):
    result = viz.trace(n, d, sram, causal=causal, loop_order=loop_order, mode=mode)
    closed = io_model.flash_accesses(n, n, d, sram, backward=mode == "backward", causal=causal,
                                     loop_order=loop_order)
    assert result["closed_form"]["accesses"] == closed
    assert result["counted"]["accesses"] == closed
    last = result["steps"][-1]
    assert last["op"] in ("end", "group")
    assert last["reads"] + last["writes"] == closed
    closed_rw = (result["closed_form"]["reads"], result["closed_form"]["writes"])
    assert (last["reads"], last["writes"]) == closed_rw == (result["counted"]["reads"], result["counted"]["writes"])
    br, bc = io_model.block_sizes(sram, d)
    assert (result["params"]["br"], result["params"]["bc"]) == (br, bc)


def test_small_trace_steps_are_the_kernels_events():
    n, d, sram = 20, 4, 64
    result = viz.trace(n, d, sram, causal=True, seed=5)
    assert not result["grouped"]
    rng = np.random.RandomState(5)
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    br, bc = io_model.block_sizes(sram, d)
    events = []
    flash_np.forward(q, k, v, causal=True, block_q=br, block_k=bc, trace=events)
    assert json.loads(json.dumps(result["steps"])) == json.loads(json.dumps(events))


def test_causal_skips_fully_masked_tiles():
    n, d, sram = 48, 4, 128
    full = viz.trace(n, d, sram, causal=False)
    causal = viz.trace(n, d, sram, causal=True)
    br, bc = io_model.block_sizes(sram, d)
    tiles = lambda r: [(s["i"], s["j"]) for s in r["steps"] if s["op"] == "tile"]
    skips = lambda r: [(s["i"], s["j"]) for s in r["steps"] if s["op"] == "skip"]
    assert sorted(tiles(full)) == io_model.visited_tiles(n, n, br, bc, causal=False)
    assert sorted(tiles(causal)) == io_model.visited_tiles(n, n, br, bc, causal=True)
    assert len(tiles(causal)) < len(tiles(full))
    assert skips(causal) and not skips(full)
    for i, j in skips(causal):  # a skipped tile's first key lies after its last query
        assert j * bc > min(n, (i + 1) * br) - 1


@pytest.mark.parametrize("loop_order", ["kv_outer", "q_outer"])
def test_large_traces_are_grouped_per_outer_iteration_without_losing_counts(loop_order):
    n, d, sram = 128, 4, 64  # 32 x 32 tiles, far above STEP_LIMIT events
    result = viz.trace(n, d, sram, causal=True, loop_order=loop_order)
    assert result["grouped"] and result["events"] > viz.STEP_LIMIT
    groups = result["steps"]
    br, bc = io_model.block_sizes(sram, d)
    visited = io_model.visited_tiles(n, n, br, bc, causal=True)
    assert sorted(tuple(t) for g in groups for t in g["tiles"]) == sorted(visited)
    assert sum(g["count"] for g in groups) == result["events"]
    axis = "j" if loop_order == "kv_outer" else "i"
    outers = [g["outer"] for g in groups if g["outer"] is not None]
    assert outers == sorted(set(outers))  # one group per outer block, in order
    for g in groups:
        assert all(t[0 if axis == "i" else 1] == g["outer"] for t in g["tiles"])
    reads = [g["reads"] for g in groups]
    assert reads == sorted(reads)  # counters never go back
    assert groups[-1]["reads"] + groups[-1]["writes"] == io_model.flash_accesses(
        n, n, d, sram, causal=True, loop_order=loop_order)
    moved = sum(r + w for g in groups for r, w in g["moved"].values())
    assert moved == result["counted"]["accesses"]
    loaded_rows = sum(r1 - r0 for g in groups for t, spans in g["loads"].items() if t not in ("l", "m", "lse", "D")
                      for r0, r1 in spans)
    assert loaded_rows * d == sum(g["moved"][t][0] for g in groups for t in g["moved"] if t not in ("l", "m", "lse", "D"))


def test_plan_and_limits():
    assert viz.plan(24, 4, 64) == {"br": 4, "bc": 4, "t_r": 6, "t_c": 6, "tiles": 36, "ok": True, "reason": None}
    too_big = viz.plan(256, 64, 16)
    assert not too_big["ok"] and "raise M" in too_big["reason"]
    with pytest.raises(ValueError, match="n, sram"):
        viz.trace(256, 64, 16)
    opts = viz.options()
    for n in opts["n"]:  # the largest offered N with the largest tiles it allows still plans
        assert viz.plan(n, max(opts["d"]), max(opts["sram"]))["ok"]


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"n": 0, "d": 4, "sram": 64}, ValueError, "n must be between"),
        ({"n": 1000, "d": 4, "sram": 64}, ValueError, "n must be between"),
        ({"n": 8, "d": 2.5, "sram": 64}, ValueError, "d must be a whole number"),
        ({"n": 8, "d": "4", "sram": 64}, TypeError, "d must be an integer"),
        ({"n": 8, "d": 4, "sram": 64, "causal": 1}, TypeError, "causal must be true or false"),
        ({"n": 8, "d": 4, "sram": 64, "loop_order": "diagonal"}, ValueError, "loop_order must be one of"),
        ({"n": 8, "d": 4, "sram": 64, "mode": "sideways"}, ValueError, "mode must be one of"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        viz.trace(**kwargs)


def test_the_web_door_reaches_viz_with_json_safe_results():
    out = json.loads(call_json("viz.trace", json.dumps({"n": 12, "d": 2, "sram": 16, "causal": True})))
    assert out["counted"]["accesses"] == io_model.flash_accesses(12, 12, 2, 16, causal=True)
    assert call("viz.plan", {"n": 12, "d": 2, "sram": 16})["ok"]
    with pytest.raises(ValueError, match="does not export"):
        call("viz.inspect", {})  # a module viz imports, not a function it exports


def _counted(n, d, sram, loop_order="kv_outer"):
    """HBM accesses the kernel itself counts (IOCounter) with the paper's block sizes."""
    br, bc = io_model.block_sizes(sram, d)
    x = np.zeros((n, d), dtype=np.float32)
    counter = io_model.IOCounter()
    flash_np.forward(x, x, x, block_q=br, block_k=bc, io=counter, loop_order=loop_order)
    return counter.accesses


def test_episode_cells():
    exact = viz.run_episode_cell("exact", {"n": 37, "d": 8, "sram": 128, "causal": True})
    assert exact["ok"] and exact["values"]["max_abs_err"] < 1e-5  # float32 kernel vs float64 oracle
    small_m = viz.run_episode_cell("exact", {"n": 100, "d": 16, "sram": 512})  # M < 3d² = 768
    assert small_m["values"]["flash_accesses"] > small_m["values"]["standard_accesses"]
    assert any("moves more here" in line for line in small_m["lines"])
    big_m = viz.run_episode_cell("exact", {"n": 100, "d": 16, "sram": 2048})
    assert big_m["values"]["flash_accesses"] < big_m["values"]["standard_accesses"]
    assert not any("moves more here" in line for line in big_m["lines"])
    tiling = viz.run_episode_cell("tiling", {"n": 70, "d": 8, "sram": 256})
    assert tiling["values"]["counted"] == tiling["values"]["closed_form"] == _counted(70, 8, 256)
    n, d, sram = 512, 64, 49152
    roof = viz.run_episode_cell("roofline", {"n": n, "d": d, "sram": sram})
    v = roof["values"]
    assert v["standard_intensity"] < min(v["flash_intensity"], v["flash2_intensity"])
    # Independent of io_model: the kernel's own count in each loop order, and Algorithm 0's
    # count by hand (read Q, K; write S; read S, write P; read P, V; write O).
    assert v["flash_accesses"] == _counted(n, d, sram, "kv_outer")
    assert v["flash2_accesses"] == _counted(n, d, sram, "q_outer")
    assert v["standard_accesses"] == 2 * n * d + n * n + 2 * n * n + (n * n + n * d) + n * d
    assert any("Figure 2" in line for line in roof["lines"])
    online = viz.run_episode_cell("online", {"n": 37, "block": 8, "scale": 400})
    assert online["values"]["max_abs_err"] < 1e-12
    assert online["values"]["naive_non_finite"] > 0  # exp overflows without the max shift
    assert online["values"]["associativity_gap"] < 1e-12
    assert online["values"]["identity_gap"] == 0
    gentle = viz.run_episode_cell("online", {"n": 37, "block": 8, "scale": 1})
    assert gentle["values"]["naive_non_finite"] == 0
    for cell in (exact, tiling, roof, online):
        json.dumps(cell, allow_nan=False)


def test_episode_cells_refuse_bad_parameters():
    with pytest.raises(ValueError, match="name must be one of"):
        viz.run_episode_cell("nope", {})
    with pytest.raises(TypeError, match="params must be a dict"):
        viz.run_episode_cell("exact", [1, 2])
    with pytest.raises(ValueError, match="n must be between"):
        viz.run_episode_cell("exact", {"n": 10 ** 6})
    with pytest.raises(ValueError, match="raise M or lower N"):
        viz.run_episode_cell("tiling", {"n": 1024, "d": 128, "sram": 16})
    with pytest.raises(ValueError, match="scale must be a number"):
        viz.run_episode_cell("online", {"scale": -1})


PY38_SMOKE = r"""
import json, warnings
warnings.simplefilter("error")
from nlpcore.kernels import io_model
from nlpcore.web import call_json
for n, d, m, causal, order, mode in [(24, 4, 64, True, "q_outer", "forward"), (50, 8, 128, True, "kv_outer", "backward"),
                                     (128, 4, 64, True, "kv_outer", "forward")]:
    out = json.loads(call_json("viz.trace", json.dumps(dict(n=n, d=d, sram=m, causal=causal, loop_order=order, mode=mode))))
    assert out["counted"]["accesses"] == io_model.flash_accesses(n, n, d, m, causal=causal, loop_order=order,
                                                                backward=mode == "backward")
for name in ("exact", "roofline", "tiling", "online"):
    assert json.loads(call_json("viz.run_episode_cell", json.dumps({"name": name, "params": {}})))["ok"]
print("ok")
"""


def test_viz_runs_on_python38_numpy117():
    """Pyodide 0.17's Python 3.8 + NumPy 1.17, where scripts/setup.sh has made .venv38."""
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[1]
    py38 = root / ".venv38" / "bin" / "python"
    if not py38.exists():
        pytest.skip(".venv38 (Python 3.8 + NumPy 1.17) is not set up")
    done = subprocess.run([str(py38), "-c", PY38_SMOKE], cwd=str(root / "py"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
