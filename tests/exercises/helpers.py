"""What the exercise tests share: grading a changed solution, and reading a grade."""
from __future__ import annotations

import pytest

from nlpcore import lab


def marker(ex_id: str):
    """The pytest marker of one exercise (registered in pyproject.toml): ex_<id, - as _>."""
    return getattr(pytest.mark, "ex_" + ex_id.replace("-", "_"))


def mutate(code: str, old, new) -> str:
    """``code`` with ``old`` replaced by ``new`` (or each of a tuple of olds by its new); each
    must occur exactly once."""
    if isinstance(old, tuple):
        for o, n in zip(old, new):
            code = mutate(code, o, n)
        return code
    assert code.count(old) == 1, "the wrong answer must change exactly one place: %r" % old
    return code.replace(old, new)


def graded(result):
    return [c for c in result["checks"] if c["status"] != "local"]


def statuses(result) -> dict:
    """{check id: status} of the graded (not local) checks."""
    return {c["id"]: c["status"] for c in graded(result)}


def check(result, check_id) -> dict:
    return next(c for c in result["checks"] if c["id"] == check_id)


def assert_passes(ex_id: str, step_id: str, code: str):
    """Every graded check passes, and the grade restored nothing (honest code)."""
    result = lab.grade(ex_id, step_id, code)
    failures = [c for c in graded(result) if c["status"] != "pass"]
    assert not failures, [(c["id"], c["message"][:400]) for c in failures]
    assert result["passed"] and result["restored"] == []
    return result
