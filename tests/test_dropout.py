"""Fused dropout: the counter-based keep-mask, flash_np against the reference given that mask.

The reference takes the mask as an input (``keep=``), flash_np draws its own tile by tile from
(seed, head, row, column); ``flash_np.keep_mask`` must return exactly what flash_np applied, so
the two agree only if the tiles were drawn right. The reference's dropout backward is checked
against finite differences, so it is an independent oracle, not a copy of the kernel's math.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nlpcore.kernels import dropout, flash_np, io_model, reference
from support import assert_close, low_precision_bar, max_abs_diff

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

# Pinned bits of the generator (tests/test_py38_compat.py checks the same on NumPy 1.17): a
# change of hash, of key order or of threshold shows here.
GOLDEN_MIX = [0, 1753845952, 3507691905, 1734902346]  # mix(0), mix(1), mix(2), mix(2**32 - 1)
GOLDEN_MASK = [10, 74, 68, 205, 17, 221, 45, 232, 149, 117, 175, 108, 235, 165, 112, 206, 203, 107, 204,
               176, 212, 203, 169, 23, 125, 159, 64]  # np.packbits(keep_mask(1234, (2, 3, 5, 7), 0.5))

# (leading axes, Nq, Nk, d, dv, block_q, block_k): ragged tiles, Nq != Nk, dv != d.
SHAPES = [
    ((), 1, 1, 1, 1, 1, 1),
    ((), 37, 29, 19, 11, 8, 5),
    ((2, 3), 17, 45, 9, 6, 7, 13),
    ((1, 2), 113, 203, 16, 16, 32, 64),
]
P_DROP = 0.3


def test_mix_and_mask_bits_are_pinned():
    got = dropout.mix(np.array([0, 1, 2, 2 ** 32 - 1], dtype=np.uint32)).tolist()
    assert got == GOLDEN_MIX
    keep = flash_np.keep_mask(1234, (2, 3, 5, 7), 0.5)
    assert keep.dtype == np.bool_ and keep.shape == (2, 3, 5, 7)
    assert np.packbits(keep.ravel()).tolist() == GOLDEN_MASK


def _mix_int(x):
    """lowbias32 on a Python int, written from the published constants (an oracle independent of
    the uint32 NumPy code)."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & m
    x ^= x >> 15
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def test_bits_follow_the_documented_formula():
    seed, p, m = 1234, 0.3, 0xFFFFFFFF
    keep = flash_np.keep_mask(seed, (2, 3, 9, 11), p)
    cut = round(p * 2 ** 32)
    for b, h, row, col in itertools.product(range(2), range(3), (0, 4, 8), (0, 5, 10)):
        head = _mix_int((_mix_int(seed) + b * 3 + h) & m)
        row_key = _mix_int((head + row) & m)
        col_key = _mix_int(((_mix_int(seed) ^ 0x9E3779B9) + col) & m)
        bits = ((row_key ^ col_key) * 0x7FEB352D) & m
        assert keep[b, h, row, col] == (bits >= cut), (b, h, row, col)


def _pattern_chi2(keep, p, rng, kind, n=200_000):
    """χ² (and its degrees of freedom) of the joint keep bits of entries sampled in pairs of
    neighbours along a row or a column, or at the four corners of random rectangles, against
    independent draws with P(keep) = 1 − p."""
    n_r, n_c = keep.shape
    r, c = rng.integers(0, n_r - 1, n), rng.integers(0, n_c - 1, n)
    if kind == "row neighbours":
        cells = [(r, c), (r, c + 1)]
    elif kind == "column neighbours":
        cells = [(r, c), (r + 1, c)]
    else:
        r2, c2 = rng.integers(0, n_r, n), rng.integers(0, n_c, n)
        cells = [(r, c), (r, c2), (r2, c), (r2, c2)]
    code = sum(keep[a, b].astype(np.int64) << i for i, (a, b) in enumerate(cells))
    counts = np.bincount(code, minlength=2 ** len(cells))
    q = 1 - p
    want = np.array([np.prod([q if (j >> i) & 1 else p for i in range(len(cells))])
                     for j in range(2 ** len(cells))]) * n
    return float(((counts - want) ** 2 / want).sum()), 2 ** len(cells) - 1


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_keep_bits_look_independent(p):
    """Neighbours and rectangle corners: the χ² of their joint bits stays below the 1e-6 tail
    of its distribution (χ² ≈ df ± sqrt(2 df) for independent bits). The same statistic on the
    multiply-free draw key(row) XOR key(col) is in the tens of thousands: the test has teeth."""
    rng = np.random.default_rng(0)
    keep = flash_np.keep_mask(42, (2048, 2048), p)  # one head's 4M draws
    limits = {1: 24.0, 3: 31.0, 15: 50.0}  # ~ the 1e-6 upper tail of χ² with df = 1, 3, 15
    for kind in ("row neighbours", "column neighbours", "rectangle corners"):
        chi2, df = _pattern_chi2(keep, p, rng, kind)
        assert chi2 < limits[df], (kind, p, chi2, df)
    keys = dropout.head_keys(42, (1,))[0]
    rows = dropout.mix(keys + np.arange(2048, dtype=np.uint32))
    flawed = (rows[:, None] ^ dropout.column_keys(42, (0, 2048))) >= np.uint32(dropout.threshold(p))
    chi2, df = _pattern_chi2(flawed, p, rng, "rectangle corners")
    assert chi2 > 1000, chi2


def test_mask_is_a_function_of_seed_head_row_and_column_only():
    whole = flash_np.keep_mask(7, (2, 3, 40, 50), 0.25)
    keys = dropout.head_keys(7, (2, 3))
    tile = dropout.keep_tile(7, keys, (11, 29), (3, 47), 0.25)  # any tile, drawn alone
    assert np.array_equal(tile, whole[..., 11:29, 3:47])
    # a head's mask does not depend on how many heads there are, only on its index bh
    assert np.array_equal(flash_np.keep_mask(7, (6, 40, 50), 0.25), whole.reshape(6, 40, 50))
    assert not np.array_equal(whole[0, 0], whole[0, 1])  # heads differ
    assert not np.array_equal(flash_np.keep_mask(8, (2, 3, 40, 50), 0.25), whole)  # seeds differ


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_kept_fraction_is_one_minus_p(p):
    keep = flash_np.keep_mask(3, (4, 256, 256), p)  # 262 144 draws: sd of the fraction < 0.001
    assert abs(keep.mean() - (1 - p)) < 0.005, (p, keep.mean())
    # rows and columns are not correlated with position: each row's fraction is close too
    assert np.abs(keep.mean(axis=-1) - (1 - p)).max() < 0.15


def describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, order):
    return "q {} k {} dv={} tiles {}x{} {} causal={} mask={} {} p={}".format(
        lead + (n_q, d), lead + (n_k, d), dv, bq, bk, np.dtype(dtype).name, causal, masked, order, P_DROP
    )


def padding_mask(rng, lead, n_k):
    """Key padding (..., 1, Nk) whose first head masks every key (fully masked rows)."""
    keep = rng.random(lead + (1, n_k)) > 0.3
    keep[..., 0] = True
    keep.reshape(-1, n_k)[0] = False
    return keep


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (True, True)])
def test_flash_matches_reference_with_the_same_keep_mask(shape, dtype, causal, masked):
    lead, n_q, n_k, d, dv, bq, bk = shape
    rng = np.random.default_rng(hash(shape) % 2 ** 32)
    q, k, v = (rng.standard_normal(lead + s).astype(dtype) for s in ((n_q, d), (n_k, d), (n_k, dv)))
    mask = padding_mask(rng, lead, n_k) if masked and lead else None
    seed = 99
    keep = flash_np.keep_mask(seed, lead + (n_q, n_k), P_DROP)
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal, mask=mask, keep=keep, dropout_p=P_DROP)
    do = rng.standard_normal(o_ref.shape).astype(dtype)
    g_ref = reference.backward(q, k, v, o_ref, lse_ref, do, causal=causal, mask=mask, keep=keep, dropout_p=P_DROP)
    for order in ("kv_outer", "q_outer"):
        info = describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, order)
        o, lse = flash_np.forward(q, k, v, causal=causal, mask=mask, block_q=bq, block_k=bk, loop_order=order,
                                  dropout_p=P_DROP, seed=seed)
        assert_close(o, o_ref, what="o", inputs=info)
        assert_close(lse, lse_ref, what="lse (undropped)", inputs=info)
    grads = flash_np.backward(q, k, v, o, lse, do, causal=causal, mask=mask, block_q=bq, block_k=bk,
                              dropout_p=P_DROP, seed=seed)
    for name, g, gr in zip(("dq", "dk", "dv"), grads, g_ref):
        assert_close(g, gr, what=name, inputs=info)
    if mask is not None:  # the fully masked head: zero output and gradients, no NaN
        assert not o.reshape((-1,) + o.shape[-2:])[0].any()
        assert all(not g.reshape((-1,) + g.shape[-2:])[0].any() for g in grads)


def test_dropout_changes_the_output_and_a_wrong_mask_is_caught():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 30, 8)) for _ in range(3))
    o0, _ = flash_np.forward(q, k, v, block_q=8, block_k=8)
    o, _ = flash_np.forward(q, k, v, block_q=8, block_k=8, dropout_p=0.2, seed=1)
    assert max_abs_diff(o, o0)[0] > 1e-2
    other = flash_np.keep_mask(2, (2, 30, 30), 0.2)  # another seed's mask
    o_other, _ = reference.forward(q, k, v, keep=other, dropout_p=0.2)
    assert max_abs_diff(o, o_other)[0] > 1e-2


def test_float16_dropout_within_twice_the_naive_float16_error():
    rng = np.random.default_rng(17)
    lead, n_q, n_k, d = (2, 2), 77, 130, 40
    h = [rng.standard_normal(lead + (n, d)).astype(np.float16) for n in (n_q, n_k, n_k)]
    exact = [t.astype(np.float64) for t in h]
    keep = flash_np.keep_mask(4, lead + (n_q, n_k), P_DROP)
    o64, lse64 = reference.forward(*exact, causal=True, keep=keep, dropout_p=P_DROP)
    do = rng.standard_normal(o64.shape)
    g64 = reference.backward(*exact, o64, lse64, do, causal=True, keep=keep, dropout_p=P_DROP)
    o_naive, lse_naive = reference.forward(*h, causal=True, keep=keep, dropout_p=P_DROP)
    o_flash, lse_flash = flash_np.forward(*h, causal=True, block_q=16, block_k=24, dropout_p=P_DROP, seed=4)
    assert o_flash.dtype == np.float16
    e_flash, e_naive = max_abs_diff(o_flash, o64)[0], max_abs_diff(o_naive, o64)[0]
    assert low_precision_bar(e_flash, e_naive, 1e-4), (e_flash, e_naive)
    do16 = do.astype(np.float16)
    g_naive = reference.backward(*h, o_naive, lse_naive, do16, causal=True, keep=keep, dropout_p=P_DROP)
    g_flash = flash_np.backward(*h, o_flash, lse_flash, do16, causal=True, block_q=16, block_k=24,
                                dropout_p=P_DROP, seed=4)
    for name, gf, gn, gx in zip(("dq", "dk", "dv"), g_flash, g_naive, g64):
        ef, en = max_abs_diff(gf, gx)[0], max_abs_diff(gn, gx)[0]
        assert low_precision_bar(ef, en, 1e-3), (name, ef, en)


def test_reference_dropout_backward_matches_finite_differences():
    rng = np.random.default_rng(21)
    q, k, v = rng.standard_normal((5, 3)), rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    keep = flash_np.keep_mask(11, (5, 6), 0.4)
    w = rng.standard_normal((5, 2))  # loss = sum(w * o)

    def loss():
        o, _ = reference.forward(q, k, v, causal=True, keep=keep, dropout_p=0.4)
        return float((w * o).sum())

    o, lse = reference.forward(q, k, v, causal=True, keep=keep, dropout_p=0.4)
    grads = reference.backward(q, k, v, o, lse, w, causal=True, keep=keep, dropout_p=0.4)
    eps = 1e-6
    for name, a, g in zip(("dq", "dk", "dv"), (q, k, v), grads):
        fd = np.zeros_like(a)
        for idx in itertools.product(*(range(n) for n in a.shape)):
            old = a[idx]
            a[idx] = old + eps
            up = loss()
            a[idx] = old - eps
            fd[idx] = (up - loss()) / (2 * eps)
            a[idx] = old
        assert_close(g, fd, rtol=1e-7, atol=1e-8, what=name + " vs finite differences")


def test_p_zero_is_bit_identical_to_no_dropout():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 37, 9)).astype(np.float32) for _ in range(3))
    do = rng.standard_normal((2, 37, 9)).astype(np.float32)
    for order in ("kv_outer", "q_outer"):
        plain = flash_np.forward(q, k, v, causal=True, block_q=8, block_k=16, loop_order=order)
        zero = flash_np.forward(q, k, v, causal=True, block_q=8, block_k=16, loop_order=order,
                                dropout_p=0.0, seed=12345)
        assert all(np.array_equal(a, b) for a, b in zip(plain, zero))
    g0 = flash_np.backward(q, k, v, *plain, do, causal=True, block_q=8, block_k=16)
    g1 = flash_np.backward(q, k, v, *plain, do, causal=True, block_q=8, block_k=16, dropout_p=0.0, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(g0, g1))


def test_dropout_adds_no_hbm_traffic():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((37, 16)) for _ in range(3))
    counts = []
    for p in (0.0, 0.5):
        fwd, bwd = io_model.IOCounter(), io_model.IOCounter()
        o, lse = flash_np.forward(q, k, v, causal=True, block_q=8, block_k=12, io=fwd, dropout_p=p, seed=1)
        flash_np.backward(q, k, v, o, lse, o, causal=True, block_q=8, block_k=12, io=bwd, dropout_p=p, seed=1)
        counts.append((fwd.reads, fwd.writes, bwd.reads, bwd.writes))
    assert counts[0] == counts[1]
    assert counts[0][:2] == io_model.flash_io(37, 37, 16, 8, 12, causal=True)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"dropout_p": 1.0}, ValueError, r"dropout_p must be in \[0, 1\)"),
    ({"dropout_p": -0.1}, ValueError, "dropout_p"),
    ({"dropout_p": "0.1"}, TypeError, "dropout_p must be a number"),
    ({"dropout_p": 0.1, "seed": -1}, ValueError, r"seed must be an int in \[0, 2\*\*32\)"),
    ({"dropout_p": 0.1, "seed": 2 ** 32}, ValueError, "seed"),
    ({"dropout_p": 0.1, "seed": 1.5}, TypeError, "seed must be an int"),
])
def test_bad_dropout_arguments_name_the_argument(kwargs, error, match):
    q = np.ones((4, 2))
    with pytest.raises(error, match=match):
        flash_np.forward(q, q, q, **kwargs)
    with pytest.raises(error, match=match):
        flash_np.backward(q, q, q, q, np.zeros(4), q, **kwargs)


def test_reference_rejects_a_keep_mask_of_the_wrong_shape_or_dtype():
    q = np.ones((4, 2))
    with pytest.raises(ValueError, match=r"keep must broadcast to \(\.\.\., Nq, Nk\)"):
        reference.forward(q, q, q, keep=np.ones((3, 4), bool), dropout_p=0.1)
    with pytest.raises(TypeError, match="keep must be a boolean array"):
        reference.forward(q, q, q, keep=np.ones((4, 4)), dropout_p=0.1)
    with pytest.raises(ValueError, match=r"shape must be \(\.\.\., Nq, Nk\)"):
        flash_np.keep_mask(0, (4,), 0.1)
