"""Split-K decoding (Flash-Decoding) on one GPU: check it, then time it at several split counts.

    PYTHONPATH=py python3 bench/split_k_h200.py [--out DIR] [--dry-run]

The setting is decoding: Nq ∈ {1, 4} queries per (batch, head) against a bf16 key/value cache
of Nk ∈ {4096, 32768, 131072} tokens, d = 128, H = 32 heads, batch B ∈ {1, 8}. With B·H = 32
(query block, batch·head) programs, an unsplit FlashAttention kernel keeps at most 32 of the
H200's 132 SMs busy; ``nlpcore.kernels.split_k_triton`` launches B·H·splits programs and merges
their partial (o, lse) with the online-softmax monoid in a second kernel.

1. Correctness, at every size and split count timed: max |ours − fp64 reference| must stay within
   the flash-attention bar (2 · the error of plain bf16 PyTorch attention + rounding slack,
   ``check_triton.flash_bound``); lse within 1e-3 of the fp64 logsumexp; max |ours − SDPA| is
   recorded too.
2. Times (median of ``triton.testing.do_bench_cudagraph``: the calls are captured in a CUDA graph,
   so CPU launch overhead, which differs between Triton and ATen, is left out) for our kernel at
   splits ∈ {1, 2, 4, ..., 64} (splits = 1 is the unsplit kernel), for SDPA's default dispatch and
   its FLASH_ATTENTION, EFFICIENT_ATTENTION and CUDNN_ATTENTION backends, and for
   ``flash_triton.forward`` (the FlashAttention-2-style kernel of this lab, one program per
   128-query block). Effective bandwidth = bytes of K and V read / time.
3. Writes DIR/split_k_h200.json (default bench/results) with the GPU, versions, the exact
   command and every number; prints a table.

``--dry-run`` runs the script at tiny sizes on the CPU under Triton's interpreter (float16),
to check the script, not to time anything.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "py"))
DRY_RUN = "--dry-run" in sys.argv
if DRY_RUN:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: E402

from nlpcore.lab.exercises.triton import check_triton as ct  # noqa: E402
from nlpcore.kernels import flash_triton as ft  # noqa: E402
from nlpcore.kernels import split_k_triton as skt  # noqa: E402

HEADS, HEAD_DIM = 32, 128
SHAPES = [(1, 4096), (1, 32768), (1, 131072), (8, 32768)]  # (batch B, cache length Nk)
QUERIES = (1, 4)
SPLITS = (1, 2, 4, 8, 16, 32, 64)
DEVICE, DTYPE = "cuda", torch.bfloat16
if DRY_RUN:  # tiny sizes, float16 (the interpreter's tl.dot is wrong for bfloat16)
    HEADS, HEAD_DIM, SHAPES, QUERIES, SPLITS = 2, 16, [(1, 100)], (1, 3), (1, 3)
    DEVICE, DTYPE = "cpu", torch.float16
BACKENDS = {
    "sdpa": None,  # SDPA's own choice of backend
    "sdpa_flash": SDPBackend.FLASH_ATTENTION,
    "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
}


def env_info():
    command = "PYTHONPATH=py python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    if DRY_RUN:
        return {"gpu": "dry run on the CPU", "command": command}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi = "nvidia-smi failed: {}".format(exc)
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0), "nvidia_smi": smi, "sm_count": props.multi_processor_count,
        "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__, "python": sys.version.split()[0],
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }


def time_ms(fn):
    """Median ms of fn over a CUDA graph of repeated calls (launch overhead excluded)."""
    if DRY_RUN:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    return triton.testing.do_bench_cudagraph(fn, rep=60, return_mode="median")


def contenders(q, k, v):
    """name -> (callable returning o, callable returning (o, lse) or None, extra record fields)."""
    out = {}
    for s in SPLITS:
        parts = triton.cdiv(k.shape[2], skt.keys_per_split(k.shape[2], s))
        out["split_{}".format(s)] = (
            lambda s=s: skt.forward(q, k, v, splits=s)[0],
            lambda s=s: skt.forward(q, k, v, splits=s),
            {"splits": s, "parts": parts, "programs": parts * q.shape[0] * q.shape[1]},
        )
    if q.shape[-1] in ft.HEAD_DIMS:
        out["flash_triton"] = (lambda: ft.forward(q, k, v)[0], lambda: ft.forward(q, k, v), {})
    for name, backend in BACKENDS.items():
        if DRY_RUN and backend is not None:
            continue  # the CPU has only the math backend

        def call(backend=backend):
            if backend is None:
                return sdpa(q, k, v)
            with sdpa_kernel([backend]):
                return sdpa(q, k, v)

        out[name] = (call, None, {})
    return out


def bench_shape(b, n_k, n_q, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(b, HEADS, n_q, HEAD_DIM, device=DEVICE, generator=gen).to(DTYPE)
    k = torch.randn(b, HEADS, n_k, HEAD_DIM, device=DEVICE, generator=gen).to(DTYPE)
    v = torch.randn(b, HEADS, n_k, HEAD_DIM, device=DEVICE, generator=gen).to(DTYPE)
    ref_o, ref_lse, _ = ct.reference(q, k, v)
    plain_o, _ = ct.plain(q, k, v)
    bound = ct.flash_bound(plain_o, ref_o)
    plain_err = float((plain_o.double() - ref_o).abs().max())
    with torch.no_grad():
        sdpa_o = sdpa(q, k, v)
    kv_bytes = 2 * k.numel() * k.element_size()
    rows = {}
    for name, (run_o, run_lse, extra) in contenders(q, k, v).items():
        row = dict(extra)
        try:
            with torch.no_grad():
                o = run_o()
                v_o = ct.compare(o, ref_o, bound)
                row.update(ok=v_o.ok, err=v_o.err, bound=bound, plain_err=plain_err,
                           err_vs_sdpa=float((o.double() - sdpa_o.double()).abs().max()))
                if run_lse is not None:
                    v_l = ct.compare(run_lse()[1], ref_lse, 1e-3)
                    row.update(lse_ok=v_l.ok, lse_err=v_l.err)
                    row["ok"] = row["ok"] and v_l.ok
                ms = time_ms(run_o)
            row.update(ms=ms, gb_per_s=kv_bytes / (ms * 1e-3) / 1e9)
        except Exception as exc:  # a backend that refuses this shape is recorded, not fatal
            row.update(ok=None, error="{}: {}".format(type(exc).__name__, str(exc).splitlines()[0][:200]))
        rows[name] = row
    del q, k, v, ref_o, plain_o, sdpa_o
    if not DRY_RUN:
        torch.cuda.empty_cache()
    return {"batch": b, "heads": HEADS, "d": HEAD_DIM, "n_q": n_q, "n_k": n_k, "kv_bytes": kv_bytes, "results": rows}


def summarise(case):
    r = case["results"]
    timed = {n: x["ms"] for n, x in r.items() if "ms" in x}
    splits = {n: ms for n, ms in timed.items() if n.startswith("split_")}
    best = min(splits, key=splits.get)
    sdpa_best = min((n for n in timed if n.startswith("sdpa")), key=timed.get)
    case["best_split"] = best
    case["best_split_vs_unsplit"] = timed["split_1"] / timed[best]
    case["best_split_vs_sdpa"] = timed["sdpa"] / timed[best]
    case["fastest_sdpa_backend"] = sdpa_best
    case["best_split_vs_fastest_sdpa"] = timed[sdpa_best] / timed[best]
    return case


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    t0 = time.time()
    cases = []
    for b, n_k in SHAPES:
        for n_q in QUERIES:
            case = summarise(bench_shape(b, n_k, n_q, seed=n_k + n_q))
            cases.append(case)
            print("B={} H={} Nq={} Nk={}: best {} {:.4f} ms; unsplit {:.4f} ms; sdpa {:.4f} ms; "
                  "fastest sdpa ({}) {:.4f} ms".format(
                      b, HEADS, n_q, n_k, case["best_split"], case["results"][case["best_split"]]["ms"],
                      case["results"]["split_1"]["ms"], case["results"]["sdpa"]["ms"],
                      case["fastest_sdpa_backend"], case["results"][case["fastest_sdpa_backend"]]["ms"]), flush=True)
    all_ok = all(x.get("ok") is not False for c in cases for x in c["results"].values())
    ours_ok = all(x.get("ok") is True for c in cases for n, x in c["results"].items() if n.startswith("split_"))
    record = {
        "schema": "split_k_h200/1",
        "env": env_info(),
        "dtype": str(DTYPE).replace("torch.", ""),
        "timing": "median of triton.testing.do_bench_cudagraph(rep=60 ms): CUDA-graph replay, launch overhead excluded",
        "kernel": {"block_n": skt.BLOCK_N, "block_m": skt.MAX_QUERIES, "split_warps": skt.SPLIT_WARPS,
                   "split_stages": skt.SPLIT_STAGES, "merge_block_rows": skt.BLOCK_R},
        "check": "max|ours - fp64 ref| <= check_triton.flash_bound(plain bf16 attention, ref); lse within 1e-3",
        "all_split_checks_pass": ours_ok,
        "no_failed_checks": all_ok,
        "cases": cases,
        "seconds": time.time() - t0,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "split_k_h200.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, allow_nan=False)
        f.write("\n")
    header = "{:>3} {:>3} {:>7} | ".format("B", "Nq", "Nk") + " ".join("{:>9}".format(n) for n in cases[0]["results"])
    print(header)
    for c in cases:
        cells = ["{:9.4f}".format(x["ms"]) if "ms" in x else "{:>9}".format("-") for x in c["results"].values()]
        print("{:>3} {:>3} {:>7} | ".format(c["batch"], c["n_q"], c["n_k"]) + " ".join(cells))
    print("wrote", path, "checks:", "pass" if ours_ok else "FAIL", "({:.0f} s)".format(record["seconds"]))
    return 0 if ours_ok else 1


if __name__ == "__main__":
    sys.exit(main())
