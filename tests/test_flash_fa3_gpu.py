"""The FlashAttention-3 kernel (nlpcore.kernels.flash_fa3) on a Hopper GPU, against float64.

The bar is flash-attention's own: the kernel's max error against a float64 reference may be at
most twice that of plain attention computed in the same low precision (check_triton.plain:
products in the input dtype, softmax in float32), plus twice the dtype's rounding at the
reference's magnitude (check_triton.flash_bound). lse is held to 1e-3 absolute (it is float32
from float32 statistics). Sizes are not multiples of the tiles (113, 1000, 4097 against 128-row
programs and 128-key tiles), both head dims, both dtypes, causal and not, and every ablation
flag. Skipped without a CUDA GPU of compute capability 9.x; run on the H200 with
``PYTHONPATH=py python3 -m pytest tests/test_flash_fa3_gpu.py`` (bench/FA3.md records the run).
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
pytest.importorskip("triton", reason="needs Triton")
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("needs a Hopper GPU (compute capability 9.x)", allow_module_level=True)

from nlpcore.lab.exercises.triton import check_triton as ct  # noqa: E402
from nlpcore.kernels import flash_fa3  # noqa: E402

if flash_fa3.why_not_fa3(*[torch.empty(1, 1, 8, 64, device="cuda", dtype=torch.bfloat16)] * 3):
    pytest.skip("this Triton has no Gluon Hopper API", allow_module_level=True)


def _inputs(b, h, n, d, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, n, d, device="cuda", generator=gen).to(dtype) for _ in range(3)]


def _check(q, k, v, causal, **flags):
    o, lse = flash_fa3.forward(q, k, v, causal=causal, fallback=False, **flags)
    label = f"shape {tuple(q.shape)} {q.dtype} causal={causal} {flags}"
    assert o.shape == q.shape and o.dtype == q.dtype, label
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32, label
    ref_o, ref_lse, _ = ct.reference(q, k, v, causal=causal)
    plain_o, _ = ct.plain(q, k, v, causal=causal)
    v_o = ct.compare(o, ref_o, ct.flash_bound(plain_o, ref_o))
    assert v_o.ok, f"o: max|Δ| {v_o.err:.3g} > bound {v_o.bound:.3g} {v_o.where} ({label})"
    v_lse = ct.compare(lse, ref_lse, 1e-3)
    assert v_lse.ok, f"lse: max|Δ| {v_lse.err:.3g} > {v_lse.bound:.3g} {v_lse.where} ({label})"


@pytest.mark.parametrize("n", [113, 1000, 4097])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_float64(n, d, dtype, causal):
    q, k, v = _inputs(2, 3, n, d, dtype, seed=n + d)
    _check(q, k, v, causal)


@pytest.mark.parametrize("flags", [dict(pingpong=False), dict(overlap=False), dict(persistent=False),
                                   dict(persistent=True), dict(persistent=True, pingpong=False),
                                   dict(warp_spec=False, pingpong=False),
                                   dict(warp_spec=False, pingpong=False, overlap=False)])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_ablations_stay_correct(flags, d, causal):
    q, k, v = _inputs(1, 2, 1000, d, torch.bfloat16, seed=7)
    _check(q, k, v, causal, **flags)


V = flash_fa3.Variant


def _check_variant(q, k, v, causal, variant):
    if variant.named and os.environ.get("FA3_SKIP_NAMED"):  # set by bench/fa3_h200_run8.sh
        pytest.skip("FA3_SKIP_NAMED: the named-barrier smoke test failed on this device")
    _check(q, k, v, causal, variant=variant)


@pytest.mark.parametrize("variant, d", [
    (V(consumers=3, stages=3), 64), (V(consumers=3, stages=3, pingpong=False), 64),
    (V(consumers=3, block_n=64, stages=4), 64), (V(consumers=3, stages=3, kv_fused=True), 64),
    (V(stages=3, kv_fused=True), 64), (V(kv_fused=True), 128),
    (V(balance=True), 128), (V(balance=True, persistent=False), 128), (V(consumers=3, stages=3, balance=True), 64),
    (V(consumers=3, stages=3, balance=True, persistent=False), 64), (V(stages=3, kv_fused=True, balance=True), 64),
    (V(snake=True), 128), (V(pingpong=False, snake=True), 128), (V(consumers=3, stages=3, snake=True), 64),
    (V(q_bufs=2), 128), (V(snake=True, q_bufs=2), 128), (V(stages=2, snake=True, q_bufs=2), 64),
    (V(consumers=3, stages=3, q_bufs=2), 64), (V(consumers=3, stages=3, pingpong=False, q_bufs=2), 64),
    (V(named=True), 128), (V(named=True, pingpong=False), 128), (V(named=True, persistent=False), 128),
    (V(named=True, snake=True, q_bufs=2), 128), (V(named=True, pingpong=False, snake=True), 128),
    (V(consumers=3, stages=3, named=True), 64), (V(consumers=3, stages=3, pingpong=False, q_bufs=2, named=True), 64),
    (V(stages=2, snake=True, named=True), 64), (V(stages=2, balance=True, named=True), 64),
    (V(stages=2, pingpong=False, persistent=False, named=True), 64),
])
@pytest.mark.parametrize("n", [1000, 4097])
@pytest.mark.parametrize("causal", [False, True])
def test_variants_stay_correct(variant, d, n, causal):
    """Every candidate of bench/fa3_h200_variants.py: three warpgroups (192-row items, a ragged
    last item at both N), fused K/V barriers, the longest-first and snake causal schedules, two
    Q buffers per consumer, hand-overs on named barriers."""
    q, k, v = _inputs(2, 3, n, d, torch.bfloat16, seed=n + d)
    _check_variant(q, k, v, causal, variant)


@pytest.mark.parametrize("variant, d", [
    (V(), 128), (V(q_bufs=2), 128), (V(snake=True, q_bufs=2), 128), (V(balance=True, q_bufs=2), 128),
    (V(stages=2, snake=True), 64), (V(stages=2, snake=True, q_bufs=2), 64), (V(consumers=3, stages=3, q_bufs=2), 64),
    (V(named=True), 128), (V(named=True, snake=True, q_bufs=2), 128), (V(named=True, pingpong=False), 128),
    (V(consumers=3, stages=3, named=True), 64), (V(stages=2, snake=True, named=True), 64),
])
@pytest.mark.parametrize("causal", [False, True])
def test_many_items_per_program(variant, d, causal):
    """The benchmark's N = 1024 layout (128 heads, N = 1000 here: the last item ragged): each
    persistent program runs 7 to 8 items, so every Q buffer is reused several times, in every
    order the schedules deal (the other tests give a program one or two items)."""
    q, k, v = _inputs(8, 16, 1000, d, torch.bfloat16, seed=11 + d)
    _check_variant(q, k, v, causal, variant)


def test_one_key_tile_and_single_row():
    for n in (1, 64, 128, 129):
        q, k, v = _inputs(1, 1, n, 128, torch.float16, seed=n)
        _check(q, k, v, causal=True)
        _check(q, k, v, causal=False)


def test_scale_and_large_scores():
    q, k, v = _inputs(1, 2, 300, 64, torch.bfloat16, seed=3)
    q = q * 8  # scores in the hundreds: the running max must keep exp2 in range
    o, lse = flash_fa3.forward(q, k, v, scale=0.5, fallback=False)
    ref_o, ref_lse, _ = ct.reference(q, k, v, scale=0.5)
    plain_o, _ = ct.plain(q, k, v, scale=0.5)
    assert ct.compare(o, ref_o, ct.flash_bound(plain_o, ref_o)).ok
    assert ct.compare(lse, ref_lse, 1e-3 * float(ref_lse.abs().max())).ok
