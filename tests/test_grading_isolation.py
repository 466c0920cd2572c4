"""Grading is isolated from the code it grades (nlpcore.lab.session, nlpcore.lab.sandbox):
nothing a submission changes in the interpreter outlives its grade, expected values are computed
only after the learner's code is gone, BaseException from learner code is a failed check, and
the learner's printed output and traceback come back with the grade."""
from __future__ import annotations

import textwrap

import pytest

from nlpcore import lab
from nlpcore.lab import sandbox, session

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
    snap = sandbox.Snapshot.take()     # (the grader's own snapshot is sealed: not returned)
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


# -- the library's originals are out of the learner's reach (review of the graders, defects 1, 2, 5)

ORIGINALS_THROUGH = {
    "the guards' closures": """
        import sys, types
        for name, module in list(sys.modules.items()):
            if name.startswith("nlpcore.kernels"):
                for attr, f in list(vars(module).items()):
                    for cell in getattr(f, "__closure__", None) or ():
                        if isinstance(cell.cell_contents, types.FunctionType):
                            setattr(module, attr, cell.cell_contents)
    """,
    "the grader's snapshot": """
        import sys
        snap = sys.modules["nlpcore.lab.session"]._grader.snapshot
        for ns, saved, volatile in snap.namespaces:
            if str(saved.get("__name__", "")).startswith("nlpcore.kernels"):
                ns.update(saved)
    """,
    "the guards' code": """
        import types
        from nlpcore.kernels import flash_np
        for c in flash_np.forward.__code__.co_consts:
            if isinstance(c, tuple) and c and isinstance(c[0], types.FunctionType):
                flash_np.forward = c[0]
    """,
}


@pytest.mark.parametrize("way", sorted(ORIGINALS_THROUGH))
def test_the_originals_of_refused_kernels_are_out_of_reach(way):
    code = textwrap.dedent(ORIGINALS_THROUGH[way]) + (
        "def attention(q, k, v, block_q, block_k, causal=False):\n"
        "    from nlpcore.kernels import flash_np\n"
        "    return flash_np.forward(q, k, v, causal=causal, block_q=block_q, block_k=block_k)\n")
    result = lab.grade("online-softmax", "compose", code)
    assert not result["passed"]
    assert all(c["status"] != "pass" for c in result["checks"]), result["checks"]


def test_a_refused_file_read_through_a_link_is_refused(tmp_path):
    from nlpcore.kernels import reference
    link = tmp_path / "ref.py"
    link.symlink_to(reference.__file__)
    code = ("import types\n"
            "src = open(%r).read()\n"
            "mod = types.ModuleType('mine')\n"
            "mod.__dict__['__name__'] = 'mine'\n"
            "exec(compile(src.replace('from .', 'from nlpcore.kernels.'), 'mine.py', 'exec'), mod.__dict__)\n"
            "def attention(q, k, v, block_q, block_k, causal=False):\n"
            "    return mod.forward(q, k, v, causal=causal)\n" % str(link))
    result = lab.grade("online-softmax", "compose", code)
    assert all(c["status"] != "pass" for c in result["checks"]), result["checks"]
    assert "reference.py" in result["checks"][0]["message"]


# -- the tiled check's memory reading cannot be reset or patched (review defects 3, 4)

FULL_SCORES = """
import numpy as np, tracemalloc
def attention(q, k, v, block_q, block_k, causal=False):
    n_q, d = q.shape
    n_k = k.shape[0]
    s = q @ k.T / np.sqrt(d)
    if causal:
        s = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None], s, -np.inf)
    m = s.max(1)
    p = np.exp(s - m[:, None])
    l = p.sum(1)
    o, lse = p @ v / l[:, None], m + np.log(l)
    del s, p
    HIDE
    return o, lse
"""

HIDE_THE_PEAK = {
    "reset_peak": "tracemalloc.reset_peak()",
    "reset_peak of _tracemalloc": "import _tracemalloc; _tracemalloc.reset_peak()",
    "clear_traces": "tracemalloc.clear_traces()",
    "a fresh _tracemalloc": ("import sys; sys.modules.pop('_tracemalloc', None); "
                             "import _tracemalloc; _tracemalloc.reset_peak()"),
    "a fresh _tracemalloc from _imp": (
        "import _imp, importlib.machinery, sys; _was = sys.modules['_tracemalloc']; "
        "_fresh = _imp.create_builtin(importlib.machinery.ModuleSpec('_tracemalloc', "
        "importlib.machinery.BuiltinImporter)); sys.modules['_tracemalloc'] = _was; "
        "_fresh.reset_peak()"),
    "a self-undoing patch": (
        "_orig = tracemalloc.get_traced_memory\n"
        "    def _fake():\n"
        "        tracemalloc.get_traced_memory = _orig\n"
        "        return _orig()[0], _orig()[0]\n"
        "    tracemalloc.get_traced_memory = _fake"),
}


@pytest.mark.parametrize("way", sorted(HIDE_THE_PEAK))
def test_the_tiled_check_cannot_be_fooled_about_memory(way):
    import tracemalloc
    if "reset_peak" in HIDE_THE_PEAK[way] and not hasattr(tracemalloc, "reset_peak"):
        pytest.skip("tracemalloc.reset_peak is new in Python 3.9")
    result = lab.grade("online-softmax", "compose", FULL_SCORES.replace("HIDE", HIDE_THE_PEAK[way]))
    tiled = next(c for c in result["checks"] if c["id"] == "tiled")
    assert not result["passed"] and tiled["status"] != "pass", tiled
    assert lab.grade("online-softmax", "compose",
                     lab.exercise("online-softmax").step("compose").solution)["passed"]


# -- a grade ends for the reason it ended (review defects 7, 8)

def _solution_with(prefix: str) -> str:
    return prefix + lab.exercise("online-softmax").step("compose").solution


def test_a_grandchild_is_refused_and_the_next_grade_works():
    """A process forked to hold the pipes (review 1, defect 7) is refused before it exists now
    (review 2, D2): the grade fails at once, naming the refusal, and the next grade passes."""
    import time
    start = time.monotonic()
    result = lab.grade("online-softmax", "compose", _solution_with(
        "import os, time\nif os.fork() == 0:\n    time.sleep(120)\n    os._exit(0)\n"))
    message = result["checks"][0]["message"]
    assert not result["passed"] and "os.fork is refused" in message, message
    assert time.monotonic() - start < 20
    assert lab.grade("online-softmax", "compose",
                     lab.exercise("online-softmax").step("compose").solution)["passed"]


def test_deep_recursion_is_reported_as_such():
    result = lab.grade("online-softmax", "compose", _solution_with(
        "import sys\nsys.setrecursionlimit(10 ** 6)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n"))
    message = result["checks"][0]["message"]
    assert not result["passed"] and "time limit" not in message
    assert "recursion" in message, message


def test_allocating_past_the_memory_limit_fails_naming_it():
    result = lab.grade("online-softmax", "compose", _solution_with(
        "import numpy as np\n_hog = [np.empty(1 << 28) for _ in range(64)]\n"))
    message = result["checks"][0]["message"]
    assert not result["passed"] and "MemoryError" in message and "GiB" in message, message
    assert "time limit" not in message


def test_printing_a_traceback_is_not_introspection():
    """Honest debugging reads frames through the traceback module: not reported, the grade
    passes (the audit hook reports only code objects of nlpcore read by learner code)."""
    result = lab.grade("online-softmax", "compose", _solution_with(
        "import traceback\ntry:\n    raise ValueError('a note')\nexcept ValueError:\n"
        "    traceback.print_exc()\n    traceback.print_stack()\n"))
    assert result["passed"], (result["restored"], result["checks"])
    assert "a note" in result["stderr"]


def test_an_in_process_grade_after_the_zygote_was_replaced_still_passes():
    """The zygote's handle (lab/runner.py) is the grader's, not interpreter state: replacing the
    zygote between two in-process grades (the page's path, web.collect) must not read as
    "your code changed the grader's interpreter" (it did, in a full test run)."""
    from nlpcore.lab import runner, verdict, wire
    from nlpcore.web import exercises as web
    ex = lab.exercise("online-softmax")
    step = ex.step("scratch")
    grade = lambda: verdict.judge(ex, step.id, wire.unpack(web.collect(ex.id, step.id, step.solution, seed=3)["phase"]))
    assert grade()["passed"]
    runner._stop_zygote()
    assert lab.grade("online-softmax", "scratch", step.solution)["passed"]   # starts a new zygote
    assert grade()["passed"]
