"""Benchmark: the tiled WGSL shader (wgsl/flash_fwd.wgsl) vs the naive one (wgsl/attention_naive.wgsl).

Two WebGPU engines run the very same dispatch specs
(``nlpcore.kernels.flash_wgsl_mirror.dispatch_spec``):
- ``wgpu-py``: wgpu-native (naga, Firefox's WebGPU implementation) on whatever adapter it finds
  and records: Mesa's lavapipe (Vulkan on the CPU) here, NVIDIA's Vulkan driver on the H200;
- ``chromium``: Dawn (Tint) on SwiftShader in headless Chromium, driven through ``site/bench.html``
  by :mod:`page_bench` (skip with ``--engines wgpu-py``).

Per engine, N and number of heads (d = 64, float32; ``--heads 1,16`` gives B·H = 1 and 16): the
outputs are first checked against ``reference.forward`` (on a sample of query rows, which are
independent of each other without a causal mask); then, after a warm-up dispatch, each timed
repeat is one submit of one compute pass, timed by GPU timestamp queries written at the
beginning and end of the pass where the adapter offers ``timestamp-query`` (else by the wall
time from submit to the queue's completion, recorded as ``timing: "wall"``). Buffers and
pipelines are made once per (shader, N, heads); only the dispatch is timed, tiled and naive
interleaved, and the ratio naive / tiled is taken from the same run. Each row also records
TFLOP/s, counting 4·N²·d per head (two matrix products).

The naive shader materialises S (heads·N² floats), which passes WebGPU's default 128 MiB storage
binding at N > 5792 for one head; ``--naive-limit adapter`` asks the adapter for its own maximum
for the naive shader's buffers (the tiled shader always runs within the defaults), and a size
that still does not fit is recorded as refused.

Targets: tiled >= 2x naive at N = 2048 (lab issue 8, every engine); on a GPU adapter (lab issue
11): >= 2x at N = 2048, >= 4x at N = 4096, >= 10 TFLOP/s at N = 16384, for one head and for 16.

Run:  XDG_RUNTIME_DIR=/tmp/xdg .venv/bin/python bench/webgpu_attention.py
      (--engines wgpu-py,chromium  --sizes 256,512  --heads 1,16  --out PATH)
      On the H200: see bench/README.md ("WGSL on the H200").
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import page_bench  # noqa: E402

D = 64
SIZES = (256, 512, 1024, 2048, 4096)
HEADS = (1,)
TARGET_N = 2048
TARGET_SPEEDUP = 2.0
GPU_TARGETS = ((2048, 2.0), (4096, 4.0))  # (N, naive/tiled) on a GPU adapter, lab issue 11
GPU_TFLOPS_N = 16384
GPU_TFLOPS = 10.0  # tiled TFLOP/s at N = 16384 on a GPU adapter (stretch: 20)
KERNELS = (("tiled", "flash_fwd.wgsl"), ("naive", "attention_naive.wgsl"))
CHECK_ROWS = 256  # query rows per head checked against the reference


def gpu_peaks() -> dict:
    """Adapter device name -> (dense float32 TFLOP/s without tensor cores, source)."""
    from nlpcore import hardware

    return {"NVIDIA H200": (hardware.H200_FP32_FLOPS / 1e12, "NVIDIA H200 datasheet, FP32 (SXM), "
                                                               "nlpcore.hardware.H200_FP32_FLOPS")}


def repeats_for(n: int) -> int:
    return 5 if n <= 2048 else 3


def inputs(n: int, heads: int = 1, seed: int = 0):
    """q, k, v: (heads, n, D) float32 (one head: (n, D))."""
    import numpy as np

    rng = np.random.default_rng(seed)
    shape = (n, D) if heads == 1 else (heads, n, D)
    return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(3))


def flops(n: int, heads: int = 1) -> int:
    """Floating-point operations of one forward pass: two N x N x d matrix products a head."""
    return 4 * n * n * D * heads


def specs(n: int, plan=None, heads: int = 1, variants=(), naive_limit=None):
    """({kernel: dispatch spec or refusal message}, check) for N = n.

    ``variants``: extra tile plans of the tiled shader, each timed as kernel "tiled BRxKSxBC".
    ``check(spec, outputs)`` compares decoded outputs with the reference on sampled rows.
    """
    import numpy as np

    from nlpcore.kernels import flash_wgsl_mirror as mirror
    from nlpcore.kernels import reference

    q, k, v = inputs(n, heads)
    out = {}
    for kern, shader in KERNELS:
        kwargs = {} if kern == "tiled" or naive_limit is None else {"max_buffer_bytes": naive_limit}
        try:
            out[kern] = mirror.dispatch_spec(q, k, v, plan=plan, shader=shader, **kwargs)
        except ValueError as err:  # over a buffer or dispatch limit: recorded, not timed
            out[kern] = str(err)
    for extra in variants:
        out[variant_name(extra)] = mirror.dispatch_spec(q, k, v, plan=extra)
    rows = np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(int))
    expected = reference.forward(q[..., rows, :].astype(np.float64), k.astype(np.float64), v.astype(np.float64))

    def check_rows(spec, outputs):
        return check(spec, outputs, expected, rows)

    return out, check_rows


def variant_name(plan) -> str:
    return "tiled {}x{}x{}".format(plan.br, plan.ks, plan.bc)


def check(spec: dict, outputs: dict, expected, rows=None) -> dict:
    """Decoded shader outputs against the reference (on query ``rows``, default all): max |Δo|,
    max |Δlse| and whether both are within tolerance. A wrong result is recorded (and kept out
    of the speed-ups), not timed as if it were attention."""
    import numpy as np

    from nlpcore.kernels import flash_wgsl_mirror as mirror

    from nlpcore.tolerances import BENCH_WEBGPU

    tolerance = BENCH_WEBGPU.atol  # float32 shader vs float64 NumPy, max |Δ| (absolute)
    o, lse = mirror.decode_outputs(spec, outputs)
    if rows is not None:
        o, lse = o[..., rows, :], lse[..., rows]
    diff = np.abs(o - expected[0])
    err = float(np.max(diff))
    err_lse = float(np.max(np.abs(lse - expected[1])))
    bad_columns = np.nonzero(diff.reshape(-1, diff.shape[-1]).max(axis=0) > tolerance)[0]
    return {"max_abs_err_o": err, "max_abs_err_lse": err_lse, "valid": err <= tolerance and err_lse <= tolerance,
            "wrong_o_columns": [int(c) for c in bad_columns], "checked_rows": None if rows is None else len(rows)}


# --- wgpu-py -----------------------------------------------------------------------------------

class WgpuRunner:
    """One wgpu device with WebGPU's default limits (+ timestamp-query when offered).

    ``naive_limit="adapter"`` raises only the storage-buffer limits, to the adapter's own
    maximum, so the naive shader's S fits at larger N (:attr:`naive_limit_bytes`); the tiled
    shader's workgroup memory and invocations stay at the defaults either way."""

    def __init__(self, naive_limit: str = "default", features: bool = False) -> None:
        import wgpu

        from nlpcore.kernels import flash_wgsl_mirror as mirror
        from nlpcore.kernels import tiling

        self.wgpu = wgpu
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("wgpu found no adapter (install a Vulkan driver such as mesa-vulkan-drivers)")
        self.timestamps = "timestamp-query" in adapter.features
        limits = {
            "max-compute-workgroup-storage-size": tiling.WEBGPU_DEFAULT_STORAGE,
            "max-compute-invocations-per-workgroup": tiling.WEBGPU_DEFAULT_INVOCATIONS,
            "max-storage-buffer-binding-size": mirror.MAX_BUFFER_BYTES,
        }
        if naive_limit == "adapter":
            limits["max-storage-buffer-binding-size"] = adapter.limits["max-storage-buffer-binding-size"]
            limits["max-buffer-size"] = adapter.limits["max-buffer-size"]
        wanted = ["timestamp-query"] if self.timestamps else []
        self.limits = {}
        if features:  # the tier benchmark: the tiers' features and the adapter's workgroup storage
            wanted += [f for f in ("shader-f16", "subgroup") if f in adapter.features]
            limits["max-compute-workgroup-storage-size"] = adapter.limits["max-compute-workgroup-storage-size"]
            self.limits = {"maxComputeWorkgroupStorageSize": limits["max-compute-workgroup-storage-size"]}
        self.naive_limit_bytes = limits["max-storage-buffer-binding-size"]
        self.device = adapter.request_device_sync(required_features=wanted, required_limits=limits)
        info = adapter.info
        self.adapter = "{} ({})".format(info.get("device", "?"), info.get("backend_type", "?"))
        self.adapter_info = {key: info.get(key) for key in
                             ("vendor", "architecture", "device", "description", "adapter_type", "backend_type")}
        self.cpu_adapter = str(info.get("adapter_type", "")).lower().startswith("cpu") or any(
            name in self.adapter.lower() for name in ("llvmpipe", "lavapipe", "swiftshader"))

    def prepare(self, spec: dict):
        """Pipeline, bind group and buffers for a spec (made once, outside the timing)."""
        from nlpcore.kernels import flash_wgpu

        wgpu, dev = self.wgpu, self.device
        usage = {"uniform": wgpu.BufferUsage.UNIFORM,
                 "read-only-storage": wgpu.BufferUsage.STORAGE,
                 "storage": wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC}
        code = spec.get("code") or flash_wgpu.shader_source(spec["shader"])  # a variant carries its text
        module = dev.create_shader_module(code=flash_wgpu.naga_source(code))
        layout = dev.create_bind_group_layout(entries=[
            {"binding": b["binding"], "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": b["type"]}}
            for b in spec["bindings"]])
        passes = spec.get("passes") or [{"entry": spec["entry"], "workgroups": spec["workgroups"]}]
        pipeline_layout = dev.create_pipeline_layout(bind_group_layouts=[layout])
        pipeline = [  # one (pipeline, workgroups) per pass, dispatched in order over one bind group
            (dev.create_compute_pipeline(
                layout=pipeline_layout,
                compute={"module": module, "entry_point": p["entry"], "constants": dict(spec["constants"])}),
             p["workgroups"])
            for p in passes]
        buffers, entries = {}, []
        for b in spec["bindings"]:
            if b["data"] is None:
                buf = dev.create_buffer(size=b["size"], usage=usage[b["type"]] | wgpu.BufferUsage.COPY_DST)
            else:
                buf = dev.create_buffer_with_data(data=bytes(b["data"]), usage=usage[b["type"]])
            buffers[b["name"]] = buf
            entries.append({"binding": b["binding"], "resource": {"buffer": buf, "offset": 0, "size": b["size"]}})
        bind_group = dev.create_bind_group(layout=layout, entries=entries)
        return pipeline, bind_group, buffers

    def dispatch(self, spec: dict, prepared) -> tuple:
        """One timed dispatch: (gpu_ms or None, wall_ms)."""
        wgpu, dev = self.wgpu, self.device
        pipeline, bind_group, _ = prepared
        encoder = dev.create_command_encoder()
        writes = None
        if self.timestamps:
            query_set = dev.create_query_set(type=wgpu.QueryType.timestamp, count=2)
            resolved = dev.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            writes = {"query_set": query_set, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1}
        compute = encoder.begin_compute_pass(timestamp_writes=writes) if writes else encoder.begin_compute_pass()
        for stage, groups in pipeline:
            compute.set_pipeline(stage)
            compute.set_bind_group(0, bind_group)
            compute.dispatch_workgroups(*groups)
        compute.end()
        if writes:
            encoder.resolve_query_set(query_set, 0, 2, resolved, 0)
        # wgpu-py 0.32's on_submitted_work_done fails (a callback signature mismatch with
        # wgpu-native), so completion is awaited by reading back a small buffer, which waits for
        # the queue: the timestamps, or else the (N,) lse output.
        t0 = time.perf_counter()
        dev.queue.submit([encoder.finish()])
        done = bytes(dev.queue.read_buffer(resolved if writes else prepared[2]["lse"]))
        wall_ms = (time.perf_counter() - t0) * 1e3
        gpu_ms = None
        if writes:
            begin, end = struct.unpack("<QQ", done)
            gpu_ms = (end - begin) / 1e6  # WebGPU timestamps are nanoseconds
        return gpu_ms, wall_ms

    def release(self, prepared) -> None:
        for buf in prepared[2].values():
            buf.destroy()

    def outputs(self, spec: dict, prepared) -> dict:
        _, _, buffers = prepared
        return {b["name"]: bytes(self.device.queue.read_buffer(buffers[b["name"]]))
                for b in spec["bindings"] if b["output"]}


# Counts how many loop iterations one invocation really executes: a loop of 50 000, then another
# of 50 000, then a 300 x 300 nest. A conforming implementation writes 50000, 50000, 90000.
LOOP_PROBE = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() {
  var a = 0u;
  for (var i = 0u; i < 50000u; i++) { a += 1u; }
  var b = 0u;
  for (var i = 0u; i < 50000u; i++) { b += 1u; }
  var c = 0u;
  for (var i = 0u; i < 300u; i++) { for (var j = 0u; j < 300u; j++) { c += 1u; } }
  out[0] = a;
  out[1] = b;
  out[2] = c;
}
"""


def probe_loop_cap(runner) -> dict:
    """Run LOOP_PROBE: does the driver cut an invocation's loops short? (Mesa's llvmpipe, which
    lavapipe is built on, stops each invocation after a fixed total of loop iterations.)"""
    import numpy as np

    wgpu, dev = runner.wgpu, runner.device
    buf = dev.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    pipeline = dev.create_compute_pipeline(
        layout="auto", compute={"module": dev.create_shader_module(code=LOOP_PROBE), "entry_point": "main"})
    group = dev.create_bind_group(layout=pipeline.get_bind_group_layout(0),
                                  entries=[{"binding": 0, "resource": {"buffer": buf, "offset": 0, "size": 16}}])
    encoder = dev.create_command_encoder()
    compute = encoder.begin_compute_pass()
    compute.set_pipeline(pipeline)
    compute.set_bind_group(0, group)
    compute.dispatch_workgroups(1)
    compute.end()
    dev.queue.submit([encoder.finish()])
    got = [int(x) for x in np.frombuffer(bytes(dev.queue.read_buffer(buf)), dtype=np.uint32)[:3]]
    expected = [50000, 50000, 90000]
    return {"expected": expected, "got": got, "capped": got != expected,
            "total_iterations_executed": sum(got) if got != expected else None}


def run_wgpu(sizes, plan=None, log=print, heads=HEADS, variants=(), naive_limit="default") -> dict:
    """Engine record {engine, adapter, timing, rows, loop_probe} for wgpu-py."""
    runner = WgpuRunner(naive_limit)
    loop_probe = probe_loop_cap(runner)
    if loop_probe["capped"]:
        log("  wgpu-py   this driver stops each invocation after ~{} loop iterations in total "
            "(probe wrote {}, expected {})".format(loop_probe["total_iterations_executed"], loop_probe["got"],
                                                   loop_probe["expected"]))
    rows = measure("wgpu-py", sizes, plan, runner, runner.timestamps, repeats_for, log, heads=heads,
                   variants=variants, naive_limit=runner.naive_limit_bytes)
    kind = "a CPU" if runner.cpu_adapter else "a GPU"
    return {"engine": "wgpu-py",
            "implementation": "wgpu-native (naga) on {}, {} adapter through {}".format(
                runner.adapter_info.get("device") or "?", kind.split()[1],
                runner.adapter_info.get("backend_type") or "?"),
            "adapter": runner.adapter, "adapter_info": runner.adapter_info, "cpu_adapter": runner.cpu_adapter,
            "timing": "timestamp-query" if runner.timestamps else "wall",
            "naive_max_buffer_bytes": runner.naive_limit_bytes,
            "rows": rows, "versions": {"wgpu": common.package_version("wgpu")}, "loop_probe": loop_probe}


def measure(engine_name: str, sizes, plan, ops, timestamps: bool, repeats, log=print, heads=HEADS,
            variants=(), naive_limit=None) -> list:
    """Rows for every (N, heads, shader) on one engine.

    ``ops`` has ``prepare(spec) -> handle``, ``dispatch(spec, handle) -> (gpu_ms or None, wall_ms)``,
    ``outputs(spec, handle) -> {name: bytes}`` and ``release(handle)``. Per (N, heads) every shader
    is prepared, run once and checked, the GPU's clock warmed (:func:`warm_clock`), then timed *interleaved* (tiled, naive, tiled, naive, ...),
    so that a change in what else the machine is doing hits all alike; the speed-up is the median
    of the per-repeat ratios. A kernel the limits refuse gets a row with ``refused`` and no time.
    """
    rows = []
    for h in heads:
        for n in sizes:
            by_kernel, check_rows = specs(n, plan, h, variants, naive_limit)
            handles, errors = {}, {}
            for kern, spec in list(by_kernel.items()):
                if isinstance(spec, str):
                    rows.append({"n": n, "heads": h, "kernel": kern, "refused": spec, "valid": False})
                    log("  {:<9} N = {:>5} x{:<3} {:<6} refused: {}".format(engine_name, n, h, kern, spec))
                    del by_kernel[kern]
                    continue
                handles[kern] = ops.prepare(spec)
                ops.dispatch(spec, handles[kern])  # warm-up; its outputs are checked next
                errors[kern] = check_rows(spec, ops.outputs(spec, handles[kern]))
            gpu = {kern: [] for kern in by_kernel}
            wall = {kern: [] for kern in by_kernel}
            if by_kernel:  # the GPU's clock up before the timed dispatches (webgpu_tiers.WARM_SECONDS)
                kern = next(iter(by_kernel))
                warm_clock(ops, by_kernel[kern], handles[kern])
            for _ in range(repeats(n)):
                for kern, spec in by_kernel.items():
                    g, w = ops.dispatch(spec, handles[kern])
                    gpu[kern].append(g)
                    wall[kern].append(w)
            for kern, spec in by_kernel.items():
                ops.release(handles[kern])
                use_gpu = timestamps and all(g is not None for g in gpu[kern])
                rows.append(_row(n, h, kern, spec, gpu[kern] if use_gpu else None, wall[kern], errors[kern]))
                err = errors[kern]
                log("  {:<9} N = {:>5} x{:<3} {:<16} {:>9.3f} ms {:>7.2f} TFLOP/s{}".format(
                    engine_name, n, h, kern, rows[-1]["ms"], rows[-1]["tflops"],
                    "" if err["valid"] else "  WRONG OUTPUT (max|Δo| = {:.3g})".format(err["max_abs_err_o"])))
    return rows


def warm_clock(ops, spec, handle, seconds: Optional[float] = None) -> int:
    """Dispatch ``spec`` back to back until ``seconds`` (default webgpu_tiers.WARM_SECONDS) have
    passed, at least once: an idle GPU (the H200 drops its SM clock within a second of idling)
    would otherwise run the first timed dispatches slow. On a CPU adapter one slow dispatch is
    enough. Returns the number of dispatches."""
    import webgpu_tiers

    seconds = webgpu_tiers.WARM_SECONDS if seconds is None else seconds
    start, count = time.perf_counter(), 0
    while count < 1 or time.perf_counter() - start < seconds:
        ops.dispatch(spec, handle)
        count += 1
    return count


def _row(n, heads, kern, spec, gpu, wall, err) -> dict:
    times = gpu if gpu is not None else wall
    ms = common.median(times)
    return dict({"n": n, "heads": heads, "kernel": kern, "shader": spec["shader"], "workgroups": spec["workgroups"],
                 "constants": spec["constants"], "ms": ms, "times_ms": times,
                 "tflops": flops(n, heads) / (ms * 1e-3) / 1e12,
                 "wall_ms": common.median(wall), "repeats": len(times)}, **err)


# --- both engines ------------------------------------------------------------------------------

def speedups(engine: dict) -> list:
    out = []
    for h, n in sorted({(r.get("heads", 1), r["n"]) for r in engine["rows"]}):
        got = {r["kernel"]: r for r in engine["rows"]
               if r["n"] == n and r.get("heads", 1) == h and r["valid"]}
        if "tiled" in got and "naive" in got:
            pairs = [a / b for a, b in zip(got["naive"]["times_ms"], got["tiled"]["times_ms"])]
            out.append({"n": n, "heads": h, "naive_over_tiled": common.median(pairs), "per_repeat": pairs,
                        "ratio_of_medians": got["naive"]["ms"] / got["tiled"]["ms"],
                        "wall_naive_over_tiled": got["naive"]["wall_ms"] / got["tiled"]["wall_ms"]})
    return out


def _limit(engine: dict, value) -> str:
    if value is not None and value >= TARGET_SPEEDUP:
        return ""
    if not any(r["n"] == TARGET_N for r in engine.get("rows", [])):
        return "N = {} was not measured in this run".format(TARGET_N)
    return limits_note(engine)


def limits_note(engine: dict) -> str:
    """What limits a missed (or unmeasurable) speed-up target on this engine, from this run's facts."""
    parts = []
    wrong = ["N = {} {}".format(r["n"], r["kernel"]) for r in engine.get("rows", [])
             if not r["valid"] and not r.get("refused")]
    if wrong:
        parts.append("Wrong shader output on this adapter ({}), so those sizes have no valid ratio.".format(
            ", ".join(wrong)))
    probe = engine.get("loop_probe") or {}
    if probe.get("capped") and wrong:
        parts.append(
            "Likely cause: the driver stops each invocation after about {} loop iterations in total (Mesa "
            "llvmpipe's loop limiter, measured by a probe shader in the same run); "
            "nlpcore.kernels.flash_wgpu.loop_iterations bounds a dispatch's count.".format(
                probe["total_iterations_executed"]))
    if engine.get("cpu_adapter") is False:
        parts.append("{} is a GPU: see the GPU targets and bench/README.md for what limits the tiled shader "
                     "there.".format(engine.get("adapter")))
        return " ".join(parts)
    parts.append(
        "{} runs the shaders on the CPU: workgroup memory is ordinary cached RAM, so tiling saves no slow-memory "
        "traffic, while every workgroupBarrier() (two per key tile in the tiled shader) costs a switch between "
        "the invocations the driver emulates; the naive shader's three passes (scores, softmax, P·V) spread over "
        "N² and N·dv invocations with no barrier in their long loops. The claim is about GPU HBM traffic, which "
        "a CPU adapter cannot show.".format(engine.get("adapter") or engine["engine"]))
    return " ".join(parts)


def gpu_targets(engine: dict) -> list:
    """Lab issue 11's targets for a GPU adapter, per number of heads measured."""
    out = []
    by = {(s["heads"], s["n"]): s["naive_over_tiled"] for s in engine["speedups"]}
    tiled = {(r.get("heads", 1), r["n"]): r for r in engine["rows"] if r["kernel"] == "tiled" and r["valid"]}
    for h in sorted({r.get("heads", 1) for r in engine["rows"]}):
        for n, goal in GPU_TARGETS:
            value = by.get((h, n))
            refused = [r["refused"] for r in engine["rows"]
                       if r.get("heads", 1) == h and r["n"] == n and r.get("refused")]
            out.append(common.target(
                "tiled WGSL speed-up over naive at N = {}, {} head(s) ({})".format(n, h, engine["adapter"]),
                None if value is None else value >= goal, None if value is None else round(value, 3),
                ">= {}x".format(goal),
                "; ".join(refused) if value is None and refused else
                ("N = {} was not measured in this run".format(n) if value is None else "")))
        row = tiled.get((h, GPU_TFLOPS_N))
        value = None if row is None else row["tflops"]
        out.append(common.target(
            "tiled WGSL TFLOP/s at N = {}, {} head(s) ({})".format(GPU_TFLOPS_N, h, engine["adapter"]),
            None if value is None else value >= GPU_TFLOPS, None if value is None else round(value, 2),
            ">= {} (stretch 20)".format(GPU_TFLOPS),
            "" if value is not None else "N = {} was not measured in this run".format(GPU_TFLOPS_N)))
    return out


def annotate(record: dict) -> dict:
    """Add the float32 peak of the record's GPU adapter (if known), so pages can show TFLOP/s
    as a fraction of it; derived from the adapter name, not measured."""
    for engine in record.get("engines", []):
        info = engine.get("adapter_info") or {}
        peaks = gpu_peaks()
        if engine.get("cpu_adapter") is False and info.get("device") in peaks:
            record["gpu_peak_fp32_tflops"], record["gpu_peak_source"] = peaks[info["device"]]
    return record


def parse_variants(text: str) -> list:
    """``"64x1,128x1x16"`` -> tile plans for d = D (Br x KS, optionally x Bc)."""
    from nlpcore.kernels import tiling

    plans = []
    for item in filter(None, text.split(",")):
        parts = [int(p) for p in item.split("x")]
        if len(parts) not in (2, 3):
            raise ValueError("--variants: {!r} is not BRxKS or BRxKSxBC".format(item))
        plans.append(tiling.plan(D, 4, br=parts[0], ks=parts[1], bc=parts[2] if len(parts) == 3 else None))
    return plans


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--heads", default=",".join(map(str, HEADS)), help="numbers of heads (B·H), e.g. 1,16")
    parser.add_argument("--engines", default="wgpu-py,chromium")
    parser.add_argument("--variants", default="", help="extra tile plans of the tiled shader, e.g. 32x1,128x1,64x2")
    parser.add_argument("--naive-limit", choices=("default", "adapter"), default="default",
                        help="storage-buffer limit for the naive shader's S (wgpu-py)")
    parser.add_argument("--out", default=str(common.RESULTS / "webgpu_attention.json"))
    parser.add_argument("--dist", default=None, help="built site for the chromium engine (default: build one)")
    parser.add_argument("--tiers", default="",
                        help="measure the tiled kernel's tiers instead (portable,subgroup,f16,int8; webgpu_tiers.py)")
    parser.add_argument("--tier-variants", nargs="?", const="all", default=None, metavar="KEYS",
                        help="with --tiers: also time webgpu_tiers.VARIANTS (other tiles, int8 main pass alone, "
                             "other shaders); =KEY,KEY for some of them")
    parser.add_argument("--d", default="64", help="head dims for --tiers, e.g. 64,128")
    parser.add_argument("--causal", default="no", help="for --tiers: no, yes or no,yes")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per row for --tiers")
    parser.add_argument("--node", default="node", help="Node binary for the dawn engine")
    parser.add_argument("--dawn-node", default=os.environ.get("DAWN_NODE", ""), help="dawn.node for the dawn engine")
    parser.add_argument("--sdpa", action="store_true", help="for --tiers: PyTorch SDPA on the same GPU (ceiling)")
    parser.add_argument("--accuracy", action="store_true", help="for --tiers: random vs outlier-channel inputs")
    parser.add_argument("--rescore", metavar="PATH",
                        help="recompute targets and derived fields of a recorded run, measure nothing")
    args = parser.parse_args(argv)
    if args.rescore:
        import json

        record = json.loads(Path(args.rescore).read_text(encoding="utf-8"))
        record["targets"] = [t for t in record["targets"] if "head(s)" not in t["name"]]
        for engine in record["engines"]:
            if engine.get("rows") and engine.get("cpu_adapter") is False:
                record["targets"].extend(gpu_targets(engine))
        common.print_targets(record["targets"])
        print("wrote", common.write_result(Path(args.rescore), annotate(record)))
        return 0
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp/xdg-runtime-{}".format(os.getuid()))
    os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    if args.tiers:
        import webgpu_tiers

        args.argv = list(argv if argv is not None else sys.argv[1:])
        record = webgpu_tiers.run(args, WgpuRunner)
        annotate(record)
        for engine in record["engines"]:
            print("\n{} on {} (timing: {})".format(engine["engine"], engine.get("adapter"), engine.get("timing")))
            print(common.table(["tier", "d", "heads", "N", "causal", "ms", "TFLOP/s", "relL1", "valid"],
                               [[r["tier"], r.get("d"), r.get("heads"), r.get("n"), r.get("causal"), r.get("ms"),
                                 r.get("tflops"), r.get("rel_l1"), r["valid"]] for r in engine["rows"]]))
        print("wrote", common.write_result(Path(args.out), record))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    heads = [int(s) for s in args.heads.split(",") if s]
    engines = [e for e in args.engines.split(",") if e]
    variants = parse_variants(args.variants)
    started = time.perf_counter()

    from nlpcore.kernels import tiling
    from nlpcore.tolerances import BENCH_WEBGPU

    plan = tiling.plan(D, 4)
    record = {
        "benchmark": "webgpu_attention",
        "recorded_at": common.now_iso(),
        "command": "bench/webgpu_attention.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": common.machine(["wgpu", "chromium"]),
        "parameters": {"d": D, "dtype": "float32", "heads": heads, "sizes": sizes,
                       "repeats": {str(n): repeats_for(n) for n in sizes},
                       "warmup": "one checked dispatch per kernel, then the first kernel back to back for at least "
                                 "webgpu_tiers.WARM_SECONDS (the clock)",
                       "plan": plan.as_dict(), "variants": [p.as_dict() for p in variants],
                       "tolerance_max_abs": BENCH_WEBGPU.atol, "checked_rows_per_head": CHECK_ROWS,
                       "flops": "4·N²·d per head",
                       "time": "median per-dispatch time: GPU timestamp queries around the compute pass where "
                               "available, else wall time submit -> onSubmittedWorkDone"},
        "engines": [],
        "targets": [],
    }
    for name in engines:
        print("engine", name, flush=True)
        if name == "wgpu-py":
            engine = run_wgpu(sizes, plan, heads=heads, variants=variants, naive_limit=args.naive_limit)
        elif name == "chromium":
            engine = page_bench.run_chromium(
                lambda ops, timestamps: measure("chromium", sizes, plan, ops, timestamps, repeats_for),
                dist=args.dist)
        else:
            parser.error("--engines: unknown engine {!r} (wgpu-py, chromium)".format(name))
        engine["speedups"] = speedups(engine) if engine.get("rows") else []
        record["engines"].append(engine)
        at = [s for s in engine["speedups"] if s["n"] == TARGET_N and s.get("heads", 1) == 1]
        value = at[0]["naive_over_tiled"] if at else None
        record["targets"].append(common.target(
            "tiled WGSL speed-up over naive at N = {} ({})".format(TARGET_N, name),
            None if value is None else value >= TARGET_SPEEDUP,
            None if value is None else round(value, 3), ">= {}x".format(TARGET_SPEEDUP),
            engine.get("error") or _limit(engine, value)))
        if engine.get("rows") and engine.get("cpu_adapter") is False:
            record["targets"].extend(gpu_targets(engine))
    record["total_seconds"] = time.perf_counter() - started
    annotate(record)
    for engine in record["engines"]:
        print("\n{} on {} (timing: {})".format(engine["engine"], engine.get("adapter"), engine.get("timing")))
        if engine.get("error"):
            print("  not measured:", engine["error"])
            continue
        print(common.table(["N", "heads", "kernel", "ms", "TFLOP/s", "reps", "max|Δo|", "valid"],
                           [[r["n"], r.get("heads", 1), r["kernel"], r.get("ms"), r.get("tflops"), r.get("repeats"),
                             r.get("max_abs_err_o"), r["valid"]] for r in engine["rows"]]))
        print(common.table(["N", "heads", "naive/tiled"],
                           [[s["n"], s.get("heads", 1), s["naive_over_tiled"]] for s in engine["speedups"]]))
    print("\ntargets:")
    common.print_targets(record["targets"])
    print("wrote", common.write_result(Path(args.out), record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
