"""The guided lab (lab.html, about 60 minutes): numbered steps that use the in-page comparison,
the visualizer and the IO model, each ending in a question whose answer is checked here.

The page (site/js/lab-steps.js) renders :func:`export` and asks :func:`check` for a verdict,
passing what it observed (the ``lab:compared`` event's detail) where a step needs it. Every true
answer is computed from the library at check time -- the trace of ``flash_np.forward``, the
closed forms of ``io_model`` -- never typed in as a constant.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .. import hardware
from ..kernels import io_model

# The visualizer setting of the causal-skip step (visualizer.html?n=24&d=4&m=64&causal=1).
VIZ_N, VIZ_D, VIZ_M = 24, 4, 64
# The IO-model step.
IO_N, IO_D, IO_M = 4096, 64, hardware.A100_SRAM_FP16_ELEMENTS
TILE_D = 32

WHY_CHOICES = (
    "The shader has a bug on the ragged last tile.",
    "Float32 rounding: the GPU's exp() and fused multiply-adds round differently from NumPy, "
    "so the same algorithm gives results a few ulps apart.",
    "WebGPU computes in float16.",
    "The mirror uses a different tile plan from the shader.",
)
WHY_ANSWER = 1

BOUND_CHOICES = (
    "Compute-bound: the GPU is busy with the matmuls either way.",
    "Memory-bound: time goes to moving S and P through HBM, which the tiled kernel never writes.",
    "Latency-bound: kernel launches dominate.",
)
BOUND_ANSWER = 1

STEPS = (
    {"id": "run-compare", "title": "Run the comparison",
     "do": ("The comparison above runs once with its default settings as soon as Python is "
            "ready (press **Run and compare** to run it again). Python (in a "
            "Web Worker) runs `flash_np` and the NumPy mirror of the shader; WebGPU runs "
            "`wgsl/flash_fwd.wgsl`; the page compares them."),
     "question": "What max |Δ| (GPU vs mirror, or mirror vs flash_np without WebGPU) does the "
                 "verdict report? Copy the number.",
     "answer": {"kind": "number", "placeholder": "e.g. 3.1e-7"}, "needs": "compare"},
    {"id": "why-not-zero", "title": "Why is it not zero?",
     "do": "Look at the numbers in the results table: the implementations agree to about "
           "1e-7, not exactly.",
     "question": "Why is max |Δ| not exactly 0?",
     "answer": {"kind": "choice", "choices": list(WHY_CHOICES)}},
    {"id": "tile-bytes", "title": "The tile plan and workgroup memory",
     "do": ("Set **d = %d** and run the comparison again. The tile plan (computed once, in "
            "Python, by `nlpcore.kernels.tiling.plan`) picks Br and Bc so the shader's "
            "workgroup arrays fit WebGPU's default `maxComputeWorkgroupStorageSize` of 16384 "
            "bytes." % TILE_D),
     "question": "How many bytes of workgroup memory does the plan use for d = %d?" % TILE_D,
     "answer": {"kind": "number", "unit": "bytes"}, "needs": "compare"},
    {"id": "causal-skip", "title": "Skipped tiles in the visualizer",
     "do": ("Open the [visualizer with N = %d, d = %d, M = %d, causal](visualizer.html?n=%d&d=%d"
            "&m=%d&causal=1) and step through the forward pass. Tiles entirely above the "
            "diagonal are never loaded." % (VIZ_N, VIZ_D, VIZ_M, VIZ_N, VIZ_D, VIZ_M)),
     "question": "How many tiles does the forward pass skip?",
     "answer": {"kind": "number", "unit": "tiles"}},
    {"id": "io-ratio", "title": "The IO model",
     "do": ("Standard attention makes 4N² + 4Nd HBM accesses in the forward pass; the tiled "
            "kernel makes about (4Nd/M)·3Nd. Use the IO model (the episode cells on the module "
            "page, or `io_model.flash_accesses` in Python) for N = %d, d = %d, M = %d "
            "elements." % (IO_N, IO_D, IO_M)),
     "question": "How many times fewer HBM accesses does FlashAttention's forward make than "
                 "standard attention? (within 5%)",
     "answer": {"kind": "number", "unit": "×"}},
    {"id": "memory-bound", "title": "Why fewer bytes means faster",
     "do": "The paper's Figure 2 shows FlashAttention doing more FLOPs (it recomputes) yet "
           "running faster than standard attention.",
     "question": "What kind of operation is standard attention's softmax on a GPU?",
     "answer": {"kind": "choice", "choices": list(BOUND_CHOICES)}},
)


def export() -> list:
    """The steps as plain data for the page (numbered from 1)."""
    out = []
    for number, step in enumerate(STEPS, start=1):
        item = dict(step)
        item["number"] = number
        item["answer"] = dict(step["answer"])
        out.append(item)
    return out


def _step(step_id: str) -> dict:
    for step in STEPS:
        if step["id"] == step_id:
            return step
    raise ValueError("step must be one of %s, got %r" % ([s["id"] for s in STEPS], step_id))


def _number(answer) -> Optional[float]:
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)):
        return float(answer)
    if isinstance(answer, str):
        try:
            return float(answer.strip().replace("×", "").replace(",", ""))
        except ValueError:
            return None
    return None


def skipped_tiles(n: int, d: int, sram_elems: int) -> int:
    """Tiles the causal forward of flash_np skips, counted from its trace."""
    from ..kernels import flash_np
    br, bc = io_model.block_sizes(sram_elems, d)
    x = np.random.RandomState(0).randn(n, d)
    events = []
    flash_np.forward(x, x, x, causal=True, block_q=br, block_k=bc, trace=events)
    return sum(1 for e in events if e.get("op") == "skip")


def io_ratio() -> float:
    return (io_model.standard_accesses(IO_N, IO_N, IO_D)
            / float(io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M)))


def _verdict(ok: bool, message: str, expected=None) -> dict:
    out = {"status": "pass" if ok else "fail", "message": message}
    if expected is not None and ok:
        out["expected"] = expected
    return out


def check(step: str, answer=None, observed: Optional[dict] = None) -> dict:
    """Check one guided-lab answer. ``observed`` is the page's last ``lab:compared`` detail.

    Returns {"status": "pass"|"fail", "message"} (the message explains either way).
    """
    spec = _step(step)
    kind = spec["answer"]["kind"]
    if kind == "choice":
        try:
            picked = int(answer)
        except (TypeError, ValueError):
            return _verdict(False, "pick one of the %d answers" % len(spec["answer"]["choices"]))
        right = WHY_ANSWER if step == "why-not-zero" else BOUND_ANSWER
        if picked == right:
            return _verdict(True, "Right: " + spec["answer"]["choices"][right])
        return _verdict(False, "Not quite — think again about what differs between the two "
                               "runs, and reread the step.")
    value = _number(answer)
    if value is None:
        return _verdict(False, "enter a number (got %r)" % (answer,))
    if step in ("run-compare", "tile-bytes"):
        if not isinstance(observed, dict) or observed.get("status") in (None, "running"):
            return _verdict(False, "run the comparison first: the page checks your answer "
                                   "against what the run reported")
        if observed.get("status") == "error":
            return _verdict(False, "the last run ended in an error (%s); fix it and run again"
                            % observed.get("error"))
    if step == "run-compare":
        truth = observed.get("maxAbsErr")
        if not isinstance(truth, (int, float)):
            return _verdict(False, "the last run reported no max |Δ|; run it again")
        ok = abs(value - truth) <= max(1e-12, 0.05 * abs(truth))
        return _verdict(ok, ("The run reported max |Δ| = %.3g (status %s): below float32's "
                             "tolerance." % (truth, observed.get("status"))) if ok else
                        "%.3g is not what the verdict shows (within 5%%): read "
                        "data-max-abs-err again" % value)
    if step == "tile-bytes":
        params = observed.get("params") or {}
        d = params.get("d")
        if d is None or int(d) != TILE_D:
            return _verdict(False, "run the comparison with d = %d first (the last run used "
                                   "d = %s)" % (TILE_D, d))
        plan = observed.get("plan") or {}
        truth = plan.get("bytes_used")
        if truth is None:
            from ..kernels import tiling
            truth = tiling.plan(TILE_D).bytes_used
        ok = abs(value - truth) < 0.5
        return _verdict(ok, ("%d bytes of the 16384 the WebGPU default allows (Br = %s, Bc = %s)"
                             % (truth, plan.get("br"), plan.get("bc"))) if ok else
                        "%g bytes is not the plan's figure: look for the tile bytes" % value)
    if step == "causal-skip":
        truth = skipped_tiles(VIZ_N, VIZ_D, VIZ_M)
        br, bc = io_model.block_sizes(VIZ_M, VIZ_D)
        total = -(-VIZ_N // br) * -(-VIZ_N // bc)
        ok = value == truth
        return _verdict(ok, ("%d of %d tiles (Br = %d, Bc = %d) lie entirely above the "
                             "diagonal, almost half: causal attention does about half the "
                             "work." % (truth, total, br, bc)) if ok else
                        "%g is not the number of skipped tiles; count the tiles marked skipped"
                        % value)
    if step == "io-ratio":
        truth = io_ratio()
        ok = abs(value - truth) <= 0.05 * truth
        return _verdict(ok, ("%.2f×: standard %d vs flash %d accesses (Bc = %d, so Q and O "
                             "are swept %d times)" % (
                                 truth, io_model.standard_accesses(IO_N, IO_N, IO_D),
                                 io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M),
                                 io_model.block_sizes(IO_M, IO_D)[1],
                                 math.ceil(IO_N / io_model.block_sizes(IO_M, IO_D)[1])))
                        if ok else "%g× is more than 5%% away from what the IO model gives"
                        % value)
    raise ValueError("step %r has no checker" % step)
