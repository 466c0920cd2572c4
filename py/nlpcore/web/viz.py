"""What the module page and the tiling visualizer ask Python for (run inside Pyodide).

The visualizer draws only what the kernel itself reports: :func:`trace` runs
``flash_np.forward`` (or ``backward``) on small random inputs with ``trace=[]`` and
``io=IOCounter()``, blocks from ``io_model.block_sizes(M, d)``, and returns the events together
with ``io_model.flash_accesses``'s closed form for the same sizes. The page never re-implements
the algorithm; it folds these events into pictures and counters.

Large traces are *summarised*, never truncated: above :data:`STEP_LIMIT` events, the events of
one outer-loop iteration (one key/value block for K/V-outer, one query block for Q-outer)
become one step, which keeps the tiles visited, the last row statistics, the bytes moved per
tensor and the cumulative counters — so the counters still end exactly at the closed form.

:func:`run_episode_cell` backs the small "run it" cells of the module page's four episodes;
:func:`page_numbers` computes the numbers the module page quotes in its prose (the build stamps
them in as ``{{page.<name>}}``), so no figure on the page is typed by hand.

Every function here takes and returns plain data (see ``nlpcore.web.call``).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict, List, Optional

import numpy as np

from .. import hardware, measured
from ..kernels import flash_np, io_model, online_softmax, reference

from . import lessons
__all__ = ["options", "plan", "trace", "run_episode_cell"]

# What the visualizer offers. Every combination passes plan() or is refused with a reason
# before any kernel runs, so nothing offered can freeze the page.
OFFERED_N = (8, 12, 16, 20, 24, 32, 48, 50, 64, 96, 100, 128, 192, 200, 256)
OFFERED_D = (2, 4, 8, 16, 32, 64)
OFFERED_M = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
MODES = ("forward", "backward")

MAX_N = 256  # the largest sequence length the visualizer runs
MAX_D = 64  # the largest head dimension it runs
MAX_TILES = 4096  # Tr·Tc above this is refused: the NumPy kernel in Pyodide would take > ~2 s
STEP_LIMIT = 1500  # above this many events, steps are grouped per outer-loop iteration

# The "run it" cells of the module page: name -> the largest sizes each accepts. The page's
# inputs show these same limits (build.py stamps them into index.html as {{cell.<name>.<key>}}).
CELL_LIMITS = {
    "exact": {"n": 512, "d": 128, "sram": 65536, "tiles": 16384},
    "roofline": {"n": 16384, "d": 256, "sram": 1048576, "tiles": 400000},
    "tiling": {"n": 1024, "d": 128, "sram": 65536, "tiles": 16384},
    "online": {"n": 4096, "scale": 100000},
    "gpu": {"d": 256, "br": 512, "bc": 512, "warps": 32},
}
CELL_LIMITS.update(lessons.CELL_LIMITS)  # "fa2" and "ring": FlashAttention-2 and the ring's overlap
MIN_SRAM = 16  # elements: the smallest M a cell accepts

FP16_BYTES = hardware.FP16_BYTES
GPU_CHOICES = tuple(sorted(hardware.GPUS))  # the GPUs a cell offers (nlpcore.hardware.GPUS)
MAX_BLOCKS_PER_SM = 32  # resident thread blocks per SM, compute capability 8.0 and 9.0
MAX_THREADS_PER_BLOCK = 1024
MAX_REGISTERS_PER_THREAD = 255  # beyond this a thread's values spill to (slow) local memory


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    """An int in [lo, hi] (bools refused), or a ValueError/TypeError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("{} must be an integer, got {!r}".format(name, value))
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("{} must be a whole number, got {!r}".format(name, value))
        value = int(value)
    if not lo <= value <= hi:
        raise ValueError("{} must be between {} and {}, got {}".format(name, lo, hi, value))
    return value


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError("{} must be true or false, got {!r}".format(name, value))
    return value


def options() -> dict:
    """The parameter choices the visualizer offers, and its limits."""
    return {
        "n": list(OFFERED_N),
        "d": list(OFFERED_D),
        "sram": list(OFFERED_M),
        "loop_orders": list(io_model.LOOP_ORDERS),
        "modes": list(MODES),
        "max_tiles": MAX_TILES,
        "step_limit": STEP_LIMIT,
        "backward_trace": _backward_traces(),
    }


def _backward_traces() -> bool:
    """Whether this nlpcore's flash_np.backward accepts trace= (and loop_order is forward-only)."""
    try:
        return "trace" in inspect.signature(flash_np.backward).parameters
    except (TypeError, ValueError):
        return False


def plan(n: int, d: int, sram: int) -> dict:
    """Block sizes for (N, d, M) by the paper's rule, and whether the visualizer can run them.

    Returns {"br", "bc", "t_r", "t_c", "tiles", "ok", "reason"}; reason is None when ok.
    """
    n = _int(n, "n", 1, MAX_N)
    d = _int(d, "d", 1, MAX_D)
    sram = _int(sram, "sram", 1, 1 << 20)
    br, bc = io_model.block_sizes(sram, d)
    t_r, t_c = -(-n // br), -(-n // bc)
    ok = t_r * t_c <= MAX_TILES
    reason = None
    if not ok:
        reason = ("{} x {} = {} tiles is more than this page steps through ({}); "
                  "raise M or lower N".format(t_r, t_c, t_r * t_c, MAX_TILES))
    return {"br": br, "bc": bc, "t_r": t_r, "t_c": t_c, "tiles": t_r * t_c, "ok": ok, "reason": reason}


def _random_qkv(n: int, d: int, seed: int):
    rng = np.random.RandomState(seed)  # RandomState: the same stream on NumPy 1.17 and 2.x
    q = rng.standard_normal((n, d))  # (N, d)
    k = rng.standard_normal((n, d))  # (N, d)
    v = rng.standard_normal((n, d))  # (N, d)
    return q, k, v


def trace(
    n: int,
    d: int,
    sram: int,
    causal: bool = False,
    loop_order: str = "kv_outer",
    mode: str = "forward",
    seed: int = 0,
) -> dict:
    """Run the tiled kernel on random (N, d) inputs and return its trace for the visualizer.

    Args:
        n: sequence length N (queries = keys), 1..MAX_N.
        d: head dimension (also the value dimension), 1..MAX_D.
        sram: M, SRAM size in elements; blocks are io_model.block_sizes(M, d).
        causal: top-left causal mask (query i sees keys j <= i).
        loop_order: "kv_outer" (Algorithm 1) or "q_outer" (FlashAttention-2); forward only.
        mode: "forward", or "backward" (traces the backward pass alone; K/V outer).
        seed: seed of the random inputs.
    Returns:
        {"params": {...sizes, br, bc, t_r, t_c},
         "grouped": bool — steps are whole outer iterations,
         "steps": list of events (trace schema of nlpcore.kernels.trace) or, when grouped,
                  "group" summaries (see _group_steps),
         "events": number of raw events,
         "counted": {"reads", "writes", "accesses"} from the IOCounter,
         "closed_form": {"accesses", "reads", "writes", "standard_accesses", "formula"}}
    """
    if loop_order not in io_model.LOOP_ORDERS:
        raise ValueError("loop_order must be one of {}, got {!r}".format(io_model.LOOP_ORDERS, loop_order))
    if mode not in MODES:
        raise ValueError("mode must be one of {}, got {!r}".format(MODES, mode))
    causal = _bool(causal, "causal")
    seed = _int(seed, "seed", 0, 2 ** 31 - 1)
    tiles = plan(n, d, sram)
    if not tiles["ok"]:
        raise ValueError("n, sram: " + tiles["reason"])
    n, d, sram = int(n), int(d), int(sram)
    br, bc = tiles["br"], tiles["bc"]
    q, k, v = _random_qkv(n, d, seed)
    events: List[dict] = []
    io = io_model.IOCounter()
    backward = mode == "backward"
    if backward:
        if not _backward_traces():
            raise ValueError("mode: this nlpcore's flash_np.backward does not emit a trace")
        loop_order = "kv_outer"
        o, lse = flash_np.forward(q, k, v, causal=causal, block_q=br, block_k=bc)
        do = np.random.RandomState(seed + 1).standard_normal((n, d))  # (N, d)
        flash_np.backward(q, k, v, o, lse, do, causal=causal, block_q=br, block_k=bc, io=io, trace=events)
    else:
        flash_np.forward(q, k, v, causal=causal, block_q=br, block_k=bc, io=io, trace=events,
                         loop_order=loop_order)
    closed_reads, closed_writes = io_model.flash_io(n, n, d, br, bc, backward=backward, causal=causal,
                                                    loop_order=loop_order)
    closed = io_model.flash_accesses(n, n, d, sram, backward=backward, causal=causal, loop_order=loop_order)
    standard = io_model.standard_accesses(n, n, d, backward=backward)
    grouped = len(events) > STEP_LIMIT
    steps = _group_steps(events, loop_order) if grouped else events
    return {
        "params": {"n": n, "d": d, "sram": sram, "causal": causal, "loop_order": loop_order,
                   "mode": mode, "seed": seed, "br": br, "bc": bc, "t_r": tiles["t_r"],
                   "t_c": tiles["t_c"]},
        "grouped": grouped,
        "steps": steps,
        "events": len(events),
        "counted": {"reads": io.reads, "writes": io.writes, "accesses": io.accesses},
        "closed_form": {
            "accesses": closed,
            "reads": closed_reads,
            "writes": closed_writes,
            "standard_accesses": standard,
            "formula": "io_model.flash_accesses({n}, {n}, {d}, {m}, backward={b}, causal={c}, "
                       "loop_order={lo!r})".format(n=n, d=d, m=sram, b=backward, c=causal, lo=loop_order),
        },
    }


def _outer_index(event: dict, outer: str, current: Optional[int]) -> Optional[int]:
    """The outer-loop block an event opens, or None when it stays in the current one.

    K/V-outer opens block j with a load of K_j (or V_j); Q-outer opens block i with a load of
    Q_i. Tile and skip events name their (i, j) and settle any doubt.
    """
    op = event["op"]
    if op in ("tile", "skip", "state") and outer in event:
        return event[outer]
    if op == "load" and event.get("block") is not None:
        opener = ("K", "V") if outer == "j" else ("Q",)
        if event["tensor"] in opener and event["block"] != current:
            return event["block"]
    return None


def _group_steps(events: List[dict], loop_order: str) -> List[dict]:
    """One "group" step per outer-loop iteration; begin/end and pro-/epilogue IO kept as groups.

    A group: {"op": "group", "outer": index or None, "axis": "j"|"i", "first": index of its
    first event, "count": events in it, "tiles": [[i, j], ...], "skips": [[i, j], ...],
    "states": [last state event per query block], "resident": [last load per tensor,
    {tensor, block, rows, elems}], "moved": {tensor: [elements read, elements written]},
    "loads": {tensor: [[r0, r1], ...]} the rows each load covered (adjacent loads merged),
    "reads", "writes": cumulative counters after the group, "begin"/"end": the begin/end event
    when the group holds it}.
    """
    outer = "j" if loop_order == "kv_outer" else "i"
    groups: List[dict] = []
    current: Optional[int] = None
    reads = writes = 0

    def new_group(index: Optional[int], first: int) -> dict:
        group = {"op": "group", "outer": index, "axis": outer, "first": first, "count": 0,
                 "tiles": [], "skips": [], "states": {}, "resident": {}, "moved": {}, "loads": {},
                 "reads": reads, "writes": writes}
        groups.append(group)
        return group

    group = new_group(None, 0)
    for position, event in enumerate(events):
        op = event["op"]
        index = _outer_index(event, outer, current)
        if index is not None and index != current:
            current = index
            group = new_group(index, position)
        elif op == "end" and group["outer"] is not None:
            group = new_group(None, position)
        group["count"] += 1
        if op in ("load", "store"):
            reads, writes = event["reads"], event["writes"]
            moved = group["moved"].setdefault(event["tensor"], [0, 0])
            moved[0 if op == "load" else 1] += event["elems"]
            if op == "load":
                group["resident"][event["tensor"]] = {k: event[k] for k in ("tensor", "block", "rows", "elems")}
                spans = group["loads"].setdefault(event["tensor"], [])
                r0, r1 = event["rows"]
                if spans and spans[-1][1] == r0:  # adjacent blocks merge into one span
                    spans[-1][1] = r1
                else:
                    spans.append([r0, r1])
        elif op == "tile":
            group["tiles"].append([event["i"], event["j"]])
        elif op == "skip":
            group["skips"].append([event["i"], event["j"]])
        elif op == "state":
            group["states"][event["i"]] = event
        elif op in ("begin", "end"):
            group[op] = event
            if op == "end":
                reads, writes = event["reads"], event["writes"]
        group["reads"], group["writes"] = reads, writes
    for group in groups:
        group["states"] = [group["states"][i] for i in sorted(group["states"])]
        group["resident"] = list(group["resident"].values())
    return groups


# ---------------------------------------------------------------------------------------------
# The module page's "run it" cells
# ---------------------------------------------------------------------------------------------

def run_episode_cell(name: str, params: Optional[Dict[str, Any]] = None) -> dict:
    """Run one episode cell of the module page; returns {"ok", "lines": [str], "values": {...}}.

    Cells: "exact" (tiled vs naive attention), "roofline" (the HBM cost model on a chosen GPU),
    "gpu" (one thread block's tile on a chosen GPU: shared memory, registers, occupancy),
    "tiling" (block sizes and counted vs closed-form accesses), "online" (streaming softmax
    and the monoid laws), "fa2" and "ring" (:mod:`nlpcore.web.lessons`). Bad parameters raise ValueError/TypeError naming the parameter.
    """
    cells = {"exact": _cell_exact, "roofline": _cell_roofline, "gpu": _cell_gpu,
             "tiling": _cell_tiling, "online": _cell_online,
             "fa2": lessons.cell_fa2, "ring": lessons.cell_ring}
    if name not in cells:
        raise ValueError("name must be one of {}, got {!r}".format(sorted(cells), name))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise TypeError("params must be a dict, got {}".format(type(params).__name__))
    values = cells[name](params)
    return {"ok": True, "lines": values.pop("lines"), "values": values}


def _sizes_for_cell(name: str, params: dict) -> tuple:
    limits = CELL_LIMITS[name]
    n = _int(params.get("n", 64), "n", 1, limits["n"])
    d = _int(params.get("d", 16), "d", 1, limits["d"])
    sram = _int(params.get("sram", 1024), "sram", MIN_SRAM, limits["sram"])
    br, bc = io_model.block_sizes(sram, d)
    tiles = -(-n // br) * -(-n // bc)
    if tiles > limits["tiles"]:
        raise ValueError("n, sram: {} tiles is too many for this cell (at most {}); raise M or lower N".format(
            tiles, limits["tiles"]))
    return n, d, sram, br, bc


def _cell_exact(params: dict) -> dict:
    n, d, sram, br, bc = _sizes_for_cell("exact", params)
    causal = _bool(params.get("causal", False), "causal")
    q, k, v = _random_qkv(n, d, 0)
    q32, k32, v32 = q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)
    io = io_model.IOCounter()
    o, lse = flash_np.forward(q32, k32, v32, causal=causal, block_q=br, block_k=bc, io=io)
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal)  # float64 oracle
    err = float(np.max(np.abs(o.astype(np.float64) - o_ref)))
    err_lse = float(np.max(np.abs(lse.astype(np.float64) - lse_ref)))
    standard = io_model.standard_accesses(n, n, d)
    lines = [
        "N={} d={} M={} -> Br={} Bc={}{}".format(n, d, sram, br, bc, " (causal)" if causal else ""),
        "max |O_flash - O_naive|     = {:.2e}   (float32 kernel vs float64 naive oracle)".format(err),
        "max |lse_flash - lse_naive| = {:.2e}".format(err_lse),
        "HBM accesses, tiled kernel (counted): {:,} elements".format(io.accesses),
        "HBM accesses, standard (closed form): {:,} elements".format(standard),
        "ratio standard / tiled: {:.2f}x".format(standard / io.accesses),
    ]
    if io.accesses > standard:
        lines.append("The tiled kernel moves more here: each of its Tc = ceil(N/Bc) = {} passes re-reads Q and O, "
                     "which costs more than S and P unless M is well above 3d² = {}.".format(-(-n // bc), 3 * d * d))
    return {"lines": lines, "max_abs_err": err, "max_abs_err_lse": err_lse, "flash_accesses": io.accesses,
            "standard_accesses": standard, "br": br, "bc": bc}


def _gpu(params: dict) -> hardware.Gpu:
    name = params.get("gpu", "A100")
    if name not in hardware.GPUS:
        raise ValueError("gpu must be one of {}, got {!r}".format(list(GPU_CHOICES), name))
    return hardware.GPUS[name]


def format_h200_figure2() -> List[str]:
    """The Figure 2 setting measured on an H200 (bench/results/io_h200.json, shipped in the
    wheel) beside the model's prediction, as text lines."""
    h200 = measured.figure2_h200()
    if not h200 or "baseline" not in h200:
        return ["Measured on an H200: no record in this build (bench/io_h200.py writes it)."]
    lines = ["Measured on an {} (Nsight Compute, dram__bytes_read + dram__bytes_write over every kernel "
             "of one step;".format(h200["gpu"]),
             "causal mask, dropout p = 0.1, fp16, forward + backward; model = io_model's count for the same step):",
             "{:<22}{:>10}{:>12}{:>12}".format("", "time (ms)", "HBM (GB)", "model (GB)")]
    names = (("baseline", "PyTorch baseline"), ("triton", "ours (Triton, fused)"),
             ("sdpa_flash", "SDPA flash"), ("sdpa_cudnn", "SDPA cuDNN"))
    for key, label in names:
        row = h200.get(key)
        if not row or row.get("runtime_ms") is None:
            continue
        hbm = "{:>12.2f}".format(row["hbm_gb"]) if row.get("hbm_gb") is not None else "{:>12}".format("-")
        lines.append("{:<22}{:>10.2f}{}{:>12.2f}".format(label, row["runtime_ms"], hbm, row["model_gb"]))
    base, ours = h200["baseline"], h200.get("triton", {})
    if base.get("hbm_gb") and ours.get("hbm_gb"):
        lines.append("measured: {:.1f}x less HBM traffic, {:.1f}x faster (the paper's A100: {:.1f}x, {:.1f}x)".format(
            base["hbm_gb"] / ours["hbm_gb"], base["runtime_ms"] / ours["runtime_ms"],
            io_model.PAPER_FIGURE2["standard_gb"] / io_model.PAPER_FIGURE2["flash_gb"],
            io_model.PAPER_FIGURE2["standard_ms"] / io_model.PAPER_FIGURE2["flash_ms"]))
    return lines


def _cell_roofline(params: dict) -> dict:
    n, d, sram, br, bc = _sizes_for_cell("roofline", params)
    gpu = _gpu(params)
    flops = 4 * n * n * d  # S = QKᵀ and O = PV, 2·N²·d each (multiply + add)
    ridge = gpu.ridge_flop_per_byte  # FLOP/byte
    rows = []
    for label, accesses in (("standard", io_model.standard_accesses(n, n, d)),
                            ("tiled KV", io_model.flash_accesses(n, n, d, sram)),
                            ("tiled Q", io_model.flash_accesses(n, n, d, sram, loop_order="q_outer"))):
        hbm_bytes = accesses * FP16_BYTES
        intensity = flops / hbm_bytes
        t_mem = hbm_bytes / gpu.hbm_bytes_per_s
        t_flop = flops / gpu.fp16_flops
        rows.append((label, accesses, hbm_bytes, intensity, t_mem, t_flop))
    lines = ["One head, forward, fp16, {} ({:g} TB/s HBM, {:g} TFLOP/s): N={} d={} M={} (Br={}, Bc={})".format(
        gpu.name, gpu.hbm_bytes_per_s / 1e12, gpu.fp16_flops / 1e12, n, d, sram, br, bc),
        "FLOPs: 4·N²·d = {:,}".format(flops),
        "{:<10}{:>16}{:>12}{:>12}{:>13}{:>13}  bound".format("kernel", "HBM elements", "MB", "FLOP/B",
                                                            "t_mem (µs)", "t_flop (µs)")]
    for label, accesses, hbm_bytes, intensity, t_mem, t_flop in rows:
        lines.append("{:<10}{:>16,}{:>12.2f}{:>12.1f}{:>13.2f}{:>13.2f}  {}".format(
            label, accesses, hbm_bytes / 1e6, intensity, t_mem * 1e6, t_flop * 1e6,
            "memory" if intensity < ridge else "compute"))
    lines.append("ridge point π/β = {:.0f} FLOP/byte: below it, time is set by HBM traffic.".format(ridge))
    for label, _, _, _, t_mem, t_flop in rows[:2]:
        bound = flops / max(t_mem, t_flop) / 1e12  # TFLOP/s at the roofline
        lines.append("{} at its roofline bound: {:.1f} TFLOP/s = {:.0f}% of the {:g} TFLOP/s peak".format(
            label, bound, 100 * hardware.fraction_of_peak(bound, params.get("gpu", "A100")),
            gpu.fp16_flops / 1e12))
    lines.append("tiled KV = K/V outer (the paper's Algorithm 1); tiled Q = Q outer (FlashAttention-2's order),")
    lines.append("both with the paper's Br = min(Bc, d): Q outer re-reads K and V once per query block (Tr = {}),".format(
        -(-n // br)))
    lines.append("which is why FlashAttention-2 uses taller query blocks than this rule gives.")
    lines.append("")
    lines.append("The paper's Figure 2 (forward + backward, its M = 192 KB of A100 L1 + shared memory):")
    lines.extend(io_model.format_figure2().splitlines())
    lines.append("")
    lines.extend(format_h200_figure2())
    return {"lines": lines, "ridge": ridge,
            "standard_intensity": rows[0][3], "flash_intensity": rows[1][3], "flash2_intensity": rows[2][3],
            "standard_accesses": rows[0][1], "flash_accesses": rows[1][1], "flash2_accesses": rows[2][1]}


def _cell_gpu(params: dict) -> dict:
    """One thread block's FlashAttention tile on a GPU: what it holds where, and how many fit.

    The block keeps a Br×d query tile and Bc×d key and value tiles in shared memory, and its
    fp32 accumulators -- the Br×d output, the Br×Bc score tile, m and ℓ -- in registers, spread
    over its threads (as FlashAttention-2 does on GPUs)."""
    limits = CELL_LIMITS["gpu"]
    d = _int(params.get("d", 64), "d", 1, limits["d"])
    br = _int(params.get("br", 128), "br", 1, limits["br"])
    bc = _int(params.get("bc", 64), "bc", 1, limits["bc"])
    warps = _int(params.get("warps", 4), "warps", 1, limits["warps"])
    gpu = _gpu(params)
    threads = warps * hardware.WARP_SIZE
    smem = FP16_BYTES * (br * d + 2 * bc * d)  # Q_i, K_j, V_j tiles, fp16
    per_thread = -(-(br * d + br * bc + 2 * br) // threads)  # fp32 values: O acc, S tile, m, ℓ
    fits_smem = smem <= gpu.smem_per_block_bytes
    spills = per_thread > MAX_REGISTERS_PER_THREAD
    regs = min(per_thread, MAX_REGISTERS_PER_THREAD)
    by_smem = gpu.smem_per_sm_bytes // smem
    by_threads = gpu.max_threads_per_sm // threads
    by_regs = gpu.registers_per_sm // (regs * threads)
    blocks = min(by_smem, by_threads, by_regs, MAX_BLOCKS_PER_SM) if fits_smem and threads <= MAX_THREADS_PER_BLOCK else 0
    max_warps = gpu.max_threads_per_sm // hardware.WARP_SIZE
    occupancy = blocks * warps / max_warps
    intensity = 4.0 * br * bc * d / (2 * bc * d * FP16_BYTES)  # FLOPs per key tile / its bytes
    lines = [
        "{}: {} SMs, {} KiB shared memory per block at most, {} KiB of registers per SM".format(
            gpu.name, gpu.sms, gpu.smem_per_block_bytes // 1024, gpu.registers_per_sm * 4 // 1024),
        "block: Br={} query rows, Bc={} key rows, d={}, {} warps = {} threads".format(br, bc, d, warps, threads),
        "shared memory: Q tile {}·{} + K, V tiles 2·{}·{} fp16 = {:,} bytes  {}".format(
            br, d, bc, d, smem, "fits" if fits_smem else "DOES NOT FIT (at most {:,})".format(gpu.smem_per_block_bytes)),
        "registers: O acc {}·{} + S tile {}·{} + m, ℓ fp32 values / {} threads ≈ {} per thread{}".format(
            br, d, br, bc, threads, per_thread,
            "  SPILLS to local memory (> {})".format(MAX_REGISTERS_PER_THREAD) if spills else ""),
    ]
    if threads > MAX_THREADS_PER_BLOCK:
        lines.append("{} threads is more than a block may have ({})".format(threads, MAX_THREADS_PER_BLOCK))
    if blocks:
        lines.append("blocks per SM: {} (shared memory allows {}, thread slots {}, registers {})".format(
            blocks, by_smem, by_threads, by_regs))
        lines.append("occupancy: {} of {} warp slots = {:.0f}%".format(blocks * warps, max_warps, 100 * occupancy))
    lines.append("each K/V tile brings 4·Br·Bc·d FLOPs for 2·Bc·d·2 bytes: {:.0f} FLOP/byte "
                 "(ridge {:.0f}) if it came from HBM every time".format(intensity, gpu.ridge_flop_per_byte))
    return {"lines": lines, "smem_bytes": smem, "fits": fits_smem, "registers_per_thread": per_thread,
            "spills": spills, "blocks_per_sm": blocks, "occupancy": occupancy, "intensity": intensity}


def page_numbers() -> dict:
    """Numbers the module page quotes in prose, from the IO model (stamped as {{page.<name>}}).

    - ``caveat_*``: Episode 3's caveat -- at d = 128 and M = 49152 fp16 elements (96 KiB),
      Algorithm 1's block sizes make the forward move about as much as standard attention.
    - ``paper_*``: the paper's M (192 KB of A100 L1 + shared memory) at d = 64 and d = 128.
    - ``fig2_*``: the paper's Figure 2 (left), forward + backward, as the paper reports it.
    """
    out = {}
    n = 4096
    for key, d, m in (("caveat", 128, 49152), ("paper64", 64, hardware.A100_SRAM_FP16_ELEMENTS),
                      ("paper128", 128, hardware.A100_SRAM_FP16_ELEMENTS)):
        br, bc = io_model.block_sizes(m, d)
        ratio = io_model.standard_accesses(n, n, d) / float(io_model.flash_accesses(n, n, d, m))
        out.update({key + "_d": d, key + "_m": m, key + "_m_kib": m * FP16_BYTES // 1024,
                    key + "_br": br, key + "_bc": bc, key + "_n": n, key + "_ratio": "%.2f" % ratio,
                    key + "_3d2": 3 * d * d})
    fig2 = io_model.figure2()
    out.update({"fig2_standard_gb": "%g" % fig2["paper_standard_gb"],
                "fig2_flash_gb": "%g" % fig2["paper_flash_gb"],
                "fig2_flash_skip_gb": "%.1f" % fig2["baseline_flash_skip_gb"],
                "fig2_standard_ms": "%g" % fig2["paper"]["standard_ms"],
                "fig2_flash_ms": "%g" % fig2["paper"]["flash_ms"]})
    out.update(lessons.page_numbers())
    return out


def _cell_tiling(params: dict) -> dict:
    n, d, sram, br, bc = _sizes_for_cell("tiling", params)
    q, k, v = _random_qkv(n, d, 1)
    io = io_model.IOCounter()
    flash_np.forward(q, k, v, block_q=br, block_k=bc, io=io)
    closed = io_model.flash_accesses(n, n, d, sram)
    standard = io_model.standard_accesses(n, n, d)
    t_r, t_c = -(-n // br), -(-n // bc)
    lines = [
        "M={} elements, d={}: Bc = ceil(M/4d) = {}, Br = min(Bc, d) = {}".format(sram, d, bc, br),
        "N={}: Tr = ceil(N/Br) = {}, Tc = ceil(N/Bc) = {}, {} tiles".format(n, t_r, t_c, t_r * t_c),
        "HBM accesses counted by the kernel: {:,} (reads {:,}, writes {:,})".format(io.accesses, io.reads, io.writes),
        "closed form io_model.flash_accesses: {:,}   {}".format(closed, "equal" if closed == io.accesses else "DIFFERENT"),
        "standard attention (closed form):    {:,}".format(standard),
        "N²d²/M = {:,.0f}   (Theorem 2's order); counted / (N²d²/M) = {:.1f}".format(
            io_model.theta_ratio(n, d, sram), io.accesses / io_model.theta_ratio(n, d, sram)),
        "  the constant is about 12 when N ≫ Bc: Tc ≈ 4Nd/M passes, each moving Q, O in and O out (≈ 3Nd)",
    ]
    return {"lines": lines, "counted": io.accesses, "closed_form": closed, "standard": standard,
            "br": br, "bc": bc, "t_r": t_r, "t_c": t_c}


def _cell_online(params: dict) -> dict:
    n = _int(params.get("n", 37), "n", 1, CELL_LIMITS["online"]["n"])
    block = _int(params.get("block", 8), "block", 1, CELL_LIMITS["online"]["n"])
    scale = params.get("scale", 400)
    top = CELL_LIMITS["online"]["scale"]
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 <= scale <= top:
        raise ValueError("scale must be a number between 0 and {}, got {!r}".format(top, scale))
    x = np.random.RandomState(2).standard_normal(n) * float(scale)  # (n,)
    streamed = online_softmax.online_softmax(x, block)
    shifted = np.exp(x - x.max())  # safe softmax: pass 1 the max, pass 2 the sum, pass 3 divide
    three_pass = shifted / shifted.sum()
    err = float(np.max(np.abs(streamed - three_pass)))
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(x) / np.exp(x).sum()  # the one-pass formula without the max shift
    naive_bad = int(np.sum(~np.isfinite(naive)))
    # The monoid laws on three random blocks of this row.
    cuts = sorted(np.random.RandomState(3).randint(0, n + 1, size=2))
    a, b, c = (online_softmax.from_block(part) for part in (x[: cuts[0]], x[cuts[0]:cuts[1]], x[cuts[1]:]))
    left = online_softmax.combine(online_softmax.combine(a, b), c)
    right = online_softmax.combine(a, online_softmax.combine(b, c))
    whole = online_softmax.from_block(x)
    ident = online_softmax.identity(())
    unit = online_softmax.combine(ident, whole)

    def rel(s, t):
        # Compare the sums they represent, l·exp(m), relative to t.
        return abs(float(s.l) * math.exp(float(s.m) - float(t.m)) - float(t.l)) / float(t.l)

    assoc = rel(left, right)
    to_whole = rel(left, whole)
    identity_gap = rel(unit, whole)
    lines = [
        "row of {} scores (normal × {}), blocks of {}: {} block(s)".format(n, scale, block, -(-n // block)),
        "max |online_softmax (2 passes) - safe softmax (3 passes)| = {:.2e}".format(err),
        "naive exp(x)/Σexp(x) without the max shift: {} of {} entries not finite{}".format(
            naive_bad, n, " (overflow)" if naive_bad else ""),
        "monoid on blocks [0:{}], [{}:{}], [{}:{}]:".format(cuts[0], cuts[0], cuts[1], cuts[1], n),
        "  (a⊕b)⊕c vs a⊕(b⊕c): relative gap {:.1e}".format(assoc),
        "  (a⊕b)⊕c vs the whole row in one block: relative gap {:.1e}".format(to_whole),
        "  identity (-inf, 0) ⊕ x vs x: relative gap {:.1e}".format(identity_gap),
        "running max m = {:.4g}, sum l = {:.6g}".format(float(whole.m), float(whole.l)),
    ]
    return {"lines": lines, "max_abs_err": err, "naive_non_finite": naive_bad,
            "associativity_gap": assoc, "identity_gap": identity_gap}
