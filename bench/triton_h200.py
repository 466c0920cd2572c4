"""Check, then time, the Triton FlashAttention against PyTorch SDPA's backends on one GPU.

    PYTHONPATH=py python3 bench/triton_h200.py [--out DIR] [--sweep] [--skip-check] [--dry-run]

1. Correctness at full benchmark sizes, forward and backward, with the flash-attention bar:
   on a slice of heads, max |triton - fp64 ref| <= 2 · max |plain bf16 - fp64 ref| + extra
   (nlpcore.lab.exercises.triton.check_triton), plus the module's own GPU check cases.
2. TFLOP/s, bf16, d ∈ {64, 128}, N ∈ {1024, 4096, 16384}, causal and not, 16k tokens per
   batch (B = 16384 / N) and hidden size 2048 (H = 2048 / d), for our kernel ("triton"), our
   FlashAttention-3 forward ("fa3", nlpcore.kernels.flash_fa3; its "bwd" is flash_fa3.attention's
   backward, which is flash_triton's backward kernels on the saved o and lse), and SDPA's
   FLASH_ATTENTION, CUDNN_ATTENTION and EFFICIENT_ATTENTION backends, all in this one run.
   FLOPs = 4·N²·d·H·B, halved when causal, ×2.5 for the backward pass. Times are medians of
   triton.testing.do_bench (CUDA events, L2 flushed between repetitions). The backward is timed
   the same way for every backend: ``o.backward(do, retain_graph=True)`` on a saved graph.
3. Writes DIR/triton_h200.json (default bench/results) with GPU, driver, torch, triton, the
   exact command, the autotuned configs and every number; prints a table last.

``--sweep`` first runs an A/B at N=4096: tensor-descriptor (TMA) loads on and off, and the three
dQ strategies of the backward (how flash_triton's defaults were chosen). ``--dry-run`` runs the
whole script at tiny sizes on the CPU interpreter (to check the script, not to time anything).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "py"))
DRY_RUN = "--dry-run" in sys.argv  # smoke-test this script on the CPU under Triton's interpreter
if DRY_RUN:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: E402

from nlpcore.kernels import flash_fa3 as fa3  # noqa: E402
from nlpcore.lab.exercises.triton import check_triton as ct  # noqa: E402
from nlpcore.kernels import flash_triton as ft  # noqa: E402

TOKENS = 16384  # tokens per batch: B = TOKENS / N
HIDDEN = 2048  # hidden size: H = HIDDEN / d
HEAD_DIMS = (64, 128)
SEQ_LENS = (1024, 4096, 16384)
DEVICE, DTYPE = "cuda", torch.bfloat16
if DRY_RUN:  # tiny sizes, float16 (the interpreter's tl.dot is wrong for bfloat16)
    TOKENS, HIDDEN, HEAD_DIMS, SEQ_LENS = 128, 64, (16, 32), (32, 64)
    DEVICE, DTYPE = "cpu", torch.float16
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def flops(n, d, h, b, causal, backward):
    f = 4.0 * n * n * d * h * b
    if causal:
        f /= 2
    return f * 2.5 if backward else f


def env_info():
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi = f"nvidia-smi failed: {exc}"
    if DRY_RUN:
        return {"gpu": "dry run on the CPU", "command": " ".join(sys.argv)}
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        "driver": smi.split(",")[-1].strip() if "," in smi else smi,
        "sm_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__,
        "python": sys.version.split()[0],
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "PYTHONPATH=py python3 " + " ".join(shlex.quote(a) for a in sys.argv),
    }


def shapes():
    for d in HEAD_DIMS:
        for n in SEQ_LENS:
            for causal in (False, True):
                yield d, n, TOKENS // n, HIDDEN // d, causal


def inputs(b, h, n, d, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return [torch.randn(b, h, n, d, device=DEVICE, generator=gen).to(DTYPE) for _ in range(4)]


def check_full_size(d, n, b, h, causal, seed, heads=2):
    """The flash-attention bar at a benchmark size, forward and backward, on `heads` heads of
    batch 0 (heads are independent, so the slice of the kernel's result is its own answer)."""
    q, k, v, do = inputs(b, h, n, d, seed)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = ft.attention(*leaves, causal=causal)
    o.backward(do)
    o_lse = ft.forward(q, k, v, causal=causal)[1]
    sl = (slice(0, 1), slice(0, heads))
    sq, sk, sv, sdo = (t[sl] for t in (q, k, v, do))
    ref_o, ref_lse, ref_grads = ct.reference(sq, sk, sv, sdo, causal=causal)
    plain_o, plain_grads = ct.plain(sq, sk, sv, sdo, causal=causal)
    rows = {}
    got = {"o": o[sl], "dq": leaves[0].grad[sl], "dk": leaves[1].grad[sl], "dv": leaves[2].grad[sl]}
    refs = {"o": ref_o, "dq": ref_grads[0], "dk": ref_grads[1], "dv": ref_grads[2]}
    plains = {"o": plain_o, "dq": plain_grads[0], "dk": plain_grads[1], "dv": plain_grads[2]}
    for name in got:
        verdict = ct.compare(got[name], refs[name], ct.flash_bound(plains[name], refs[name]))
        plain_err = float((plains[name].double() - refs[name]).abs().max())
        rows[name] = {"ok": verdict.ok, "err": verdict.err, "bound": verdict.bound, "plain_err": plain_err}
    lse_v = ct.compare(o_lse[sl], ref_lse, 1e-3)
    rows["lse"] = {"ok": lse_v.ok, "err": lse_v.err, "bound": lse_v.bound}
    # FlashAttention-3's forward, same inputs, same bar
    f_o, f_lse = fa3.forward(q, k, v, causal=causal, fallback=DRY_RUN)
    verdict = ct.compare(f_o[sl], ref_o, ct.flash_bound(plain_o, ref_o))
    rows["fa3_o"] = {"ok": verdict.ok, "err": verdict.err, "bound": verdict.bound}
    lse_v = ct.compare(f_lse[sl], ref_lse, 1e-3)
    rows["fa3_lse"] = {"ok": lse_v.ok, "err": lse_v.err, "bound": lse_v.bound}
    del q, k, v, do, leaves, o
    torch.cuda.empty_cache()
    return rows


WARM_SECONDS = 0.25  # back-to-back launches before each timing: the H200 drops its clock when idle
TIMING = ("triton.testing.do_bench median (ms), warmup 25 ms, rep 100 ms, L2 flushed, after "
          f"{WARM_SECONDS} s of back-to-back launches")


def time_ms(fn, grad_to_none=None):
    """Median milliseconds of fn, timed once the clock is up (bench/README.md: within a second of
    idling the H200's SM clock drops to 345-1000 MHz, and the first launches after it run slow)."""
    if DRY_RUN:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARM_SECONDS:
        fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, return_mode="median")


def bench_one(d, n, b, h, causal, seed):
    q, k, v, do = inputs(b, h, n, d, seed)
    out = {"fwd": {}, "bwd": {}}

    def record(name, pass_, ms, err=None):
        if err is not None:
            out[pass_][name] = {"error": err}
        else:
            tflops = flops(n, d, h, b, causal, pass_ == "bwd") / (ms * 1e-3) / 1e12
            out[pass_][name] = {"ms": ms, "tflops": tflops}

    # ours
    record("triton", "fwd", time_ms(lambda: ft.forward(q, k, v, causal=causal)))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = ft.attention(*leaves, causal=causal)
    record("triton", "bwd", time_ms(lambda: o.backward(do, retain_graph=True), grad_to_none=leaves))
    del o, leaves
    # our FlashAttention-3 forward (its autograd backward is flash_triton's)
    record("fa3", "fwd", time_ms(lambda: fa3.forward(q, k, v, causal=causal, fallback=DRY_RUN)))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o = fa3.attention(*leaves, causal=causal)
    record("fa3", "bwd", time_ms(lambda: o.backward(do, retain_graph=True), grad_to_none=leaves))
    del o, leaves
    # SDPA's backends, same inputs, same method
    for name, backend in BACKENDS.items():
        try:
            with sdpa_kernel(backend), torch.no_grad():
                record(name, "fwd", time_ms(lambda: sdpa(q, k, v, is_causal=causal)))
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            with sdpa_kernel(backend):
                o = sdpa(*leaves, is_causal=causal)
            record(name, "bwd", time_ms(lambda: o.backward(do, retain_graph=True), grad_to_none=leaves))
            del o, leaves
        except (RuntimeError, NotImplementedError) as exc:  # a backend that does not support this shape says so
            msg = str(exc).splitlines()[0][:200]
            out["fwd"].setdefault(name, {"error": msg})
            out["bwd"].setdefault(name, {"error": msg})
    torch.cuda.empty_cache()
    return out


def tuned_configs():
    """The config each autotuned kernel settled on, per tuning key."""
    out = {}
    for label, kernel in (("fwd", ft._fwd_kernel), ("dkdv", ft._bwd_dkdv_kernel), ("dq", ft._bwd_dq_kernel)):
        out[label] = {str(key): str(cfg) for key, cfg in kernel.cache.items()}
    out["fa3"] = {f"d={d} causal={c} N<={n_max}": dataclasses.asdict(var) for d, c, n_max, var in fa3.CHOICES}
    return out


def sweep(log):
    """A/B at N=4096, bf16, with the default config spaces: tensor-descriptor (TMA) loads on and
    off, forward and backward, and the backward's dQ strategies (how the defaults were chosen)."""
    rows = []
    n = SEQ_LENS[1]
    saved = (ft.USE_TMA, ft.DQ_STRATEGY)
    for d, causal in ((HEAD_DIMS[0], False), (HEAD_DIMS[1], False), (HEAD_DIMS[1], True)):
        b, h = TOKENS // n, HIDDEN // d
        q, k, v, do = inputs(b, h, n, d, 7)
        for tma in (False, True):
            for strategy in ("separate", "atomic", "atomic_tma"):
                if strategy == "atomic" and tma:
                    continue
                ft.USE_TMA, ft.DQ_STRATEGY = tma, strategy
                t0 = time.time()
                o, lse = ft.forward(q, k, v, causal=causal)
                ft.backward(q, k, v, o, lse, do, causal=causal)
                row = {"d": d, "causal": causal, "tma": tma, "dq_strategy": strategy,
                       "fwd_ms": time_ms(lambda: ft.forward(q, k, v, causal=causal)),
                       "bwd_ms": time_ms(lambda: ft.backward(q, k, v, o, lse, do, causal=causal))}
                row["fwd_tflops"] = flops(n, d, h, b, causal, False) / (row["fwd_ms"] * 1e-3) / 1e12
                row["bwd_tflops"] = flops(n, d, h, b, causal, True) / (row["bwd_ms"] * 1e-3) / 1e12
                row["seconds"] = time.time() - t0
                rows.append(row)
                log("sweep " + json.dumps(row))
    ft.USE_TMA, ft.DQ_STRATEGY = saved
    return rows


def markdown(record):
    """TRITON.md's results table, from a record (tests/test_bench_smoke.py keeps the file equal)."""
    out = ["| d | N | causal | fwd ours | flash | cuDNN | efficient | ×flash | ×cuDNN "
           "| bwd ours | flash | cuDNN | efficient | ×flash | ×cuDNN |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["results"]:
        cells = [str(r["d"]), str(r["n"]), "yes" if r["causal"] else "no"]
        for pass_ in ("fwd", "bwd"):
            t = {name: r[pass_][name].get("tflops") for name in ("triton", "flash", "cudnn", "efficient")}
            cells += [f"{t[name]:.0f}" if t[name] else "–" for name in t]
            cells += [f"{t['triton'] / t[name]:.2f}" if t["triton"] and t[name] else "–" for name in ("flash", "cudnn")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def fa3_markdown(record):
    """bench/FA3.md's table of the FlashAttention-3 forward, from the same record (TFLOP/s)."""
    out = ["| d | N | causal | FA3 fwd | Triton fwd | flash | cuDNN | FA3 ×cuDNN | FA3 ×flash |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in record["results"]:
        t = {name: r["fwd"][name].get("tflops") for name in ("fa3", "triton", "flash", "cudnn")}
        cells = [str(r["d"]), str(r["n"]), "yes" if r["causal"] else "no"]
        cells += [f"{t[name]:.0f}" if t[name] else "–" for name in t]
        cells += [f"{t['fa3'] / t[name]:.2f}" if t["fa3"] and t[name] else "–" for name in ("cudnn", "flash")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="directory for the JSON")
    parser.add_argument("--sweep", action="store_true", help="A/B of TMA loads and dQ strategies first")
    parser.add_argument("--skip-check", action="store_true", help="skip the correctness checks")
    parser.add_argument("--only-sweep", action="store_true", help="stop after the sweep")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU interpreter")
    parser.add_argument("--markdown", metavar="JSON", help="print TRITON.md's results table from a record")
    parser.add_argument("--markdown-fa3", metavar="JSON", help="print FA3.md's forward table from a record")
    args = parser.parse_args()
    if args.markdown or args.markdown_fa3:
        with open(args.markdown or args.markdown_fa3) as f:
            record = json.load(f)
        print(markdown(record) if args.markdown else fa3_markdown(record))
        return
    if not torch.cuda.is_available() and not DRY_RUN:
        sys.exit("bench/triton_h200.py needs a CUDA GPU (the interpreter is for tests, not timing)")
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "triton_h200.log")
    log_file = open(log_path, "w")

    def log(msg):
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    result = {"schema": 1, "env": env_info(), "dtype": "bfloat16", "tokens_per_batch": TOKENS,
              "hidden": HIDDEN, "flops": "4*N^2*d*H*B, /2 causal, x2.5 backward",
              "timing": TIMING,
              "dq_strategy": ft.DQ_STRATEGY, "use_tma": ft.USE_TMA,
              "config_space": {"fwd": ft.FWD_SPACE, "dkdv": ft.BWD_SPACE, "dq": ft.DQ_SPACE,
                               "entry": "(BLOCK_M, BLOCK_N, num_warps, num_stages)"}}
    log(json.dumps(result["env"]))
    t_start = time.time()

    if args.sweep:
        result["sweep"] = sweep(log)
        log(f"sweep done in {time.time() - t_start:.0f} s")
        if args.only_sweep:
            json.dump(result, open(os.path.join(args.out, "triton_h200_sweep.json"), "w"), indent=1)
            return

    if not args.skip_check:
        checks = ct.run_checks(ft, DEVICE)
        result["checks"] = [r._asdict() for r in checks]
        for r in checks:
            log(f"{r.status.upper():5} {r.check:58} {r.detail}")
        full = []
        for i, (d, n, b, h, causal) in enumerate(shapes()):
            rows = check_full_size(d, n, b, h, causal, seed=100 + i)
            full.append({"d": d, "n": n, "batch": b, "heads": h, "causal": causal, **rows})
            log(f"full-size d={d} N={n} causal={causal}: " + ", ".join(
                f"{k} {'ok' if r['ok'] else 'FAIL'} {r['err']:.2e}/{r['bound']:.2e}" for k, r in rows.items()))
        result["full_size_checks"] = full
        result["all_checks_pass"] = all(r["status"] == "pass" for r in result["checks"]) and all(
            r[k]["ok"] for r in full for k in ("o", "lse", "dq", "dk", "dv", "fa3_o", "fa3_lse"))
        log(f"checks done in {time.time() - t_start:.0f} s; all pass: {result['all_checks_pass']}")

    rows = []
    for i, (d, n, b, h, causal) in enumerate(shapes()):
        t0 = time.time()
        r = bench_one(d, n, b, h, causal, seed=200 + i)
        row = {"d": d, "n": n, "batch": b, "heads": h, "causal": causal, **r}
        for pass_ in ("fwd", "bwd"):
            ours = r[pass_]["triton"].get("tflops")
            fa3_tf = r[pass_]["fa3"].get("tflops")
            for other in BACKENDS:
                theirs = r[pass_].get(other, {}).get("tflops")
                row[f"{pass_}_vs_{other}"] = ours / theirs if ours and theirs else None
                row[f"fa3_{pass_}_vs_{other}"] = fa3_tf / theirs if fa3_tf and theirs else None
        rows.append(row)
        log(f"d={d} N={n} causal={causal} ({time.time() - t0:.0f} s): " + "  ".join(
            f"{p} " + " ".join(f"{k}={v.get('tflops', float('nan')):.0f}" for k, v in r[p].items())
            for p in ("fwd", "bwd")))
    result["results"] = rows
    result["tuned"] = tuned_configs()
    result["targets"] = {
        "fwd_ge_flash_everywhere": all((r["fwd_vs_flash"] or 0) >= 1.0 for r in rows),
        "bwd_ge_flash_everywhere": all((r["bwd_vs_flash"] or 0) >= 1.0 for r in rows),
        "fa3_fwd_ge_cudnn_everywhere": all((r["fa3_fwd_vs_cudnn"] or 0) >= 1.0 for r in rows),
        "fa3_fwd_tflops_d128_n16384_noncausal": next(
            (r["fwd"]["fa3"].get("tflops") for r in rows if r["d"] == 128 and r["n"] == 16384 and not r["causal"]),
            None),
        "fa3_fwd_target_tflops": 620,
    }
    result["seconds"] = time.time() - t_start
    path = os.path.join(args.out, "triton_h200.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)

    log("")
    log(f"{'d':>4} {'N':>6} {'causal':>6} | {'fwd TFLOP/s: ours':>17} {'flash':>6} {'cudnn':>6} {'eff':>6} "
        f"{'x flash':>7} {'x cudnn':>7} | {'bwd: ours':>9} {'flash':>6} {'cudnn':>6} {'eff':>6} {'x flash':>7} {'x cudnn':>7}")

    def tf(r, p, k):
        return f"{r[p].get(k, {}).get('tflops', float('nan')):6.0f}"

    def ratio(x):
        return f"{x:7.2f}" if x else "    n/a"

    for r in rows:
        log(f"{r['d']:>4} {r['n']:>6} {str(r['causal']):>6} | {tf(r, 'fwd', 'triton'):>17} {tf(r, 'fwd', 'flash')} "
            f"{tf(r, 'fwd', 'cudnn')} {tf(r, 'fwd', 'efficient')} {ratio(r['fwd_vs_flash'])} {ratio(r['fwd_vs_cudnn'])} | "
            f"{tf(r, 'bwd', 'triton'):>9} {tf(r, 'bwd', 'flash')} {tf(r, 'bwd', 'cudnn')} {tf(r, 'bwd', 'efficient')} "
            f"{ratio(r['bwd_vs_flash'])} {ratio(r['bwd_vs_cudnn'])}")
    for r in rows:
        log(f"FA3 d={r['d']} N={r['n']} causal={r['causal']}: fwd {tf(r, 'fwd', 'fa3')} TFLOP/s, "
            f"x cudnn {ratio(r['fa3_fwd_vs_cudnn'])}, x flash {ratio(r['fa3_fwd_vs_flash'])}")
    log(json.dumps(result["targets"]))
    log(f"wrote {path} in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
