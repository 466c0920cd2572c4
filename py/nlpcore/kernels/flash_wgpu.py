"""Run ``wgsl/flash_fwd.wgsl`` (and the naive baseline) natively through wgpu-py. CPython only.

wgpu-py compiles WGSL with naga and runs it on whatever Vulkan/Metal/D3D adapter is present —
on a machine without a GPU, Mesa's lavapipe (a CPU Vulkan driver). That makes it a second,
independent WebGPU implementation next to the browser's Dawn/Tint, executing the very same
dispatch spec the page executes (:func:`nlpcore.kernels.flash_wgsl_mirror.dispatch_spec`).

The device is requested with WebGPU's *default* limits for the numbers the tile plan relies on
(16384 bytes of workgroup storage, 256 invocations per workgroup, 128 MiB per storage binding),
not the adapter's larger ones. One check is weaker here than in a browser: wgpu-native (wgpu-py
0.32) does not total the workgroup arrays whose sizes come from ``override`` constants, so it
would accept a pipeline over 16384 bytes that Chromium's Dawn refuses ("The total use of
workgroup storage ... is larger than the maximum allowed"). What keeps both under the limit is
the plan's own accounting, :func:`nlpcore.kernels.tiling.bytes_needed`, which counts exactly as
the WebGPU spec (and Dawn) does.

One limit is stricter here than in a browser: Mesa's lavapipe/llvmpipe stops a shader
invocation after 65535 loop iterations in total (gallivm's loop limiter) and leaves whatever it
had written, with no error. :func:`loop_iterations` bounds what one invocation of either shader
loops for a given spec, and :func:`run_spec` refuses, with a ValueError saying the largest N
that fits, a dispatch whose bound is over the limit on such an adapter.

``wgpu`` is imported on first use, so importing this module never fails; calling it without
wgpu installed raises ImportError saying what to install.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

from . import flash_wgsl_mirror as mirror
from . import tiling

WGSL_DIR_ENV = "NLPCORE_WGSL_DIR"
"""Environment variable naming a directory of .wgsl files, checked before the repository's."""

_REQUIRED_LIMITS = {
    "max-compute-workgroup-storage-size": tiling.WEBGPU_DEFAULT_STORAGE,
    "max-compute-invocations-per-workgroup": tiling.WEBGPU_DEFAULT_INVOCATIONS,
    "max-storage-buffer-binding-size": mirror.MAX_BUFFER_BYTES,
}

LAVAPIPE_LOOP_LIMIT = 65535
"""Loop iterations after which Mesa's llvmpipe/lavapipe silently stops a shader invocation
(gallivm's ``LP_MAX_TGSI_LOOP_ITERATIONS``; it counts every iteration of every loop, plus one
exit test for each loop entered, over the whole invocation)."""

WGPU_FEATURE_NAMES = {"subgroups": "subgroup", "shader-f16": "shader-f16",
                      "chromium-experimental-subgroup-matrix": None}
"""WebGPU feature names (what specs list) as wgpu-py 0.32 spells them; None: wgpu-native has no
such feature (subgroup matrices are Dawn's; wgpu's own cooperative matrices are refused at device
creation), so a spec that needs it runs only through Dawn (bench/webgpu_dawn.mjs)."""

_device = None  # the GPUDevice, created on first use
_pipelines: Dict[tuple, object] = {}  # (shader, entry, constants, binding types) -> pipeline


def shader_path(name: str) -> Path:
    """Where ``wgsl/<name>`` is: $NLPCORE_WGSL_DIR first, then the repository's wgsl/ folder."""
    if name not in mirror.SHADERS:
        raise ValueError("shader must be one of {}, got {!r}".format(list(mirror.SHADERS), name))
    candidates = []
    if os.environ.get(WGSL_DIR_ENV):
        candidates.append(Path(os.environ[WGSL_DIR_ENV]) / name)
    candidates.append(Path(__file__).resolve().parents[3] / "wgsl" / name)  # py/nlpcore/kernels/ -> repo
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        "cannot find {}: looked in {} (set {} to the folder holding the .wgsl files)".format(
            name, ", ".join(str(p.parent) for p in candidates), WGSL_DIR_ENV
        )
    )


def shader_source(name: str) -> str:
    """The WGSL text of ``name``, its ``#include`` lines resolved (nlpcore.shaders.compose)."""
    from nlpcore import shaders

    return shaders.compose(shader_path(name).read_text(encoding="utf-8"), name)


def _wgpu():
    """The wgpu module, imported on first use with an error that says what to install."""
    try:
        import wgpu
    except ImportError as err:
        raise ImportError(
            "nlpcore.kernels.flash_wgpu needs the wgpu package on CPython "
            "(pip install 'nlpcore[test]' or pip install wgpu) and a Vulkan driver "
            "(e.g. Debian's mesa-vulkan-drivers): {}".format(err)
        ) from err
    return wgpu


def device():
    """The wgpu device (created once), with WebGPU's default limits for what the plan uses and
    whichever of the tiers' optional features (``shader-f16``, subgroups) the adapter offers."""
    global _device
    if _device is None:
        wgpu = _wgpu()
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("wgpu found no adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
        wanted = [name for name in WGPU_FEATURE_NAMES.values() if name and name in adapter.features]
        _device = adapter.request_device_sync(required_features=wanted, required_limits=dict(_REQUIRED_LIMITS))
    return _device


def missing_features(spec: dict) -> list:
    """The features ``spec`` needs (WebGPU names) that this wgpu device lacks."""
    have = device().features
    return [f for f in spec.get("features", []) if WGPU_FEATURE_NAMES.get(f, f) not in have]


def adapter_name() -> str:
    """A short description of the adapter, e.g. ``llvmpipe (LLVM 15.0.6, 256 bits)``."""
    info = device().adapter.info
    return "{} ({})".format(info.get("device", "?"), info.get("backend_type", "?"))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _strided(count: int, wg: int) -> int:
    """Counted iterations of ``for (var e = t; e < count; e += WG) {}`` for t = 0 (the busiest
    invocation), plus its exit test."""
    return _ceil_div(count, wg) + 1


def _flash_iterations(c: Dict[str, int], n_k: int, unrolled: bool) -> int:
    """Loop iterations of the busiest invocation of flash_fwd.wgsl, loop by loop as the shader
    is written (its "Loop budget" comment), over all ceil(n_k / BC) key tiles. ``unrolled``:
    the 64-dim register chunks are handled in straight-line code, as in wgsl/flash_fwd.wgsl;
    False for a shader of the same shape that loops over the 16 slots of a chunk for each dot
    product and each o update (a learner's, say), counted with those two loops per key."""
    br, bc, ks = c["BR"], c["BC"], c["KS"]
    chunk4 = tiling.CHUNK4
    wg = br * ks
    groups = _ceil_div(bc, 4)
    per_tile = (
        1                                                    # the j loop itself
        + _strided(bc * ks * chunk4, wg)                     # stage K_j and V_j
        + (bc + 1 if ks > 1 else 0)                          # partial scores into s_part
        + groups + 1                                         # four keys a step
        + (groups * (ks + 1) if ks > 1 else 0)               # add the KS partial sums
    )
    if not unrolled:
        per_tile += bc * 2 * (chunk4 + 1)                    # slot loops of dot and update
    return _ceil_div(n_k, bc) * per_tile + 1


def _naive_iterations(c: Dict[str, int], n_k: int) -> int:
    """Loop iterations of the busiest invocation of attention_naive.wgsl's three passes."""
    d, wg = c["D"], c["WG"]
    scores = d + 1
    softmax = 3 * _strided(n_k, wg) + 2 * (wg + 1)
    pv = n_k + 1
    return max(scores, softmax, pv)


def _iterations_at(spec: dict, n_k: int) -> Optional[int]:
    try:
        c = spec["constants"]
        if spec["shader"] in (mirror.FLASH_SHADER, mirror.TIER_SHADERS["subgroup"], mirror.TIER_SHADERS["f16"]):
            return _flash_iterations(dict(c, KS=c.get("KS", 1)), n_k, unrolled=spec.get("code") is None)
        if spec.get("code") is not None and "BR" in c and "BC" in c:
            # a learner's shader of the same shape (the wgsl exercise's), which may declare no KS
            return _flash_iterations(dict(c, KS=c.get("KS", 1)), n_k, unrolled=False)
        if spec["shader"] == mirror.NAIVE_SHADER and spec.get("code") is None:
            return _naive_iterations(spec["constants"], n_k)
    except (KeyError, TypeError):  # constants of another shape: nothing known to count
        return None
    return None


def _n_k(spec: dict) -> Optional[int]:
    """Nk from the spec's ``params`` uniform (struct Params: n_q, n_k, ...)."""
    for b in spec["bindings"]:
        if b.get("name") == "params" and b.get("data") is not None and len(b["data"]) >= 8:
            return int(np.frombuffer(bytes(b["data"][:8]), dtype="<u4")[1])
    return None


def loop_iterations(spec: dict) -> Optional[int]:
    """An upper bound on the loop iterations one invocation runs for this dispatch spec, counted
    as lavapipe's loop limiter counts them (see :data:`LAVAPIPE_LOOP_LIMIT`), with no credit
    for loops the compiler may unroll; None for a shader it does not know.

    flash_fwd.wgsl: ceil(Nk / BC) key tiles times the per-tile count of the shader's loops
    (about 0.6 per key for d = dv = 64 with the default plan); an inline shader (``"code"``)
    with overrides BR and BC, as the wgsl exercise's learner shaders have, is counted as one of
    that shape that loops over its register chunks (KS = 1 unless it sets KS). attention_naive.wgsl:
    the longest of its three passes, Nk + 1 in its ``pv`` pass once Nk is large.
    """
    n_k = _n_k(spec)
    return None if n_k is None else _iterations_at(spec, n_k)


def largest_n_k(spec: dict, limit: int = LAVAPIPE_LOOP_LIMIT) -> Optional[int]:
    """The largest Nk for which :func:`loop_iterations` of this spec's shader and constants
    stays within ``limit``; None for an unknown shader, 0 when not even Nk = 1 fits."""
    if _iterations_at(spec, 1) is None:
        return None
    lo, hi = 0, 1 << 24  # the count grows with Nk: bisect for the last n_k within the limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _iterations_at(spec, mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def has_loop_limiter() -> bool:
    """Is the adapter Mesa's llvmpipe/lavapipe, which stops long-looping invocations?"""
    info = device().adapter.info
    text = " ".join(str(info.get(key, "")) for key in ("device", "description", "vendor")).lower()
    return "llvmpipe" in text or "lavapipe" in text


def check_loop_budget(spec: dict) -> None:
    """Raise ValueError when ``spec`` would pass lavapipe's loop limit (whatever the adapter)."""
    count = loop_iterations(spec)
    if count is not None and count > LAVAPIPE_LOOP_LIMIT:
        raise ValueError(
            "lavapipe/llvmpipe stops a shader invocation after {} loop iterations; this dispatch of "
            "{} needs ~{} (Nk = {}, constants {}); use N <= {} keys with these constants, or "
            "run it in a browser".format(
                LAVAPIPE_LOOP_LIMIT, spec["shader"], count, _n_k(spec), spec["constants"],
                largest_n_k(spec),
            )
        )


NAGA_UNSUPPORTED_ENABLE = "enable subgroups;"
"""Dawn (Tint) requires this directive before a shader uses subgroup built-ins; naga in wgpu-py
0.32 rejects it ("the `subgroups` enable-extension is not yet supported") yet compiles the
built-ins themselves when the device has the ``subgroup`` feature. :func:`naga_source` drops the
line, so the same file runs in both engines; tests/test_wgsl_tiers.py pins both halves."""


def naga_source(code: str) -> str:
    """``code`` as wgpu-py's naga accepts it: without :data:`NAGA_UNSUPPORTED_ENABLE` lines."""
    return "\n".join("// (dropped for naga) " + line if line.strip() == NAGA_UNSUPPORTED_ENABLE else line
                     for line in code.split("\n"))


def _pipeline(spec: dict, entry: str):
    wgpu = _wgpu()

    code = spec.get("code")  # inline WGSL (a learner's shader), else the file named by "shader"
    key = (
        spec["shader"],
        code,
        entry,
        tuple(sorted(spec["constants"].items())),
        tuple((b["binding"], b["type"]) for b in spec["bindings"]),
    )
    if key not in _pipelines:
        dev = device()
        module = dev.create_shader_module(code=naga_source(code if code is not None else shader_source(spec["shader"])))
        layout = dev.create_bind_group_layout(
            entries=[
                {"binding": b["binding"], "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": b["type"]}}
                for b in spec["bindings"]
            ]
        )
        _pipelines[key] = (
            dev.create_compute_pipeline(
                layout=dev.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": entry, "constants": dict(spec["constants"])},
            ),
            layout,
        )
    return _pipelines[key]


def run_spec(spec: dict, *, check_loops: bool = True) -> Dict[str, bytes]:
    """Execute a dispatch spec; return ``{name: bytes}`` for every binding marked ``output``.

    Generic on purpose: it knows nothing about attention, exactly like the page's gpu.js. A spec
    may carry its WGSL inline as ``"code"`` (an exercise's shader); ``"shader"`` then only names it.
    A spec with ``"passes": [{"entry", "workgroups"}, ...]`` runs those dispatches in order, in
    one compute pass over the same buffers (WebGPU orders one dispatch's storage writes before
    the next one's reads); without it, the one dispatch ``"entry"`` x ``"workgroups"`` runs.

    Raises:
        ValueError: on lavapipe/llvmpipe, when :func:`loop_iterations` of the spec is over
            :data:`LAVAPIPE_LOOP_LIMIT` (the driver would silently return wrong numbers);
            ``check_loops=False`` skips this (only for showing what the limiter does).
    """
    wgpu = _wgpu()

    usage = {
        "uniform": wgpu.BufferUsage.UNIFORM,
        "read-only-storage": wgpu.BufferUsage.STORAGE,
        "storage": wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC,
    }
    for b in spec["bindings"]:
        if b["type"] not in usage:
            raise ValueError("binding {} has unknown type {!r} (expected one of {})".format(
                b["binding"], b["type"], sorted(usage)))
    passes = spec.get("passes") or [{"entry": spec["entry"], "workgroups": spec["workgroups"]}]
    for i, p in enumerate(passes):
        groups = p.get("workgroups")
        if (not isinstance(p.get("entry"), str) or not isinstance(groups, (list, tuple)) or len(groups) != 3
                or not all(isinstance(n, int) and n >= 0 for n in groups)):
            raise ValueError("spec passes[{}] must be {{'entry': str, 'workgroups': [x, y, z] non-negative "
                             "ints}}, got {!r}".format(i, p))
    missing = missing_features(spec)
    if missing:
        raise RuntimeError("{} needs the WebGPU feature(s) {}, which this wgpu device ({}) lacks".format(
            spec["shader"], ", ".join(missing), adapter_name()))
    if check_loops and has_loop_limiter():
        check_loop_budget(spec)
    dev = device()
    pipelines = [_pipeline(spec, p["entry"]) for p in passes]
    buffers = {}
    entries = []
    for b in spec["bindings"]:
        if b["data"] is None:  # WebGPU zero-fills new buffers
            buf = dev.create_buffer(size=b["size"], usage=usage[b["type"]] | wgpu.BufferUsage.COPY_DST)
        else:
            buf = dev.create_buffer_with_data(data=bytes(b["data"]), usage=usage[b["type"]])
        buffers[b["name"]] = buf
        entries.append({"binding": b["binding"], "resource": {"buffer": buf, "offset": 0, "size": b["size"]}})

    encoder = dev.create_command_encoder()
    compute = encoder.begin_compute_pass()
    for p, (pipeline, layout) in zip(passes, pipelines):
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, dev.create_bind_group(layout=layout, entries=entries))
        compute.dispatch_workgroups(*p["workgroups"])
    compute.end()
    dev.queue.submit([encoder.finish()])
    return {
        b["name"]: bytes(dev.queue.read_buffer(buffers[b["name"]]))
        for b in spec["bindings"]
        if b["output"]
    }


def forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
            plan: Optional[tiling.TilePlan] = None, tier: str = "portable") -> Tuple[np.ndarray, np.ndarray]:
    """``wgsl/flash_fwd.wgsl`` (or the ``tier``'s shader) on the native WebGPU device; arguments
    and results exactly as :func:`nlpcore.kernels.flash_wgsl_mirror.forward` (o (..., Nq, dv)
    float32 or float16, lse (..., Nq) float32 with -inf for rows with no allowed key)."""
    spec = mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan, tier=tier)
    return mirror.decode_outputs(spec, run_spec(spec))


def naive_forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
                  plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``wgsl/attention_naive.wgsl`` (S materialised in a storage buffer), same contract."""
    spec = mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan,
                                shader=mirror.NAIVE_SHADER)
    return mirror.decode_outputs(spec, run_spec(spec))
