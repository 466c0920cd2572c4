"""What drawing the dropout keep-mask costs inside our Triton kernels (issue 12's speed-up
target), measured by swapping the draw.

The kernels draw one keep bit per entry of P in registers, in the forward pass and again in
the backward pass. At d = 64 they are bound by instruction issue on the CUDA cores (softmax,
scaling, conversions), not by the tensor cores, so every instruction per entry shows up in the
step time. This script swaps ``dropout_triton.keep``/``keep_t`` for other draws, one
subprocess each (Triton binds the functions when it compiles), and times one training step
(forward + backward) at the paper's Figure 2 setting:

    p0             no dropout at all (the floor)
    library        the library's draw: (key(row) XOR key(col)) * M1 >= cut (nlpcore.kernels.dropout)
    per_entry_mix  one lowbias32 of key(row) + key(col) per entry (about eleven instructions),
                   the shape of the library's earlier draw
    xor_only       key(row) XOR key(col) >= cut: statistically flawed (rectangles cancel), but
                   the cheapest draw there is, so a floor for what any draw plus the select costs

Each variant is sanity-checked on the device: with q = k = 0 (uniform P over the allowed keys)
and v = 1 the output's mean is the kept fraction over (1 − p), so it must be ≈ 1; a draw the
compiler removed or broke shows there.

    PYTHONPATH=py python3 bench/dropout_cost_h200.py --out DIR          # on the H200
    PYTHONPATH=py python3 bench/dropout_cost_h200.py --dry-run --out DIR  # CPU, interpreter
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

VARIANTS = ["p0", "library", "per_entry_mix", "xor_only"]
FIG2 = {"batch": 64, "heads": 16, "n": 1024, "d": 64}
DROPOUT_P = 0.1
IO_RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "io_h200.json")


def baseline_ms():
    """The PyTorch baseline's step at Figure 2 from bench/io_h200.py's record (None without it):
    the speed-ups below are against the same baseline the IO record measured."""
    try:
        with open(IO_RECORD) as f:
            rows = json.load(f)["rows"]
        return next(r["runtime_ms"] for r in rows if r["setting"] == "figure2" and r["impl"] == "baseline")
    except (OSError, KeyError, ValueError, StopIteration):
        return None


def worker(variant, dry_run, d):
    if dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import triton

    from nlpcore.kernels import dropout_triton
    from nlpcore.kernels import flash_triton as ft

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _dropout_variants

    swaps = _dropout_variants.SWAPS
    if variant in swaps:
        dropout_triton.keep, dropout_triton.keep_t = swaps[variant]  # every kernel draws through these
    p = 0.0 if variant == "p0" else DROPOUT_P

    device = "cpu" if dry_run else "cuda"
    dtype = torch.float16
    b, h, n = (1, 2, 64) if dry_run else (FIG2["batch"], FIG2["heads"], FIG2["n"])
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v, do = (torch.randn(b, h, n, d, device=device, generator=gen).to(dtype) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    seed = [11]

    def fwd():
        seed[0] += 1
        with torch.no_grad():
            return ft.attention(q, k, v, causal=True, dropout_p=p, seed=seed[0])

    def step():
        seed[0] += 1
        o = ft.attention(q, k, v, causal=True, dropout_p=p, seed=seed[0])
        return torch.autograd.grad(o, (q, k, v), do)

    # sanity: q = 0 makes P uniform over the allowed keys; v = 1 makes o the kept fraction / (1 − p)
    zeros = torch.zeros(1, 4, 1024 if not dry_run else 64, d, device=device, dtype=dtype)
    ones = torch.ones_like(zeros)
    with torch.no_grad():
        o = ft.attention(zeros, zeros, ones, causal=True, dropout_p=p, seed=5)
    tail = o[..., o.shape[2] // 2:, 0].float()  # rows with >= N/2 keys: small sampling noise
    sanity = {"mean_o": float(tail.mean()), "std_o": float(tail.std())}

    if dry_run:
        step()
        t0 = time.perf_counter()
        step()
        return {"variant": variant, "step_ms": (time.perf_counter() - t0) * 1e3, "sanity": sanity}
    step()
    fwd()
    torch.cuda.synchronize()
    step_ms = triton.testing.do_bench(step, warmup=50, rep=300, return_mode="median")
    fwd_ms = triton.testing.do_bench(fwd, warmup=50, rep=300, return_mode="median")
    row = {"variant": variant, "d": d, "p": p, "step_ms": step_ms, "fwd_ms": fwd_ms,
           "bwd_ms": step_ms - fwd_ms, "sanity": sanity}
    base = baseline_ms()
    if base is not None:
        row["speedup_vs_baseline"] = base / step_ms
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args.dry_run, args.d)))
        return
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "dropout_cost_h200.json" if not args.dry_run else "dropout_cost_dry.json")
    rows = []
    for name in args.variants.split(","):
        t0 = time.time()
        cmd = [sys.executable, __file__, "--worker", name, "--d", str(args.d)] + (["--dry-run"] if args.dry_run else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not line:
            row = {"variant": name, "error": (proc.stderr or proc.stdout)[-1500:]}
        else:
            row = json.loads(line[-1][7:])
        row["wall_s"] = round(time.time() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(path, "w") as f:  # after every variant: a run cut short keeps what it measured
            json.dump({"benchmark": "dropout_cost_h200", "setting": dict(FIG2, d=args.d, causal=True,
                       dtype="float16", dropout_p=DROPOUT_P), "rows": rows,
                       "baseline_ms": baseline_ms(), "baseline_from": "bench/results/io_h200.json",
                       "command": "PYTHONPATH=py python3 bench/dropout_cost_h200.py " + " ".join(sys.argv[1:])},
                      f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
