"""The (m, l) monoid: its laws as properties, and the streaming softmax built on it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from nlpcore.kernels.online_softmax import State, combine, from_block, identity, online_softmax
from support import assert_close

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

# Finite scores plus -inf (masked entries); wide range to exercise the rescaling.
scores = st.one_of(st.floats(-300, 300, allow_nan=False), st.just(-np.inf))
blocks = arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(1, 6)), elements=scores)


def represented(s: State) -> np.ndarray:
    """The number l·exp(m) = Σ exp(x) a state stands for, computed in log space: log l + m."""
    out = np.full(s.l.shape, -np.inf)
    np.log(s.l, out=out, where=s.l > 0)
    return out + np.where(np.isfinite(s.m), s.m, 0)


def same_state(a: State, b: State):
    assert_close(represented(a), represented(b), rtol=1e-12, atol=1e-12, what="log(l)+m")
    assert (np.isneginf(a.m) == np.isneginf(b.m)).all()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_combine_is_associative(data):
    rows = data.draw(st.integers(1, 3))
    x, y, z = (data.draw(arrays(np.float64, (rows, data.draw(st.integers(1, 5))), elements=scores)) for _ in range(3))
    a, b, c = from_block(x), from_block(y), from_block(z)
    same_state(combine(combine(a, b), c), combine(a, combine(b, c)))


@settings(max_examples=200, deadline=None)
@given(blocks)
def test_identity_is_neutral_on_both_sides(x):
    a = from_block(x)
    e = identity(a.m.shape)
    for s in (combine(e, a), combine(a, e)):
        np.testing.assert_array_equal(s.m, a.m)
        np.testing.assert_array_equal(s.l, a.l)


@settings(max_examples=200, deadline=None)
@given(blocks, st.integers(1, 6))
def test_combine_of_split_equals_whole(x, cut):
    cut = min(cut, x.shape[-1])
    same_state(combine(from_block(x[:, :cut]), from_block(x[:, cut:])), from_block(x))


def test_identity_is_minus_inf_and_zero():
    e = identity((2, 3))
    assert np.isneginf(e.m).all() and (e.l == 0).all()
    assert e.m.shape == (2, 3)


def _softmax(x):
    m = x.max(axis=-1, keepdims=True)
    p = np.exp(x - m)
    return p / p.sum(axis=-1, keepdims=True)


@settings(max_examples=100, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 40)), elements=st.floats(-500, 500)), st.integers(1, 50))
def test_online_softmax_equals_softmax(x, block):
    assert_close(online_softmax(x, block), _softmax(x))


def test_all_masked_row_gives_zeros_and_large_scores_do_not_overflow():
    x = np.array([[-np.inf, -np.inf, -np.inf], [1000.0, 999.0, -np.inf]], dtype=np.float32)
    y = online_softmax(x, 2)
    assert (y[0] == 0).all()
    np.testing.assert_allclose(y[1], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0], rtol=1e-6)
    assert y.dtype == np.float32


def _float16_accumulated_softmax(x, block):
    """The same streaming softmax with the running sum kept in float16 (what the test rules out)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))                    # float16
    total = np.zeros(x.shape[:-1] + (1,), dtype=np.float16)
    for start in range(0, x.shape[-1], block):
        total = (total + e[..., start:start + block].sum(axis=-1, keepdims=True,
                                                          dtype=np.float16)).astype(np.float16)
    return e / total


def test_float16_accumulates_in_float32():
    """Error against the float64 softmax of the same float16 inputs is at most that of a float32
    computation rounded to float16 (plus one float16 ulp of the largest probability); a float16
    running sum is over ten times worse on these 3000-wide rows and fails the same bar."""
    x = (np.random.RandomState(0).randn(4, 3000) * 3).astype(np.float16)
    x64 = x.astype(np.float64)
    want = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    want /= want.sum(axis=-1, keepdims=True)
    x32 = x.astype(np.float32)
    e32 = np.exp(x32 - x32.max(axis=-1, keepdims=True))
    base = np.abs((e32 / e32.sum(axis=-1, keepdims=True)).astype(np.float16) - want).max()
    bar = base + float(np.finfo(np.float16).eps) * want.max()

    y = online_softmax(x, 7)
    assert y.dtype == np.float16
    assert np.abs(y.astype(np.float64) - want).max() <= bar
    with np.errstate(all="ignore"):
        worse = np.abs(_float16_accumulated_softmax(x, 7).astype(np.float64) - want).max()
    assert worse > 10 * bar, (worse, bar)      # the bar tells the two accumulations apart


@pytest.mark.parametrize("bad,exc,match", [(0, ValueError, "block_size must be a positive integer"), (1.5, TypeError, "block_size")])
def test_bad_block_size(bad, exc, match):
    with pytest.raises(exc, match=match):
        online_softmax(np.zeros((2, 3)), bad)


def test_bad_x():
    with pytest.raises(TypeError, match="x must be a floating-point array"):
        online_softmax(np.arange(3), 2)
    with pytest.raises(ValueError, match="non-empty last axis"):
        online_softmax(np.zeros((2, 0)), 2)
