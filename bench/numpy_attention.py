"""Benchmark: NumPy FlashAttention (``flash_np``) against naive attention (``reference``).

What it measures, for float32, d = 64, one head (2-D arrays) and (B, H) = (1, 8):
- wall time of forward and backward, median of repeated runs, both kernels interleaved in the
  same process so that their ratio is taken under the same conditions;
- peak memory of each (kernel, pass, N) in a *fresh* subprocess, with ``tracemalloc``: NumPy
  reports every array buffer it allocates to tracemalloc, so the traced peak is the most extra
  memory the call held at once beyond its inputs (which are made before tracing starts);
  ``ru_maxrss`` growth is recorded beside it as a cross-check (a lower bound: the process's
  high-water mark already includes the inputs);
- how each grows with N (least-squares slope of log y on log x), and the targets of the lab's
  issue 8: flash forward no slower than naive at N ≥ 4096, backward at most 1.2× naive, peak
  memory ≥ 20× lower than naive at N = 8192 and growing linearly.

Naive attention materialises (B, H, N, N) float32 matrices; where its predicted peak would not
fit in the memory the machine has free, the case is skipped and the record says why.

Before timing, each size is validated: flash's output and gradients against naive's.

Run:  .venv/bin/python bench/numpy_attention.py            (full run, ~8 min on a quiet 2-core machine)
      .venv/bin/python bench/numpy_attention.py --sizes 128,256 --shapes 1 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py, next to this file)

D = 64
DTYPE = "float32"
SIZES = (1024, 2048, 4096, 8192, 16384)
SHAPES = ("1", "1x8")  # "1": one head, arrays (N, d); "1x8": (B, H) = (1, 8), arrays (1, 8, N, d)
# Tile sizes for flash_np in this benchmark (the library's defaults are 128 x 256). NumPy pays a
# fixed cost per call, so bigger tiles win until the score tile falls out of cache; the sweep
# recorded in "block_sweep" is how these were chosen.
BLOCK_Q = 256
BLOCK_K = 512
SWEEP = ((64, 128), (128, 256), (256, 512), (512, 1024))
# Naive peak memory, measured, is about 3-3.5 float32 N x N matrices per (batch, head); a case is
# skipped when this many of them would not fit in 70 % of the memory available now.
NAIVE_MATRICES = 4.0
MEMORY_HEADROOM = 0.7
TIME_TARGET_FROM_N = 4096
MEMORY_TARGET_N = 8192


def repeats_for(n: int) -> int:
    """Fewer repeats where one run takes seconds (the whole run stays near 10 minutes)."""
    if n <= 2048:
        return 5
    if n <= 8192:
        return 3
    return 1


def batch_of(shape: str) -> tuple:
    return () if shape == "1" else tuple(int(p) for p in shape.split("x"))


def heads_of(shape: str) -> int:
    out = 1
    for p in batch_of(shape):
        out *= p
    return out


def inputs(shape: str, n: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    dims = batch_of(shape) + (n, D)
    return tuple(rng.standard_normal(dims).astype(DTYPE) for _ in range(4))  # q, k, v, do


def run_case(kernel: str, pass_: str, q, k, v, do, o=None, lse=None, block=(BLOCK_Q, BLOCK_K)):
    from nlpcore.kernels import flash_np, reference

    if kernel == "flash":
        opts = {"block_q": block[0], "block_k": block[1]}
        if pass_ == "forward":
            return flash_np.forward(q, k, v, **opts)
        return flash_np.backward(q, k, v, o, lse, do, **opts)
    if pass_ == "forward":
        return reference.forward(q, k, v)
    return reference.backward(q, k, v, o, lse, do)


def naive_fits(shape: str, n: int):
    """(fits, reason): whether naive attention's N x N matrices fit in the free memory now."""
    need = NAIVE_MATRICES * heads_of(shape) * n * n * 4
    free = common.available_memory()
    if free is None or need <= MEMORY_HEADROOM * free:
        return True, None
    return False, (
        "naive attention would need about {:.1f} GiB ({:g} float32 N x N matrices per head x {} heads) "
        "and only {:.1f} GiB is available".format(need / 2**30, NAIVE_MATRICES, heads_of(shape), free / 2**30)
    )


# --- peak memory, one case per fresh process ---------------------------------------------------

def child_memory(kernel: str, pass_: str, shape: str, n: int, block_q: int, block_k: int) -> dict:
    """Runs in the child: make inputs, then trace one call's allocations."""
    import resource
    import tracemalloc

    from nlpcore.kernels import flash_np

    q, k, v, do = inputs(shape, n)
    o = lse = None
    if pass_ == "backward":  # the forward outputs the backward needs, made by the lean kernel
        o, lse = flash_np.forward(q, k, v, block_q=block_q, block_k=block_k)
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    result = run_case(kernel, pass_, q, k, v, do, o, lse, (block_q, block_k))
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    del result
    return {"peak_bytes": int(peak), "rss_growth_bytes": int(rss_after - rss_before)}


def measure_memory(kernel: str, pass_: str, shape: str, n: int, block) -> dict:
    cmd = [common.python(), __file__, "--child-memory", kernel, pass_, shape, str(n),
           str(block[0]), str(block[1])]
    out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if out.returncode != 0:
        raise RuntimeError("memory child failed ({}): {}".format(" ".join(cmd[2:]), out.stderr[-2000:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- timing, in this process -------------------------------------------------------------------

def max_abs(a, b) -> float:
    import numpy as np

    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def time_size(shape: str, n: int, naive_ok: bool, block) -> dict:
    """Validate, then time naive and flash forward/backward interleaved; medians in seconds."""
    q, k, v, do = inputs(shape, n)
    o, lse = run_case("flash", "forward", q, k, v, do, block=block)
    check = {}
    if naive_ok:  # validate before benchmarking: flash against the oracle
        o_ref, lse_ref = run_case("naive", "forward", q, k, v, do)
        g_ref = run_case("naive", "backward", q, k, v, do, o_ref, lse_ref)
        g = run_case("flash", "backward", q, k, v, do, o, lse, block)
        check = {"max_abs_err_o": max_abs(o, o_ref), "max_abs_err_lse": max_abs(lse, lse_ref),
                 "max_abs_err_grads": max(max_abs(a, b) for a, b in zip(g, g_ref))}
        del o_ref, lse_ref, g_ref, g
    reps = repeats_for(n)
    kernels = ("naive", "flash") if naive_ok else ("flash",)
    times = {(kern, p): [] for kern in kernels for p in ("forward", "backward")}
    cpu = {key: [] for key in times}  # process CPU time: robust when other work shares the cores
    for _ in range(reps):
        for p in ("forward", "backward"):
            for kern in kernels:
                gc.collect()
                c0, t0 = time.process_time(), time.perf_counter()
                result = run_case(kern, p, q, k, v, do, o, lse, block)
                times[(kern, p)].append(time.perf_counter() - t0)
                cpu[(kern, p)].append(time.process_time() - c0)
                del result
    return {"times": times, "cpu": cpu, "check": check, "repeats": reps}


def block_sweep(n: int = 4096) -> list:
    """Flash forward/backward time at one head, N = n, for a few tile sizes (same process)."""
    q, k, v, do = inputs("1", n)
    o, lse = run_case("flash", "forward", q, k, v, do)
    rows = []
    for block in SWEEP:
        run_case("flash", "forward", q, k, v, do, block=block)  # warm-up
        fwd, bwd = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            run_case("flash", "forward", q, k, v, do, block=block)
            fwd.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_case("flash", "backward", q, k, v, do, o, lse, block)
            bwd.append(time.perf_counter() - t0)
        rows.append({"block_q": block[0], "block_k": block[1], "n": n,
                     "forward_s": common.median(fwd), "backward_s": common.median(bwd)})
    return rows


# --- the run -----------------------------------------------------------------------------------

def run(sizes, shapes, block, sweep: bool) -> dict:
    started = time.perf_counter()
    record = {
        "benchmark": "numpy_attention",
        "recorded_at": common.now_iso(),
        "machine": common.machine(),
        "parameters": {
            "d": D, "dtype": DTYPE, "sizes": list(sizes), "shapes": list(shapes),
            "shape_meaning": {"1": "one head, arrays (N, d)", "1x8": "(B, H) = (1, 8), arrays (1, 8, N, d)"},
            "block_q": block[0], "block_k": block[1], "loop_order": "kv_outer (library default)",
            "repeats": {str(n): repeats_for(n) for n in sizes},
            "time": "median wall time (time.perf_counter) of repeated calls; naive and flash interleaved in one process; "
                    "cpu_s: median process CPU time of the same calls (the targets use wall time)",
            "memory": "tracemalloc peak of one call in a fresh subprocess, inputs made before tracing "
                      "(NumPy reports its array buffers to tracemalloc); rss_growth_bytes = ru_maxrss growth, a lower bound",
            "skip_rule": "naive skipped when {:g} float32 N x N matrices per head exceed {:.0%} of MemAvailable".format(
                NAIVE_MATRICES, MEMORY_HEADROOM),
        },
        "cases": [],
        "checks": [],
    }
    for shape in shapes:
        for n in sizes:
            naive_ok, reason = naive_fits(shape, n)
            print("shape {:>4}  N = {:>6}: timing{} ...".format(shape, n, "" if naive_ok else " (naive skipped)"), flush=True)
            timed = time_size(shape, n, naive_ok, block)
            if timed["check"]:
                record["checks"].append(dict(shape=shape, n=n, **timed["check"]))
            for kern in ("naive", "flash"):
                for p in ("forward", "backward"):
                    case = {"shape": shape, "n": n, "kernel": kern, "pass": p, "skipped": None}
                    if kern == "naive" and not naive_ok:
                        case["skipped"] = reason
                    else:
                        ts = timed["times"][(kern, p)]
                        cs = timed["cpu"][(kern, p)]
                        case.update(time_s=common.median(ts), times_s=ts, cpu_s=common.median(cs), repeats=len(ts))
                        case.update(measure_memory(kern, p, shape, n, block))
                    record["cases"].append(case)
    record["ratios"] = ratios(record["cases"])
    record["exponents"] = exponents(record["cases"])
    record["block_sweep"] = block_sweep() if sweep else []
    record["targets"] = targets(record)
    record["total_seconds"] = time.perf_counter() - started
    record["load_average_end"] = common.load_average()
    return record


def _case(cases, shape, n, kern, p):
    for c in cases:
        if (c["shape"], c["n"], c["kernel"], c["pass"]) == (shape, n, kern, p) and c["skipped"] is None:
            return c
    return None


def ratios(cases) -> list:
    out = []
    keys = sorted({(c["shape"], c["n"]) for c in cases}, key=lambda t: (t[0], t[1]))
    for shape, n in keys:
        for p in ("forward", "backward"):
            f, nv = _case(cases, shape, n, "flash", p), _case(cases, shape, n, "naive", p)
            if f and nv:
                out.append({"shape": shape, "n": n, "pass": p,
                            "time_flash_over_naive": f["time_s"] / nv["time_s"],
                            "cpu_time_flash_over_naive": f["cpu_s"] / nv["cpu_s"],
                            "memory_naive_over_flash": nv["peak_bytes"] / max(1, f["peak_bytes"])})
    return out


def exponents(cases) -> list:
    out = []
    for shape in sorted({c["shape"] for c in cases}):
        for kern in ("naive", "flash"):
            for p in ("forward", "backward"):
                got = sorted((c for c in cases if (c["shape"], c["kernel"], c["pass"]) == (shape, kern, p)
                              and c["skipped"] is None), key=lambda c: c["n"])
                ns = [c["n"] for c in got]
                tail = [c for c in got if c["n"] >= TIME_TARGET_FROM_N]
                out.append({
                    "shape": shape, "kernel": kern, "pass": p, "sizes": ns,
                    "memory_linear_fit": linear_fit(ns, [c["peak_bytes"] for c in got], heads_of(shape))
                    if kern == "flash" else None,
                    "time_slope": common.slope(ns, [c["time_s"] for c in got]),
                    "memory_slope": common.slope(ns, [c["peak_bytes"] for c in got]),
                    "memory_slope_n_ge_{}".format(TIME_TARGET_FROM_N): common.slope(
                        [c["n"] for c in tail], [c["peak_bytes"] for c in tail]),
                })
    return out


def linear_fit(ns, ys, heads: int):
    """Least-squares peak = fixed + per_row · N: bytes that do not grow with N (tiles), bytes per
    query row (in units of one float32 row of d per head, so 1.0 = one (N, d) array), and the
    largest relative miss of the line — small when memory really grows linearly."""
    if len(ns) < 2:
        return None
    mx, my = sum(ns) / len(ns), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in ns)
    per_row = sum((x - mx) * (y - my) for x, y in zip(ns, ys)) / sxx
    fixed = my - per_row * mx
    worst = max(abs(fixed + per_row * x - y) / y for x, y in zip(ns, ys))
    return {"fixed_bytes": fixed, "bytes_per_row": per_row,
            "nd_arrays_per_row": per_row / (heads * D * 4), "max_relative_residual": worst}


def targets(record) -> list:
    rs, ex = record["ratios"], record["exponents"]
    out = []
    fwd = [r for r in rs if r["pass"] == "forward" and r["n"] >= TIME_TARGET_FROM_N]
    bwd = [r for r in rs if r["pass"] == "backward" and r["n"] >= TIME_TARGET_FROM_N]
    for name, rows, goal in (("flash forward time / naive, N >= 4096", fwd, 1.0),
                             ("flash backward time / naive, N >= 4096", bwd, 1.2)):
        worst = max((r["time_flash_over_naive"] for r in rows), default=None)
        out.append(common.target(
            name, None if worst is None else worst <= goal,
            None if worst is None else round(worst, 3), "<= {} at every such N and shape".format(goal),
            "" if rows else "no size >= 4096 with naive measured in this run"))
    mem = [r for r in rs if r["n"] == MEMORY_TARGET_N]
    least = min((r["memory_naive_over_flash"] for r in mem), default=None)
    out.append(common.target(
        "peak memory naive / flash at N = 8192", None if least is None else least >= 20,
        None if least is None else round(least, 1), ">= 20 (both passes, every shape)",
        "" if mem else "N = 8192 not measured in this run"))
    key = "memory_slope_n_ge_{}".format(TIME_TARGET_FROM_N)
    slopes = [e[key] for e in ex if e["kernel"] == "flash" and e[key] is not None]
    worst = max(slopes, default=None)
    out.append(common.target(
        "flash peak-memory growth exponent in N (N >= 4096)", None if worst is None else worst <= 1.15,
        None if worst is None else round(worst, 3), "<= 1.15 (at most linear: memory = tiles + O(N·d))",
        "" if slopes else "fewer than two sizes >= 4096 in this run"))
    return out


def report(record) -> None:
    rows = []
    for c in record["cases"]:
        if c["skipped"]:
            rows.append([c["shape"], c["n"], c["kernel"], c["pass"], None, None, None, "skipped"])
        else:
            rows.append([c["shape"], c["n"], c["kernel"], c["pass"], c["time_s"], c["repeats"],
                         c["peak_bytes"] / 2**20, c["rss_growth_bytes"] / 2**20])
    print(common.table(["shape", "N", "kernel", "pass", "time s", "reps", "peak MiB", "rss+ MiB"], rows))
    print()
    print(common.table(["shape", "N", "pass", "time flash/naive", "cpu flash/naive", "memory naive/flash"],
                       [[r["shape"], r["n"], r["pass"], r["time_flash_over_naive"], r["cpu_time_flash_over_naive"],
                         r["memory_naive_over_flash"]]
                        for r in record["ratios"]]))
    print()
    fit = lambda e, key: e["memory_linear_fit"][key] if e.get("memory_linear_fit") else None  # noqa: E731
    print(common.table(["shape", "kernel", "pass", "time slope", "memory slope", "mem slope N>=4096",
                        "fixed MiB", "(N,d) arrays/row", "fit miss"],
                       [[e["shape"], e["kernel"], e["pass"], e["time_slope"], e["memory_slope"],
                         e["memory_slope_n_ge_4096"], None if fit(e, "fixed_bytes") is None else fit(e, "fixed_bytes") / 2**20,
                         fit(e, "nd_arrays_per_row"), fit(e, "max_relative_residual")] for e in record["exponents"]]))
    if record["checks"]:
        print()
        print(common.table(["shape", "N", "max|Δo|", "max|Δlse|", "max|Δgrad|"],
                           [[c["shape"], c["n"], c["max_abs_err_o"], c["max_abs_err_lse"], c["max_abs_err_grads"]]
                            for c in record["checks"]]))
    if record["block_sweep"]:
        print()
        print(common.table(["block_q", "block_k", "N", "forward s", "backward s"],
                           [[r["block_q"], r["block_k"], r["n"], r["forward_s"], r["backward_s"]]
                            for r in record["block_sweep"]]))
    print("\ntargets:")
    common.print_targets(record["targets"])
    print("total {:.0f} s".format(record["total_seconds"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated N")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: 1 (one head) or BxH")
    parser.add_argument("--block-q", type=int, default=BLOCK_Q)
    parser.add_argument("--block-k", type=int, default=BLOCK_K)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for both kernels")
    parser.add_argument("--no-sweep", action="store_true", help="skip the tile-size sweep at N = 4096")
    parser.add_argument("--out", default=str(common.RESULTS / "numpy_attention.json"))
    parser.add_argument("--rescore", metavar="JSON",
                        help="recompute ratios, exponents and targets of a recorded run (no new measurements)")
    parser.add_argument("--child-memory", nargs=6, metavar=("KERNEL", "PASS", "SHAPE", "N", "BQ", "BK"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_memory:
        kern, p, shape, n, bq, bk = args.child_memory
        print(json.dumps(child_memory(kern, p, shape, int(n), int(bq), int(bk))))
        return 0
    if args.rescore:
        record = json.loads(Path(args.rescore).read_text(encoding="utf-8"))
        record["ratios"] = ratios(record["cases"])
        record["exponents"] = exponents(record["cases"])
        record["targets"] = targets(record)
        report(record)
        print("rescored", common.write_result(Path(args.rescore), record))
        return 0
    common.pin_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    shapes = [s for s in args.shapes.split(",") if s]
    for s in shapes:
        if s != "1" and not all(p.isdigit() for p in s.split("x")):
            parser.error("--shapes: expected 1 or BxH such as 1x8, got {!r}".format(s))
    record = run(sizes, shapes, (args.block_q, args.block_k), sweep=not args.no_sweep)
    report(record)
    print("wrote", common.write_result(Path(args.out), record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
