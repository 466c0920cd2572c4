"""The exercise page's door returns what the learner's code printed (grade's stdout, stderr,
traceback, from nlpcore.lab.session's isolation) and runs an ungraded scratch cell against the learner's definitions
(nlpcore.web.exercises.scratch); a Predict step's wrong kill-matrix row list comes with
`parts` so the page can say which rows are wrong without the answer."""
from __future__ import annotations

import pytest

from nlpcore import lab
from nlpcore.web import call

STUBS = "def combine(a, b):\n    return a\ndef online_softmax(x, block):\n    return x\n"


def grade(code, exercise="online-softmax", step="scratch"):
    return call("exercises.grade", {"exercise": exercise, "step": step, "code": code})


def test_grade_returns_what_the_learner_printed():
    out = grade("import sys\nprint('loading')\nprint('warn', file=sys.stderr)\n"
                "def from_block(x):\n    print('called with', x.shape)\n    return 1, 2\n" + STUBS)
    assert out["stdout"].startswith("loading\ncalled with")
    assert out["stderr"] == "warn\n"
    assert out["traceback"] == ""
    assert not out["passed"]


def test_grade_returns_the_traceback_of_code_that_fails_to_load():
    out = grade("print('before')\nvalues = [1, 2]\nvalues[5]\n")
    assert {c["status"] for c in out["checks"]} == {"error"}
    assert out["stdout"] == "before\n"
    trace = out["traceback"]
    assert trace.startswith("Traceback") and '"<your code>", line 3' in trace
    assert trace.rstrip().endswith("IndexError: list index out of range")
    assert "session.py" not in trace and "exercises.py" not in trace  # only the learner's frames


def test_a_syntax_error_is_named_in_every_check():
    out = grade("def f(:\n    pass\n")
    assert all("does not compile" in c["message"] and "line 1" in c["message"]
               for c in out["checks"])


def test_passing_code_prints_nothing_and_has_no_traceback():
    step = lab.exercise("online-softmax").step("scratch")
    out = grade(step.solution)
    assert out["passed"] and out["stdout"] == "" and out["stderr"] == "" and out["traceback"] == ""


def test_output_is_clipped():
    from nlpcore.lab import session
    out = grade("print('x' * 50000)\n")
    assert len(out["stdout"]) == session.OUTPUT_LIMIT


def scratch(definitions, code, exercise="online-softmax", step="scratch"):
    return call("exercises.scratch", {"exercise": exercise, "step": step,
                                      "definitions": definitions, "code": code})


def test_scratch_runs_code_against_the_definitions_and_shows_the_last_value():
    out = scratch("def twice(x):\n    return 2 * x\nprint('defined')\n",
                  "import numpy as np\nprint(twice(21))\ntwice(np.arange(3))")
    assert out["stdout"] == "defined\n42\n"
    assert out["value"] == "array([0, 2, 4])"
    assert out["traceback"] == ""


def test_scratch_is_isolated_like_a_grade():
    out = scratch("import sys\nsys.modules['nlpcore.kernels.reference'] = None\n", "1 + 1")
    assert out["value"] == "2" and out["restored"]  # the change was undone, and reported
    import nlpcore.kernels.reference as reference
    assert reference is not None and hasattr(reference, "forward")
    assert scratch("x = 1", "x")["restored"] == []


def test_scratch_statement_last_line_has_no_value():
    assert scratch("", "x = 1")["value"] is None
    assert scratch("", "None")["value"] is None


def test_scratch_traceback_runs_through_both_cells():
    out = scratch("def f(x):\n    return x / 0\n", "f(1)")
    trace = out["traceback"]
    assert '"<scratch>", line 1' in trace and '"<your code>", line 2' in trace
    assert "return x / 0" in trace and trace.rstrip().endswith("ZeroDivisionError: division by zero")


def test_scratch_refuses_a_shader_step_and_bad_arguments():
    with pytest.raises(ValueError, match="scratch cell runs Python"):
        scratch("", "1", exercise="wgsl", step="scratch")
    with pytest.raises(TypeError, match="definitions"):
        call("exercises.scratch", {"exercise": "online-softmax", "step": "scratch",
                                   "definitions": 3, "code": ""})


def test_break_it_prediction_says_which_rows_are_wrong():
    from nlpcore.lab.exercises import module
    mutants = list(module("break-it", "mutants").MUTANTS)
    out = grade("prediction = %r\n" % {m: [] for m in mutants}, exercise="break-it", step="predict")
    matrix = next(c for c in out["checks"] if c["id"] == "matrix")
    assert matrix["status"] == "fail"
    assert set(matrix["parts"]) == set(mutants)
    assert set(matrix["parts"].values()) == {"right", "wrong"}  # survivors right, killed wrong


def test_compose_lse_check_reports_lse_not_o():
    """Issue 16, 4.8: with o right and lse wrong, only the lse check fails, naming lse; with o
    wrong and lse right, the lse check passes."""
    solution = lab.exercise("online-softmax").step("compose").solution
    wrong_lse = solution + ("\n_right = attention\n"
                            "def attention(*args, **kwargs):\n"
                            "    o, lse = _right(*args, **kwargs)\n"
                            "    return o, lse + 1.0\n")
    out = {c["id"]: c for c in grade(wrong_lse, step="compose")["checks"]}
    assert out["ragged"]["status"] == "pass" and out["causal"]["status"] == "pass"
    assert out["lse"]["status"] == "fail" and ": lse differs" in out["lse"]["message"], out["lse"]
    wrong_o = solution + ("\n_right = attention\n"
                          "def attention(*args, **kwargs):\n"
                          "    o, lse = _right(*args, **kwargs)\n"
                          "    return o + 1.0, lse\n")
    out = {c["id"]: c for c in grade(wrong_o, step="compose")["checks"]}
    assert out["ragged"]["status"] == "fail" and out["lse"]["status"] == "pass"
