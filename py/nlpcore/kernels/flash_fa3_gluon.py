"""FlashAttention-3's forward on Hopper, in Gluon: the kernel itself (host side: ``flash_fa3``).

What you will learn here: how FlashAttention-3 (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao,
2024, arXiv:2407.08608) keeps an H100/H200 busy, written out in Triton's Gluon dialect, where
the programmer — not the compiler — places every copy, barrier and matrix product.

Why FlashAttention-2's loop leaves Hopper partly idle (FA3 §3.1): the tensor cores multiply at
roughly 256× the rate at which the special-function units evaluate ``exp`` (989 TFLOP/s of
fp16 products against 3.9 TFLOP/s of special functions on an H100 SXM5), so a warpgroup that
runs  QKᵀ → softmax → PV  in order spends a large share of every tile with its tensor cores
idle; and warps that issue their own loads wait on them. FA3's three answers, each a flag of
this kernel so that their worth can be measured (bench/fa3_h200.py):

``WARP_SPEC`` — producer and consumers (FA3 §3.1). One *producer* warp only issues TMA copies
    of K and V tiles into a ring of ``STAGES`` shared-memory slots; each slot has a "ready"
    mbarrier (the copy engine completes it when the bytes land) and an "empty" mbarrier (both
    consumers arrive when their products have read it). Consumer warpgroups never touch a
    global address. With the flag off, one 8-warp program issues its own copies (prefetching
    ``STAGES`` tiles ahead, as FlashAttention-2 with TMA would) and computes all 128 rows.
``PINGPONG`` — the consumer warpgroups (two, or three), 64 query rows each, take turns (FA3
    §3.1, Figure 1): a ring of mbarriers passes a token so that one warpgroup issues its matrix
    products while the others do their softmax.
``OVERLAP`` — inside one warpgroup, QKⱼᵀ and P Vⱼ₋₁ are issued together and the softmax of tile
    j runs while P Vⱼ₋₁ is still on the tensor cores (FA3 §3.2, Figure 2; Algorithm 2): products are issued
    asynchronously (``wgmma`` with ``is_async=True``) and waited for only when needed.

How a hand-over is signalled is a fourth switch, ``NAMED``. Gluon's ``mbarrier.arrive`` is one
thread's signal, so the compiler first synchronises the whole warpgroup with a ``bar.sync``:
three such waits per key tile and consumer. With NAMED the ping-pong token and the K/V slots'
releases use named barriers (``bar.arrive`` / ``bar.sync``, counted per warp; see
``_named``), as FlashAttention-3's own code does for its token (hopper/named_barrier.hpp in
Dao-AILab/flash-attention reserves WarpSchedulerWG1-3).

A work item is 64 query rows of one head per consumer warpgroup: 128 rows with two consumers,
192 with three (``NUM_CONSUMERS``; FlashAttention-3 uses three at d = 64). The grid is either
one program per item or, with WARP_SPEC, persistent: one program per SM that takes its items
in rounds (``_n_items``, ``_item``; with SNAKE odd rounds are dealt in reverse, which evens out
causal items of unequal cost); the ring positions and barrier phases then carry on from item
to item, Q has its own "empty" barrier and O its own shared tile, so the next item's loads
start during this one's epilogue — or, with two Q buffers per consumer (``Q_BUFS``), while
this item still runs. Which launch runs at which shape is flash_fa3.CHOICES,
measured on the H200; bench/FA3.md has what each technique and launch buys.

Per consumer warpgroup, with the overlap (S = scores, P = probabilities, O = accumulator)::

    S₀ = Q K₀ᵀ;  (m, l, P) = softmax stats of S₀
    for j = 1 .. T-1:
        issue Sⱼ = Q Kⱼᵀ;  issue O += P Vⱼ₋₁       # both on the tensor cores, asynchronously
        wait for Sⱼ;  (m, l, P', α) = softmax(Sⱼ)   # special-function units, meanwhile
        wait for O;   O = α · O;  P = P'
    O += P V_{T-1};  O = O · (1 / l);  lse = m + log l

Exponentials are base 2 with the scale folded in (``qk_scale = scale · log2 e``, one fused
multiply-add per score). Tiles move through 3-d TMA descriptors over (B·H, N, d), so rows past
a head's end are read as zeros and never written; only the tile that holds key N-1 and, when
causal, the tile on the diagonal pay for a mask. The causal mask is top-left aligned.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# TMA's copies (and the program-wide barrier) were renamed after Triton 3.6 (async_copy_global_to_shared -> async_load,
# async_copy_shared_to_global -> async_store); the kernel runs on 3.6 (the H200's) and compiles
# ahead of time on later releases (CI's), so it names them once here.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier  # bar.sync over the program

# Globals read inside @gluon.jit code must be constexpr; the host reads .value.
LN2 = gl.constexpr(0.6931471805599453)  # ln 2: turns the base-2 logsumexp back into a natural one
WG_ROWS = gl.constexpr(64)  # query rows per consumer warpgroup: wgmma's M is 64 per warpgroup
PRODUCER_REGS = gl.constexpr(24)  # registers per thread the producer warp keeps (indices only)
CONSUMER_REGS = gl.constexpr(240)  # registers per consumer thread with 2 consumers (setmaxnreg)
CONSUMER_REGS_3 = gl.constexpr(160)  # with 3: 3 x 128 threads x 160 + the producer fit 64 K registers


# --- layouts -------------------------------------------------------------------------------
@gluon.constexpr_function
def _mma_layout(n, num_warps):
    """The register layout of a wgmma accumulator with N columns over num_warps warps
    (warpgroups stacked along the rows: each owns 64 rows)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, n, 16])


# --- named barriers (NAMED) ----------------------------------------------------------------
# Gluon's mbarrier.arrive is issued by one thread of the partition, so the compiler puts a
# bar.sync over the whole warpgroup before it (every warp must have finished what the signal
# vouches for): three such waits per key tile and consumer (the ping-pong token, the K slot, the
# V slot). FlashAttention-3's CUTLASS code hands its token over with the 16 *named barriers* a
# thread block has instead (bar.sync / bar.arrive with an id and a thread count; FA3 §3.1 says
# "synchronization barriers (bar.sync instructions)", its code hopper/named_barrier.hpp names
# them WarpSchedulerWG1-3). bar.arrive counts the executing warp's 32 threads and goes on;
# bar.sync counts them and waits until `threads` have arrived; after that the barrier starts
# over. So each warp signals when *it* is done, without waiting for the rest of its warpgroup,
# and the waiter counts every warp. With NAMED the token and the K/V slots' "empty" signals go this way
# (Q's stays an mbarrier: once per item). Triton's partitions use the lowest ids (0-3 with three
# consumers; tests/test_flash_fa3.py reads them in the PTX); ours start at 7.
FREE_K_BAR = gl.constexpr(7)  # + slot (STAGES <= 3): every consumer warp -> producer, "K slot free"
FREE_V_BAR = gl.constexpr(10)  # + slot: "V slot free"
TURN_BAR = gl.constexpr(13)  # + WG (NUM_CONSUMERS <= 3): "warpgroup WG may issue its products"
WG_THREADS = gl.constexpr(128)  # threads of a consumer warpgroup
PRODUCER_THREADS = gl.constexpr(32)  # the producer is one warp


@gluon.constexpr_function
def _bar_asm(op, threads):
    """PTX for one named-barrier operation (bar.sync or bar.arrive) on the id in operand $1."""
    return f"bar.{op} $1, {threads};\n\tmov.u32 $0, 0;"


@gluon.jit
def _named(op: gl.constexpr, bar_id, threads: gl.constexpr, NUM_WARPS: gl.constexpr):
    """bar.sync or bar.arrive (op) on named barrier bar_id, expecting `threads` threads in all:
    executed once by every thread of this partition of NUM_WARPS warps (a tensor of one element
    per thread carries the id into the inline PTX; its result is unused)."""
    one_each = gl.full([NUM_WARPS * 32], 0, gl.int32, layout=gl.BlockedLayout([1], [32], [NUM_WARPS], [0]))
    gl.inline_asm_elementwise(_bar_asm(op, threads), "=r,r", [one_each + bar_id], dtype=gl.int32, is_pure=False,
                              pack=1)


@gluon.jit
def _take_turn(turn, turn_phase, WG: gl.constexpr, NAMED: gl.constexpr):
    """Ping-pong: wait for warpgroup WG's turn on the tensor cores; returns the token's next parity."""
    if NAMED:  # the previous warpgroup's 128 arrivals + ours
        _named("sync", TURN_BAR + WG, 2 * WG_THREADS, 4)
    else:
        mbarrier.wait(turn.index(WG), turn_phase)
    return turn_phase ^ 1


@gluon.jit
def _pass_turn(turn, WG: gl.constexpr, NUM_CONSUMERS: gl.constexpr, NAMED: gl.constexpr):
    """Ping-pong: products issued, hand the token to warpgroup WG + 1."""
    if NAMED:
        _named("arrive", TURN_BAR + (WG + 1) % NUM_CONSUMERS, 2 * WG_THREADS, 4)
    else:
        mbarrier.arrive(turn.index((WG + 1) % NUM_CONSUMERS))


@gluon.jit
def _await_free(empty, slot, c, STAGES: gl.constexpr, NUM_CONSUMERS: gl.constexpr, NAMED: gl.constexpr,
                FREE_BAR: gl.constexpr):
    """Producer: wait until every consumer released ring slot `slot` (c: ring position)."""
    if NAMED:  # every consumer warp's arrival + the producer's; the first lap's slots are free
        if c >= STAGES:
            _named("sync", FREE_BAR + slot, PRODUCER_THREADS + NUM_CONSUMERS * WG_THREADS, 1)
    else:
        # A fresh barrier counts as having completed the phase before its first, so the first
        # lap's waits (parity 1) pass.
        mbarrier.wait(empty.index(slot), ((c // STAGES) & 1) ^ 1)


# --- copies ----------------------------------------------------------------------------------
@gluon.jit
def _load(desc, smem, ready, slot, bh, row, pred=True):
    """Start a TMA copy of the tile at (bh, row, 0) into smem[slot]; ready[slot] completes
    once its bytes have landed. Rows past the head's end arrive as zeros."""
    mbarrier.expect(ready.index(slot), desc.block_type.nbytes, pred=pred)
    _tma_load(desc, [bh, row, 0], ready.index(slot), smem.index(slot), pred=pred)


@gluon.jit
def _tile(t, n_mblocks, n_bh, n_ctx, CAUSAL: gl.constexpr, BALANCE: gl.constexpr, BLOCK_M: gl.constexpr,
          BLOCK_N: gl.constexpr):
    """Work item t -> (batch·head, first query row, number of key tiles). Consecutive items
    share a head (its K and V stay in L2); causal items of a head go heaviest first. With
    BALANCE (causal), items are ordered by cost across all heads: every head's last query block
    (the most keys) first, then every head's second-to-last, ... (longest job first; the
    heads' K and V then no longer take turns in L2)."""
    if CAUSAL and BALANCE:
        bh = t % n_bh
        m_idx = t // n_bh
    else:
        bh = t // n_mblocks
        m_idx = t % n_mblocks
    if CAUSAL:
        start_m = n_mblocks - 1 - m_idx
        n_blocks = (gl.minimum(n_ctx, (start_m + 1) * BLOCK_M) + BLOCK_N - 1) // BLOCK_N
    else:
        start_m = m_idx
        n_blocks = (n_ctx + BLOCK_N - 1) // BLOCK_N
    return bh, start_m * BLOCK_M, n_blocks


@gluon.jit
def _n_items(n_tiles, SNAKE: gl.constexpr):
    """How many work items this program runs. The P programs are dealt items in rounds of P:
    in round r program p gets item r·P + p, or, with SNAKE, in odd rounds r·P + (P-1-p) (who
    got a round's heaviest item gets the next round's lightest). With one program per item
    (P = n_tiles) that is one item."""
    full = n_tiles // gl.num_programs(0)  # complete rounds
    return full + (_item(full, SNAKE) < n_tiles).to(gl.int32)  # + the last, partial round


@gluon.jit
def _item(i, SNAKE: gl.constexpr):
    """The work item this program runs in its round i (see _n_items)."""
    pid = gl.program_id(0)
    n_prog = gl.num_programs(0)
    t = i * n_prog + pid
    if SNAKE:
        t += (i % 2) * (n_prog - 1 - 2 * pid)
    return t


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, q_empty, k_empty,
              v_empty, n_tiles, n_mblocks, n_bh, n_ctx, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
              BLOCK_N: gl.constexpr, NUM_CONSUMERS: gl.constexpr, BALANCE: gl.constexpr,
              SNAKE: gl.constexpr, KV_FUSED: gl.constexpr, Q_BUFS: gl.constexpr, NAMED: gl.constexpr):
    """The producer warp (WARP_SPEC): for each work item of this program, Q for every consumer,
    then K and V around the ring. Ring positions count on across work items. Item n's Q goes to
    buffer n % Q_BUFS: with two, it waits for item n-2's Q to be released, not item n-1's, so
    the next item's Q, K0 and V0 are loaded while the consumers still work on this one. With
    KV_FUSED a slot's K and V share one "ready" and one "empty" barrier (half the hand-overs);
    with NAMED the consumers release slots through named barriers (see _named)."""
    c = 0  # ring position: tiles of K (and of V) issued so far by this program
    for n_done in range(_n_items(n_tiles, SNAKE)):
        bh, off_m, n_blocks = _tile(_item(n_done, SNAKE), n_mblocks, n_bh, n_ctx, CAUSAL, BALANCE,
                                    NUM_CONSUMERS * WG_ROWS, BLOCK_N)
        for i in gl.static_range(NUM_CONSUMERS):  # one Q tile (64 rows) per consumer, once its buffer is free
            q_idx = (n_done % Q_BUFS) * NUM_CONSUMERS + i
            mbarrier.wait(q_empty.index(q_idx), ((n_done // Q_BUFS) & 1) ^ 1)
            _load(q_desc, q_smem, q_ready, q_idx, bh, off_m + i * WG_ROWS)
        for j in range(n_blocks):
            slot = c % STAGES
            _await_free(k_empty, slot, c, STAGES, NUM_CONSUMERS, NAMED, FREE_K_BAR)
            if KV_FUSED:  # one barrier completes when both tiles have landed
                mbarrier.expect(k_ready.index(slot), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
                _tma_load(k_desc, [bh, j * BLOCK_N, 0], k_ready.index(slot), k_smem.index(slot))
                _tma_load(v_desc, [bh, j * BLOCK_N, 0], k_ready.index(slot), v_smem.index(slot))
            else:
                _load(k_desc, k_smem, k_ready, slot, bh, j * BLOCK_N)
                _await_free(v_empty, slot, c, STAGES, NUM_CONSUMERS, NAMED, FREE_V_BAR)
                _load(v_desc, v_smem, v_ready, slot, bh, j * BLOCK_N)
            c += 1


@gluon.jit
def _release(desc, smem, ready, empty, slot, bh, j_next, n_blocks, BLOCK_N: gl.constexpr,
             SELF_LOAD: gl.constexpr, NAMED: gl.constexpr, FREE_BAR: gl.constexpr, NUM_CONSUMERS: gl.constexpr):
    """A consumer is done reading smem[slot]. With a producer warp: tell it (arrive on the
    slot's empty barrier, or with NAMED each warp on named barrier FREE_BAR + slot). Without
    one (SELF_LOAD): wait for every warp of this program (bar.sync), then refill the slot with
    tile j_next itself."""
    if SELF_LOAD:
        _cta_barrier()
        _load(desc, smem, ready, slot, bh, j_next * BLOCK_N, pred=j_next < n_blocks)
    elif NAMED:
        _named("arrive", FREE_BAR + slot, PRODUCER_THREADS + NUM_CONSUMERS * WG_THREADS, 4)
    else:
        mbarrier.arrive(empty.index(slot))


# --- the consumer: QKᵀ, softmax, PV on one warpgroup (without WARP_SPEC: two, in step) -----
@gluon.jit
def _softmax_step(s, m_i, l_i, kb, q_row0, n_ctx, qk_scale, CAUSAL: gl.constexpr,
                  ROWS: gl.constexpr, BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    """Online softmax of one score tile s (ROWS, Bc): returns P (unnormalised), the new
    statistics (m, l) and alpha = exp2(m_old - m_new), the factor the accumulator must take."""
    # Only the tile holding key N-1 and (causal) the diagonal tiles pay for a mask.
    if (kb + BLOCK_N > n_ctx) or (CAUSAL and kb + BLOCK_N > q_row0 + 1):
        cols = kb + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        rows = q_row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
        keep = gl.expand_dims(cols < n_ctx, 0)
        if CAUSAL:
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        s = gl.where(keep, s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)  # running max, base-2 units
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))  # one FMA + one exp2 per score
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_new, alpha


@gluon.jit
def _first_tile(q, k_desc, k_smem, k_ready, k_empty, turn, bh, q_row0, n_ctx, n_blocks, qk_scale, c0,
                turn_phase, WG: gl.constexpr, NUM_WARPS: gl.constexpr, BLOCK_N: gl.constexpr,
                HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr,
                SELF_LOAD: gl.constexpr, NUM_CONSUMERS: gl.constexpr, KV_FUSED: gl.constexpr,
                NAMED: gl.constexpr):
    """An item's first step, S0 = Q K0ᵀ and its softmax (no P V yet to overlap it with).
    Returns P0 as wgmma's register operand, (m, l) and the token's parity."""
    ROWS: gl.constexpr = WG_ROWS * NUM_WARPS // 4
    s_layout: gl.constexpr = _mma_layout(BLOCK_N, NUM_WARPS)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=_mma_layout(HEAD_DIM, NUM_WARPS),
                                                 k_width=2)
    slot0 = c0 % STAGES
    mbarrier.wait(k_ready.index(slot0), (c0 // STAGES) & 1)
    if PINGPONG:
        turn_phase = _take_turn(turn, turn_phase, WG, NAMED)
    s_tok = warpgroup_mma(q, k_smem.index(slot0).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)),
                          gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout), use_acc=False, is_async=True)
    if PINGPONG:
        _pass_turn(turn, WG, NUM_CONSUMERS, NAMED)
    s = warpgroup_mma_wait(0, deps=(s_tok,))
    if not KV_FUSED:  # (fused: the slot is released once, after P V)
        _release(k_desc, k_smem, k_ready, k_empty, slot0, bh, STAGES, n_blocks, BLOCK_N, SELF_LOAD, NAMED,
                 FREE_K_BAR, NUM_CONSUMERS)
    m_i = gl.full([ROWS], -float("inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([ROWS], gl.float32, layout=gl.SliceLayout(1, s_layout))
    p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, 0, q_row0, n_ctx, qk_scale, CAUSAL, ROWS, BLOCK_N, s_layout)
    return gl.convert_layout(p.to(k_desc.dtype), p_layout), m_i, l_i, turn_phase


@gluon.jit
def _key_tiles(q, k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, turn, acc, p_op, m_i, l_i,
               bh, q_row0, n_ctx, n_blocks, qk_scale, c0, turn_phase, WG: gl.constexpr, NUM_WARPS: gl.constexpr,
               BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
               PINGPONG: gl.constexpr, OVERLAP: gl.constexpr, SELF_LOAD: gl.constexpr,
               NUM_CONSUMERS: gl.constexpr, KV_FUSED: gl.constexpr, NAMED: gl.constexpr):
    """Key tiles 1 .. T-1 of an item (c0: ring position of its tile 0): Sj = Q Kjᵀ and
    O += P Vj-1 issued together, the softmax of Sj under P Vj-1 (OVERLAP)."""
    ROWS: gl.constexpr = WG_ROWS * NUM_WARPS // 4
    s_layout: gl.constexpr = _mma_layout(BLOCK_N, NUM_WARPS)  # S tile (ROWS, Bc), fp32
    o_layout: gl.constexpr = _mma_layout(HEAD_DIM, NUM_WARPS)  # O accumulator (ROWS, d), fp32
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    for j in range(1, n_blocks):
        c = c0 + j  # ring position of key tile j
        slot = c % STAGES
        prev = (c - 1) % STAGES
        k_j = k_smem.index(slot).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))  # Kjᵀ (d, Bc)
        v_prev = v_smem.index(prev).reshape([BLOCK_N, HEAD_DIM])  # Vj-1 (Bc, d)
        mbarrier.wait(k_ready.index(slot), (c // STAGES) & 1)
        if not KV_FUSED:  # (fused: Vj-1 landed with Kj-1, waited for last step)
            mbarrier.wait(v_ready.index(prev), ((c - 1) // STAGES) & 1)
        if PINGPONG:  # take the token: the other warpgroup is in its softmax now
            turn_phase = _take_turn(turn, turn_phase, WG, NAMED)
        s_tok = warpgroup_mma(q, k_j, s_zero, use_acc=False, is_async=True)  # Sj = Q Kjᵀ
        o_tok = warpgroup_mma(p_op, v_prev, acc, is_async=True)  # O += P Vj-1
        if PINGPONG:  # hand the token over: the next warpgroup may issue its products
            _pass_turn(turn, WG, NUM_CONSUMERS, NAMED)
        if OVERLAP:
            # Softmax of Sj while P Vj-1 still runs on the tensor cores.
            s = warpgroup_mma_wait(1, deps=(s_tok,))  # products retire in order: Sj is done
            if not KV_FUSED:
                _release(k_desc, k_smem, k_ready, k_empty, slot, bh, j + STAGES, n_blocks, BLOCK_N, SELF_LOAD,
                         NAMED, FREE_K_BAR, NUM_CONSUMERS)
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, j * BLOCK_N, q_row0, n_ctx, qk_scale,
                                               CAUSAL, ROWS, BLOCK_N, s_layout)
            acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))  # keeps the old P's registers
        else:
            # In order: wait for both products, then the softmax (tensor cores idle meanwhile).
            s, acc = warpgroup_mma_wait(0, deps=(s_tok, o_tok))
            if not KV_FUSED:
                _release(k_desc, k_smem, k_ready, k_empty, slot, bh, j + STAGES, n_blocks, BLOCK_N, SELF_LOAD,
                         NAMED, FREE_K_BAR, NUM_CONSUMERS)
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, j * BLOCK_N, q_row0, n_ctx, qk_scale,
                                               CAUSAL, ROWS, BLOCK_N, s_layout)
        if KV_FUSED:  # Kj-1 and Vj-1 both read: the slot is free
            mbarrier.arrive(k_empty.index(prev))
        else:
            _release(v_desc, v_smem, v_ready, v_empty, prev, bh, j - 1 + STAGES, n_blocks, BLOCK_N, SELF_LOAD,
                     NAMED, FREE_V_BAR, NUM_CONSUMERS)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p_op = gl.convert_layout(p.to(k_desc.dtype), p_layout)
    return acc, p_op, m_i, l_i, turn_phase


@gluon.jit
def _store_o(o_desc, lse_ptr, o_smem, acc, m_i, l_i, bh, q_row0, n_ctx, WG: gl.constexpr,
             NUM_WARPS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """An item's end: O = acc / l, lse = m + log l; O leaves through its shared tile and TMA."""
    ROWS: gl.constexpr = WG_ROWS * NUM_WARPS // 4
    o_layout: gl.constexpr = _mma_layout(HEAD_DIM, NUM_WARPS)
    inv_l = 1.0 / l_i  # one division per row, then a multiply per element
    acc = acc * gl.expand_dims(gl.convert_layout(inv_l, gl.SliceLayout(1, o_layout)), 1)
    rows = q_row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, _mma_layout(BLOCK_N, NUM_WARPS)))
    gl.store(lse_ptr + bh * n_ctx + rows, (m_i + gl.log2(l_i)) * LN2, mask=rows < n_ctx)
    o_tile = o_smem.index(WG)
    tma.store_wait(0)  # the previous item's O has left o_tile
    o_tile.reshape([ROWS, HEAD_DIM]).store(acc.to(o_desc.dtype))
    fence_async_shared()
    _tma_store(o_desc, [bh, q_row0, 0], o_tile)


@gluon.jit
def _consumer_tile(q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem,
                   q_ready, k_ready, v_ready, q_empty, k_empty, v_empty, turn,
                   bh, off_m, n_ctx, n_blocks, qk_scale, c0, q_idx, q_phase, turn_phase,
                   WG: gl.constexpr, NUM_WARPS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                   STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, OVERLAP: gl.constexpr,
                   SELF_LOAD: gl.constexpr, NUM_CONSUMERS: gl.constexpr, KV_FUSED: gl.constexpr,
                   NAMED: gl.constexpr):
    """One work item (64 query rows of one head, or 128 without WARP_SPEC) on one consumer:
    Q in q_smem[q_idx], c0 the ring position of its first key tile; returns the ping-pong
    token's next parity. The token goes round the warpgroups: WG hands it to WG + 1."""
    ROWS: gl.constexpr = WG_ROWS * NUM_WARPS // 4  # 64 query rows per warpgroup
    q_row0 = off_m + WG * ROWS  # this warpgroup's first query row
    if SELF_LOAD:  # no producer warp: start Q's copy and the ring's first STAGES tiles here
        _load(q_desc, q_smem, q_ready, 0, bh, off_m)
        for i in gl.static_range(STAGES):
            _load(k_desc, k_smem, k_ready, i, bh, i * BLOCK_N, pred=i < n_blocks)
            _load(v_desc, v_smem, v_ready, i, bh, i * BLOCK_N, pred=i < n_blocks)
    q = q_smem.index(q_idx).reshape([ROWS, HEAD_DIM])  # (ROWS, d)
    mbarrier.wait(q_ready.index(q_idx), q_phase)
    p_op, m_i, l_i, turn_phase = _first_tile(q, k_desc, k_smem, k_ready, k_empty, turn, bh, q_row0, n_ctx,
                                             n_blocks, qk_scale, c0, turn_phase, WG, NUM_WARPS, BLOCK_N,
                                             HEAD_DIM, STAGES, CAUSAL, PINGPONG, SELF_LOAD, NUM_CONSUMERS,
                                             KV_FUSED, NAMED)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=_mma_layout(HEAD_DIM, NUM_WARPS))
    acc, p_op, m_i, l_i, turn_phase = _key_tiles(q, k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, k_empty,
                                                 v_empty, turn, acc, p_op, m_i, l_i, bh, q_row0, n_ctx, n_blocks,
                                                 qk_scale, c0, turn_phase, WG, NUM_WARPS, BLOCK_N, HEAD_DIM,
                                                 STAGES, CAUSAL, PINGPONG, OVERLAP, SELF_LOAD, NUM_CONSUMERS,
                                                 KV_FUSED, NAMED)
    # Epilogue: Q is no longer read (the producer may load the next item's), the last P V,
    # normalise, write lse and O (through shared memory and TMA).
    if not SELF_LOAD:
        mbarrier.arrive(q_empty.index(q_idx))
    last = (c0 + n_blocks - 1) % STAGES
    if not KV_FUSED:
        mbarrier.wait(v_ready.index(last), ((c0 + n_blocks - 1) // STAGES) & 1)
    o_tok = warpgroup_mma(p_op, v_smem.index(last).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(o_tok,))
    if KV_FUSED:
        mbarrier.arrive(k_empty.index(last))
    elif not SELF_LOAD:
        _release(v_desc, v_smem, v_ready, v_empty, last, bh, 0, 0, BLOCK_N, False, NAMED, FREE_V_BAR,
                 NUM_CONSUMERS)
    _store_o(o_desc, lse_ptr, o_smem, acc, m_i, l_i, bh, q_row0, n_ctx, WG, NUM_WARPS, BLOCK_N, HEAD_DIM)
    return turn_phase


@gluon.jit
def _consumer(q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem,
              q_ready, k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
              qk_scale, WG: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, OVERLAP: gl.constexpr,
              NUM_CONSUMERS: gl.constexpr, BALANCE: gl.constexpr, SNAKE: gl.constexpr,
              KV_FUSED: gl.constexpr, Q_BUFS: gl.constexpr, NAMED: gl.constexpr):
    """Consumer warpgroup WG (WARP_SPEC): the work items of this program, one after another.
    Item n's Q is in buffer n % Q_BUFS (two: the producer loads the next item's Q, and then
    its first K and V, while this one runs)."""
    c = 0  # ring position, as the producer counts it
    # Ping-pong token: warpgroup 0 owns the tensor cores first (parity 1 passes at once on a
    # fresh barrier); each other warpgroup waits for the hand-over of the one before it.
    turn_phase = 1 if WG == 0 else 0
    if PINGPONG and NAMED and WG == NUM_CONSUMERS - 1:  # named barriers have no phase: the last
        _named("arrive", TURN_BAR, 2 * WG_THREADS, 4)  # warpgroup hands warpgroup 0 its first turn
    for n_done in range(_n_items(n_tiles, SNAKE)):
        bh, off_m, n_blocks = _tile(_item(n_done, SNAKE), n_mblocks, n_bh, n_ctx, CAUSAL, BALANCE,
                                    NUM_CONSUMERS * WG_ROWS, BLOCK_N)
        q_idx = (n_done % Q_BUFS) * NUM_CONSUMERS + WG
        turn_phase = _consumer_tile(q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem,
                                    q_ready, k_ready, v_ready, q_empty, k_empty, v_empty, turn, bh, off_m,
                                    n_ctx, n_blocks, qk_scale, c, q_idx, (n_done // Q_BUFS) & 1, turn_phase,
                                    WG, 4, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, False,
                                    NUM_CONSUMERS, KV_FUSED, NAMED)
        c += n_blocks
    tma.store_wait(0)


# --- the kernel: work items of (128 query rows, batch·head) --------------------------------
@gluon.jit
def fa3_fwd_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, n_ctx, n_bh, qk_scale,
                   HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, WARP_SPEC: gl.constexpr, PINGPONG: gl.constexpr,
                   OVERLAP: gl.constexpr, NUM_CONSUMERS: gl.constexpr = 2, BALANCE: gl.constexpr = False,
                   SNAKE: gl.constexpr = False, KV_FUSED: gl.constexpr = False, Q_BUFS: gl.constexpr = 1,
                   NAMED: gl.constexpr = False):
    # q_desc, o_desc: tiles (1, 64, d) with WARP_SPEC, else (1, 128, d) of (B·H, N, d)
    # k_desc, v_desc: tiles (1, Bc, d);  lse_ptr: fp32 (B·H, N);  n_bh = B·H
    # The grid is 1-d. One program per work item, or (persistent, WARP_SPEC only) one per SM,
    # each taking its items in rounds (_n_items, _item).
    # NUM_CONSUMERS (WARP_SPEC): 2 or 3 consumer warpgroups, so a work item is 128 or 192 query
    # rows; BALANCE: causal items longest first across heads; SNAKE: items dealt to the
    # persistent programs in a snake; KV_FUSED: one ready and one empty barrier per ring slot
    # for K and V together; Q_BUFS: Q tiles per consumer (2: the next item's Q loads during this
    # one); NAMED: the ping-pong token and the K/V slot releases through named barriers.
    NUM_Q: gl.constexpr = NUM_CONSUMERS * Q_BUFS if WARP_SPEC else 1
    BLOCK_M: gl.constexpr = NUM_CONSUMERS * WG_ROWS if WARP_SPEC else 2 * WG_ROWS  # query rows per item
    n_mblocks = (n_ctx + BLOCK_M - 1) // BLOCK_M
    n_tiles = n_mblocks * n_bh

    # Shared memory: Q per consumer (and buffer), O per consumer (with WARP_SPEC; else O reuses Q's
    # tile), and the K/V ring of STAGES slots.
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [NUM_Q] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
    # Barriers: "ready" per tile (the copy engine completes it), "empty" per slot (each
    # consumer arrives), and the ping-pong token (one barrier per consumer).
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_Q, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [NUM_Q, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NUM_CONSUMERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_Q):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_CONSUMERS)
        mbarrier.init(v_empty.index(i), count=NUM_CONSUMERS)
    for i in gl.static_range(NUM_CONSUMERS):
        mbarrier.init(turn.index(i), count=1)
    fence_async_shared()

    if WARP_SPEC:
        o_smem = gl.allocate_shared_memory(o_desc.dtype, [NUM_CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
        if NUM_CONSUMERS == 2:
            gl.warp_specialize(
                [(_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_ready,
                              k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
                              qk_scale, 0, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, NUM_CONSUMERS,
                              BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED)),  # consumer warpgroup 0
                 (_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_ready,
                              k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
                              qk_scale, 1, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, NUM_CONSUMERS,
                              BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED)),  # consumer warpgroup 1
                 (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, v_ready,
                              q_empty, k_empty, v_empty, n_tiles, n_mblocks, n_bh, n_ctx, CAUSAL, STAGES,
                              BLOCK_N, NUM_CONSUMERS, BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED))],  # the producer warp
                [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
        else:  # three consumer warpgroups (FlashAttention-3's choice at d = 64), fewer registers each
            gl.warp_specialize(
                [(_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_ready,
                              k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
                              qk_scale, 0, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, NUM_CONSUMERS,
                              BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED)),
                 (_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_ready,
                              k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
                              qk_scale, 1, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, NUM_CONSUMERS,
                              BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED)),
                 (_consumer, (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_ready,
                              k_ready, v_ready, q_empty, k_empty, v_empty, turn, n_tiles, n_mblocks, n_bh, n_ctx,
                              qk_scale, 2, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, PINGPONG, OVERLAP, NUM_CONSUMERS,
                              BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED)),
                 (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, v_ready,
                              q_empty, k_empty, v_empty, n_tiles, n_mblocks, n_bh, n_ctx, CAUSAL, STAGES,
                              BLOCK_N, NUM_CONSUMERS, BALANCE, SNAKE, KV_FUSED, Q_BUFS, NAMED))],
                [4, 4, 1], [CONSUMER_REGS_3, CONSUMER_REGS_3, PRODUCER_REGS])
    else:  # one work item per program, both warpgroups in step, copies issued here
        bh, off_m, n_blocks = _tile(gl.program_id(0), n_mblocks, n_bh, n_ctx, CAUSAL, BALANCE, BLOCK_M, BLOCK_N)
        _consumer_tile(q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, q_smem, k_smem, v_smem,
                       q_ready, k_ready, v_ready, q_empty, k_empty, v_empty, turn,
                       bh, off_m, n_ctx, n_blocks, qk_scale, 0, 0, 0, 0,
                       0, 8, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, False, OVERLAP, True, 2, False, False)
        tma.store_wait(0)


# --- launch configuration and ahead-of-time compilation ------------------------------------
# Shared memory holds Q and O (64 rows per consumer; O only with WARP_SPEC) and STAGES slots of
# K and V (BLOCK_N rows each). Hopper gives one program 227 KiB, so at d = 128 with a producer
# warp the ring has 2 slots. BLOCK_N is a power of two (the masks use arange); Bc = 256 at
# d = 64 spills registers (ptxas: 288 bytes). Which configuration runs where is
# flash_fa3.choose's table, measured on the H200.
SMEM_BYTES = 227 * 1024  # shared memory one program may use on sm_90
BARRIER_BYTES = 256  # the mbarriers, rounded up


def fits(head_dim, block_n, stages, warp_spec, consumers=2, elem_bytes=2, q_bufs=1):
    """Whether Q (q_bufs tiles per consumer), O and the K/V ring fit one program's shared memory."""
    q_o = ((1 + q_bufs) * consumers if warp_spec else 2) * WG_ROWS.value * head_dim * elem_bytes
    ring = stages * 2 * block_n * head_dim * elem_bytes
    return q_o + ring + BARRIER_BYTES <= SMEM_BYTES


def layouts(head_dim, dtype_name, warp_spec, block_n):
    """The NVMMA shared layouts (and block shapes) of the Q/O and K/V descriptors."""
    gdt = {"bf16": gl.bfloat16, "fp16": gl.float16}[dtype_name]
    q_block = [1, WG_ROWS.value if warp_spec else 2 * WG_ROWS.value, head_dim]
    kv_block = [1, block_n, head_dim]
    return ((q_block, gl.NVMMASharedLayout.get_default_for(q_block, gdt)),
            (kv_block, gl.NVMMASharedLayout.get_default_for(kv_block, gdt)))


def compile_for_hopper(head_dim=128, dtype_name="bf16", causal=False, warp_spec=True, pingpong=True,
                       overlap=True, block_n=128, stages=2, consumers=2, balance=False, kv_fused=False,
                       q_bufs=1, snake=False, named=False):
    """Compile the kernel for sm_90a without a GPU (to read its PTX and check its structure)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    (q_block, q_layout), (kv_block, kv_layout) = layouts(head_dim, dtype_name, warp_spec, block_n)
    q_sig = f"tensordesc<{dtype_name}{q_block},{q_layout!r}>".replace(" ", "")
    kv_sig = f"tensordesc<{dtype_name}{kv_block},{kv_layout!r}>"
    signature = {"q_desc": q_sig, "k_desc": kv_sig, "v_desc": kv_sig, "o_desc": q_sig, "lse_ptr": "*fp32",
                 "n_ctx": "i32", "n_bh": "i32", "qk_scale": "fp32", "HEAD_DIM": "constexpr", "BLOCK_N": "constexpr",
                 "STAGES": "constexpr", "CAUSAL": "constexpr", "WARP_SPEC": "constexpr",
                 "PINGPONG": "constexpr", "OVERLAP": "constexpr", "NUM_CONSUMERS": "constexpr",
                 "BALANCE": "constexpr", "SNAKE": "constexpr", "KV_FUSED": "constexpr", "Q_BUFS": "constexpr", "NAMED": "constexpr"}
    constexprs = {"HEAD_DIM": head_dim, "BLOCK_N": block_n, "STAGES": stages, "CAUSAL": causal,
                  "WARP_SPEC": warp_spec, "PINGPONG": pingpong and warp_spec, "OVERLAP": overlap,
                  "NUM_CONSUMERS": consumers if warp_spec else 2, "BALANCE": balance, "SNAKE": balance or snake,
                  "KV_FUSED": kv_fused and warp_spec, "Q_BUFS": q_bufs, "NAMED": named and warp_spec}
    src = GluonASTSource(fa3_fwd_kernel, signature, constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4 if warp_spec else 8})
