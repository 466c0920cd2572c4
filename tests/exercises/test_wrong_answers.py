"""Every exercise folder's named wrong answers (``<id>/wrong_answers.py``): each row's changed
solution fails the checks it names, and the grade as a whole fails. One test for all folders;
a row's id is ``<exercise>/<step>/<name>``, so adding a row renames nothing."""
from __future__ import annotations

import pytest

from nlpcore import lab
from nlpcore.lab.exercises import discover, module

from .helpers import marker, mutate, statuses


def _rows():
    for ex_id, _ in discover():
        rows = module(ex_id, "wrong_answers").WRONG_ANSWERS
        for row in rows:
            yield pytest.param(ex_id, row, id="%s/%s/%s" % (ex_id, row.step, row.name),
                               marks=marker(ex_id))


ROWS = list(_rows())


def test_every_folder_has_named_wrong_answers_with_unique_ids():
    ids = [p.id for p in ROWS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert {p.values[0] for p in ROWS} == {ex_id for ex_id, _ in discover()}


@pytest.mark.parametrize("ex_id,row", ROWS)
def test_wrong_answer_fails_the_checks_it_names(ex_id, row):
    step = lab.exercise(ex_id).step(row.step)
    result = lab.grade(ex_id, row.step, mutate(step.solution, row.old, row.new))
    assert not result["passed"]
    status = statuses(result)
    must_fail = set(status) if row.fails is None else set(row.fails)
    assert must_fail <= set(status), (must_fail - set(status))
    assert {c for c in must_fail if status[c] not in ("pass", "pending")} == must_fail, status
