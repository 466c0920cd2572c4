import numpy as np

# A state (m, l) summarises a block of scores along the last axis:
#   m = max of the block, l = sum of exp(x - m).  The empty block is (-inf, 0).

def from_block(x):
    """x (..., B) -> (m (...), l (...)). A row that is all -inf gives (-inf, 0)."""
    raise NotImplementedError("from_block: reduce the last axis to (m, l)")


def combine(a, b):
    """(m_a, l_a) ⊕ (m_b, l_b) -> (m, l): the state of the two blocks together."""
    raise NotImplementedError("combine: rescale both l's to the larger max and add")


def online_softmax(x, block_size):
    """softmax over the last axis of x (..., N), reading x in blocks of block_size."""
    raise NotImplementedError("online_softmax: fold the blocks with combine, then normalise")
