"""The grading session: running the learner's code, phase 1 of a grade.

:func:`collect` loads the code in a fresh namespace with its output captured (``stdout``,
``stderr``, ``traceback``), the library's kernels refused where a step teaches a kernel
(``Step.refuse``, :mod:`nlpcore.refusal`), runs every check's ``collect`` (through
:func:`call_learner`), and restores the interpreter afterwards to the state taken before the
first grade (:mod:`nlpcore.lab.sandbox`); what had to be undone is listed in ``restored``. Its
result is plain data for :mod:`nlpcore.lab.wire`, judged by :mod:`nlpcore.lab.verdict` in an
interpreter that never ran learner code (:mod:`nlpcore.lab.runner` in CPython, the page's judge
worker in the browser).
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

from .. import refusal
from . import model, newer_python, sandbox, wire
from .model import Check, CheckFailed, Exercise, LearnerError, RefusedCall, Step, result
from ..plain import to_plain

OUTPUT_LIMIT = 20000       # characters of the learner's stdout/stderr kept in a grade


class _Session:
    """What one grade records while the learner's code is live: printed text, the first
    traceback through the learner's code. Learner code can reach this object (a frame's
    locals): nothing here gates a check or holds evidence -- refused calls, introspection and
    AUDITED_EVENTS are noted in :mod:`nlpcore.refusal`'s sealed state under ``refusal`` (a
    handle) and copied out when the grade ends."""

    def __init__(self):
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.error: Optional[BaseException] = None
        self.refusal = refusal.Refusal(contained=True)  # refused kernels and calls, no way out
        self.restored: List[str] = []

    def record_error(self, err: BaseException):
        if self.error is None:
            self.error = err

    def output(self) -> dict:
        """Formatted after the interpreter is restored (formatting needs intact builtins)."""
        return {"stdout": self.stdout.getvalue()[:OUTPUT_LIMIT],
                "stderr": self.stderr.getvalue()[:OUTPUT_LIMIT],
                "traceback": "" if self.error is None else _learner_traceback(self.error)}


class _Grader:
    """What the session keeps between calls that gates nothing: the session of the grade under
    way (for its printed output and first error) and the memory cap (for a message)."""
    sandbox_skip = True

    def __init__(self):
        self.active: List[_Session] = []    # the session of the grade under way (at most one)
        self.memory_limit = None            # bytes the learner process may allocate (runner)


_grader = _Grader()


def _Sealed():
    """The session's state that learner code must not reach: the snapshot every grade restores
    to (its saved records decide what a restore puts back and reports) and whether to retake
    it. Sealed into the code constants of the functions that use it (``refusal.seal``), never a
    global: reaching it takes an audited (and refused) read of ``__code__``/``f_code``. A
    ``types.SimpleNamespace`` (a built-in type): a class of ours could be given a property by
    learner code that every read of the sealed object would run."""
    return types.SimpleNamespace(snapshot=None, stale=False)


_SEALED = "\0nlpcore.lab.session: the sealed state"
_AT = 0

# Audit events that reach past what the snapshot can restore (see nlpcore.refusal): a grade in
# which they are raised reports them in ``restored``, and the page then replaces its worker.
AUDITED_EVENTS = refusal.AUDITED_EVENTS


def pristine() -> None:
    """Take the snapshot every grade returns to, where it is due (see :func:`_due`); it stays
    sealed (see _Sealed): nothing returns it."""
    _due(("\0nlpcore.lab.session: the sealed state", None)[_AT])


def _due(sealed) -> sandbox.Snapshot:
    """``sealed``'s snapshot, taken where it is due: before the first grade ran any learner
    code, and again when modules have been imported since (an exercise built for the first
    time, a refused module imported by :func:`isolated`): between grades the interpreter is
    back at the snapshot, so what is new then was loaded by the grader. Also taken again after
    :func:`library_changed`."""
    snap = sealed.snapshot
    if (snap is None or sealed.stale
            or any(sandbox.guarded(name) for name in set(sys.modules) - snap.modules.keys())):
        sealed.stale = False
        refusal.hook()
        sealed.snapshot = snap = sandbox.Snapshot.take()
    return snap


def library_changed() -> None:
    """The grader's own objects grew (``nlpcore.lab`` built an exercise): the next grade takes
    a new snapshot, after the previous grade's restore, so it includes them."""
    ("\0nlpcore.lab.session: the sealed state", None)[_AT].stale = True


def load_learner(code: str, required: Sequence[str] = ()) -> dict:
    """Exec ``code`` in a fresh namespace and return it; LearnerError says what went wrong."""
    if not isinstance(code, str):
        raise TypeError("code must be a str of Python source, got %s" % type(code).__name__)
    ns = {"__name__": "learner", "__builtins__": builtins}
    try:
        compiled = compile(code, "<your code>", "exec", dont_inherit=True)  # not this module's
        # ``from __future__ import annotations`` (a dataclass would read its fields' types as text)
    except SyntaxError as err:
        raise LearnerError("your code does not compile: %s (line %s: %s)"
                           % (err.msg, err.lineno, (err.text or "").strip()),
                           _problem(code, "compile", err.lineno, "SyntaxError: %s" % err.msg))
    try:
        exec(compiled, ns)
    except BaseException as err:  # learner code may raise anything, SystemExit included
        repair_builtins()
        _note_error(err)
        raise LearnerError("your code raised %s while loading: %s%s%s"
                           % (type(err).__name__, err, _where(err), _base_note(err)),
                           _problem(code, "load", _learner_line(err), "%s: %s" % (type(err).__name__, err)))
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
        refusal.learner_calls(session.refusal, 1)
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
            refusal.learner_calls(session.refusal, -1)
    repair_builtins()
    return out


def repair_builtins():
    """Builtins back to normal after learner code returns (see Snapshot.repair_builtins)."""
    if ("\0nlpcore.lab.session: the sealed state", None)[_AT].snapshot is not None:
        ("\0nlpcore.lab.session: the sealed state", None)[_AT].snapshot.repair_builtins()



def _note_error(err: BaseException):
    if _grader.active:
        _grader.active[-1].record_error(err)


TRACEBACK_FRAMES = 100     # innermost frames of a traceback read (deep recursion has a million)


def _base_note(err: BaseException) -> str:
    if isinstance(err, RecursionError):
        return (" -- the recursion went too deep (Python's limit is %d calls): does a recursive "
                "function of yours reach its base case?" % sys.getrecursionlimit())
    if isinstance(err, MemoryError) and _grader.memory_limit:
        return (" -- the process running your code may allocate %.1f GiB; a tiled kernel needs "
                "far less" % (_grader.memory_limit / float(1 << 30)))
    if isinstance(err, Exception):
        return ""
    return (" -- %s is not an ordinary error: a submission must return its results, not exit "
            "or interrupt Python" % type(err).__name__)


def _innermost(err: BaseException) -> list:
    """The innermost TRACEBACK_FRAMES entries of ``err``'s traceback (FrameSummary each),
    reading only those: a recursion a million calls deep must not cost the grade its time."""
    entries, tb = [], err.__traceback__
    while tb is not None:
        entries.append(tb)
        if len(entries) > 2 * TRACEBACK_FRAMES:
            del entries[:TRACEBACK_FRAMES]
        tb = tb.tb_next
    return [f for tb in entries[-TRACEBACK_FRAMES:] for f in traceback.extract_tb(tb, limit=1)]


def _learner_line(err: BaseException) -> Optional[int]:
    """The line of the innermost frame inside the learner's code, or None."""
    line = None
    for frame in _innermost(err):
        if frame.filename == "<your code>":
            line = frame.lineno
    return line


def _where(err: BaseException) -> str:
    """' (line N of your code)' for the innermost frame inside the learner's code."""
    line = _learner_line(err)
    return "" if line is None else " (line %d of your code)" % line


def _problem(code: str, kind: str, line: Optional[int], error: str) -> Optional[dict]:
    """What stops the learner's code from loading, as data: {kind, line, error, newer} (newer:
    {what, version} when a newer Python than the page's 3.8 would take that line), or None
    without a line."""
    if not line:
        return None
    lines = code.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return {"kind": kind, "line": int(line), "error": error, "newer": newer_python.needs(text, error)}


def _learner_traceback(err: BaseException) -> str:
    """The traceback of ``err`` through the learner's code only (grader frames left out)."""
    frames = [f for f in _innermost(err) if f.filename == "<your code>"]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(err), err)
    return "".join(lines)


def _isolated(refuse: Sequence[str] = (), own: Sequence[str] = ()):
    """Run learner code inside: its printed output is captured, the functions of the ``refuse``
    modules (strictly) and of the ``own`` modules (the exercise's; not strictly) refuse its
    calls (:mod:`nlpcore.refusal`), and afterwards the interpreter is restored to the snapshot
    (:func:`pristine`). Yields the :class:`_Session`; ``session.restored`` lists what had been
    changed (and what the refusal's audit hook saw): empty for code that kept to itself.
    While learner code runs, this generator is suspended: its frame (holding the snapshot) is
    reached only through an audited ``gi_frame`` read, refused by the hook."""
    for name in tuple(refuse) + tuple(own):  # imported before the snapshot, not inside
        try:
            importlib.import_module(name)
        except ImportError:
            pass                            # a module this build does not have
    snap = _due(("\0nlpcore.lab.session: the sealed state", None)[_AT])
    entry = sandbox.process_state()         # the host's streams and filters, as the grade began
    session = _Session()
    _grader.active.append(session)
    hidden = ()
    try:
        with contextlib.redirect_stdout(session.stdout), contextlib.redirect_stderr(session.stderr):
            with quiet():
                refusal.install(refuse, session.refusal)
                refusal.install(own, session.refusal, strict=False)
                hidden = snap.hide(refusal.original_ids(session.refusal))  # out of reach
                yield session
    finally:
        evidence = refusal.forget(session.refusal)
        if session in _grader.active:
            _grader.active.remove(session)
        tampered = refusal.changes(session.refusal)     # a guard replaced, an original put back
        snap.unhide(hidden)
        restored = [c for c in snap.restore(entry)
                    if not _is_refusal_guard(c, tuple(refuse) + tuple(own))] + tampered
        session.restored = restored + ["audited: " + e for e in sorted(set(
            evidence.audited + evidence.introspected))]


@contextlib.contextmanager
def quiet():
    """NaN/overflow warnings off: the checks report NaN and overflow themselves."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _is_refusal_guard(change: str, refuse: Sequence[str]) -> bool:
    return any(change == "module " + name for name in refuse)


# ------------------------------------------------------------------------------------------
# Phase 1: where the learner's code runs
# ------------------------------------------------------------------------------------------

def collect(exercise: Exercise, step_id: str, code: str, seed: int,
            only: Optional[Sequence[str]] = None) -> dict:
    """Run the learner's part of a grade and return it as data for :func:`judge` (send it
    through :func:`nlpcore.lab.wire.pack`): ``verdicts`` {check index: result} decided here
    (the code did not load, a collect failed, a refused call, a page job, a local check),
    ``collected`` {check index: what collect returned}, ``report``, ``record``, ``stdout``,
    ``stderr``, ``traceback``, ``restored``, ``seed``, ``elapsed_ms``, ``only``, ``problem``
    (what stopped the code from loading, as data: see :func:`_problem`).

    ``only``: the ids of the checks to run (the page's "Rerun this check alone"); the others
    are left out of the grade, which then never counts as passing the step. None runs all."""
    step = exercise.step(step_id)
    if not isinstance(code, str):
        raise TypeError("code must be a str of source, got %s" % type(code).__name__)
    only = checked_only(step, only)
    start = time.perf_counter()
    model.set_seed(seed)
    timing: Dict[int, float] = {}           # check index -> ms its learner part took
    report, record, problem = None, {}, wire.pack(None)
    # Until the learner's code is gone (the restore at the end of `isolated`, which may run
    # what it left behind), the grade's results exist only as packed text in a rebound tuple
    # (see _phase_one): a frame of this function holds nothing that code could rewrite.
    with isolated(**_refused_modules(exercise, step)) as session:
        try:
            ns = learner_namespace(step, code)
        except LearnerError as err:
            problem = wire.pack(err.problem)
            done = _packed_verdicts({i: result(c.id, c.title, "error", str(err))
                                     for i, c in enumerate(step.checks)
                                     if c.runner != "local" and _runs(c, only)})
        except BaseException as err:  # the grader itself was broken by the learner's code
            repair_builtins()
            done = _packed_verdicts(_stopped(step, err))
        else:
            try:
                done = _phase_one(step, ns, session, timing, only)
                report, record = _report_and_record(step, ns)
                report, record = wire.pack(report), wire.pack(record)
            except BaseException as err:  # the grader itself was broken by the learner's code
                repair_builtins()
                done, report, record = _packed_verdicts(_stopped(step, err)), None, None
        ns = None
    verdicts, collected = _unpacked(done)
    report = None if report is None else wire.unpack(report)
    record = {} if record is None or record == {} else wire.unpack(record)
    out = {"verdicts": verdicts, "collected": collected, "report": report, "record": record,
           "restored": session.restored, "seed": seed, "timing": timing, "only": only,
           "problem": wire.unpack(problem),
           "elapsed_ms": round((time.perf_counter() - start) * 1000.0, 1)}
    out.update(session.output())
    return out


def checked_only(step: Step, only) -> Optional[List[str]]:
    """``only`` as a list of check ids of ``step`` (None: every check); ValueError otherwise."""
    if only is None:
        return None
    ids = [c.id for c in step.checks]
    if isinstance(only, str) or not all(isinstance(x, str) for x in only) or not only:
        raise ValueError("only: expected a non-empty list of check ids of step %r (%s), got %r"
                         % (step.id, ", ".join(ids), only))
    unknown = [x for x in only if x not in ids]
    if unknown:
        raise ValueError("only: step %r has no check %s (its checks: %s)"
                         % (step.id, ", ".join(map(repr, unknown)), ", ".join(ids)))
    return list(only)


def _runs(check: Check, only: Optional[List[str]]) -> bool:
    return only is None or check.id in only


def _phase_one(step: Step, ns: dict, session: "_Session", timing: dict,
               only: Optional[List[str]] = None) -> tuple:
    """Every check's learner part: ``collect`` (once per distinct collect function), a page
    job's ``prepare``, or (a one-phase check of a WGSL step, where no learner code runs) the
    whole ``run``. ``timing[i]``: the milliseconds check i's part took (a shared collect counts
    for the first check that ran it), so a slow grade can say where its time went.

    Returns ((i, "v" or "c", packed text), ...): each check's verdict ("v") or collected data
    ("c"), packed (:func:`nlpcore.lab.wire.pack`) as soon as it exists and kept in a tuple that
    is rebound, never changed: learner code that runs later in the grade (the next checks, the
    report, callbacks) and walks the frames (``sys._getframe``, ``f_back``, ``f_locals``) finds
    only immutable text, never a container of an earlier check's data to rewrite."""
    handle = session.refusal                # refused calls are read from the sealed state,
    at_load = refusal.refused_since(handle, 0)      # which only grows: copies here (tuples)
    done = ()                               # ((i, kind, packed), ...), rebound per check
    shared = ()                             # ((collect function, packed outcome, calls), ...)
    for i, check in enumerate(step.checks):
        if check.runner == "local" or not _runs(check, only):
            continue
        before = refusal.refused_count(handle)
        started = time.perf_counter()
        if check.runner == "python" and check.collect is not None:
            known = [entry for entry in shared if entry[0] is check.collect]
            if not known:
                failure, data = _collect(check, ns)
                outcome = wire.pack(("v", failure) if failure is not None else ("c", data))
                known = [(check.collect, outcome, refusal.refused_since(handle, before))]
                shared = shared + tuple(known)
            _, outcome, calls = known[0]
            kind, value = wire.unpack(outcome)
            entry = (i, kind, wire.pack(value if kind == "c" else
                                        dict(value, id=check.id, title=check.title)))
        elif check.runner == "python" and step.language == "python":
            entry = (i, "v", wire.pack(result(
                check.id, check.title, "error", "the grader's check %r has no collect/judge "
                "phases, so it cannot be judged apart from your code; this is a fault of the "
                "grader" % check.id)))
        else:
            entry = (i, "v", wire.pack(_learner_side(check, ns)))
        timing[i] = round((time.perf_counter() - started) * 1000.0, 1)
        refused = refusal.refused_since(handle, before)
        if check.runner == "python" and check.collect is not None:
            refused = refused + calls       # a shared collect's calls count for each check
        if refused or at_load:
            entry = (i, "v", wire.pack(result(check.id, check.title, "fail",
                                              refusal.message(refused + at_load))))
        done = done + (entry,)
    return done


def _packed_verdicts(verdicts: Dict[int, dict]) -> tuple:
    return tuple((i, "v", wire.pack(v)) for i, v in sorted(verdicts.items()))


def _unpacked(done: tuple):
    """(verdicts, collected) dicts from :func:`_phase_one`'s packed entries."""
    verdicts: Dict[int, dict] = {}
    collected: Dict[int, object] = {}
    for i, kind, text in done:
        (collected if kind == "c" else verdicts)[i] = wire.unpack(text)
    return verdicts, collected


def _collect(check: Check, ns: dict):
    """(None, data) when ``collect`` returned, else (the failure it raised, None)."""
    try:
        return None, check.collect(ns)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **fail.details), None
    except BaseException as err:  # learner code may raise anything, SystemExit included
        _note_error(err)
        return result(check.id, check.title, "fail", _raised(err)), None


def _learner_side(check: Check, ns: dict) -> dict:
    """A page job (``prepare``), or a one-phase ``run`` of a step whose code is not Python (a
    WGSL shader: ``ns`` holds its text, and no learner code runs here). A Python step's
    one-phase check is refused (:func:`_phase_one`): it would be judged beside the learner's
    code."""
    fn = check.prepare if check.runner != "python" else check.run
    if fn is None:
        return result(check.id, check.title, "error", "the grader defines no collect for this check")
    try:
        out = fn(ns)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **fail.details)
    except BaseException as err:  # learner code may raise anything, SystemExit included
        _note_error(err)
        return result(check.id, check.title, "fail", _raised(err))
    if check.runner != "python":
        return result(check.id, check.title, "pending", "runs in the page (%s)" % check.runner,
                      runner=check.runner, job=out)
    return result(check.id, check.title, "pass", out or "")


def _raised(err: BaseException) -> str:
    return "your code raised %s: %s%s%s" % (type(err).__name__, err, _where(err), _base_note(err))


def _stopped(step: Step, err: BaseException) -> Dict[int, dict]:
    """Every check's verdict when grading itself broke down during the learner's phase."""
    return {i: result(c.id, c.title, "error", "grading stopped: %s: %s (did your code change "
                      "Python's builtins or NumPy?)" % (type(err).__name__, err))
            for i, c in enumerate(step.checks) if c.runner != "local"}


def _refused_modules(exercise: Exercise, step: Step) -> dict:
    """Keyword arguments of :func:`isolated`: the step's ``refuse`` list, and the exercise's own
    modules (its checks and expected values are the grader's, never the learner's to call)."""
    package = "nlpcore.lab.exercises." + exercise.id
    own = sorted(n for n in sys.modules if n == package or n.startswith(package + "."))
    return {"refuse": tuple(step.refuse), "own": tuple(own)}


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


# The sealing: one _Sealed, in the code constants of the functions that use it.
_the_sealed = _Sealed()
pristine = refusal.seal(pristine, _SEALED, _the_sealed)
library_changed = refusal.seal(library_changed, _SEALED, _the_sealed)
repair_builtins = refusal.seal(repair_builtins, _SEALED, _the_sealed)
isolated = contextlib.contextmanager(refusal.seal(_isolated, _SEALED, _the_sealed))
del _the_sealed
