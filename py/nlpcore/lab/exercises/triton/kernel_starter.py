"""FlashAttention in Triton, forward and backward: the exercise's kernel.

This is your starter, generated from kernel_solution.py. You write: the forward kernel's
body (offsets and masks, loading the query tile, the online-softmax loop over key tiles with
causal block skipping, the final normalisation and lse), the launch grid, the backward's
recomputed P, dP and dS and dQ's accumulation, and the autograd wrapper.

Copy the starter (say to my_flash.py), write the marked parts, then grade it:

    TRITON_INTERPRET=1 python -m nlpcore.lab.exercises.triton.check_triton my_flash.py --device cpu   # no GPU
    python -m nlpcore.lab.exercises.triton.check_triton my_flash.py                                  # on a GPU

As written, the starter runs but gives wrong answers (placeholders of the right shape), and its
autograd wrapper raises NotImplementedError.

The math, for one query block Qi (BLOCK_M, d) against key/value blocks Kj, Vj (BLOCK_N, d),
in base 2 with qk_scale = scale · log2(e) so that exp(scale · x) = exp2(qk_scale · x):

    forward   s = qk_scale · Qi Kjᵀ;  m_new = max(m, rowmax(s));  p = exp2(s - m_new)
              alpha = exp2(m - m_new);  l = alpha · l + rowsum(p);  acc = alpha · acc + p Vj
              after the last block: O = acc / l,  lse = (m + log2 l) · ln 2   (natural log)
    backward  P = exp2(qk_scale · Q Kᵀ - lse · log2(e));  D = rowsum(dO ∘ O)
              dV = Pᵀ dO;  dP = dO Vᵀ;  dS = P ∘ (dP - D);  dK = scale · dSᵀ Q;  dQ = scale · dS K

This kernel keeps the structure of nlpcore.kernels.flash_triton but none of its speed-ups:
one fixed block size, every key block masked, no autotuning. Once it passes, compare the two
(the solution skips masks on interior blocks, tunes block sizes and warps per head dim).
Tensors are (B, H, N, d), contiguous, d in {16, 32, 64, 128}; causal is top-left aligned.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2)
BLOCK_M, BLOCK_N = 32, 16  # query rows and key rows per tile (small: fast on the interpreter)


def _precision(dtype):
    """Exact fp32 products for fp32 inputs (tf32 would miss the fp32 tolerance); 16-bit inputs
    use the tensor cores either way."""
    return "ieee" if dtype == torch.float32 else "tf32"


@triton.jit
def _fwd_kernel(Q, K, V, O, LSE, n_q, n_k, qk_scale,
                HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program: query rows [m0, m0 + BLOCK_M) of one (batch, head), pid_bh = b * H + h.
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    Q += pid_bh * n_q * HEAD_DIM
    O += pid_bh * n_q * HEAD_DIM
    K += pid_bh * n_k * HEAD_DIM
    V += pid_bh * n_k * HEAD_DIM
    offs_d = tl.arange(0, HEAD_DIM)  # (d,): the columns of every tile
    # Write this program's part, in this order (the module docstring has the math):
    #  1. offs_m, the query rows of this program; load q (BLOCK_M, d) with rows >= n_q masked
    #  2. m_i (-inf), l_i (0) and acc (0) in float32: the running max, sum and output
    #  3. end: the first key no row of this program may see (causal: skip those blocks)
    #  4. loop over key tiles start_n in [0, end): load k, v masked, s = qk_scale · q kᵀ,
    #     mask keys >= n_k (and, causal, keys after the row), then the online-softmax update
    #  5. lse (natural log, for the backward) and o = acc / l_i
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    lse = tl.zeros([BLOCK_M], tl.float32)
    o = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    tl.store(LSE + pid_bh * n_q + offs_m, lse, mask=offs_m < n_q)
    tl.store(O + offs_m[:, None] * HEAD_DIM + offs_d[None, :], o.to(O.dtype.element_ty),
             mask=offs_m[:, None] < n_q)


@triton.jit
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, n_q, n_k, scale, qk_scale,
                     HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program: key rows [n0, n0 + BLOCK_N) of one (batch, head); loop over query blocks.
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    Q += pid_bh * n_q * HEAD_DIM
    DO += pid_bh * n_q * HEAD_DIM
    K += pid_bh * n_k * HEAD_DIM
    V += pid_bh * n_k * HEAD_DIM
    DK += pid_bh * n_k * HEAD_DIM
    DV += pid_bh * n_k * HEAD_DIM
    LSE += pid_bh * n_q
    DELTA += pid_bh * n_q
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_ptrs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(K + kv_ptrs, mask=offs_n[:, None] < n_k, other=0.0)  # (BLOCK_N, d)
    v = tl.load(V + kv_ptrs, mask=offs_n[:, None] < n_k, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    start = (pid_n * BLOCK_N) // BLOCK_M * BLOCK_M if CAUSAL else 0  # earlier rows see none of it
    for start_m in range(start, n_q, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < n_q
        q_ptrs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        q = tl.load(Q + q_ptrs, mask=row_ok[:, None], other=0.0)  # (BLOCK_M, d)
        do = tl.load(DO + q_ptrs, mask=row_ok[:, None], other=0.0)
        lse = tl.load(LSE + offs_m, mask=row_ok, other=0.0)  # (BLOCK_M,)
        delta = tl.load(DELTA + offs_m, mask=row_ok, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N)
        allowed = row_ok[:, None] & (offs_n[None, :] < n_k)
        if CAUSAL:
            allowed = allowed & (offs_n[None, :] <= offs_m[:, None])

        p = tl.zeros_like(s)  # TODO: P from s and lse (mind the base), 0 where not allowed
        dp = tl.zeros_like(s)  # TODO: dP = dO Vᵀ, shape (BLOCK_M, BLOCK_N)
        ds = tl.zeros_like(s)  # TODO: dS from p, dp and delta
        dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)  # dV += Pᵀ dO
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PRECISION)  # dK += dSᵀ Q
    tl.store(DK + kv_ptrs, (dk * scale).to(DK.dtype.element_ty), mask=offs_n[:, None] < n_k)
    tl.store(DV + kv_ptrs, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < n_k)


@triton.jit
def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, n_q, n_k, scale, qk_scale,
                   HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program: query rows [m0, m0 + BLOCK_M) of one (batch, head); loop over key blocks.
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    Q += pid_bh * n_q * HEAD_DIM
    DO += pid_bh * n_q * HEAD_DIM
    DQ += pid_bh * n_q * HEAD_DIM
    K += pid_bh * n_k * HEAD_DIM
    V += pid_bh * n_k * HEAD_DIM
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < n_q
    q_ptrs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_ptrs, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + q_ptrs, mask=row_ok[:, None], other=0.0)
    lse = tl.load(LSE + pid_bh * n_q + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + pid_bh * n_q + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, n_k) if CAUSAL else n_k
    for start_n in range(0, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ptrs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_ptrs, mask=offs_n[:, None] < n_k, other=0.0)
        v = tl.load(V + kv_ptrs, mask=offs_n[:, None] < n_k, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        allowed = offs_n[None, :] < n_k
        if CAUSAL:
            allowed = allowed & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(allowed, tl.exp2(s - lse[:, None] * LOG2E), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = dq  # TODO: accumulate dS K (the scale is applied once, at the store)
    tl.store(DQ + q_ptrs, (dq * scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])


def _check(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor (B, H, N, d)")
    if q.shape[-1] not in (16, 32, 64, 128) or k.shape[-1] != q.shape[-1] or v.shape != k.shape:
        raise ValueError(f"expected q (B, H, Nq, d), k and v (B, H, Nk, d) with d in 16..128, "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")


def forward(q, k, v, causal=False, scale=None):
    """o (B, H, Nq, d) in q's dtype and lse (B, H, Nq) float32."""
    _check(q, k, v)
    q, k, v = (t.contiguous() for t in (q, k, v))
    b, h, n_q, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    grid = (1, 1)  # TODO: one program per (query block, batch · head)
    _fwd_kernel[grid](q, k, v, o, lse, n_q, k.shape[2], scale * LOG2E.value,
                      HEAD_DIM=d, CAUSAL=bool(causal), PRECISION=_precision(q.dtype),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return o, lse


def backward(q, k, v, o, lse, do, causal=False, scale=None):
    """dq, dk, dv given the forward's o and lse and the output gradient do."""
    _check(q, k, v)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    delta = (o.float() * do.float()).sum(-1).contiguous()  # D = rowsum(dO ∘ O), (B, H, Nq)
    lse = lse.float().contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    args = (n_q, n_k, scale, scale * LOG2E.value)
    meta = dict(HEAD_DIM=d, CAUSAL=bool(causal), PRECISION=_precision(q.dtype),
                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    _bwd_dkdv_kernel[(triton.cdiv(n_k, BLOCK_N), b * h)](q, k, v, do, lse, delta, dk, dv, *args, **meta)
    _bwd_dq_kernel[(triton.cdiv(n_q, BLOCK_M), b * h)](q, k, v, do, lse, delta, dq, *args, **meta)
    return dq, dk, dv


class _Attention(torch.autograd.Function):
    """attention() for torch.autograd: the forward saves what the backward recomputes from."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        raise NotImplementedError("_Attention.forward: run forward(), save q, k, v, o, lse, return o")

    @staticmethod
    def backward(ctx, do):
        raise NotImplementedError("_Attention.backward: one gradient per input of forward()")


def attention(q, k, v, causal=False, scale=None):
    """Differentiable: attention(q, k, v).backward(do) fills q.grad, k.grad, v.grad."""
    return _Attention.apply(q, k, v, causal, scale)
