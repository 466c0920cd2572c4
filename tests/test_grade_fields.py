"""Fields of a grade that the exercise page reads as data instead of parsing messages:
``problem`` (what stops the learner's code from loading: kind, line, error, and ``newer`` when a
newer Python than the page's 3.8 would take the line), ``incomplete`` (a refused Predict answer)
and ``completeness`` on the checks that ask whether every part of an answer is there."""
from __future__ import annotations

from nlpcore import lab
from nlpcore.lab import newer_python, verdict

EX = lab.exercise("online-softmax")


def _grade(step, code):
    return verdict.grade(EX, step, code, seed=3)


def test_a_line_that_needs_a_newer_python_is_named_with_its_version():
    g = _grade("scratch", "import numpy as np\ntype Pair = tuple\n")   # 3.12 syntax: fails on 3.8 to 3.11
    assert g["problem"] == {"kind": "compile", "line": 2, "error": g["problem"]["error"],
                            "newer": {"what": "type X = ... aliases", "version": "3.12"}}
    assert g["problem"]["error"].startswith("SyntaxError")


def test_code_that_raises_while_loading_names_its_line_and_no_newer_python():
    g = _grade("scratch", "x = 1\ny = undefined_name\n")
    assert g["problem"] == {"kind": "load", "line": 2, "error": "NameError: name 'undefined_name' is not defined",
                            "newer": None}
    assert _grade("scratch", EX.step("scratch").solution)["problem"] is None


def test_newer_constructs_are_found_by_line_or_by_error():
    assert newer_python.needs("    match x:", "SyntaxError: invalid syntax")["version"] == "3.10"
    assert newer_python.needs("z = a | b", "TypeError: unsupported operand type(s) for |: 'dict' and 'dict'") == \
        {"what": "dict merges with |", "version": "3.9"}
    assert newer_python.needs("x = 1", "NameError: name 'y' is not defined") is None


def test_an_incomplete_prediction_is_flagged_and_its_completeness_checks_marked():
    predict = next(s for s in EX.steps if s.kind == "Predict")
    g = _grade(predict.id, predict.starter)
    assert g["incomplete"] is True and g["refused"]
    assert any(c.get("completeness") for c in g["checks"])
    assert all(c.get("completeness") is None for c in g["checks"] if c["id"] not in verdict.COMPLETENESS_CHECKS)
    assert _grade(predict.id, predict.solution)["incomplete"] is False
