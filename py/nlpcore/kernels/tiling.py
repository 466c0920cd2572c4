"""The tile plan for ``wgsl/flash_fwd.wgsl``: how big a query tile (Br rows) and a key/value
tile (Bc rows) may be so that everything one workgroup keeps in ``var<workgroup>`` memory fits
the WebGPU limit ``maxComputeWorkgroupStorageSize`` (16384 bytes by default; a page that asks
for the default device gets exactly this much).

This is FlashAttention's SRAM budget (Dao et al. 2022, arXiv:2205.14135, Algorithm 1 line 1:
"set block sizes Bc = ceil(M / 4d), Br = min(ceil(M / 4d), d)") restated for a GPU whose
on-chip memory per workgroup is a hard, portable 16 KiB. The shader keeps these arrays per
workgroup (element counts; the first three hold input elements of ``dtype_bytes`` each, the
rest are float32 accumulators, as in every FlashAttention kernel; each array counts rounded up
to a multiple of 16 bytes, as the WebGPU spec counts it):

    q_tile     Br x d      the query tile Q_i, loaded once
    k_tile     Bc x d      the key tile K_j, reloaded for every j
    v_tile     Bc x dv     the value tile V_j, reloaded for every j
    s_tile     Br x Bc     scores S_ij, overwritten in place by P~_ij = exp(S_ij - m_new)
    o_tile     Br x dv     the unnormalised output accumulator O_i
    m_row      Br          running row max m_i
    l_row      Br          running row sum l_i of exp(S - m_i)
    alpha_row  Br          exp(m_old - m_new), the rescale factor of this step

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

_DTYPE_BYTES = (2, 4)  # float16 tiles or float32 tiles; the shader itself is float32-only


@dataclass(frozen=True)
class TilePlan:
    """Block sizes and the workgroup memory they use.

    Attributes:
        d: head dimension of q and k.
        dv: head dimension of v (and o).
        dtype_bytes: bytes per element of the staged q/k/v tiles (4 for the float32 shader).
        br: query rows per workgroup (Br), one workgroup per query tile.
        bc: key/value rows per staged tile (Bc).
        workgroup_size: invocations per workgroup; every loop in the shader strides by it,
            so any size works and it only changes how the work is shared.
        storage_limit: the byte budget the plan was made for.
        arrays: (name, bytes) of every ``var<workgroup>`` array, in the shader's order.
        bytes_used: their sum, always <= storage_limit.
    """

    d: int
    dv: int
    dtype_bytes: int
    br: int
    bc: int
    workgroup_size: int
    storage_limit: int
    arrays: Tuple[Tuple[str, int], ...]
    bytes_used: int

    def constants(self) -> Dict[str, int]:
        """The shader's ``override`` constants, by their WGSL names."""
        return {"BR": self.br, "BC": self.bc, "D": self.d, "DV": self.dv, "WG": self.workgroup_size}

    def as_dict(self) -> dict:
        """Plain data for the page: every field, with ``arrays`` as a list of dicts."""
        return {
            "d": self.d,
            "dv": self.dv,
            "dtype_bytes": self.dtype_bytes,
            "br": self.br,
            "bc": self.bc,
            "workgroup_size": self.workgroup_size,
            "storage_limit": self.storage_limit,
            "arrays": [{"name": n, "bytes": b} for n, b in self.arrays],
            "bytes_used": self.bytes_used,
        }


def _storage_bytes(elements: int, element_bytes: int) -> int:
    """Bytes one workgroup array counts for: the WebGPU spec sums roundUp(16, SizeOf(T)) over
    the workgroup variables an entry point uses when it checks maxComputeWorkgroupStorageSize
    (Dawn enforces this; a plan summing raw sizes can overshoot by up to 15 bytes per array)."""
    size = elements * element_bytes
    return (size + 15) // 16 * 16


def workgroup_arrays(br: int, bc: int, d: int, dv: int, dtype_bytes: int) -> Tuple[Tuple[str, int], ...]:
    """(name, bytes) of each workgroup array for tiles Br x Bc; see the module docstring."""
    acc = ACCUMULATOR_BYTES
    return (
        ("q_tile", _storage_bytes(br * d, dtype_bytes)),
        ("k_tile", _storage_bytes(bc * d, dtype_bytes)),
        ("v_tile", _storage_bytes(bc * dv, dtype_bytes)),
        ("s_tile", _storage_bytes(br * bc, acc)),
        ("o_tile", _storage_bytes(br * dv, acc)),
        ("m_row", _storage_bytes(br, acc)),
        ("l_row", _storage_bytes(br, acc)),
        ("alpha_row", _storage_bytes(br, acc)),
    )


def bytes_needed(br: int, bc: int, d: int, dv: int, dtype_bytes: int) -> int:
    """Total workgroup bytes for tiles Br x Bc, as WebGPU counts them."""
    return sum(b for _, b in workgroup_arrays(br, bc, d, dv, dtype_bytes))


def largest_d(dtype_bytes: int, storage_limit: int, dv: Optional[int] = None) -> int:
    """The largest head dimension d that fits with the smallest tiles (Br = Bc = 1), with
    dv = d when ``dv`` is None. Returns 0 when not even d = 1 fits."""
    def fits(d: int) -> bool:
        return bytes_needed(1, 1, d, d if dv is None else dv, dtype_bytes) <= storage_limit

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
    workgroup_size: int = 64,
    max_block: int = 64,
) -> TilePlan:
    """Choose Br and Bc so the workgroup arrays fit in ``storage_limit`` bytes.

    Rule: among power-of-two pairs Br, Bc <= max_block that fit, take the largest tile area
    Br·Bc (the work done per staged K/V tile and per round of barriers), breaking ties towards
    the larger Br (each K/V tile is then re-read by fewer query tiles). Pass ``br`` and/or
    ``bc`` to fix either; the other is still chosen by the rule.

    Args:
        d: head dimension of q and k (>= 1).
        dtype_bytes: bytes per staged q/k/v element: 4 (float32, what the shader runs) or 2.
        storage_limit: workgroup memory budget in bytes (WebGPU default 16384).
        dv: head dimension of v, default d.
        br, bc: fixed block sizes, or None to choose.
        workgroup_size: invocations per workgroup, 1..256 (WebGPU's default maximum; 64 is the
            size WebGPU samples use). Larger sizes share a tile's work among more invocations,
            so each loops less (lavapipe's loop limit, see ``flash_fwd.wgsl``'s "Loop budget"),
            but a CPU adapter pays more per barrier.
        max_block: largest Br or Bc considered when choosing (64 keeps one tile's loops short).

    Returns:
        A :class:`TilePlan` with ``bytes_used <= storage_limit``.

    Raises:
        ValueError: when nothing fits (message names the limit, the bytes needed by the
            smallest tiles and the largest d that fits), or when fixed ``br``/``bc`` do not fit.
        TypeError: for non-integer sizes.
    """
    d = positive_int(d, "d")
    dv = d if dv is None else positive_int(dv, "dv")
    dtype_bytes = positive_int(dtype_bytes, "dtype_bytes")
    if dtype_bytes not in _DTYPE_BYTES:
        raise ValueError("dtype_bytes must be 2 (float16) or 4 (float32), got {}".format(dtype_bytes))
    storage_limit = positive_int(storage_limit, "storage_limit")
    workgroup_size = positive_int(workgroup_size, "workgroup_size")
    if workgroup_size > WEBGPU_DEFAULT_INVOCATIONS:
        raise ValueError(
            "workgroup_size must be at most {} (WebGPU's default maxComputeInvocationsPerWorkgroup), "
            "got {}".format(WEBGPU_DEFAULT_INVOCATIONS, workgroup_size)
        )
    max_block = positive_int(max_block, "max_block")
    br = None if br is None else positive_int(br, "br")
    bc = None if bc is None else positive_int(bc, "bc")

    smallest = bytes_needed(br or 1, bc or 1, d, dv, dtype_bytes)
    if smallest > storage_limit:
        if br is None and bc is None:
            raise ValueError(
                "no tile plan fits: d={}, dv={} with {}-byte elements needs at least {} bytes of "
                "workgroup storage (Br = Bc = 1) but the limit (maxComputeWorkgroupStorageSize) is "
                "{} bytes; the largest d that fits is {}".format(
                    d, dv, dtype_bytes, smallest, storage_limit,
                    largest_d(dtype_bytes, storage_limit, None if dv == d else dv),
                )
            )
        raise ValueError(
            "br={} and bc={} with d={}, dv={} need {} bytes of workgroup storage, over the "
            "limit (maxComputeWorkgroupStorageSize) of {} bytes".format(
                br, bc, d, dv, smallest, storage_limit
            )
        )

    powers = [1 << p for p in range(max_block.bit_length()) if (1 << p) <= max_block]
    br_choices = [br] if br is not None else powers
    bc_choices = [bc] if bc is not None else powers
    best = None  # (area, br, bc)
    for r in br_choices:
        for c in bc_choices:
            if bytes_needed(r, c, d, dv, dtype_bytes) <= storage_limit:
                key = (r * c, r, c)
                if best is None or key > best:
                    best = key
    assert best is not None  # (br or 1, bc or 1) fits, checked above
    _, r, c = best
    arrays = workgroup_arrays(r, c, d, dv, dtype_bytes)
    return TilePlan(
        d=d,
        dv=dv,
        dtype_bytes=dtype_bytes,
        br=r,
        bc=c,
        workgroup_size=workgroup_size,
        storage_limit=storage_limit,
        arrays=arrays,
        bytes_used=sum(b for _, b in arrays),
    )
