"""One checker per kind of step, named by the steps' statement files (``checker: <name>``).

A checker takes the step (as statements.read gives it), the answer already parsed to its kind
(answers.parse) and what the page observed, and returns ``{"status": "pass"|"fail", "message"}``;
the message says what is right, or why not, without giving the number away. An observed
``mismatch`` (or ``error``) never makes an answer right.
"""
from __future__ import annotations

import math
from typing import Optional

from ... import hardware
from ...kernels import io_model
from ...kernels.tiling import KEY_STEP, WEBGPU_DEFAULT_STORAGE, bytes_needed
from . import truths
from .settings import (IO_D, IO_M, IO_N, NUMBER_RTOL, OK_STATUSES, REFUSE_D, SMALL_M_D, SMALL_M_N,
                       TILE_D, TIMING_D, VIZ_D, VIZ_M, VIZ_N)


def verdict(ok: bool, message: str) -> dict:
    return {"status": "pass" if ok else "fail", "message": message}


def _close(value: float, truth: float) -> bool:
    return abs(value - truth) <= NUMBER_RTOL * abs(truth)


def _needs_compare(observed) -> Optional[dict]:
    if not isinstance(observed, dict) or observed.get("status") in (None, "running"):
        return verdict(False, "Run the comparison first: this answer is checked against what "
                              "the run reported.")
    return None


def _timing_rows(observed) -> Optional[list]:
    """The learner's timing rows [{n, tiled_ms, naive_ms}] sorted by n, or None."""
    timing = observed.get("timing") if isinstance(observed, dict) else None
    rows = timing.get("rows") if isinstance(timing, dict) else None
    if not isinstance(rows, list):
        return None
    good = [r for r in rows if isinstance(r, dict)
            and all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                    and r.get(k) > 0 for k in ("n", "tiled_ms", "naive_ms"))]
    return sorted(good, key=lambda r: r["n"]) or None


def _needs_timing(checker):
    """Wraps a checker of the learner's own timing: it gets the rows in place of `observed`."""
    def wrapped(spec, value, observed):
        rows = _timing_rows(observed)
        if rows is None:
            return verdict(False, "Time the shaders first (the timing panel below the steps): "
                                  "this answer is checked against your own measurement.")
        return checker(spec, value, rows)
    wrapped.__doc__ = checker.__doc__
    return wrapped


# ---- the checkers --------------------------------------------------------------------------

def choice(spec: dict, picked: int, observed=None) -> dict:
    """A choice whose right answer the statement names."""
    choices = spec["answer"]["choices"]
    right = spec["answer"]["right"]
    if picked == right:
        return verdict(True, "Right: " + choices[right]["text"])
    why = choices[picked]["why"]
    return verdict(False, "Not this one. " + (why or "Read the step again and compare with "
                                                     "what the page shows."))


def run_compare(spec: dict, value: float, observed) -> dict:
    """The max |Δ| the last comparison reported, copied within 5 %."""
    missing = _needs_compare(observed)
    if missing:
        return missing
    status = observed.get("status")
    if status not in OK_STATUSES:
        return verdict(False, "The last run did not pass (status: %s%s). A mismatch is never "
                              "the right answer: fix the inputs or reload, and run again."
                       % (status, ": " + str(observed.get("error")) if observed.get("error") else ""))
    truth = observed.get("maxAbsErr")
    if isinstance(truth, bool) or not isinstance(truth, (int, float)):
        return verdict(False, "The last run reported no max |Δ|; run it again.")
    ok = abs(value - truth) <= max(1e-12, NUMBER_RTOL * abs(truth))
    return verdict(ok, ("The run reported max |Δ| = %.3g (%s): a few float32 roundings, well "
                        "inside the tolerance." % (truth, status)) if ok else
                   "%.3g is not the max |Δ| in the verdict line above the table (within 5%%)."
                   % value)


def _observed_d(observed):
    d = (observed.get("params") or {}).get("d")
    return None if isinstance(d, bool) or not isinstance(d, (int, float)) else int(d)


def tile_bytes(spec: dict, value: int, observed) -> dict:
    """The workgroup bytes of the plan at d = TILE_D, from a passing run at that d."""
    missing = _needs_compare(observed)
    if missing:
        return missing
    d = _observed_d(observed)
    if d != TILE_D:
        return verdict(False, "Run the comparison with d = %d first (the last run used d = %s)."
                       % (TILE_D, (observed.get("params") or {}).get("d")))
    if observed.get("status") not in OK_STATUSES:
        return verdict(False, "The run with d = %d did not pass (status: %s); run it again."
                       % (TILE_D, observed.get("status")))
    from ...kernels import tiling
    plan = tiling.plan(TILE_D)
    seen = (observed.get("plan") or {}).get("bytes_used")
    truth = plan.bytes_used if seen is None else seen
    ok = value == truth
    return verdict(ok, ("%d of the %d bytes WebGPU allows by default (Br = %d, Bc = %d): "
                        "one workgroup's tiles, shared by its %d invocations."
                        % (truth, WEBGPU_DEFAULT_STORAGE, plan.br, plan.bc, plan.workgroup_size))
                   if ok else
                   "%d bytes is not the plan's figure: read the tile-plan panel (workgroup "
                   "memory used) after the run with d = %d." % (value, TILE_D))


def tile_refuse(spec: dict, picked: int, observed) -> dict:
    """What the plan does at d = REFUSE_D, from a run at that d."""
    missing = _needs_compare(observed)
    if missing:
        return missing
    if _observed_d(observed) != REFUSE_D:
        return verdict(False, "Run the comparison with d = %d first (the last run used d = %s)."
                       % (REFUSE_D, (observed.get("params") or {}).get("d")))
    refuses = truths.plan_refuses(REFUSE_D)
    right = 0 if refuses else 1
    if picked == right:
        return verdict(True, "Right. " + (
            "The plan checks the budget before any dispatch: even the smallest tiles (%d keys "
            "of K and of V) need %d bytes at d = %d, over the %d-byte limit, so the page shows "
            "the reason instead of running."
            % (KEY_STEP, bytes_needed(1, KEY_STEP, REFUSE_D, REFUSE_D, 4), REFUSE_D,
               WEBGPU_DEFAULT_STORAGE)
            if refuses else "The plan fits by shrinking the tiles."))
    if picked == 2:
        return verdict(False, "Workgroup memory cannot spill: a pipeline that declares more "
                              "than the device's limit is refused by WebGPU. Read the message "
                              "the page printed.")
    return verdict(False, "Not what the page reported: read the message under the verdict.")


def causal_skip(spec: dict, value: int, observed=None) -> dict:
    """The tiles the causal forward skips at (VIZ_N, VIZ_D, VIZ_M), counted from its trace."""
    truth = truths.skipped_tiles(VIZ_N, VIZ_D, VIZ_M)
    br, bc = io_model.block_sizes(VIZ_M, VIZ_D)
    total = -(-VIZ_N // br) * -(-VIZ_N // bc)
    ok = value == truth
    return verdict(ok, ("%d of %d tiles (Br = %d, Bc = %d) lie entirely above the diagonal. "
                        "The diagonal tiles are computed in full and masked, so causal "
                        "attention does a little more than half the work, not half."
                        % (truth, total, br, bc)) if ok else
                   "%d is not the number of tiles the visualizer marks skipped; check your "
                   "Br and Bc, then count the tiles strictly above the diagonal." % value)


def io_ratio(spec: dict, value: float, observed=None) -> dict:
    """Standard / tiled forward HBM accesses at the paper's M, within 5 %."""
    truth = truths.io_ratio()
    br, bc = io_model.block_sizes(IO_M, IO_D)
    if _close(value, truth):
        return verdict(True, "%.2f×: standard %d vs tiled %d accesses (Bc = %d, so Q and O are "
                             "swept T_c = %d times)." % (
                                 truth, io_model.standard_accesses(IO_N, IO_N, IO_D),
                                 io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M), bc,
                                 math.ceil(IO_N / bc)))
    if _close(value, truths.io_ratio_shortcut()):
        return verdict(False, "That is the shortcut (4Nd/M)·3Nd, without rounding T_c up and "
                              "without the smaller terms; count T_c = ⌈N/B_c⌉ passes exactly.")
    return verdict(False, "%g× is more than 5%% away from the exact count's ratio; check B_c "
                          "and T_c = ⌈N/B_c⌉." % value)


def small_m(spec: dict, value: int, observed=None) -> dict:
    """The smallest power of two M at which tiling moves fewer elements than standard."""
    truth = truths.smallest_winning_m()
    standard = io_model.standard_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D)
    if value == truth:
        return verdict(True, "M = %d: tiled %d < standard %d elements; at M = %d the tiled "
                             "kernel moves %d. 3d² = %d: the rule of thumb M ≫ 3d² holds." % (
                                 truth, io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, truth),
                                 standard, truth // 2,
                                 io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, truth // 2),
                                 3 * SMALL_M_D ** 2))
    if value <= 0 or value & (value - 1):
        return verdict(False, "%d is not a power of two." % value)
    wins = io_model.flash_accesses(SMALL_M_N, SMALL_M_N, SMALL_M_D, value) < standard
    return verdict(False, ("At M = %d the tiled kernel already wins, but a smaller M does too."
                           if wins else "At M = %d the tiled kernel still moves more than "
                           "standard attention.") % value)


@_needs_timing
def time_it(spec: dict, value: float, rows: list) -> dict:
    """naive ms / tiled ms in the last row of the learner's timing table, within 5 %."""
    truth = rows[-1]["naive_ms"] / rows[-1]["tiled_ms"]
    ok = _close(value, truth)
    return verdict(ok, ("%.2f× at N = %d: %s." % (
        truth, rows[-1]["n"], "tiling wins there" if truth > 1 else
        "tiling does not win here; keep the number for the next step")) if ok else
        "%g× is not the ratio naive ms / tiled ms in the last row of your timing "
        "table (within 5%%)." % value)


@_needs_timing
def small_n(spec: dict, picked: int, rows: list) -> dict:
    """Which shader was faster in the first row of the learner's timing table."""
    first = rows[0]
    right = 0 if first["tiled_ms"] < first["naive_ms"] else 1
    if picked == right:
        return verdict(True, "Right: at N = %d, tiled %.3g ms, naive %.3g ms. %s" % (
            first["n"], first["tiled_ms"], first["naive_ms"],
            "Even here tiling won on your GPU; compare the ratio with the large-N one: "
            "the gap grows with N, as S grows as N²." if right == 0 else
            "Too few workgroups to fill the GPU, and nothing in HBM to save: small N "
            "is where tiling loses."))
    return verdict(False, "Not what your timing table shows: compare the two "
                          "milliseconds in its first row.")


@_needs_timing
def fraction_of_peak(spec: dict, value: float, rows: list) -> dict:
    """4·N²·d / t at the last row of the learner's timing table, in GFLOP/s, within 5 %."""
    last = rows[-1]
    truth = 4.0 * last["n"] ** 2 * TIMING_D / (last["tiled_ms"] * 1e-3) / 1e9
    ok = _close(value, truth)
    h200 = hardware.GPUS["H200"].fp32_flops
    return verdict(ok, ("%.3g GFLOP/s at N = %d. Your GPU's own float32 peak is on its "
                        "datasheet; for scale, this is %.2g%% of an H200's, the ceiling "
                        "for any WGSL kernel there." % (
                            truth, last["n"], 100 * truth * 1e9 / h200)) if ok else
                   "%g GFLOP/s is not 4·N²·d / t for the last row of your timing table "
                   "(t in seconds, within 5%%)." % value)


CHECKERS = {
    "choice": choice, "run-compare": run_compare, "tile-bytes": tile_bytes,
    "tile-refuse": tile_refuse, "causal-skip": causal_skip, "io-ratio": io_ratio,
    "small-m": small_m, "time-it": time_it, "small-n": small_n,
    "fraction-of-peak": fraction_of_peak,
}
