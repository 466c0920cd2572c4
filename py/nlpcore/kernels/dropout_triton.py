"""Dropout's keep-mask in Triton: the hash of ``nlpcore.kernels.dropout``, drawn in registers.

What you will learn here: how a fused-dropout kernel gets the *same* keep bits in the forward
and the backward pass without storing an N×N mask (Dao et al. 2022, arXiv:2205.14135,
Algorithms 2 and 4). Each bit is a pure function of (seed, b·H + h, row, column)::

    key(bh, row) = mix(mix(mix(seed) + bh) + row)       one per query row of a tile
    key(col)     = mix((mix(seed) XOR SALT) + col)      one per key column of a tile
    keep         = (key(bh, row) XOR key(col)) · M1  >=  round(p · 2³²)

``dropout.py`` explains the hash and tests its statistics; this module is that hash with uint32
arithmetic in Triton, so a kernel's mask equals NumPy's ``keep_mask`` bit for bit. A tile of
Br × Bc bits costs Br + Bc mixes and, per entry, one XOR, one multiply and one compare.

Triton promotes integer literals above 2³¹ − 1 awkwardly, so the constants and the host's
arguments travel as the int32 with the same bits and the kernels bitcast them to uint32.

Dependency rule: needs triton; imports only ``dropout`` from this package; imported by the
Triton kernels, never by a module the browser runs.
"""

from __future__ import annotations

from typing import NamedTuple

import triton
import triton.language as tl

from . import dropout

__all__ = ["MIX_M1", "MIX_M2", "COL_SALT", "mix", "row_keys", "col_keys", "keep", "keep_t",
           "keep_mask_kernel", "DropArgs", "drop_args"]

# lowbias32's multipliers and the column keys' salt (nlpcore.kernels.dropout), as the int32
# values with the same bits. Globals read inside @triton.jit code must be constexpr.
MIX_M1 = tl.constexpr(0x7FEB352D)
MIX_M2 = tl.constexpr(0x846CA68B - 2 ** 32)
COL_SALT = tl.constexpr(dropout.SALT - 2 ** 32)


@triton.jit
def mix(x):
    """lowbias32 on uint32 (``nlpcore.kernels.dropout.mix``): every output bit depends on every
    input bit; multiplications wrap modulo 2³²."""
    x = x ^ (x >> 16)
    x = x * tl.full([], MIX_M1, tl.int32).to(tl.uint32, bitcast=True)
    x = x ^ (x >> 15)
    x = x * tl.full([], MIX_M2, tl.int32).to(tl.uint32, bitcast=True)
    return x ^ (x >> 16)


@triton.jit
def row_keys(seed_key, pid_bh, rows):
    """key(bh, row) = mix(mix(mix(seed) + bh) + row) for a block of rows (R,) uint32;
    ``seed_key`` = mix(seed) comes from the host as the int32 with the same bits."""
    head = mix(seed_key.to(tl.uint32, bitcast=True) + pid_bh.to(tl.uint32))
    return mix(head + rows.to(tl.uint32))


@triton.jit
def col_keys(seed_key, cols):
    """key(col) = mix((mix(seed) XOR SALT) + col) for a block of columns (C,) uint32."""
    salt = seed_key.to(tl.uint32, bitcast=True) ^ tl.full([], COL_SALT, tl.int32).to(tl.uint32, bitcast=True)
    return mix(salt + cols.to(tl.uint32))


@triton.jit
def keep(row_keys, col_keys, thresh):
    """Keep bits of a (R, C) tile: (key(row) XOR key(col)) · M1 >= threshold (uint32): one
    XOR, one multiply and one compare per entry; the keys cost one mix per row and column."""
    bits = (row_keys[:, None] ^ col_keys[None, :]) * tl.full([], MIX_M1, tl.int32).to(tl.uint32, bitcast=True)
    return bits >= thresh.to(tl.uint32, bitcast=True)


@triton.jit
def keep_t(row_keys, col_keys, thresh):
    """The same bits as :func:`keep`, drawn directly in transposed (C, R) form (keys along
    rows), so the backward needs no transpose of the mask."""
    bits = (row_keys[None, :] ^ col_keys[:, None]) * tl.full([], MIX_M1, tl.int32).to(tl.uint32, bitcast=True)
    return bits >= thresh.to(tl.uint32, bitcast=True)


@triton.jit(do_not_specialize=["seed_key", "thresh"])
def keep_mask_kernel(OUT, n_q, n_k, seed_key, thresh, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Writes the keep-mask (B·H, Nq, Nk) as int8, for tests and teaching (the attention
    kernels never do); one program per (row block, column block, b·H + h)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bits = keep(row_keys(seed_key, pid_bh, rows), col_keys(seed_key, cols), thresh)
    ptrs = OUT + pid_bh.to(tl.int64) * n_q * n_k + rows[:, None] * n_k + cols[None, :]
    tl.store(ptrs, bits.to(tl.int8), mask=(rows[:, None] < n_q) & (cols[None, :] < n_k))


def _as_int32(u: int) -> int:
    """The int32 with the bits of uint32 u (kernel arguments are signed; kernels bitcast back)."""
    return u - 2 ** 32 if u >= 2 ** 31 else u


class DropArgs(NamedTuple):
    """The kernels' dropout arguments for one call."""

    seed_key: int  # mix(seed), as the int32 with the same bits
    thresh: int  # the keep threshold round(p · 2³²), as the int32 with the same bits
    keep_scale: float  # 1 / (1 − p), applied once to O (and dV)
    on: bool  # p > 0: the DROPOUT meta-parameter (p = 0 compiles the kernels without dropout)


def drop_args(dropout_p, seed) -> DropArgs:
    """Checks (dropout_p, seed) as ``dropout.check_dropout`` does and returns the kernel arguments."""
    p, seed = dropout.check_dropout(dropout_p, seed)
    return DropArgs(_as_int32(dropout.seed_key(seed)), _as_int32(dropout.threshold(p)), 1.0 / (1.0 - p), p > 0)
