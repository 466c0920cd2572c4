"""Split-K attention: the key range cut into parts computed independently, then merged.

Flash-Decoding (Dao, Haziza, Massa & Sizov 2023, "Flash-Decoding for long-context inference")
uses this when one query (or a few) meets a long key/value cache: a single query row gives a
GPU too little parallel work, so the cache is cut into ``splits`` parts, every part is attended
to by its own thread block, and the partial results are merged at the end.

A part's result is a *partial* (o_p, lse_p): attention over that part's keys alone, normalised
within the part, and its log-sum-exp. It is the online-softmax state of ``online_softmax``
carrying an output: the state (m, l) = (lse_p, 1) represents Σ_{j in part} exp(s_j), and the
unnormalised output l·o_p rides along with the same rescaling. Merging two partials is
``combine`` on those states::

    (m, l) = (lse_a, 1) ⊕ (lse_b, 1)          m = max(lse_a, lse_b)
    o      = (exp(lse_a − m)·o_a + exp(lse_b − m)·o_b) / l
    lse    = m + log l

Because ⊕ is associative (and, being addition underneath, commutative), the parts may be
merged in any order or tree and give the same attention up to rounding — which is what lets a
GPU reduce them however its blocks finish. A part in which a row sees no allowed key is the
identity (o = 0, lse = -inf) for that row.

The same three functions (:func:`start`, :func:`absorb`, :func:`finish`) drive the ring
attention of ``ring``.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import flash_np
from ._checks import attention_inputs, positive_int
from .online_softmax import State, combine, identity, safe_shift


class Partial(NamedTuple):
    """Attention over a subset of the keys.

    o (..., Nq, dv) normalised over that subset (0 where a row saw no allowed key);
    lse (..., Nq) log Σ exp of the row's scores over the subset (-inf where it saw none).
    """

    o: np.ndarray
    lse: np.ndarray


class Running(NamedTuple):
    """A merge in progress: the monoid state (m, l) (..., Nq) and the output scaled by it.

    ``acc_o`` (..., Nq, dv) is Σ_p exp(lse_p − m)·o_p over the partials absorbed so far, so that
    the merged output is acc_o / l and the merged lse is m + log l.
    """

    state: State
    acc_o: np.ndarray


def state_of(part: Partial) -> State:
    """The monoid element a partial stands for: (m, l) = (lse, 1), or the identity (-inf, 0)."""
    return State(part.lse, np.isfinite(part.lse).astype(part.lse.dtype))


def empty(o_shape: Tuple[int, ...], dtype=np.float64) -> Partial:
    """The partial of no keys at all (o = 0, lse = -inf): the identity of :func:`merge`."""
    return Partial(np.zeros(o_shape, dtype=dtype), np.full(o_shape[:-1], -np.inf, dtype=dtype))


def start(o_shape: Tuple[int, ...], dtype=np.float64) -> Running:
    """A merge that has absorbed nothing yet: state (-inf, 0) and acc_o = 0 of shape o_shape."""
    return Running(identity(o_shape[:-1], dtype), np.zeros(o_shape, dtype=dtype))


def absorb(run: Running, part: Partial) -> Running:
    """Fold one partial into a running merge (the ⊕ of the module docstring, O carried along)."""
    new = combine(run.state, state_of(part))
    shift = safe_shift(new.m)
    alpha = np.exp(run.state.m - shift)[..., None]  # rescales what was merged so far
    beta = np.exp(part.lse - shift)[..., None]  # weight of the new part; 0 where lse = -inf
    return Running(new, alpha * run.acc_o + beta * part.o)


def finish(run: Running) -> Partial:
    """The merged partial: o = acc_o / l (0 where l = 0), lse = m + log l (-inf where l = 0)."""
    l = run.state.l
    o = np.divide(run.acc_o, l[..., None], out=np.zeros_like(run.acc_o), where=l[..., None] > 0)
    lse = np.full(l.shape, -np.inf, dtype=l.dtype)
    np.log(l, out=lse, where=l > 0)
    return Partial(o, lse + safe_shift(run.state.m))


def merge(a: Partial, b: Partial) -> Partial:
    """a ⊕ b: the partial over the union of the (disjoint) key sets a and b cover."""
    return finish(absorb(absorb(start(a.o.shape, a.o.dtype), a), b))


def cuts(n: int, parts: int) -> List[Tuple[int, int]]:
    """[start, stop) of each of ``parts`` contiguous pieces of range(n), sizes differing by ≤ 1."""
    base, extra = divmod(n, parts)
    bounds = [0]
    for p in range(parts):
        bounds.append(bounds[-1] + base + (1 if p < extra else 0))
    return [(bounds[p], bounds[p + 1]) for p in range(parts)]


def check_order(order, parts: int) -> List[int]:
    """``order`` as a list, if it is a permutation of range(parts); else a clear error."""
    if order is None:
        return list(range(parts))
    try:
        items = list(order)
    except TypeError:
        raise TypeError("order must be a sequence of part indices, got {!r}".format(order)) from None
    for p in items:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise TypeError("order must hold integer part indices, got {!r}".format(p))
    if sorted(int(p) for p in items) != list(range(parts)):
        raise ValueError(
            "order must be a permutation of range(splits) = 0..{}, got {}".format(parts - 1, items)
        )
    return [int(p) for p in items]


def part(x, cols: Tuple[int, int], block_q=None, block_k=None) -> Partial:
    """The partial of validated inputs ``x`` over keys cols[0]:cols[1], computed by ``flash_np``.

    Under ``causal`` (query i may attend key j iff j <= i) a query i < cols[0] sees no key of
    the part; the others see keys cols[0]..i, which is flash_np's top-left causal rule for the
    queries from row cols[0] on. So no Nq × Nk mask is ever built.
    """
    a, b = cols
    n_q, dv = x.q.shape[-2], x.v.shape[-1]
    out = empty(x.batch + (n_q, dv), x.acc)
    first = a if x.causal else 0  # queries before the part's first key see none of it
    if first >= n_q:
        return out
    mask = None if x.allowed is None else x.allowed[..., first:, a:b]
    o, lse = flash_np.forward(
        x.q[..., first:, :], x.k[..., a:b, :], x.v[..., a:b, :],
        causal=x.causal, mask=mask, scale=x.scale, block_q=block_q, block_k=block_k,
    )  # o (..., Nq - first, dv), lse (..., Nq - first)
    out.o[..., first:, :] = o
    out.lse[..., first:] = lse
    return out


def forward(
    q,
    k,
    v,
    *,
    splits: int,
    causal: bool = False,
    mask=None,
    scale=None,
    order: Optional[Sequence[int]] = None,
    block_q: Optional[int] = None,
    block_k: Optional[int] = None,
    partials: Optional[list] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Exact attention with the key range cut into ``splits`` parts, merged by the monoid.

    Args:
        q: (..., Nq, d) queries. k: (..., Nk, d) keys. v: (..., Nk, dv) values.
            Leading (batch, head) axes broadcast.
        splits: number of parts, 1 <= splits <= Nk; part p holds the contiguous keys
            ``cuts(Nk, splits)[p]`` (sizes differ by at most one).
        causal: query i may attend key j only when j <= i (top-left aligned).
        mask: boolean, broadcastable to (..., Nq, Nk); True = may attend.
        scale: score scale, default 1/sqrt(d).
        order: the order in which the partials are folded into the result, a permutation of
            range(splits); default left to right.
        block_q, block_k: tile sizes of the ``flash_np`` call that computes each part.
        partials: a list that receives, per part in part order, a dict with the part's key range
            ``cols`` and its :class:`Partial` (accumulation dtype), for teaching and tests.

    Returns:
        o: (..., Nq, dv), q's dtype; 0 for rows with no allowed key.
        lse: (..., Nq), accumulation dtype (float32 for 16-bit inputs); -inf for such rows.
    """
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    n_q, n_k, dv = x.q.shape[-2], x.k.shape[-2], x.v.shape[-1]
    splits = positive_int(splits, "splits")
    if splits > n_k:
        raise ValueError("splits must be at most Nk = {} (k shape {}), got {}".format(n_k, np.shape(k), splits))
    order = check_order(order, splits)
    if partials is not None and not isinstance(partials, list):
        raise TypeError("partials must be a list (one entry per part is appended) or None, got {!r}".format(partials))
    # Partials are kept in the accumulation dtype (float32 for 16-bit inputs), as a GPU keeps
    # them in float32 between the split kernel and the merge; inputs are widened once, exactly.
    x = x._replace(q=x.q.astype(x.acc), k=x.k.astype(x.acc), v=x.v.astype(x.acc))
    pieces = cuts(n_k, splits)
    results = [part(x, cols, block_q, block_k) for cols in pieces]
    if partials is not None:
        partials.extend({"cols": list(cols), "partial": p} for cols, p in zip(pieces, results))
    run = start(x.batch + (n_q, dv), x.acc)
    for p in order:
        run = absorb(run, results[p])
    merged = finish(run)
    return merged.o.astype(np.asarray(q).dtype), merged.lse
