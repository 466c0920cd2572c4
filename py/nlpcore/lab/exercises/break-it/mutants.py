"""The break-it exercise's material: a clean online-softmax kernel, five one-line mutants of
it, a deliberately weak test suite and the full hidden suite, and the kill matrix.

Each mutant is a plausible bug a learner writes, and they differ in which tests catch them:

============== ===================================================== ==========================
mutant         the changed line                                      caught by
============== ===================================================== ==========================
missing-rescale l is not multiplied by exp(m_old - m_new)            a row whose max grows
                                                                      after its first block
dropped-tail   the loop stops before a ragged last block              N not a multiple of block
zero-init-max  the running max starts at 0 instead of -inf            rows far below 0
global-max     the block max is taken over all rows, not per row      rows of different scales
unguarded-inf  exp(m - shift) with m = shift = -inf (NaN)             a row whose first block is
                                                                      masked (-inf)
============== ===================================================== ==========================

The weak suite kills only the first two (``WEAK_SUITE_MISSES`` names the others; a test holds
the claim to what :func:`kill_matrix` computes).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict, List

import numpy as np
import numpy.testing  # noqa: F401  loaded before grading: a suite that uses np.testing changes nothing

CLEAN_SOURCE = '''\
import numpy as np


def softmax(x, block=8):
    """Softmax over the last axis of x (rows, N), streaming over blocks of `block` columns."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    m = np.full(x.shape[:-1], -np.inf)                   # running max per row
    l = np.zeros(x.shape[:-1])                           # running sum of exp(x - m)
    for start in range(0, n, block):
        blk = x[..., start:start + block]                # (rows, <= block)
        m_new = np.maximum(m, blk.max(axis=-1))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)  # 0 where the row has seen no value
        l = l * np.exp(m - shift) + np.exp(blk - shift[..., None]).sum(axis=-1)
        m = m_new
    shift = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(x - shift[..., None])
    return np.divide(p, l[..., None], out=np.zeros_like(p), where=l[..., None] > 0)
'''

# id -> (what the bug is, line number in CLEAN_SOURCE (1-based), the line as mutated)
MUTANTS = OrderedDict([
    ("missing-rescale", ("forgets to rescale the running sum when the max grows", 14,
                         "        l = l + np.exp(blk - shift[..., None]).sum(axis=-1)")),
    ("dropped-tail", ("off by one on the ragged tail: the last partial block is skipped", 10,
                      "    for start in range(0, n - block + 1, block):")),
    ("zero-init-max", ("wrong initial max: starts at 0 instead of -inf", 8,
                       "    m = np.zeros(x.shape[:-1])                           # running max per row")),
    ("global-max", ("takes the block's max over all rows instead of per row", 12,
                    "        m_new = np.maximum(m, blk.max())")),
    ("unguarded-inf", ("shifts by -inf when a row has seen only -inf (exp(-inf + inf) = NaN)", 13,
                       "        shift = m_new")),
])

WEAK_SUITE_SOURCE = '''\
import numpy as np


def reference_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_matches_softmax(softmax):
    x = np.random.RandomState(0).randn(1, 32)
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_rows_sum_to_one(softmax):
    x = np.random.RandomState(1).randn(3, 30)
    assert np.allclose(softmax(x, block=8).sum(axis=-1), 1.0)


def test_shape_and_range(softmax):
    x = np.random.RandomState(2).randn(2, 16)
    p = softmax(x, block=4)
    assert p.shape == x.shape
    assert (p >= 0).all() and (p <= 1).all()
'''

HIDDEN_SUITE_SOURCE = WEAK_SUITE_SOURCE + '''

def test_ragged_tail(softmax):
    x = np.random.RandomState(3).randn(2, 21)
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_very_negative(softmax):
    x = np.random.RandomState(4).randn(2, 20) - 800.0
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_rows_of_different_scale(softmax):
    x = np.random.RandomState(5).randn(2, 16)
    x[1] -= 1000.0
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_masked_first_block(softmax):
    x = np.random.RandomState(6).randn(2, 24)
    x[0, :8] = -np.inf
    assert np.allclose(softmax(x, block=8), reference_softmax(x))


def test_fully_masked_row_is_zero(softmax):
    x = np.random.RandomState(7).randn(2, 12)
    x[1] = -np.inf
    p = softmax(x, block=4)
    assert not np.isnan(p).any()
    assert (p[1] == 0).all()


def test_large_values(softmax):
    x = np.random.RandomState(8).randn(2, 20) + 1000.0
    assert np.allclose(softmax(x, block=8), reference_softmax(x))
'''

WEAK_SUITE_MISSES = ("zero-init-max", "global-max", "unguarded-inf")


def mutant_source(mutant_id: str) -> str:
    """CLEAN_SOURCE with the mutant's one line replaced."""
    if mutant_id not in MUTANTS:
        raise ValueError("mutant_id must be one of %s, got %r" % (list(MUTANTS), mutant_id))
    _, line_no, new_line = MUTANTS[mutant_id]
    lines = CLEAN_SOURCE.split("\n")
    lines[line_no - 1] = new_line
    return "\n".join(lines)


def mutant_lines() -> List[dict]:
    """Each mutant as {id, what, line, before, after} for the page."""
    lines = CLEAN_SOURCE.split("\n")
    return [{"id": mid, "what": what, "line": n, "before": lines[n - 1], "after": new}
            for mid, (what, n, new) in MUTANTS.items()]


def load_kernel(source: str) -> Callable:
    """The ``softmax`` that ``source`` defines (the clean kernel or a mutant)."""
    ns = {"__name__": "kernel"}
    exec(compile(source, "<kernel>", "exec"), ns)
    return ns["softmax"]


def kernels() -> "OrderedDict[str, Callable]":
    """'clean' and every mutant, as callables softmax(x, block=8)."""
    out = OrderedDict([("clean", load_kernel(CLEAN_SOURCE))])
    for mid in MUTANTS:
        out[mid] = load_kernel(mutant_source(mid))
    return out


def tests_in(namespace: dict) -> "OrderedDict[str, Callable]":
    """The functions named test_* in a namespace, in definition order."""
    return OrderedDict((name, fn) for name, fn in namespace.items()
                       if name.startswith("test_") and callable(fn))


def load_suite(source: str) -> "OrderedDict[str, Callable]":
    ns = {"__name__": "suite"}
    exec(compile(source, "<suite>", "exec"), ns)
    return tests_in(ns)


def outcome(test: Callable, kernel: Callable) -> str:
    """'pass' or why the test failed ('AssertionError', 'ValueError: ...'). Anything a test
    raises counts as failing, SystemExit and other BaseExceptions included (they never stop
    the matrix)."""
    with np.errstate(all="ignore"):
        try:
            test(kernel)
        except AssertionError:
            return "AssertionError"
        except BaseException as err:  # any exception counts as the test failing (killing)
            return "%s: %s" % (type(err).__name__, err)
    return "pass"


def kill_matrix(tests: Dict[str, Callable], kernel_map: Dict[str, Callable] = None) -> dict:
    """{kernel id: {test name: outcome}} for every kernel (clean and mutants) × test."""
    kernel_map = kernels() if kernel_map is None else kernel_map
    return OrderedDict((kid, OrderedDict((name, outcome(t, k)) for name, t in tests.items()))
                       for kid, k in kernel_map.items())


def killers(matrix: dict) -> Dict[str, List[str]]:
    """{mutant id: [tests that fail on it]} from a kill matrix (clean excluded)."""
    return OrderedDict((kid, [t for t, res in row.items() if res != "pass"])
                       for kid, row in matrix.items() if kid != "clean")


def matrix_table(matrix: dict) -> dict:
    """A kill matrix as {columns, rows} for the page: 'killed'/'survived' per cell."""
    tests = list(next(iter(matrix.values())).keys()) if matrix else []
    rows = []
    for kid, row in matrix.items():
        cells = []
        for t in tests:
            res = row[t]
            if kid == "clean":
                cells.append("pass" if res == "pass" else "FAILS: " + res)
            else:
                cells.append("survived" if res == "pass" else "killed")
        rows.append([kid] + cells)
    return {"columns": ["kernel"] + tests, "rows": rows}
