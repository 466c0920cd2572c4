"""FlashAttention's backward pass in Triton: the kernels that ``flash_triton.backward`` launches.

What you will learn here: how the backward pass recomputes P instead of reading it (Dao et al.
2022, arXiv:2205.14135, Algorithm 4; FlashAttention-2, arXiv:2307.08691, Algorithm 2), and how
its work is split between Triton programs. With lse saved by the forward pass and
D = rowsum(dO ∘ O), for each pair of a query block i and a key block j::

    P_ij = exp(S_ij − lse_i)     (recomputed: scores in log2 units, lse scaled by log2 e)
    dV_j += P_ijᵀ dO_i,   dP_ij = dO_i V_jᵀ,   dS_ij = P_ij ∘ (dP_ij − D_i)
    dK_j += scale · dS_ijᵀ Q_i,   dQ_i += scale · dS_ij K_j

Three kernels: ``_bwd_delta_kernel`` computes D, one program per query block;
``_bwd_dkdv_kernel`` runs one program per (key block, b·H + h), keeps dK_j and dV_j on chip while
query blocks stream past, and with ``ATOMIC_DQ`` also adds dS_ij K_j into an fp32 dQ buffer
(5 block products per pair, FlashAttention-2's choice); otherwise ``_bwd_dq_kernel`` runs one
program per query block and recomputes S and dP for dQ (7 products per pair, no atomics,
deterministic). ``flash_triton.DQ_STRATEGY`` chooses between them. With dropout the forward's
keep bits are redrawn from the seed (``dropout_triton``), never read.

Dependency rule: needs triton; imports ``dropout_triton`` and ``triton_tuning``; only
``flash_triton`` imports it.
"""

from __future__ import annotations

import triton
import triton.language as tl

from . import dropout_triton
from .triton_tuning import BWD_CONFIGS, BWD_PRUNE, DQ_CONFIGS, DQ_PRUNE, RUNTIME_INTS, TUNE_KEY

__all__ = ["LOG2E", "_bwd_delta_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"]

# Globals read inside @triton.jit code must be constexpr; the host reads .value.
LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x · LOG2E)


@triton.jit
def _bwd_delta_kernel(O, DO, DELTA, n_q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """D_i = Σ_k dO_ik · O_ik for contiguous O, dO (B·H, Nq, d); D (B·H, Nq) fp32."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = pid_bh * n_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    row_ok = offs_m[:, None] < n_q
    o = tl.load(O + ptrs, mask=row_ok, other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=row_ok, other=0.0).to(tl.float32)
    tl.store(DELTA + pid_bh * n_q + offs_m, tl.sum(o * do, 1), mask=offs_m < n_q)


@triton.jit
def _bwd_dkdv_inner(
    # accumulators (Bc, d) fp32 and this program's key/value tiles (Bc, d)
    dk, dv, k, v,
    # per-(b, h) bases (Q, dO, dQ share the row stride: contiguous), or descriptors
    Q, DO, DQ, LSE, DELTA, stride_n, pid_bh,
    # sizes: this block's keys (Bc,), query offsets in a block (Br,), head-dim offsets (d,)
    offs_n, offs_m0, offs_d, n_q, n_k, sm_scale, qk_scale,
    # dropout: as in flash_triton._fwd_kernel; key(col) of this block's keys (Bc,)
    seed_key, col_keys, thresh, keep_scale,
    # meta-parameters, the same for every call of one program
    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, ATOMIC_DQ: tl.constexpr, BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr, DROPOUT: tl.constexpr,
    # what varies between the calls (pass them by name): the query range [lo, hi) and its mask
    lo, hi, MASKED: tl.constexpr,
):
    """Accumulate dK, dV of one key block over query blocks [lo, hi), working in transposed
    form (keys along rows) so the products land directly in dK, dV's layout."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + offs_m0  # (Br,) query rows
        ptrs = offs_m[:, None] * stride_n + offs_d[None, :]  # (Br, d)
        if USE_TMA:  # the copy engine fills rows past this head's end with zeros
            q = Q.load([pid_bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
            do = DO.load([pid_bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
        elif MASKED:
            q = tl.load(Q + ptrs, mask=(offs_m < n_q)[:, None], other=0.0)
            do = tl.load(DO + ptrs, mask=(offs_m < n_q)[:, None], other=0.0)
        else:
            q = tl.load(Q + ptrs)
            do = tl.load(DO + ptrs)
        if MASKED:
            lse2 = tl.load(LSE + offs_m, mask=offs_m < n_q, other=0.0) * LOG2E
            delta = tl.load(DELTA + offs_m, mask=offs_m < n_q, other=0.0)
        else:
            lse2 = tl.load(LSE + offs_m) * LOG2E
            delta = tl.load(DELTA + offs_m)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # (Bc, Br) = Sᵀ, log2
        p_t = tl.exp2(s_t - lse2[None, :])  # Pᵀ, exact softmax probabilities
        if MASKED:
            allowed = (offs_n[:, None] < n_k) & (offs_m[None, :] < n_q)
            if CAUSAL:
                allowed = allowed & (offs_n[:, None] <= offs_m[None, :])
            p_t = tl.where(allowed, p_t, 0.0)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # (Bc, Br) = (dO Vᵀ)ᵀ
        if DROPOUT:  # the forward's keep bits, redrawn in transposed form (keys along rows)
            row_keys = dropout_triton.row_keys(seed_key, pid_bh, offs_m)  # (Br,)
            keep_t = dropout_triton.keep_t(row_keys, col_keys, thresh)  # (Bc, Br)
            dv = tl.dot(tl.where(keep_t, p_t, 0.0).to(do.dtype), do, acc=dv, input_precision=PRECISION)
            # dP = dP̃ ∘ keep / (1 − p); the scale rides in the multiply-add with D
            ds_t = p_t * (tl.where(keep_t, dp_t, 0.0) * keep_scale - delta[None, :])
        else:
            dv = tl.dot(p_t.to(do.dtype), do, acc=dv, input_precision=PRECISION)  # += Pᵀ dO
            ds_t = p_t * (dp_t - delta[None, :])  # (Bc, Br) = dSᵀ (without the scale)
        dk = tl.dot(ds_t.to(q.dtype), q, acc=dk, input_precision=PRECISION)  # += dSᵀ Q
        if ATOMIC_DQ > 0:
            dq = tl.dot(tl.trans(ds_t).to(k.dtype), k, input_precision=PRECISION) * sm_scale
            if ATOMIC_DQ == 1:
                tl.atomic_add(DQ + ptrs, dq, mask=(offs_m < n_q)[:, None], sem="relaxed")
            else:  # one bulk reduction of the (Br, d) tile; rows past the end are dropped
                DQ.atomic_add([pid_bh, start_m, 0], dq.reshape(1, BLOCK_M, HEAD_DIM))
    return dk, dv


@triton.autotune(configs=BWD_CONFIGS, key=TUNE_KEY + ["ATOMIC_DQ", "USE_TMA"], prune_configs_by=BWD_PRUNE)
@triton.jit(do_not_specialize=RUNTIME_INTS)
def _bwd_dkdv_kernel(
    # all contiguous: Q, dO (B, H, Nq, d); K, V, dK, dV (B, H, Nk, d): pointers, or with USE_TMA
    # tensor descriptors over the (B·H, N, d) views; LSE, DELTA (B, H, Nq) fp32 pointers;
    # DQ (B, H, Nq, d) fp32, used only when ATOMIC_DQ > 0: a pointer for 1, a descriptor for 2
    Q, K, V, DO, LSE, DELTA, DK, DV, DQ,
    # sizes and scales
    n_q, n_k, sm_scale, qk_scale,
    # dropout: as in flash_triton._fwd_kernel
    seed_key, thresh, keep_scale,
    size_class,  # read by the autotuner only (triton_tuning.size_class)
    # meta-parameters
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr, DROPOUT: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_desc = tl.program_id(1)  # int32, a descriptor coordinate
    pid_bh = pid_desc.to(tl.int64)
    if ATOMIC_DQ == 1:
        DQ += pid_bh * n_q * HEAD_DIM
    LSE += pid_bh * n_q
    DELTA += pid_bh * n_q

    n0 = pid_n * BLOCK_N
    offs_n = n0 + tl.arange(0, BLOCK_N)  # (Bc,) key rows of this program
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_ptrs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]  # (Bc, d)
    key_ok = offs_n[:, None] < n_k
    if USE_TMA:
        k = K.load([pid_desc, n0, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = V.load([pid_desc, n0, 0]).reshape(BLOCK_N, HEAD_DIM)
    else:
        Q += pid_bh * n_q * HEAD_DIM
        DO += pid_bh * n_q * HEAD_DIM
        K += pid_bh * n_k * HEAD_DIM
        V += pid_bh * n_k * HEAD_DIM
        DK += pid_bh * n_k * HEAD_DIM
        DV += pid_bh * n_k * HEAD_DIM
        k = tl.load(K + kv_ptrs, mask=key_ok, other=0.0)
        v = tl.load(V + kv_ptrs, mask=key_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    col_keys = dropout_triton.col_keys(seed_key, offs_n)  # dropout: this block's column keys, drawn once

    # Query blocks: [lo, a_end) straddle the diagonal (masked); [a_end, b_end) are whole and
    # wholly below it (no mask); [b_end, n_q) is the ragged last block (masked).
    n_q_full = n_q // BLOCK_M * BLOCK_M
    if CAUSAL:
        lo = n0 // BLOCK_M * BLOCK_M  # rows above the block's first key see none of it
        a_end = tl.minimum(tl.cdiv(n0 + BLOCK_N, BLOCK_M) * BLOCK_M, tl.cdiv(n_q, BLOCK_M) * BLOCK_M)
    else:
        lo = 0
        a_end = 0
    b_end = tl.maximum(a_end, n_q_full)
    dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, HEAD_DIM, pid_desc,
                             offs_n, offs_m0, offs_d, n_q, n_k, sm_scale, qk_scale, seed_key, col_keys, thresh,
                             keep_scale, CAUSAL, PRECISION, ATOMIC_DQ, BLOCK_M, HEAD_DIM, USE_TMA, DROPOUT,
                             lo=lo, hi=a_end, MASKED=True)
    dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, HEAD_DIM, pid_desc,
                             offs_n, offs_m0, offs_d, n_q, n_k, sm_scale, qk_scale, seed_key, col_keys, thresh,
                             keep_scale, CAUSAL, PRECISION, ATOMIC_DQ, BLOCK_M, HEAD_DIM, USE_TMA, DROPOUT,
                             lo=a_end, hi=b_end, MASKED=False)
    dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, HEAD_DIM, pid_desc,
                             offs_n, offs_m0, offs_d, n_q, n_k, sm_scale, qk_scale, seed_key, col_keys, thresh,
                             keep_scale, CAUSAL, PRECISION, ATOMIC_DQ, BLOCK_M, HEAD_DIM, USE_TMA, DROPOUT,
                             lo=b_end, hi=n_q, MASKED=True)

    if DROPOUT:  # dV = (P ∘ keep)ᵀ dO / (1 − p)
        dv = dv * keep_scale
    if USE_TMA:  # rows past this head's end are not written
        DK.store([pid_desc, n0, 0], (dk * sm_scale).to(DK.dtype).reshape(1, BLOCK_N, HEAD_DIM))
        DV.store([pid_desc, n0, 0], dv.to(DV.dtype).reshape(1, BLOCK_N, HEAD_DIM))
    else:
        tl.store(DK + kv_ptrs, (dk * sm_scale).to(DK.dtype.element_ty), mask=key_ok)
        tl.store(DV + kv_ptrs, dv.to(DV.dtype.element_ty), mask=key_ok)


@triton.jit
def _bwd_dq_inner(
    # accumulator (Br, d) fp32, this program's tiles (Br, d) and row statistics (Br,)
    dq, q, do, lse2, delta,
    # this head's K, V (contiguous) and their row stride
    K, V, stride_n,
    # sizes: this block's rows (Br,), key offsets in a block (Bc,), head-dim offsets (d,)
    offs_m, offs_n0, offs_d, n_k, qk_scale,
    # dropout: key(bh, row) of this block's rows, mix(seed), the cut, 1 / (1 − p)
    row_keys, seed_key, thresh, keep_scale,
    # meta-parameters, the same for every call of one program
    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, DROPOUT: tl.constexpr,
    # what varies between the calls (pass them by name): the key range [lo, hi) and its mask
    lo, hi, MASKED: tl.constexpr,
):
    """Accumulate dS K (without the scale) of one query block over key blocks [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_n0  # (Bc,) key rows
        ptrs = offs_n[:, None] * stride_n + offs_d[None, :]  # (Bc, d)
        if MASKED:
            k = tl.load(K + ptrs, mask=offs_n[:, None] < n_k, other=0.0)
            v = tl.load(V + ptrs, mask=offs_n[:, None] < n_k, other=0.0)
        else:
            k = tl.load(K + ptrs)
            v = tl.load(V + ptrs)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (Br, Bc), log2 units
        p = tl.exp2(s - lse2[:, None])
        if MASKED:
            allowed = offs_n[None, :] < n_k
            if CAUSAL:
                allowed = allowed & (offs_n[None, :] <= offs_m[:, None])
            p = tl.where(allowed, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # (Br, Bc)
        if DROPOUT:  # dP = dP̃ ∘ keep / (1 − p), the forward's keep bits redrawn
            keep = dropout_triton.keep(row_keys, dropout_triton.col_keys(seed_key, offs_n), thresh)  # (Br, Bc)
            ds = p * (tl.where(keep, dp, 0.0) * keep_scale - delta[:, None])
        else:
            ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, acc=dq, input_precision=PRECISION)  # += dS K
    return dq


@triton.autotune(configs=DQ_CONFIGS, key=TUNE_KEY, prune_configs_by=DQ_PRUNE)
@triton.jit(do_not_specialize=RUNTIME_INTS)
def _bwd_dq_kernel(
    # pointers, all contiguous: Q, dO, dQ (B, H, Nq, d); K, V (B, H, Nk, d); LSE, DELTA (B, H, Nq)
    Q, K, V, DO, LSE, DELTA, DQ,
    n_q, n_k, sm_scale, qk_scale,
    seed_key, thresh, keep_scale,  # dropout: as in flash_triton._fwd_kernel
    size_class,  # read by the autotuner only (triton_tuning.size_class)
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr, DROPOUT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1).to(tl.int64)
    Q += pid_bh * n_q * HEAD_DIM
    DO += pid_bh * n_q * HEAD_DIM
    DQ += pid_bh * n_q * HEAD_DIM
    row_keys = dropout_triton.row_keys(seed_key, tl.program_id(1), pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    K += pid_bh * n_k * HEAD_DIM
    V += pid_bh * n_k * HEAD_DIM
    LSE += pid_bh * n_q
    DELTA += pid_bh * n_q

    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)  # (Br,)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]  # (Br, d)
    row_ok = offs_m < n_q
    q = tl.load(Q + ptrs, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + ptrs, mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(LSE + offs_m, mask=row_ok, other=0.0) * LOG2E
    delta = tl.load(DELTA + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    if CAUSAL:  # the same split of key blocks as the forward pass
        end = tl.minimum(m0 + BLOCK_M, n_k)
        full_end = tl.minimum(m0, n_k) // BLOCK_N * BLOCK_N
    else:
        end = n_k
        full_end = n_k // BLOCK_N * BLOCK_N
    dq = _bwd_dq_inner(dq, q, do, lse2, delta, K, V, HEAD_DIM, offs_m, offs_n0, offs_d, n_k, qk_scale,
                       row_keys, seed_key, thresh, keep_scale, CAUSAL, PRECISION, BLOCK_N, DROPOUT,
                       lo=0, hi=full_end, MASKED=False)
    dq = _bwd_dq_inner(dq, q, do, lse2, delta, K, V, HEAD_DIM, offs_m, offs_n0, offs_d, n_k, qk_scale,
                       row_keys, seed_key, thresh, keep_scale, CAUSAL, PRECISION, BLOCK_N, DROPOUT,
                       lo=full_end, hi=end, MASKED=True)
    tl.store(DQ + ptrs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])
