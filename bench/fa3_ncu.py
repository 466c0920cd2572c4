"""One launch each of the kernels bench/FA3.md profiles with Nsight Compute (run under ncu):

    ncu --clock-control none -k regex:'fa3_fwd|fprop|sdpa|fmha|attn' -c 4 --section SpeedOfLight \\
        --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \\
        --csv --page raw python3 bench/fa3_ncu.py [--shapes d,N,causal ...] > fa3_ncu.csv
    python3 bench/fa3_ncu.py --trim fa3_ncu.csv --out bench/results/fa3_ncu.json [--shapes ...] [--command ...]
    python3 bench/fa3_ncu.py --markdown bench/results/fa3_ncu.json      # FA3.md's table

bf16, the benchmark's shapes: for each shape, our FlashAttention-3 forward (in the variant
flash_fa3.choose picks for it) and then cuDNN's. ``--trim`` turns ncu's raw CSV (one row per
profiled kernel, in launch order) into the record Episode 5 reads: the metrics below, labelled
"fa3 d=64 N=4096 causal", "cudnn d=64 N=4096 causal", ...
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "py"))

DEFAULT_SHAPES = ["64,4096,1", "128,16384,0"]  # where d = 64 trails cuDNN most; the headline shape
METRICS = [
    "gpu__time_duration.sum",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",  # tensor cores
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",  # XU pipe: special functions (exp2) and conversions
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",  # issue slots busy
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "launch__registers_per_thread",
]


def parse_shapes(specs):
    out = []
    for spec in specs:
        d, n, causal = spec.split(",")
        out.append((int(d), int(n), causal.strip() in ("1", "yes", "true", "True")))
    return out


def labels(shapes):
    return [f"{who} d={d} N={n}{' causal' if causal else ''}" for d, n, causal in shapes for who in ("fa3", "cudnn")]


def launch(shapes):
    import torch

    import triton_h200 as tb
    from nlpcore.kernels import flash_fa3

    for d, n, causal in shapes:
        q, k, v = tb.inputs(tb.TOKENS // n, tb.HIDDEN // d, n, d, seed=1)[:3]
        print(f"fa3 variant for d={d} N={n} causal={causal}: {flash_fa3.choose(d, causal, n)}", flush=True)
        for who in ("fa3", "cudnn"):
            if who == "fa3":
                flash_fa3.forward(q, k, v, causal=causal, fallback=False)
            else:
                with tb.sdpa_kernel(tb.BACKENDS["cudnn"]), torch.no_grad():
                    tb.sdpa(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            print(f"launched {who} d={d} N={n} causal={causal}", flush=True)


def trim(csv_path, shapes, command):
    """ncu's raw CSV (header row, units row, one row per kernel) -> the record's dict."""
    with open(csv_path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)  # skip the program's own output
    header, units, kernels = rows[start], rows[start + 1], rows[start + 2:]
    col = {name: i for i, name in enumerate(header)}
    names = labels(shapes)
    if len(kernels) != len(names):
        raise SystemExit(f"{csv_path}: {len(kernels)} profiled kernels, expected {len(names)} ({names})")
    out = []
    for label, r in zip(names, kernels):
        entry = {"label": label, "kernel": r[col["Kernel Name"]], "block": r[col["Block Size"]],
                 "grid": r[col["Grid Size"]]}
        for m in METRICS:
            if m in col:
                entry[m] = {"value": float(r[col[m]].replace(",", "")), "unit": units[col[m]]}
        out.append(entry)
    return {"tool": "Nsight Compute (ncu) on the H200, --clock-control none, sections SpeedOfLight, "
                    "ComputeWorkloadAnalysis, SchedulerStats, WarpStateStats",
            "command": command,
            "note": "bf16, 16k tokens per batch, hidden 2048 (bench/triton_h200.py's shapes); fa3 in the variant "
                    "flash_fa3.choose picks for each shape; trimmed from ncu's raw CSV by bench/fa3_ncu.py --trim",
            "kernels": out}


def markdown(record):
    """FA3.md's table of a profile record: time and the pipes and stalls Episode 5 quotes."""
    cols = [("time (µs)", "gpu__time_duration.sum", 1e-3, "{:.0f}"),
            ("tensor pipe", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 1, "{:.1f}%"),
            ("XU pipe (exp2, conversions), % of peak issue", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", 1, "{:.1f}%"),
            ("issue slots busy", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1, "{:.1f}%"),
            ("barrier stalls / issue", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 1, "{:.2f}"),
            ("long-scoreboard stalls / issue",
             "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 1, "{:.2f}")]
    out = ["| kernel | " + " | ".join(c[0] for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for k in record["kernels"]:
        out.append(f"| {k['label']} | " + " | ".join(fmt.format(k[m]["value"] * scale) for _, m, scale, fmt in cols) + " |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES, help="d,N,causal (causal 0 or 1)")
    parser.add_argument("--trim", metavar="CSV", help="write the record from ncu's raw CSV instead of launching")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "fa3_ncu.json"))
    parser.add_argument("--command", default="", help="the ncu command line, kept in the record")
    parser.add_argument("--markdown", metavar="JSON", help="print FA3.md's table from a profile record")
    args = parser.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return
    shapes = parse_shapes(args.shapes)
    if args.trim:
        with open(args.out, "w") as f:
            json.dump(trim(args.trim, shapes, args.command), f, indent=1)
        print(f"wrote {args.out}")
    else:
        launch(shapes)


if __name__ == "__main__":
    main()
