"""FlashAttention-3's forward on the H200: a speed probe, and the ablations Episode 5 teaches from.

    PYTHONPATH=py python3 bench/fa3_h200.py [--out DIR] [--quick]

Each ablation is the same kernel (nlpcore.kernels.flash_fa3_gluon) with one of FlashAttention-3's
techniques switched off (Shah et al. 2024, arXiv:2407.08608, §3.1-3.2 and its ablation §4.3):

    full          producer warp + two ping-ponging consumer warpgroups + softmax/GEMM overlap
    no_pingpong   both consumers issue their products whenever ready (no token passed)
    no_overlap    each consumer waits for QKᵀ and PV before its softmax (in-order steps)
    no_warp_spec  no producer warp: one 8-warp program issues its own TMA copies (prefetching the
                  ring's depth ahead) and runs both warpgroups in step (so no ping-pong either)
    none          no_warp_spec without the overlap: FlashAttention-2's loop on wgmma + TMA
    named         full, with the hand-overs (ping-pong token, K/V slot releases) on named
                  barriers, per warp
    mbarrier      full, with them on mbarriers (one thread arrives after a warpgroup-wide
                  bar.sync); ``full`` is whichever of the two the shape's variant uses

bf16, the benchmark shapes of bench/triton_h200.py (16k tokens per batch, hidden size 2048),
timed with triton.testing.do_bench (median, L2 flushed), each variant checked against float64
first (the flash-attention bar on two heads). Writes DIR/fa3_h200.json (default bench/results).
``--quick`` times only the full kernel, cuDNN and our portable Triton kernel on two shapes.
``--persistent`` times, on all 12 shapes of bench/triton_h200.py, the full kernel launched
persistently (one program per SM, the default) and one program per work item, against cuDNN
(all in one run), and writes fa3_h200_persistent.json.
Each ablation starts from the variant flash_fa3.choose picks for the shape (recorded in the row
as ``variant``) and sets the flags above on it; without warp specialisation the launch is one
program per work item with two warpgroups. (The recorded fa3_h200.json is older, run 2 of
bench/FA3.md: every variant there is two warpgroups, one program per work item.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "py"))

import torch  # noqa: E402

import triton_h200 as tb  # noqa: E402  (shapes, FLOP counts, timing, environment: one definition)
from nlpcore.lab.exercises.triton import check_triton as ct  # noqa: E402
from nlpcore.kernels import flash_fa3  # noqa: E402
from nlpcore.kernels import flash_triton as ft  # noqa: E402

VARIANTS = {
    "full": dict(warp_spec=True, pingpong=True, overlap=True),
    "no_pingpong": dict(warp_spec=True, pingpong=False, overlap=True),
    "no_overlap": dict(warp_spec=True, pingpong=True, overlap=False),
    "no_warp_spec": dict(warp_spec=False, pingpong=False, overlap=True),
    "none": dict(warp_spec=False, pingpong=False, overlap=False),
    "named": dict(warp_spec=True, pingpong=True, overlap=True, named=True),
    "mbarrier": dict(warp_spec=True, pingpong=True, overlap=True, named=False),
}
PERSISTENCE = {"full": dict(persistent=True), "full_per_item": dict(persistent=False)}
ABLATION_SHAPES = [(128, 16384, False), (128, 16384, True), (128, 4096, False), (64, 16384, False),
                   (64, 4096, True)]
QUICK_SHAPES = [(128, 16384, False), (64, 4096, True)]


def check(q, k, v, causal, flags):
    """The flash-attention bar on two heads of batch 0 (heads are independent)."""
    o, lse = flash_fa3.forward(q, k, v, causal=causal, fallback=False, **flags)
    sl = (slice(0, 1), slice(0, 2))
    ref_o, ref_lse, _ = ct.reference(q[sl], k[sl], v[sl], causal=causal)
    plain_o, _ = ct.plain(q[sl], k[sl], v[sl], causal=causal)
    v_o = ct.compare(o[sl], ref_o, ct.flash_bound(plain_o, ref_o))
    v_lse = ct.compare(lse[sl], ref_lse, 1e-3)
    return {"ok": v_o.ok and v_lse.ok, "o_err": v_o.err, "o_bound": v_o.bound, "lse_err": v_lse.err}


def row(d, n, causal, variants, others, log):
    b, h = tb.TOKENS // n, tb.HIDDEN // d
    q, k, v = tb.inputs(b, h, n, d, seed=300 + n + d)[:3]
    fl = tb.flops(n, d, h, b, causal, False)
    out = {"d": d, "n": n, "batch": b, "heads": h, "causal": causal, "fwd": {},
           "variant": dataclasses.asdict(flash_fa3.choose(d, causal, n))}  # the flags below override it
    for name, flags in variants.items():
        try:
            verdict = check(q, k, v, causal, flags)
            ms = tb.time_ms(lambda: flash_fa3.forward(q, k, v, causal=causal, fallback=False, **flags))
            out["fwd"][name] = {"ms": ms, "tflops": fl / (ms * 1e-3) / 1e12, "flags": flags, "check": verdict}
        except Exception as exc:  # a variant that fails to compile or run is recorded, not hidden
            out["fwd"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
    if "cudnn" in others:
        with tb.sdpa_kernel(tb.BACKENDS["cudnn"]), torch.no_grad():
            ms = tb.time_ms(lambda: tb.sdpa(q, k, v, is_causal=causal))
        out["fwd"]["cudnn"] = {"ms": ms, "tflops": fl / (ms * 1e-3) / 1e12}
    if "triton" in others:
        ms = tb.time_ms(lambda: ft.forward(q, k, v, causal=causal))
        out["fwd"]["triton"] = {"ms": ms, "tflops": fl / (ms * 1e-3) / 1e12}
    log(f"d={d} N={n} causal={causal}: " + "  ".join(
        f"{name}={r['tflops']:.0f}" if "tflops" in r else f"{name}=ERROR({r['error'][:120]})"
        for name, r in out["fwd"].items()))
    del q, k, v
    torch.cuda.empty_cache()
    return out


def markdown(record):
    """FA3.md's table for a record of this script: TFLOP/s per variant, and × cuDNN."""
    names = list(record["variants"]) + ["cudnn"]
    out = ["| d | N | causal | " + " | ".join(names) + " | " + " | ".join(f"{v} ×cuDNN" for v in record["variants"]) + " |",
           "|---|---|---|" + "---|" * (2 * len(names) - 1)]
    for r in record["rows"]:
        t = {name: r["fwd"].get(name, {}).get("tflops") for name in names}
        cells = [str(r["d"]), str(r["n"]), "yes" if r["causal"] else "no"]
        cells += [f"{t[name]:.0f}" if t[name] else "–" for name in names]
        cells += [f"{t[v] / t['cudnn']:.2f}" if t[v] and t["cudnn"] else "–" for v in record["variants"]]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--quick", action="store_true", help="full kernel vs cuDNN and Triton, two shapes")
    parser.add_argument("--persistent", action="store_true", help="persistent vs per-item launch, 12 shapes")
    parser.add_argument("--markdown", metavar="JSON", help="print FA3.md's table from a record of this script")
    args = parser.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return
    if not torch.cuda.is_available():
        sys.exit("bench/fa3_h200.py needs a CUDA GPU")
    os.makedirs(args.out, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    t0 = time.time()
    record = {"schema": 1, "env": tb.env_info(), "dtype": "bfloat16", "tokens_per_batch": tb.TOKENS,
              "hidden": tb.HIDDEN, "flops": "4*N^2*d*H*B, /2 causal", "timing": tb.TIMING,
              "variants": VARIANTS}
    record["env"]["command"] = "PYTHONPATH=py python3 bench/fa3_h200.py " + " ".join(sys.argv[1:])
    log(json.dumps(record["env"]))
    if args.persistent:
        record["variants"] = PERSISTENCE
        record["rows"] = []
        name = "fa3_h200_persistent.json"
        for d, n, b, h, c in tb.shapes():  # the record is rewritten after every row
            record["rows"].append(row(d, n, c, PERSISTENCE, ("cudnn",), log))
            with open(os.path.join(args.out, name), "w") as f:
                json.dump(record, f, indent=1)
    elif args.quick:
        record["rows"] = [row(d, n, c, {"full": VARIANTS["full"]}, ("cudnn", "triton"), log)
                          for d, n, c in QUICK_SHAPES]
        name = "fa3_h200_quick.json"
    else:
        record["rows"] = [row(d, n, c, VARIANTS, ("cudnn",), log) for d, n, c in ABLATION_SHAPES]
        name = "fa3_h200.json"
    record["choices"] = {f"d={d} causal={c} N<={n_max}": dataclasses.asdict(var) for d, c, n_max, var in flash_fa3.CHOICES}
    record["seconds"] = time.time() - t0
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(record, f, indent=1)
    log(f"wrote {name} in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
