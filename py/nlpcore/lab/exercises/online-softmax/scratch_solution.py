import numpy as np


def _shift(m):
    # exp(x - m) with m = -inf would be exp(nan); shift by 0 where no element was seen.
    return np.where(np.isfinite(m), m, 0.0)


def from_block(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1)
    l = np.exp(x - _shift(m)[..., None]).sum(axis=-1)
    return m, l


def combine(a, b):
    (m_a, l_a), (m_b, l_b) = a, b
    m = np.maximum(m_a, m_b)
    s = _shift(m)
    return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)


def online_softmax(x, block_size):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))
    for start in range(0, n, block_size):
        state = combine(state, from_block(x[..., start:start + block_size]))
    m, l = state
    p = np.exp(x - _shift(m)[..., None])
    l = l[..., None]
    return np.divide(p, l, out=np.zeros_like(p), where=l > 0)
