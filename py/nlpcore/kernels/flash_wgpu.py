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
    """The WGSL text of ``name``."""
    return shader_path(name).read_text(encoding="utf-8")


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
    """The wgpu device (created once), with WebGPU's default limits for what the plan uses."""
    global _device
    if _device is None:
        wgpu = _wgpu()
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("wgpu found no adapter (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
        _device = adapter.request_device_sync(required_limits=dict(_REQUIRED_LIMITS))
    return _device


def adapter_name() -> str:
    """A short description of the adapter, e.g. ``llvmpipe (LLVM 15.0.6, 256 bits)``."""
    info = device().adapter.info
    return "{} ({})".format(info.get("device", "?"), info.get("backend_type", "?"))


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
        module = dev.create_shader_module(code=code if code is not None else shader_source(spec["shader"]))
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


def run_spec(spec: dict) -> Dict[str, bytes]:
    """Execute a dispatch spec; return ``{name: bytes}`` for every binding marked ``output``.

    Generic on purpose: it knows nothing about attention, exactly like the page's gpu.js. A spec
    may carry its WGSL inline as ``"code"`` (an exercise's shader); ``"shader"`` then only names it.
    A spec with ``"passes": [{"entry", "workgroups"}, ...]`` runs those dispatches in order, in
    one compute pass over the same buffers (WebGPU orders one dispatch's storage writes before
    the next one's reads); without it, the one dispatch ``"entry"`` x ``"workgroups"`` runs.
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
            plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``wgsl/flash_fwd.wgsl`` on the native WebGPU device; arguments and results exactly as
    :func:`nlpcore.kernels.flash_wgsl_mirror.forward` (o (..., Nq, dv) float32, lse (..., Nq)
    float32 with -inf for rows with no allowed key)."""
    spec = mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    return mirror.decode_outputs(spec, run_spec(spec))


def naive_forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
                  plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``wgsl/attention_naive.wgsl`` (S materialised in a storage buffer), same contract."""
    spec = mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan,
                                shader=mirror.NAIVE_SHADER)
    return mirror.decode_outputs(spec, run_spec(spec))
