"""The break-it material: five one-line mutants, the weak suite's claimed misses, the kill
matrix computed live."""
from __future__ import annotations

from nlpcore.lab.exercises import module

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
