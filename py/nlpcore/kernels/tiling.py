"""The tile plan for ``wgsl/flash_fwd.wgsl``: how many query rows one workgroup owns (Br), how
many invocations share a query row (KS), and how many keys a staged key/value tile holds (Bc),
so that what one workgroup keeps in ``var<workgroup>`` memory fits the WebGPU limit
``maxComputeWorkgroupStorageSize`` (16384 bytes by default; a page that asks for the default
device gets exactly this much) and a workgroup has at most 256 invocations.

This is FlashAttention's SRAM budget (Dao et al. 2022, arXiv:2205.14135, Algorithm 1 line 1:
"set block sizes Bc = ceil(M / 4d), Br = min(ceil(M / 4d), d)") restated for a GPU whose
on-chip memory per workgroup is a hard, portable 16 KiB, in FlashAttention-2's work split
(Dao 2023, arXiv:2307.08691): each query row's q, output accumulator o and softmax statistics
live in the *registers* of the KS invocations that own the row, so workgroup memory holds only
what all rows share, the staged key and value tiles (element counts; each array counts rounded
up to a multiple of 16 bytes, as the WebGPU spec counts it):

    k_tile   Bc x KS·16 vec4 slots    the key tile K_j, reloaded for every j
    v_tile   Bc x KS·16 vec4 slots    the value tile V_j, reloaded for every j
    s_part   Br·KS·Bc (KS > 1) or 1   partial scores, added across the KS lanes of a row

where each of the KS = ceil(max(d, dv) / 64) lanes of a row holds 64 head dims (:data:`CHUNK4`
vec4 slots, zero-padded past d) of q and of o in registers. The K/V tiles take
4·``dtype_bytes`` bytes a slot, the partial scores are float32 accumulators whatever the input.
Keys are taken four at a time (a vec4 of scores), so Bc is a multiple of 4.

The plan is computed once, here, and handed to the shader as WGSL ``override`` constants
(:meth:`TilePlan.constants`) and to the NumPy mirror as plain numbers, so the tile sizes are
never typed twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ._checks import positive_int

WEBGPU_DEFAULT_STORAGE = 16384
"""Bytes: the WebGPU spec's default ``maxComputeWorkgroupStorageSize``."""

WEBGPU_DEFAULT_INVOCATIONS = 256
"""The WebGPU spec's default ``maxComputeInvocationsPerWorkgroup``."""

ACCUMULATOR_BYTES = 4
"""Scores, the output accumulator and row statistics are float32 whatever the input dtype."""

CHUNK4 = 16
"""The shader's ``const CHUNK4``: vec4 slots of q (and of o) one invocation keeps in registers,
64 floats. A row wider than that is shared by KS = ceil(width / 64) invocations."""

KEY_STEP = 4
"""Keys the shader takes at a time (a vec4 of scores): Bc is a multiple of it."""

MAX_BLOCK = 64
"""Largest Bc the rule considers (the K/V tiles of d = 64 already fill the budget at Bc = 28)."""

DEFAULT_INVOCATIONS = 128
"""Invocations per workgroup when the caller does not fix ``br``: Br = 128 / KS query rows.
Measured on the H200 (bench/results/webgpu_h200_tuning.json, d = 64): 128 rows ran 7–20 %
faster than 64 and 256 at N >= 2048, and 32 rows half as fast (FlashAttention-2 also uses
64–128 rows per thread block)."""

_DTYPE_BYTES = (2, 4)  # float16 tiles (the float16 tier) or float32 tiles

TIERS = ("portable", "subgroup", "f16", "int8")
"""The kernel's tiers, slowest and most portable first (each needs more of the adapter):
``portable`` wgsl/flash_fwd.wgsl, float32, WebGPU's default 16384 bytes (what every adapter has);
``subgroup`` wgsl/flash_fwd_pair_fma.wgsl, float32, two rows an invocation, row partials added by
subgroup shuffles (``subgroups``), also within the default budget; ``f16`` wgsl/flash_fwd_f16.wgsl, float16 data,
float32 arithmetic (``shader-f16``), sized from the adapter's workgroup storage; ``int8``
wgsl/flash_fwd_int8.wgsl, S = QKᵀ on int8 subgroup matrices (tensor cores,
``chromium-experimental-subgroup-matrix`` with an i8 x i8 -> i32 configuration), sized likewise."""

S_TILE = 2048
"""The int8 shader's ``const S_TILE``: int32 elements of its score tile (Dawn stores subgroup
matrices only into constant-length workgroup arrays), so Br·Bc <= S_TILE."""

UNROLL_BLOCK = 28
"""Largest Bc the tiers' plans choose. An earlier probe on the H200 read 3.5 TFLOP/s with Bc = 32
against 19 with Bc = 28, but it timed the first dispatches after the GPU had idled (its clock
drops within a second; bench/results/webgpu_h200_probe.json shows such rows 2-4x slow). Timed
with the clock warm (bench/results/webgpu_h200.json, ``variants``), the float16 tier ran as fast
with Bc = 56 as with 28, and the portable tier with Bc = 16 as with 28: key tiles past 28 gain
nothing measured, so the plans stay at 28 (the portable tier's K/V tiles cannot pass 31 keys in
16384 bytes at d = 64 anyway)."""

MMA_M, MMA_N, MMA_K = 16, 16, 32
"""The int8 tier's subgroup-matrix shape: 16 query rows x 16 keys per result, 32 head dims per
step (a configuration NVIDIA's Vulkan driver offers through Dawn)."""


@dataclass(frozen=True)
class TilePlan:
    """Block sizes and the workgroup memory they use.

    Attributes:
        d: head dimension of q and k.
        dv: head dimension of v (and o).
        dtype_bytes: bytes per element of the staged k/v tiles (4 for the float32 shader).
        br: query rows per workgroup (Br), one workgroup per query tile.
        bc: keys per staged key/value tile (Bc).
        ks: invocations per query row (KS); each holds 64 head dims of the row's q and o.
        workgroup_size: invocations per workgroup, Br·KS.
        spart: elements of the partial-score array (Br·KS·Bc when KS > 1, else 1, unused).
        storage_limit: the byte budget the plan was made for.
        arrays: (name, bytes) of every ``var<workgroup>`` array, in the shader's order.
        bytes_used: their sum, always <= storage_limit.
        tier: which shader the plan is for (:data:`TIERS`).
        subgroup_size: the subgroup size the plan was made for (the staged int8 variant's
            ``SG``, :func:`plan_int8_staged`; not among :meth:`constants`).
    """

    d: int
    dv: int
    dtype_bytes: int
    br: int
    bc: int
    ks: int
    workgroup_size: int
    spart: int
    storage_limit: int
    arrays: Tuple[Tuple[str, int], ...]
    bytes_used: int
    tier: str = "portable"
    subgroup_size: int = 32

    def constants(self) -> Dict[str, int]:
        """The shader's ``override`` constants, by their WGSL names (the subgroup and int8
        shaders have no s_part, so no SPART)."""
        out = {"BR": self.br, "BC": self.bc, "D": self.d, "DV": self.dv, "KS": self.ks, "SPART": self.spart}
        if self.tier in ("subgroup", "int8"):
            del out["SPART"]
        return out

    def as_dict(self) -> dict:
        """Plain data for the page: every field, with ``arrays`` as a list of dicts."""
        return {
            "d": self.d,
            "dv": self.dv,
            "dtype_bytes": self.dtype_bytes,
            "br": self.br,
            "bc": self.bc,
            "ks": self.ks,
            "workgroup_size": self.workgroup_size,
            "spart": self.spart,
            "storage_limit": self.storage_limit,
            "arrays": [{"name": n, "bytes": b} for n, b in self.arrays],
            "bytes_used": self.bytes_used,
            "tier": self.tier,
        }


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _storage_bytes(elements: int, element_bytes: int) -> int:
    """Bytes one workgroup array counts for: the WebGPU spec sums roundUp(16, SizeOf(T)) over
    the workgroup variables an entry point uses when it checks maxComputeWorkgroupStorageSize
    (Dawn enforces this; a plan summing raw sizes can overshoot by up to 15 bytes per array)."""
    size = elements * element_bytes
    return (size + 15) // 16 * 16


def lanes_needed(d: int, dv: int) -> int:
    """The fewest invocations per row (KS) whose 64-float register chunks hold a row of q and of o."""
    return _ceil_div(max(d, dv), 4 * CHUNK4)


def spart_elements(br: int, bc: int, ks: int) -> int:
    """Length of ``s_part``: Br·KS·Bc partial scores when a row has several lanes, else 1 (a
    WGSL array cannot be empty; the KS = 1 shader never touches it)."""
    return br * ks * bc if ks > 1 else 1


def workgroup_arrays(br: int, bc: int, d: int, dv: int, dtype_bytes: int,
                     ks: Optional[int] = None, tier: str = "portable") -> Tuple[Tuple[str, int], ...]:
    """(name, bytes) of each workgroup array for Br rows of KS lanes and Bc-key tiles (KS
    defaults to :func:`lanes_needed`); see the module docstring. The subgroup tier has no s_part;
    the int8 tier stages only V (float32) and keeps the tile's scores S (Br x Bc int32)."""
    ks = lanes_needed(d, dv) if ks is None else ks
    slot = 4 * dtype_bytes
    if tier == "int8":
        return (
            ("v_tile", _storage_bytes(bc * ks * CHUNK4, 16)),
            ("s_tile", _storage_bytes(S_TILE, ACCUMULATOR_BYTES)),
        )
    tiles = (
        ("k_tile", _storage_bytes(bc * ks * CHUNK4, slot)),
        ("v_tile", _storage_bytes(bc * ks * CHUNK4, slot)),
    )
    if tier == "subgroup":
        return tiles
    return tiles + (("s_part", _storage_bytes(spart_elements(br, bc, ks), ACCUMULATOR_BYTES)),)


def bytes_needed(br: int, bc: int, d: int, dv: int, dtype_bytes: int, ks: Optional[int] = None,
                 tier: str = "portable") -> int:
    """Total workgroup bytes for Br rows, Bc-key tiles and KS lanes a row, as WebGPU counts them."""
    return sum(b for _, b in workgroup_arrays(br, bc, d, dv, dtype_bytes, ks, tier))


def largest_d(dtype_bytes: int, storage_limit: int, dv: Optional[int] = None) -> int:
    """The largest head dimension d that fits with the smallest tiles (Br = 1, Bc = 4, the
    fewest lanes a row, at most 256 invocations), with dv = d when ``dv`` is None. Returns 0
    when not even d = 1 fits."""
    def fits(d: int) -> bool:
        w = d if dv is None else dv
        ks = lanes_needed(d, w)
        return ks <= WEBGPU_DEFAULT_INVOCATIONS and bytes_needed(1, KEY_STEP, d, w, dtype_bytes, ks) <= storage_limit

    lo, hi = 0, storage_limit  # fits(lo) or lo == 0; the need grows with d, so bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def plan(
    d: int,
    dtype_bytes: int = 4,
    storage_limit: int = WEBGPU_DEFAULT_STORAGE,
    *,
    dv: Optional[int] = None,
    br: Optional[int] = None,
    bc: Optional[int] = None,
    ks: Optional[int] = None,
    max_block: int = MAX_BLOCK,
    tier: Optional[str] = None,
) -> TilePlan:
    """Choose Br, KS and Bc so the workgroup arrays fit in ``storage_limit`` bytes.

    Rule: KS is the fewest lanes whose registers hold a row (:func:`lanes_needed`) unless given;
    Br is :data:`DEFAULT_INVOCATIONS` / KS (or fewer, halving, until the arrays fit) unless
    given; Bc is then the
    largest multiple of 4 (:data:`KEY_STEP`) <= ``max_block`` that fits — the most work per
    round of barriers, and the fewest times each query tile's workgroup waits on a staged tile.

    Args:
        d: head dimension of q and k (>= 1).
        dtype_bytes: bytes per staged k/v element: 4 (float32, what the shader runs) or 2.
        storage_limit: workgroup memory budget in bytes (WebGPU default 16384).
        dv: head dimension of v, default d.
        br, bc: fixed block sizes (bc a multiple of 4), or None to choose.
        ks: invocations per query row, at least :func:`lanes_needed` (more lanes pad each
            row with zeros: for tests of the wide-row path), or None for the fewest.
        max_block: largest Bc considered when choosing.
        tier: ``"portable"``, ``"subgroup"`` (no s_part) or ``"f16"`` (dtype_bytes 2); the int8
            tier has its own rule, :func:`plan_int8`. None (the default) follows ``dtype_bytes``:
            ``"f16"`` for 2, ``"portable"`` for 4.

    Returns:
        A :class:`TilePlan` with ``bytes_used <= storage_limit`` and ``workgroup_size <= 256``.

    Raises:
        ValueError: when nothing fits (message names the limit, the bytes needed by the
            smallest tiles and the largest d that fits), or when fixed sizes do not fit.
        TypeError: for non-integer sizes.
    """
    d = positive_int(d, "d")
    dv = d if dv is None else positive_int(dv, "dv")
    dtype_bytes = positive_int(dtype_bytes, "dtype_bytes")
    if dtype_bytes not in _DTYPE_BYTES:
        raise ValueError("dtype_bytes must be 2 (float16) or 4 (float32), got {}".format(dtype_bytes))
    if tier is None:
        tier = "f16" if dtype_bytes == 2 else "portable"
    if tier not in ("portable", "subgroup", "f16"):
        raise ValueError("tier must be 'portable', 'subgroup' or 'f16' (plan_int8 plans 'int8'), got {!r}".format(tier))
    if tier == "f16" and dtype_bytes != 2:
        raise ValueError("the f16 tier stages 2-byte elements: tier='f16' with dtype_bytes={}".format(dtype_bytes))
    storage_limit = positive_int(storage_limit, "storage_limit")
    max_block = positive_int(max_block, "max_block")
    br = None if br is None else positive_int(br, "br")
    bc = None if bc is None else positive_int(bc, "bc")
    if bc is not None and bc % KEY_STEP:
        raise ValueError("bc must be a multiple of {} (the shader takes keys {} at a time), got {}".format(
            KEY_STEP, KEY_STEP, bc))
    need = lanes_needed(d, dv)
    if ks is None:
        ks = need
    else:
        ks = positive_int(ks, "ks")
        if ks < need:
            raise ValueError(
                "ks={} lanes cannot hold a row of d={}, dv={}: each lane keeps {} floats of q "
                "and of o in registers, so ks must be at least {}".format(ks, d, dv, 4 * CHUNK4, need))
    if tier == "subgroup" and ks & (ks - 1):
        raise ValueError("the subgroup tier adds a row's partial scores by a shuffle butterfly over 2·ks "
                         "invocations, so ks must be a power of two; d={}, dv={} need ks={}".format(d, dv, ks))
    if ks > WEBGPU_DEFAULT_INVOCATIONS:
        raise ValueError(
            "d={}, dv={} need {} invocations per query row, over WebGPU's default "
            "maxComputeInvocationsPerWorkgroup of {}; the largest d that fits is {}".format(
                d, dv, ks, WEBGPU_DEFAULT_INVOCATIONS,
                largest_d(dtype_bytes, storage_limit, None if dv == d else dv)))
    if br is None:
        br = max(1, DEFAULT_INVOCATIONS // ks)
        while br > 1 and bytes_needed(br, bc or KEY_STEP, d, dv, dtype_bytes, ks, tier) > storage_limit:
            br //= 2  # the partial scores of wide rows (KS > 1) grow with Br
    elif br * ks > WEBGPU_DEFAULT_INVOCATIONS:
        raise ValueError(
            "br={} rows of ks={} lanes make {} invocations per workgroup, over WebGPU's default "
            "maxComputeInvocationsPerWorkgroup of {}".format(br, ks, br * ks, WEBGPU_DEFAULT_INVOCATIONS))

    step = KEY_STEP
    smallest = bytes_needed(br, bc or step, d, dv, dtype_bytes, ks, tier)
    if smallest > storage_limit:
        if bc is None and bytes_needed(1, step, d, dv, dtype_bytes, ks, tier) > storage_limit:
            raise ValueError(
                "no tile plan fits: d={}, dv={} with {}-byte elements needs at least {} bytes of "
                "workgroup storage (Br = 1, Bc = {}) but the limit (maxComputeWorkgroupStorageSize) is "
                "{} bytes; the largest d that fits is {}".format(
                    d, dv, dtype_bytes, bytes_needed(1, step, d, dv, dtype_bytes, ks, tier), step, storage_limit,
                    largest_d(dtype_bytes, storage_limit, None if dv == d else dv),
                )
            )
        raise ValueError(
            "br={} and bc={} with d={}, dv={} (ks={}) need {} bytes of workgroup storage, over the "
            "limit (maxComputeWorkgroupStorageSize) of {} bytes".format(
                br, bc or step, d, dv, ks, smallest, storage_limit
            )
        )
    if bc is None:
        bc = step
        while bc + step <= max_block and bytes_needed(br, bc + step, d, dv, dtype_bytes, ks, tier) <= storage_limit:
            bc += step
    arrays = workgroup_arrays(br, bc, d, dv, dtype_bytes, ks, tier)
    return TilePlan(
        d=d,
        dv=dv,
        dtype_bytes=dtype_bytes,
        br=br,
        bc=bc,
        ks=ks,
        workgroup_size=br * ks,
        spart=spart_elements(br, bc, ks),
        storage_limit=storage_limit,
        arrays=arrays,
        bytes_used=sum(b for _, b in arrays),
        tier=tier,
    )


def plan_int8(d: int, storage_limit: int, *, dv: Optional[int] = None, subgroup_size: int = 32,
              invocations_limit: int = WEBGPU_DEFAULT_INVOCATIONS, br: Optional[int] = None,
              bc: Optional[int] = None, max_block: int = UNROLL_BLOCK) -> TilePlan:
    """The int8 tier's plan (wgsl/flash_fwd_int8.wgsl): Br query rows of KS lanes, Bc-key tiles.

    Rule: KS = :func:`lanes_needed`; Br = :data:`DEFAULT_INVOCATIONS` / KS unless given; Bc the
    largest multiple of 16 (:data:`MMA_N`) <= ``max_block`` whose V tile and score tile fit.
    The subgroup matrices add constraints: d a multiple of 32 (:data:`MMA_K`, no padding of the
    head dims), Br a multiple of 16 (:data:`MMA_M`), and Br·KS a multiple of ``subgroup_size``
    (Dawn requires the workgroup's x size to be a multiple of the adapter's largest subgroup).
    ValueError names the constraint that fails.
    """
    d = positive_int(d, "d")
    dv = d if dv is None else positive_int(dv, "dv")
    storage_limit = positive_int(storage_limit, "storage_limit")
    subgroup_size = positive_int(subgroup_size, "subgroup_size")
    invocations_limit = positive_int(invocations_limit, "invocations_limit")
    if d % MMA_K:
        raise ValueError("the int8 tier needs d to be a multiple of {} (one subgroup-matrix step), got d={}".format(
            MMA_K, d))
    ks = lanes_needed(d, dv)
    br = max(MMA_M, DEFAULT_INVOCATIONS // ks) if br is None else positive_int(br, "br")
    if br % MMA_M:
        raise ValueError("br must be a multiple of {} (the subgroup matrices' rows), got {}".format(MMA_M, br))
    if (br * ks) % subgroup_size or br * ks > invocations_limit:
        raise ValueError("br={} rows of ks={} lanes make {} invocations: need a multiple of the subgroup size {} "
                         "and at most {}".format(br, ks, br * ks, subgroup_size, invocations_limit))
    if bc is None:
        bc = 0
        while (bc + MMA_N <= max(max_block, MMA_N) and br * (bc + MMA_N) <= S_TILE
               and bytes_needed(br, bc + MMA_N, d, dv, 4, ks, "int8") <= storage_limit):
            bc += MMA_N
    elif positive_int(bc, "bc") % MMA_N:
        raise ValueError("bc must be a multiple of {} (the subgroup matrices' columns), got {}".format(MMA_N, bc))
    blocks, subgroups = (br // MMA_M) * (bc // MMA_N) if bc else 0, br * ks // subgroup_size
    if bc and blocks % subgroups:
        raise ValueError("br={} x bc={} make {} result blocks of 16 x 16, not a multiple of the {} subgroups of "
                         "{} invocations (the shader gives every subgroup the same number)".format(
                             br, bc, blocks, subgroups, subgroup_size))
    if bc and br * bc > S_TILE:
        raise ValueError("br={} x bc={} scores exceed the shader's s_tile of {} (S_TILE)".format(br, bc, S_TILE))
    if bc == 0 or bytes_needed(br, bc, d, dv, 4, ks, "int8") > storage_limit:
        raise ValueError("no int8 plan fits: br={}, bc={} with d={}, dv={} need {} bytes of workgroup storage, "
                         "over the limit of {}".format(br, bc or MMA_N, d, dv,
                                                       bytes_needed(br, bc or MMA_N, d, dv, 4, ks, "int8"),
                                                       storage_limit))
    arrays = workgroup_arrays(br, bc, d, dv, 4, ks, "int8")
    return TilePlan(d=d, dv=dv, dtype_bytes=1, br=br, bc=bc, ks=ks, workgroup_size=br * ks, spart=1,
                    storage_limit=storage_limit, arrays=arrays, bytes_used=sum(b for _, b in arrays), tier="int8")


INT8_STAGED_TILE = 4096
"""Largest Br·Bc (score tile) and Br·DV (P·V tile) :func:`plan_int8_staged` takes: 16 KiB of
int32 each."""

INT8_STAGED_PAD = 16
"""int8 each row of the staged variant's P, K and V tiles is padded by (its shader's ``PAD``):
rows stay 16-byte aligned for the matrix loads and consecutive rows start in different banks."""


def int8_staged_arrays(br: int, bc: int, d: int, dv: int) -> Tuple[Tuple[str, int], ...]:
    """(name, bytes) of the workgroup arrays of wgsl/flash_fwd_int8_staged.wgsl's main pass: the
    scores S (Br x Bc int32), P8 (Br x Bc int8, rows padded), P·V (Br x DV int32), and the key
    tile's K8 (Bc x D) and V8 (Bc x DV) int8, rows padded, staged once per tile."""
    pad = INT8_STAGED_PAD
    return (
        ("s_tile", _storage_bytes(br * bc, ACCUMULATOR_BYTES)),
        ("p_tile", _storage_bytes(br * (bc + pad), 1)),
        ("pv_tile", _storage_bytes(br * dv, ACCUMULATOR_BYTES)),
        ("k_tile", _storage_bytes(bc * (d + pad), 1)),
        ("v_tile", _storage_bytes(bc * (dv + pad), 1)),
    )


def plan_int8_staged(d: int, storage_limit: int, *, dv: Optional[int] = None, subgroup_size: int = 32,
                     invocations_limit: int = WEBGPU_DEFAULT_INVOCATIONS, br: Optional[int] = None,
                     bc: Optional[int] = None, max_block: int = 64) -> TilePlan:
    """The plan of the int8 tier's staged variant (wgsl/flash_fwd_int8_staged.wgsl: S and P·V on
    int8 subgroup matrices, each key tile's K8 and V8 staged in workgroup memory; a bench
    variant, not :func:`plan_for`'s choice). ``tier`` is "int8" (same passes and buffers).

    Rule: KS = :func:`lanes_needed`; Br = the largest multiple of 16 <= 64 with Br·DV <=
    :data:`INT8_STAGED_TILE` unless given; Bc the largest multiple of 32 (:data:`MMA_K`, the P·V
    step over keys) <= ``max_block`` with Br·Bc <= :data:`INT8_STAGED_TILE` whose
    :func:`int8_staged_arrays` fit ``storage_limit``. Constraints as :func:`plan_int8`, plus dv a
    multiple of 16 and both the S and the P·V result blocks a multiple of the subgroups.
    ValueError names the constraint that fails.
    """
    d = positive_int(d, "d")
    dv = d if dv is None else positive_int(dv, "dv")
    storage_limit = positive_int(storage_limit, "storage_limit")
    subgroup_size = positive_int(subgroup_size, "subgroup_size")
    if d % MMA_K or dv % MMA_N:
        raise ValueError("the staged int8 variant needs d a multiple of {} and dv of {}, got d={}, dv={}".format(
            MMA_K, MMA_N, d, dv))
    ks = lanes_needed(d, dv)
    if br is None:
        br = max(MMA_M, min(64, INT8_STAGED_TILE // dv) // MMA_M * MMA_M)
    if positive_int(br, "br") % MMA_M:
        raise ValueError("br must be a multiple of {} (the subgroup matrices' rows), got {}".format(MMA_M, br))
    if (br * ks) % subgroup_size or br * ks > invocations_limit:
        raise ValueError("br={} rows of ks={} lanes make {} invocations: need a multiple of the subgroup size {} "
                         "and at most {}".format(br, ks, br * ks, subgroup_size, invocations_limit))
    fits = lambda c: sum(b for _, b in int8_staged_arrays(br, c, d, dv)) <= storage_limit  # noqa: E731
    if bc is None:
        bc = 0
        while bc + MMA_K <= max_block and br * (bc + MMA_K) <= INT8_STAGED_TILE and fits(bc + MMA_K):
            bc += MMA_K
    elif positive_int(bc, "bc") % MMA_K:
        raise ValueError("bc must be a multiple of {} (the P·V step over keys), got {}".format(MMA_K, bc))
    if bc == 0 or not fits(bc):
        raise ValueError("no staged int8 plan fits: br={}, bc={} with d={}, dv={} need {} bytes of workgroup "
                         "storage, over the limit of {}".format(
                             br, bc or MMA_K, d, dv, sum(b for _, b in int8_staged_arrays(br, bc or MMA_K, d, dv)),
                             storage_limit))
    subgroups = br * ks // subgroup_size
    for what, blocks in (("S", (br // MMA_M) * (bc // MMA_N)), ("PV", (br // MMA_M) * (dv // MMA_N))):
        if blocks % subgroups:
            raise ValueError("br={}, bc={}, dv={} make {} {} result blocks of 16 x 16, not a multiple of the {} "
                             "subgroups (the shader gives every subgroup the same number)".format(
                                 br, bc, dv, blocks, what, subgroups))
    arrays = int8_staged_arrays(br, bc, d, dv)
    return TilePlan(d=d, dv=dv, dtype_bytes=1, br=br, bc=bc, ks=ks, workgroup_size=br * ks, spart=1,
                    storage_limit=storage_limit, arrays=arrays, bytes_used=sum(b for _, b in arrays), tier="int8",
                    subgroup_size=subgroup_size)


def plan_for(tier: str, d: int, *, dv: Optional[int] = None, limits: Optional[Dict[str, int]] = None,
             subgroup_size: int = 32) -> TilePlan:
    """The plan of ``tier`` for an adapter whose limits are ``limits`` (WebGPU names:
    ``maxComputeWorkgroupStorageSize``, ``maxComputeInvocationsPerWorkgroup``; None = the
    defaults). The portable and subgroup tiers always stay within WebGPU's default 16384 bytes,
    so they run on any device; the f16 and int8 tiers, which need optional features anyway, use
    what the adapter allows. ``subgroup_size``: the adapter's largest subgroup (int8 only)."""
    if tier not in TIERS:
        raise ValueError("tier must be one of {}, got {!r}".format(list(TIERS), tier))
    limits = limits or {}
    storage = int(limits.get("maxComputeWorkgroupStorageSize", WEBGPU_DEFAULT_STORAGE))
    invocations = int(limits.get("maxComputeInvocationsPerWorkgroup", WEBGPU_DEFAULT_INVOCATIONS))
    if tier == "int8":
        return plan_int8(d, storage, dv=dv, subgroup_size=subgroup_size, invocations_limit=invocations)
    if tier == "f16":
        return plan(d, 2, storage, dv=dv, tier="f16", max_block=UNROLL_BLOCK)
    return plan(d, 4, WEBGPU_DEFAULT_STORAGE, dv=dv, tier=tier, max_block=UNROLL_BLOCK)
