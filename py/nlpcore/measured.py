"""Measurements recorded on real hardware, read the same way in CPython and in Pyodide.

``bench/io_h200.py`` records the paper's Figure 2 on an NVIDIA H200 into
``bench/results/io_h200.json``: runtime (CUDA events) and HBM bytes (Nsight Compute's
``dram__bytes_read.sum + dram__bytes_write.sum`` over every kernel of one training step) of the
PyTorch baseline, our Triton kernel and PyTorch SDPA's backends, with the IO model's prediction
beside each row. build.py's wheel carries the record as ``nlpcore/_results/io_h200.json``, so
Python inside the page (which has no repository) reads the very same file. Lookup order: the
copy inside an installed wheel, then the repository checkout.

Nothing here measures: it only reads the record and names its numbers.
"""
from __future__ import annotations

import json
import pathlib
from typing import List, Optional

from .kernels import io_model

PACKAGED = pathlib.Path(__file__).resolve().parent / "_results"  # inside the wheel
REPOSITORY = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results"  # py/nlpcore/ -> repo
IO_H200 = "io_h200.json"
FIGURE2_IMPLS = ("baseline", "triton", "sdpa_flash", "sdpa_cudnn", "triton_p0", "sdpa_cudnn_p0")


def record(name: str = IO_H200) -> Optional[dict]:
    """The recorded JSON ``name`` as a dict, or None when neither the wheel nor the checkout
    holds it."""
    for folder in (PACKAGED, REPOSITORY):
        path = folder / name
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def _row_summary(row: dict) -> dict:
    model = row.get("model_bytes", {})
    out = {"runtime_ms": row.get("runtime_ms"), "counted_gflops": row.get("counted_gflops"),
           "model_gb": (model.get("baseline_passes") or model.get("flash_sram") or 0) / 1e9,
           "model_l2_gb": model["flash_l2"] / 1e9 if "flash_l2" in model else None}
    if "hbm_bytes" in row:
        out.update(hbm_gb=row["hbm_bytes"] / 1e9, hbm_read_gb=row["hbm_read_bytes"] / 1e9,
                   hbm_write_gb=row["hbm_write_bytes"] / 1e9, kernels=row.get("kernels"))
    else:
        out.update(hbm_gb=None, hbm_read_gb=None, hbm_write_gb=None, kernels=None)
    if "error" in row:
        out["error"] = row["error"]
    return out


def figure2_h200(rec: Optional[dict] = None) -> Optional[dict]:
    """The Figure 2 setting as measured on the H200: ``{impl: {runtime_ms, hbm_gb, hbm_read_gb,
    hbm_write_gb, model_gb, model_l2_gb, counted_gflops, kernels}}`` for impl in
    FIGURE2_IMPLS (those recorded), plus ``"gpu"`` and ``"command"``; None without a record.

    ``model_gb`` is ``io_model.baseline_bytes`` for the baseline and ``io_model.flash_accesses``
    (causal, Theorem 2's tiles from the H200's SRAM) for the flash kernels; ``model_l2_gb`` the
    latter with M = the L2 cache.
    """
    rec = record() if rec is None else rec
    if rec is None:
        return None
    out = {row["impl"]: _row_summary(row) for row in rec.get("rows", []) if row.get("setting") == "figure2"}
    env = rec.get("environment", {})
    out["gpu"] = env.get("gpu", "unknown GPU")
    out["command"] = env.get("command", "")
    out["date_utc"] = env.get("date_utc", "")
    return out


def sweep_h200(rec: Optional[dict] = None) -> List[dict]:
    """Every measured row (Figure 2 and the sweep) as plain dicts: impl, n, d, batch, heads and
    the numbers of :func:`figure2_h200`'s rows; [] without a record."""
    rec = record() if rec is None else rec
    if rec is None:
        return []
    rows = []
    for row in rec.get("rows", []):
        summary = _row_summary(row)
        summary.update({key: row[key] for key in ("setting", "impl", "n", "d", "batch", "heads")})
        rows.append(summary)
    return rows


def as_dict() -> dict:
    """The numbers pages quote, by name (build.py stamps them as ``{{measured.<name>}}``): the
    Figure 2 model (``io_model.figure2()``) and, when recorded, the H200 measurement."""
    fig = io_model.figure2()
    values = {
        "model_standard_gb": "%.1f" % fig["standard_gb"],
        "model_flash_gb": "%.1f" % fig["flash_gb"],
        "model_baseline_gb": "%.1f" % fig["baseline_standard_gb"],
        "model_baseline_flash_gb": "%.1f" % fig["baseline_flash_gb"],
        "model_baseline_ratio": "%.1f" % fig["baseline_ratio"],
        "paper_standard_gb": "%g" % fig["paper_standard_gb"],
        "paper_flash_gb": "%g" % fig["paper_flash_gb"],
        "paper_ratio": "%.1f" % fig["paper_ratio"],
        "paper_speedup": "%.1f" % (fig["paper"]["standard_ms"] / fig["paper"]["flash_ms"]),
    }
    h200 = figure2_h200()
    recorded = bool(h200 and "baseline" in h200 and "triton" in h200
                    and h200["baseline"].get("hbm_gb") and h200["triton"].get("hbm_gb"))
    values["h200_recorded"] = "yes" if recorded else "no"
    if recorded:
        base, ours = h200["baseline"], h200["triton"]
        values.update({
            "h200_gpu": h200["gpu"],
            "h200_baseline_gb": "%.1f" % base["hbm_gb"],
            "h200_triton_gb": "%.2f" % ours["hbm_gb"],
            "h200_traffic_ratio": "%.1f" % (base["hbm_gb"] / ours["hbm_gb"]),
            "h200_baseline_ms": "%.1f" % base["runtime_ms"],
            "h200_triton_ms": "%.2f" % ours["runtime_ms"],
            "h200_speedup": "%.1f" % (base["runtime_ms"] / ours["runtime_ms"]),
            "h200_triton_model_gb": "%.2f" % ours["model_gb"],
        })
    else:
        for name in ("h200_gpu", "h200_baseline_gb", "h200_triton_gb", "h200_traffic_ratio", "h200_baseline_ms",
                     "h200_triton_ms", "h200_speedup", "h200_triton_model_gb"):
            values[name] = "not recorded"
    return values


__all__ = ["FIGURE2_IMPLS", "as_dict", "figure2_h200", "record", "sweep_h200"]
