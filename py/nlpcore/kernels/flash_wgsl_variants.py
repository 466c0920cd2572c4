"""Benchmark variants of the tiled WGSL kernel, each asking the H200 one question (issue 25):
their plans, dispatch specs and NumPy mirrors.

The tiers (``tiling.TIERS``) stay what the lab runs and the record describes; these shaders sit
beside them and are timed by ``bench/webgpu_tiers.py --tier-variants``. When they were written the
portable tier ran at 20.1 TFLOP/s on the H200 at N = 16384, 16 heads, d = 64, the subgroup tier's
first shader 19.8 and the float16 tier 16.3 (bench/results/webgpu_h200_probe_candidates.json);
what bounds them was inferred, never profiled.

- ``lean`` (``wgsl/flash_fwd_lean.wgsl``): the portable kernel with FlashAttention-2's
  bookkeeping: masks only in the tiles that need them, o and l rescaled only when a row's max
  moves. Is the per-four-key softmax bookkeeping, not the multiply-adds, the limit?
- ``half`` (``wgsl/flash_fwd_half.wgsl``): one row per 2·KS invocations of 32 head dims each
  (interleaved, partial scores added by subgroup shuffles), half the registers of q and o an
  invocation and twice the invocations a workgroup, every staged read serving one row as in the
  portable kernel. Is the portable kernel short of warps to hide workgroup-memory latency?
- ``pair`` (``wgsl/flash_fwd_pair.wgsl``): the first subgroup shader's two rows per invocation
  with each row's head dims dealt to its lanes interleaved, so the lanes of a row pair read neighbouring
  16-byte slots of workgroup memory (different banks) instead of slots 128 bytes apart (the same
  bank), and ``lean``'s bookkeeping. Are workgroup-memory reads the limit, once the two-row
  split halves them without bank conflicts?
- ``pair-wg`` (``wgsl/flash_fwd_pair_wg.wgsl``): ``pair`` without subgroups, the row pair's
  partial scores added through workgroup memory (``s_part``, one more barrier a key tile, 8-key
  tiles at d = 64). Does the portable tier keep what ``pair`` gains, on any adapter?
- ``pair-f16`` (``wgsl/flash_fwd_pair_f16.wgsl``): ``pair`` on float16 q, k, v and o, each
  staged element widened to float32 once, as the workgroup copies it, instead of once per use
  (the f16 tier converts every staged element in every row that reads it). Does the f16 tier,
  with the issue's float32 scores, m, l and accumulator, run at the float32 kernel's speed?
- ``lean-fma``, ``pair-fma``, ``pair-fma-f16`` (``wgsl/flash_fwd_lean_fma.wgsl``,
  ``flash_fwd_pair_fma.wgsl``, ``flash_fwd_pair_fma_f16.wgsl``): ``lean``, ``pair`` and
  ``pair-f16`` with every multiply-add written as an ``fma()`` into a running sum, instead of
  ``dot()`` of vec4 slots added together and ``o += p.x·v0 + ... + p.w·v3``: as written, 32
  instructions for 32 multiply-adds of q·k instead of 39, and 4 for 4 of o instead of 5. Is the
  kernel bound by the instructions it issues? Their mirrors are those of the shaders they
  rewrite (an fma() rounds once where a·b + c rounds twice; within the shader bar).

What the H200 answered (bench/results/webgpu_h200_probe_candidates.json and
webgpu_h200_probe_fma.json, each one process beside the tiers, both engines; bench/README.md):
``pair`` ran 23-24 % faster than the subgroup tier's first shader (two rows an invocation, lanes
holding contiguous halves) and ``pair-f16`` 51 % faster than the f16 tier, at ``pair``'s speed;
``lean`` gained 5-6 % over the portable tier, ``pair-wg`` no more than ``lean``, and ``half`` was
slower; the fma() chains gained 10-11 % over ``pair`` and ``pair-f16``, 1-4 % over ``lean``. So
``pair-fma`` became the subgroup tier's shader (flash_wgsl_mirror.TIER_SHADERS,
:data:`flash_wgsl_mirror.SUBGROUP_VARIANT`); it stays here too, timed beside the tier in the
recorded run (bench/results/webgpu_h200.json, whose numbers bench/webgpu_tiers.py's TIER_LIMITS
quotes).

Each variant is sized by :func:`plan` (``tiling.plan`` with the variant's own checks; all stay
within WebGPU's default 16384 bytes) and mirrored by :func:`forward`, which re-enacts the
shader's loop order (flash_wgsl_mirror.lean_workgroup, which the subgroup tier shares): the
lanes' partial scores and how they are added (lane order through ``s_part``, or the subgroup
butterfly), the ``full``-tile test, the rescale only when the max moves, and the rounding points of the data (float16 inputs and output for ``pair-f16``). Pure
NumPy; runs inside Pyodide too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from nlpcore import shaders

from . import flash_wgsl_mirror as mirror
from . import tiling

MASKED_SCORE = mirror.MASKED_SCORE


@dataclass(frozen=True)
class Variant:
    """One benchmark variant.

    Attributes:
        name: its key in :data:`VARIANTS` (and in ``bench/webgpu_tiers.py --tier-variants``).
        shader: its file under ``wgsl/``.
        rows: query rows per invocation, 1 or 2.
        lanes: how a row's head dims are dealt to the invocations that hold it: ``"contiguous"``
            (KS lanes of 64 dims, flash_fwd.wgsl's) or ``"interleaved"`` (2·KS lanes of 32 dims,
            the row's vec4 slots dealt round robin: lane s holds slots s, s + 2·KS, ...).
        adds: how a row's partial scores are added: ``"lane order"`` (through ``s_part`` in
            workgroup memory) or ``"butterfly"`` (subgroup shuffles).
        data: element type of q, k, v and o in global memory, ``"f32"`` or ``"f16"`` (the staged
            tiles are float32 either way).
        tier: the tier whose bar it is checked at and whose rows it is timed beside.
        features: WebGPU features its device needs.
        question: what its timing on the H200 says.
    """

    name: str
    shader: str
    rows: int
    lanes: str
    adds: str
    data: str
    tier: str
    features: Tuple[str, ...]
    question: str


VARIANTS = {v.name: v for v in (
    Variant("lean", "flash_fwd_lean.wgsl", 1, "contiguous", "lane order", "f32", "portable", (),
            "portable layout, masks only where needed and o rescaled only when a row's max moves: is the "
            "per-four-key softmax bookkeeping the limit?"),
    Variant("half", "flash_fwd_half.wgsl", 1, "interleaved", "butterfly", "f32", "subgroup", ("subgroups",),
            "one row per two invocations, half the registers of q and o each: is the portable kernel short of "
            "warps?"),
    Variant("pair", "flash_fwd_pair.wgsl", 2, "interleaved", "butterfly", "f32", "subgroup", ("subgroups",),
            "two rows an invocation with interleaved lanes (no bank conflicts) and lean's bookkeeping: are "
            "workgroup-memory reads the limit?"),
    Variant("pair-wg", "flash_fwd_pair_wg.wgsl", 2, "interleaved", "lane order", "f32", "portable", (),
            "pair without subgroups, partial scores added through workgroup memory (8-key tiles): does the "
            "portable tier keep pair's gain?"),
    Variant("pair-f16", "flash_fwd_pair_f16.wgsl", 2, "interleaved", "butterfly", "f16", "f16",
            ("subgroups", "shader-f16"),
            "pair on float16 data, widened to float32 once as it is staged: does the f16 tier run at the "
            "float32 kernel's speed?"),
    Variant("lean-fma", "flash_fwd_lean_fma.wgsl", 1, "contiguous", "lane order", "f32", "portable", (),
            "lean with every multiply-add an fma() into a running sum: does the portable kernel issue more "
            "instructions than its multiply-adds need?"),
    Variant("pair-fma", "flash_fwd_pair_fma.wgsl", 2, "interleaved", "butterfly", "f32", "subgroup", ("subgroups",),
            "pair with every multiply-add an fma() into a running sum: once its reads are halved, is pair bound "
            "by the instructions it issues?"),
    Variant("pair-fma-f16", "flash_fwd_pair_fma_f16.wgsl", 2, "interleaved", "butterfly", "f16", "f16",
            ("subgroups", "shader-f16"),
            "pair-f16 with pair-fma's fma() chains: does the f16 tier keep what they gain?"),
)}
"""The variants by name."""


def get(variant: str) -> Variant:
    """The :class:`Variant` called ``variant``; ValueError lists the names otherwise."""
    if variant not in VARIANTS:
        raise ValueError("variant must be one of {}, got {!r}".format(sorted(VARIANTS), variant))
    return VARIANTS[variant]


def plan(variant: str, d: int, *, dv: Optional[int] = None, br: Optional[int] = None, bc: Optional[int] = None,
         subgroup_min: Optional[int] = None) -> tiling.TilePlan:
    """The tile plan of ``variant`` for head dims d (q, k) and dv (v, o; default d).

    Rule: float32 tiles within WebGPU's default 16384 bytes, Bc at most ``tiling.UNROLL_BLOCK``:
    ``tiling.plan`` as the portable tier (k_tile, v_tile, s_part) for ``lean``, as the subgroup
    tier (no s_part) for ``half``, ``pair`` and ``pair-f16`` (``half`` with 2·Br·KS invocations
    a workgroup, at most 256); for ``pair-wg``, Br = 128 / KS unless given and Bc the largest
    multiple of 4 whose tiles and s_part (:func:`pair_wg_arrays`) fit. Two rows an invocation
    also need Br even; a subgroup butterfly needs KS a power of two and, when ``subgroup_min``
    (the adapter's smallest subgroup) is given, the 2·KS lanes that share it within one
    subgroup. ValueError names what fails.
    """
    var = get(variant)
    if var.adds == "lane order" and var.rows == 2:
        p = _plan_pair_wg(d, d if dv is None else dv, br, bc)
    else:
        p = tiling.plan(d, 4, tiling.WEBGPU_DEFAULT_STORAGE, dv=dv, br=br, bc=bc,
                        tier="portable" if var.adds == "lane order" else "subgroup", max_block=tiling.UNROLL_BLOCK)
    if var.lanes == "interleaved" and var.rows == 1:  # 2·KS invocations a row
        if 2 * p.workgroup_size > tiling.WEBGPU_DEFAULT_INVOCATIONS:
            raise ValueError("the {} variant gives each row 2·ks invocations: br={} rows of ks={} make {}, over "
                             "WebGPU's default of {}".format(variant, p.br, p.ks, 2 * p.workgroup_size,
                                                             tiling.WEBGPU_DEFAULT_INVOCATIONS))
        p = dataclasses.replace(p, workgroup_size=2 * p.workgroup_size)
    if var.rows == 2:
        if p.br % 2:
            raise ValueError("the {} variant gives each invocation two rows, so br must be even, got {}".format(
                variant, p.br))
    if var.adds == "butterfly" and subgroup_min is not None and 2 * p.ks > subgroup_min:
        raise ValueError("the {} variant adds a row's partial scores over 2·ks = {} invocations of one "
                         "subgroup, but the adapter's subgroups may have only {}".format(
                             variant, 2 * p.ks, subgroup_min))
    return p


def pair_wg_arrays(br: int, bc: int, ks: int) -> Tuple[Tuple[str, int], ...]:
    """(name, bytes) of ``flash_fwd_pair_wg.wgsl``'s workgroup arrays: the K and V tiles (Bc keys x
    KS·16 vec4 slots each) and s_part, 2·Br·KS·Bc float32 partial scores (every lane's, of both
    its rows, for every key of the tile), each rounded up to 16 bytes as WebGPU counts them."""
    tile = tiling._storage_bytes(bc * ks * tiling.CHUNK4, 16)
    return (("k_tile", tile), ("v_tile", tile), ("s_part", tiling._storage_bytes(2 * br * ks * bc, 4)))


def _plan_pair_wg(d: int, dv: int, br: Optional[int], bc: Optional[int]) -> tiling.TilePlan:
    ks = tiling.lanes_needed(d, dv)
    limit = tiling.WEBGPU_DEFAULT_STORAGE
    br = tiling.DEFAULT_INVOCATIONS // ks if br is None else br
    if br < 2 or br * ks > tiling.WEBGPU_DEFAULT_INVOCATIONS:
        raise ValueError("pair-wg: br={} rows of ks={} lanes: need at least one row pair and at most {} "
                         "invocations".format(br, ks, tiling.WEBGPU_DEFAULT_INVOCATIONS))

    def used(c):
        return sum(n for _, n in pair_wg_arrays(br, c, ks))

    if bc is None:
        bc = 0
        while bc + tiling.KEY_STEP <= tiling.UNROLL_BLOCK and used(bc + tiling.KEY_STEP) <= limit:
            bc += tiling.KEY_STEP
    elif bc % tiling.KEY_STEP:
        raise ValueError("bc must be a multiple of {}, got {}".format(tiling.KEY_STEP, bc))
    if bc == 0 or used(bc) > limit:
        raise ValueError("no pair-wg plan fits: br={}, bc={} with d={}, dv={} need {} bytes of workgroup storage, "
                         "over the limit of {}".format(br, bc or tiling.KEY_STEP, d, dv,
                                                      used(bc or tiling.KEY_STEP), limit))
    arrays = pair_wg_arrays(br, bc, ks)
    return tiling.TilePlan(d=d, dv=dv, dtype_bytes=4, br=br, bc=bc, ks=ks, workgroup_size=br * ks,
                           spart=br * ks * bc // 2, storage_limit=limit, arrays=arrays,
                           bytes_used=sum(n for _, n in arrays), tier="portable")


def _data_plan(p: tiling.TilePlan, var: Variant) -> tiling.TilePlan:
    """The plan ``flash_wgsl_mirror.prepare`` checks the inputs against: ``p`` as the tier of the
    variant's data (float16 data is laid out by the f16 tier's rules; the sizes are ``p``'s)."""
    if var.data == "f16":
        return dataclasses.replace(p, dtype_bytes=2, tier="f16")
    return p


def _data_tier(var: Variant) -> str:
    """The tier whose rules ``flash_wgsl_mirror.prepare`` lays the inputs out by."""
    return "f16" if var.data == "f16" else var.tier


def _checked_plan(var: Variant, q, v, p: Optional[tiling.TilePlan]) -> tiling.TilePlan:
    d, dv = np.shape(q)[-1], np.shape(v)[-1]
    if p is None:
        return plan(var.name, d, dv=dv)
    if not isinstance(p, tiling.TilePlan):
        raise TypeError("plan must be a nlpcore.kernels.tiling.TilePlan or None, got {!r}".format(p))
    want = "subgroup" if var.adds == "butterfly" else "portable"
    invocations = p.br * p.ks * (2 if var.lanes == "interleaved" and var.rows == 1 else 1)
    if (p.d, p.dv, p.dtype_bytes, p.tier, p.workgroup_size) != (d, dv, 4, want, invocations) or p.br % var.rows:
        raise ValueError("plan was made for d={}, dv={}, dtype_bytes={}, tier={!r}, br={} but the {} variant needs "
                         "d={}, dv={}: call flash_wgsl_variants.plan({!r}, {}, dv={})".format(
                             p.d, p.dv, p.dtype_bytes, p.tier, p.br, var.name, d, dv, var.name, d, dv))
    return p


def dispatch_spec(q, k, v, *, variant: str, causal: bool = False, mask=None, scale=None,
                  plan: Optional[tiling.TilePlan] = None) -> dict:
    """The dispatch spec that runs ``variant``'s shader on these inputs (shapes, mask, scale and
    bindings as ``flash_wgsl_mirror.dispatch_spec``); the composed WGSL travels in ``code``,
    ``meta`` names the variant and holds its plan. ``plan`` defaults to :func:`plan`."""
    var = get(variant)
    p = _checked_plan(var, q, v, plan)
    spec = mirror.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=_data_plan(p, var),
                                tier=_data_tier(var))
    spec.update(shader=var.shader, code=shaders.text(var.shader), constants=p.constants(),
                features=list(var.features))
    spec["meta"] = dict(spec["meta"], plan=p.as_dict(), variant=var.name)
    return spec


def forward(q, k, v, *, variant: str, causal: bool = False, mask=None, scale=None,
            plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """O = softmax(scale · Q Kᵀ, masked) V as ``variant``'s shader computes it, in its loop order.

    Args:
        q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv), causal, mask, scale: as
            ``flash_wgsl_mirror.forward``.
        variant: a name of :data:`VARIANTS`.
        plan: the variant's tile plan, default :func:`plan`.

    Returns:
        o (..., Nq, dv) float32 (float16 for float16 data), 0 in rows with no allowed key; lse
        (..., Nq) float32, -inf in rows with no allowed key.
    """
    var = get(variant)
    p = _checked_plan(var, q, v, plan)
    launch = mirror.prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=_data_plan(p, var),
                            tier=_data_tier(var))
    n_batch, n_q, _ = launch.q.shape
    dv = launch.v.shape[2]
    o = np.zeros(n_batch * n_q * dv, dtype=np.float32)  # the shader's output buffers, flat
    lse = np.zeros(n_batch * n_q, dtype=np.float32)
    for b in range(n_batch):  # workgroup_id.z
        for i in range(-(-n_q // p.br)):  # workgroup_id.x
            _workgroup(launch, var, b, i, o, lse)
    return mirror._decode(o, lse, launch.batch + (n_q,), dv, np.float16 if var.data == "f16" else np.float32)


lane_partials = mirror.lane_partials


def _workgroup(launch: mirror.Launch, var: Variant, b: int, i: int, o: np.ndarray, lse: np.ndarray) -> None:
    """One workgroup of the variant's ``main`` (flash_wgsl_mirror.lean_workgroup, by its lanes and adds)."""
    mirror.lean_workgroup(launch, var.lanes, var.adds, b, i, o, lse)
