"""The kernels Break it's suite is judged on: the clean kernel and its five bugs, written
differently from the ones the page shows (another loop, other names), so a suite that
recognises the shown kernels by their code, their names or their order learns nothing about
these. Each mutant is the same bug as the shown mutant of that id, as one edit of
:data:`CLEAN`; tests/exercises/test_break_it.py holds both suites' matrices equal.
"""
from __future__ import annotations

from collections import OrderedDict

CLEAN = '''\
import numpy as np


def softmax(values, block=8):
    data = np.array(values, dtype=np.float64)
    width = data.shape[-1]
    top = np.full(data.shape[:-1], -np.inf)
    total = np.zeros(data.shape[:-1])
    pos = 0
    while pos < width:
        chunk = data[..., pos:pos + block]
        new_top = np.maximum(top, np.max(chunk, axis=-1))
        ref = np.where(new_top > -np.inf, new_top, 0.0)
        total = total * np.exp(top - ref) + np.sum(np.exp(chunk - ref[..., None]), axis=-1)
        top = new_top
        pos += block
    last = np.where(top > -np.inf, top, 0.0)
    num = np.exp(data - last[..., None])
    out = np.zeros_like(num)
    np.divide(num, total[..., None], out=out, where=total[..., None] > 0)
    return out
'''

# mutant id -> (find, replace): one edit of CLEAN, the same bug as mutants.MUTANTS[id]
EDITS = OrderedDict([
    ("missing-rescale", ("total = total * np.exp(top - ref) + ", "total = total + ")),
    ("dropped-tail", ("while pos < width:", "while pos + block <= width:")),
    ("zero-init-max", ("top = np.full(data.shape[:-1], -np.inf)", "top = np.zeros(data.shape[:-1])")),
    ("global-max", ("np.max(chunk, axis=-1)", "np.max(chunk)")),
    ("unguarded-inf", ("ref = np.where(new_top > -np.inf, new_top, 0.0)", "ref = new_top")),
])


def source(kernel_id: str) -> str:
    """The hidden kernel ``kernel_id`` ("clean" or a mutant id) as source text."""
    if kernel_id == "clean":
        return CLEAN
    if kernel_id not in EDITS:
        raise ValueError("kernel_id must be 'clean' or one of %s, got %r" % (list(EDITS), kernel_id))
    find, replace = EDITS[kernel_id]
    if CLEAN.count(find) != 1:
        raise ValueError("hidden mutant %r: %r must occur exactly once in CLEAN" % (kernel_id, find))
    return CLEAN.replace(find, replace)
