"""The oracle itself, against the definition written out row by row with Python loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nlpcore.kernels import reference
from support import assert_close

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def by_hand(q, k, v, allowed, scale):
    """softmax(scale·q·kᵀ)·v one query at a time, in Python floats (math.exp / math.log)."""
    n_q, n_k, dv = q.shape[0], k.shape[0], v.shape[1]
    o = np.zeros((n_q, dv))
    lse = np.full(n_q, -np.inf)
    for i in range(n_q):
        s = [scale * float(np.dot(q[i], k[j])) for j in range(n_k) if allowed[i][j]]
        keys = [j for j in range(n_k) if allowed[i][j]]
        if not s:
            continue
        m = max(s)
        w = [math.exp(x - m) for x in s]
        total = sum(w)
        lse[i] = m + math.log(total)
        for wi, j in zip(w, keys):
            o[i] += wi / total * v[j]
    return o, lse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_q,n_k", [(1, 1), (4, 7), (9, 3)])
def test_forward_equals_definition(causal, n_q, n_k):
    rng = np.random.default_rng(n_q * 10 + n_k)
    q, k, v = rng.standard_normal((n_q, 5)), rng.standard_normal((n_k, 5)), rng.standard_normal((n_k, 2))
    mask = rng.random((n_q, n_k)) > 0.4
    allowed = [[bool(mask[i, j]) and (not causal or j <= i) for j in range(n_k)] for i in range(n_q)]
    o, lse = reference.forward(q, k, v, causal=causal, mask=mask, scale=0.7)
    o_hand, lse_hand = by_hand(q, k, v, allowed, 0.7)
    assert_close(o, o_hand)
    assert_close(lse, lse_hand)


def test_backward_equals_autodiff_by_finite_differences():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    w = rng.standard_normal((3, 2))
    o, lse = reference.forward(q, k, v, causal=True)
    grads = reference.backward(q, k, v, o, lse, w, causal=True)
    eps = 1e-6
    for x, g in zip((q, k, v), grads):
        for idx in np.ndindex(*x.shape):
            old = x[idx]
            x[idx] = old + eps
            up = float((w * reference.forward(q, k, v, causal=True)[0]).sum())
            x[idx] = old - eps
            down = float((w * reference.forward(q, k, v, causal=True)[0]).sum())
            x[idx] = old
            assert abs((up - down) / (2 * eps) - g[idx]) < 1e-7


def test_broadcast_key_gradients_are_summed_over_heads():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((3, 4, 2))  # 3 heads
    k = rng.standard_normal((1, 5, 2))  # shared by all heads
    v = rng.standard_normal((1, 5, 2))
    o, lse = reference.forward(q, k, v)
    do = rng.standard_normal(o.shape)
    dq, dk, dv = reference.backward(q, k, v, o, lse, do)
    assert dk.shape == (1, 5, 2) and dv.shape == (1, 5, 2)
    per_head = [reference.backward(q[h], k[0], v[0], o[h], lse[h], do[h]) for h in range(3)]
    assert_close(dk[0], sum(g[1] for g in per_head))
    assert_close(dv[0], sum(g[2] for g in per_head))


def _plain_attention(q, k, v, dtype):
    """softmax(q kᵀ / sqrt(d)) v with every operation in ``dtype``."""
    q, k, v = (np.asarray(x, dtype=dtype) for x in (q, k, v))
    s = (q @ k.T) * dtype(1.0 / np.sqrt(q.shape[-1]))
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    return (p / l) @ v, (m + np.log(l))[:, 0]


def test_float32_is_computed_in_float32_and_float64_in_float64():
    """Not only the dtype: float32 inputs give what float32 arithmetic gives (a few ulps from a
    float32 computation, and visibly not the float64 result rounded to float32), and float64
    inputs what float64 arithmetic gives."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((48, 24)) * 2 for _ in range(3))
    o64, lse64 = _plain_attention(q, k, v, np.float64)
    o32, lse32 = _plain_attention(q, k, v, np.float32)

    o, lse = reference.forward(*(x.astype(np.float32) for x in (q, k, v)))
    assert o.dtype == np.float32 and lse.dtype == np.float32
    assert np.abs(o - o32).max() <= 8 * np.finfo(np.float32).eps * np.abs(o32).max()
    assert np.abs(lse - lse32).max() <= 8 * np.finfo(np.float32).eps * np.abs(lse32).max()
    assert (o != o64.astype(np.float32)).any()      # not computed in float64, then rounded

    o, lse = reference.forward(q, k, v)
    assert o.dtype == np.float64 and lse.dtype == np.float64
    assert np.abs(o - o64).max() <= 1e-13 and np.abs(lse - lse64).max() <= 1e-13
    assert np.abs(o - o32).max() > 1e-9             # not computed in float32
