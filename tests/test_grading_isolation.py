"""Grading is isolated from the code it grades (nlpcore.lab.session, nlpcore.lab.sandbox):
nothing a submission changes in the interpreter outlives its grade, expected values are computed
only after the learner's code is gone, BaseException from learner code is a failed check, and
the learner's printed output and traceback come back with the grade."""
from __future__ import annotations

import textwrap

import pytest

from nlpcore import lab
from nlpcore.lab import session

# Wrong answers that run (they return wrong values rather than raise), so only the comparison
# can fail them: after any mischief they must still fail, and the solutions still pass.
LATER = [
    ("online-softmax", "compose", "acc = alpha[:, None] * acc + p @ v[k0:k1]", "acc = acc + p @ v[k0:k1]"),
    ("online-softmax", "scratch", "return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)",
     "return m, l_a + l_b"),
    ("backward", "harden", "k1 = min(k0 + block_k, n_k)", "k1 = k0 + block_k - 1"),
    ("backward", "scratch", "ds = p * (dp - D[q0:q1, None])", "ds = p * dp"),
    ("triton", "port", "p = np.exp2(s - m_new[:, None])", "p = np.exp(s - m_new[:, None])"),
    ("break-it", "break", "    x[0, :8] = -np.inf\n", ""),
]

MISCHIEF = {
    "grader functions": """
        from nlpcore.lab import judging, model, verdict
        verdict.finish = lambda ex, st, checks, phase, judged_ms=0.0: {"passed": True, "checks": []}
        verdict._judged = lambda check, fn, *a, **k: model.result(check.id, check.title, "pass")
        judging.assert_close = lambda *a, **k: 0.0
    """,
    "numpy functions": """
        import numpy as np
        np.abs = lambda x, *a, **k: 0 * np.asarray(x, dtype=float)
        np.allclose = lambda *a, **k: True
        np.isnan = lambda x, *a, **k: np.zeros(np.shape(x), dtype=bool)
        np.testing.assert_allclose = lambda *a, **k: None
    """,
    "builtins": """
        import builtins
        builtins.max = lambda *a, **k: 0.0
        builtins.isinstance = lambda *a: True
        builtins.len = lambda x: 0
    """,
    "function code and defaults": """
        import nlpcore.tolerances as tol
        from nlpcore.lab import judging as fw
        tol.compare.__code__ = (lambda got, want, tol: None).__code__
        fw.assert_close.__defaults__ = ("float64", 1e9, 1e9, "")
        fw.assert_close.__kwdefaults__ = {"dtype": "float64", "atol": 1e9, "rtol": 1e9, "context": ""}
    """,
    "exercise objects and tables": """
        from nlpcore import lab, tolerances
        for ex in lab.exercises():
            for st in ex.steps:
                for c in st.checks:
                    object.__setattr__(c, "judge", lambda data: "fine")
                    object.__setattr__(c, "run", lambda ns: "fine")
        for tol in tolerances.GRADER.values():
            object.__setattr__(tol, "atol", 1e9)
        tolerances.GRADER["float64"] = tolerances.GRADER["float32"]
    """,
    "process state": """
        import sys, numpy as np, warnings
        np.seterr(all="raise")
        warnings.simplefilter("error")
        sys.setrecursionlimit(60)
        sys.settrace(lambda *a: None)
        sys.stdout = sys.stderr = None
    """,
    "sys.modules": """
        import sys, types
        fake = types.ModuleType("nlpcore.kernels.reference")
        fake.forward = lambda *a, **k: (0, 0)
        sys.modules["nlpcore.kernels.reference"] = fake
        sys.modules["nlpcore.lab.judging"] = fake
    """,
}


@pytest.mark.parametrize("name", sorted(MISCHIEF))
def test_a_submission_cannot_change_a_later_grade(name):
    code = textwrap.dedent(MISCHIEF[name]) + "\nstandard = 1.2e6\nflash = 3e5\n"
    first = lab.grade("online-softmax", "predict", code)
    assert first["restored"], "the grader saw nothing to undo after %s" % name
    for ex_id, step_id, old, new in LATER:
        step = lab.exercise(ex_id).step(step_id)
        assert step.solution.count(old) == 1
        wrong = lab.grade(ex_id, step_id, step.solution.replace(old, new))
        assert not wrong["passed"], (name, ex_id, step_id)
        assert lab.grade(ex_id, step_id, step.solution)["passed"], (name, ex_id, step_id)
    # and an honest grade has nothing to undo
    assert lab.grade("online-softmax", "predict", "standard = 1.2e6\nflash = 3e5\n")["restored"] == []


def test_mischief_inside_the_graded_function_does_not_reach_the_judge():
    """Patching while the checks call the learner's function (not only at load) is undone
    before any expected value is computed."""
    code = lab.exercise("online-softmax").step("compose").solution.replace(
        "    n_q, d = q.shape\n",
        "    import numpy\n    import nlpcore.kernels.reference as ref\n"
        "    ref.forward = lambda q, k, v, causal=False, **kw: (numpy.zeros((q.shape[0], v.shape[1])),"
        " numpy.zeros(q.shape[0]))\n"
        "    return numpy.zeros((q.shape[0], v.shape[1])), numpy.zeros(q.shape[0])\n    n_q, d = q.shape\n", 1)
    result = lab.grade("online-softmax", "compose", code)
    assert {c["status"] for c in result["checks"]} == {"fail"}


@pytest.mark.parametrize("exc", ["SystemExit(0)", "KeyboardInterrupt()", "GeneratorExit()",
                                 "SystemExit('bye')"])
def test_base_exceptions_are_failed_checks_not_crashes(exc):
    at_load = lab.grade("online-softmax", "predict", "standard = 1\nflash = 2\nraise %s\n" % exc)
    assert {c["status"] for c in at_load["checks"]} == {"error"}
    name = exc.split("(")[0]
    assert all(name in c["message"] and "not an ordinary error" in c["message"]
               for c in at_load["checks"])
    in_call = lab.grade("online-softmax", "compose",
                        "def attention(q, k, v, block_q, block_k, causal=False):\n"
                        "    raise %s\n" % exc)
    assert in_call["checks"] and all(c["status"] == "fail" and name in c["message"]
                                     for c in in_call["checks"])
    assert "line 2 of your code" in in_call["checks"][0]["message"]
    step = lab.exercise("online-softmax").step("compose")
    assert lab.grade("online-softmax", "compose", step.solution)["passed"]


def test_base_exception_in_a_break_it_test_kills_instead_of_stopping_the_matrix():
    code = ("def test_exits(softmax):\n    raise SystemExit(1)\n\n"
            "def test_passes(softmax):\n    pass\n")
    result = lab.grade("break-it", "break", code)
    clean = next(c for c in result["checks"] if c["id"] == "clean")
    assert clean["status"] == "fail" and "SystemExit" in clean["got"]


def test_the_learners_output_and_traceback_come_back():
    code = ("import sys\nprint('hello from the learner')\nsys.stderr.write('a warning\\n')\n"
            "def attention(q, k, v, block_q, block_k, causal=False):\n"
            "    print('called with', q.shape)\n"
            "    return helper(q)\n\n"
            "def helper(q):\n    return q[100000]\n")
    result = lab.grade("online-softmax", "compose", code)
    for key in ("passed", "checks", "stdout", "stderr", "traceback"):
        assert key in result
    assert result["stdout"].startswith("hello from the learner\ncalled with (37, 16)")
    assert result["stderr"] == "a warning\n"
    trace = result["traceback"]
    assert trace.startswith("Traceback") and "IndexError" in trace
    assert 'File "<your code>", line 6, in attention' in trace
    assert 'File "<your code>", line 9, in helper' in trace
    assert "session.py" not in trace                      # the grader's frames are left out
    clean = lab.grade("online-softmax", "compose", lab.exercise("online-softmax").step("compose").solution)
    assert clean["stdout"] == clean["stderr"] == clean["traceback"] == ""


def test_output_is_capped():
    result = lab.grade("online-softmax", "predict", "print('x' * 100000)\nstandard = 1\nflash = 2\n")
    assert len(result["stdout"]) == session.OUTPUT_LIMIT


def test_stopping_tracemalloc_does_not_hide_memory():
    code = lab.exercise("online-softmax").step("compose").solution.replace(
        "    n_q, d = q.shape\n", "    import tracemalloc\n    tracemalloc.stop()\n    n_q, d = q.shape\n", 1)
    result = lab.grade("online-softmax", "compose", code)
    tiled = next(c for c in result["checks"] if c["id"] == "tiled")
    assert tiled["status"] == "fail" and "tracemalloc" in tiled["message"]


def test_refused_kernel_message_says_why():
    code = ("from nlpcore.kernels import reference\n"
            "def attention(q, k, v, block_q, block_k, causal=False):\n"
            "    try:\n        return reference.forward(q, k, v, causal=causal)\n"
            "    except Exception:\n        return None\n")                 # catching does not help
    result = lab.grade("online-softmax", "compose", code)
    for check in result["checks"]:
        assert check["status"] == "fail"
        assert "nlpcore.kernels.reference.forward" in check["message"]
        assert "this step teaches you to write it" in check["message"]


def test_the_grader_may_still_use_the_library_while_a_step_refuses_it():
    """The refusal is for the learner's calls only: the backward step hands the learner o and
    lse from flash_np and compares with reference, both refused to the learner."""
    step = lab.exercise("backward").step("scratch")
    assert "nlpcore.kernels.flash_np" in step.refuse and "nlpcore.kernels.reference" in step.refuse
    assert lab.grade("backward", "scratch", step.solution)["passed"]


def test_snapshot_restore_undoes_each_kind_of_change():
    snap = session.pristine()
    import numpy as np
    from nlpcore.kernels import reference
    original = (np.abs, reference.forward.__code__, reference.forward.__defaults__)
    np.abs = None
    reference.forward.__code__ = (lambda: None).__code__
    reference.forward.__defaults__ = (True,)
    changed = snap.restore()
    assert (np.abs, reference.forward.__code__, reference.forward.__defaults__) == original
    assert "module numpy" in changed and any("forward" in c for c in changed)
    assert snap.restore() == []


@pytest.mark.parametrize("reach", ["import gc\n_ = gc.get_objects()\n",
                                   "import sys\nsys.addaudithook(lambda event, args: None)\n"])
def test_reaching_past_the_snapshot_is_reported(reach):
    """What the snapshot cannot undo is at least seen (audit events), so the page can replace
    its worker; honest code reports nothing."""
    result = lab.grade("online-softmax", "predict", reach + "standard = 1.2e6\nflash = 3e5\n")
    assert any(r.startswith("audited: ") for r in result["restored"]), result["restored"]
