import numpy as np

# SOLUTION BEGIN
# # A state (m, l) summarises a block of scores along the last axis:  STARTER
# #   m = max of the block, l = sum of exp(x - m).  The empty block is (-inf, 0).  STARTER

def _shift(m):
    # exp(x - m) with m = -inf would be exp(nan); shift by 0 where no element was seen.
    return np.where(np.isfinite(m), m, 0.0)

# SOLUTION END

def from_block(x):
    # SOLUTION BEGIN
    # """x (..., B) -> (m (...), l (...)). A row that is all -inf gives (-inf, 0)."""  STARTER
    # raise NotImplementedError("from_block: reduce the last axis to (m, l)")  STARTER
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=-1)
    l = np.exp(x - _shift(m)[..., None]).sum(axis=-1)
    return m, l
    # SOLUTION END


def combine(a, b):
    # SOLUTION BEGIN
    # """(m_a, l_a) ⊕ (m_b, l_b) -> (m, l): the state of the two blocks together."""  STARTER
    # raise NotImplementedError("combine: rescale both l's to the larger max and add")  STARTER
    (m_a, l_a), (m_b, l_b) = a, b
    m = np.maximum(m_a, m_b)
    s = _shift(m)
    return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)
    # SOLUTION END


def online_softmax(x, block_size):
    # SOLUTION BEGIN
    # """softmax over the last axis of x (..., N), reading x in blocks of block_size."""  STARTER
    # raise NotImplementedError("online_softmax: fold the blocks with combine, then normalise")  STARTER
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))
    for start in range(0, n, block_size):
        state = combine(state, from_block(x[..., start:start + block_size]))
    m, l = state
    p = np.exp(x - _shift(m)[..., None])
    l = l[..., None]
    return np.divide(p, l, out=np.zeros_like(p), where=l > 0)
    # SOLUTION END
