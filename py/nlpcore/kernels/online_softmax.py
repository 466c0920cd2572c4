"""Online softmax: the (m, l) monoid that lets attention stream over keys.

softmax(x)_j = exp(x_j - m) / l  with  m = max_j x_j  and  l = Σ_j exp(x_j - m).

To compute m and l in one pass over x, keep a *state* (m, l) for the part seen so far
(Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"):

    element     (m, l):  m = running max, l = Σ exp(x_j - m) over the elements seen
    identity    (-inf, 0):  the state of the empty block
    combine     (m_a, l_a) ⊕ (m_b, l_b) = (m, l_a·exp(m_a - m) + l_b·exp(m_b - m)),  m = max(m_a, m_b)

Why rescaling makes ⊕ associative: a state (m, l) *represents* the number l·exp(m) = Σ exp(x_j),
and ⊕ is exactly addition of those numbers, re-expressed relative to the larger max:

    l_a·exp(m_a) + l_b·exp(m_b) = (l_a·exp(m_a - m) + l_b·exp(m_b - m)) · exp(m).

Addition is associative and max is associative, so ⊕ is too; (-inf, 0) represents 0, the
neutral element. Multiplying by exp(m_old - m_new) ≤ 1 only ever shrinks numbers, which is why
the streaming form never overflows even where Σ exp(x_j) itself would.

Fully masked inputs: a block of all -inf reduces to the identity (-inf, 0), and softmax of an
all -inf row is defined here as all zeros (attention's convention for a row with no allowed
key), never NaN. Whenever both maxima are -inf we shift by 0 instead of by -inf, so
exp(-inf - 0) = 0 rather than exp(-inf - (-inf)) = NaN.

FlashAttention (Dao et al. 2022) applies this monoid to the rows of S = QKᵀ one key tile at a
time, and carries the output O along with the same rescaling.
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import numpy as np

from ._checks import is_float_dtype, positive_int


class State(NamedTuple):
    """The monoid element for a batch of rows: m (...) running max, l (...) Σ exp(x - m)."""

    m: np.ndarray
    l: np.ndarray


def identity(shape: Tuple[int, ...], dtype=np.float64) -> State:
    """The neutral element (m = -inf, l = 0) for rows of the given shape (...)."""
    return State(np.full(shape, -np.inf, dtype=dtype), np.zeros(shape, dtype=dtype))


def safe_shift(m: np.ndarray) -> np.ndarray:
    """The max to subtract before exp: m itself, or 0 where m is -inf (no element seen).

    exp(x - safe_shift(m)) is then 0 for x = -inf instead of NaN.
    """
    return np.where(np.isfinite(m), m, 0)


def from_block(x: np.ndarray) -> State:
    """Reduce the last axis of a block x (..., B) to its state (m (...), l (...))."""
    x = np.asarray(x)
    if not is_float_dtype(x.dtype):
        raise TypeError("x must be a floating-point array, got dtype {}".format(x.dtype))
    if x.ndim < 1 or x.shape[-1] == 0:
        return identity(x.shape[:-1] if x.ndim else (), x.dtype)
    m = x.max(axis=-1)  # (...)
    l = np.exp(x - safe_shift(m)[..., None]).sum(axis=-1)  # (...)
    return State(m, l)


def combine(a: State, b: State) -> State:
    """a ⊕ b: the state of the concatenation of the blocks that a and b summarise."""
    m = np.maximum(a.m, b.m)
    shift = safe_shift(m)
    l = a.l * np.exp(a.m - shift) + b.l * np.exp(b.m - shift)
    return State(m, l)


def online_softmax(x, block_size: int) -> np.ndarray:
    """Softmax over the last axis of x (..., N), reading x in blocks of ``block_size``.

    One streaming pass folds each block's state into the running state with :func:`combine`;
    the output exp(x - m)/l then needs only the final (m, l). Rows that are entirely -inf give 0.
    """
    x = np.asarray(x)
    if not is_float_dtype(x.dtype):
        raise TypeError("x must be a floating-point array, got dtype {}".format(x.dtype))
    if x.ndim < 1 or x.shape[-1] == 0:
        raise ValueError("x must have a non-empty last axis (..., N), got shape {}".format(x.shape))
    block_size = positive_int(block_size, "block_size")
    acc = np.float32 if x.dtype.itemsize < 4 else x.dtype
    xa = x.astype(acc)
    state = identity(x.shape[:-1], acc)
    for start in range(0, x.shape[-1], block_size):
        state = combine(state, from_block(xa[..., start : start + block_size]))
    p = np.exp(xa - safe_shift(state.m)[..., None])  # (..., N)
    l = state.l[..., None]
    return np.divide(p, l, out=np.zeros_like(p), where=l > 0).astype(x.dtype)
