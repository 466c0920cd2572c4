"""FlashAttention-3's forward on a Hopper GPU, with the portable Triton kernel as the fallback.

    O = softmax(scale · Q Kᵀ) V,   lse_i = log Σ_j exp(scale · q_i · k_j)

The kernel (``flash_fa3_gluon``, written in Gluon) is FlashAttention-3's forward (Shah et al.
2024, arXiv:2407.08608): a producer warp streams K and V through a ring of shared-memory slots
with TMA, two consumer warpgroups ping-pong on the tensor cores, and each overlaps its softmax
with its next products. It runs on compute capability 9.x (H100, H200) for fp16/bf16 inputs
with d ∈ {64, 128}; everywhere else ``forward`` calls ``flash_triton.forward`` (the portable
port, which also runs under the CPU interpreter) and ``why_not_fa3`` says why.

Usage::

    o, lse = forward(q, k, v, causal=False)          # (B, H, N, d) each; o (B, H, N, d), lse (B, H, N)
    forward(q, k, v, warp_spec=False)                 # the ablations of bench/fa3_h200.py
    forward(q, k, v, variant=Variant(consumers=3))    # a launch variant (default: choose(d, causal, N))
    o = attention(q, k, v, causal=True)               # autograd: this forward, flash_triton's backward

This module has a forward only: ``attention``'s backward is ``flash_triton.backward`` on the
(o, lse) this forward saved (FA3's backward, §3 of the paper, is not ported).

Dependency rule: needs torch and triton (≥ 3.6 with Gluon for the Hopper kernel); nothing else
in ``nlpcore`` imports it, and the Gluon module is imported only when the kernel is launched.
"""

from __future__ import annotations

import dataclasses
import math

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only where torch is absent
    raise ImportError(
        "nlpcore.kernels.flash_fa3 needs PyTorch and Triton (missing: torch). "
        "Install them with: pip install -e '.[triton]'."
    ) from exc

__all__ = ["forward", "attention", "why_not_fa3", "choose", "Variant", "CHOICES", "FA3_HEAD_DIMS", "FA3_DTYPES"]

FA3_HEAD_DIMS = (64, 128)  # head dims the Hopper kernel is built for
FA3_DTYPES = (torch.float16, torch.bfloat16)
WG_ROWS = 64  # query rows per consumer warpgroup (wgmma's M)
LOG2E = 1.4426950408889634  # log2(e): the kernel's exponentials are base 2


def _check(q, k, v):
    """Refuse inputs no attention kernel could take; messages name the argument."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, H, N, d), got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (B, H, N, d), got {tuple(t.shape)} ({t.dim()} dims)")
        if t.dtype != q.dtype:
            raise TypeError(f"{name} has dtype {t.dtype}, expected q's dtype {q.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, expected q's device {q.device}")
    if k.shape != v.shape:
        raise ValueError(f"v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"k must have shape (B, H, Nk, d) = ({q.shape[0]}, {q.shape[1]}, Nk, {q.shape[3]}) "
                         f"to match q {tuple(q.shape)}, got {tuple(k.shape)}")
    if q.shape[2] == 0 or k.shape[2] == 0:
        raise ValueError(f"N must be positive, got q {tuple(q.shape)}, k {tuple(k.shape)}")


def why_not_fa3(q, k, v):
    """None if the Hopper kernel can run on these inputs, else the reason it cannot."""
    if not q.is_cuda:
        return f"tensors are on {q.device}, the FlashAttention-3 kernel needs a CUDA GPU"
    major, minor = torch.cuda.get_device_capability(q.device)
    if major != 9:
        return f"compute capability {major}.{minor}: the kernel uses Hopper's wgmma and setmaxnreg (9.x only)"
    if q.dtype not in FA3_DTYPES:
        return f"dtype {q.dtype}: the kernel is built for float16 and bfloat16"
    if q.shape[3] not in FA3_HEAD_DIMS:
        return f"head dim {q.shape[3]}: the kernel is built for d in {FA3_HEAD_DIMS}"
    if q.shape[2] != k.shape[2]:
        return f"Nq = {q.shape[2]} != Nk = {k.shape[2]}: the kernel takes one sequence length"
    try:
        from triton.experimental import gluon  # noqa: F401
        from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma  # noqa: F401
    except ImportError as exc:
        return f"this Triton has no Gluon Hopper API ({exc}); Triton >= 3.6 is needed"
    return None


@dataclasses.dataclass(frozen=True)
class Variant:
    """One launch configuration of the Hopper kernel (flash_fa3_gluon.fa3_fwd_kernel)."""

    consumers: int = 2  # consumer warpgroups of 64 query rows: a work item is 128 or 192 rows
    block_n: int = 128  # key rows per K/V tile (Bc)
    stages: int = 2  # slots in the K/V ring (2 is all that fits at d = 128)
    pingpong: bool = True  # the warpgroups take turns on the tensor cores (a token per key tile)
    persistent: bool = True  # one program per SM looping over work items (else one per item)
    balance: bool = False  # causal: items longest first across heads, dealt in a snake
    snake: bool = False  # causal: items dealt in a snake, head by head (keeps a head's K, V in L2)
    kv_fused: bool = False  # one ready and one empty barrier per ring slot for K and V together
    q_bufs: int = 1  # Q tiles per consumer: 2 lets the next item's Q, K0 and V0 load during this one
    named: bool = False  # ping-pong token and K/V slot releases through named barriers, per warp


# Which variant runs where: (head dim, causal, largest N or None, variant), first match wins.
# Written by `bench/fa3_h200_variants.py --choices bench/results/fa3_h200_variants.json --write`
# from the H200 sweep (every candidate checked against float64, then timed beside cuDNN, in one
# run) by its rule: per head dim and mask, the fastest checked candidate at N = 1024, 4096,
# 16384, used up to that N. tests/test_flash_fa3.py holds this table equal to the record;
# bench/FA3.md says why each one wins.
CHOICES = (
    (64, False, 1024, Variant(named=True, stages=2)),
    (64, False, 4096, Variant(named=True, consumers=3, stages=3)),
    (64, False, None, Variant(consumers=3, stages=3, pingpong=False)),
    (64, True, 1024, Variant(named=True, stages=2, snake=True)),
    (64, True, 4096, Variant(named=True, stages=2, pingpong=False, snake=True)),
    (64, True, None, Variant(stages=2, pingpong=False, persistent=False)),
    (128, False, 1024, Variant(q_bufs=2)),
    (128, False, None, Variant(named=True, q_bufs=2)),
    (128, True, 1024, Variant(snake=True, q_bufs=2)),
    (128, True, 4096, Variant(named=True, snake=True, q_bufs=2)),
    (128, True, None, Variant(named=True, pingpong=False, persistent=False)),
)


def choose(head_dim, causal, n):
    """The variant CHOICES names for this head dim, mask and sequence length."""
    for d, c, n_max, variant in CHOICES:
        if d == head_dim and c == bool(causal) and (n_max is None or n <= n_max):
            return variant
    raise ValueError(f"no FlashAttention-3 variant for d={head_dim}, causal={causal}, N={n}")


def forward(q, k, v, causal=False, scale=None, *, warp_spec=True, pingpong=None, overlap=True,
            persistent=None, named=None, variant=None, fallback=True):
    """FlashAttention-3 forward.

    Args:
      q, k, v: (B, H, N, d) tensors on one device, one dtype.
      causal: query i attends key j iff j <= i (top-left aligned, as SDPA's ``is_causal``).
      scale: score scale, default 1/sqrt(d).
      warp_spec, pingpong, overlap: FlashAttention-3's three techniques, each switchable for
        ablations (``pingpong`` needs ``warp_spec``: it alternates consumer warpgroups).
      persistent: with ``warp_spec``, launch one program per SM, each looping over work items
        (its ring and barriers carry on, so one item's loads overlap the last one's epilogue);
        False: one program per work item.
      variant: a ``Variant`` (warpgroups, tile, ring depth, schedule, barriers); default
        ``choose(d, causal, N)``, the configuration measured fastest on the H200 for that
        shape. ``pingpong``, ``persistent`` and ``named`` (hand-overs on named barriers), when
        given, override the variant's.
      fallback: where the Hopper kernel cannot run (``why_not_fa3``), call the portable
        ``flash_triton.forward``; with False, raise instead.

    Returns:
      o: (B, H, N, d), q's dtype;  lse: (B, H, N) float32, natural log. Every row has key 0
      to attend to (no padding mask; causal is top-left aligned), so no row is empty.
    """
    _check(q, k, v)
    if pingpong and not warp_spec:
        raise ValueError("pingpong=True needs warp_spec=True: the ping-pong alternates consumer "
                         "warpgroups, which exist only with a producer warp")
    reason = why_not_fa3(q, k, v)
    if reason is not None:
        if not fallback:
            raise RuntimeError(f"the FlashAttention-3 kernel cannot run here: {reason}")
        from . import flash_triton

        return flash_triton.forward(q, k, v, causal=causal, scale=scale)
    var = variant or choose(q.shape[3], causal, q.shape[2])
    if not warp_spec:  # one 8-warp program per item issues its own copies: two warpgroups in step
        var = dataclasses.replace(var, consumers=2, pingpong=False, persistent=False, kv_fused=False, q_bufs=1,
                                  named=False)
    if pingpong is not None:
        var = dataclasses.replace(var, pingpong=bool(pingpong))
    if persistent is not None:
        var = dataclasses.replace(var, persistent=bool(persistent and warp_spec))
    if named is not None:
        var = dataclasses.replace(var, named=bool(named and warp_spec))
    return _run(q, k, v, causal, scale, warp_spec, overlap, var)


_SMS = {}


def _sm_count(device):
    if device not in _SMS:
        _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device]


def _run(q, k, v, causal, scale, warp_spec, overlap, var):
    import triton
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from . import flash_fa3_gluon as kern

    B, H, N, d = q.shape
    q_bufs = var.q_bufs
    if q_bufs not in (1, 2):
        raise ValueError(f"variant {var}: q_bufs must be 1 or 2, got {var.q_bufs}")
    if var.named and (var.kv_fused or var.stages > 3 or var.consumers > 3):
        raise ValueError(f"variant {var}: named barriers take separate K and V barriers (kv_fused=False), "
                         f"at most 3 ring slots and 3 consumers (one named barrier id each)")
    if not kern.fits(d, var.block_n, var.stages, warp_spec, var.consumers, q_bufs=q_bufs):
        raise ValueError(f"variant {var} does not fit shared memory at d={d}")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    q3, k3, v3 = (t.contiguous().reshape(B * H, N, d) for t in (q, k, v))  # (B·H, N, d)
    o3 = torch.empty_like(q3)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    dtype_name = "bf16" if q.dtype == torch.bfloat16 else "fp16"
    (q_block, q_layout), (kv_block, kv_layout) = kern.layouts(d, dtype_name, warp_spec, var.block_n)
    q_desc = TensorDescriptor.from_tensor(q3, q_block, q_layout)
    o_desc = TensorDescriptor.from_tensor(o3, q_block, q_layout)
    k_desc = TensorDescriptor.from_tensor(k3, kv_block, kv_layout)
    v_desc = TensorDescriptor.from_tensor(v3, kv_block, kv_layout)
    block_m = WG_ROWS * (var.consumers if warp_spec else 2)  # query rows per work item
    n_items = triton.cdiv(N, block_m) * B * H  # work items: block_m query rows of one head
    grid = (min(n_items, _sm_count(q.device)) if var.persistent else n_items,)
    kern.fa3_fwd_kernel[grid](
        q_desc, k_desc, v_desc, o_desc, lse, N, B * H, scale * LOG2E,
        HEAD_DIM=d, BLOCK_N=var.block_n, STAGES=var.stages, CAUSAL=bool(causal), WARP_SPEC=bool(warp_spec),
        PINGPONG=var.pingpong, OVERLAP=bool(overlap), NUM_CONSUMERS=var.consumers,
        BALANCE=var.balance and bool(causal), SNAKE=(var.balance or var.snake) and bool(causal),
        KV_FUSED=var.kv_fused, Q_BUFS=q_bufs, NAMED=var.named, num_warps=4 if warp_spec else 8)
    return o3.reshape(B, H, N, d), lse


class _Attention(torch.autograd.Function):
    """This module's forward; the backward of the portable port, from the saved (o, lse)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale):
        o, lse = forward(q, k, v, causal=causal, scale=scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    def backward(ctx, do):
        from . import flash_triton

        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_triton.backward(q, k, v, o, lse, do.contiguous(), causal=ctx.causal, scale=ctx.scale)
        return dq, dk, dv, None, None


def attention(q, k, v, causal=False, scale=None):
    """O = softmax(scale · Q Kᵀ) V for torch.autograd: (B, H, N, d) in, (B, H, N, d) out; the
    forward is FlashAttention-3's (or the fallback), the backward ``flash_triton.backward``."""
    return _Attention.apply(q, k, v, causal, scale)
