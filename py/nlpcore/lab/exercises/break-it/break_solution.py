import numpy as np


def reference_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def test_max_grows_across_blocks(softmax):        # missing-rescale
    x = np.linspace(-3.0, 3.0, 24)[None, :]
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_ragged_tail(softmax):                     # dropped-tail
    x = np.random.RandomState(0).randn(2, 19)
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_far_below_zero(softmax):                  # zero-init-max
    x = np.random.RandomState(1).randn(2, 16) - 900.0
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_rows_of_different_scale(softmax):         # global-max
    x = np.random.RandomState(2).randn(2, 16)
    x[0] += 1000.0
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_masked_first_block(softmax):              # unguarded-inf
    x = np.random.RandomState(3).randn(1, 16)
    x[0, :8] = -np.inf
    assert np.allclose(softmax(x, block=8), reference_softmax(x))
