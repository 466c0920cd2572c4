"""Dropout's keep-mask, regenerated from a counter instead of stored.

FlashAttention applies dropout to P inside its tiles (Dao et al. 2022, Algorithm 2): the forward
pass draws which entries to keep, and the backward pass needs the *same* draws to differentiate
— yet storing an N×N keep-mask would cost exactly the HBM traffic the algorithm saves. The paper
keeps the random generator's state instead and regenerates the mask tile by tile. We do the same
with a counter-based hash: the keep bit of entry (row, col) of head ``bh`` is a pure function of
(seed, bh, row, col), so any tile can be redrawn at any time, in any order, by any kernel.

    key(bh)       = mix(mix(seed) + bh)
    key(bh, row)  = mix(key(bh) + row)                   a row key per query row
    key(col)      = mix((mix(seed) XOR SALT) + col)      a column key per key column
    bits          = (key(bh, row) XOR key(col)) · M1     a uint32 per entry
    keep          = bits >= threshold(p),  threshold(p) = round(p · 2³²)

``mix`` is lowbias32, an integer finaliser found by Chris Wellons' hash-prospector search (two
multiply / xor-shift rounds); every ``+`` and ``·`` wraps modulo 2³²; SALT is 0x9E3779B9 (the
golden ratio's bits) so that row and column keys are drawn from different streams.

Why this shape, and not one ``mix`` per entry: a kernel draws a tile of Br × Bc bits but only
Br row keys and Bc column keys, so the per-entry work is one XOR, one multiply and one compare
(the earlier ``mix(key(bh, row) + col)`` cost about eleven instructions per entry, and the
H200 kernels are bound by instruction issue at d = 64: bench/results/dropout_cost_h200.json).
``key(row) XOR key(col)`` alone is *simple tabulation hashing* (Zobrist 1970; Pătraşcu and
Thorup, "The power of simple tabulation hashing", JACM 2012): 3-wise independent, but the
corners of every rectangle cancel — bits(r, c) ⊕ bits(r, c') ⊕ bits(r', c) ⊕ bits(r', c') = 0 —
so a threshold on its top bits ties the four keep bits together (a visible pattern in a 2-D
mask). Multiplying by the odd constant M1 makes the top bits, which the threshold reads, depend
on every bit of the XOR through the carries, which breaks that tie; ``tests/test_dropout.py``
checks the rectangle, neighbour and row/column statistics with a χ² test.

``bh`` counts the leading (batch, head) axes in C order: for shape (B, H, Nq, Nk) head h of
batch b has bh = b·H + h. The dropped output is o = (P ∘ keep / (1 − p)) V.
"""

from __future__ import annotations

import numbers
from typing import Tuple

import numpy as np

# lowbias32's constants (hash-prospector): two odd multipliers and three shifts; the first
# multiplier also finishes each entry's bits.
_M1 = np.uint32(0x7FEB352D)
_M2 = np.uint32(0x846CA68B)
_S16 = np.uint32(16)
_S15 = np.uint32(15)
SALT = 0x9E3779B9  # column keys: mix((mix(seed) XOR SALT) + col)
SEED_LIMIT = 2 ** 32  # seeds are uint32


def mix(x: np.ndarray) -> np.ndarray:
    """lowbias32 on a uint32 array: a bijection of uint32 whose output bits all depend on every
    input bit. Arrays only (NumPy scalars would warn on the intended wrap-around)."""
    x = x ^ (x >> _S16)
    x = x * _M1
    x = x ^ (x >> _S15)
    x = x * _M2
    return x ^ (x >> _S16)


def check_dropout(dropout_p, seed) -> Tuple[float, int]:
    """Validate (dropout_p, seed): 0 <= dropout_p < 1, seed an int in [0, 2³²)."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TypeError("dropout_p must be a number in [0, 1), got {!r}".format(dropout_p))
    p = float(dropout_p)
    if not 0.0 <= p < 1.0:
        raise ValueError("dropout_p must be in [0, 1) (the probability of dropping an entry), got {!r}".format(dropout_p))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError("seed must be an int in [0, 2**32), got {!r}".format(seed))
    if not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError("seed must be an int in [0, 2**32), got {!r}".format(seed))
    return p, int(seed)


def threshold(p: float) -> int:
    """The uint32 cut: an entry is kept when its bits are >= round(p · 2³²) (clamped to 2³² − 1)."""
    return min(int(round(p * 4294967296.0)), 4294967295)


def seed_key(seed: int) -> int:
    """mix(seed), the first step of every key, as a Python int (the Triton kernels take it)."""
    return int(mix(np.array([seed], dtype=np.uint32))[0])


def head_keys(seed: int, batch: Tuple[int, ...]) -> np.ndarray:
    """key(bh) for every head of the leading axes ``batch``: uint32 array of shape batch + (1,)."""
    n = int(np.prod(batch, dtype=np.int64))
    bh = np.arange(n, dtype=np.uint32).reshape(tuple(batch) + (1,))  # (..., 1)
    return mix(np.array([seed_key(seed)], dtype=np.uint32) + bh)


def column_keys(seed: int, cols: Tuple[int, int]) -> np.ndarray:
    """key(col) for columns [c0, c1): uint32 (c1 − c0,)."""
    col = np.arange(cols[0], cols[1], dtype=np.uint32)
    return mix(np.uint32(seed_key(seed) ^ SALT) + col)


def keep_tile(seed: int, keys: np.ndarray, rows: Tuple[int, int], cols: Tuple[int, int], p: float) -> np.ndarray:
    """The keep-mask of one tile: bool (..., r1 − r0, c1 − c0) for rows [r0, r1), cols [c0, c1).

    ``keys`` is :func:`head_keys`'s (..., 1) array for ``seed``. Only the tile is ever built.
    """
    row = np.arange(rows[0], rows[1], dtype=np.uint32)  # (Br,)
    row_keys = mix(keys + row)[..., :, None]  # (..., Br, 1)
    bits = (row_keys ^ column_keys(seed, cols)) * _M1  # (..., Br, Bc)
    return bits >= np.uint32(threshold(p))


def keep_mask(seed: int, shape, p: float) -> np.ndarray:
    """The whole keep-mask, bool of ``shape`` (..., Nq, Nk): exactly what the kernels apply.

    For tests and teaching; the kernels never build it. True = the entry of P is kept (and
    scaled by 1 / (1 − p)); False = dropped.
    """
    p, seed = check_dropout(p, seed)
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2 or any(s < 0 for s in shape):
        raise ValueError("shape must be (..., Nq, Nk) with sizes >= 0, got {}".format(shape))
    return keep_tile(seed, head_keys(seed, shape[:-2]), (0, shape[-2]), (0, shape[-1]), p)


__all__ = ["check_dropout", "column_keys", "head_keys", "keep_mask", "keep_tile", "mix", "seed_key", "threshold"]
