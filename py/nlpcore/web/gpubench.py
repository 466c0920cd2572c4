"""The performance page's "time your own GPU" door: the same dispatch specs as
``bench/webgpu_attention.py`` (the tiled ``flash_fwd.wgsl`` and the naive ``attention_naive.wgsl``,
d = 64, one head, float32, the benchmark's unit-normal inputs), built here so the page times
exactly what the recorded benchmarks timed, and a check of what the page's GPU returned.

    gpubench.options()                   -> {"sizes", "d", "check_rows"}
    gpubench.specs(n)                    -> {"n", "d", "flops", "kernels": {"tiled": spec, "naive": spec}}
    gpubench.check(n, kernel, outputs)   -> {"max_abs_err_o", "max_abs_err_lse", "valid", "tolerance"}

A check compares sampled query rows with ``reference.forward`` in float64 (rows are independent
without a causal mask), within the benchmark's tolerance (:data:`nlpcore.tolerances.BENCH_WEBGPU`).
Runs inside Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..kernels import flash_wgsl_mirror as mirror
from ..kernels import reference
from ..tolerances import BENCH_WEBGPU

__all__ = ["options", "specs", "check"]

D = 64
SIZES = (256, 1024, 2048, 4096)
"""Sequence lengths the page offers (the recorded H200 run has 1024 .. 16384; 256 is a quick
try on a CPU adapter)."""

CHECK_ROWS = 64  # query rows compared with the float64 reference
_KERNELS = {"tiled": mirror.FLASH_SHADER, "naive": mirror.NAIVE_SHADER}


def options() -> Dict[str, Any]:
    """What the page may ask for: the sequence lengths, the head dim, rows checked."""
    return {"sizes": list(SIZES), "d": D, "check_rows": CHECK_ROWS}


def _n(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in SIZES:
        raise ValueError("n: expected one of {}, got {!r}".format(list(SIZES), value))
    return value


def _inputs(n: int):
    """q, k, v (n, 64) float32: the draw bench/webgpu_attention.py makes for one head (seed 0),
    the same for specs and check."""
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((n, D)).astype(np.float32) for _ in range(3))


def specs(n: int) -> Dict[str, Any]:
    """Dispatch specs of both shaders for sequence length ``n`` (one of :data:`SIZES`)."""
    q, k, v = _inputs(_n(n))
    return {"n": n, "d": D, "flops": 4 * n * n * D,
            "kernels": {name: mirror.dispatch_spec(q, k, v, shader=shader) for name, shader in _KERNELS.items()}}


def check(n: int, kernel: str, outputs: Dict[str, Any]) -> Dict[str, Any]:
    """Did the page's GPU compute attention? ``outputs``: {"o": bytes, "lse": bytes} read back."""
    n = _n(n)
    if kernel not in _KERNELS:
        raise ValueError("kernel: expected one of {}, got {!r}".format(sorted(_KERNELS), kernel))
    if not isinstance(outputs, dict):
        raise TypeError("outputs: expected {'o': bytes, 'lse': bytes}, got " + type(outputs).__name__)
    q, k, v = _inputs(n)
    spec = {"meta": {"batch_shape": [], "n_q": n, "dv": D},
            "bindings": [{"name": "o", "size": n * D * 4}, {"name": "lse", "size": n * 4}]}
    o, lse = mirror.decode_outputs(spec, outputs)
    rows = np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(int))
    o_ref, lse_ref = reference.forward(q[rows].astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    err_o = float(np.max(np.abs(o[rows] - o_ref)))
    err_lse = float(np.max(np.abs(lse[rows] - lse_ref)))
    return {"max_abs_err_o": err_o, "max_abs_err_lse": err_lse, "tolerance": BENCH_WEBGPU.atol,
            "valid": bool(err_o <= BENCH_WEBGPU.atol and err_lse <= BENCH_WEBGPU.atol)}
