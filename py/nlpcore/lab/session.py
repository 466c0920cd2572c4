"""The grading session: running the learner's code, and judging what it returned.

Phase 1, where the learner's code runs (:func:`collect`): the code is loaded in a fresh
namespace with its output captured (``stdout``, ``stderr``, ``traceback``), the library's
kernels refused where a step teaches a kernel (``Step.refuse``, :func:`refusing`), every check's
``collect`` run, and the interpreter restored afterwards to the state taken before the first
grade (:mod:`nlpcore.lab.sandbox`); what had to be undone is listed in ``restored``.
Phase 2 (:func:`judge`): every ``judge`` computes the expected values with the untouched
library and compares.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import os
import sys
import time
import traceback
import types
import warnings
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from . import sandbox
from .model import Check, CheckFailed, Exercise, LearnerError, RefusedCall, Step, result
from ..plain import to_plain

OUTPUT_LIMIT = 20000       # characters of the learner's stdout/stderr kept in a grade
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../nlpcore


class _Session:
    """What one grade records while the learner's code is live: printed text, the first
    traceback through the learner's code, and calls to refused kernels."""

    def __init__(self):
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.error: Optional[BaseException] = None
        self.refused: List[str] = []
        self.restored: List[str] = []
        self.calls_in_flight = 0            # learner functions running (call_learner depth)
        self.audited: List[str] = []         # AUDITED_EVENTS raised while learner code ran

    def record_error(self, err: BaseException):
        if self.error is None:
            self.error = err

    def output(self) -> dict:
        """Formatted after the interpreter is restored (formatting needs intact builtins)."""
        return {"stdout": self.stdout.getvalue()[:OUTPUT_LIMIT],
                "stderr": self.stderr.getvalue()[:OUTPUT_LIMIT],
                "traceback": "" if self.error is None else _learner_traceback(self.error)}


class _Grader:
    """The framework's own bookkeeping, left out of the snapshot (``sandbox_skip``)."""
    sandbox_skip = True

    def __init__(self):
        self.snapshot: Optional[sandbox.Snapshot] = None
        self.active: List[_Session] = []    # the session of the grade under way (at most one)
        self.auditing = False
        self.stale = False                  # set by library_changed(): retake the snapshot


_grader = _Grader()

# Audit events (PEP 578) that reach past what the snapshot can restore: another audit hook
# (permanent), walking every object the collector knows, raw memory. A grade in which learner
# code raises one reports it in ``restored``, and the page then replaces its Python worker.
AUDITED_EVENTS = frozenset(("sys.addaudithook", "gc.get_objects", "gc.get_referrers",
                            "gc.get_referents", "ctypes.dlopen", "ctypes.addressof",
                            "ctypes.cdata", "ctypes.string_at", "ctypes.PyObj_FromPtr"))


def _audit(event, args):
    if event in AUDITED_EVENTS and _grader.active:
        _grader.active[-1].audited.append(event)


def pristine() -> sandbox.Snapshot:
    """The interpreter state every grade returns to. Taken before the first grade ran any
    learner code, and taken again when modules have been imported since (an exercise built for
    the first time, a refused module imported by :func:`isolated`): between grades the
    interpreter is back at the snapshot, so what is new then was loaded by the grader. Also
    taken again after :func:`library_changed`."""
    snap = _grader.snapshot
    if (snap is None or _grader.stale
            or any(sandbox.guarded(name) for name in set(sys.modules) - snap.modules.keys())):
        _grader.stale = False
        if not _grader.auditing and hasattr(sys, "addaudithook"):
            sys.addaudithook(_audit)
            _grader.auditing = True
        _grader.snapshot = snap = sandbox.Snapshot.take()
    return snap


def library_changed() -> None:
    """The grader's own objects grew (``nlpcore.lab`` built an exercise): the next grade takes
    a new snapshot, after the previous grade's restore, so it includes them."""
    _grader.stale = True


def refusing(modules: Sequence[str], session: "_Session", strict: bool = True) -> None:
    """Replace the functions of ``modules`` by ones that refuse calls made by the learner's
    code, noting each refusal in ``session``: calls from outside the nlpcore package and, when
    ``strict`` (kernels a step teaches), any call while a learner function is running
    (:func:`call_learner`; the grader may hand over a refused function itself when the
    learner's namespace names one). Not strict (an exercise's own modules): grader code the
    learner calls back, such as an ``attend()`` handed to it, may use them. The grader's own
    calls between learner calls go through. Undone by the snapshot's restore."""
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__module__ == name:
                setattr(module, attr, _refuser(value, "%s.%s" % (name, attr), session, strict))


def _refuser(fn, qualified: str, session: "_Session", strict: bool):
    home = os.path.abspath(fn.__code__.co_filename)     # the refused module's own file

    def refused(*args, **kwargs):
        caller = os.path.abspath(sys._getframe(1).f_code.co_filename)
        if caller == home or ((not strict or not session.calls_in_flight)
                              and caller.startswith(_PACKAGE_DIR + os.sep)):
            return fn(*args, **kwargs)      # the module's own helpers, or the grader's calls
        session.refused.append(qualified)
        raise RefusedCall("%s is refused while this step is graded: the step asks you to "
                          "write this computation yourself" % qualified)
    refused.__name__ = fn.__name__
    refused.__doc__ = fn.__doc__
    return refused


def _refusal_message(names: Sequence[str]) -> str:
    names = sorted(set(names))
    return ("your code called %s, the library's own kernel%s: this step teaches you to write "
            "it, so calls into nlpcore's kernels are refused while it is graded"
            % (", ".join(names), "s" if len(names) > 1 else ""))


def load_learner(code: str, required: Sequence[str] = ()) -> dict:
    """Exec ``code`` in a fresh namespace and return it; LearnerError says what went wrong."""
    if not isinstance(code, str):
        raise TypeError("code must be a str of Python source, got %s" % type(code).__name__)
    ns = {"__name__": "learner", "__builtins__": builtins}
    try:
        compiled = compile(code, "<your code>", "exec")
    except SyntaxError as err:
        raise LearnerError("your code does not compile: %s (line %s: %s)"
                           % (err.msg, err.lineno, (err.text or "").strip()))
    try:
        exec(compiled, ns)
    except BaseException as err:  # learner code may raise anything, SystemExit included
        repair_builtins()
        _note_error(err)
        raise LearnerError("your code raised %s while loading: %s%s%s"
                           % (type(err).__name__, err, _where(err), _base_note(err)))
    repair_builtins()
    missing = [name for name in required if name not in ns]
    if missing:
        raise LearnerError("your code must define %s (missing: %s)"
                           % (", ".join(required), ", ".join(missing)))
    return ns


def learner_namespace(step: Step, code: str) -> dict:
    """The namespace checks see: Python code is exec'd (:func:`load_learner`); code in another
    language (a WGSL shader) is not run here, only handed to the checks as ``ns["source"]``."""
    if step.language == "python":
        return load_learner(code, step.required)
    if not isinstance(code, str):
        raise TypeError("code must be a str of %s source, got %s" % (step.language, type(code).__name__))
    return {"source": code}


def call_learner(fn, *args, shapes: dict = None, context: str = "", **kwargs):
    """Call the learner's function; any exception (SystemExit and other BaseExceptions too)
    becomes a failure that names the case and the input shapes (CheckFailed from nested checks
    passes through)."""
    session = _grader.active[-1] if _grader.active else None
    if session is not None:
        session.calls_in_flight += 1
    try:
        out = fn(*args, **kwargs)
    except CheckFailed:
        repair_builtins()
        raise
    except BaseException as err:  # learner code may raise anything
        repair_builtins()
        _note_error(err)
        raise CheckFailed("%syour code raised %s: %s%s%s"
                          % ((context + ": ") if context else "", type(err).__name__, err,
                             _where(err), _base_note(err)),
                          expected="a result", got=type(err).__name__, shapes=shapes)
    finally:
        if session is not None:
            session.calls_in_flight -= 1
    repair_builtins()
    return out


def repair_builtins():
    """Builtins back to normal after learner code returns (see Snapshot.repair_builtins)."""
    if _grader.snapshot is not None:
        _grader.snapshot.repair_builtins()



def _note_error(err: BaseException):
    if _grader.active:
        _grader.active[-1].record_error(err)


def _base_note(err: BaseException) -> str:
    if isinstance(err, Exception):
        return ""
    return (" -- %s is not an ordinary error: a submission must return its results, not exit "
            "or interrupt Python" % type(err).__name__)


def _where(err: BaseException) -> str:
    """' (line N of your code)' for the innermost frame inside the learner's code."""
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == "<your code>":
            line = frame.lineno
    return "" if line is None else " (line %d of your code)" % line


def _learner_traceback(err: BaseException) -> str:
    """The traceback of ``err`` through the learner's code only (grader frames left out)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == "<your code>"]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(err), err)
    return "".join(lines)


def _verdict(check: Check, fn, *args, **details) -> dict:
    """Run one python check body (run or judge) and turn its outcome into a result dict."""
    try:
        message = fn(*args)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **dict(details, **fail.details))
    except BaseException as err:  # learner code may raise anything, SystemExit included
        _note_error(err)
        return result(check.id, check.title, "fail", "your code raised %s: %s%s%s"
                      % (type(err).__name__, err, _where(err), _base_note(err)), **details)
    return result(check.id, check.title, "pass", message or "", **details)


def run_check(check: Check, ns: dict) -> dict:
    """Run one check in one go (``run``, or ``collect`` then ``judge``, or a JS runner's
    ``prepare``) and turn its outcome into a result dict. :func:`grade` runs the phases apart."""
    if check.runner == "local":
        return result(check.id, check.title, "local", check.explain, command=check.command,
                      runner="local")
    if check.runner != "python":
        try:
            job = check.prepare(ns)
        except CheckFailed as fail:
            return result(check.id, check.title, "fail", fail.message, runner=check.runner,
                          **fail.details)
        except BaseException as err:
            _note_error(err)
            return result(check.id, check.title, "fail", "your code raised %s: %s%s%s"
                          % (type(err).__name__, err, _where(err), _base_note(err)),
                          runner=check.runner)
        return result(check.id, check.title, "pending", "runs in the page (%s)" % check.runner,
                      runner=check.runner, job=job)
    if check.collect is not None:
        collected = {}

        def both(ns):
            collected["data"] = check.collect(ns)
            return check.judge(collected["data"])
        return _verdict(check, both, ns)
    return _verdict(check, check.run, ns)


@contextlib.contextmanager
def isolated(refuse: Sequence[str] = (), own: Sequence[str] = ()):
    """Run learner code inside: its printed output is captured, the functions of the ``refuse``
    modules (strictly) and of the ``own`` modules (the exercise's; not strictly) refuse its
    calls (:func:`refusing`), and afterwards the interpreter is restored to :func:`pristine`.
    Yields the :class:`_Session`; ``session.restored`` lists what had been changed (and
    AUDITED_EVENTS seen): empty for code that kept to itself."""
    for name in tuple(refuse) + tuple(own):  # imported before the snapshot, not inside
        try:
            importlib.import_module(name)
        except ImportError:
            pass                            # a module this build does not have
    snap = pristine()
    entry = sandbox.process_state()         # the host's streams and filters, as the grade began
    session = _Session()
    _grader.active.append(session)
    try:
        with contextlib.redirect_stdout(session.stdout), contextlib.redirect_stderr(session.stderr):
            with _quiet():
                refusing(refuse, session)
                refusing(own, session, strict=False)
                yield session
    finally:
        _grader.active.remove(session)
        session.restored = [c for c in snap.restore(entry)
                            if not _is_refusal_guard(c, tuple(refuse) + tuple(own))]
        session.restored += ["audited: " + e for e in sorted(set(session.audited))]


@contextlib.contextmanager
def _quiet():
    """NaN/overflow warnings off: the checks report NaN and overflow themselves."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _is_refusal_guard(change: str, refuse: Sequence[str]) -> bool:
    return any(change == "module " + name for name in refuse)


def grade(exercise: Exercise, step_id: str, code: str) -> dict:
    """Grade one step: {exercise, step, checks: [result...], passed, record, report, elapsed_ms,
    stdout, stderr, traceback, restored}.

    Phase 1, with the learner's code live (:func:`isolated`): load it, run every check's
    ``collect`` (or whole ``run``), the step's report and record. Then the interpreter is
    restored. Phase 2: every ``judge``, with the untouched library and no learner code left.
    """
    step = exercise.step(step_id)
    start = time.perf_counter()
    checks: List[Optional[dict]] = [None] * len(step.checks)
    collected: Dict[int, object] = {}
    report, record, ns = None, {}, None
    with isolated(**_refused_modules(exercise, step)) as session:
        try:
            ns = learner_namespace(step, code)
        except LearnerError as err:
            checks = [result(c.id, c.title, "error", str(err)) if c.runner != "local"
                      else run_check(c, {}) for c in step.checks]
        except BaseException as err:  # the grader itself was broken by the learner's code
            repair_builtins()
            checks, collected = _stopped(step, err), {}
        else:
            try:
                _phase_one(step, ns, session, checks, collected)
                report, record = _report_and_record(step, ns)
            except BaseException as err:  # the grader itself was broken by the learner's code
                repair_builtins()
                checks, collected = _stopped(step, err), {}
        ns = None
    with _quiet():
        for i, data in collected.items():
            checks[i] = _verdict(step.checks[i], step.checks[i].judge, data)
    graded = [c for c in checks if c["status"] != "local"]
    out = {
        "exercise": exercise.id, "step": step.id, "checks": checks,
        "passed": bool(graded) and all(c["status"] == "pass" for c in graded),
        "record": record, "report": report,
        "elapsed_ms": round((time.perf_counter() - start) * 1000.0, 1),
        "restored": session.restored,
    }
    out.update(session.output())
    return out


def _phase_one(step: Step, ns: dict, session: "_Session", checks: list, collected: dict):
    """Run every check's learner part: ``collect`` (once per distinct collect function) or the
    whole ``run``; fills ``checks`` (verdicts so far) and ``collected`` (data for the judges)."""
    refused_at_load = list(session.refused)
    shared: Dict[Callable, tuple] = {}     # checks that share a collect run it once
    for i, check in enumerate(step.checks):
        del session.refused[:]
        if check.runner == "python" and check.collect is not None:
            if check.collect not in shared:
                failure = _collect(check, ns, collected, i)
                shared[check.collect] = (failure, collected.get(i), list(session.refused))
            failure, data, refused = shared[check.collect]
            session.refused.extend(refused)
            if failure is None:
                collected[i] = data
            else:
                checks[i] = dict(failure, id=check.id, title=check.title)
        else:
            checks[i] = run_check(check, ns)
        if (session.refused or refused_at_load) and check.runner != "local":
            checks[i] = result(check.id, check.title, "fail",
                               _refusal_message(session.refused + refused_at_load))
            collected.pop(i, None)


def _stopped(step: Step, err: BaseException) -> List[dict]:
    """Every check's verdict when grading itself broke down during the learner's phase."""
    return [result(c.id, c.title, "error", "grading stopped: %s: %s (did your code change "
                   "Python's builtins or NumPy?)" % (type(err).__name__, err))
            if c.runner != "local" else run_check(c, {}) for c in step.checks]


def _refused_modules(exercise: Exercise, step: Step) -> dict:
    """Keyword arguments of :func:`isolated`: the step's ``refuse`` list, and the exercise's own
    modules (its checks and expected values are the grader's, never the learner's to call)."""
    package = "nlpcore.lab.exercises." + exercise.id
    own = sorted(n for n in sys.modules if n == package or n.startswith(package + "."))
    return {"refuse": tuple(step.refuse), "own": tuple(own)}


def _collect(check: Check, ns: dict, collected: dict, index: int) -> Optional[dict]:
    """Phase 1 of a two-phase check: None when ``collect`` returned (the data is kept for the
    judge), else the failure it raised."""
    try:
        collected[index] = check.collect(ns)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **fail.details)
    except BaseException as err:  # learner code may raise anything, SystemExit included
        _note_error(err)
        return result(check.id, check.title, "fail", "your code raised %s: %s%s%s"
                      % (type(err).__name__, err, _where(err), _base_note(err)))
    return None


def _report_and_record(step: Step, ns: dict):
    """The step's report (a courtesy: the checks carry the verdict) and recorded values, as
    plain data, computed while the learner's objects still exist."""
    report = None
    if step.report is not None:
        try:
            report = to_plain(step.report(ns))
        except BaseException as err:
            report = {"error": "%s: %s" % (type(err).__name__, err)}
    record = {}
    for name in step.record:
        if name in ns:
            try:
                record[name] = to_plain(ns[name])
            except BaseException as err:
                record[name] = "%s: %s" % (type(err).__name__, err)
    return report, record


def verify_js(exercise: Exercise, step_id: str, check_id: str, code: str, job, outputs) -> dict:
    """Second half of a JS-run check: the page ran ``job`` and hands back ``outputs``."""
    step = exercise.step(step_id)
    check = next((c for c in step.checks if c.id == check_id), None)
    if check is None or check.runner in ("python", "local"):
        raise ValueError("check must name a JS-run check of step %r, got %r" % (step_id, check_id))
    with isolated(**_refused_modules(exercise, step)):
        try:
            ns = learner_namespace(step, code)
        except LearnerError as err:
            return result(check.id, check.title, "error", str(err), runner=check.runner)
