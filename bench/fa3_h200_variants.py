"""Which FlashAttention-3 variant to run where: every candidate on the 12 benchmark shapes, beside cuDNN.

    PYTHONPATH=py python3 bench/fa3_h200_variants.py [--out DIR]      # on the H200
    python3 bench/fa3_h200_variants.py --markdown bench/results/fa3_h200_variants.json

For each shape of bench/triton_h200.py (bf16, 16k tokens per batch, hidden size 2048) this
times cuDNN's forward and each candidate ``flash_fa3.Variant`` in one process: every candidate
is first checked against float64 at the flash-attention bar on two heads (a candidate that
fails, or fails to compile, is recorded and never chosen), then timed with
triton.testing.do_bench (median, L2 flushed). Each shape runs in its own child process with a
time limit, so a candidate that hangs costs that shape, not the run. The record,
DIR/fa3_h200_variants.json (default bench/results), keeps every number; ``flash_fa3.CHOICES``
is written from it by hand (FA3.md gives the rule) and tests/test_flash_fa3.py holds the two
equal.

The candidates (flash_fa3.Variant fields; FA3.md says what each is for):
    2wg      two consumer warpgroups of 64 rows (128-row items), ping-pong, 2-slot ring
    3wg      three consumer warpgroups (192-row items), 160 registers each, as FlashAttention-3
             does at d = 64
    _nopp    without the ping-pong token        _kvf   one barrier pair per slot for K and V
    _s3/_s4  3 or 4 ring slots                   _n64   64-key tiles
    _item    one program per work item (else persistent, one per SM)
    _bal     causal items longest first across heads, dealt in a snake (persistent unless _item)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "py"))

V = dict  # a candidate: keyword arguments of flash_fa3.Variant
COMMON_64 = {
    "2wg": V(stages=2), "2wg_s3": V(stages=3), "2wg_nopp": V(stages=2, pingpong=False),
    "2wg_kvf_s3": V(stages=3, kv_fused=True), "3wg": V(consumers=3, stages=3),
    "3wg_nopp": V(consumers=3, stages=3, pingpong=False), "3wg_n64": V(consumers=3, block_n=64, stages=4),
    "3wg_kvf": V(consumers=3, stages=3, kv_fused=True),
}
CANDIDATES = {
    (64, False): COMMON_64,
    (64, True): {
        "2wg_item": V(stages=2, persistent=False), "2wg_nopp_item": V(stages=2, pingpong=False, persistent=False),
        "2wg_bal": V(stages=2, balance=True), "2wg_nopp_bal": V(stages=2, pingpong=False, balance=True),
        "2wg_kvf_bal": V(stages=3, kv_fused=True, balance=True), "3wg_item": V(consumers=3, stages=3, persistent=False),
        "3wg_bal": V(consumers=3, stages=3, balance=True), "3wg_n64_bal": V(consumers=3, block_n=64, stages=4, balance=True),
        "3wg_bal_item": V(consumers=3, stages=3, balance=True, persistent=False),
    },
    (128, False): {"2wg": V(), "2wg_nopp": V(pingpong=False), "2wg_kvf": V(kv_fused=True), "2wg_item": V(persistent=False)},
    (128, True): {
        "2wg_item": V(persistent=False), "2wg_bal": V(balance=True), "2wg_kvf_bal": V(kv_fused=True, balance=True),
        "2wg_bal_item": V(balance=True, persistent=False), "2wg_nopp_bal": V(pingpong=False, balance=True),
    },
}
OLD_DEFAULT = {(64, False): "2wg", (64, True): "2wg_item", (128, False): "2wg", (128, True): "2wg_item"}


def one_shape(index):
    """Child process: check and time every candidate of shape `index`; print one JSON line."""
    import torch

    import triton_h200 as tb
    from nlpcore.kernels import flash_fa3
    from nlpcore.lab.exercises.triton import check_triton as ct

    d, n, b, h, causal = list(tb.shapes())[index]
    q, k, v = tb.inputs(b, h, n, d, seed=400 + index)[:3]
    fl = tb.flops(n, d, h, b, causal, False)
    sl = (slice(0, 1), slice(0, 2))  # two heads of batch 0: heads are independent
    ref_o, ref_lse, _ = ct.reference(q[sl], k[sl], v[sl], causal=causal)  # float64
    bound = ct.flash_bound(ct.plain(q[sl], k[sl], v[sl], causal=causal)[0], ref_o)

    def check(var):
        o, lse = flash_fa3.forward(q, k, v, causal=causal, fallback=False, variant=var)
        v_o, v_lse = ct.compare(o[sl], ref_o, bound), ct.compare(lse[sl], ref_lse, 1e-3)
        return {"ok": v_o.ok and v_lse.ok, "o_err": v_o.err, "o_bound": v_o.bound, "lse_err": v_lse.err}

    row = {"d": d, "n": n, "batch": b, "heads": h, "causal": causal, "old_default": OLD_DEFAULT[(d, causal)],
           "fwd": {}}
    with tb.sdpa_kernel(tb.BACKENDS["cudnn"]), torch.no_grad():
        ms = tb.time_ms(lambda: tb.sdpa(q, k, v, is_causal=causal))
    row["fwd"]["cudnn"] = {"ms": ms, "tflops": fl / (ms * 1e-3) / 1e12}
    for name, kw in CANDIDATES[(d, causal)].items():
        var = flash_fa3.Variant(**kw)
        t0 = time.time()
        try:
            verdict = check(var)
            ms = tb.time_ms(lambda: flash_fa3.forward(q, k, v, causal=causal, fallback=False, variant=var))
            row["fwd"][name] = {"ms": ms, "tflops": fl / (ms * 1e-3) / 1e12, "variant": kw, "check": verdict,
                                "seconds": time.time() - t0}
        except Exception as exc:  # a candidate that fails to compile or run is recorded, not hidden
            row["fwd"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}", "variant": kw}
    print("ROW " + json.dumps(row), flush=True)


def best(row):
    """The fastest candidate whose check passed (None if none did)."""
    ok = {name: r for name, r in row["fwd"].items() if name != "cudnn" and r.get("check", {}).get("ok")}
    return min(ok, key=lambda name: ok[name]["ms"]) if ok else None


def markdown(record):
    """FA3.md's table: cuDNN, the old default and the best candidate per shape (TFLOP/s)."""
    out = ["| d | N | causal | cuDNN | old default | ×cuDNN | best candidate | TFLOP/s | ×cuDNN | candidates (checked) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["rows"]:
        if "error" in r:
            out.append(f"| {r['d']} | {r['n']} | {'yes' if r['causal'] else 'no'} | – | – | – | {r['error'][:60]} | – | – | – |")
            continue
        cu = r["fwd"]["cudnn"]["tflops"]
        old = r["fwd"].get(r["old_default"], {}).get("tflops")
        b = best(r)
        tb_ = r["fwd"][b]["tflops"] if b else None
        n_ok = sum(1 for name, x in r["fwd"].items() if name != "cudnn" and x.get("check", {}).get("ok"))
        cells = [str(r["d"]), str(r["n"]), "yes" if r["causal"] else "no", f"{cu:.0f}",
                 f"{old:.0f}" if old else "–", f"{old / cu:.2f}" if old else "–", f"`{b}`" if b else "–",
                 f"{tb_:.0f}" if tb_ else "–", f"{tb_ / cu:.2f}" if tb_ else "–",
                 f"{n_ok}/{len(r['fwd']) - 1}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--shape", type=int, help=argparse.SUPPRESS)  # child process: one shape
    parser.add_argument("--timeout", type=float, default=120, help="seconds per shape")
    parser.add_argument("--markdown", metavar="JSON", help="print FA3.md's table from a record")
    args = parser.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return
    if args.shape is not None:
        one_shape(args.shape)
        return
    import triton_h200 as tb

    os.makedirs(args.out, exist_ok=True)
    record = {"schema": 1, "env": tb.env_info(), "dtype": "bfloat16", "tokens_per_batch": tb.TOKENS,
              "hidden": tb.HIDDEN, "flops": "4*N^2*d*H*B, /2 causal",
              "timing": "triton.testing.do_bench median (ms), warmup 25 ms, rep 100 ms, L2 flushed",
              "candidates": {f"{d},{'causal' if c else 'full'}": cands for (d, c), cands in CANDIDATES.items()},
              "rows": []}
    record["env"]["command"] = "PYTHONPATH=py python3 bench/fa3_h200_variants.py " + " ".join(sys.argv[1:])
    print(json.dumps(record["env"]), flush=True)
    t0 = time.time()
    for i, (d, n, b, h, causal) in enumerate(tb.shapes()):
        try:
            proc = subprocess.run([sys.executable, __file__, "--shape", str(i)], capture_output=True, text=True,
                                  timeout=args.timeout)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("ROW ")]
            row = json.loads(lines[0][4:]) if lines else {"error": f"exit {proc.returncode}: {proc.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            row = {"error": f"timed out after {args.timeout:.0f} s"}
        row.update({"d": d, "n": n, "causal": causal})
        record["rows"].append(row)
        with open(os.path.join(args.out, "fa3_h200_variants.json"), "w") as f:
            json.dump(record, f, indent=1)
        if "error" in row:
            print(f"d={d} N={n} causal={causal}: ERROR {row['error']}", flush=True)
            continue
        cu = row["fwd"]["cudnn"]["tflops"]
        print(f"d={d} N={n} causal={causal}: cudnn={cu:.0f} " + " ".join(
            f"{name}={x['tflops'] / cu:.3f}" + ("" if x["check"]["ok"] else "(FAIL)") if "tflops" in x
            else f"{name}=ERR({x['error'][:80]})" for name, x in row["fwd"].items() if name != "cudnn")
            + f"  best={best(row)}", flush=True)
    record["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "fa3_h200_variants.json"), "w") as f:
        json.dump(record, f, indent=1)
    print(markdown(record))
    print(f"wrote fa3_h200_variants.json in {record['seconds']:.0f} s")


if __name__ == "__main__":
    main()
