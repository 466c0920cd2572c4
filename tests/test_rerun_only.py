"""A grade's ``only`` (the exercise page's "Rerun this check alone"): the learner's phase runs
only the named checks (nlpcore.lab.session.collect), the judge judges only those, the grade never
passes the step, and a rerun with the grade's seed sees the same inputs."""
from __future__ import annotations

import pytest

from nlpcore import lab
from nlpcore.lab import session, verdict, wire
from nlpcore.web import exercises as web

EX = lab.exercise("online-softmax")
STEP = EX.step("scratch")
# l_a not rescaled: some checks fail, some pass
WRONG = STEP.solution.replace("return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)",
                              "return m, l_a + l_b * np.exp(m_b - s)")


def _grade(code, **options):
    return verdict.judge(EX, STEP.id, wire.unpack(web.collect(EX.id, STEP.id, code, **options)["phase"]))


def test_only_runs_the_named_check_in_both_phases():
    assert WRONG != STEP.solution
    full = _grade(WRONG, seed=11)
    failing = next(c for c in full["checks"] if c["status"] == "fail")
    phase = session.collect(EX, STEP.id, WRONG, 11, only=[failing["id"]])
    ran = set(phase["collected"]) | set(phase["verdicts"])
    assert [STEP.checks[i].id for i in ran] == [failing["id"]]
    alone = _grade(WRONG, only=[failing["id"]], seed=11)
    assert [c["id"] for c in alone["checks"]] == [failing["id"]]
    assert alone["checks"][0]["status"] == "fail" and alone["checks"][0]["message"] == failing["message"]
    assert alone["only"] == [failing["id"]] and alone["passed"] is False


def test_a_passing_check_alone_does_not_pass_the_step():
    first = STEP.checks[0].id
    alone = _grade(STEP.solution, only=[first])
    assert [c["status"] for c in alone["checks"]] == ["pass"] and alone["passed"] is False
    assert _grade(STEP.solution)["passed"] is True and "only" not in _grade(STEP.solution)


@pytest.mark.parametrize("only", [["no-such-check"], [], "slopes", [3]])
def test_only_names_checks_of_the_step(only):
    with pytest.raises(ValueError, match="only: "):
        web.collect(EX.id, STEP.id, STEP.solution, only=only)
