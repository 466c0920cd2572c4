"""The break-it material: five one-line mutants, the weak suite's claimed misses, the kill
matrix computed live."""
from __future__ import annotations

import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

from .helpers import assert_passes, marker, statuses

pytestmark = marker("break-it")

mu = module("break-it", "mutants")


def test_each_mutant_changes_exactly_one_line():
    clean = mu.CLEAN_SOURCE.split("\n")
    for mid in mu.MUTANTS:
        mutated = mu.mutant_source(mid).split("\n")
        assert len(mutated) == len(clean)
        changed = [i for i, (a, b) in enumerate(zip(clean, mutated)) if a != b]
        assert len(changed) == 1, (mid, changed)


def test_clean_kernel_passes_the_full_hidden_suite():
    matrix = mu.kill_matrix(mu.load_suite(mu.HIDDEN_SUITE_SOURCE))
    assert set(matrix["clean"].values()) == {"pass"}, matrix["clean"]


def test_every_mutant_is_killed_by_the_hidden_suite():
    killers = mu.killers(mu.kill_matrix(mu.load_suite(mu.HIDDEN_SUITE_SOURCE)))
    assert list(killers) == list(mu.MUTANTS)
    assert all(killers[m] for m in killers), killers


def test_mutants_differ_in_which_tests_catch_them():
    killers = mu.killers(mu.kill_matrix(mu.load_suite(mu.HIDDEN_SUITE_SOURCE)))
    sets = [frozenset(t) for t in killers.values()]
    assert len(set(sets)) == len(sets), killers


def test_weak_suite_misses_exactly_the_claimed_mutants():
    matrix = mu.kill_matrix(mu.load_suite(mu.WEAK_SUITE_SOURCE))
    assert set(matrix["clean"].values()) == {"pass"}
    missed = tuple(m for m, t in mu.killers(matrix).items() if not t)
    assert missed == mu.WEAK_SUITE_MISSES


def test_any_exception_kills_and_table_marks_it():
    def boom(softmax):
        raise ValueError("x")
    matrix = mu.kill_matrix({"test_boom": boom})
    assert matrix["clean"]["test_boom"].startswith("ValueError")
    table = mu.matrix_table(matrix)
    assert table["columns"] == ["kernel", "test_boom"]
    assert table["rows"][0][1].startswith("FAILS") and table["rows"][1][1] == "killed"


# -- independent correct solutions, written differently from the folder's -------------------

PREDICT = """
weak = ["test_matches_softmax", "test_rows_sum_to_one", "test_shape_and_range"]
prediction = {mutant: [] for mutant in
              ("missing-rescale", "dropped-tail", "zero-init-max", "global-max", "unguarded-inf")}
prediction["missing-rescale"] += weak[:2]          # the max grows inside the row of randn
prediction["dropped-tail"].append(weak[1])        # only N = 30 is ragged
"""

# one test per property, comparing with np.testing against a plain softmax of float64 values
BREAK = """
import numpy as np


def _plain(x):
    out = np.zeros_like(x)
    for i, row in enumerate(x):
        if np.isfinite(row).any():
            e = np.exp(row - row[np.isfinite(row)].max())
            out[i] = e / e.sum()
    return out


def _same(softmax, x, block):
    np.testing.assert_allclose(softmax(x, block=block), _plain(x), rtol=1e-9, atol=1e-12)


def test_everything_at_once(softmax):
    r = np.random.RandomState(5)
    _same(softmax, np.sort(r.randn(1, 21)), 4)          # growing max, ragged tail
    _same(softmax, r.randn(2, 16) - 800.0, 8)           # far below zero
    x = r.randn(2, 16)
    x[1] += 900.0                                        # rows of different scale
    _same(softmax, x, 8)
    y = r.randn(1, 16)
    y[0, :8] = -np.inf                                   # a masked first block
    _same(softmax, y, 8)
"""


# -- the Predict starter answers nothing: every mutant's entry is "not answered yet" ------------

def _starter_prediction():
    ns = {}
    exec(lab.exercise("break-it").step("predict").starter, ns)
    return ns["prediction"]


def test_the_predict_starter_holds_no_answer_only_a_placeholder_per_mutant():
    # [] is an answer ("no test kills it", right for three mutants): a starter holding it
    # would score those rows for a learner who never touched them.
    assert _starter_prediction() == {m: None for m in mu.MUTANTS}
    assert "[] if no test" in lab.exercise("break-it").step("predict").starter


def test_a_prediction_with_a_placeholder_left_is_refused_naming_the_unanswered_mutants():
    starter = lab.exercise("break-it").step("predict").starter
    one = starter.replace('"missing-rescale": None', '"missing-rescale": ["test_rows_sum_to_one"]')
    result = lab.grade("break-it", "predict", one)
    assert result["incomplete"] and not result["passed"]
    assert {c["status"] for c in result["checks"]} == {"not-run"}   # nothing of it is graded
    left = ("dropped-tail", "zero-init-max", "global-max", "unguarded-inf")
    assert all(m in result["refused"] for m in left) and "missing-rescale" not in result["refused"]
    assert "[] if no test" in result["refused"]
    last = starter.replace(": None", ': ["test_rows_sum_to_one"]', 4)   # one left: named alone
    result = lab.grade("break-it", "predict", last)
    assert result["incomplete"] and "unguarded-inf is still None" in result["refused"], result["refused"]
    # every entry answered, [] included: graded (and here wrong), not refused
    answered = lab.grade("break-it", "predict", starter.replace(": None", ": []"))
    assert not answered["incomplete"] and statuses(answered) == {"complete": "pass", "matrix": "fail"}


@pytest.mark.parametrize("step,code", [("predict", PREDICT), ("break", BREAK)])
def test_an_independent_solution_passes(step, code):
    assert_passes("break-it", step, code)


# -- the suite is judged on kernels it cannot recognise or count its way to -------------------

def test_hidden_kernels_behave_as_the_shown_ones_under_both_suites():
    hidden = module("break-it", "hidden")
    shown = mu.kernels()
    hidden_kernels = {kid: mu.load_kernel(hidden.source(kid)) for kid in shown}
    for suite in (mu.WEAK_SUITE_SOURCE, mu.HIDDEN_SUITE_SOURCE):
        tests = mu.load_suite(suite)
        assert mu.kill_matrix(tests, hidden_kernels) == mu.kill_matrix(tests, shown)
    for kid in shown:
        assert hidden.source(kid) != mu.mutant_source(kid) if kid != "clean" else True


RECOGNISE = """
import numpy as np

SHOWN = compile('''%s''', "<kernel>", "exec")
CLEAN_CODE = next(c for c in SHOWN.co_consts if hasattr(c, "co_code"))


def test_kill_whatever_is_not_the_shown_clean_kernel(softmax):
    assert softmax.__code__.co_code == CLEAN_CODE.co_code
""" % mu.CLEAN_SOURCE

COUNT = """
import numpy as np

calls = [0]


def test_only_the_first_kernel_passes(softmax):      # the clean kernel used to come first
    calls[0] += 1
    assert calls[0] == 1
"""


@pytest.mark.parametrize("code", [RECOGNISE, COUNT], ids=["recognise-code", "count-calls"])
def test_a_suite_that_recognises_or_counts_kernels_gets_nowhere(code):
    """Before: both killed all five mutants and passed the clean kernel (the kernels were the
    shown ones, handed over clean first, to one namespace)."""
    result = lab.grade("break-it", "break", code)
    assert not result["passed"]
    status = {c["id"]: c["status"] for c in result["checks"]}
    assert status["clean"] == "fail" or all(status[k] == "fail" for k in status if k.startswith("kills-"))
