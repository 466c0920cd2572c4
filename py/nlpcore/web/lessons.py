"""Two "run it" cells of the module page that go past the 2022 paper, and the numbers their
prose quotes (build.py stamps them as ``{{page.<name>}}`` through :func:`viz.page_numbers`).

- ``fa2``: what FlashAttention-2 (Dao 2023, arXiv:2307.08691) changed, in counts one can check:
  HBM traffic of the two loop orders (``io_model``), the non-matmul work of the output update
  in FlashAttention's Algorithm 1 against FlashAttention-2's Algorithm 1 (our count, below),
  thread blocks launched against the GPU's SMs, and the shared-memory traffic of splitting K/V
  across warps ("split-K") that splitting Q avoids.
- ``ring``: Ring Attention's overlap condition (Liu, Zaharia & Abbeel 2023, arXiv:2310.01889,
  Sec. 3): a ring step hides its transfer only when its compute takes at least as long
  (:func:`nlpcore.hardware.ring_min_block`).

Counting the output update (per query row block of Br rows, d columns, over Tc key tiles;
exp, max and the row sums are the same in both and not counted):

    FlashAttention (2022, Alg. 1 line 12):  O ← diag(ℓ_new)⁻¹ (diag(ℓ) e^(m−m_new) O + e^(m̃−m_new) P̃V)
        per tile: scale O, scale P̃V, add, divide by ℓ_new       4·Br·d
    FlashAttention-2 (Alg. 1 lines 10, 12): O ← diag(e^(m_old−m_new)) O + P̃V; at the end O / ℓ
        per tile: scale O, add                                  2·Br·d, plus Br·d once
"""
from __future__ import annotations

import re
from typing import Any, Dict

from .. import claims, hardware, measured
from ..kernels import flash_wgsl_int8, io_model, tiling
from . import fa3_numbers

CELL_LIMITS = {
    "fa2": {"n": 65536, "d": 256, "sram": 1048576, "bh": 4096, "warps": 16},
    "ring": {"c": 1 << 20, "d": 256},
}
FP16_BYTES = hardware.FP16_BYTES
FP32_BYTES = 4
LINK_CHOICES = ("NVLink", "PCIe")
# The loop-order comparison quoted in prose: the paper's M and d = 64, as bench/io_claim.py records,
# and d = 128, where Algorithm 1's rule gives blocks on the other side of the break-even.
QOUTER_D = 64
QOUTER_DS = (64, 128)
QOUTER_NS = (1024, 16384)
# Episode 2's qualification of "M well over 3d²": the guided lab's small-M setting.
SMALL_M_N, SMALL_M_D = 256, 64


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise TypeError("{} must be a whole number, got {!r}".format(name, value))
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError("{} must be between {} and {}, got {}".format(name, lo, hi, value))
    return value


def _choice(value: Any, name: str, choices) -> str:
    if value not in choices:
        raise ValueError("{} must be one of {}, got {!r}".format(name, list(choices), value))
    return value


def output_update_ops(br: int, d: int, tiles: int) -> Dict[str, int]:
    """Non-matmul operations of the output update for one query row block over ``tiles`` key
    tiles (module docstring): ``{"fa1": 4·Br·d·Tc, "fa2": 2·Br·d·Tc + Br·d}``."""
    return {"fa1": 4 * br * d * tiles, "fa2": 2 * br * d * tiles + br * d}


def loop_order_bytes(n: int, d: int, sram: int) -> Dict[str, Any]:
    """Forward HBM bytes (fp16) of one head for K/V outer and Q outer with the paper's blocks
    (Algorithm 1: Br = min(Bc, d)), and Q outer with square blocks Br = Bc; ``break_even`` is the
    query-block height below which Q outer moves more (``io_model.q_outer_break_even``)."""
    br, bc = io_model.block_sizes(sram, d)
    return {
        "break_even": io_model.q_outer_break_even(d, bc),
        "kv_outer": FP16_BYTES * io_model.flash_accesses(n, n, d, sram),
        "q_outer": FP16_BYTES * io_model.flash_accesses(n, n, d, sram, loop_order="q_outer"),
        "q_outer_square": FP16_BYTES * io_model.flash_accesses_for_blocks(n, n, d, bc, bc, loop_order="q_outer"),
        "br": br, "bc": bc,
    }


def cell_fa2(params: dict) -> dict:
    limits = CELL_LIMITS["fa2"]
    n = _int(params.get("n", 4096), "n", 1, limits["n"])
    d = _int(params.get("d", 64), "d", 1, limits["d"])
    sram = _int(params.get("sram", hardware.A100_SRAM_FP16_ELEMENTS), "sram", 16, limits["sram"])
    bh = _int(params.get("bh", 16), "bh", 1, limits["bh"])
    warps = _int(params.get("warps", 4), "warps", 1, limits["warps"])
    gpu = hardware.GPUS[_choice(params.get("gpu", "A100"), "gpu", sorted(hardware.GPUS))]
    traffic = loop_order_bytes(n, d, sram)
    br, bc = traffic["br"], traffic["bc"]
    tc, tr = -(-n // bc), -(-n // br)
    ops = output_update_ops(br, d, tc)
    fa1_blocks, fa2_blocks = bh, bh * tr  # thread blocks launched: per (batch, head); per row block too
    score_tile, regs = bc * bc * FP32_BYTES, gpu.registers_per_sm * 4  # square blocks' scores; register file
    split_k = warps * br * d * FP32_BYTES * 2  # each warp writes its partial O to shared memory; all are read back
    lines = [
        "N={} d={} M={} (paper's rule: Br={}, Bc={}; Tr={}, Tc={}), batch·heads={}, {}".format(
            n, d, sram, br, bc, tr, tc, bh, gpu.name),
        "",
        "1. Fewer non-matmul FLOPs (FA2 Sec. 3.1.1): output update of one row block over all Tc key tiles",
        "   FlashAttention (rescale and divide every tile): {:>14,} ops".format(ops["fa1"]),
        "   FlashAttention-2 (unscaled O, divide once):    {:>14,} ops  ({:.2f}x fewer)".format(
            ops["fa2"], ops["fa1"] / float(ops["fa2"])),
        "   and FA2 stores only lse = m + log ℓ for the backward: one number per row, not two (m and ℓ)",
        "",
        "2. Parallelism over the sequence (FA2 Sec. 3.2): thread blocks launched for the forward",
        "   FlashAttention (one per batch·head):           {:>8,}  on {} SMs: {}".format(
            fa1_blocks, gpu.sms, "fills the GPU" if fa1_blocks >= gpu.sms else "{} SMs idle".format(gpu.sms - fa1_blocks)),
        "   FlashAttention-2 (one per batch·head·row block): {:>6,}  on {} SMs: {}".format(
            fa2_blocks, gpu.sms, "fills the GPU" if fa2_blocks >= gpu.sms else "{} SMs idle".format(gpu.sms - fa2_blocks)),
        "",
        "3. Work split across {} warps (FA2 Sec. 3.3), per (row block, key tile):".format(warps),
        "   split K/V ('split-K'): every warp writes a partial O of Br·d fp32 to shared memory and all are",
        "   read back and summed: {:,} bytes of shared-memory traffic and a barrier".format(split_k),
        "   split Q: each warp owns Br/{} rows of O outright: 0 bytes, no barrier".format(warps),
        "",
        "4. HBM bytes of the forward, one head, fp16 (io_model, the closed forms the counter matches):",
        "   K/V outer (the paper's Algorithm 1):           {:>14,}".format(traffic["kv_outer"]),
        "   Q outer, the paper's blocks (Br = {}):      {:>14,}  ({:.2f}x K/V outer)".format(
            br, traffic["q_outer"], traffic["q_outer"] / float(traffic["kv_outer"])),
        "   Q outer, square blocks (Br = Bc = {}):     {:>14,}  ({:.2f}x K/V outer)".format(
            bc, traffic["q_outer_square"], traffic["q_outer_square"] / float(traffic["kv_outer"])),
        "   (square blocks: the Q, K, V, O tiles fill M; their {}×{} fp32 score tile is {:,} bytes,".format(
            bc, bc, score_tile),
        "   {} the {:,} bytes of registers of one {} SM,".format(
            "more than" if score_tile > regs else "within", regs, gpu.name),
        "   {}FA2 uses blocks of 64-128 rows)".format(
            "so this row is a bound, not a kernel; " if score_tile > regs else ""),
        "   Q outer reads all of K and V once per query block (Tr times, ≈ 2N²d/Br elements); K/V outer",
        "   re-reads Q and O and writes O once per key block (Tc times, ≈ 3N²d/Bc). Q outer moves more",
        "   when 2/Br > 3/Bc, i.e. Br < ⅔·Bc (exactly Bc·2d/(3d+4), counting m and ℓ too):",
        "   here Br = {} against a break-even of {:.1f}{}.".format(
            br, traffic["break_even"], " (moves more)" if br < traffic["break_even"] else " (moves less)"),
    ]
    return {"lines": lines, "ops": ops, "blocks": {"fa1": fa1_blocks, "fa2": fa2_blocks},
            "split_k_bytes": split_k, "traffic": traffic}


def ring_step(gpu: str, link: str, c: int, d: int) -> Dict[str, float]:
    """One ring step over a block of ``c`` tokens: compute seconds (4·d·c² FLOPs at the fp16
    peak) and transfer seconds (K and V blocks, 4·c·d bytes, over one direction of ``link``)."""
    flops = 4.0 * d * c * c
    return {"compute_s": flops / hardware.GPUS[gpu].fp16_flops,
            "transfer_s": 4.0 * c * d / hardware.link_bytes_per_s(gpu, link)}


def cell_ring(params: dict) -> dict:
    limits = CELL_LIMITS["ring"]
    c = _int(params.get("c", 1024), "c", 1, limits["c"])
    d = _int(params.get("d", 128), "d", 1, limits["d"])
    gpu = _choice(params.get("gpu", "H200"), "gpu", sorted(hardware.LINKS))
    link = _choice(params.get("link", "NVLink"), "link", LINK_CHOICES)
    step = ring_step(gpu, link, c, d)
    need = hardware.ring_min_block(gpu, link)
    hidden = step["compute_s"] >= step["transfer_s"]
    lines = [
        "{} over {}: {:g} TFLOP/s fp16 peak, {:g} GB/s one way ({:g} GB/s both ways, datasheet)".format(
            hardware.GPUS[gpu].name, link, hardware.GPUS[gpu].fp16_flops / 1e12,
            hardware.link_bytes_per_s(gpu, link) / 1e9, hardware.LINKS[gpu][link] / 1e9),
        "a block of c = {:,} tokens, d = {}:".format(c, d),
        "  compute 4·d·c² = {:.3g} FLOPs  -> {:8.2f} µs".format(4.0 * d * c * c, step["compute_s"] * 1e6),
        "  send K and V, 4·c·d bytes = {:,}  -> {:8.2f} µs".format(4 * c * d, step["transfer_s"] * 1e6),
        "  {}".format("compute hides the transfer: the ring costs no extra time" if hidden else
                      "the transfer takes longer: every step waits {:.2f} µs for the link".format(
                          (step["transfer_s"] - step["compute_s"]) * 1e6)),
        "overlap needs c ≥ F/B = {:,} tokens in a block here (d cancels); Ring Attention's Table 2:".format(need),
        "A100 + NVLink minimal block 1.0K (and 6c ≈ 6.2K as the minimal sequence length per device)",
    ]
    return {"lines": lines, "compute_s": step["compute_s"], "transfer_s": step["transfer_s"],
            "hidden": hidden, "min_block": need}


def page_numbers() -> dict:
    """Numbers for the FlashAttention-2 and ring prose: ``qouter_<n>_kv_mb``, ``qouter_<n>_q_mb``
    (forward + backward MB at the paper's M, d = 64, as bench/results/io_claim.json records them),
    Algorithm 1's blocks and the break-even query-block height at d = 64 and 128
    (``qouter_<d>_br``, ``_bc``, ``_break_even``) with the Q-outer / K/V-outer ratio
    (``qouter_<d>_<n>_ratio``), the A100's cost of a non-matmul FLOP in matmul FLOPs,
    the per-tile output-update counts at that M, and the ring's minimum blocks (also in
    ``hardware.as_dict``)."""
    m = hardware.A100_SRAM_FP16_ELEMENTS
    out = {"qouter_m": m, "qouter_d": QOUTER_D}
    for d in QOUTER_DS:
        br, bc = io_model.block_sizes(m, d)
        out.update({"qouter_%d_br" % d: br, "qouter_%d_bc" % d: bc,
                    "qouter_%d_break_even" % d: "%.0f" % io_model.q_outer_break_even(d, bc)})
        for n in QOUTER_NS:
            backward = io_model.flash_accesses(n, n, d, m, backward=True)
            kv = (io_model.flash_accesses(n, n, d, m) + backward) * FP16_BYTES
            q = (io_model.flash_accesses(n, n, d, m, loop_order="q_outer") + backward) * FP16_BYTES
            out["qouter_%d_%d_ratio" % (d, n)] = "%.2f" % (q / float(kv))
            if d == QOUTER_D:  # the d of bench/results/io_claim.json
                out.update({"qouter_%d_kv_mb" % n: "%.2f" % (kv / 1e6), "qouter_%d_q_mb" % n: "%.2f" % (q / 1e6),
                            "qouter_%d_kv_gb" % n: "%.2f" % (kv / 1e9), "qouter_%d_q_gb" % n: "%.2f" % (q / 1e9),
                            "qouter_%d_ratio" % n: "%.2f" % (q / float(kv))})
    a100 = hardware.GPUS["A100"]
    out["a100_nonmatmul_cost"] = "%g" % (a100.fp16_flops / a100.fp32_flops)  # FA2 Sec. 3.1: "16×"
    win = smallest_winning_m(SMALL_M_N, SMALL_M_D)
    out.update({"smallm_n": SMALL_M_N, "smallm_d": SMALL_M_D, "smallm_m": win,
                "smallm_over_3d2": "%.2f" % (win / (3.0 * SMALL_M_D ** 2))})
    h200 = {(r["n"], r["d"], r["impl"]): r for r in measured.sweep_h200() if r["setting"] == "sweep"}
    base, ours = h200.get((1024, 128, "baseline")), h200.get((1024, 128, "triton"))
    out["h200_d128_traffic_ratio"] = ("%.1f" % (base["hbm_gb"] / ours["hbm_gb"])
                                      if base and ours and base["hbm_gb"] and ours["hbm_gb"] else "not recorded")
    out.update(int8_tier_numbers())
    out.update(fa3_numbers.page_numbers())  # Episode 5's measured sentences
    return out


_ACC_KEY = re.compile(r"^accuracy\[engine=\w+,tier=(\w+),d=\d+,inputs=(\w+)(?:,variant=None)?\]\.(\w+)$")
INT8_D = 64  # the head width of the int8 tier's tile shown on the module page
INT8_STORAGE = 49152  # workgroup bytes Dawn gives on the H200 (DESIGN.md), the plan's budget there


def int8_tier_numbers(record: Any = None) -> Dict[str, Any]:
    """Numbers of Episode 2's "tensor cores from WGSL" (stamped as ``{{page.<name>}}``): the
    tensor-core to float32 ratio of the H200 (``tc_ratio``, :data:`hardware.GPUS`); the int8 tile
    at d = :data:`INT8_D` (``i8_*``: ``tiling.plan_int8``, the subgroup-matrix shape
    ``tiling.MMA_*`` and the int8 levels -127..127 of ``flash_wgsl_int8.INT8_MAX``); and, from ``bench/results/webgpu_h200.json`` read through
    ``claims.INT8_ACCURACY_KEYS`` and ``claims.TIER_SPEED_KEYS``, the int8 tier's worst relative L1
    error and per-row cosine over d = 64 and 128 on random and outlier inputs, and the tier speeds
    ("not recorded" without the record)."""
    h200 = hardware.GPUS["H200"]
    plan = tiling.plan_int8(INT8_D, INT8_STORAGE)
    subgroups = plan.workgroup_size // hardware.WARP_SIZE
    blocks = (plan.br // tiling.MMA_M) * (plan.bc // tiling.MMA_N)
    out = {"tc_ratio": "%.1f" % (h200.fp16_flops / h200.fp32_flops),
           "i8_d": INT8_D, "i8_br": plan.br, "i8_bc": plan.bc, "i8_m": tiling.MMA_M, "i8_n": tiling.MMA_N,
           "i8_k": tiling.MMA_K, "i8_blocks": blocks, "i8_subgroups": subgroups,
           "i8_subgroup_size": hardware.WARP_SIZE, "i8_rounds": blocks // subgroups,
           "i8_ksteps": INT8_D // tiling.MMA_K, "i8_levels": 2 * flash_wgsl_int8.INT8_MAX + 1}
    record = measured.record("webgpu_h200.json") if record is None else record
    names = ("i8_offer", "i8_acc_n", "i8_rand_rel_l1", "i8_rand_cos", "i8_out_rel_l1", "i8_out_cos", "i8_out_verdict",
             "i8_bar", "f32_out_rel_l1", "i8_tflops", "f32_tflops", "sdpa_tflops", "i8_peak")
    if record is None:
        out.update({name: "not recorded" for name in names})
        return out
    acc = {}
    for key in claims.INT8_ACCURACY_KEYS:  # "accuracy[engine=dawn,tier=T,d=D,inputs=I,variant=None].F"
        tier, inputs, field = _ACC_KEY.match(key).groups()
        acc.setdefault((tier, inputs, field), []).append(claims.resolve(record, key))
    rows = [claims.resolve(record, key.rsplit(".", 1)[0]) for key in claims.INT8_ACCURACY_KEYS]
    bar = claims.resolve(record, "tiers.parameters.validity.int8").replace("<=", "≤").replace(">=", "≥")
    outlier_valid = all(row["valid"] for row in rows if row["tier"] == "int8" and row["inputs"] == "outlier")
    speed = {name: claims.resolve(record, key) for name, key in claims.TIER_SPEED_KEYS.items()}
    out.update({
        "i8_offer": subgroup_matrix_offer(claims.resolve(record, DAWN_MATRIX_CONFIGS)),
        "i8_acc_n": "{:,}".format(rows[0]["n"]),
        "i8_rand_rel_l1": "%.3f" % max(acc[("int8", "random", "rel_l1")]),
        "i8_rand_cos": "%.4f" % min(acc[("int8", "random", "cos_min")]),
        "i8_out_rel_l1": "%.3f" % max(acc[("int8", "outlier", "rel_l1")]),
        "i8_out_cos": "%.3f" % min(acc[("int8", "outlier", "cos_min")]),
        "i8_out_verdict": "within" if outlier_valid else "which fails",
        "i8_bar": bar,
        "f32_out_rel_l1": "%.1e" % max(acc[("portable", "outlier", "rel_l1")]),
        "i8_tflops": "%.1f" % speed["int8"], "f32_tflops": "%.1f" % speed["portable"],
        "sdpa_tflops": "%.0f" % speed["sdpa"], "i8_peak": "%g" % speed["int8_peak"],
    })
    return out


DAWN_MATRIX_CONFIGS = "engines[engine=dawn].adapter_info.subgroupMatrixConfigs"  # in webgpu_h200.json


def subgroup_matrix_offer(configs: Any) -> str:
    """The adapter's ``subgroupMatrixConfigs`` in words: 'only integer types: u8×u8→u32 and
    i8×i8→i32, each at M×N×K = 16×16×32 and 16×8×32' (types grouped by the shapes they come in)."""
    shapes = {}  # type: Dict[str, list]
    for c in configs:
        kind = "{0}×{0}→{1}".format(c["componentType"], c["resultComponentType"])
        shapes.setdefault(kind, []).append("{M}×{N}×{K}".format(**c))
    integer = all(c["componentType"][0] in "iu" for c in configs)
    groups = {}  # type: Dict[tuple, list]
    for kind, sizes in shapes.items():
        groups.setdefault(tuple(sizes), []).append(kind)
    words = "; ".join("{}{} at M×N×K = {}".format(" and ".join(kinds), ", each" if len(kinds) > 1 else "",
                                                  " and ".join(sizes)) for sizes, kinds in groups.items())
    return ("only integer types: " if integer else "") + words


def smallest_winning_m(n: int, d: int) -> int:
    """The smallest power of two M at which Algorithm 1's forward moves fewer HBM elements than
    standard attention for an n×n head of width d (the guided lab's small-M step asks for it)."""
    standard = io_model.standard_accesses(n, n, d)
    m = 16
    while io_model.flash_accesses(n, n, d, m) >= standard:
        m *= 2
    return m


__all__ = ["CELL_LIMITS", "cell_fa2", "cell_ring", "int8_tier_numbers", "loop_order_bytes", "output_update_ops", "page_numbers",
           "ring_step", "smallest_winning_m"]
