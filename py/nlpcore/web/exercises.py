"""The exercise pages' door into Python (called through :func:`nlpcore.web.call`).

    exercises.catalog()                                  -> ids, titles, steps (summary)
    exercises.grade(exercise, step, code)                -> {checks, passed, record, report, elapsed_ms,
                                                            stdout, stderr, traceback}
    exercises.scratch(exercise, step, definitions, code) -> {stdout, stderr, traceback, value,
                                                            elapsed_ms}: runs code against the
                                                            learner's definitions, ungraded
    exercises.verify(exercise, step, check, code, job, outputs)
                                                         -> one check's verdict after the page ran
                                                            its job (JS-run checks, e.g. WebGPU)
    exercises.kill_matrix(code=None)                     -> the break-it kill matrix of a suite
                                                            (the weak suite when code is None)
    exercises.lab_check(step, answer, observed=None)     -> a guided-lab answer's verdict
    exercises.lab_timing_spec(n, kernel)                 -> the dispatch spec the lab times on
                                                            the learner's GPU (tiled or naive)

Learner code arrives as a plain string and runs with ``exec`` in a fresh namespace (see
:func:`nlpcore.lab.framework.load_learner`); the page enforces the time limit by terminating
the worker (js/runtime.js). Must run in Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""
from __future__ import annotations

import ast
import contextlib
import io
import linecache
import time
import traceback as _traceback
from typing import Any, Dict, Optional

from .. import lab
from ..lab import guided
from ..lab.exercises import module as _exercise_module

mutants = _exercise_module("break-it", "mutants")  # the break-it exercise's kernels and suites

__all__ = ["catalog", "grade", "scratch", "verify", "kill_matrix", "lab_check", "lab_timing_spec"]

OUTPUT_LIMIT = 20000   # characters of stdout/stderr kept per run (the end is cut, and says so)
LEARNER_FILE = "<your code>"
SCRATCH_FILE = "<scratch>"
TIMING_MAX_N = 8192  # the largest sequence length the lab's timing panel dispatches
TIMING_KERNELS = ("tiled", "naive")


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError("%s: expected a str, got %s" % (name, type(value).__name__))
    return value


def catalog() -> list:
    """[{id, title, tier, minutes, steps: [step ids]}] of the exercises in this build."""
    return [{"id": ex.id, "title": ex.title, "tier": ex.tier, "minutes": ex.minutes,
             "steps": [s.id for s in ex.steps]} for ex in lab.exercises()]


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + "\n… (%d more characters not shown)" % (len(text) - OUTPUT_LIMIT)


def _remember(filename: str, source: str) -> None:
    """Lets tracebacks quote the learner's lines (their code has no file on disk)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _learner_traceback(err: BaseException, files=(LEARNER_FILE,)) -> str:
    """The traceback of ``err`` from the first frame in the learner's own code on (frames of
    the grader and of this module are left out: they are not the learner's to read)."""
    frames = _traceback.extract_tb(err.__traceback__)
    first = next((i for i, f in enumerate(frames) if f.filename in files), None)
    kept = frames[first:] if first is not None else []
    lines = ["Traceback (most recent call last):\n"] if kept else []
    lines += _traceback.format_list(kept)
    lines += _traceback.format_exception_only(type(err), err)
    return "".join(lines)


def _load_traceback(code: str) -> str:
    """When the learner's code failed to load, the traceback of that failure: the code is
    compiled and run once more in a fresh namespace, its output discarded."""
    _remember(LEARNER_FILE, code)
    try:
        compiled = compile(code, LEARNER_FILE, "exec")
    except SyntaxError as err:
        return "".join(_traceback.format_exception_only(type(err), err))
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            exec(compiled, {"__name__": "learner", "__builtins__": __builtins__})
    except Exception as err:  # learner code may raise anything
        return _learner_traceback(err)
    return ""


def grade(exercise: str, step: str, code: str) -> Dict[str, Any]:
    """Grade ``code`` for one step of one exercise; see nlpcore.lab.framework.grade. What the
    learner's code printed while it was graded comes back as ``stdout``/``stderr``, and a
    failure to load it as ``traceback`` (from the learner's first frame on)."""
    exercise, step, code = _str(exercise, "exercise"), _str(step, "step"), _str(code, "code")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = lab.grade(exercise, step, code)
    result.setdefault("stdout", _clip(out.getvalue()))
    result.setdefault("stderr", _clip(err.getvalue()))
    if "traceback" not in result:
        failed_to_load = (lab.exercise(exercise).step(step).language == "python"
                          and any(c["status"] == "error" for c in result["checks"]))
        result["traceback"] = _load_traceback(code) if failed_to_load else ""
    return result


def scratch(exercise: str, step: str, definitions: str, code: str) -> Dict[str, Any]:
    """Run ``code`` against the learner's current ``definitions`` (the editor's text), without
    grading: the definitions are run first in a fresh namespace, then ``code`` in the same
    namespace. A last line that is an expression is shown like at a Python prompt (``value``:
    its repr). Returns {stdout, stderr, traceback, value, elapsed_ms}."""
    exercise, step = _str(exercise, "exercise"), _str(step, "step")
    definitions, code = _str(definitions, "definitions"), _str(code, "code")
    if lab.exercise(exercise).step(step).language != "python":
        raise ValueError("step: the scratch cell runs Python; step %r of %r is %s"
                         % (step, exercise, lab.exercise(exercise).step(step).language))
    out, err = io.StringIO(), io.StringIO()
    ns = {"__name__": "learner", "__builtins__": __builtins__}
    value = None
    trace = ""
    _remember(LEARNER_FILE, definitions)
    _remember(SCRATCH_FILE, code)
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(definitions, LEARNER_FILE, "exec"), ns)
            tree = ast.parse(code, SCRATCH_FILE, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, SCRATCH_FILE, "exec"), ns)
            if last is not None:
                shown = eval(compile(last, SCRATCH_FILE, "eval"), ns)
                if shown is not None:
                    value = repr(shown)
        except SyntaxError as error:
            trace = "".join(_traceback.format_exception_only(type(error), error))
        except Exception as error:  # learner code may raise anything
            trace = _learner_traceback(error, (LEARNER_FILE, SCRATCH_FILE))
    return {"stdout": _clip(out.getvalue()), "stderr": _clip(err.getvalue()),
            "traceback": trace, "value": None if value is None else _clip(value),
            "elapsed_ms": round((time.perf_counter() - start) * 1000.0, 1)}


def verify(exercise: str, step: str, check: str, code: str, job: Any = None,
           outputs: Optional[Dict[str, bytes]] = None) -> Dict[str, Any]:
    """Finish a check that ran partly in the page: ``outputs`` is {name: bytes} from the JS
    runner that executed ``job`` (as returned in the pending check of :func:`grade`)."""
    if outputs is not None and not isinstance(outputs, dict):
        raise TypeError("outputs: expected a dict {name: bytes}, got %s" % type(outputs).__name__)
    return lab.verify_js(_str(exercise, "exercise"), _str(step, "step"), _str(check, "check"),
                         _str(code, "code"), job, outputs or {})


def kill_matrix(code: Optional[str] = None) -> Dict[str, Any]:
    """The break-it kill matrix (clean kernel and five mutants × tests) of the weak suite, or of
    the suite in ``code``, as {columns, rows, killers}."""
    source = mutants.WEAK_SUITE_SOURCE if code is None else _str(code, "code")
    matrix = mutants.kill_matrix(mutants.load_suite(source))
    table = mutants.matrix_table(matrix)
    table["killers"] = mutants.killers(matrix)
    return table


def lab_check(step: str, answer: Any = None, observed: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Check a guided-lab answer; ``observed`` is the last ``lab:compared`` event detail."""
    if observed is not None and not isinstance(observed, dict):
        raise TypeError("observed: expected the lab:compared detail (a dict), got %s"
                        % type(observed).__name__)
    return guided.check(_str(step, "step"), answer, observed)


def lab_timing_spec(n: Any, kernel: Any) -> Dict[str, Any]:
    """The dispatch spec of one head of random attention, (1, n, guided.TIMING_D) float32, for
    the tiled shader (``kernel="tiled"``, wgsl/flash_fwd.wgsl) or the naive one (``"naive"``,
    wgsl/attention_naive.wgsl, three passes through a scores buffer). The page times it."""
    import numpy as np

    from ..kernels import flash_wgsl_mirror
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= TIMING_MAX_N:
        raise ValueError("n: expected an integer from 1 to %d, got %r" % (TIMING_MAX_N, n))
    if kernel not in TIMING_KERNELS:
        raise ValueError("kernel: expected one of %s, got %r" % (list(TIMING_KERNELS), kernel))
    rng = np.random.RandomState(n)
    q, k, v = (rng.standard_normal((1, n, guided.TIMING_D)).astype(np.float32) for _ in range(3))
    shader = flash_wgsl_mirror.FLASH_SHADER if kernel == "tiled" else flash_wgsl_mirror.NAIVE_SHADER
    return flash_wgsl_mirror.dispatch_spec(q, k, v, shader=shader)
