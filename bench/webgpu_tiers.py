"""The tiled kernel's tiers (portable float32, subgroup, float16, int8 tensor cores) on two WebGPU
engines: wgpu-py (wgpu-native, naga) and Dawn (Chrome's engine, Tint) driven from Node by
``bench/webgpu_dawn.mjs``. Called by ``webgpu_attention.py --tiers ...``.

Per engine, tier, d, heads, N and causal: one set of random inputs (float32 normal; the f16 tier
rounds them to float16), the dispatch spec of the tier (``flash_wgsl_mirror.dispatch_spec`` or
``flash_wgsl_int8.dispatch_spec``), one warm-up dispatch whose outputs are checked against the
float64 reference on sampled query rows, back-to-back dispatches for WARM_SECONDS (the GPU's
clock rises), then timed repeats, each one submit of one compute pass
(all of a spec's passes: the int8 tier's three quantisation passes are inside the time), timed by
GPU timestamps at the pass's beginning and end. TFLOP/s count 4·N²·d per head, half that with a
causal mask (the work a causal kernel must do), as FlashAttention's benchmarks count.

Validity per tier (against float64): portable and subgroup max |Δo| <= BENCH_WEBGPU (1e-4);
f16 max |Δo| <= 4e-3 (float16 output rounding is 4.9e-4 relative); int8 relative L1 <= 0.05 and
every sampled row's cosine similarity >= 0.99 (SageAttention's accuracy measures). Every row also
records max |Δo|, relative L1 and per-row cosine (min, mean), and max |Δlse|.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import common

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "bench" / "webgpu_dawn.mjs"
CHECK_ROWS = 256
WARM_SECONDS = 0.25
"""Back-to-back dispatches before the timed ones, at least this long (and at least two). The
H200 drops its SM clock to 345-1000 MHz within a second of idling (clocks.csv of the probe run:
throttle reason 'GPU idle'), and the checks between rows idle it: without this, the first one or
two timed dispatches of a row ran 2-4x slower than the rest, and a median of three caught them."""
TOLERANCE = {"portable": 1e-4, "subgroup": 1e-4, "f16": 4e-3}
INT8_REL_L1, INT8_COS = 0.05, 0.99


def flops(n: int, heads: int, d: int, causal: bool) -> float:
    return 4.0 * n * n * d * heads * (0.5 if causal else 1.0)


def inputs(n: int, heads: int, d: int, kind: str = "random", seed: int = 0):
    """q, k, v (heads, n, d) float32. ``outlier``: realistic activations after SageAttention's
    observation (section 3.2): K carries a large per-channel offset shared by all tokens, and a
    few channels of Q and K are ten times larger than the rest."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, n, d)).astype(np.float32) for _ in range(3))
    if kind == "outlier":
        k += (4.0 * rng.standard_normal(d)).astype(np.float32)  # channel bias common to all keys
        hot = rng.choice(d, size=max(1, d // 16), replace=False)
        q[..., hot] *= 10.0
        k[..., hot] *= 10.0
        q *= 0.5
    return q, k, v


def spec_for(tier, q, k, v, causal, limits=None, subgroup_size=32):
    from nlpcore.kernels import flash_wgsl_int8, flash_wgsl_mirror, tiling

    d = q.shape[-1]
    plan = tiling.plan_for(tier, d, limits=limits, subgroup_size=subgroup_size)
    if tier == "int8":
        return flash_wgsl_int8.dispatch_spec(q, k, v, causal=causal, plan=plan)
    return flash_wgsl_mirror.dispatch_spec(q, k, v, causal=causal, plan=plan, tier=tier)


def check(tier, spec, outputs, q, k, v, causal, rows) -> dict:
    from nlpcore.kernels import flash_wgsl_int8, flash_wgsl_mirror, reference

    o, lse = flash_wgsl_mirror.decode_outputs(spec, outputs)
    o, lse = o[..., rows, :].astype(np.float64), lse[..., rows]
    if tier == "f16":
        q, k, v = (x.astype(np.float16).astype(np.float64) for x in (q, k, v))
    want_o, want_lse = reference.forward(q[..., rows, :].astype(np.float64), k.astype(np.float64),
                                         v.astype(np.float64),
                                         mask=_causal_rows(rows, k.shape[-2]) if causal else None)
    stats = flash_wgsl_int8.error_stats(o, want_o)
    err_lse = float(np.max(np.abs(lse - want_lse)))
    if tier == "int8":
        valid = stats["rel_l1"] <= INT8_REL_L1 and stats["cos_min"] >= INT8_COS
    else:
        valid = stats["max_abs_err"] <= TOLERANCE[tier] and err_lse <= TOLERANCE[tier]
    return dict(stats, max_abs_err_o=stats["max_abs_err"], max_abs_err_lse=err_lse,
                valid=bool(valid and np.isfinite(o).all()), checked_rows=len(rows))


def _causal_rows(rows, n_k):
    """The causal mask of the sampled query rows (reference.forward's causal flag assumes the
    rows start at 0)."""
    return np.arange(n_k)[None, :] <= np.asarray(rows)[:, None]


# --- Dawn through Node ----------------------------------------------------------------------------

class DawnRunner:
    """A Node process running webgpu_dawn.mjs; same prepare/dispatch/outputs/release as
    webgpu_attention.WgpuRunner."""

    def __init__(self, node: str, dawn_node: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="dawn-")
        self.log = []  # lines Dawn printed that are not replies
        self.proc = subprocess.Popen([node, str(DRIVER), dawn_node], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.info = self._call({"cmd": "info"})
        self.timestamps = "timestamp-query" in self.info.get("features", [])
        self.adapter = "{} (Dawn, Vulkan)".format(self.info.get("device") or self.info.get("description") or "?")
        self._next = 0

    def _call(self, msg: dict) -> dict:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        while line and not line.startswith("{"):  # Dawn's own warnings also go to stdout
            self.log.append(line.rstrip())
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Dawn driver exited (rc {})".format(self.proc.poll()))
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError("Dawn: " + reply["error"])
        return reply

    def prepare(self, spec: dict):
        from nlpcore.kernels import flash_wgpu

        self._next += 1
        sid = str(self._next)
        bindings = []
        for b in spec["bindings"]:
            entry = {key: b[key] for key in ("binding", "type", "size", "name", "output")}
            entry["data"] = None
            if b["data"] is not None:
                path = Path(self.tmp.name) / "{}-{}.bin".format(sid, b["name"])
                path.write_bytes(bytes(b["data"]))
                entry["data"] = {"file": str(path)}
            bindings.append(entry)
        code = spec.get("code") or flash_wgpu.shader_source(spec["shader"])
        wire = {key: spec[key] for key in ("shader", "entry", "constants", "workgroups") if key in spec}
        wire.update(code=code, bindings=bindings, passes=spec.get("passes"))
        self._call({"cmd": "prepare", "id": sid, "spec": wire})
        return sid

    def dispatch(self, spec: dict, sid) -> tuple:
        reply = self._call({"cmd": "dispatch", "id": sid})
        return reply["gpu_ms"], reply["wall_ms"]

    def outputs(self, spec: dict, sid) -> dict:
        reply = self._call({"cmd": "outputs", "id": sid, "dir": self.tmp.name})
        return {name: Path(path).read_bytes() for name, path in reply["files"].items()}

    def release(self, sid) -> None:
        self._call({"cmd": "release", "id": sid})

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.tmp.cleanup()


def dawn_tiers(info: dict) -> dict:
    """Which tiers Dawn's adapter can run, and why not where it cannot."""
    features = set(info.get("features", []))
    int8 = [c for c in info.get("subgroupMatrixConfigs", [])
            if c["componentType"] == "i8" and c["resultComponentType"] == "i32" and (c["M"], c["N"], c["K"]) == (16, 16, 32)]
    return {"portable": None,
            "subgroup": None if "subgroups" in features else "no `subgroups` feature",
            "f16": None if "shader-f16" in features else "no `shader-f16` feature",
            "int8": None if int8 else "no i8 x i8 -> i32 16x16x32 subgroup-matrix configuration"}


def wgpu_tiers(runner) -> dict:
    features = set(runner.device.features)
    return {"portable": None,
            "subgroup": None if "subgroup" in features else "no `subgroup` feature",
            "f16": None if "shader-f16" in features else "no `shader-f16` feature",
            "int8": "wgpu-native offers no subgroup matrices (its cooperative-matrix feature is refused at "
                    "device creation and has f32 8x8 only)"}


def measure(engine: str, ops, offered: dict, limits: dict, subgroup_size: int, *, tiers, ds, heads, sizes,
            causals, repeats=3, log=print) -> list:
    rows = []
    for tier in tiers:
        if offered.get(tier):
            rows.append({"engine": engine, "tier": tier, "kernel": "tiled", "n": None, "heads": None,
                         "skipped": offered[tier], "valid": False, "tflops": None})
            log("  {:<8} {:<9} skipped: {}".format(engine, tier, offered[tier]))
            continue
        for d in ds:
            for h in heads:
                for n in sizes:
                    for causal in causals:
                        rows.append(_one(engine, ops, tier, d, h, n, causal, limits, subgroup_size, repeats, log))
    return rows


def _one(engine, ops, tier, d, h, n, causal, limits, subgroup_size, repeats, log) -> dict:
    q, k, v = inputs(n, h, d)
    base = {"engine": engine, "tier": tier, "kernel": "tiled", "n": n, "heads": h, "d": d, "causal": causal}
    try:
        spec = spec_for(tier, q, k, v, causal, limits, subgroup_size)
        handle = ops.prepare(spec)
    except (ValueError, RuntimeError) as err:
        log("  {:<8} {:<9} d={:<3} x{:<2} N={:<5} causal={:<1} refused: {}".format(
            engine, tier, d, h, n, int(causal), str(err)[:300]))
        return dict(base, refused=str(err)[:2000], valid=False, tflops=None)
    try:
        ops.dispatch(spec, handle)
        rows = np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(int))
        err = check(tier, spec, ops.outputs(spec, handle), q, k, v, causal, rows)
        warm_up(ops, spec, handle)
        gpu, wall = [], []
        for _ in range(repeats):
            g, w = ops.dispatch(spec, handle)
            gpu.append(g)
            wall.append(w)
    except RuntimeError as e:
        log("  {:<8} {:<9} d={:<3} x{:<2} N={:<5} failed: {}".format(engine, tier, d, h, n, str(e)[:300]))
        return dict(base, refused=str(e)[:2000], valid=False, tflops=None)
    finally:
        ops.release(handle)
    times = gpu if all(g is not None for g in gpu) else wall
    ms = common.median(times)
    row = dict(base, shader=spec["shader"], constants=spec["constants"], workgroups=spec["workgroups"],
               passes=[p["entry"] for p in spec.get("passes") or []] or None,
               ms=ms, times_ms=times, wall_ms=common.median(wall), timing="timestamp-query" if times is gpu else "wall",
               tflops=flops(n, h, d, causal) / (ms * 1e-3) / 1e12, repeats=len(times), **err)
    log("  {:<8} {:<9} d={:<3} x{:<2} N={:<5} causal={:<1} {:>9.3f} ms {:>7.2f} TFLOP/s  max|Δo| {:.2e} "
        "relL1 {:.2e} cos {:.5f}{}".format(engine, tier, d, h, n, int(causal), ms, row["tflops"], err["max_abs_err_o"],
                                           err["rel_l1"], err["cos_min"], "" if err["valid"] else "  INVALID"))
    return row


STAGED = "staged"
"""The int8 tier's staged variant (wgsl/flash_fwd_int8_staged.wgsl, nlpcore.kernels.flash_wgsl_int8pv:
S and P·V on subgroup matrices, each key tile's K8 and V8 staged in workgroup memory), sized by
tiling.plan_int8_staged; a variant (``variants`` and, with ``--accuracy``, ``accuracy`` rows with
``variant: "staged"``), never the tier's rows."""

SHADER_VARIANT = "variant"
"""A key of ``sizes`` in :data:`VARIANTS`: the row times that shader of
nlpcore.kernels.flash_wgsl_variants (issue 25's candidates beside the tiers: ``lean``, ``half``,
``pair``, ``pair-wg``, ``pair-f16``, and the fma() chains ``lean-fma``, ``pair-fma``,
``pair-fma-f16``), sized by its ``plan`` and checked at its tier's bar."""

VARIANTS = (
    ("int8", "int8", "plan_for's plan, end to end (beside the staged variant)", {}, False),
    ("int8-staged", "int8", "staged: S and P·V on subgroup matrices, K8/V8 staged in workgroup memory, end to end",
     {STAGED: True}, False),
    ("int8-main", "int8", "plan_for's plan, main pass alone (the three quantisation passes left out of the time)", {},
     True),
    ("int8-staged-main", "int8", "staged, main pass alone (its four quantisation passes left out of the time)",
     {STAGED: True}, True),
    ("int8-staged-no-s", "int8", "staged, main pass alone without its S block (timing only: where the time goes)",
     {STAGED: True}, "no S"),
    ("int8-staged-no-pv", "int8", "staged, main pass alone without its P·V block (timing only: where the time goes)",
     {STAGED: True}, "no PV"),
    ("int8-64x32", "int8", "br=64, bc=32 (twice the keys per tile, half the rows)", {"br": 64, "bc": 32}, False),
    ("f16-bc56", "f16", "bc=56 (the key tile float16 staging allows in 16384 bytes, past UNROLL_BLOCK)", {"bc": 56},
     False),
    ("portable-bc16", "portable", "bc=16", {"bc": 16}, False),
    # issue 25's candidate shaders (nlpcore.kernels.flash_wgsl_variants says what each asks)
    ("lean", "portable", "lean: portable layout, masks only where needed, o rescaled only when a row's max moves",
     {SHADER_VARIANT: "lean"}, False),
    ("half", "subgroup", "half: one row per two invocations, half the registers each (more warps), lean bookkeeping",
     {SHADER_VARIANT: "half"}, False),
    ("half-br64", "subgroup", "half with br=64: workgroups of 128 invocations, so more of them fit a multiprocessor",
     {SHADER_VARIANT: "half", "br": 64}, False),
    ("pair", "subgroup", "pair: two rows an invocation, interleaved lanes (no bank conflicts), lean bookkeeping",
     {SHADER_VARIANT: "pair"}, False),
    ("pair-wg", "portable", "pair-wg: pair without subgroups, partials added through workgroup memory (8-key tiles)",
     {SHADER_VARIANT: "pair-wg"}, False),
    ("pair-f16", "f16", "pair-f16: pair on float16 data, widened to float32 once as it is staged",
     {SHADER_VARIANT: "pair-f16"}, False),
    ("lean-fma", "portable", "lean-fma: lean with every multiply-add an fma() into a running sum",
     {SHADER_VARIANT: "lean-fma"}, False),
    ("pair-fma", "subgroup", "pair-fma: pair with every multiply-add an fma() into a running sum",
     {SHADER_VARIANT: "pair-fma"}, False),
    ("pair-fma-f16", "f16", "pair-fma-f16: pair-f16 with pair-fma's fma() chains",
     {SHADER_VARIANT: "pair-fma-f16"}, False),
)
"""Probes beside the plans (``--tier-variants``, or ``--tier-variants=KEY,KEY`` for some of them by
their first field), at N = 16384, 16 heads, d = 64, no mask: what a different tile, leaving the
quantisation out of the time, or another shader (:data:`SHADER_VARIANT`) would change;
``"no S"``/``"no PV"`` time the staged main pass with one of its two subgroup-matrix blocks cut
out of the shader text (wrong outputs, timing only). Recorded under ``variants``, never as the
tier's rows (tiling.plan_for stays the one source of the sizes run)."""


def _cut(code: str, block: str) -> str:
    """The staged int8 shader ``code`` without its marked ``block`` ("S_ij" or "PV_ij" on subgroup matrices)."""
    begin = "    // --- {} on subgroup matrices begin ---".format(block)
    end = "    // --- {} on subgroup matrices end ---".format(block)
    a, b = code.index(begin), code.index(end)
    return code[:a] + code[b + len(end):]


def staged_spec(q, k, v, causal, limits=None, subgroup_size=32, **sizes):
    """The dispatch spec of the int8 tier's staged variant (:data:`STAGED`) for an adapter with ``limits``."""
    from nlpcore.kernels import flash_wgsl_int8pv, tiling

    storage = int((limits or {}).get("maxComputeWorkgroupStorageSize", tiling.WEBGPU_DEFAULT_STORAGE))
    plan = tiling.plan_int8_staged(q.shape[-1], storage, subgroup_size=subgroup_size, **sizes)
    return flash_wgsl_int8pv.dispatch_spec(q, k, v, causal=causal, plan=plan)


def variant_plan(tier, d, limits, subgroup_size, sizes):
    from nlpcore.kernels import tiling

    storage = int(limits.get("maxComputeWorkgroupStorageSize", tiling.WEBGPU_DEFAULT_STORAGE))
    if not sizes:
        return tiling.plan_for(tier, d, limits=limits, subgroup_size=subgroup_size)
    if sizes.get(SHADER_VARIANT):
        from nlpcore.kernels import flash_wgsl_variants

        return flash_wgsl_variants.plan(sizes[SHADER_VARIANT], d,
                                        **{key: value for key, value in sizes.items() if key != SHADER_VARIANT})
    if sizes.get(STAGED):
        sizes = {key: value for key, value in sizes.items() if key != STAGED}
        return tiling.plan_int8_staged(d, storage, subgroup_size=subgroup_size, **sizes)
    if tier == "int8":
        return tiling.plan_int8(d, storage, subgroup_size=subgroup_size, **sizes)
    if tier == "f16":
        return tiling.plan(d, 2, storage, tier="f16", **sizes)
    return tiling.plan(d, 4, tiling.WEBGPU_DEFAULT_STORAGE, tier=tier, **sizes)


def select_variants(keys=None) -> tuple:
    """The rows of :data:`VARIANTS` whose keys (first field) are in the comma-separated ``keys``;
    all of them for None or "all". ValueError names an unknown key and lists the known ones."""
    if keys in (None, "", "all"):
        return VARIANTS
    wanted = [key for key in keys.split(",") if key]
    known = [row[0] for row in VARIANTS]
    unknown = [key for key in wanted if key not in known]
    if unknown:
        raise ValueError("--tier-variants: unknown {} (known: {})".format(", ".join(unknown), ", ".join(known)))
    return tuple(row for row in VARIANTS if row[0] in wanted)


def variants(engine, ops, offered, limits, subgroup_size, *, n=16384, heads=16, d=64, repeats=5, keys=None,
             log=print) -> list:
    """Time :data:`VARIANTS` (those :func:`select_variants` picks by ``keys``) on this engine,
    those of tiers it offers; outputs checked as the rows are, except a main-pass-alone timing
    (its quantised inputs are not recomputed)."""
    from nlpcore.kernels import flash_wgsl_int8, flash_wgsl_int8pv, flash_wgsl_mirror, flash_wgsl_variants

    out = []
    q, k, v = inputs(n, heads, d)
    for key, tier, what, sizes, main_only in select_variants(keys):
        if offered.get(tier):
            continue
        row = {"engine": engine, "tier": tier, "key": key, "variant": what, "n": n, "heads": heads, "d": d,
               "causal": False}
        try:
            plan = variant_plan(tier, d, limits, subgroup_size, sizes)
            if sizes.get(SHADER_VARIANT):
                spec = flash_wgsl_variants.dispatch_spec(q, k, v, variant=sizes[SHADER_VARIANT], plan=plan)
            elif sizes.get(STAGED):
                spec = flash_wgsl_int8pv.dispatch_spec(q, k, v, plan=plan)
            elif tier == "int8":
                spec = flash_wgsl_int8.dispatch_spec(q, k, v, plan=plan)
            else:
                spec = flash_wgsl_mirror.dispatch_spec(q, k, v, plan=plan, tier=tier)
            handle = ops.prepare(spec)
            ops.dispatch(spec, handle)
            rows = np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(int))
            err = check(tier, spec, ops.outputs(spec, handle), q, k, v, False, rows)
            if main_only:
                ops.release(handle)
                spec = dict(spec, passes=[p for p in spec["passes"] if p["entry"] == "main"])
                if main_only in ("no S", "no PV"):
                    spec["code"] = _cut(spec["code"], {"no S": "S_ij", "no PV": "PV_ij"}[main_only])
                handle = ops.prepare(spec)
                ops.dispatch(spec, handle)
                err = {"valid": None, "note": "timing only: main pass over zero-filled quantised buffers"}
            warm_up(ops, spec, handle)
            times = [ops.dispatch(spec, handle)[0] for _ in range(repeats)]
            ops.release(handle)
        except (ValueError, RuntimeError) as e:
            out.append(dict(row, refused=str(e)[:1000]))
            log("  variant {:<8} {:<9} {}: refused: {}".format(engine, tier, what, str(e)[:200]))
            continue
        ms = common.median(times)
        out.append(dict(row, constants=spec["constants"], shader=spec["shader"], ms=ms, times_ms=times,
                        tflops=flops(n, heads, d, False) / (ms * 1e-3) / 1e12, **err))
        log("  variant {:<8} {:<9} {:>9.3f} ms {:>7.2f} TFLOP/s  {} {}".format(
            engine, tier, ms, out[-1]["tflops"], what, [round(t, 2) for t in times]))
    return out


def warm_up(ops, spec, handle, seconds: float = WARM_SECONDS) -> int:
    """Dispatch ``spec`` back to back for ``seconds`` (at least twice), so the GPU's clock is up
    when the timed dispatches start (:data:`WARM_SECONDS`). Returns the number of dispatches."""
    start, count = time.perf_counter(), 0
    while count < 2 or time.perf_counter() - start < seconds:
        ops.dispatch(spec, handle)
        count += 1
    return count


def accuracy(engine, ops, offered, limits, subgroup_size, *, tiers, ds, n=4096, heads=4, log=print) -> list:
    """Accuracy of each tier against float64 on random and on outlier-channel inputs (one size)."""
    out = []
    runs = [(tier, None) for tier in tiers] + ([("int8", STAGED)] if "int8" in tiers else [])
    for tier, variant in runs:
        if offered.get(tier):
            continue
        for d in ds:
            for kind in ("random", "outlier"):
                q, k, v = inputs(n, heads, d, kind, seed=1)
                try:
                    spec = (staged_spec(q, k, v, False, limits, subgroup_size) if variant
                            else spec_for(tier, q, k, v, False, limits, subgroup_size))
                    handle = ops.prepare(spec)
                    ops.dispatch(spec, handle)
                    rows = np.arange(0, n, max(1, n // CHECK_ROWS))
                    err = check(tier, spec, ops.outputs(spec, handle), q, k, v, False, rows)
                    ops.release(handle)
                except (ValueError, RuntimeError) as e:
                    out.append(dict({"engine": engine, "tier": tier, "d": d, "inputs": kind, "error": str(e)[:500]},
                                    **({"variant": variant} if variant else {})))
                    continue
                out.append(dict({"engine": engine, "tier": tier, "d": d, "n": n, "heads": heads, "inputs": kind},
                                **dict(err, **({"variant": variant} if variant else {}))))
                log("  accuracy {:<8} {:<9} d={:<3} {:<8} max|Δo| {:.2e} relL1 {:.2e} cos min {:.6f} mean {:.6f}".format(
                    engine, tier + (" " + variant if variant else ""), d, kind, err["max_abs_err_o"], err["rel_l1"],
                    err["cos_min"], err["cos_mean"]))
    return out


def sdpa(sizes, heads, ds, causals, log=print) -> list:
    """PyTorch's scaled_dot_product_attention (cuDNN / flash backends, bf16 and fp16) on the same
    machine: the ceiling. Median of 10 timed calls after 3 warm-ups, CUDA events."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as err:
        return [{"error": "no torch: {}".format(err)}]
    if not torch.cuda.is_available():
        return [{"error": "no CUDA device"}]
    out = []
    for dtype in (torch.bfloat16, torch.float16):
        for d in ds:
            for h in heads:
                for n in sizes:
                    for causal in causals:
                        q, k, v = (torch.randn(1, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
                        for _ in range(3):
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        times = []
                        for _ in range(10):
                            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            a.record()
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            b.record()
                            torch.cuda.synchronize()
                            times.append(a.elapsed_time(b))
                        ms = common.median(times)
                        out.append({"engine": "pytorch-sdpa", "tier": "tensor cores ({})".format(str(dtype)[6:]),
                                    "kernel": "sdpa", "n": n, "heads": h, "d": d, "causal": causal, "ms": ms,
                                    "tflops": flops(n, h, d, causal) / (ms * 1e-3) / 1e12, "valid": True,
                                    "versions": {"torch": torch.__version__}})
                        log("  sdpa {} d={} x{} N={} causal={} {:.3f} ms {:.1f} TFLOP/s".format(
                            str(dtype)[6:], d, h, n, int(causal), ms, out[-1]["tflops"]))
    return out


def run(args, wgpu_runner, log=print) -> dict:
    """The --tiers benchmark: a record with one engine entry per engine, rows carrying tier and
    engine, the accuracy study and the SDPA ceiling. ``wgpu_runner``: webgpu_attention's
    WgpuRunner class (passed in, so this module does not import its caller)."""
    tiers = [t for t in args.tiers.split(",") if t]
    ds = [int(x) for x in args.d.split(",") if x]
    heads = [int(x) for x in args.heads.split(",") if x]
    sizes = [int(x) for x in args.sizes.split(",") if x]
    causals = [{"no": False, "yes": True}[c] for c in args.causal.split(",") if c]
    record = {"benchmark": "webgpu_attention", "recorded_at": common.now_iso(),
              "command": "bench/webgpu_attention.py " + " ".join(args.argv),
              "machine": common.machine(["wgpu"]),
              "parameters": {"tiers": tiers, "d": ds, "heads": heads, "sizes": sizes, "causal": causals,
                             "repeats": args.repeats, "warmup": "one checked dispatch, then back-to-back dispatches for at least {} s "
                                       "(webgpu_tiers.WARM_SECONDS)".format(WARM_SECONDS),
                             "checked_rows_per_head": CHECK_ROWS,
                             "flops": "4·N²·d per head, half that with a causal mask",
                             "validity": {"portable": "max|Δo|, max|Δlse| <= 1e-4", "subgroup": "max|Δo|, max|Δlse| <= 1e-4",
                                          "f16": "max|Δo|, max|Δlse| <= 4e-3",
                                          "int8": "rel L1 <= {} and per-row cosine >= {}".format(INT8_REL_L1, INT8_COS)},
                             "time": "median per-dispatch time, GPU timestamp queries around the compute pass "
                                     "(all of a spec's passes)"},
              "engines": [], "accuracy": [], "sdpa": []}
    started = time.perf_counter()
    for name in [e for e in args.engines.split(",") if e]:
        log("engine", name)
        if name == "wgpu-py":
            runner = wgpu_runner(features=True)
            offered, limits, sg = wgpu_tiers(runner), {}, 32
            adapter, info = runner.adapter, runner.adapter_info
        elif name == "dawn":
            runner = DawnRunner(args.node, args.dawn_node)
            offered, limits = dawn_tiers(runner.info), runner.info.get("limits", {})
            sg = runner.info.get("subgroupMaxSize") or 32
            adapter, info = runner.adapter, runner.info
        else:
            raise ValueError("--engines: unknown engine {!r} (wgpu-py, dawn)".format(name))
        rows = measure(name, runner, offered, limits, sg, tiers=tiers, ds=ds, heads=heads, sizes=sizes,
                       causals=causals, repeats=args.repeats, log=log)
        if getattr(args, "tier_variants", None):
            record.setdefault("variants", []).extend(variants(name, runner, offered, limits, sg,
                                                              keys=args.tier_variants, log=log))
        if args.accuracy:
            record["accuracy"] += accuracy(name, runner, offered, limits, sg, tiers=tiers, ds=ds, log=log)
        record["engines"].append({"engine": name, "run": "tiers", "adapter": adapter, "adapter_info": info,
                                  "cpu_adapter": "llvmpipe" in adapter.lower() or "swiftshader" in adapter.lower(),
                                  "tiers_offered": {t: (why or "yes") for t, why in offered.items()},
                                  "timing": "timestamp-query" if runner.timestamps else "wall", "rows": rows})
        if name == "dawn":
            runner.close()
        common.write_result(Path(args.out), record)  # what is measured so far survives a time-out
    if args.sdpa:
        record["sdpa"] = sdpa(sizes, heads, ds, causals, log=log)
    record["tier_peaks_tflops"] = peaks()
    record["tier_targets"] = tier_targets(record["engines"])
    record["total_seconds"] = time.perf_counter() - started
    return record


TIER_TARGETS = (("portable", 30.0), ("subgroup", 30.0), ("f16", 40.0), ("int8", 60.0))
"""Issue 25's targets at N = 16384, 16 heads, d = 64, no mask, TFLOP/s on the best engine; the
portable target counts the subgroup variant too (it is float32 on any subgroup adapter)."""


RECORD = "bench/results/webgpu_h200.json"
"""The recorded run of the tiers, whose numbers :data:`TIER_LIMITS` quotes: the tiers and every
variant of :data:`VARIANTS` timed in one process, both engines (tests/test_wgsl_variants.py holds
the quoted numbers equal to the record's)."""

CANDIDATES = "bench/results/webgpu_h200_probe_candidates.json"
"""The H200 probe in which issue 25's first candidates ran beside the subgroup tier's first shader
(wgsl/flash_fwd_subgroup.wgsl, since removed: two rows an invocation, lanes holding contiguous
halves of a row); :data:`TIER_LIMITS` quotes what pair gained over that shader from it."""

TIER_LIMITS = {
    "portable": "float32 on CUDA cores (WebGPU's portable subset has no matrix units); the same speed through Dawn and "
                "wgpu-py, and with 16-key tiles as with 28 (variants), so neither the compiler nor the barriers per "
                "tile set it. Taking the score multiply-adds away does not help much either: the int8 tier, whose "
                "scores come from the tensor cores, runs about as fast, so the per-key online softmax and the float32 "
                "P·V with its workgroup-memory reads bound it. The variants timed beside the tiers (" + RECORD + ", "
                "N = 16384, 16 heads, d = 64, no mask; this tier 20.0 / 20.0 TFLOP/s, Dawn / wgpu-py) split that: "
                "FlashAttention-2's bookkeeping (lean: masks only the tiles that need them, rescales o and l only "
                "when a row's max moves, instead of every four keys) runs at 21.2 / 21.2 (+6 % on both), a small part; "
                "every multiply-add an fma() into a running sum on top (lean-fma) 21.5 / 22.2, +1 / +4 % over lean; "
                "twice the warps with half the registers each (half: one row per two invocations) is slower, "
                "17.2 / 17.5, and 19.5 / 19.5 with 64 rows a workgroup (half-br64), so the kernel is not short of "
                "warps (what half's shuffles cost is not separated); two rows an invocation without subgroups "
                "(pair-wg: the row pair's partial scores through workgroup memory, one more barrier a tile, 8-key "
                "tiles) runs at 21.1 / 20.6, no faster than lean, so the portable subset keeps none of what pair "
                "gains in the subgroup tier beyond the bookkeeping. Causal runs at 0.55x the non-causal time (tiles "
                "above the diagonal skipped)",
    "subgroup": "this tier's shader is wgsl/flash_fwd_pair_fma.wgsl: two rows an invocation (half the workgroup-memory "
                "reads per multiply-add), the lanes of a row pair on neighbouring 16-byte slots, lean's bookkeeping "
                "and fma() chains. Its first shader split each row into contiguous halves, so (by inference, not "
                "profiled) the two lanes of a pair read the same bank of workgroup memory, two passes a read, and it "
                "ran no faster than the portable tier; interleaving the lanes (pair) ran +23 / +24 % faster than it "
                "(" + CANDIDATES + "). In " + RECORD + " (N = 16384, 16 heads, d = 64, no mask) this tier runs at "
                "26.7 / 26.4 TFLOP/s, Dawn / wgpu-py: +33 / +32 % over the portable tier, and its fma() chains "
                "gain +11 / +10 % over pair (the same shader with dot() of vec4 slots and o += p.x·v0 + ..., timed "
                "beside it: 24.1 / 24.2), so the instructions issued are a limit too. At d = 128 it runs at "
                "18.9 / 18.9, 1.52 / 1.58x the portable tier. Still short of 30; untried: four rows an invocation "
                "(a quarter of the reads, twice the registers of q and o)",
    "f16": "float16 data with float32 arithmetic does the portable kernel's multiply-adds plus a conversion per "
           "staged element in every row that reads it; 56-key tiles (variants) are no faster than 28, so the tile "
           "size is not the limit. Timed beside this tier on wgpu-py (" + RECORD + "; this tier 16.3 TFLOP/s, 0.82x "
           "the portable tier's 20.0): pair-f16 (wgsl/flash_fwd_pair_f16.wgsl: pair on float16 data, widened to "
           "float32 once as it is staged; scores, m, l and o float32) runs at 24.6, +51 % over this tier, and "
           "pair-fma-f16 (with the subgroup tier's fma() chains) at 26.9, +65 % over this tier and +1.0 % over the "
           "subgroup tier's float32 shader timed as a variant (26.6), so float16 data costs nothing once widened at "
           "staging and converting per use is this tier's extra cost. With float32 scores, as the issue asks, this "
           "tier can at best match the float32 kernel, so 40 needs a float32 kernel at 40. pair-fma-f16 is not "
           "this tier's shader: it needs subgroups as well as shader-f16, which this tier does not ask of an "
           "adapter. Dawn offers no shader-f16 on this driver, so only wgpu-py ran it",
    "int8": "Q Kᵀ runs on the tensor cores, but the online softmax and P·V stay float32 on CUDA cores, as much work as "
            "the whole portable kernel does (which runs about as fast); the three quantisation passes cost 4 % of its time (main "
            "pass alone: variants) and 64-row, 32-key tiles were slower. Tried since, and slower than this design "
            "(bench/results/webgpu_h200_int8pv.json, all tiers in one run): P·V on subgroup matrices too (P against "
            "each tile's row max and V per channel to int8) with the softmax once per tile; each of its two matrix "
            "blocks, loading its int8 operands from storage buffers for every 16 x 16 product, took about as long as "
            "everything else in the main pass (its variants time the main pass without either block). Staging each key "
            "tile's int8 K and V in workgroup memory for those loads (bench/results/webgpu_h200_probe_int8staged.json) "
            "made both blocks cheaper (33 -> 24 and 30 -> 18 ms) but the pass slower still (8.4 TFLOP/s): the rest of "
            "it grew from 38 to 90 ms, by inference the copy's global loads, with 64 invocations and 47 KiB of "
            "workgroup memory a workgroup leaving few warps to hide them (not profiled). Next: less workgroup memory "
            "(S and P·V tiles sharing one array) or more rows a workgroup, and the next tile's copy issued before "
            "this tile's products",
}


def peaks() -> dict:
    """The H200's datasheet peaks each tier is measured against, from nlpcore.hardware (TFLOP/s):
    float32 for the tiers whose arithmetic is float32; for int8, twice that, since its P·V (half
    the counted work) stays float32 on CUDA cores while Q Kᵀ goes to the tensor cores, so no
    version of it can pass 2 x the float32 peak; dense bf16/fp16 tensor cores for SDPA."""
    from nlpcore import hardware

    h200 = hardware.GPUS["H200"]
    fp32 = h200.fp32_flops / 1e12
    return {"portable": fp32, "subgroup": fp32, "f16": fp32, "int8": 2 * fp32, "sdpa": h200.fp16_flops / 1e12,
            "source": "nlpcore.hardware.GPUS['H200'] ({}): fp32_flops, fp16_flops (dense bf16/fp16 tensor cores); "
                      "int8 = 2 x fp32 (its float32 P·V bounds it)".format(h200.name)}


def tier_targets(engines: list) -> list:
    """One target per tier from the recorded rows: the best valid TFLOP/s over engines."""
    out = []
    for tier, goal in TIER_TARGETS:
        best = None
        for e in engines:
            for r in e.get("rows", []):
                if (r.get("tier"), r.get("n"), r.get("heads"), r.get("d"), r.get("causal"), r.get("kernel")) == \
                        (tier, 16384, 16, 64, False, "tiled") and r.get("valid") and r.get("run", e.get("run")) == "tiers":
                    if best is None or r["tflops"] > best[0]:
                        best = (r["tflops"], e["engine"])
        out.append(common.target(
            "{} tier TFLOP/s at N = 16384, 16 heads, d = 64 (best engine)".format(tier),
            None if best is None else best[0] >= goal, None if best is None else round(best[0], 2),
            ">= {}".format(goal), ("" if best is None else "best on {}: ".format(best[1])) + TIER_LIMITS[tier]))
    return out


def summary(record: dict) -> str:
    """The tiers at N = 16384, 16 heads (TFLOP/s per engine, d and mask), accuracy and the SDPA
    ceiling, as text: ``python bench/webgpu_tiers.py bench/results/webgpu_h200.json``."""
    rows = []
    for e in record["engines"]:
        if e.get("run") != "tiers":
            continue
        for r in e["rows"]:
            if r.get("n") == 16384 and r.get("heads") == 16 and r.get("tflops"):
                rows.append([r["tier"], e["engine"], r["d"], "causal" if r["causal"] else "none",
                             round(r["tflops"], 2), "{:.2e}".format(r["rel_l1"]), r["valid"]])
    for s in record.get("sdpa", []):
        if s.get("n") == 16384 and s.get("heads") == 16:
            rows.append([s["tier"], s["engine"], s["d"], "causal" if s["causal"] else "none", round(s["tflops"], 1), "", True])
    text = common.table(["tier", "engine", "d", "mask", "TFLOP/s", "rel L1", "valid"], sorted(rows, key=str))
    acc = [[a["tier"], a["engine"], a["d"], a["inputs"], "{:.2e}".format(a["rel_l1"]), "{:.4f}".format(a["cos_min"])]
           for a in record.get("accuracy", []) if "rel_l1" in a]
    text += "\n\n" + common.table(["tier", "engine", "d", "inputs", "rel L1", "worst row cosine"], acc)
    probes = [[v["tier"], v["engine"], v.get("key", ""), round(v["tflops"], 2), v.get("valid"), v.get("source", "")]
              for v in record.get("variants", []) if v.get("tflops")]
    return text + "\n\n" + common.table(["variant of", "engine", "key", "TFLOP/s", "valid", "from"], probes)


def merge(tiers: dict, into: dict) -> dict:
    """``into`` (the recorded webgpu_h200.json) with its tier run replaced by ``tiers`` (a record of
    :func:`run`): engines marked ``run: "tiers"`` swapped, the run's facts under ``tiers``, and its
    accuracy, SDPA ceiling, variants, peaks and targets. The earlier tiled-vs-naive engine stays."""
    out = dict(into)
    out["engines"] = [e for e in into["engines"] if e.get("run") != "tiers"] + \
                     [dict(e, run="tiers") for e in tiers["engines"]]
    out["tiers"] = {key: tiers[key] for key in ("recorded_at", "command", "machine", "parameters", "total_seconds",
                                                "note") if key in tiers}
    for key in ("accuracy", "sdpa", "variants", "tier_peaks_tflops"):
        out[key] = tiers.get(key, [])
    out["tier_targets"] = tier_targets(out["engines"])
    return out


def fold_variants(probe: dict, into: dict, source: str) -> dict:
    """``into`` (the recorded webgpu_h200.json) with the ``variants`` rows of ``probe`` (a record of
    :func:`run`, e.g. ``h200_tiers.sh probe``) added, each marked ``source``; a row of the same
    engine and key already there is replaced. ``tier_targets`` is recomputed from ``into``'s own
    tier rows, so an edited :data:`TIER_LIMITS` reaches the record; the tier rows stay as they are."""
    new = [dict(v, source=source) for v in probe.get("variants", []) if v.get("key")]
    fresh = {(v["engine"], v["key"]) for v in new}
    out = dict(into)
    out["variants"] = [v for v in into.get("variants", []) if (v.get("engine"), v.get("key")) not in fresh] + new
    out["tier_targets"] = tier_targets(out["engines"])
    return out


if __name__ == "__main__":
    import sys

    if sys.argv[1] == "--fold-variants":  # webgpu_tiers.py --fold-variants PROBE.json RECORD.json
        record = fold_variants(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")),
                               json.loads(Path(sys.argv[3]).read_text(encoding="utf-8")),
                               "bench/results/" + Path(sys.argv[2]).name)
        print("wrote", common.write_result(Path(sys.argv[3]), record))
    elif sys.argv[1] == "--merge":  # webgpu_tiers.py --merge NEW.json RECORD.json: RECORD updated in place
        record = merge(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")),
                       json.loads(Path(sys.argv[3]).read_text(encoding="utf-8")))
        print("wrote", common.write_result(Path(sys.argv[3]), record))
    else:
        print(summary(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))))
