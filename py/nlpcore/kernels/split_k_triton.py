"""Split-K decoding in Triton (Flash-Decoding): a few queries against a long key/value cache.

What you will learn here: why one query row leaves most of a GPU idle under the FlashAttention
kernel, and how the online-softmax monoid of ``split_k`` fixes it. FlashAttention-2 runs one
program per (query block, batch·head); when decoding, a batch·head has a single query block, so
B·H programs stream the whole cache while the other SMs wait. Flash-Decoding (Dao, Haziza, Massa
& Sizov 2023) cuts the cache into ``splits`` parts and runs B·H·splits programs:

    pass 1, one program per (part p, batch·head):
        stream keys of part p with the online softmax (m, l, acc), as flash_triton does
        store the partial  o_p = acc / l  (fp32)  and  lse_p = m + log l
    pass 2, one program per block of query rows, folding the parts left to right:
        (m, l) ← (m, l) ⊕ (lse_p, 1);   acc ← exp(m_old − m)·acc + exp(lse_p − m)·o_p
        o = acc / l,   lse = m + log l

Pass 2 is ``split_k.absorb`` / ``split_k.finish`` on the GPU. Exponentials in pass 1 are base 2
(scores pre-multiplied by log2 e, as in flash_triton); partials are stored with natural-log lse.

Tensors are ``(B, H, Nq, d)`` and ``(B, H, Nk, d)``; Nq <= 16 (one query block: the decoding
case), d in {16, 32, 64, 128}; no mask (every query sees the whole cache, as in decoding
without padding). Runs on an NVIDIA GPU, or on the CPU with TRITON_INTERPRET=1 set before triton
is imported (float16/float32 only there, as for flash_triton).

Dependency rule: needs torch and triton; no other module of ``nlpcore`` imports it.
"""

from __future__ import annotations

import math
import os

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as exc:  # pragma: no cover - exercised only where torch/triton are absent
    raise ImportError(
        "nlpcore.kernels.split_k_triton needs PyTorch and Triton (missing: {}). Install them "
        "with: pip install -e '.[triton]'; without a GPU set TRITON_INTERPRET=1.".format(exc.name)
    ) from exc

__all__ = ["forward", "keys_per_split", "BLOCK_N"]

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x · LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): a base-2 logsumexp times LN2 is the natural one

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HEAD_DIMS = (16, 32, 64, 128)
MAX_QUERIES = 16  # one query block: tl.dot needs at least 16 rows, so fewer queries are padded
BLOCK_N = 16 if INTERPRET else 64  # keys per tile in pass 1 (small under the interpreter: ragged ends)
SPLIT_WARPS, SPLIT_STAGES = 4, 3  # pass 1: a (16, 64) score tile needs few warps; 3 K/V tiles in flight
BLOCK_R = 16  # query rows per program in pass 2


@triton.jit
def _split_kernel(
    # pointers: Q (BH, Nq, d), K, V (BH, Nk, d); O_PART (splits, BH·Nq, d) fp32; LSE_PART (splits, BH·Nq) fp32
    Q, K, V, O_PART, LSE_PART,
    # sizes
    n_q, n_k, n_rows, keys_per_split, qk_scale,
    # meta-parameters
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    part = tl.program_id(0)
    bh = tl.program_id(1)
    start = part * keys_per_split
    stop = tl.minimum(start + keys_per_split, n_k)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    keys = tl.arange(0, BLOCK_N)
    row_ok = rows < n_q
    q = tl.load(Q + (bh * n_q + rows)[:, None] * HEAD_DIM + cols[None, :], mask=row_ok[:, None], other=0.0)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # running max, base-2 scores
    l = tl.zeros((BLOCK_M,), tl.float32)  # running Σ exp2(s - m)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)  # running Σ exp2(s - m) v
    for lo in range(start, stop, BLOCK_N):
        key = lo + keys
        key_ok = key < stop
        kv_off = (bh * n_k + key)[:, None] * HEAD_DIM + cols[None, :]
        k = tl.load(K + kv_off, mask=key_ok[:, None], other=0.0)  # (BLOCK_N, d)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N), base-2 units
        s = tl.where(key_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))  # finite: every tile has a key of the part
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)  # 0 on the first tile (m = -inf)
        v = tl.load(V + kv_off, mask=key_ok[:, None], other=0.0)  # (BLOCK_N, d)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l = l * alpha + tl.sum(p, 1)
        m = m_new
    seen = l > 0  # False only for a part with no key (a split past the end of the cache)
    o = acc / tl.where(seen, l, 1.0)[:, None]
    lse = tl.where(seen, (m + tl.math.log2(tl.where(seen, l, 1.0))) * LN2, float("-inf"))
    out = part * n_rows + bh * n_q + rows
    tl.store(O_PART + out[:, None] * HEAD_DIM + cols[None, :], o, mask=row_ok[:, None])
    tl.store(LSE_PART + out, lse, mask=row_ok)


@triton.jit
def _merge_kernel(
    # pointers: O_PART (splits, rows, d) fp32, LSE_PART (splits, rows) fp32; O (rows, d); LSE (rows,) fp32
    O_PART, LSE_PART, O, LSE,
    # sizes
    n_rows, splits,
    # meta-parameters
    HEAD_DIM: tl.constexpr, BLOCK_R: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, HEAD_DIM)
    row_ok = rows < n_rows
    m = tl.full((BLOCK_R,), float("-inf"), tl.float32)  # the monoid state (m, l) of split_k
    l = tl.zeros((BLOCK_R,), tl.float32)
    acc = tl.zeros((BLOCK_R, HEAD_DIM), tl.float32)  # Σ_p exp(lse_p − m) o_p
    for p in range(0, splits):
        lse_p = tl.load(LSE_PART + p * n_rows + rows, mask=row_ok, other=float("-inf"))
        o_p = tl.load(O_PART + (p * n_rows + rows)[:, None] * HEAD_DIM + cols[None, :], mask=row_ok[:, None], other=0.0)
        m_new = tl.maximum(m, lse_p)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # exp(-inf - 0) = 0, not NaN
        alpha = tl.exp(m - shift)
        beta = tl.exp(lse_p - shift)
        l = l * alpha + beta
        acc = acc * alpha[:, None] + beta[:, None] * o_p
        m = m_new
    seen = l > 0
    o = acc / tl.where(seen, l, 1.0)[:, None]
    lse = tl.where(seen, m + tl.log(tl.where(seen, l, 1.0)), float("-inf"))
    tl.store(O + rows[:, None] * HEAD_DIM + cols[None, :], o.to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(LSE + rows, lse, mask=row_ok)


def keys_per_split(n_k: int, splits: int) -> int:
    """Keys each part covers: ceil(Nk / splits) rounded up to whole BLOCK_N tiles."""
    return triton.cdiv(triton.cdiv(n_k, splits), BLOCK_N) * BLOCK_N


def _check(q, k, v, splits, scale):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError("{} must be a torch.Tensor of shape (B, H, N, d), got {}".format(name, type(t).__name__))
        if t.dim() != 4:
            raise ValueError("{} must have shape (B, H, N, d) (4 dims), got {}".format(name, tuple(t.shape)))
        if t.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError("{} must be float16, bfloat16 or float32, got {}".format(name, t.dtype))
    if not (q.dtype == k.dtype == v.dtype) or not (q.device == k.device == v.device):
        raise TypeError("q, k, v must share one dtype and device, got {}/{}/{} on {}/{}/{}".format(
            q.dtype, k.dtype, v.dtype, q.device, k.device, v.device))
    if INTERPRET and q.dtype == torch.bfloat16:
        raise TypeError("bfloat16 is not supported under TRITON_INTERPRET=1 (the interpreter's tl.dot "
                        "is wrong for bfloat16); use float16 or float32 on the CPU")
    if q.device.type == "cpu" and not INTERPRET:
        raise ValueError("q is on the CPU but TRITON_INTERPRET=1 was not set before importing triton")
    b, h, n_q, d = q.shape
    if k.shape[:2] != (b, h) or k.shape[3] != d or v.shape != k.shape:
        raise ValueError("k and v must have shape (B, H, Nk, d) = ({}, {}, Nk, {}), got k {}, v {}".format(
            b, h, d, tuple(k.shape), tuple(v.shape)))
    if d not in HEAD_DIMS:
        raise ValueError("head dim d must be one of {}, got {}".format(HEAD_DIMS, d))
    if not 1 <= n_q <= MAX_QUERIES or k.shape[2] < 1:
        raise ValueError("need 1 <= Nq <= {} queries (decoding) and Nk >= 1, got Nq = {}, Nk = {}".format(
            MAX_QUERIES, n_q, k.shape[2]))
    if isinstance(splits, bool) or not isinstance(splits, int) or splits < 1:
        raise ValueError("splits must be a positive integer, got {!r}".format(splits))
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0 or math.isinf(scale):
        raise ValueError("scale must be a positive finite number or None, got {!r}".format(scale))
    return float(scale)


def forward(q, k, v, *, splits: int, scale=None, partials: bool = False):
    """Attention of a few queries over a long cache, the cache cut into parts merged by the monoid.

    Args:
        q: (B, H, Nq, d) queries, 1 <= Nq <= 16; float16, bfloat16 or float32; d in {16, 32, 64, 128}.
        k, v: (B, H, Nk, d) the key/value cache, q's dtype and device.
        splits: parts requested; each covers ``keys_per_split(Nk, splits)`` keys (whole tiles), so
            ceil(Nk / that) parts are launched (at most ``splits``).
        scale: score scale, default 1/sqrt(d).
        partials: also return the per-part (o_p, lse_p), fp32, shapes (parts, B, H, Nq, d) and
            (parts, B, H, Nq).

    Returns:
        o (B, H, Nq, d) in q's dtype and lse (B, H, Nq) float32 (natural log); with
        ``partials=True`` also (o_parts, lse_parts).
    """
    scale = _check(q, k, v, splits, scale)
    b, h, n_q, d = q.shape
    n_k = k.shape[2]
    q, k, v = (t.contiguous() for t in (q, k, v))
    per = keys_per_split(n_k, splits)
    parts = triton.cdiv(n_k, per)
    n_rows = b * h * n_q
    o_part = torch.empty((parts, n_rows, d), device=q.device, dtype=torch.float32)
    lse_part = torch.empty((parts, n_rows), device=q.device, dtype=torch.float32)
    _split_kernel[(parts, b * h)](
        q, k, v, o_part, lse_part, n_q, n_k, n_rows, per, scale * LOG2E.value,
        HEAD_DIM=d, BLOCK_M=MAX_QUERIES, BLOCK_N=BLOCK_N, num_warps=SPLIT_WARPS, num_stages=SPLIT_STAGES,
    )
    o = torch.empty_like(q)
    lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
    _merge_kernel[(triton.cdiv(n_rows, BLOCK_R),)](
        o_part, lse_part, o, lse, n_rows, parts, HEAD_DIM=d, BLOCK_R=BLOCK_R, num_warps=4,
    )
    if partials:
        return o, lse, (o_part.view(parts, b, h, n_q, d), lse_part.view(parts, b, h, n_q))
    return o, lse
