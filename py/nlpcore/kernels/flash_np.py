"""FlashAttention in NumPy: exact attention, computed tile by tile, never materialising S or P.

Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness"
(arXiv:2205.14135). The full arrays below play the part of GPU HBM; the slices we work on play
the part of tiles in on-chip SRAM, and every copy between the two is counted by a
:class:`~nlpcore.kernels.trace.Mover` (so ``io=`` sees exactly the algorithm's traffic).

Forward, for a query tile i (rows q0:q1) and a key tile j (columns k0:k1)::

    S_ij = scale · Q_i K_jᵀ                          (Br, Bc)  masked entries set to -inf
    (m̃, l̃) = rowmax(S_ij), rowsum(exp(S_ij − m̃))    the tile's online-softmax state
    (m, l) ← (m, l) ⊕ (m̃, l̃)                         the monoid of ``online_softmax``
    O_i ← (α · l_old · O_i + β · exp(S_ij − m̃) V_j) / l,   α = exp(m_old − m), β = exp(m̃ − m)

After the last key tile, O_i is exact softmax(S_i) V and lse_i = m + log l.

Loop order (a documented choice, ``loop_order=``; one function each, ``_forward_kv_outer`` and
``_forward_q_outer``, with every step tagged by its line of the paper's algorithm):
- ``"kv_outer"`` (default) is the paper's Algorithm 1: the outer loop walks key/value tiles,
  the inner loop walks query tiles, and O, l, m are read from and written back to HBM at every
  step. This is the order whose IO the paper analyses (Theorem 2: Θ(N²d²/M)).
- ``"q_outer"`` is FlashAttention-2's order (Dao 2023): each query tile stays in SRAM while
  all key tiles stream past, so O is written once. Same arithmetic; the traffic moves from
  re-reading Q and O (and writing O) once per key tile, ≈ 3N²d/Bc elements, to re-reading K and
  V once per query tile, ≈ 2N²d/Br, so query-outer moves more when Br < ⅔·Bc
  (``io_model.q_outer_break_even``). At the paper's M, Algorithm 1's blocks put d = 64 on the
  "more" side (Br = 64, Bc = 384) and d = 128 just on the "less" side (Br = 128, Bc = 192)
  (``io_model.flash_accesses(..., loop_order=)``; bench/results/io_claim.json, "flash2_bytes").

Backward (the paper's Algorithm 4, with FlashAttention-2's precomputed D): P is *recomputed*
per tile from the saved lse, P_ij = exp(S_ij − lse_i), and the softmax Jacobian uses
D = rowsum(dO ∘ O), which equals rowsum(dP ∘ P) because dPᵢ·Pᵢ = dOᵢ·(Pᵢ V) = dOᵢ·Oᵢ.

Dropout (the paper's Algorithms 2 and 4, ``dropout_p > 0``): P̃_ij = P_ij ∘ keep_ij / (1 − p) feeds
O = P̃ V, while the softmax statistics (m, l, lse) stay those of the undropped P. The keep-mask is
drawn tile by tile from (seed, head, row, column) by ``nlpcore.kernels.dropout`` — the backward
pass redraws the same tiles instead of reading a stored mask, so dropout adds no HBM traffic,
and ``keep_mask(seed, shape, p)`` returns exactly the mask applied. In the backward,
dV = P̃ᵀ dO, dP = (dO Vᵀ) ∘ keep / (1 − p), and D = rowsum(dO ∘ O) still equals rowsum(P ∘ dP).

Conventions shared with ``reference``: query i may attend key j iff j <= i under ``causal``
(top-left aligned); ``mask`` is True where attending is allowed; a row with no allowed key
returns o = 0, lse = -inf and zero gradients, without NaN or warnings; 16-bit inputs accumulate
in float32. Under ``causal`` a tile lying entirely above the diagonal is skipped (not loaded).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np

from ._checks import allowed_tile, attention_inputs, check_backward_inputs, positive_int, unbroadcast
from .dropout import check_dropout, head_keys, keep_mask, keep_tile
from .io_model import LOOP_ORDERS, IOCounter, block_sizes
from .online_softmax import State, combine, identity, safe_shift
from .trace import Mover

__all__ = ["forward", "backward", "keep_mask"]

# Tile sizes used when neither block sizes nor an SRAM size are given. NumPy pays a fixed cost
# per call, so big tiles are fast; a 256×512 float32 score tile is 512 KiB, which still sits in
# a CPU's L2/L3 cache (our "SRAM"). Measured on 2 cores at N = 4096, d = 64: forward ≈ 0.65× and
# backward ≈ 0.5× the naive kernel's time (bench/numpy_attention.py has the full sweep).
DEFAULT_BLOCK_Q = 256
DEFAULT_BLOCK_K = 512


def _tile_sizes(block_q, block_k, sram_bytes, d: int, itemsize: int) -> Tuple[int, int]:
    """(Br, Bc): explicit block sizes win; else the paper's rule from sram_bytes; else defaults."""
    if sram_bytes is not None:
        sram_bytes = positive_int(sram_bytes, "sram_bytes")
        if sram_bytes < itemsize:
            raise ValueError(
                "sram_bytes must hold at least one element ({} bytes), got {}".format(itemsize, sram_bytes)
            )
        br, bc = block_sizes(sram_bytes // itemsize, d)
    else:
        br, bc = DEFAULT_BLOCK_Q, DEFAULT_BLOCK_K
    if block_q is not None:
        br = positive_int(block_q, "block_q")
    if block_k is not None:
        bc = positive_int(block_k, "block_k")
    return br, bc


def _span(index: int, size: int, n: int) -> Tuple[int, int]:
    """Rows [start, stop) of tile ``index`` when n rows are cut into tiles of ``size``."""
    return index * size, min(n, (index + 1) * size)


class _Plan(NamedTuple):
    """The sizes of one pass: the problem, the tiles, and how many tiles of each kind."""

    n_q: int  # Nq, query rows (of Q, O, lse)
    n_k: int  # Nk, key rows (of K, V)
    d: int  # head dim of Q and K
    dv: int  # head dim of V and O
    br: int  # Br, rows of a query tile Q_i (..., Br, d)
    bc: int  # Bc, rows of a key/value tile K_j (..., Bc, d), V_j (..., Bc, dv)
    t_r: int  # T_r = ⌈Nq / Br⌉ query tiles
    t_c: int  # T_c = ⌈Nk / Bc⌉ key/value tiles
    in_bytes: int  # bytes per element of q, k, v (what the IO counter charges for a tile)

    def rows(self, i: int) -> Tuple[int, int]:
        """Query rows [start, stop) of tile i: Q_i, O_i, l_i, m_i, lse_i."""
        return _span(i, self.br, self.n_q)

    def cols(self, j: int) -> Tuple[int, int]:
        """Key rows [start, stop) of tile j: K_j, V_j (the columns of S_ij)."""
        return _span(j, self.bc, self.n_k)


def _plan(x, block_q, block_k, sram_bytes) -> _Plan:
    """The sizes and tile sizes of one pass over inputs ``x`` (Algorithm 1, lines 1 and 3)."""
    n_q, d = x.q.shape[-2:]
    n_k, dv = x.v.shape[-2:]
    in_bytes = np.dtype(np.result_type(x.q.dtype, x.k.dtype, x.v.dtype)).itemsize
    br, bc = _tile_sizes(block_q, block_k, sram_bytes, d, in_bytes)
    return _Plan(n_q, n_k, d, dv, br, bc, -(-n_q // br), -(-n_k // bc), in_bytes)


def _mover(x, plan: _Plan, io, trace, pass_name: str, loop_order: str) -> Mover:
    """The counting Mover for one pass; announces the pass and its plan to the trace."""
    mover = Mover(io, trace, int(np.prod(x.batch, dtype=np.int64)), plan.in_bytes, x.acc.itemsize)
    mover.note(
        {
            "op": "begin", "pass": pass_name, "n_q": plan.n_q, "n_k": plan.n_k, "d": plan.d, "dv": plan.dv,
            "br": plan.br, "bc": plan.bc, "t_r": plan.t_r, "t_c": plan.t_c, "loop_order": loop_order,
            "causal": x.causal, "dtype_bytes": plan.in_bytes,
        }
    )
    return mover


def _causal_skip(rows, cols) -> bool:
    """True when every key of the tile comes after every query (j > i throughout)."""
    return cols[0] > rows[1] - 1


def _skip(mover: Mover, i: int, j: int, rows, cols) -> None:
    """Record a tile that causal masking skips without loading it."""
    mover.note({"op": "skip", "i": i, "j": j, "rows": list(rows), "cols": list(cols), "reason": "causal"})


def _scores(x, q_i, k_j, rows, cols) -> np.ndarray:
    """S_ij = scale · Q_i K_jᵀ (..., Br, Bc), with -inf where attending is not allowed."""
    s = np.matmul(q_i, np.swapaxes(k_j, -1, -2))  # (..., Br, d) @ (..., d, Bc) -> (..., Br, Bc)
    s *= x.acc.type(x.scale)
    allowed = allowed_tile(x, rows, cols)  # (..., Br, Bc) or None
    if allowed is not None:
        s = np.where(allowed, s, x.acc.type(-np.inf))
    return s


def _tile_softmax(s: np.ndarray) -> Tuple[State, np.ndarray]:
    """The tile's own softmax: state (m̃, l̃) = (rowmax S, rowsum P̃) (..., Br) and
    P̃ = exp(S − m̃) (..., Br, Bc), 0 where masked (a fully masked row gives m̃ = -inf, l̃ = 0)."""
    m_tile = s.max(axis=-1)  # (..., Br)
    p_tile = np.exp(s - safe_shift(m_tile)[..., None])  # (..., Br, Bc)
    return State(m_tile, p_tile.sum(axis=-1)), p_tile


def _rescale(m_old: np.ndarray, m_tile: np.ndarray, m_new: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(α, β) = (e^(m_old − m_new), e^(m̃ − m_new)) (..., Br, 1): the factors that bring what was
    summed so far and the new tile to the new running max."""
    shift = safe_shift(m_new)
    return np.exp(m_old - shift)[..., None], np.exp(m_tile - shift)[..., None]


def _pv(p_tile: np.ndarray, v_j: np.ndarray, drop: Optional[np.ndarray]) -> np.ndarray:
    """P̃ V_j (..., Br, dv); with dropout, (P̃ ∘ keep / (1 − p)) V_j — only this product sees the
    dropped tile, the softmax state sums the undropped one."""
    if drop is not None:
        p_tile = p_tile * drop
    return np.matmul(p_tile, v_j)


def _normalise(acc_o: np.ndarray, l: np.ndarray) -> np.ndarray:
    """O = acc_o / l, with O = 0 where l = 0 (no allowed key yet)."""
    l = l[..., None]
    return np.divide(acc_o, l, out=np.zeros_like(acc_o), where=l > 0)


def _lse(state: State) -> np.ndarray:
    """log Σ exp = m + log l, -inf where l = 0."""
    out = np.full(state.l.shape, -np.inf, dtype=state.l.dtype)
    np.log(state.l, out=out, where=state.l > 0)
    return out + safe_shift(state.m)  # m = -inf exactly where l = 0, and there the shift is 0


class _Dropout:
    """The keep-mask of one kernel call, drawn tile by tile (never whole): ``tile(rows, cols)``
    gives keep / (1 − p) for that tile (..., Br, Bc) in the accumulation dtype."""

    def __init__(self, x, dropout_p: float, seed: int) -> None:
        self.p = dropout_p
        self.seed = seed
        self.keys = head_keys(seed, x.batch)  # (..., 1) uint32, one key per head
        self.acc = x.acc

    def tile(self, rows, cols) -> np.ndarray:
        keep = keep_tile(self.seed, self.keys, rows, cols, self.p)  # (..., Br, Bc) bool
        return keep.astype(self.acc) / self.acc.type(1.0 - self.p)


def _dropout(x, dropout_p, seed) -> Optional[_Dropout]:
    """A _Dropout for dropout_p > 0, else None (so p = 0 runs exactly the undropped code)."""
    p, seed = check_dropout(dropout_p, seed)
    return _Dropout(x, p, seed) if p > 0 else None


# The two loop orders of the forward pass. Each line tagged "line N" is line N of the paper's
# algorithm named in the function's docstring; what the paper leaves out (the scale, masks,
# dropout, skipped causal tiles, lse) is tagged with where it comes from instead.


def _forward_kv_outer(x, plan: _Plan, mover: Mover, drop: Optional[_Dropout]):
    """K/V tiles outer, query tiles inner: FlashAttention's Algorithm 1 (Dao et al. 2022,
    arXiv:2205.14135, Section 3.1), with the scale, masks and dropout of its Algorithm 2
    (Appendix B). O, l and m live in HBM and every (i, j) step reads and writes them back.

    Returns o (..., Nq, dv) and lse (..., Nq), both in the accumulation dtype.
    """
    acc = x.acc
    whole = (0, plan.n_q)
    # line 1: Br, Bc were set by _plan (the paper's rule when sram_bytes is given).
    # line 2: initialise O = 0, l = 0, m = -inf in HBM. O is kept in the accumulation dtype so that
    # the repeated rescaling of line 12 does not round to 16 bits at every step; it is counted at
    # the input's element size, as a GPU kernel would store it.
    o = np.zeros(x.batch + (plan.n_q, plan.dv), dtype=acc)  # (..., Nq, dv)
    l = np.zeros(x.batch + (plan.n_q,), dtype=acc)  # (..., Nq) running sum
    m = np.full(x.batch + (plan.n_q,), -np.inf, dtype=acc)  # (..., Nq) running max
    mover.store("O", o, whole, o, None)
    mover.store("l", l, whole, l)
    mover.store("m", m, whole, m)
    # lines 3-4: Q, O, l, m are cut into T_r row tiles (plan.rows), K, V into T_c (plan.cols).
    for j in range(plan.t_c):  # line 5
        cols = plan.cols(j)
        k_j = mover.load("K", x.k, cols, j, acc)  # line 6: (..., Bc, d)
        v_j = mover.load("V", x.v, cols, j, acc)  # line 6: (..., Bc, dv)
        for i in range(plan.t_r):  # line 7
            rows = plan.rows(i)
            if x.causal and _causal_skip(rows, cols):  # FlashAttention-2, Section 3.1.1, "Causal masking"
                _skip(mover, i, j, rows, cols)
                continue
            q_i = mover.load("Q", x.q, rows, i, acc)  # line 8: (..., Br, d)
            o_i = mover.load("O", o, rows, i)  # line 8: (..., Br, dv), normalised so far
            old = State(mover.load("m", m, rows, i), mover.load("l", l, rows, i))  # line 8: m_i, l_i (..., Br)
            s = _scores(x, q_i, k_j, rows, cols)  # line 9 (scale and mask: Algorithm 2, lines 10-11)
            mover.tile(i, j, rows, cols, s)
            tile, p_tile = _tile_softmax(s)  # line 10: m̃_ij, l̃_ij (..., Br); P̃_ij (..., Br, Bc)
            new = combine(old, tile)  # line 11: m_new, l_new
            alpha, beta = _rescale(old.m, tile.m, new.m)  # line 12's e^(m_i − m_new), e^(m̃_ij − m_new)
            pv = _pv(p_tile, v_j, drop and drop.tile(rows, cols))  # line 12's P̃_ij V_j (Algorithm 2, line 14)
            o_i = _normalise(alpha * (old.l[..., None] * o_i) + beta * pv, new.l)  # line 12
            mover.state(i, j, rows, new.m, new.l)
            mover.store("O", o, rows, o_i, i)  # line 12: write O_i to HBM
            mover.store("l", l, rows, new.l, i)  # line 13: write l_i ← l_new
            mover.store("m", m, rows, new.m, i)  # line 13: write m_i ← m_new
    # line 16 returns O. The backward needs each row's logsumexp lse = m + log l (Algorithm 2
    # returns l and m; FlashAttention-2 stores this one vector L instead), one more pass over m, l.
    lse = np.empty(x.batch + (plan.n_q,), dtype=acc)  # (..., Nq)
    final = State(mover.load("m", m, whole), mover.load("l", l, whole))
    mover.store("lse", lse, whole, _lse(final))
    return o, lse


def _forward_q_outer(x, plan: _Plan, mover: Mover, drop: Optional[_Dropout]):
    """Query tiles outer, K/V tiles inner: FlashAttention-2's Algorithm 1 (Dao 2023,
    arXiv:2307.08691, Section 3.1.1), with FlashAttention's scale, masks and dropout. Each query
    tile's running state stays on chip while all key tiles stream past; O and lse are written
    once per tile.

    Returns o (..., Nq, dv) and lse (..., Nq), both in the accumulation dtype.
    """
    acc = x.acc
    # lines 1-2: Q, O, lse are cut into T_r row tiles (plan.rows), K, V into T_c (plan.cols).
    o = np.zeros(x.batch + (plan.n_q, plan.dv), dtype=acc)  # (..., Nq, dv) in HBM
    lse = np.empty(x.batch + (plan.n_q,), dtype=acc)  # (..., Nq) in HBM: the paper's L
    for i in range(plan.t_r):  # line 3
        rows = plan.rows(i)
        q_i = mover.load("Q", x.q, rows, i, acc)  # line 4: (..., Br, d)
        state = identity(x.batch + (rows[1] - rows[0],), acc)  # line 5: m = -inf, l = 0 (..., Br)
        acc_o = np.zeros(x.batch + (rows[1] - rows[0], plan.dv), dtype=acc)  # line 5: O_i = 0 (..., Br, dv)
        for j in range(plan.t_c):  # line 6
            cols = plan.cols(j)
            if x.causal and _causal_skip(rows, cols):  # Section 3.1.1, "Causal masking"
                _skip(mover, i, j, rows, cols)
                continue
            k_j = mover.load("K", x.k, cols, j, acc)  # line 7: (..., Bc, d)
            v_j = mover.load("V", x.v, cols, j, acc)  # line 7: (..., Bc, dv)
            s = _scores(x, q_i, k_j, rows, cols)  # line 8 (scale and mask as FlashAttention's Algorithm 2)
            mover.tile(i, j, rows, cols, s)
            # line 9: the new running max m and sum l, and P̃ = exp(S − m). We exponentiate against
            # the tile's own max m̃ first and rescale by β = e^(m̃ − m), as FlashAttention's
            # Algorithm 1 does in its lines 10-12: the same P̃, reached through the monoid of
            # online_softmax.
            tile, p_tile = _tile_softmax(s)
            new = combine(state, tile)
            alpha, beta = _rescale(state.m, tile.m, new.m)
            pv = _pv(p_tile, v_j, drop and drop.tile(rows, cols))  # dropout: FlashAttention's Algorithm 2, line 14
            acc_o = alpha * acc_o + beta * pv  # line 10: O_i ← diag(e^(m_old − m)) O_i + P̃ V_j, unnormalised
            state = new
            mover.state(i, j, rows, state.m, state.l)
        mover.store("O", o, rows, _normalise(acc_o, state.l), i)  # lines 12 and 14: O_i = O_i / l, written
        mover.store("lse", lse, rows, _lse(state), i)  # lines 13 and 15: L_i = m + log l, written
    return o, lse


def forward(
    q,
    k,
    v,
    *,
    causal: bool = False,
    mask=None,
    scale=None,
    block_q: Optional[int] = None,
    block_k: Optional[int] = None,
    sram_bytes: Optional[int] = None,
    io: Optional[IOCounter] = None,
    trace: Optional[list] = None,
    loop_order: str = "kv_outer",
    dropout_p: float = 0.0,
    seed: int = 0,
) -> Tuple[np.ndarray, np.ndarray]:
    """Exact attention O = softmax(scale · Q Kᵀ + mask) V, tile by tile.

    Args:
        q: (..., Nq, d) queries. k: (..., Nk, d) keys. v: (..., Nk, dv) values.
            Leading (batch, head) axes broadcast.
        causal: query i may attend key j only when j <= i (top-left aligned).
        mask: boolean, broadcastable to (..., Nq, Nk); True = may attend. Key padding:
            (..., 1, Nk).
        scale: score scale, default 1/sqrt(d).
        block_q, block_k: tile sizes Br, Bc (rows of Q and of K/V per tile).
        sram_bytes: SRAM size M in bytes; when given, Br and Bc follow the paper's rule
            (``io_model.block_sizes(sram_bytes // itemsize, d)``) unless set explicitly.
        io: an ``IOCounter`` that counts every tile load and store.
        trace: a list that receives the events described in ``nlpcore.kernels.trace``.
        loop_order: "kv_outer" (Algorithm 1, default; :func:`_forward_kv_outer`) or "q_outer"
            (FlashAttention-2; :func:`_forward_q_outer`).
        dropout_p: probability of dropping an entry of P, in [0, 1); 0 (default) is no dropout.
        seed: int in [0, 2³²) that, with the head, row and column, decides each keep bit
            (``keep_mask(seed, (..., Nq, Nk), dropout_p)`` is the mask applied).

    Returns:
        o: (..., Nq, dv), q's dtype; 0 for rows with no allowed key. With dropout,
            o = (P ∘ keep / (1 − p)) V.
        lse: (..., Nq), accumulation dtype (float32 for 16-bit inputs); -inf for such rows.
            Always the undropped softmax's.
    """
    if loop_order not in LOOP_ORDERS:
        raise ValueError("loop_order must be one of {}, got {!r}".format(LOOP_ORDERS, loop_order))
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    drop = _dropout(x, dropout_p, seed)
    plan = _plan(x, block_q, block_k, sram_bytes)
    mover = _mover(x, plan, io, trace, "forward", loop_order)
    loop = _forward_q_outer if loop_order == "q_outer" else _forward_kv_outer
    o, lse = loop(x, plan, mover, drop)
    mover.end()
    return o.astype(np.asarray(q).dtype), lse


def backward(
    q,
    k,
    v,
    o,
    lse,
    do,
    *,
    causal: bool = False,
    mask=None,
    scale=None,
    block_q: Optional[int] = None,
    block_k: Optional[int] = None,
    sram_bytes: Optional[int] = None,
    io: Optional[IOCounter] = None,
    trace: Optional[list] = None,
    dropout_p: float = 0.0,
    seed: int = 0,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of tiled attention by recomputation, K/V tiles outer.

    For each key tile j and query tile i::

        P_ij = exp(S_ij − lse_i)                 recomputed, never stored   (Br, Bc)
        dV_j += P_ijᵀ dO_i
        dP_ij = dO_i V_jᵀ
        dS_ij = P_ij ∘ (dP_ij − D_i)             D = rowsum(dO ∘ O), computed once
        dQ_i += scale · dS_ij K_j                read-modify-write in HBM
        dK_j += scale · dS_ijᵀ Q_i

    With dropout, the tile's keep-mask Z = keep / (1 − p) is redrawn and dV_j += (P_ij ∘ Z)ᵀ dO_i,
    dP_ij = (dO_i V_jᵀ) ∘ Z.

    The steps tagged "line N" below are FlashAttention-2's Algorithm 2 (arXiv:2307.08691,
    Section 3.1.2), the paper's Algorithm 4 with the one vector L = lse in place of l and m.

    Args:
        q, k, v, causal, mask, scale, block_q, block_k, sram_bytes, io, trace, dropout_p, seed:
            as in :func:`forward` (use the same masks, scale, dropout_p and seed as the forward).
        o: (..., Nq, dv) and lse: (..., Nq), from :func:`forward`.
        do: (..., Nq, dv), gradient of the loss with respect to o.

    Returns:
        dq (..., Nq, d), dk (..., Nk, d), dv (..., Nk, dv) in the shapes and dtypes of q, k, v.
        Rows with no allowed key (lse = -inf) contribute zero gradient.
    """
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    o, lse, do = check_backward_inputs(x, o, lse, do)
    drop = _dropout(x, dropout_p, seed)
    plan = _plan(x, block_q, block_k, sram_bytes)  # lines 1-2: the tiles
    mover = _mover(x, plan, io, trace, "backward", "kv_outer")
    acc = x.acc
    lse = lse.astype(acc)
    # line 4: D = rowsum(dO ∘ O), one pass over dO and O before the main loop, written to HBM.
    whole = (0, plan.n_q)
    big_d = np.sum(mover.load("dO", do, whole, None, acc) * mover.load("O", o, whole, None, acc), axis=-1)
    big_d_hbm = np.empty(x.batch + (plan.n_q,), dtype=acc)  # (..., Nq)
    mover.store("D", big_d_hbm, whole, big_d)
    # line 3: dQ = 0 in HBM; dK, dV are written tile by tile.
    dq = np.zeros(x.batch + (plan.n_q, plan.d), dtype=acc)  # (..., Nq, d), accumulated in HBM
    dk = np.empty(x.batch + (plan.n_k, plan.d), dtype=acc)  # (..., Nk, d)
    dv_out = np.empty(x.batch + (plan.n_k, plan.dv), dtype=acc)  # (..., Nk, dv)
    mover.store("dQ", dq, whole, dq, None)
    scale_acc = acc.type(x.scale)
    for j in range(plan.t_c):  # line 5
        cols = plan.cols(j)
        k_j = mover.load("K", x.k, cols, j, acc)  # line 6: (..., Bc, d)
        v_j = mover.load("V", x.v, cols, j, acc)  # line 6: (..., Bc, dv)
        dk_j = np.zeros(x.batch + (cols[1] - cols[0], plan.d), dtype=acc)  # line 7
        dv_j = np.zeros(x.batch + (cols[1] - cols[0], plan.dv), dtype=acc)  # line 7
        for i in range(plan.t_r):  # line 8
            rows = plan.rows(i)
            if causal and _causal_skip(rows, cols):  # Section 3.1.1, "Causal masking"
                _skip(mover, i, j, rows, cols)
                continue
            q_i = mover.load("Q", x.q, rows, i, acc)  # line 9: (..., Br, d)
            do_i = mover.load("dO", do, rows, i, acc)  # line 9: (..., Br, dv)
            dq_i = mover.load("dQ", dq, rows, i)  # line 9: (..., Br, d)
            lse_i = mover.load("lse", lse, rows, i)  # line 9: (..., Br)
            d_i = mover.load("D", big_d_hbm, rows, i)  # line 9: (..., Br)
            s = _scores(x, q_i, k_j, rows, cols)  # line 10
            mover.tile(i, j, rows, cols, s)
            p = np.exp(s - safe_shift(lse_i)[..., None])  # line 11: (..., Br, Bc); 0 where masked
            dp = np.matmul(do_i, np.swapaxes(v_j, -1, -2))  # line 13: (..., Br, Bc)
            if drop is None:
                dv_j += np.matmul(np.swapaxes(p, -1, -2), do_i)  # line 12
            else:
                z = drop.tile(rows, cols)  # (..., Br, Bc) keep / (1 − p), redrawn
                dv_j += np.matmul(np.swapaxes(p * z, -1, -2), do_i)  # line 12 with P̃ = P ∘ Z
                dp = dp * z
            ds = p * (dp - d_i[..., None])  # line 14: (..., Br, Bc)
            dq_i = dq_i + scale_acc * np.matmul(ds, k_j)  # line 15
            mover.store("dQ", dq, rows, dq_i, i)  # line 15: write back to HBM
            dk_j += scale_acc * np.matmul(np.swapaxes(ds, -1, -2), q_i)  # line 16
        mover.store("dK", dk, cols, dk_j, j)  # line 18
        mover.store("dV", dv_out, cols, dv_j, j)  # line 18
    mover.end()
    q, k, v = (np.asarray(t) for t in (q, k, v))
    return (
        unbroadcast(dq, q.shape).astype(q.dtype),
        unbroadcast(dk, k.shape).astype(k.dtype),
        unbroadcast(dv_out, v.shape).astype(v.dtype),
    )
