"""split_k against the naive reference, and the (o, lse) merge as a monoid in any order or tree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nlpcore.kernels import reference, split_k
from support import assert_close, low_precision_bar, max_abs_diff
from test_flash_np import SHAPES, describe, make_inputs, padding_mask

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # 0/0, log 0, ... fail


def split_counts(n_k):
    """1 (no split), 2, an odd count that leaves ragged parts, and one key per part."""
    return sorted({s for s in (1, 2, 3, 7, n_k) if s <= n_k})


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (False, True), (True, True)])
def test_forward_matches_reference_for_every_split_count(shape, dtype, causal, masked):
    lead, n_q, n_k, d, dv, bq, bk = shape
    rng = np.random.default_rng(hash(shape) % 2**32)
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, dv, dtype)
    mask = padding_mask(rng, lead, n_k) if masked else None
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal, mask=mask)
    for splits in split_counts(n_k):
        order = list(rng.permutation(splits))
        info = describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, "splits={} order={}".format(splits, order))
        o, lse = split_k.forward(q, k, v, splits=splits, causal=causal, mask=mask, order=order, block_q=bq, block_k=bk)
        assert o.dtype == np.dtype(dtype) and lse.dtype == np.dtype(dtype)
        assert_close(o, o_ref, what="o", inputs=info)
        assert_close(lse, lse_ref, what="lse", inputs=info)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_within_twice_the_naive_float16_error(causal):
    rng = np.random.default_rng(17)
    lead, n_q, n_k, d = (2, 2), 5, 301, 40  # a few queries against a long cache, as in decoding
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, d, np.float64)
    mask = padding_mask(rng, lead, n_k)
    h = [t.astype(np.float16) for t in (q, k, v)]
    o64, lse64 = reference.forward(*(t.astype(np.float64) for t in h), causal=causal, mask=mask)
    o_naive, _ = reference.forward(*h, causal=causal, mask=mask)
    err_naive, _ = max_abs_diff(o_naive, o64)
    for splits in (2, 5, 16):
        o, lse = split_k.forward(*h, splits=splits, causal=causal, mask=mask, block_q=4, block_k=16)
        assert o.dtype == np.float16 and lse.dtype == np.float32
        err, _ = max_abs_diff(o, o64)
        assert low_precision_bar(err, err_naive, 1e-4), (splits, err, err_naive)
        assert_close(lse, lse64, rtol=1e-5, what="lse float16, splits={}".format(splits))


def test_bfloat16_within_twice_the_naive_bfloat16_error():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 for NumPy comes from ml_dtypes")
    rng = np.random.default_rng(18)
    q, k, v = make_inputs(rng, (3,), 2, 257, 32, 32, np.float64)
    b = [t.astype(ml_dtypes.bfloat16) for t in (q, k, v)]
    o64, _ = reference.forward(*(t.astype(np.float64) for t in b))
    o_naive, _ = reference.forward(*b)
    o, lse = split_k.forward(*b, splits=6, order=[5, 0, 3, 1, 4, 2])
    assert o.dtype == ml_dtypes.bfloat16 and lse.dtype == np.float32
    err, _ = max_abs_diff(o.astype(np.float64), o64)
    err_naive, _ = max_abs_diff(o_naive.astype(np.float64), o64)
    assert low_precision_bar(err, err_naive, 1e-3), (err, err_naive)


def test_each_partial_is_attention_over_its_own_keys():
    rng = np.random.default_rng(19)
    q, k, v = make_inputs(rng, (2,), 11, 23, 5, 4, np.float64)
    mask = padding_mask(rng, (2,), 23)
    parts = []
    split_k.forward(q, k, v, splits=4, causal=True, mask=mask, partials=parts)
    assert [p["cols"] for p in parts] == [[0, 6], [6, 12], [12, 18], [18, 23]]
    for entry in parts:
        a, b = entry["cols"]
        only = np.zeros((11, 23), dtype=bool)
        only[:, a:b] = True  # the part's keys alone, with the causal rule and the padding mask
        o_ref, lse_ref = reference.forward(q, k, v, causal=True, mask=mask & only)
        assert_close(entry["partial"].o, o_ref, what="partial o {}".format(entry["cols"]))
        assert_close(entry["partial"].lse, lse_ref, what="partial lse {}".format(entry["cols"]))


def random_tree(draw, items):
    """A random binary bracketing of ``items`` (a list of leaves), drawn with hypothesis."""
    if len(items) == 1:
        return items[0]
    cut = draw(st.integers(1, len(items) - 1))
    return (random_tree(draw, items[:cut]), random_tree(draw, items[cut:]))


def merge_tree(tree):
    if isinstance(tree, split_k.Partial):  # a leaf (Partial is itself a tuple, so test it first)
        return tree
    return split_k.merge(merge_tree(tree[0]), merge_tree(tree[1]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_order_and_any_merge_tree_give_the_reference(data):
    n_q = data.draw(st.integers(1, 6), label="Nq")
    n_k = data.draw(st.integers(1, 40), label="Nk")
    splits = data.draw(st.integers(1, n_k), label="splits")
    causal = data.draw(st.booleans(), label="causal")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    q, k, v = make_inputs(rng, (2,), n_q, n_k, 3, 2, np.float64)
    q *= data.draw(st.sampled_from([1.0, 30.0]), label="score scale")  # wide scores: rescaling matters
    mask = padding_mask(rng, (2,), n_k)
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal, mask=mask)

    order = data.draw(st.permutations(range(splits)), label="order")
    o, lse = split_k.forward(q, k, v, splits=splits, causal=causal, mask=mask, order=order)
    assert_close(o, o_ref, what="o, fold in order {}".format(order))
    assert_close(lse, lse_ref, what="lse, fold in order {}".format(order))

    parts = []
    split_k.forward(q, k, v, splits=splits, causal=causal, mask=mask, partials=parts)
    leaves = [parts[i]["partial"] for i in data.draw(st.permutations(range(splits)), label="leaf order")]
    merged = merge_tree(random_tree(data.draw, leaves))
    assert_close(merged.o, o_ref, what="o, random merge tree")
    assert_close(merged.lse, lse_ref, what="lse, random merge tree")


def test_empty_partial_is_the_identity_of_merge():
    rng = np.random.default_rng(20)
    p = split_k.Partial(rng.standard_normal((3, 4)), np.array([0.5, -np.inf, 2.0]))
    e = split_k.empty((3, 4))
    for m in (split_k.merge(e, p), split_k.merge(p, e)):
        np.testing.assert_array_equal(m.o[[0, 2]], p.o[[0, 2]])
        assert (m.o[1] == 0).all()
        np.testing.assert_array_equal(m.lse, p.lse)


def test_fully_masked_rows_are_zero_without_nan():
    rng = np.random.default_rng(21)
    q, k, v = make_inputs(rng, (2,), 9, 12, 4, 6, np.float32)
    mask = np.ones((2, 9, 12), dtype=bool)
    mask[0, 3] = False
    mask[1] = False
    o, lse = split_k.forward(q, k, v, splits=5, mask=mask, order=[4, 2, 0, 1, 3])
    assert (o[0, 3] == 0).all() and (o[1] == 0).all() and not np.isnan(o).any()
    assert np.isneginf(lse[0, 3]) and np.isneginf(lse[1]).all() and np.isfinite(lse[0, :3]).all()


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(splits=0), ValueError, "splits must be a positive integer"),
        (dict(splits=9), ValueError, r"splits must be at most Nk = 8"),
        (dict(splits=2.0), TypeError, "splits must be a positive integer"),
        (dict(splits=3, order=[0, 1]), ValueError, r"order must be a permutation of range\(splits\)"),
        (dict(splits=3, order=[0, 1, 1]), ValueError, r"order must be a permutation of range\(splits\)"),
        (dict(splits=2, order=[0.0, 1.0]), TypeError, "order must hold integer part indices"),
        (dict(splits=2, order=3), TypeError, "order must be a sequence"),
        (dict(splits=2, partials=()), TypeError, "partials must be a list"),
        (dict(splits=2, mask=np.ones((3, 5), bool)), ValueError, r"mask must be broadcastable to \(\.\.\., Nq, Nk\)"),
    ],
)
def test_bad_arguments_raise_errors_naming_them(kwargs, error, match):
    rng = np.random.default_rng(0)
    q, k, v = make_inputs(rng, (), 6, 8, 4, 4, np.float32)
    with pytest.raises(error, match=match):
        split_k.forward(q, k, v, **kwargs)


def test_bad_shapes_raise_like_flash_np():
    rng = np.random.default_rng(0)
    q, k, v = make_inputs(rng, (), 6, 8, 4, 4, np.float32)
    with pytest.raises(ValueError, match=r"k must have shape \(\.\.\., Nk, d\)"):
        split_k.forward(q, k[:, :3], v, splits=2)
    with pytest.raises(TypeError, match="q must be a floating-point array"):
        split_k.forward(np.ones((3, 4), dtype=np.int64), k, v, splits=2)
