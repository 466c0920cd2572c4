"""The lab page's Python side: exact attention computed three ways, compared.

The page (``site/js/lab.js``) makes two calls through :func:`nlpcore.web.call`:

1. ``lab.prepare(n, d, causal, padding, heads, seed)`` draws q, k, v, makes the tile plan
   (:func:`nlpcore.kernels.tiling.plan`, sized to WebGPU's default 16384 bytes of workgroup
   storage), runs two CPU paths - ``flash_np.forward`` (the NumPy FlashAttention kernel) and
   ``flash_wgsl_mirror.forward`` (a NumPy re-enactment of ``wgsl/flash_fwd.wgsl``) - and
   returns the plan, the shader's *dispatch spec* and the mirror-vs-flash_np comparison.
2. The page runs the spec through WebGPU and hands the raw output bytes to
   ``lab.compare(..., outputs={"o": bytes, "lse": bytes})``, which decodes them and compares the
   GPU against the mirror and against flash_np.

Every comparison reports max |delta| over o and over lse (rows with no allowed key must have
o = 0 and lse = -inf in both results; such rows are compared by that rule, not by subtraction)
and a verdict against a tolerance from :data:`TOLERANCES`.

Inputs are drawn again from the seed on each call (cheap at the lab's sizes); the last
prepared run is kept so ``compare`` does not redo the CPU work.
"""

from __future__ import annotations

import math
import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .. import tolerances
from ..kernels import flash_np, flash_wgsl_mirror, tiling

__all__ = ["prepare", "compare", "limits"]

# Sizes the page may ask for. The mirror re-enacts every workgroup in Python, so its time grows
# as heads * N^2: N = 1024 with 4 heads takes about 10 s inside Pyodide (measured, 2 cores).
MAX_N = 1024
MAX_D = 4096          # the tile plan rejects far smaller d; this only bounds the allocation
MAX_HEADS = 4

# Tolerances per pair of float32 results (nlpcore.tolerances.PAGE, where each is explained),
# applied to o and to lse separately: max |delta| <= atol + rtol * max |reference| (over the
# rows that have an allowed key).
TOLERANCES = {pair: {"atol": tol.atol, "rtol": tol.rtol} for pair, tol in tolerances.PAGE.items()}

_last: Dict[str, Any] = {}   # {"key": args tuple, "inputs": ..., "results": ...}


def limits() -> Dict[str, Any]:
    """The bounds the page's inputs are checked against, and the storage budget."""
    return {"max_n": MAX_N, "max_d": MAX_D, "max_heads": MAX_HEADS,
            "storage_limit": tiling.WEBGPU_DEFAULT_STORAGE, "tolerances": TOLERANCES}


def _int_arg(value: Any, name: str, low: int, high: int) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value != int(value)):
        raise TypeError("{}: expected an integer, got {!r}".format(name, value))
    value = int(value)
    if not low <= value <= high:
        raise ValueError("{}: expected an integer in [{}, {}], got {}".format(name, low, high, value))
    return value


def _check_args(n, d, causal, padding, heads, seed) -> Tuple[int, int, bool, int, int, int]:
    n = _int_arg(n, "n", 1, MAX_N)
    d = _int_arg(d, "d", 1, MAX_D)
    if not isinstance(causal, bool):
        raise TypeError("causal: expected true or false, got {!r}".format(causal))
    padding = _int_arg(padding, "padding", 0, n)
    heads = _int_arg(heads, "heads", 1, MAX_HEADS)
    seed = _int_arg(seed, "seed", 0, 2 ** 32 - 1)
    return n, d, causal, padding, heads, seed


def make_inputs(n: int, d: int, padding: int, heads: int, seed: int):
    """q, k, v (heads, n, d) float32 ~ N(0, 1), and the key-padding mask (1, 1, n) or None.

    The mask is True ("may attend") for the first n - padding keys: the last `padding` keys
    stand for padding tokens of a shorter sequence.
    """
    rng = np.random.RandomState(seed)
    q = rng.standard_normal((heads, n, d)).astype(np.float32)
    k = rng.standard_normal((heads, n, d)).astype(np.float32)
    v = rng.standard_normal((heads, n, d)).astype(np.float32)
    mask = None
    if padding:
        mask = np.zeros((1, 1, n), dtype=bool)  # (..., 1, Nk): one row shared by every query
        mask[..., : n - padding] = True
    return q, k, v, mask


def _run_cpu(key: tuple) -> Dict[str, Any]:
    if _last.get("key") == key:
        return _last
    n, d, causal, padding, heads, seed = key
    plan = tiling.plan(d)  # ValueError naming the 16384-byte limit when d cannot fit
    q, k, v, mask = make_inputs(n, d, padding, heads, seed)

    started = time.perf_counter()
    o_np, lse_np = flash_np.forward(q, k, v, causal=causal, mask=mask)
    np_ms = (time.perf_counter() - started) * 1e3

    started = time.perf_counter()
    o_mirror, lse_mirror = flash_wgsl_mirror.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    mirror_ms = (time.perf_counter() - started) * 1e3

    spec = flash_wgsl_mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=None, plan=plan)
    _last.clear()
    _last.update(key=key, plan=plan, spec=spec,
                 flash_np=(o_np, lse_np), mirror=(o_mirror, lse_mirror),
                 times={"flash_np_ms": np_ms, "mirror_ms": mirror_ms})
    return _last


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def compare_pair(name: str, result: Tuple[np.ndarray, np.ndarray],
                 reference: Tuple[np.ndarray, np.ndarray]) -> Dict[str, Any]:
    """max |delta| of o and lse between two (o, lse) results, and the verdict for `name`.

    Rows whose lse is -inf (no allowed key) must be -inf in both, with o = 0 in both; any NaN
    fails. Returns plain data: {"pair", "o_max_abs", "lse_max_abs", "max_abs" (the larger),
    "o_bound", "lse_bound", "atol", "rtol", "fully_masked_rows", "ok", "problem"}.
    """
    o, lse = (np.asarray(x) for x in result)
    o_ref, lse_ref = (np.asarray(x) for x in reference)
    tol = TOLERANCES[name]
    problem = None
    if o.shape != o_ref.shape or lse.shape != lse_ref.shape:
        problem = "shapes differ: o {} vs {}, lse {} vs {}".format(
            o.shape, o_ref.shape, lse.shape, lse_ref.shape)
    elif np.isnan(o).any() or np.isnan(lse).any():
        problem = "NaN in the result"
    elif np.isnan(o_ref).any() or np.isnan(lse_ref).any():
        problem = "NaN in the reference"
    if problem is not None:
        return {"pair": name, "o_max_abs": None, "lse_max_abs": None, "max_abs": None,
                "o_bound": None, "lse_bound": None, "atol": tol["atol"], "rtol": tol["rtol"],
                "fully_masked_rows": None, "ok": False, "problem": problem}

    empty, empty_ref = np.isneginf(lse), np.isneginf(lse_ref)
    if not np.array_equal(empty, empty_ref):
        problem = "rows with no allowed key differ ({} vs {} such rows)".format(
            int(empty.sum()), int(empty_ref.sum()))
    elif np.any(o[empty] != 0) or np.any(o_ref[empty_ref] != 0):
        problem = "a row with no allowed key has o != 0"
    o_err = _max_abs(o, o_ref)
    lse_err = None
    max_abs = o_err
    live = ~empty & ~empty_ref
    if problem is None:
        lse_err = _max_abs(lse[live], lse_ref[live])
        max_abs = max(o_err, lse_err)
    o_bound = tol["atol"] + tol["rtol"] * (float(np.max(np.abs(o_ref))) if o_ref.size else 0.0)
    lse_bound = tol["atol"] + tol["rtol"] * (float(np.max(np.abs(lse_ref[live]))) if live.any() else 0.0)
    if problem is None and o_err > o_bound:
        problem = "o: max |delta| {:.3g} exceeds the tolerance {:.3g}".format(o_err, o_bound)
    elif problem is None and lse_err > lse_bound:
        problem = "lse: max |delta| {:.3g} exceeds the tolerance {:.3g}".format(lse_err, lse_bound)
    return {"pair": name, "o_max_abs": o_err, "lse_max_abs": lse_err, "max_abs": max_abs,
            "o_bound": o_bound, "lse_bound": lse_bound, "atol": tol["atol"], "rtol": tol["rtol"],
            "fully_masked_rows": int(empty_ref.sum()), "ok": problem is None, "problem": problem}


def _preview(n: int, results: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> Dict[str, Any]:
    """The first four values of one output row (head 0) from each path, for the page."""
    row = min(n - 1, 2)
    out: Dict[str, Any] = {"row": row}
    for name, (o, _) in results.items():
        out[name] = [float(x) for x in np.asarray(o)[0, row, :4]]
    return out


def _summary(key: tuple, run: Dict[str, Any]) -> Dict[str, Any]:
    n, d, causal, padding, heads, seed = key
    plan = run["plan"]
    return {
        "args": {"n": n, "d": d, "causal": causal, "padding": padding, "heads": heads, "seed": seed},
        "plan": plan.as_dict(),
        "scale": 1.0 / math.sqrt(d),
        "times": dict(run["times"]),
    }


def prepare(n: int = 64, d: int = 32, causal: bool = False, padding: int = 0, heads: int = 1,
            seed: int = 0) -> Dict[str, Any]:
    """Draw inputs, plan the tiles, run flash_np and the mirror; return the spec to dispatch.

    Args:
        n: sequence length N (queries = keys), 1..MAX_N; need not be a multiple of the tiles.
        d: head dimension (q, k and v), 1..MAX_D; the tile plan rejects d that cannot fit.
        causal: query i attends key j only if j <= i.
        padding: how many trailing keys are padding (masked for every query), 0..n.
        heads: independent heads (the leading axis), 1..MAX_HEADS.
        seed: seed of the N(0, 1) inputs.

    Returns:
        {"args", "plan" (TilePlan.as_dict()), "scale", "times", "spec" (the dispatch spec,
        buffers as bytes), "cpu" (compare_pair of mirror vs flash_np)}.

    Raises:
        TypeError / ValueError: naming the argument; ValueError from the tile plan when d does
        not fit maxComputeWorkgroupStorageSize (16384 bytes).
    """
    key = _check_args(n, d, causal, padding, heads, seed)
    run = _run_cpu(key)
    out = _summary(key, run)
    out["spec"] = run["spec"]
    out["cpu"] = compare_pair("mirror_vs_flash_np", run["mirror"], run["flash_np"])
    out["preview"] = _preview(key[0], {"mirror": run["mirror"], "flash_np": run["flash_np"]})
    return out


def compare(n: int = 64, d: int = 32, causal: bool = False, padding: int = 0, heads: int = 1,
            seed: int = 0, outputs: Optional[Dict[str, bytes]] = None,
            gpu_ms: Optional[float] = None) -> Dict[str, Any]:
    """Decode the GPU's output bytes and compare them with the mirror and with flash_np.

    Args:
        n, d, causal, padding, heads, seed: as for :func:`prepare` (same values).
        outputs: {binding name: raw little-endian bytes} read back from the GPU.
        gpu_ms: the page's timing of the dispatch, echoed in "times".

    Returns:
        {"args", "plan", "scale", "times", "pairs": [gpu_vs_mirror, gpu_vs_flash_np,
        mirror_vs_flash_np], "status": "match"|"mismatch", "max_abs_err" (GPU vs mirror),
        "preview": a few values of o from each path}.
    """
    key = _check_args(n, d, causal, padding, heads, seed)
    if not isinstance(outputs, dict) or not all(isinstance(v, bytes) for v in outputs.values()):
        raise TypeError("outputs: expected a dict of {binding name: bytes} read back from the GPU")
    run = _run_cpu(key)
    gpu = flash_wgsl_mirror.decode_outputs(run["spec"], outputs)
    pairs = [
        compare_pair("gpu_vs_mirror", gpu, run["mirror"]),
        compare_pair("gpu_vs_flash_np", gpu, run["flash_np"]),
        compare_pair("mirror_vs_flash_np", run["mirror"], run["flash_np"]),
    ]
    out = _summary(key, run)
    if gpu_ms is not None:
        out["times"]["gpu_ms"] = float(gpu_ms)
    out["pairs"] = pairs
    out["status"] = "match" if all(p["ok"] for p in pairs) else "mismatch"
    out["max_abs_err"] = pairs[0]["max_abs"]
    out["preview"] = _preview(n, {"gpu": gpu, "mirror": run["mirror"], "flash_np": run["flash_np"]})
    return out
