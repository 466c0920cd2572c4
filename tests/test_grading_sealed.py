"""The grader's state is out of the learner's reach (review r-grade3, D1, D4, D5, and the
off-switches of the same kind): what gates the audit hook and the evidence it collects --
the active refusals with their policy, the re-entrancy flag, the refused calls, introspection
and audited events, the session's snapshot -- is sealed in code constants (nlpcore.refusal,
nlpcore.lab.session), and each route to it or around it now fails the grade, in CPython 3.11
and Python 3.8 / NumPy 1.17, through ``lab.grade`` (a forked learner process) and through the
page's path (``web.collect`` in one Python, ``web.judge`` in another that never ran learner
code). On the code before this change every attack below passed Compose (or, for D5, ran
learner code inside the grader).
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

import pytest

from nlpcore import lab, refusal

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY38 = ROOT / ".venv38" / "bin" / "python"
INTERPRETERS = [pytest.param(sys.executable, id="py3")] + [
    pytest.param(str(PY38), id="py38", marks=pytest.mark.skipif(
        not PY38.exists(), reason="no Python 3.8 + NumPy 1.17 venv (.venv38)"))]

FULL = textwrap.dedent("""
    import numpy as np
    def _full(q, k, v, causal):
        s = q @ k.T / np.sqrt(q.shape[1])
        if causal:
            s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=1, keepdims=True)
        return p @ v / l, (m + np.log(l))[:, 0]
""")
HANDLE = textwrap.dedent("""
    import sys
    def _handle():      # the grade's Refusal, from the session in a grader frame's locals
        f = sys._getframe()
        while f is not None:
            s = f.f_locals.get("session")
            if type(s).__name__ == "_Session":
                return s.refusal
            f = f.f_back
""")
KERNEL_CALL = ("    return flash_np.forward(q, k, v, causal=causal, block_q=block_q, "
               "block_k=block_k)\n")
SIG = "def attention(q, k, v, block_q, block_k, causal=False):\n"

# Each: learner code for online-softmax/compose that must fail. On the old code each passed.
ATTACKS = {
    # D4 as the review wrote it: the hook's off-switch flag, then the guards' sealed originals
    "flag in_hook": textwrap.dedent("""
        import types, sys
        from nlpcore import refusal
        from nlpcore.kernels import flash_np
        def attention(q, k, v, block_q, block_k, causal=False):
            refusal._registry.in_hook = True
            fn = [c[0] for c in flash_np.forward.__code__.co_consts
                  if isinstance(c, tuple) and len(c) == 2 and callable(c[0])][0]
            refusal._registry.in_hook = False
            return fn(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    """),
    # the active refusals cleared: the state from the hook's code, or from the collector
    "active cleared (code)": textwrap.dedent("""
        from nlpcore import refusal
        from nlpcore.kernels import flash_np
        def _off():
            for fn in (getattr(refusal, "_audit_open"), getattr(refusal, "install")):
                for c in fn.__code__.co_consts:
                    if isinstance(c, tuple) and len(c) == 2 and hasattr(c[0], "active"):
                        c[0].active.clear()
            reg = getattr(refusal, "_registry", None)
            if reg is not None:
                reg.active.clear()
    """) + SIG + "    _off()\n" + KERNEL_CALL,
    "active cleared (gc)": textwrap.dedent("""
        import gc
        from nlpcore.lab import session
        from nlpcore.kernels import flash_np
        def _off():
            session._grader.active.clear()       # the old AUDITED_EVENTS hook's gate
            for o in gc.get_objects():
                if type(o).__name__ in ("_State", "_Registry"):
                    o.active.clear()
    """) + SIG + "    _off()\n" + KERNEL_CALL,
    # forget the grade's refusal, or write its policy, through the handle in a frame's locals
    "forget the grade's refusal": HANDLE + textwrap.dedent("""
        from nlpcore import refusal
        from nlpcore.kernels import flash_np
        def _off():
            refusal.forget(_handle())
    """) + SIG + "    _off()\n" + KERNEL_CALL,
    "write the refusal's fields": HANDLE + textwrap.dedent("""
        from nlpcore.kernels import flash_np
        def _off():
            h = _handle()
            h.contained = False
            h.learner_files = frozenset()
    """) + SIG + "    _off()\n" + KERNEL_CALL,
    # do something noted, then clear the evidence
    "evidence cleared": HANDLE + textwrap.dedent("""
        from nlpcore.kernels import flash_np
        def attention(q, k, v, block_q, block_k, causal=False):
            fn = [c[0] for c in flash_np.forward.__code__.co_consts
                  if isinstance(c, tuple) and len(c) == 2 and callable(c[0])][0]
            out = fn(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
            h = _handle()
            for name in ("introspected", "refused"):
                getattr(h, name).clear()
            return out
    """),
    # rebind a function the hook calls, for a moment (put back before the grade ends)
    "hook helper rebound": textwrap.dedent("""
        from nlpcore import refusal
        from nlpcore.kernels import flash_np
        def attention(q, k, v, block_q, block_k, causal=False):
            saved = refusal._learner_called
            refusal._learner_called = lambda *a: False
            try:
                fn = [c for c in flash_np.forward.__code__.co_consts
                      if isinstance(c, tuple) and len(c) == 2 and c[1] is None][0][0]
            finally:
                refusal._learner_called = saved
            fn = fn[0] if isinstance(fn, tuple) else fn
            return fn(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    """),
    # a str subclass as the path: its methods would run inside the hook
    "str subclass path": FULL + textwrap.dedent("""
        class P(str):
            def startswith(self, *a): return False
            def __eq__(self, o): return False
            __hash__ = str.__hash__
        def attention(q, k, v, block_q, block_k, causal=False):
            o, lse = _full(q, k, v, causal)
            with open(P("/proc/self/clear_refs"), "w") as f:
                f.write("5")
            return o, lse
    """),
}
# Two grades in one learner Python (the page's worker): the first plants, the second profits.
PLANTS = {
    "D1 snapshot edited": (textwrap.dedent("""
        from nlpcore.lab import session
        from nlpcore import refusal
        def _noop(modules, refusal_, strict=True):
            return None
        for _ns, _saved, _vol in session._grader.snapshot.namespaces:
            if _saved.get("__name__") == "nlpcore.refusal":
                _saved["install"] = _noop
        refusal.install = _noop
    """), "from nlpcore.kernels import flash_np\n" + SIG + KERNEL_CALL),
}

BATCH = r"""
import json, sys
from nlpcore import lab
from nlpcore.web import exercises as web
jobs = json.loads(sys.stdin.read())
out = {}
for name, codes in jobs.items():
    if name.startswith("grade:"):
        r = lab.grade("online-softmax", "compose", codes[0], seed=77)
        out[name] = {"passed": r["passed"], "restored": r["restored"], "stdout": r["stdout"],
                     "checks": {c["id"]: [c["status"], c["message"][:300]] for c in r["checks"]}}
    else:                               # the page's learner worker: warm-up, then each code
        step = lab.exercise("online-softmax").step("compose")
        web.collect("online-softmax", "compose", step.solution)
        out[name] = [web.collect("online-softmax", "compose", code, seed=77) for code in codes]
print("RESULT" + json.dumps(out))
"""
JUDGE = r"""
import json, sys
from nlpcore.web import exercises as web
web.prepare("online-softmax")
out = {}
for name, phases in json.loads(sys.stdin.read()).items():
    out[name] = []
    for p in phases:
        g = web.judge("online-softmax", "compose", p["phase"])
        out[name].append({"passed": g["passed"], "restored": g["restored"], "stdout": g["stdout"],
                          "checks": {c["id"]: [c["status"], c["message"][:300]] for c in g["checks"]}})
print("RESULT" + json.dumps(out))
"""


def _run(python: str, script: str, data) -> dict:
    env = {"PYTHONPATH": str(ROOT / "py"), "PATH": os.environ.get("PATH", ""),
           "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([python, "-c", script], input=json.dumps(data), cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=900)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT")), None)
    assert line is not None, done.stderr[-3000:]
    return json.loads(line[len("RESULT"):])


_results: dict = {}


def _graded(python: str) -> dict:
    """{("grade" or "page", attack): grade (page: the list of grades)}, once per interpreter."""
    if python not in _results:
        jobs = {"grade:" + name: [code] for name, code in ATTACKS.items()}
        jobs.update({"page:" + name: [code] for name, code in ATTACKS.items()})
        jobs.update({"page:" + name: list(codes) for name, codes in PLANTS.items()})
        jobs["page:D5 __module__"] = [D5_PLANT, D5_SECOND]
        collected = _run(python, BATCH, jobs)
        phases = {k: v for k, v in collected.items() if k.startswith("page:")}
        judged = _run(python, JUDGE, phases)
        out = {k: v for k, v in collected.items() if k.startswith("grade:")}
        for name, grades in judged.items():
            out[name] = [dict(g, collect_restored=p["restored"])
                         for g, p in zip(grades, phases[name])]
        _results[python] = out
    return _results[python]


D5_LOG = os.path.join(tempfile.gettempdir(), "g6seal-d5-%d.log" % os.getpid())
D5_PLANT = textwrap.dedent("""
    from nlpcore.kernels import _checks
    class E(str):
        def __eq__(self, other):
            with open(%r, "a") as f:
                f.write("eq\\n")
            return str.__eq__(self, other)
        __hash__ = str.__hash__
    _checks.allowed_tile.__module__ = E(_checks.allowed_tile.__module__)
""" % D5_LOG) + FULL + SIG + "    return _full(q, k, v, causal)\n"
D5_SECOND = FULL + SIG + "    return _full(q, k, v, causal)\n"


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_off_switch_fails_the_grade_in_lab_grade(python, name):
    grade = _graded(python)["grade:" + name]
    assert not grade["passed"], grade
    assert not any(status == "pass" for status, _ in grade["checks"].values()), grade


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_off_switch_fails_the_grade_in_the_page(python, name):
    (grade,) = _graded(python)["page:" + name]
    assert not grade["passed"], grade
    assert not any(status == "pass" for status, _ in grade["checks"].values()), grade


@pytest.mark.parametrize("python", INTERPRETERS)
def test_the_snapshot_cannot_be_edited_to_keep_a_patch(python):
    """D1: the saved records were reachable (``session._grader.snapshot``); a patch written
    into both the live namespace and its saved copy survived every later grade of the page's
    worker with ``restored == []``. The snapshot is sealed now: the plant fails to load, and
    the plain library call in the next grade is refused."""
    plant, later = _graded(python)["page:D1 snapshot edited"]
    assert not plant["passed"] and not later["passed"], (plant, later)
    assert all(status == "fail" for status, _ in later["checks"].values()), later
    assert "refused" in later["checks"]["ragged"][1], later


@pytest.mark.parametrize("python", INTERPRETERS)
def test_a_str_subclass_module_name_never_runs_inside_the_grader(python):
    """D5: a function's ``__module__`` set to a str subclass ran its ``__eq__`` inside the next
    grade's ``refusal.install``. Now the restore records and puts back the three names (the
    planting grade reports it, so the page replaces its worker), and install compares exact
    strs only."""
    if os.path.exists(D5_LOG):
        os.remove(D5_LOG)
    plant, later = _graded(python)["page:D5 __module__"]
    assert "function allowed_tile" in plant["collect_restored"], plant
    assert not plant["passed"]
    assert not os.path.exists(D5_LOG), open(D5_LOG).read()


def test_the_grade_state_functions_refuse_learner_callers():
    """forget, install and learner_calls start, end and count a grade's refusal: only the
    session (and refusal.refused) may call them."""
    handle = refusal.Refusal(contained=True)
    for call in ("refusal.forget(h)", "refusal.install([], h)", "refusal.learner_calls(h, -1)"):
        with pytest.raises(refusal.RefusedCall, match="grader's own"):
            exec(compile(call, "<your code>", "exec"), {"refusal": refusal, "h": handle})


def test_lab_exercise_names_the_module_that_builds_another_exercise(monkeypatch):
    """D3: the error branch named a variable that no longer existed (NameError)."""
    monkeypatch.setattr(lab, "_find", lambda ex_id: "nlpcore.lab.exercises.ring")
    monkeypatch.setattr(lab, "_cache", {})
    with pytest.raises(RuntimeError, match="nlpcore.lab.exercises.ring builds exercise 'ring'"):
        lab.exercise("not-ring")


def test_no_module_global_reaches_the_grader_state():
    """Neither nlpcore.refusal nor nlpcore.lab.session keeps the state in a global (the old
    ``_registry`` and ``_grader.snapshot``); the functions that use it hold it in their code."""
    from nlpcore.lab import session
    assert not hasattr(refusal, "_registry") and not hasattr(session._grader, "snapshot")
    assert session.pristine() is None
    consts = [c for c in refusal._audit_open.__code__.co_consts if isinstance(c, tuple)]
    assert any(type(c[0]).__name__ == "_State" for c in consts if c)
