"""The exercise framework: steps, checks, learner code in a fresh namespace, and results.

An exercise is a ladder of steps (Predict, Scratch, Compose, Probe a claim, Harden, Break it, Port,
Balance).
Each step holds a statement (Markdown with KaTeX-ready TeX between ``$...$``), starter code,
a reference solution, hints (revealed one at a time by the page) and a list of checks.

A check runs in one of three places, named by ``Check.runner``:

* ``"python"`` -- the default, in two forms. A check with ``collect`` and ``judge`` grades in two
  phases: ``collect(ns)`` calls the learner's code and returns plain data (arrays copied out,
  numbers, strings); then every change the learner's code made to the interpreter is undone
  (:mod:`nlpcore.lab.sandbox`) and ``judge(collected)`` computes the expected values with the
  untouched library and compares. Expected values therefore do not exist while learner code
  runs: it can neither read them (frame walking) nor change how they are computed. A check with
  only ``run(ns)`` does both in one call while the learner's code is live (simpler; it still
  gets the undo after the grade, the captured output and the BaseException handling).
* any other name, e.g. ``"webgpu"`` -- the check runs partly in the page. ``check.prepare(ns)``
  returns a *job* (plain data, e.g. a dispatch spec); the page hands it to the JS runner
  registered under that name (``registerCheckRunner`` in site/js/exercise.js), which returns
  ``{name: bytes}``; Python then calls ``check.verify(ns, job, outputs)`` for the verdict.
* ``"local"`` checks cannot run in a browser at all (a GPU, PyTorch, Triton). They are listed
  with the command that runs them, never graded by the page, and never count as failures.

A result is a plain dict (see :func:`result`): ``status`` is ``"pass"``, ``"fail"`` (the
learner's code ran and gave a wrong answer, or raised -- any BaseException, SystemExit
included) or ``"error"`` (the check itself could not run: the code does not compile, a required
name is missing, the time limit hit).

Isolation (:func:`grade`): learner code runs with its output captured (``stdout``, ``stderr``,
``traceback`` in the grade), with the library's kernels refused where a step teaches a kernel
(``Step.refuse``, :func:`refusing`), and the interpreter is restored to the state taken before
the first grade once the learner's part is over. When that restore had anything to undo, the
page also replaces its Python worker (site/js/runtime.js), so what the restore cannot see does
not outlive the grade either.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import math
import os
import pathlib
import re
import sys
import time
import traceback
import tracemalloc
import types
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from .. import tolerances
from . import sandbox

LADDER_KINDS = ("Predict", "Scratch", "Compose", "Probe a claim", "Harden", "Break it", "Port", "Balance")
LANGUAGES = ("python", "wgsl")  # what a step's learner code is written in

# Tolerances per dtype of the computation being checked (nlpcore.tolerances.GRADER):
# |got - want| <= atol + rtol · |want| at each entry. float16 checks use the low-precision bar
# instead (see ``flash_bar``).
TOLERANCES = tolerances.GRADER


class Folder:
    """The files of one exercise folder (``nlpcore/lab/exercises/<id>/``): statements as
    ``<step>.md``, starters and solutions as ``<step>_starter.<ext>`` / ``<step>_solution.<ext>``.
    They ship inside the wheel, so CPython and Pyodide read the same files."""

    def __init__(self, module_file: str):
        self.path = pathlib.Path(module_file).resolve().parent

    def text(self, name: str) -> str:
        """Text of the file ``name`` in this folder; FileNotFoundError names the full path."""
        path = self.path / name
        if not path.is_file():
            raise FileNotFoundError("exercise file %s is missing" % path)
        return path.read_text(encoding="utf-8")

    def statement(self, step_id: str, **values) -> str:
        """The Markdown statement of a step (``<step>.md``), without surrounding blank lines, with
        each ``{{name}}`` replaced by ``values[name]`` (numbers that come from code, e.g.
        :mod:`nlpcore.hardware`); KeyError names a placeholder that has no value."""
        text = self.text(step_id + ".md").strip()

        def value(match):
            if match.group(1) not in values:
                raise KeyError("%s.md uses {{%s}}, which build() gives no value"
                               % (step_id, match.group(1)))
            return str(values[match.group(1)])
        return re.sub(r"\{\{(\w+)\}\}", value, text)

    def starter(self, step_id: str, ext: str = "py") -> str:
        """The starter of a step: ``<step>_starter.<ext>`` when the folder has one, else the
        solution with its marked regions replaced (:func:`starter_from_solution`)."""
        if (self.path / ("%s_starter.%s" % (step_id, ext))).is_file():
            return self.text("%s_starter.%s" % (step_id, ext))
        return starter_from_solution(self.text("%s_solution.%s" % (step_id, ext)))

    def solution(self, step_id: str, ext: str = "py") -> str:
        """The reference solution of a step, with the starter markers removed."""
        return solution_text(self.text("%s_solution.%s" % (step_id, ext)))


# A solution file may mark the lines a starter leaves out. Between a line ending in
# ``SOLUTION BEGIN`` and one ending in ``SOLUTION END`` (after the language's comment prefix,
# ``#`` or ``//``), the solution's lines are kept in the solution and dropped from the starter;
# lines ending in ``STARTER`` (``    # TODO: ...  STARTER``) inside the region appear in the starter
# only, with the comment prefix and the marker removed. Nothing else differs.
_BEGIN = re.compile(r"^\s*(?:#|//)\s*SOLUTION BEGIN\s*$")
_END = re.compile(r"^\s*(?:#|//)\s*SOLUTION END\s*$")
_STARTER = re.compile(r"^(\s*)(?:#|//) ?(.*?)\s*STARTER\s*$")


def _regions(text: str):
    """Yield (line, where) with where in {"both", "solution", "starter", "marker"}."""
    inside = False
    for number, line in enumerate(text.splitlines(True), 1):
        if _BEGIN.match(line):
            if inside:
                raise ValueError("line %d: SOLUTION BEGIN inside a region" % number)
            inside = True
            yield line, "marker"
        elif _END.match(line):
            if not inside:
                raise ValueError("line %d: SOLUTION END without SOLUTION BEGIN" % number)
            inside = False
            yield line, "marker"
        elif inside and _STARTER.match(line):
            yield line, "starter"
        else:
            yield line, "solution" if inside else "both"
    if inside:
        raise ValueError("a SOLUTION BEGIN region is not closed by SOLUTION END")


def starter_from_solution(text: str) -> str:
    """The starter a marked solution implies: solution-only lines dropped, STARTER lines kept
    without their comment prefix and marker."""
    out = []
    for line, where in _regions(text):
        if where == "both":
            out.append(line)
        elif where == "starter":
            indent, body = _STARTER.match(line).groups()
            out.append((indent + body).rstrip() + "\n")
    return "".join(out)


def solution_text(text: str) -> str:
    """The solution with its markers and STARTER lines removed."""
    return "".join(line for line, where in _regions(text) if where in ("both", "solution"))


class CheckFailed(Exception):
    """Raised inside a check body to report a failure with its details."""

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.message = message
        self.details = details


class LearnerError(Exception):
    """Learner code could not be loaded (syntax error, exception at import, missing name)."""


class RefusedCall(Exception):
    """Raised when learner code calls a library kernel that the step asks it to write."""


def result(check_id: str, title: str, status: str, message: str = "", **details) -> dict:
    """One check's verdict, as plain data for the page.

    details may hold: expected, got, tolerance, max_abs_err, where, shapes (dict name ->
    shape list), table (``{"columns": [...], "rows": [[...], ...]}``), parts (``{part:
    "right" | "wrong"}``, what a Predict step shows before the answer), runner, command.
    """
    if status not in ("pass", "fail", "error", "pending", "local"):
        raise ValueError("status must be pass|fail|error|pending|local, got %r" % (status,))
    out = {"id": check_id, "title": title, "status": status, "message": message}
    for key, value in details.items():
        if value is not None:
            out[key] = _plain(value)
    return out


def _plain(value):
    """Convert NumPy scalars/arrays and tuples into JSON-friendly Python values."""
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.floating, float)):
        v = float(value)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Check:
    """One graded property of a step: ``collect(ns)`` then ``judge(collected)`` (two phases, see
    the module docstring), or ``run(ns)``; each returns a message or raises CheckFailed."""
    id: str
    title: str
    run: Optional[Callable] = None          # python runner: run(ns) -> optional message
    collect: Optional[Callable] = None      # two phases: collect(ns) -> plain data ...
    judge: Optional[Callable] = None        # ... judge(collected) -> optional message
    runner: str = "python"                  # "python", a JS runner name, or "local"
    prepare: Optional[Callable] = None      # JS runners: prepare(ns) -> job (plain data)
    verify: Optional[Callable] = None       # JS runners: verify(ns, job, outputs) -> message
    command: str = ""                       # "local" checks: the command that runs them
    explain: str = ""                       # "local" checks: why they cannot run in a browser


@dataclass(frozen=True)
class Step:
    """One rung of an exercise's ladder."""
    id: str
    kind: str                               # one of LADDER_KINDS
    title: str
    minutes: int
    statement: str                          # Markdown + TeX
    starter: str                            # code shown in the editor at first
    solution: str                           # reference solution (passes every check)
    checks: Sequence[Check]
    hints: Sequence[str] = ()
    required: Sequence[str] = ()            # names the learner's code must define
    record: Sequence[str] = ()              # names whose values are saved with progress
    report: Optional[Callable] = None       # report(ns) -> dict shown below the checks: a
                                            # "table" (columns, rows) and optional "title"
    language: str = "python"                # "python": code is exec'd; "wgsl": code is shader
                                            # text, checks get ns = {"source": code}
    refuse: Sequence[str] = ()              # modules whose functions learner code may not
                                            # call (the kernels this step asks it to write)

    def __post_init__(self):
        if self.kind not in LADDER_KINDS:
            raise ValueError("Step.kind must be one of %s, got %r" % (LADDER_KINDS, self.kind))
        if self.language not in LANGUAGES:
            raise ValueError("Step.language must be one of %s, got %r" % (LANGUAGES, self.language))


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    tier: str                               # "browser", "systems · wgsl" (WebGPU) or "gpu" (local)
    minutes: int
    summary: str
    steps: Sequence[Step]
    sources: Sequence[str] = ()
    extra: Dict = field(default_factory=dict)  # page-specific data (plots, commands, ...)

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise ValueError("step must be one of %s for exercise %r, got %r"
                         % ([s.id for s in self.steps], self.id, step_id))

    def to_data(self) -> dict:
        """What the site needs to render the exercise (no Python objects)."""
        return {
            "id": self.id, "title": self.title, "tier": self.tier, "minutes": self.minutes,
            "summary": self.summary, "sources": list(self.sources), "extra": _plain(self.extra),
            "ladder": [s.kind for s in self.steps],
            "steps": [{
                "id": s.id, "kind": s.kind, "title": s.title, "minutes": s.minutes,
                "statement": s.statement, "starter": s.starter, "solution": s.solution,
                "hints": list(s.hints), "record": list(s.record), "language": s.language,
                "checks": [{"id": c.id, "title": c.title, "runner": c.runner,
                            "command": c.command, "explain": c.explain} for c in s.checks],
            } for s in self.steps],
        }


# ------------------------------------------------------------------------------------------
# Learner code
# ------------------------------------------------------------------------------------------

# Library modules whose kernels a step that teaches a kernel refuses (Step.refuse): the naive
# oracle, the tiled kernels and the monoid. Modules missing from this build are skipped.
LIBRARY_KERNELS = ("nlpcore.kernels.reference", "nlpcore.kernels.flash_np",
                   "nlpcore.kernels.online_softmax", "nlpcore.kernels.split_k",
                   "nlpcore.kernels.ring", "nlpcore.kernels.flash_wgsl_mirror")
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
    def refused(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if ((not strict or not session.calls_in_flight)
                and os.path.abspath(caller).startswith(_PACKAGE_DIR + os.sep)):
            return fn(*args, **kwargs)
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
        _repair()
        _note_error(err)
        raise LearnerError("your code raised %s while loading: %s%s%s"
                           % (type(err).__name__, err, _where(err), _base_note(err)))
    _repair()
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
        _repair()
        raise
    except BaseException as err:  # learner code may raise anything
        _repair()
        _note_error(err)
        raise CheckFailed("%syour code raised %s: %s%s%s"
                          % ((context + ": ") if context else "", type(err).__name__, err,
                             _where(err), _base_note(err)),
                          expected="a result", got=type(err).__name__, shapes=shapes)
    finally:
        if session is not None:
            session.calls_in_flight -= 1
    _repair()
    return out


def _repair():
    """Builtins back to normal after learner code returns (see Snapshot.repair_builtins)."""
    if _grader.snapshot is not None:
        _grader.snapshot.repair_builtins()


def peak_memory(fn, *args, **kwargs):
    """(fn(*args, **kwargs), peak bytes allocated during the call), measured with tracemalloc
    (NumPy reports its array buffers to it, in CPython and in Pyodide). CheckFailed if the call
    stops tracemalloc, which would hide what it allocates."""
    outer = tracemalloc.is_tracing()
    if outer:
        tracemalloc.stop()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn(*args, **kwargs)
        if not tracemalloc.is_tracing():
            raise CheckFailed("your code stopped tracemalloc, which measures the memory it uses",
                              expected="tracemalloc left running", got="stopped")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        if outer:
            tracemalloc.start()
    return out, peak


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
            _repair()
            checks, collected = _stopped(step, err), {}
        else:
            try:
                _phase_one(step, ns, session, checks, collected)
                report, record = _report_and_record(step, ns)
            except BaseException as err:  # the grader itself was broken by the learner's code
                _repair()
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
            report = _plain(step.report(ns))
        except BaseException as err:
            report = {"error": "%s: %s" % (type(err).__name__, err)}
    record = {}
    for name in step.record:
        if name in ns:
            try:
                record[name] = _plain(ns[name])
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
        return _verdict(check, check.verify, ns, job, outputs, runner=check.runner)


# ------------------------------------------------------------------------------------------
# Comparing arrays
# ------------------------------------------------------------------------------------------

class NotAnArray:
    """What the learner returned where an array was expected, described for the judge."""

    def __init__(self, what: str):
        self.what = what


def plain_array(got):
    """Phase 1 (collect): the learner's array as a copy of plain ``np.ndarray`` type with a
    number or bool dtype -- nothing the learner defined survives into the judge -- or a
    :class:`NotAnArray` saying what it was instead."""
    if got is None or isinstance(got, (str, bytes, dict)):
        return NotAnArray(type(got).__name__)
    try:
        arr = np.array(got)
    except BaseException as err:  # learner objects may raise anything from __array__/__len__
        _repair()
        return NotAnArray("%s (converting it raised %s)" % (type(got).__name__,
                                                            type(err).__name__))
    _repair()
    if type(arr) is not np.ndarray or arr.dtype.kind not in "biuf":
        return NotAnArray("%s of dtype %s" % (type(got).__name__, getattr(arr, "dtype", "?")))
    return arr


def plain_tuple(out, names: Sequence[str], what: str):
    """Phase 1: the learner's tuple of arrays as a tuple of :func:`plain_array`; CheckFailed
    unless it is a tuple or list of ``len(names)``."""
    if not isinstance(out, (tuple, list)) or len(out) != len(names):
        raise CheckFailed("%s must return (%s)" % (what, ", ".join(names)),
                          expected="(%s)" % ", ".join(names), got=type(out).__name__)
    return tuple(plain_array(x) for x in out)


def shapes_of(**arrays) -> dict:
    return {name: list(np.shape(a)) for name, a in arrays.items()}


def expect_array(name: str, got, shape, shapes: dict):
    """Fail unless ``got`` is array-like of ``shape``; returns it as an ndarray."""
    if isinstance(got, NotAnArray):
        raise CheckFailed("%s: expected an array of shape %s, got %s" % (name, list(shape), got.what),
                          expected="array of shape %s" % list(shape), got=got.what, shapes=shapes)
    if got is None or isinstance(got, (str, dict)):
        raise CheckFailed("%s: expected an array of shape %s, got %s"
                          % (name, list(shape), type(got).__name__),
                          expected="array of shape %s" % list(shape),
                          got=type(got).__name__, shapes=shapes)
    arr = np.asarray(got)
    if tuple(arr.shape) != tuple(shape):
        raise CheckFailed("%s has the wrong shape" % name,
                          expected="shape %s" % list(shape), got="shape %s" % list(arr.shape),
                          shapes=shapes)
    return arr


def assert_close(name: str, got, want, *, shapes: dict, dtype: str = "float32",
                 atol: float = None, rtol: float = None, context: str = "") -> float:
    """Fail with expected/got/tolerance/max |Δ|/where/shapes unless got ≈ want.

    Infinities must match exactly (a fully masked row's lse is -inf); NaN never passes.
    Returns max |Δ| over finite entries.
    """
    tol = {"atol": TOLERANCES[dtype].atol if atol is None else atol,
           "rtol": TOLERANCES[dtype].rtol if rtol is None else rtol}
    want = np.asarray(want, dtype=np.float64)
    got = expect_array(name, got, want.shape, shapes)
    if not np.issubdtype(got.dtype, np.number) and got.dtype != np.bool_:
        raise CheckFailed("%s must hold numbers, got dtype %s" % (name, got.dtype),
                          shapes=shapes)
    got = got.astype(np.float64)
    tol_text = "|Δ| <= %g + %g·|expected| (%s)" % (tol["atol"], tol["rtol"], dtype)
    prefix = (context + ": ") if context else ""
    nan = np.isnan(got) & ~np.isnan(want)
    if nan.any():
        idx = tuple(int(i) for i in np.argwhere(nan)[0])
        raise CheckFailed("%s%s contains NaN (%d entries), first at %s"
                          % (prefix, name, int(nan.sum()), list(idx)),
                          expected="%s%s = %.6g" % (name, list(idx), want[idx]), got="nan",
                          tolerance=tol_text, max_abs_err="nan", where=list(idx), shapes=shapes)
    inf_mismatch = (np.isinf(got) | np.isinf(want)) & (got != want)
    if inf_mismatch.any():
        idx = tuple(int(i) for i in np.argwhere(inf_mismatch)[0])
        raise CheckFailed("%s%s: infinities differ at %s" % (prefix, name, list(idx)),
                          expected="%s%s = %s" % (name, list(idx), _num(want[idx])),
                          got=_num(got[idx]), tolerance=tol_text, max_abs_err="inf",
                          where=list(idx), shapes=shapes)
    finite = np.isfinite(want)
    delta = np.where(finite, np.abs(got - np.where(finite, want, 0.0)), 0.0)
    bound = tol["atol"] + tol["rtol"] * np.abs(np.where(finite, want, 0.0))
    max_abs = float(delta.max()) if delta.size else 0.0
    bad = delta > bound
    if bad.any():
        ratio = np.where(bad, delta / bound, 0.0)
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        raise CheckFailed("%s%s differs from the reference in %d of %d entries"
                          % (prefix, name, int(bad.sum()), bad.size),
                          expected="%s%s = %.7g" % (name, list(idx), want[idx]),
                          got="%.7g" % got[idx], tolerance=tol_text, max_abs_err=max_abs,
                          where=list(idx), shapes=shapes)
    return max_abs


def _num(x) -> str:
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%.7g" % x


def flash_bar(name: str, got, want64, naive, *, shapes: dict,
              factor: float = tolerances.LOW_PRECISION_FACTOR, extra: float = 1e-3,
              context: str = ""):
    """The flash-attention test bar for low precision: err(got) <= factor·err(naive) + extra
    (:func:`nlpcore.tolerances.low_precision_bound`).

    ``want64`` is a float64 reference; ``naive`` is the plain computation in the same low
    precision. Both errors are max |Δ| against ``want64``.
    """
    want64 = np.asarray(want64, dtype=np.float64)
    got = expect_array(name, got, want64.shape, shapes)
    g = got.astype(np.float64)
    if np.isnan(g).any():
        idx = tuple(int(i) for i in np.argwhere(np.isnan(g))[0])
        raise CheckFailed("%s%s contains NaN" % ((context + ": ") if context else "", name),
                          expected="finite values", got="nan at %s" % list(idx),
                          max_abs_err="nan", where=list(idx), shapes=shapes)
    finite = np.isfinite(want64)
    err = float(np.abs(np.where(finite, g - want64, 0.0)).max())
    base = float(np.abs(np.where(finite, np.asarray(naive, np.float64) - want64, 0.0)).max())
    bound = tolerances.low_precision_bound(base, extra, factor)
    if err > bound:
        delta = np.abs(np.where(finite, g - want64, 0.0))
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(delta)), delta.shape))
        raise CheckFailed("%s%s is less accurate than the flash-attention bar allows"
                          % ((context + ": ") if context else "", name),
                          expected="%s%s = %.6g (float64 reference)" % (name, list(idx),
                                                                        want64[idx]),
                          got="%.6g" % g[idx],
                          tolerance="max|Δ| <= %g × %.3g (naive, same precision) + %g"
                          % (factor, base, extra),
                          max_abs_err=err, where=list(idx), shapes=shapes)
    return err


def expect_number(name: str, value) -> float:
    """The learner's number as a float; fail unless it is a finite real number."""
    if value is None:
        raise CheckFailed("%s is still None: replace it with your answer" % name,
                          expected="a finite number", got="None")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CheckFailed("%s must be a number, got %s" % (name, type(value).__name__),
                          expected="a finite number", got=repr(value)[:80])
    v = float(value)
    if not math.isfinite(v):
        raise CheckFailed("%s must be finite" % name, expected="a finite number", got=_num(v))
    return v


def relative_close(name: str, got: float, want: float, rtol: float, *, what: str = "") -> str:
    """Fail unless |got - want| <= rtol·|want|; return a message stating both numbers."""
    got = expect_number(name, got)
    err = abs(got - want) / max(abs(want), 1e-300)
    text = "%s = %.6g, %s %.6g (relative error %.2g%%)" % (name, got, what or "expected",
                                                            want, 100 * err)
    if err > rtol:
        raise CheckFailed(text, expected="%.6g" % want, got="%.6g" % got,
                          tolerance="relative error <= %g%%" % (100 * rtol),
                          max_abs_err=abs(got - want))
    return text


def rng(seed: int):
    return np.random.RandomState(seed)


# ------------------------------------------------------------------------------------------
# Memory a tiled kernel may use
# ------------------------------------------------------------------------------------------

IO_COPIES = 4        # a tiled kernel may hold this many copies of its inputs and outputs ...
TILE_BUFFERS = 8     # ... plus this many (Br, Bc) float64 temporaries (scores, exp, masks)


def tiled_budget(io_bytes: int, block_q: int, block_k: int) -> int:
    """Bytes a tiled attention kernel may allocate at peak: copies of its inputs and outputs
    (casting to an accumulation dtype copies them) and a few tile-sized temporaries. An array
    of Nq×Nk scores -- or of one query tile against all Nk keys -- does not fit when the sizes
    are chosen as the tiled checks choose them (:func:`assert_tiled`)."""
    return IO_COPIES * io_bytes + TILE_BUFFERS * block_q * block_k * 8


def assert_tiled(peak: int, *, n_q: int, n_k: int, io_bytes: int, block_q: int, block_k: int,
                 context: str, shapes: dict) -> str:
    """Fail when ``peak`` (bytes, :func:`peak_memory`) exceeds :func:`tiled_budget`."""
    budget = tiled_budget(io_bytes, block_q, block_k)
    full = n_q * n_k * 8
    mib = 1.0 / (1 << 20)
    if peak > budget:
        raise CheckFailed(
            "%s: your code allocated %.2f MiB at peak, more than a tiled kernel needs (%.2f MiB). "
            "A full %d×%d score matrix is %.2f MiB and one %d-row tile against all %d keys is "
            "%.2f MiB: compute scores one (block_q × block_k) tile at a time and carry the row "
            "statistics (m, l) between key tiles instead"
            % (context, peak * mib, budget * mib, n_q, n_k, full * mib, block_q, n_k,
               block_q * n_k * 8 * mib),
            expected="peak <= %.2f MiB (%d × inputs and outputs + %d tiles of %d×%d float64)"
            % (budget * mib, IO_COPIES, TILE_BUFFERS, block_q, block_k),
            got="%.2f MiB" % (peak * mib), shapes=shapes)
    return ("%s: %.2f MiB at peak (budget %.2f MiB; the full score matrix would be %.2f MiB)"
            % (context, peak * mib, budget * mib, full * mib))
