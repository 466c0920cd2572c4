"""Smoke runs of the benchmark scripts at tiny sizes, so that they do not rot.

Each script runs as the README says (a subprocess), writes its JSON to a temporary folder, and
the record is checked for shape and for the correctness facts it carries (flash vs naive
errors, counted IO = closed form, shader outputs valid). Speed is never asserted: timings depend
on the machine and on what else runs on it. The browser-driven benchmarks are smoke-tested in
tests/browser/test_performance.py.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def run_script(name: str, *args: str, tmp_path: Path) -> dict:
    out = tmp_path / (name + ".json")
    env = os.environ.copy()
    env.setdefault("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    proc = subprocess.run([sys.executable, str(BENCH / (name + ".py")), *args, "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, "{} failed:\n{}\n{}".format(name, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "targets:" in proc.stdout  # the printed table ends with the target checks
    record = json.loads(out.read_text())
    for key in ("benchmark", "recorded_at", "machine", "parameters", "targets"):
        assert key in record, "{} record lacks {!r}".format(name, key)
    machine = record["machine"]
    assert machine["cores"] >= 1 and machine["versions"]["python"] and machine["versions"]["numpy"]
    for target in record["targets"]:
        assert set(target) >= {"name", "met", "measured", "goal", "limited_by"}
        assert target["met"] in (True, False, None)
    return record


def test_numpy_attention_smoke(tmp_path):
    sizes = (64, 100)  # 100: not a multiple of the tiles
    record = run_script("numpy_attention", "--sizes", "64,100", "--shapes", "1,1x2", "--no-sweep",
                        "--block-q", "32", "--block-k", "48", tmp_path=tmp_path)
    assert record["parameters"]["block_q"] == 32 and record["parameters"]["block_k"] == 48
    cases = record["cases"]
    assert len(cases) == 2 * len(sizes) * 2 * 2  # shapes x sizes x kernels x passes
    for case in cases:
        assert case["skipped"] is None  # tiny sizes always fit
        assert case["time_s"] > 0 and len(case["times_s"]) == case["repeats"]
        assert case["peak_bytes"] > 0  # tracemalloc saw NumPy's buffers
    naive = next(c for c in cases if (c["shape"], c["n"], c["kernel"], c["pass"]) == ("1x2", 100, "naive", "forward"))
    assert naive["peak_bytes"] >= 2 * 100 * 100 * 4  # at least one (1, 2, N, N) float32 score matrix
    assert len(record["checks"]) == 2 * len(sizes)
    for check in record["checks"]:
        assert check["max_abs_err_o"] < 1e-5 and check["max_abs_err_grads"] < 1e-5
    assert len(record["ratios"]) == 2 * len(sizes) * 2
    for e in record["exponents"]:
        assert e["time_slope"] is not None and math.isfinite(e["memory_slope"])


def test_numpy_attention_rejects_bad_shape(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "numpy_attention.py"), "--shapes", "1xH",
                           "--out", str(tmp_path / "x.json")], capture_output=True, text=True)
    assert proc.returncode != 0 and "--shapes" in proc.stderr


def test_io_claim_smoke(tmp_path):
    record = run_script("io_claim", "--quick", tmp_path=tmp_path)
    counted = [r for r in record["by_n"] + record["by_m"] if r["counted_equals_closed_form"] is not None]
    assert counted and all(r["counted_equals_closed_form"] for r in counted)
    assert record["figure2"]["paper_flash_gb"] == 4.4
    for r in record["by_n"]:
        assert r["standard_bytes"] > 0 and r["flash_bytes"] > 0


def test_webgpu_attention_smoke_wgpu(tmp_path):
    pytest.importorskip("wgpu")
    record = run_script("webgpu_attention", "--engines", "wgpu-py", "--sizes", "64,100", tmp_path=tmp_path)
    (engine,) = record["engines"]
    assert engine["engine"] == "wgpu-py" and engine["adapter"]
    assert {(r["n"], r["kernel"]) for r in engine["rows"]} == {(n, k) for n in (64, 100) for k in ("tiled", "naive")}
    for r in engine["rows"]:
        assert r["valid"], r  # both shaders are exact at these sizes
        assert r["ms"] > 0
    assert [s["n"] for s in engine["speedups"]] == [64, 100]


def test_split_k_h200_dry_run(tmp_path):
    """The H200 split-K script at tiny sizes on the CPU interpreter: every split count checked."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    proc = subprocess.run([sys.executable, str(BENCH / "split_k_h200.py"), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "split_k_h200.json").read_text())
    assert record["all_split_checks_pass"] is True
    for case in record["cases"]:
        splits = {n: r for n, r in case["results"].items() if n.startswith("split_")}
        assert len(splits) >= 2 and all(r["ok"] and r["lse_ok"] for r in splits.values())


def test_ring_2gpu_logic_on_two_gloo_processes(tmp_path):
    """The two-GPU ring script with --cpu: 2 processes over gloo, a torch kernel per step; the
    gathered output of both rings (classic and chunked) must match the reference and the NumPy
    ring simulator, causal and not."""
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(BENCH / "ring_2gpu.py"), "--cpu", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "ring_cpu_check.json").read_text())
    assert record["all_checks_pass"] is True
    assert {r["causal"] for r in record["check"]} == {False, True}
    for row in record["check"]:
        assert row["err_vs_numpy_ring"] < 1e-5 and row["chunked_err"] < 1e-5 and row["chunks"] > 1
    for row in record["times"]:
        assert row["ring_err_vs_sdpa"] < 1e-5
        assert "ring_over_context_parallel" not in row or row["context_parallel_ok"]
    assert record["env"]["no_multicast"] == {
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def test_longest_sequence_search_finds_the_edge():
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ring_2gpu", BENCH / "ring_2gpu.py")
    ring_2gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ring_2gpu)
    for edge in (0, 4096, 70000, 300000):
        tried = []
        found = ring_2gpu.search_longest(lambda n: tried.append(n) or n <= edge, 65536, 4096)
        assert found <= edge < found + 4096 and found % 4096 == 0, (edge, found, tried)


def test_io_h200_dry_run_runs_every_code_path_but_the_profiler(tmp_path):
    """bench/io_h200.py --dry-run: tiny sizes on Triton's CPU interpreter (SDPA's GPU backends
    record their refusal), the dropout checks pass, and the record carries the model's columns."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = os.environ.copy()
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, str(BENCH / "io_h200.py"), "--dry-run", "--no-sweep", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "io_h200.json").read_text())
    assert record["checks"]["ok"] and record["checks"]["keep_mask_equals_numpy"]
    assert record["ncu"] == {"skipped": "dry run"}
    rows = {r["impl"]: r for r in record["rows"]}
    assert rows["baseline"]["runtime_ms"] > 0 and rows["triton"]["runtime_ms"] > 0
    assert "error" in rows["sdpa_cudnn"] or "runtime_ms" in rows["sdpa_cudnn"]
    assert rows["baseline"]["model_bytes"]["baseline_passes"] > 0
    assert set(rows["triton"]["model_bytes"]) == {"flash_sram", "flash_l2"}
    assert "targets:" in proc.stdout


NCU_CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","ncu_step_marker","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_read.sum","byte","32"
"1","1","python3","h","gemm","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_read.sum","byte","1,000,000"
"1","1","python3","h","gemm","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_write.sum","Mbyte","2.5"
"1","1","python3","h","gemm","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","gpu__time_duration.sum","usecond","1.5"
"2","1","python3","h","ncu_step_marker","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_read.sum","byte","32"
"3","1","python3","h","_fwd_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_read.sum","byte","400"
"3","1","python3","h","_fwd_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","m","dram__bytes_write.sum","byte","100"
'''


def test_io_h200_reads_ncu_csv_into_steps():
    sys.path.insert(0, str(BENCH))
    try:
        import io_h200
    finally:
        sys.path.remove(str(BENCH))
    kernels = io_h200.parse_ncu_csv(NCU_CSV)
    assert [k["name"] for k in kernels] == ["ncu_step_marker", "gemm", "ncu_step_marker", "_fwd_kernel"]
    assert kernels[1]["metrics"] == {"dram__bytes_read.sum": 1e6, "dram__bytes_write.sum": 2.5e6,
                                     "gpu__time_duration.sum": 1.5e-6}
    manifest = [{"setting": "figure2", "n": 1, "d": 1, "impl": "baseline", "profiled": True},
                {"setting": "sweep", "n": 1, "d": 1, "impl": "triton", "profiled": True}]
    steps = io_h200.split_steps(kernels, manifest)
    assert [s["hbm_bytes"] for s in steps] == [3.5e6, 500.0]  # markers excluded
    assert steps[0]["kernel_list"][0]["write_bytes"] == 2.5e6 and "kernel_list" not in steps[1]
    with pytest.raises(RuntimeError, match="marked steps"):
        io_h200.split_steps(kernels, manifest[:1] * 3)


def test_grading_cost_smoke(tmp_path):
    record = run_script("grading_cost", "--repeats", "1", tmp_path=tmp_path)
    steps = {(s["exercise"], s["step"]) for s in record["steps"]}
    assert ("online-softmax", "compose") in steps and ("backward", "scratch") in steps
    assert all(s["grade_cpu_ms"] > 0 for s in record["steps"])
    snap = record["snapshot"]
    assert snap["functions"] > 1000 and snap["namespaces"] > 50 and snap["restore_unchanged_cpu_ms"] > 0


def test_io_h200_md_tables_are_the_records():
    """bench/IO_H200.md's tables are generated from bench/results/io_h200.json (--markdown):
    a new record without a regenerated page, or a hand-edited number, fails here."""
    sys.path.insert(0, str(BENCH))
    try:
        import io_h200
    finally:
        sys.path.remove(str(BENCH))
    record = json.loads((BENCH / "results" / "io_h200.json").read_text())
    text = (BENCH / "IO_H200.md").read_text()
    start, end = "<!-- generated tables -->\n", "\n<!-- end generated tables -->"
    assert start in text and end in text
    assert text[text.index(start) + len(start):text.index(end)] == io_h200.markdown(record)


def test_dropout_cost_dry_run_times_each_draw_and_checks_it(tmp_path):
    """bench/dropout_cost_h200.py --dry-run: every draw compiles and runs on the interpreter, and
    its sanity figure (mean of o with uniform P and v = 1: kept fraction / (1 − p)) is ≈ 1."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = os.environ.copy()
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = str(ROOT / "py")
    proc = subprocess.run([sys.executable, str(BENCH / "dropout_cost_h200.py"), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["variant"]: r for r in json.loads((tmp_path / "dropout_cost_dry.json").read_text())["rows"]}
    assert set(rows) == {"p0", "library", "per_entry_mix", "xor_only"}
    for name, row in rows.items():
        assert "error" not in row, (name, row.get("error"))
        assert abs(row["sanity"]["mean_o"] - 1) < 0.05, (name, row["sanity"])
    assert rows["p0"]["sanity"]["std_o"] == 0 and rows["library"]["sanity"]["std_o"] > 0  # dropout drew


def test_triton_md_table_is_the_records():
    """bench/TRITON.md's results table is generated from bench/results/triton_h200.json."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    env = os.environ.copy()
    env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = str(ROOT / "py")
    proc = subprocess.run([sys.executable, str(BENCH / "triton_h200.py"), "--markdown",
                           str(BENCH / "results" / "triton_h200.json")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (BENCH / "TRITON.md").read_text()
    start = text.index("<!-- generated table:")
    start = text.index("\n", start) + 1
    end = text.index("\n<!-- end generated table -->")
    assert text[start:end] == proc.stdout.strip()


def _page_record(tmp_path: Path, name: str, trials: dict) -> Path:
    """A small exercise_page record: ``trials`` maps a site to its (ready, first, regrade) ms."""
    rows = []
    for site, values in trials.items():
        for ready, first, regrade in values:
            rows.append({"site": site, "ready_ms": ready, "boot": {},
                         "first_grade": {"wall_ms": first, "python_ms": first / 2, "longest_task_ms": 0.0},
                         "regrade": {"wall_ms": regrade, "python_ms": regrade / 2, "longest_task_ms": 0.0}})
    record = {"benchmark": "exercise_page", "recorded_at": "2026-12-02T00:00:00Z",
              "machine": {"cores": 2, "versions": {"python": "3", "numpy": "2"}},
              "load_average": [1, 1, 1], "load_average_after": [1, 1, 1],
              "parameters": {"trials": len(next(iter(trials.values())))},
              "summaries": {site: {} for site in trials}, "trials": rows}
    path = tmp_path / name
    path.write_text(json.dumps(record))
    return path


def test_exercise_page_pool_takes_every_runs_trials(tmp_path):
    one = _page_record(tmp_path, "one.json", {"before": [(100, 10, 5)], "after": [(300, 30, 15)]})
    two = _page_record(tmp_path, "two.json", {"before": [(200, 20, 10), (400, 40, 20)],
                                              "after": [(90, 9, 4), (110, 11, 6)]})
    out = tmp_path / "pooled.json"
    proc = subprocess.run([sys.executable, str(BENCH / "exercise_page.py"), "--pool", str(one), str(two),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[MET ] ready_ms no slower than before" in proc.stdout
    record = json.loads(out.read_text())
    assert record["summaries"]["before"]["ready_ms"] == 200     # median of 100, 200, 400
    assert record["summaries"]["after"]["ready_ms"] == 110      # median of 300, 90, 110
    assert record["ratios_to_before"]["after"]["first_grade_ms"] == round(11 / 20, 3)
    assert [t["met"] for t in record["targets"][1:]] == [True, True]
    assert len(record["runs"]) == 2 and record["parameters"]["trials"] == 3


def test_exercise_page_pool_refuses_records_of_other_sites(tmp_path):
    one = _page_record(tmp_path, "one.json", {"before": [(100, 10, 5)], "after": [(300, 30, 15)]})
    two = _page_record(tmp_path, "two.json", {"old": [(100, 10, 5)], "new": [(300, 30, 15)]})
    proc = subprocess.run([sys.executable, str(BENCH / "exercise_page.py"), "--pool", str(one), str(two),
                           "--out", str(tmp_path / "x.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "same sites" in proc.stderr
