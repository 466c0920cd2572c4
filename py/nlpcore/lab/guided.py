"""The 60-minute lab F08.01, "FlashAttention: Exact Attention That Respects the Memory
Hierarchy" (browser): twelve steps on lab.html that cycle predict -> run -> measure -> explain
over the lab page's comparison, the visualizer, the IO model and a timing of the learner's own
GPU, and find where tiling wins and where it loses (small M, small N).

The page (site/js/lab-steps.js) renders :func:`export` and asks :func:`check` for a verdict,
passing what it observed: the last ``lab:compared`` detail (``status``, ``maxAbsErr``,
``params``, ``plan``) and, once the learner has timed the shaders, ``timing`` =
``{"adapter", "d", "rows": [{"n", "tiled_ms", "naive_ms"}]}``. Every true answer is computed at
check time -- from the library (the trace of ``flash_np.forward``, ``io_model``'s closed forms,
``tiling.plan``) or from what the page observed -- never typed in as a constant.

Answers are strictly typed: an ``integer`` answer is an int or a string of digits (never a
bool, never 1.9); a ``number`` is an int, a float or a numeric string (never a bool, NaN or
infinity); a ``choice`` is the index of one of the choices. An observed ``mismatch`` (or
``error``) never makes an answer right.
"""
from __future__ import annotations

import math
import re
from typing import Optional

import numpy as np

from .. import hardware
from ..kernels import io_model
from ..kernels.tiling import KEY_STEP, WEBGPU_DEFAULT_STORAGE, bytes_needed

TITLE = "FlashAttention: Exact Attention That Respects the Memory Hierarchy"
CODE = "F08.01"
TIER = "browser"
MINUTES = 60

# The visualizer setting of the causal-skip step (visualizer.html?n=24&d=4&m=64&causal=1).
VIZ_N, VIZ_D, VIZ_M = 24, 4, 64
# The IO-model step: the paper's M (an A100 SM's 192 KB of L1 + shared memory, in fp16).
IO_N, IO_D, IO_M = 4096, 64, hardware.A100_SRAM_FP16_ELEMENTS
# The small-M step: the smallest power of two M at which tiling moves less than standard.
SMALL_M_N, SMALL_M_D = 256, 64
TILE_D = 32  # the tile-bytes step
REFUSE_D = 1024  # the refusal step
TIMING_SIZES = (64, 256, 1024)  # the timing widget's default sequence lengths
TIMING_D = 64
NUMBER_RTOL = 0.05  # "within 5 %" for measured numbers

OK_STATUSES = ("match", "no-webgpu")  # a comparison whose numbers may be copied


def _choice(text, why):
    return {"text": text, "why": why}


STEPS = (
    {"id": "predict-agree", "kind": "Predict", "title": "Predict: how close will the GPU come?",
     "minutes": 3,
     "do": ("Before reading the comparison above, predict. The WGSL shader on your GPU and its "
            "NumPy mirror run the same float32 operations in the same order, on the same tile "
            "plan; `flash_np` runs the same algorithm with other tile sizes. Tiling changes the "
            "*order* of the additions in every row sum, and the rescaling factors "
            "e^(m_old − m_new) change how each summand is rounded; in exact arithmetic the "
            "result is the same (Theorem 1 of the paper proves the output exact), in float32 it "
            "is close, not equal."),
     "question": "How far apart will the GPU's output and the mirror's be (largest |Δ|)?",
     "answer": {"kind": "choice", "choices": [
         _choice("Exactly 0: the same operations give the same bits.",
                 "Same operations, but not the same bits: the GPU's exp() is its own "
                 "approximation and it may fuse a·b + c into one rounding (an FMA)."),
         _choice("About 1e-7 to 1e-6: a few float32 roundings apart.",
                 None),
         _choice("About 1e-3: float32 is not precise enough for attention.",
                 "float32 carries about 7 decimal digits; one rounding of a number near 1 is "
                 "about 6e-8. Errors of 1e-3 would mean a bug, not rounding."),
         _choice("Large: tiling approximates softmax.",
                 "Tiling with the online softmax is exact: the running max and sum are "
                 "rescaled, not approximated (Theorem 1)."),
     ], "right": 1}},
    {"id": "run-compare", "kind": "Run", "title": "Run: read the verdict", "minutes": 4,
     "do": ("The comparison above runs once with its default settings as soon as Python is "
            "ready (press **Run and compare** to run it again). Python, in a Web Worker, runs "
            "`flash_np` and the NumPy mirror of the shader; WebGPU runs `wgsl/flash_fwd.wgsl` on "
            "your GPU; the page compares all three within a stated tolerance. Without WebGPU "
            "the page compares the two CPU paths."),
     "question": "What max |Δ| does the verdict line report (GPU vs mirror, or mirror vs "
                 "flash_np without WebGPU)? Copy the number.",
     "answer": {"kind": "number", "placeholder": "e.g. 3.1e-7"}, "needs": "compare"},
    {"id": "why-not-zero", "kind": "Explain", "title": "Explain: why not zero?", "minutes": 3,
     "do": ("Compare your prediction with the table: the implementations agree to about 1e-7, "
            "not exactly. Each row of the table is a pair of implementations; the tolerance "
            "column says what the page accepts."),
     "question": "Why is max |Δ| not exactly 0?",
     "answer": {"kind": "choice", "choices": [
         _choice("The shader has a bug on the ragged last tile.",
                 "A bug on the ragged tile would give errors of order 1 in those rows, and the "
                 "verdict would read mismatch. Try N = 100 and N = 128: the size of |Δ| does "
                 "not depend on raggedness."),
         _choice("Float32 rounding: the GPU's exp() and fused multiply-adds round differently "
                 "from NumPy, so the same algorithm gives results a few ulps apart.", None),
         _choice("WebGPU computes in float16.",
                 "The shader declares f32 everywhere (it does not enable shader-f16); float16 "
                 "would give differences near 1e-3."),
         _choice("The mirror uses a different tile plan from the shader.",
                 "Both read the same plan from `tiling.plan` (the shader gets it as override "
                 "constants): the page's tile-plan panel shows the one both use."),
     ], "right": 1}},
    {"id": "tile-bytes", "kind": "Run", "title": "Run: the tile plan and workgroup memory",
     "minutes": 5,
     "do": ("Each workgroup is one block of threads (invocations) on one of the GPU's "
            "multiprocessors (Episode 2). Its K and V tiles live in workgroup memory, shared by "
            "its invocations, which WebGPU limits to `maxComputeWorkgroupStorageSize` = %d "
            "bytes by default. Set **d = %d** and run the comparison again. The tile plan "
            "(`nlpcore.kernels.tiling.plan`, computed once in Python and handed to the shader as "
            "`override` constants) picks Br and Bc so that everything fits."
            % (WEBGPU_DEFAULT_STORAGE, TILE_D)),
     "question": "How many bytes of workgroup memory does the plan use for d = %d?" % TILE_D,
     "answer": {"kind": "integer", "unit": "bytes"}, "needs": "compare"},
    {"id": "tile-refuse", "kind": "Predict", "title": "Predict, then run: a head too wide",
     "minutes": 5,
     "do": ("Predict first. The shader keeps each query row's q, its output accumulator and "
            "its statistics m, ℓ in registers; workgroup memory holds only what the rows share: "
            "the staged tiles of K and V (and, for rows wider than 64, partial scores). Keys are "
            "taken %d at a time (one vec4 of scores), so the smallest tile is %d rows of K and "
            "%d of V. At d = %d one float32 row is %d bytes, and the default budget is %d bytes. "
            "Then set **d = %d**, run, and read what the page says."
            % (KEY_STEP, KEY_STEP, KEY_STEP, REFUSE_D, 4 * REFUSE_D, WEBGPU_DEFAULT_STORAGE,
               REFUSE_D)),
     "question": "What happens at d = %d?" % REFUSE_D,
     "answer": {"kind": "choice", "choices": [
         _choice("The plan refuses before anything is dispatched, and says why.", None),
         _choice("The plan shrinks the tiles until they fit, and the shader runs slower.", None),
         _choice("The shader runs and the GPU spills workgroup memory to HBM.", None),
     ]}, "needs": "compare"},
    {"id": "causal-skip", "kind": "Predict", "title": "Predict, then count: skipped tiles",
     "minutes": 6,
     "do": ("With a causal mask, query i sees keys j ≤ i, so tiles entirely above the diagonal "
            "need not be loaded at all. For N = %d, d = %d and M = %d, the paper's rule gives "
            "Bc = ⌈M/4d⌉ and Br = min(Bc, d). Work out the tile grid and predict how many tiles "
            "lie entirely above the diagonal; then open the [visualizer with these settings]"
            "(visualizer.html?n=%d&d=%d&m=%d&causal=1) and step through the forward pass to "
            "count the tiles it marks skipped."
            % (VIZ_N, VIZ_D, VIZ_M, VIZ_N, VIZ_D, VIZ_M)),
     "question": "How many tiles does the causal forward pass skip?",
     "answer": {"kind": "integer", "unit": "tiles"}},
    {"id": "io-ratio", "kind": "Measure", "title": "Measure: HBM traffic with the paper's M",
     "minutes": 6,
     "do": ("Standard attention's forward makes 4N² + 4Nd HBM accesses (elements): S written "
            "and read, P written and read, plus Q, K, V and O. The tiled forward (Algorithm 1) "
            "reads K and V once, but re-reads and rewrites Q_i, O_i, ℓ_i, m_i in every one of "
            "its T_c = ⌈N/B_c⌉ passes: N·d + 2N to initialise O, ℓ, m, then 2N·d for K and V, "
            "T_c·N·(2d + 2) reads and T_c·N·(d + 2) writes, and 3N for lse. **Round T_c up**: a "
            "partial key block still costs a whole pass. (The shortcut (4Nd/M)·3Nd drops the "
            "rounding and the small terms, and is off by more than 5%% here.) Take N = %d, "
            "d = %d and the paper's M = %d fp16 elements, and use Episode 3's formula or "
            "Episode 2's roofline cell, which prints both counts." % (IO_N, IO_D, IO_M)),
     "question": "How many times fewer HBM accesses does the tiled forward make than standard "
                 "attention? (within 5%)",
     "answer": {"kind": "number", "unit": "×"}},
    {"id": "small-m", "kind": "Measure", "title": "Where tiling loses: small M", "minutes": 6,
     "do": ("The tiled kernel saves traffic only when a tile is large enough: each of its T_c "
            "passes re-reads Q and O, and T_c ≈ 4Nd/M grows as the SRAM M shrinks. Episode 3 "
            "says it wins by about M/3d². Take N = %d and d = %d, and use Episode 2's roofline "
            "cell (it prints the standard and the tiled HBM elements) for M = 1024, 2048, 4096, "
            "… Predict the crossover from M/3d² first." % (SMALL_M_N, SMALL_M_D)),
     "question": "What is the smallest power of two M (in elements) at which the tiled forward "
                 "moves fewer HBM elements than standard attention, for N = %d, d = %d?"
                 % (SMALL_M_N, SMALL_M_D),
     "answer": {"kind": "integer", "unit": "elements"}},
    {"id": "time-it", "kind": "Measure", "title": "Measure: tiled vs naive on your GPU",
     "minutes": 7,
     "do": ("Now time it. **Time the shaders** (just below) runs the tiled shader and the "
            "naive one (`wgsl/attention_naive.wgsl`, three passes that write the N×N scores to "
            "global memory and read them back) on your GPU, one head, d = %d, at the sequence "
            "lengths you list. On a "
            "machine with a real GPU add 4096 and 8192; on a CPU adapter (SwiftShader, "
            "llvmpipe) keep N small, it is slow. Before you run, predict at which N the tiled "
            "shader starts to win." % TIMING_D),
     "question": "At the largest N you timed, how many times faster was the tiled shader "
                 "(naive ms / tiled ms)? Copy it from the timing table.",
     "answer": {"kind": "number", "unit": "×"}, "needs": "timing",
     "timing": {"sizes": list(TIMING_SIZES), "d": TIMING_D}},
    {"id": "small-n", "kind": "Explain", "title": "Where tiling loses: small N", "minutes": 5,
     "do": ("Look at the smallest N in your timing table. A tiled dispatch has only ⌈N/Br⌉ "
            "workgroups per head — at N = 64 that is one or two, on a GPU with dozens of "
            "multiprocessors — and the naive shader's small S fits in the GPU's caches, so "
            "there is no HBM traffic to save. On a CPU adapter, \"workgroup memory\" and "
            "\"global memory\" are the same cached RAM: tiling saves nothing slow at any N."),
     "question": "At the smallest N you timed, which shader was faster on your GPU?",
     "answer": {"kind": "choice", "choices": [
         _choice("The tiled shader.", None),
         _choice("The naive shader (or they took the same time).", None),
     ]}, "needs": "timing"},
    {"id": "memory-bound", "kind": "Explain", "title": "Explain: why fewer bytes means faster",
     "minutes": 5,
     "do": ("The paper's Figure 2 shows FlashAttention doing more FLOPs than standard attention "
            "(it recomputes P in the backward pass) yet running faster. Use the roofline of "
            "Episode 2: a kernel doing about one operation per byte it moves sits far below the "
            "ridge point π/β."),
     "question": "What kind of operation is standard attention's softmax on a GPU?",
     "answer": {"kind": "choice", "choices": [
         _choice("Compute-bound: the GPU is busy with the matmuls either way.",
                 "The matmuls are, but softmax does a few operations per element it reads "
                 "and writes (intensity ≈ 1 FLOP/byte), far below the ridge of about 200: "
                 "its time is the time to move S and P."),
         _choice("Memory-bound: time goes to moving S and P through HBM, which the tiled "
                 "kernel never writes.", None),
         _choice("Latency-bound: kernel launches dominate.",
                 "Launch overhead is microseconds; at N = 4096 softmax moves hundreds of MB "
                 "per batch through HBM, which takes far longer."),
     ], "right": 1}},
    {"id": "fraction-of-peak", "kind": "Explain", "title": "Explain: how far from the peak?",
     "minutes": 5,
     "do": ("A TFLOP/s figure means little without the chip's peak. The tiled shader does "
            "4·N²·d floating-point operations per head (two matrix products of 2·N²·d each). "
            "Compute your tiled shader's GFLOP/s at the largest N you timed, from the timing "
            "table's milliseconds. WGSL has no access to tensor cores, so its ceiling is the "
            "GPU's float32 peak (an H200's: %s TFLOP/s; Episode 2's table has the others)."
            % hardware.as_dict()["h200_fp32_tflops"]),
     "question": "How many GFLOP/s did the tiled shader reach at the largest N you timed? "
                 "(within 5%)",
     "answer": {"kind": "number", "unit": "GFLOP/s"}, "needs": "timing"},
)


def export() -> list:
    """The steps as plain data for the page (numbered from 1); choices as their texts only."""
    out = []
    for number, step in enumerate(STEPS, start=1):
        item = {k: v for k, v in step.items() if k != "answer"}
        answer = {k: v for k, v in step["answer"].items() if k not in ("choices", "right")}
        if "choices" in step["answer"]:
            answer["choices"] = [c["text"] for c in step["answer"]["choices"]]
        item["answer"] = answer
        item["number"] = number
        out.append(item)
    return out


def _step(step_id: str) -> dict:
    for step in STEPS:
        if step["id"] == step_id:
            return step
    raise ValueError("step must be one of %s, got %r" % ([s["id"] for s in STEPS], step_id))


# ---- strictly typed answers ----------------------------------------------------------------

_INTEGER = re.compile(r"^[+-]?\d+$")


def _integer(answer) -> Optional[int]:
    """An int, or a string of digits; None for anything else (bools, 1.9, "1.9", "2e3")."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int):
        return answer
    if isinstance(answer, str):
        text = answer.strip().replace(",", "").replace("_", "")
        return int(text) if _INTEGER.match(text) else None
    return None


def _number(answer) -> Optional[float]:
    """A finite int/float or numeric string ("7.1", "7.1×", "3e-7"); None otherwise (bools too)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)):
        value = float(answer)
    elif isinstance(answer, str):
        text = answer.strip().replace(",", "").rstrip("×xX").strip()
        try:
            value = float(text)
        except ValueError:
            return None
    else:
        return None
    return value if math.isfinite(value) else None


def _choice_index(answer, count: int) -> Optional[int]:
    index = _integer(answer)
    return index if index is not None and 0 <= index < count else None


# ---- truths computed from the library --------------------------------------------------------

def skipped_tiles(n: int, d: int, sram_elems: int) -> int:
    """Tiles the causal forward of flash_np skips, counted from its trace."""
    from ..kernels import flash_np
    br, bc = io_model.block_sizes(sram_elems, d)
    x = np.random.RandomState(0).randn(n, d)
    events = []
    flash_np.forward(x, x, x, causal=True, block_q=br, block_k=bc, trace=events)
    return sum(1 for e in events if e.get("op") == "skip")


def io_ratio() -> float:
    """Standard / tiled forward HBM accesses at (IO_N, IO_D, IO_M), from io_model's closed forms."""
    return (io_model.standard_accesses(IO_N, IO_N, IO_D)
            / float(io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M)))


def io_ratio_shortcut() -> float:
    """The same ratio with the shortcut (4Nd/M)·3Nd for the tiled count (no rounding)."""
    standard = io_model.standard_accesses(IO_N, IO_N, IO_D)
    return standard / (4.0 * IO_N * IO_D / IO_M * 3 * IO_N * IO_D)


def smallest_winning_m(n: int = SMALL_M_N, d: int = SMALL_M_D) -> int:
    """The smallest power of two M at which io_model's tiled forward count is below standard's."""
    standard = io_model.standard_accesses(n, n, d)
    m = 16
    while io_model.flash_accesses(n, n, d, m) >= standard:
        m *= 2
        if m > (1 << 24):
            raise ValueError("no M up to 2^24 makes the tiled kernel win at N=%d, d=%d" % (n, d))
    return m


def plan_refuses(d: int = REFUSE_D) -> bool:
    """Whether tiling.plan refuses head dimension d (float32) within WebGPU's default limit."""
    from ..kernels import tiling
    try:
        tiling.plan(d)
    except ValueError:
        return True
    return False


# ---- verdicts --------------------------------------------------------------------------------

def _verdict(ok: bool, message: str) -> dict:
    return {"status": "pass" if ok else "fail", "message": message}


def _timing_rows(observed) -> Optional[list]:
    timing = observed.get("timing") if isinstance(observed, dict) else None
    rows = timing.get("rows") if isinstance(timing, dict) else None
    if not isinstance(rows, list):
        return None
    good = [r for r in rows if isinstance(r, dict)
            and all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                    and r.get(k) > 0 for k in ("n", "tiled_ms", "naive_ms"))]
    return sorted(good, key=lambda r: r["n"]) or None


def _close(value: float, truth: float) -> bool:
    return abs(value - truth) <= NUMBER_RTOL * abs(truth)


def _check_choice(spec: dict, picked: int, right: int, explain: str = "") -> dict:
    choices = spec["answer"]["choices"]
    if picked == right:
        return _verdict(True, "Right: " + choices[right]["text"] + (" " + explain if explain else ""))
    why = choices[picked]["why"]
    return _verdict(False, "Not this one. " + (why or "Read the step again and compare with "
                                                      "what the page shows."))


def _needs_compare(observed) -> Optional[dict]:
    if not isinstance(observed, dict) or observed.get("status") in (None, "running"):
        return _verdict(False, "Run the comparison first: this answer is checked against what "
                               "the run reported.")
    return None


def check(step: str, answer=None, observed: Optional[dict] = None) -> dict:
    """Check one guided-lab answer against the truth computed now.

    ``observed`` is what the page saw (module docstring). Returns {"status": "pass"|"fail",
    "message"}; the message says what is right, or why not, without giving the number away.
    """
    spec = _step(step)
    kind = spec["answer"]["kind"]
    if kind == "choice":
        picked = _choice_index(answer, len(spec["answer"]["choices"]))
        if picked is None:
            return _verdict(False, "Pick one of the %d answers." % len(spec["answer"]["choices"]))
    elif kind == "integer":
        value = _integer(answer)
        if value is None:
            return _verdict(False, "Enter a whole number (digits only), got %r." % (answer,))
    else:
        value = _number(answer)
        if value is None:
            return _verdict(False, "Enter a number, got %r." % (answer,))
    if step in ("predict-agree", "why-not-zero", "memory-bound"):
        return _check_choice(spec, picked, spec["answer"]["right"])
    if step == "run-compare":
        return _check_run_compare(value, observed)
    if step == "tile-bytes":
        return _check_tile_bytes(value, observed)
    if step == "tile-refuse":
        return _check_tile_refuse(spec, picked, observed)
    if step == "causal-skip":
        return _check_causal_skip(value)
    if step == "io-ratio":
        return _check_io_ratio(value)
    if step == "small-m":
        return _check_small_m(value)
    if step in ("time-it", "small-n", "fraction-of-peak"):
        rows = _timing_rows(observed)
        if rows is None:
            return _verdict(False, "Time the shaders first (the timing panel below the steps): "
                                   "this answer is checked against your own measurement.")
        if step == "time-it":
            truth = rows[-1]["naive_ms"] / rows[-1]["tiled_ms"]
            ok = _close(value, truth)
            return _verdict(ok, ("%.2f× at N = %d: %s." % (
                truth, rows[-1]["n"], "tiling wins there" if truth > 1 else
                "tiling does not win here; keep the number for the next step")) if ok else
                "%g× is not the ratio naive ms / tiled ms in the last row of your timing "
                "table (within 5%%)." % value)
        if step == "small-n":
            first = rows[0]
            right = 0 if first["tiled_ms"] < first["naive_ms"] else 1
            if picked == right:
                return _verdict(True, "Right: at N = %d, tiled %.3g ms, naive %.3g ms. %s" % (
                    first["n"], first["tiled_ms"], first["naive_ms"],
                    "Even here tiling won on your GPU; compare the ratio with the large-N one: "
                    "the gap grows with N, as S grows as N²." if right == 0 else
                    "Too few workgroups to fill the GPU, and nothing in HBM to save: small N "
                    "is where tiling loses."))
            return _verdict(False, "Not what your timing table shows: compare the two "
                                   "milliseconds in its first row.")
        last = rows[-1]
        truth = 4.0 * last["n"] ** 2 * TIMING_D / (last["tiled_ms"] * 1e-3) / 1e9
        ok = _close(value, truth)
        h200 = hardware.GPUS["H200"].fp32_flops
        return _verdict(ok, ("%.3g GFLOP/s at N = %d. Your GPU's own float32 peak is on its "
                             "datasheet; for scale, this is %.2g%% of an H200's, the ceiling "
                             "for any WGSL kernel there." % (
                                 truth, last["n"], 100 * truth * 1e9 / h200)) if ok else
                        "%g GFLOP/s is not 4·N²·d / t for the last row of your timing table "
                        "(t in seconds, within 5%%)." % value)
    raise ValueError("step %r has no checker" % step)


def _check_run_compare(value: float, observed) -> dict:
    missing = _needs_compare(observed)
    if missing:
        return missing
    status = observed.get("status")
    if status not in OK_STATUSES:
        return _verdict(False, "The last run did not pass (status: %s%s). A mismatch is never "
                               "the right answer: fix the inputs or reload, and run again."
                        % (status, ": " + str(observed.get("error")) if observed.get("error") else ""))
    truth = observed.get("maxAbsErr")
    if isinstance(truth, bool) or not isinstance(truth, (int, float)):
        return _verdict(False, "The last run reported no max |Δ|; run it again.")
    ok = abs(value - truth) <= max(1e-12, NUMBER_RTOL * abs(truth))
    return _verdict(ok, ("The run reported max |Δ| = %.3g (%s): a few float32 roundings, well "
                         "inside the tolerance." % (truth, status)) if ok else
                    "%.3g is not the max |Δ| in the verdict line above the table (within 5%%)."
                    % value)


def _check_tile_bytes(value: int, observed) -> dict:
    missing = _needs_compare(observed)
    if missing:
        return missing
    params = observed.get("params") or {}
    d = params.get("d")
    if isinstance(d, bool) or not isinstance(d, (int, float)) or int(d) != TILE_D:
        return _verdict(False, "Run the comparison with d = %d first (the last run used d = %s)."
                        % (TILE_D, d))
    if observed.get("status") not in OK_STATUSES:
        return _verdict(False, "The run with d = %d did not pass (status: %s); run it again."
                        % (TILE_D, observed.get("status")))
    from ..kernels import tiling
    plan = tiling.plan(TILE_D)
    seen = (observed.get("plan") or {}).get("bytes_used")
    truth = plan.bytes_used if seen is None else seen
    ok = value == truth
    return _verdict(ok, ("%d of the %d bytes WebGPU allows by default (Br = %d, Bc = %d): "
                         "one workgroup's tiles, shared by its %d invocations."
                         % (truth, WEBGPU_DEFAULT_STORAGE, plan.br, plan.bc, plan.workgroup_size))
                    if ok else
                    "%d bytes is not the plan's figure: read the tile-plan panel (workgroup "
                    "memory used) after the run with d = %d." % (value, TILE_D))


def _check_tile_refuse(spec: dict, picked: int, observed) -> dict:
    missing = _needs_compare(observed)
    if missing:
        return missing
    d = (observed.get("params") or {}).get("d")
    if isinstance(d, bool) or not isinstance(d, (int, float)) or int(d) != REFUSE_D:
        return _verdict(False, "Run the comparison with d = %d first (the last run used d = %s)."
                        % (REFUSE_D, d))
    refuses = plan_refuses(REFUSE_D)
    right = 0 if refuses else 1
    if picked == right:
        return _verdict(True, "Right. " + (
            "The plan checks the budget before any dispatch: even the smallest tiles (%d keys "
            "of K and of V) need %d bytes at d = %d, over the %d-byte limit, so the page shows "
            "the reason instead of running."
            % (KEY_STEP, bytes_needed(1, KEY_STEP, REFUSE_D, REFUSE_D, 4), REFUSE_D,
               WEBGPU_DEFAULT_STORAGE)
            if refuses else "The plan fits by shrinking the tiles."))
    if picked == 2:
        return _verdict(False, "Workgroup memory cannot spill: a pipeline that declares more "
                               "than the device's limit is refused by WebGPU. Read the message "
                               "the page printed.")
    return _verdict(False, "Not what the page reported: read the message under the verdict.")


def _check_causal_skip(value: int) -> dict:
    truth = skipped_tiles(VIZ_N, VIZ_D, VIZ_M)
    br, bc = io_model.block_sizes(VIZ_M, VIZ_D)
    total = -(-VIZ_N // br) * -(-VIZ_N // bc)
    ok = value == truth
    return _verdict(ok, ("%d of %d tiles (Br = %d, Bc = %d) lie entirely above the diagonal. "
                         "The diagonal tiles are computed in full and masked, so causal "
                         "attention does a little more than half the work, not half."
                         % (truth, total, br, bc)) if ok else
                    "%d is not the number of tiles the visualizer marks skipped; check your "
                    "Br and Bc, then count the tiles strictly above the diagonal." % value)


def _check_io_ratio(value: float) -> dict:
    truth = io_ratio()
    br, bc = io_model.block_sizes(IO_M, IO_D)
    if _close(value, truth):
        return _verdict(True, "%.2f×: standard %d vs tiled %d accesses (Bc = %d, so Q and O are "
                              "swept T_c = %d times)." % (
                                  truth, io_model.standard_accesses(IO_N, IO_N, IO_D),
                                  io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M), bc,
                                  math.ceil(IO_N / bc)))
    if _close(value, io_ratio_shortcut()):
        return _verdict(False, "That is the shortcut (4Nd/M)·3Nd, without rounding T_c up and "
                               "without the smaller terms; count T_c = ⌈N/B_c⌉ passes exactly.")
    return _verdict(False, "%g× is more than 5%% away from the exact count's ratio; check B_c "
                           "and T_c = ⌈N/B_c⌉." % value)


def _check_small_m(value: int) -> dict:
    truth = smallest_winning_m()
    standard = io_model.standard_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D)
    if value == truth:
        return _verdict(True, "M = %d: tiled %d < standard %d elements; at M = %d the tiled "
                              "kernel moves %d. 3d² = %d: the rule of thumb M ≫ 3d² holds." % (
                                  truth, io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, truth),
                                  standard, truth // 2,
                                  io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, truth // 2),
                                  3 * SMALL_M_D ** 2))
    if value <= 0 or value & (value - 1):
        return _verdict(False, "%d is not a power of two." % value)
    wins = io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, value) < standard
    return _verdict(False, ("At M = %d the tiled kernel already wins, but a smaller M does too."
                            if wins else "At M = %d the tiled kernel still moves more than "
                            "standard attention.") % value)
