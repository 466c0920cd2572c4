"""FlashAttention forward and backward in Triton: the NumPy tiles, ported to a GPU kernel.

What you will learn here: how the tiled algorithm of ``flash_np`` maps onto Triton programs —
one program per (query block, batch·head) in the forward pass and the dQ pass, one per
(key block, batch·head) in the dK/dV pass — and which details make it fast on a GPU.

The math (Dao et al. 2022, arXiv:2205.14135; loop order of FlashAttention-2, Dao 2023,
arXiv:2307.08691; online softmax of Milakov & Gimelshein 2018, arXiv:1805.02867):

    S = scale · Q Kᵀ,   P = softmax(S),   O = P V,   lse_i = log Σ_j exp(S_ij)

Forward, for one query block Qi (Br, d), streaming over key/value blocks Kj, Vj (Bc, d)::

    m = -inf, l = 0, acc = 0                      # the online-softmax state, per row
    for j:  s = Qi Kjᵀ · scale                    # (Br, Bc)
            m_new = max(m, rowmax(s));  p = exp(s - m_new);  alpha = exp(m - m_new)
            l = alpha · l + rowsum(p);  acc = alpha · acc + p Vj;  m = m_new
    Oi = acc / l;  lse_i = m + log l

Backward recomputes P block by block from the saved lse, with D = rowsum(dO ∘ O)::

    P = exp(S - lse);  dV = Pᵀ dO;  dP = dO Vᵀ;  dS = P ∘ (dP - D);  dQ = scale · dS K;  dK = scale · dSᵀ Q

Implementation choices, each named where it appears:
- exponentials are base 2 (``exp2`` is one hardware instruction); the scale is folded into
  ``qk_scale = scale · log2(e)`` and applied inside the exponent's argument (one fused
  multiply-add per score); lse is converted back to natural log when stored.
- causal masking is top-left aligned (query i sees key j iff j <= i, as SDPA's
  ``is_causal=True``); key blocks that lie wholly above the diagonal are never visited, only
  the blocks that straddle the diagonal or the ragged end of the sequence pay for a mask, and
  the heaviest query blocks are launched first.
- fp16/bf16 inputs multiply on the tensor cores and accumulate in fp32; fp32 inputs use exact
  fp32 products (``input_precision="ieee"``), not tf32.
- tiles move through tensor descriptors (``USE_TMA``: Hopper's copy engine, which also
  zero-fills rows past a head's end) in the forward and, for d <= 64, in the dK/dV pass.
- dQ (``DQ_STRATEGY``): on Hopper each dK/dV program adds its dS·K tile into an fp32 buffer
  with one bulk reduction (FlashAttention-2's 5 products per tile pair, not 7; the order of
  the additions varies, so dq is not bitwise deterministic); elsewhere, and under the
  interpreter, a second kernel recomputes S and dP per query block (deterministic).
- dropout (``dropout_p > 0``, the paper's Algorithms 2 and 4): each tile's keep-mask is drawn
  in registers from (seed, b·H + h, row, column) by the same uint32 hash as
  ``nlpcore.kernels.dropout`` — so the mask equals NumPy's ``flash_np.keep_mask`` bit for bit;
  a tile hashes only its Br row keys and Bc column keys, then spends one XOR, one multiply and
  one compare per entry (bench/dropout_cost_h200.py measures what that costs) — and redrawn in
  the backward, never stored; P̃ = P ∘ keep feeds the P V product, the factor
  1 / (1 − p) is applied once to O (and to dV), and the statistics stay the undropped ones.
  ``dropout_p = 0`` compiles the kernels without any of it.
- Nq may differ from Nk. No row is ever fully masked here (there is no padding mask, and with
  top-left causal alignment key 0 is visible to every query), so no row can produce NaN.

Tensors are ``(B, H, N, d)`` with d in {16, 32, 64, 128}. Runs natively on an NVIDIA GPU and,
with ``TRITON_INTERPRET=1`` set before triton is imported, on the CPU through Triton's
interpreter (slow, but exact enough to test the same code; bfloat16 is refused there).
On an H200 (bench/results/triton_h200.json, bench/TRITON.md) the forward runs at 1.28-1.64x
SDPA's FLASH_ATTENTION backend and 0.75-0.97x its cuDNN backend, the backward at 1.32-1.50x
and 0.75-0.92x.

Where the rest lives: the backward kernels in ``flash_triton_bwd``, the autotuning space and
tensor descriptors in ``triton_tuning``, the dropout hash in ``dropout_triton``; this module
holds the forward kernel and the functions that check inputs, allocate and launch.

Dependency rule: this module needs torch and triton, which the browser does not have, so no
other module of ``nlpcore`` imports it (the rule is written in ``nlpcore.kernels``).
"""

from __future__ import annotations

import math

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as exc:  # pragma: no cover - exercised only where torch/triton are absent
    raise ImportError(
        "nlpcore.kernels.flash_triton needs PyTorch and Triton "
        f"(missing: {exc.name}). Install them with: pip install -e '.[triton]'. "
        "On a machine without an NVIDIA GPU, also set TRITON_INTERPRET=1 before importing."
    ) from exc

from . import dropout_triton
from .flash_triton_bwd import LOG2E, _bwd_delta_kernel, _bwd_dkdv_kernel, _bwd_dq_kernel
from .triton_tuning import FWD_CONFIGS, FWD_PRUNE, INTERPRET, RUNTIME_INTS, TUNE_KEY, descriptor, size_class
from .triton_tuning import BWD_SPACE, DQ_SPACE, FWD_SPACE  # noqa: F401  (bench/triton_h200.py records them)

__all__ = ["forward", "backward", "attention", "keep_mask"]

# Globals read inside @triton.jit code must be constexpr; the host reads .value. LOG2E, log2(e)
# (exp(x) = exp2(x · LOG2E)), comes from flash_triton_bwd, which shares it.
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): converts a base-2 logsumexp back to natural log

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# How the backward pass produces dQ:
#   "separate":   a second kernel, one program per query block, recomputes S and dP for its rows
#                 (7 block products per tile pair instead of 5, but no atomics; deterministic).
#   "atomic":     the dK/dV kernel also adds its dS K contribution into an fp32 dQ buffer with
#                 per-element atomic adds (5 products per tile pair, FlashAttention-2's choice).
#   "atomic_tma": the same, but each (Br, d) tile is added by the copy engine in one bulk
#                 reduction (Hopper's cp.reduce.async.bulk; GPU only, not in the interpreter).
DQ_STRATEGY = "atomic_tma"  # falls back to "separate" where the copy engine is unavailable
# Load and store whole tiles through tensor descriptors (the copy engine, TMA, on Hopper and
# later; plain loads elsewhere). Also runs under the interpreter.
USE_TMA = True
# Ask Triton to warp-specialise the forward's unmasked key loop (producer and consumer warps).
# Off: with Triton 3.6 on the H200 it did not compile at d = 64 and gained nothing at d = 128
# (bench/TRITON.md); left as a switch to try with newer Triton releases.
WARP_SPEC = False


def _use_tma(t):
    if not USE_TMA:
        return False
    return INTERPRET or (t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9)


# --- forward --------------------------------------------------------------------------------
@triton.jit
def _fwd_inner(
    # running state (Br, d), (Br,), (Br,); the query tile (Br, d) and its rows (Br,)
    acc, l_i, m_i, q, offs_m,
    # this head's K, V: pointers with their row strides, or descriptors over (B·H, Nk, d)
    K, V, stride_kn, stride_vn, pid_bh,
    # sizes: key offsets in a block (Bc,), head-dim offsets (d,), Nk, scale · log2(e)
    offs_n, offs_d, n_k, qk_scale,
    # dropout: key(bh, row) of this block's rows (Br,) uint32, mix(seed), the cut
    row_keys, seed_key, thresh,
    # meta-parameters, the same for every call of one program
    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    USE_TMA: tl.constexpr, DROPOUT: tl.constexpr,
    # what varies between the calls (pass them by name): the key range [lo, hi), whether its
    # blocks need the mask, whether to warp-specialise the loop
    lo, hi, MASKED: tl.constexpr, WARP_SPEC: tl.constexpr,
):
    """Fold key blocks [lo, hi) into the online-softmax state of one query block. With DROPOUT
    the state sums the undropped p while only the kept entries reach P V."""
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        cols = start_n + offs_n  # (Bc,) key indices of this block
        if USE_TMA:  # the copy engine fills rows past this head's end with zeros
            k = K.load([pid_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            v = V.load([pid_bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        else:
            k_ptrs = K + cols[:, None] * stride_kn + offs_d[None, :]  # (Bc, d)
            v_ptrs = V + cols[:, None] * stride_vn + offs_d[None, :]
            if MASKED:
                k = tl.load(k_ptrs, mask=cols[:, None] < n_k, other=0.0)
                v = tl.load(v_ptrs, mask=cols[:, None] < n_k, other=0.0)
            else:
                k = tl.load(k_ptrs)
                v = tl.load(v_ptrs)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)  # (Br, Bc) unscaled scores
        if MASKED:
            allowed = cols[None, :] < n_k
            if CAUSAL:
                allowed = allowed & (cols[None, :] <= offs_m[:, None])
            qk = tl.where(allowed, qk, float("-inf"))
        # Scores in log2 units are qk · qk_scale; the scale is applied inside the exponent's
        # argument, so it costs one fused multiply-add per score. qk_scale > 0 commutes with max.
        # The first block any row visits holds key 0, which every row may see, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # (Br,)
        p = tl.exp2(qk * qk_scale - m_new[:, None])  # (Br, Bc)
        alpha = tl.exp2(m_i - m_new)  # (Br,) rescales what was summed against the old max
        l_i = l_i * alpha + tl.sum(p, 1)
        if DROPOUT:  # P̃ = P ∘ keep; the 1 / (1 − p) is applied once to O at the end
            p = tl.where(dropout_triton.keep(row_keys, dropout_triton.col_keys(seed_key, cols), thresh), p, 0.0)
        acc = tl.dot(p.to(v.dtype), v, acc=acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=FWD_CONFIGS, key=TUNE_KEY + ["USE_TMA", "WARP_SPEC"], prune_configs_by=FWD_PRUNE)
@triton.jit(do_not_specialize=RUNTIME_INTS)
def _fwd_kernel(
    # Q (B, H, Nq, d), K and V (B, H, Nk, d), O (B, H, Nq, d): pointers, or with USE_TMA tensor
    # descriptors over the contiguous (B·H, N, d) views; LSE (B, H, Nq) fp32 pointer
    Q, K, V, O, LSE,
    # strides, in elements (the pointer path; d's stride is 1)
    stride_qb, stride_qh, stride_qn,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_on,
    # sizes and the scale
    n_heads, n_q, n_k, qk_scale,
    # dropout: mix(seed) and the keep threshold (int32 with the uint32's bits), 1 / (1 − p)
    seed_key, thresh, keep_scale,
    size_class,  # read by the autotuner only (triton_tuning.size_class)
    # meta-parameters
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
    USE_TMA: tl.constexpr, WARP_SPEC: tl.constexpr, DROPOUT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks see the most keys: start them first, so the tail is short
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)  # (Br,) query rows of this program
    offs_n = tl.arange(0, BLOCK_N)  # (Bc,)
    offs_d = tl.arange(0, HEAD_DIM)  # (d,)
    row_ok = offs_m[:, None] < n_q  # (Br, 1) the ragged end of the queries
    if USE_TMA:
        q = Q.load([pid_bh, m0, 0]).reshape(BLOCK_M, HEAD_DIM)
    else:
        b = (pid_bh // n_heads).to(tl.int64)
        h = (pid_bh % n_heads).to(tl.int64)
        Q += b * stride_qb + h * stride_qh
        K += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
        O += b * stride_ob + h * stride_oh
        q = tl.load(Q + offs_m[:, None] * stride_qn + offs_d[None, :], mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    row_keys = dropout_triton.row_keys(seed_key, pid_bh, offs_m)  # dropout's per-row keys (unused without it)

    # Key blocks [0, full_end) need no mask; [full_end, end) straddle the diagonal or the end.
    if CAUSAL:
        end = tl.minimum(m0 + BLOCK_M, n_k)  # keys beyond the block's last row are never seen
        full_end = tl.minimum(m0, n_k) // BLOCK_N * BLOCK_N
    else:
        end = n_k
        full_end = n_k // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, offs_m, K, V, stride_kn, stride_vn, pid_bh,
                               offs_n, offs_d, n_k, qk_scale, row_keys, seed_key, thresh,
                               CAUSAL, PRECISION, BLOCK_N, HEAD_DIM, USE_TMA, DROPOUT,
                               lo=0, hi=full_end, MASKED=False, WARP_SPEC=WARP_SPEC)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, offs_m, K, V, stride_kn, stride_vn, pid_bh,
                               offs_n, offs_d, n_k, qk_scale, row_keys, seed_key, thresh,
                               CAUSAL, PRECISION, BLOCK_N, HEAD_DIM, USE_TMA, DROPOUT,
                               lo=full_end, hi=end, MASKED=True, WARP_SPEC=False)

    lse = (m_i + tl.log2(l_i)) * LN2  # (Br,) natural-log logsumexp of the scaled scores
    tl.store(LSE + pid_bh * n_q + offs_m, lse, mask=offs_m < n_q)
    if DROPOUT:
        o = acc * (keep_scale / l_i)[:, None]
    else:
        o = acc / l_i[:, None]
    if USE_TMA:  # rows past this head's end are not written
        O.store([pid_bh, m0, 0], o.to(O.dtype).reshape(1, BLOCK_M, HEAD_DIM))
    else:
        tl.store(O + offs_m[:, None] * stride_on + offs_d[None, :], o.to(O.dtype.element_ty), mask=row_ok)


# --- wrappers: check inputs, allocate, launch ------------------------------------------------
def _check_tensor(name, t, rank=4):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, H, N, d), got {type(t).__name__}")
    if t.dim() != rank:
        raise ValueError(f"{name} must have shape (B, H, N, d) (4 dims), got shape {tuple(t.shape)}")
    if t.dtype not in DTYPES:
        raise TypeError(f"{name} must be float16, bfloat16 or float32, got {t.dtype}")


def _check_device(t):
    if t.device.type == "cpu" and not INTERPRET:
        raise ValueError(
            "q is on the CPU but Triton is not in interpreter mode: move the tensors to a CUDA "
            "device, or set TRITON_INTERPRET=1 before importing triton to run on the CPU")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"q must be on a CUDA device (or the CPU under TRITON_INTERPRET=1), got {t.device}")


def _check_qkv(q, k, v, scale):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if INTERPRET and q.dtype == torch.bfloat16:
        # Triton's CPU interpreter (checked with triton 3.9.0) computes tl.dot on bfloat16
        # tiles as garbage, while loads and stores are right; refuse rather than mislead.
        raise TypeError("bfloat16 is not supported under TRITON_INTERPRET=1 (the interpreter's "
                        "tl.dot is wrong for bfloat16); use float16 or float32 on the CPU, "
                        "or run on a CUDA GPU")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    _check_device(q)
    b, h, n_q, d = q.shape
    if k.shape[:2] != (b, h) or v.shape[:2] != (b, h):
        raise ValueError(f"k and v must have q's (B, H) = {(b, h)}, got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if k.shape[3] != d:
        raise ValueError(f"k must have shape (B, H, Nk, d) with q's d = {d}, got {tuple(k.shape)}")
    if v.shape != k.shape:
        raise ValueError(f"v must have k's shape {tuple(k.shape)} (dv = d), got {tuple(v.shape)}")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim d must be one of {HEAD_DIMS}, got d = {d}")
    if n_q == 0 or k.shape[2] == 0:
        raise ValueError(f"sequence lengths must be >= 1, got Nq = {n_q}, Nk = {k.shape[2]}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0 or math.isinf(scale):
        raise ValueError(f"scale must be a positive finite number or None, got {scale!r}")
    return float(scale)


def keep_mask(seed, shape, p, device=None):
    """The keep-mask the kernels apply, bool tensor of ``shape`` (B, H, Nq, Nk) (or any
    (..., Nq, Nk)), drawn by a Triton kernel with the kernels' own hash; equal to
    ``flash_np.keep_mask(seed, shape, p)``. For tests and teaching: the attention kernels never
    build it. ``device`` defaults to CUDA (the CPU under TRITON_INTERPRET=1)."""
    drop = dropout_triton.drop_args(p, seed)
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2 or min(shape) < 1:
        raise ValueError(f"shape must be (..., Nq, Nk) with sizes >= 1, got {shape}")
    device = torch.device(device if device is not None else ("cpu" if INTERPRET else "cuda"))
    _check_device(torch.empty(0, device=device))
    n_q, n_k = shape[-2:]
    heads = math.prod(shape[:-2])
    out = torch.empty((heads, n_q, n_k), dtype=torch.int8, device=device)
    block = 32
    dropout_triton.keep_mask_kernel[(triton.cdiv(n_q, block), triton.cdiv(n_k, block), heads)](
        out, n_q, n_k, drop.seed_key, drop.thresh, BLOCK_M=block, BLOCK_N=block)
    return out.bool().reshape(shape)


def _precision(dtype):
    return "ieee" if dtype == torch.float32 else "tf32"  # "tf32" is ignored for 16-bit inputs


def forward(q, k, v, causal=False, scale=None, dropout_p=0.0, seed=0):
    """O = softmax(scale · Q Kᵀ) V, tiled, with the logsumexp saved for the backward pass.

    Args:
        q: (B, H, Nq, d) queries; float16, bfloat16 or float32; d in {16, 32, 64, 128}.
        k: (B, H, Nk, d) keys, q's dtype and device.
        v: (B, H, Nk, d) values.
        causal: if True, query i attends key j only when j <= i (top-left aligned).
        scale: score scale, default 1/sqrt(d).
        dropout_p: probability in [0, 1) of dropping an entry of P; 0 (default) is no dropout.
        seed: int in [0, 2³²); with (b·H + h, row, column) it decides each keep bit
            (:func:`keep_mask` returns the mask).

    Returns:
        o: (B, H, Nq, d) in q's dtype; with dropout, (P ∘ keep / (1 − p)) V.
        lse: (B, H, Nq) float32, natural-log logsumexp of the scaled (and masked) scores,
            undropped.
    """
    scale = _check_qkv(q, k, v, scale)
    drop = dropout_triton.drop_args(dropout_p, seed)
    causal = bool(causal)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    use_tma = _use_tma(q)
    if use_tma or q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
    tensors = (q, k, v, o)
    if use_tma:  # block shapes are set per config by triton_tuning.set_block_shapes
        tensors = tuple(descriptor(t) for t in tensors)

    def grid(meta):
        return (triton.cdiv(n_q, meta["BLOCK_M"]), b * h)

    _fwd_kernel[grid](
        *tensors, lse, *strides,
        h, n_q, n_k, scale * LOG2E.value,
        drop.seed_key, drop.thresh, drop.keep_scale, size_class(b * h, n_q, n_k),
        HEAD_DIM=d, CAUSAL=causal, PRECISION=_precision(q.dtype),
        USE_TMA=use_tma, WARP_SPEC=bool(WARP_SPEC) and not INTERPRET, DROPOUT=drop.on,
    )
    return o, lse


def backward(q, k, v, o, lse, do, causal=False, scale=None, dropout_p=0.0, seed=0):
    """Gradients of O = attention(Q, K, V) given dO, recomputing P from the saved lse.

    Args:
        q, k, v: as for :func:`forward`.
        o: (B, H, Nq, d) the forward output; lse: (B, H, Nq) float32 from :func:`forward`.
        do: (B, H, Nq, d) gradient of the loss with respect to o.
        causal, scale, dropout_p, seed: as for :func:`forward` (must match the forward call;
            the keep-mask is redrawn from them, not read).

    Returns:
        dq (B, H, Nq, d), dk (B, H, Nk, d), dv (B, H, Nk, d), in q's dtype.
    """
    scale = _check_qkv(q, k, v, scale)
    drop = dropout_triton.drop_args(dropout_p, seed)
    causal = bool(causal)
    for name, t in (("o", o), ("do", do)):
        _check_tensor(name, t)
        if t.shape != q.shape:
            raise ValueError(f"{name} must have q's shape {tuple(q.shape)}, got {tuple(t.shape)}")
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    if not isinstance(lse, torch.Tensor) or lse.shape != q.shape[:3]:
        shape = tuple(lse.shape) if isinstance(lse, torch.Tensor) else type(lse).__name__
        raise ValueError(f"lse must be a tensor of shape (B, H, Nq) = {tuple(q.shape[:3])}, got {shape}")
    if DQ_STRATEGY not in ("separate", "atomic", "atomic_tma"):
        raise ValueError(f"DQ_STRATEGY must be 'separate', 'atomic' or 'atomic_tma', got {DQ_STRATEGY!r}")

    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    # The backward kernels index with the head dim as row stride: make everything contiguous.
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.to(torch.float32).contiguous()
    delta = torch.empty_like(lse)
    _bwd_delta_kernel[(triton.cdiv(n_q, 64), b * h)](o, do, delta, n_q, HEAD_DIM=d, BLOCK_M=64)

    atomic = {"separate": 0, "atomic": 1, "atomic_tma": 2}[DQ_STRATEGY]
    if atomic == 2 and (INTERPRET or torch.cuda.get_device_capability(q.device)[0] < 9):
        atomic = 0  # bulk reductions need the copy engine: Hopper or later, not the interpreter
    dk = torch.empty_like(k)
    dv = torch.empty_like(v)
    # the atomic dQ buffer is zeroed by triton_tuning.set_block_shapes right before each launch (autotuning
    # launches several times), so it is allocated without a fill of its own
    dq_acc = torch.empty(q.shape, device=q.device, dtype=torch.float32) if atomic else dk
    precision = _precision(q.dtype)

    def grid_kv(meta):
        return (triton.cdiv(n_k, meta["BLOCK_N"]), b * h)

    # Tensor-descriptor loads pay in dK/dV only for d <= 64 (H200 A/B, bench/TRITON.md: at
    # d = 128 they cost 10% there, while the bulk dQ reduction still pays).
    use_tma = _use_tma(q) and d <= 64
    tensors = (q, k, v, do, lse, delta, dk, dv)
    if use_tma:  # block shapes are set per config by triton_tuning.set_block_shapes
        tensors = tuple(t if t.dim() == 3 else descriptor(t) for t in tensors)
    _bwd_dkdv_kernel[grid_kv](
        *tensors, descriptor(dq_acc) if atomic == 2 else dq_acc,
        n_q, n_k, scale, scale * LOG2E.value,
        drop.seed_key, drop.thresh, drop.keep_scale, size_class(b * h, n_q, n_k),
        HEAD_DIM=d, CAUSAL=causal, PRECISION=precision, DROPOUT=drop.on, ATOMIC_DQ=atomic, USE_TMA=use_tma,
    )
    if atomic:
        return dq_acc.to(q.dtype), dk, dv

    dq = torch.empty_like(q)

    def grid_q(meta):
        return (triton.cdiv(n_q, meta["BLOCK_M"]), b * h)

    _bwd_dq_kernel[grid_q](
        q, k, v, do, lse, delta, dq,
        n_q, n_k, scale, scale * LOG2E.value,
        drop.seed_key, drop.thresh, drop.keep_scale, size_class(b * h, n_q, n_k),
        HEAD_DIM=d, CAUSAL=causal, PRECISION=precision, DROPOUT=drop.on,
    )
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, dropout_p, seed):
        o, lse = forward(q, k, v, causal=causal, scale=scale, dropout_p=dropout_p, seed=seed)
        ctx.save_for_backward(q, k, v, o, lse)  # the keep-mask is not saved: seed redraws it
        ctx.causal = causal
        ctx.scale = scale
        ctx.dropout = (dropout_p, seed)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        p, seed = ctx.dropout
        dq, dk, dv = backward(q, k, v, o, lse, do, causal=ctx.causal, scale=ctx.scale, dropout_p=p, seed=seed)
        return dq, dk, dv, None, None, None, None


def attention(q, k, v, causal=False, scale=None, dropout_p=0.0, seed=0):
    """Differentiable FlashAttention: ``attention(q, k, v).backward(do)`` fills q.grad, k.grad,
    v.grad through :func:`backward`. Shapes and arguments as for :func:`forward`; returns o.
    With dropout, pass a fresh seed per call (the same seed draws the same mask)."""
    return _FlashAttention.apply(q, k, v, causal, scale, dropout_p, seed)
