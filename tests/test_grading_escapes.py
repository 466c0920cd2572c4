"""A learner's code cannot reach the verdict (nlpcore.lab.runner, session, wire, refusal).

In CPython the learner's phase of a grade runs in a fresh Python process and the judge -- this
process -- never runs learner code. Each escape below tried to run learner code after the
interpreter's restore, during the judging, or to get the library's kernel despite the step's
refusal (issue 22): every one must end in a failed grade (never a wrong pass), and the next
grade in this same process must still pass the solution and fail a wrong answer.
"""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from nlpcore import lab
from nlpcore.lab import model, runner, session, verdict, wire

# Makes every later verdict in the process where it runs a pass: what the escapes try to run
# after the learner's phase, in the judge.
WIN = """
def _win(*args, **kwargs):
    import sys
    s, j, m = (sys.modules.get("nlpcore.lab." + n) for n in ("verdict", "judging", "model"))
    if s is not None:
        s._judged = lambda check, fn, *a, **k: m.result(check.id, check.title, "pass")
        s.finish = lambda ex, st, checks, phase, judged_ms=0.0: {"passed": True, "checks": [],
                                                                  "restored": []}
    if j is not None:
        j.relative_close = lambda *a, **k: "fine"
        j.assert_close = lambda *a, **k: 0.0
"""
WRONG_PREDICTION = "standard = 1.0\nflash = 2.0\n"   # far from both counts

ESCAPES = {
    "gc callback": "import gc\ngc.set_threshold(1)\ngc.callbacks.append(lambda phase, info: _win())\n",
    "__del__ in a cycle": textwrap.dedent("""
        class _Late:
            def __del__(self):
                _win()
        _x = _Late()
        _x.me = _x
        del _x
    """),
    "weakref callback": textwrap.dedent("""
        import weakref
        class _Box:
            pass
        _b = _Box()
        _b.me = _b
        _keep = weakref.ref(_b, lambda ref: _win())
        del _b
    """),
    "thread": textwrap.dedent("""
        import threading, time
        def _loop():
            for _ in range(200000):
                _win()
                time.sleep(0.0005)
        threading.Thread(target=_loop, daemon=True).start()
    """),
    "signal handler": textwrap.dedent("""
        import signal
        signal.signal(signal.SIGALRM, lambda *a: _win())
        signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    """),
    "atexit": "import atexit\natexit.register(_win)\n",
    "patch at once": "_win()\n",
}


def _next_grades_work():
    step = lab.exercise("online-softmax").step("predict")
    assert lab.grade("online-softmax", "predict", step.solution)["passed"]
    assert not lab.grade("online-softmax", "predict", WRONG_PREDICTION)["passed"]
    compose = lab.exercise("online-softmax").step("compose").solution
    wrong = compose.replace("acc = alpha[:, None] * acc + p @ v[k0:k1]", "acc = acc + p @ v[k0:k1]")
    assert not lab.grade("online-softmax", "compose", wrong)["passed"]


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_learner_code_left_behind_never_reaches_the_judge(name):
    result = lab.grade("online-softmax", "predict", WIN + ESCAPES[name] + WRONG_PREDICTION)
    assert not result["passed"], name
    assert {c["id"] for c in result["checks"] if c["status"] == "pass"} <= {"recorded"}, result
    _next_grades_work()


def test_the_judge_never_runs_the_learners_code(tmp_path):
    marker = tmp_path / "pid"
    code = "import os\nopen(%r, 'w').write(str(os.getpid()))\n" % str(marker) + WRONG_PREDICTION
    lab.grade("online-softmax", "predict", code)
    assert int(marker.read_text()) != os.getpid()


ATTENTION = "def attention(q, k, v, block_q, block_k, causal=False):\n"

# Ways to the library's kernel that the refusal must close, on a step that refuses it.
KERNEL_ESCAPES = {
    "reload": ("import importlib\nimport nlpcore.kernels.reference as ref\n" + ATTENTION
               + "    return importlib.reload(ref).forward(q, k, v, causal=causal)\n"),
    "spec_from_file_location": (
        "import importlib.util\nimport nlpcore.kernels.reference as ref\n" + ATTENTION
        + "    spec = importlib.util.spec_from_file_location('mine', ref.__file__)\n"
          "    mod = importlib.util.module_from_spec(spec)\n"
          "    spec.loader.exec_module(mod)\n"
          "    return mod.forward(q, k, v, causal=causal)\n"),
    "read the source": (
        "import nlpcore.kernels.reference as ref\n" + ATTENTION
        + "    ns = {'__name__': 'mine'}\n"
          "    exec(open(ref.__file__).read(), ns)\n"
          "    return ns['forward'](q, k, v, causal=causal)\n"),
    "original kept in the snapshot": (
        "import sys\nimport nlpcore.kernels.reference as ref\n"
        "_snap = getattr(sys.modules['nlpcore.lab.session']._grader, 'snapshot', None)\n"  # sealed
        "_orig = next((saved['forward'] for _, saved, _v in getattr(_snap, 'namespaces', ())\n"
        "              if saved.get('__name__') == 'nlpcore.kernels.reference'), ref.forward)\n"
        + ATTENTION
        + "    return _orig(q, k, v, causal=causal)\n"),
    "original in the guard's closure": (
        "import nlpcore.kernels.reference as ref\n" + ATTENTION
        + "    fn = next((c.cell_contents for c in (ref.forward.__closure__ or ())\n"  # none there:
          "               if getattr(c.cell_contents, '__name__', '') == 'forward'),\n"
          "              ref.forward)\n"                                   # the guard refuses
          "    return fn(q, k, v, causal=causal)\n"),
}


@pytest.mark.parametrize("name", sorted(KERNEL_ESCAPES))
def test_the_refused_kernel_stays_out_of_reach(name):
    result = lab.grade("online-softmax", "compose", KERNEL_ESCAPES[name])
    assert not result["passed"], name
    value_checks = [c for c in result["checks"] if c["id"] in ("ragged", "causal", "large", "lse")]
    assert all(c["status"] != "pass" for c in value_checks), (name, value_checks)
    assert any("refused" in c["message"] for c in value_checks), (name, value_checks)
    _next_grades_work()


class _Always(str):
    """A str that claims to equal anything."""

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0


def test_collected_values_arrive_as_exact_builtin_types():
    data = {"a": _Always("x"), "n": np.float64(2.5), "arr": np.arange(6, dtype=np.float32).reshape(2, 3),
            "t": (1, [True, None]), 3: float("-inf"), "failed": model.CheckFailed("m", got="g")}
    back = wire.unpack(wire.pack(data))
    assert type(back["a"]) is str and back["a"] == "x" and not back["a"] == "y"
    assert type(back["n"]) is float and back[3] == float("-inf")
    assert type(back["arr"]) is np.ndarray and back["arr"].dtype == np.float32
    assert back["arr"].tolist() == [[0, 1, 2], [3, 4, 5]] and back["t"] == (1, [True, None])
    assert isinstance(back["failed"], model.CheckFailed) and back["failed"].details == {"got": "g"}
    with pytest.raises(TypeError, match="function"):
        wire.pack({"f": lambda: 0})
    with pytest.raises(TypeError, match="dtype object"):
        wire.pack(np.array([object()]))


def test_a_str_subclass_cannot_rewrite_a_prediction():
    code = textwrap.dedent('''
        class _Always(str):
            def __eq__(self, other):
                return True
            def __hash__(self):
                return hash("test_matches_softmax")
        _t = [_Always("test_matches_softmax")]
        prediction = {m: list(_t) for m in ("missing-rescale", "dropped-tail", "zero-init-max",
                                            "global-max", "unguarded-inf")}
    ''')
    result = lab.grade("break-it", "predict", code)
    assert not result["passed"]
    _next_grades_work()


@pytest.mark.parametrize("code,cause", [
    ("while True:\n    pass\n", "time limit"),
    ("import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nf(0)\n", ""),
    ("import os\nos._exit(0)\n", "exit status 0"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "SIGKILL"),
    ("import os\nwhile True:\n    os.write(1, b'x' * 65536)\n", "time limit"),
])
def test_the_grader_always_answers(monkeypatch, code, cause):
    monkeypatch.setattr(runner, "TIME_LIMIT_S", 4.0)
    result = lab.grade("online-softmax", "predict", code + WRONG_PREDICTION)
    assert not result["passed"]
    assert all(c["status"] == "error" for c in result["checks"]), result["checks"]
    message = result["checks"][0]["message"]
    assert cause in message and ("time limit" in message or "process" in message
                                 or "recursion went too deep" in message), message
    assert len(result["stderr"]) <= runner.OUTPUT_BYTES + 100
    _next_grades_work()


def test_output_floods_are_cut():
    result = lab.grade("online-softmax", "predict",
                       "for _ in range(20000):\n    print('x' * 1000)\n" + WRONG_PREDICTION)
    assert len(result["stdout"]) == session.OUTPUT_LIMIT and not result["passed"]


def _exercise_whose_judge_breaks():
    def collect(ns):
        return float(ns["x"])

    def judge(x):
        raise ValueError("a bug in this judge")
    step = model.Step(id="s", kind="Scratch", title="t", minutes=1, statement="s", starter="",
                      solution="x = 1", required=("x",),
                      checks=(model.Check("c", "a check", collect=collect, judge=judge),))
    return model.Exercise(id="broken", title="t", tier="browser", minutes=1, summary="s",
                          steps=(step,))


def test_an_error_of_the_judge_is_the_graders_not_the_learners():
    result = verdict.grade(_exercise_whose_judge_breaks(), "s", "x = 1")
    (check,) = result["checks"]
    assert check["status"] == "error" and not result["passed"]
    assert "the grader itself failed" in check["message"] and "ValueError" in check["message"]
    assert "your code raised" not in check["message"]


def test_inputs_are_seeded_per_grade_and_the_seed_is_shown():
    step = lab.exercise("online-softmax").step("compose")
    wrong = step.solution.replace("acc = alpha[:, None] * acc + p @ v[k0:k1]", "acc = acc + p @ v[k0:k1]")
    first, second = (lab.grade("online-softmax", "compose", wrong, seed=s) for s in (11, 12))
    assert first["seed"] == 11 and second["seed"] == 12
    failed = [c for c in first["checks"] if c["status"] == "fail"]
    assert failed and all("seeded with 11" in c["message"] for c in failed)
    again = lab.grade("online-softmax", "compose", wrong, seed=11)      # reproducible
    assert [c["message"] for c in again["checks"]] == [c["message"] for c in first["checks"]]
    assert [c["message"] for c in second["checks"]] != [c["message"] for c in first["checks"]]


def test_a_one_phase_check_of_a_python_step_fails_loudly():
    """A check without collect/judge would be judged beside the learner's code: refused."""
    step = model.Step(id="s", kind="Scratch", title="t", minutes=1, statement="s", starter="",
                      solution="x = 1", required=("x",),
                      checks=(model.Check("c", "one phase", run=lambda ns: "fine"),))
    ex = model.Exercise(id="one-phase", title="t", tier="browser", minutes=1, summary="s",
                        steps=(step,))
    result = verdict.grade(ex, "s", "x = 1")
    assert not result["passed"] and result["checks"][0]["status"] == "error"
    assert "fault of the grader" in result["checks"][0]["message"]
