"""The kernels Break it's suite is judged on: the clean kernel and its five bugs, written
differently from the ones the page shows (another loop, other names), so a suite that
recognises the shown kernels by their code, their names or their order learns nothing about
these. Each mutant is the same bug as the shown mutant of that id, as one edit of
:data:`CLEAN`; tests/exercises/test_break_it.py holds both suites' matrices equal.

The suite never holds these kernels themselves. :func:`for_suite` hands it six *stand-ins*
made afresh for every grade, in an order drawn from the operating system's entropy (never
from the grade's seed, which the learner's code can read), and created in that order: each is
the same function ``softmax(x, block=8)`` -- one name, qualname, module, docstring, defaults,
no closure, no attributes -- whose kernel sits sealed in its code's constants
(:func:`nlpcore.refusal.seal`), where only an audited read of ``__code__`` (which fails the
grade) reaches it. A stand-in copies its inputs into a plain float64 array and an int before
the kernel runs, and the kernel runs with NumPy's error handling off, so no code of the
learner's runs while a hidden kernel's frame is on the stack, and an error leaves with a fresh
exception that carries no traceback into the kernel. The kernels were compiled when this
module was imported, before any learner code ran, so no ``compile`` of them happens during a
grade. :func:`identify` (the grader's, after the suite ran; refused to learner code as this
exercise's own function) reads which kernel a stand-in is.
"""
from __future__ import annotations

import operator
import os
from collections import OrderedDict

import numpy as np

from nlpcore import refusal

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


KERNEL_FILE = "<break-it kernel>"    # the hidden kernels' code file name (nlpcore.refusal audits it)
_SEALED = "\0break-it: the hidden kernel"  # stands for (kernel, id) in a stand-in's code
_ENTROPY = "\0break-it: entropy"           # stands for os.urandom in the shuffle's code
_AT = 0


def _compiled(kernel_id: str):
    ns = {"__name__": "kernel", "np": np}
    exec(compile(source(kernel_id), KERNEL_FILE, "exec"), ns)
    return ns["softmax"]


_KERNELS = OrderedDict((kid, _compiled(kid)) for kid in ["clean"] + list(EDITS))


def _plain_error(err: BaseException) -> BaseException:
    """A fresh exception of ``err``'s type and message, with no traceback into the kernel."""
    try:
        fresh = type(err)(*err.args)
    except Exception:  # an exception type that cannot be rebuilt from its args
        fresh = RuntimeError("%s: %s" % (type(err).__name__, err))
    fresh.__traceback__ = None
    return fresh


def softmax(x, block=8):
    """Softmax over the last axis of x (rows, N), streaming over blocks of `block` columns."""
    kernel = ("\0break-it: the hidden kernel", None)[_AT][0]
    values = np.array(x, dtype=np.float64)      # a plain copy: the kernel sees no object of yours
    size = int.__index__(operator.index(block))
    error = None
    with np.errstate(all="ignore"):
        try:
            out = kernel(values, size)
        except Exception as err:  # re-raised below, outside this handler: no chained context
            error = _plain_error(err)
    if error is not None:
        raise error
    return out


# The stand-ins' template, kept in a tuple: a module-level function of this (the exercise's own,
# refused) module would be replaced by a refusal guard while a grade runs.
_TEMPLATE = (softmax,)
del softmax


def _order(count: int) -> list:
    """0..count-1 shuffled with bytes from the operating system (sealed: os.urandom as it was
    when this module was imported)."""
    entropy = ("\0break-it: entropy", None)[_AT]
    order = list(range(count))
    for i in range(count - 1, 0, -1):           # Fisher-Yates
        j = int.from_bytes(entropy(8), "little") % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


_order = refusal.seal(_order, _ENTROPY, os.urandom)


def for_suite() -> list:
    """Six stand-ins (the clean kernel and the five mutants), made now, in a random order."""
    kernels = list(_KERNELS.items())
    out = []
    for i in _order(len(kernels)):
        kernel_id, kernel = kernels[i]
        out.append(refusal.seal(_TEMPLATE[0], _SEALED, (kernel, kernel_id)))
    return out


def identify(stand_in) -> str:
    """Which kernel a stand-in of :func:`for_suite` runs ("clean" or a mutant id)."""
    sealed = [c for c in stand_in.__code__.co_consts if isinstance(c, tuple) and len(c) == 2
              and isinstance(c[0], tuple) and len(c[0]) == 2 and c[0][1] in _KERNELS]
    if len(sealed) != 1 or _KERNELS.get(sealed[0][0][1]) is not sealed[0][0][0]:
        raise ValueError("stand_in must come from for_suite()")
    return sealed[0][0][1]
