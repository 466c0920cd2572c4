"""The exercise framework: steps, checks, learner code in a fresh namespace, and results.

An exercise is a ladder of steps (Predict, Scratch, Compose, Probe a claim, Harden, Break it, Port,
Balance).
Each step holds a statement (Markdown with KaTeX-ready TeX between ``$...$``), starter code,
a reference solution, hints (revealed one at a time by the page) and a list of checks.

A check runs in one of three places, named by ``Check.runner``:

* ``"python"`` -- the default: ``check.run(ns)`` grades the learner's namespace ``ns`` in the
  same Python process (CPython in tests, Pyodide in the page) and returns a result dict.
* any other name, e.g. ``"webgpu"`` -- the check runs partly in the page. ``check.prepare(ns)``
  returns a *job* (plain data, e.g. a dispatch spec); the page hands it to the JS runner
  registered under that name (``registerCheckRunner`` in site/js/exercise.js), which returns
  ``{name: bytes}``; Python then calls ``check.verify(ns, job, outputs)`` for the verdict.
* ``"local"`` checks cannot run in a browser at all (a GPU, PyTorch, Triton). They are listed
  with the command that runs them, never graded by the page, and never count as failures.

A result is a plain dict (see :func:`result`): ``status`` is ``"pass"``, ``"fail"`` (the
learner's code ran and gave a wrong answer, or raised) or ``"error"`` (the check itself could
not run: the code does not compile, a required name is missing, the time limit hit).
"""
from __future__ import annotations

import math
import pathlib
import re
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from .. import tolerances

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
    """One graded property of a step. ``run(ns)`` returns None on pass or raises CheckFailed."""
    id: str
    title: str
    run: Optional[Callable] = None          # python runner: run(ns) -> optional message
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

def load_learner(code: str, required: Sequence[str] = ()) -> dict:
    """Exec ``code`` in a fresh namespace and return it; LearnerError says what went wrong."""
    if not isinstance(code, str):
        raise TypeError("code must be a str of Python source, got %s" % type(code).__name__)
    ns = {"__name__": "learner", "__builtins__": __builtins__}
    try:
        compiled = compile(code, "<your code>", "exec")
    except SyntaxError as err:
        raise LearnerError("your code does not compile: %s (line %s: %s)"
                           % (err.msg, err.lineno, (err.text or "").strip()))
    try:
        exec(compiled, ns)
    except Exception as err:  # learner code may raise anything at import time
        raise LearnerError("your code raised %s while loading: %s%s"
                           % (type(err).__name__, err, _where(err)))
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
    """Call the learner's function; an exception becomes a failure that names the case and
    the input shapes (CheckFailed from nested checks passes through)."""
    try:
        return fn(*args, **kwargs)
    except CheckFailed:
        raise
    except Exception as err:  # learner code may raise anything
        raise CheckFailed("%syour code raised %s: %s%s" % ((context + ": ") if context else "",
                                                         type(err).__name__, err, _where(err)),
                          expected="a result", got=type(err).__name__, shapes=shapes)


def _where(err: BaseException) -> str:
    """' (line N of your code)' for the innermost frame inside the learner's code."""
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == "<your code>":
            line = frame.lineno
    return "" if line is None else " (line %d of your code)" % line


def run_check(check: Check, ns: dict) -> dict:
    """Run one python check and turn its outcome into a result dict."""
    if check.runner == "local":
        return result(check.id, check.title, "local", check.explain, command=check.command,
                      runner="local")
    if check.runner != "python":
        try:
            job = check.prepare(ns)
        except CheckFailed as fail:
            return result(check.id, check.title, "fail", fail.message, runner=check.runner,
                          **fail.details)
        except Exception as err:
            return result(check.id, check.title, "fail", "your code raised %s: %s%s"
                          % (type(err).__name__, err, _where(err)), runner=check.runner)
        return result(check.id, check.title, "pending", "runs in the page (%s)" % check.runner,
                      runner=check.runner, job=job)
    try:
        message = check.run(ns)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, **fail.details)
    except Exception as err:
        return result(check.id, check.title, "fail", "your code raised %s: %s%s"
                      % (type(err).__name__, err, _where(err)))
    return result(check.id, check.title, "pass", message or "")


def grade(exercise: Exercise, step_id: str, code: str) -> dict:
    """Grade one step: {exercise, step, checks: [result...], passed, record, elapsed_ms}."""
    step = exercise.step(step_id)
    start = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")     # NaN/overflow are reported by the checks instead
        try:
            ns = learner_namespace(step, code)
        except LearnerError as err:
            checks = [result(c.id, c.title, "error", str(err)) if c.runner != "local"
                      else run_check(c, {}) for c in step.checks]
            ns = None
        else:
            checks = [run_check(c, ns) for c in step.checks]
        report = None
        if ns is not None and step.report is not None:
            try:
                report = _plain(step.report(ns))
            except Exception as err:  # the report is a courtesy; the checks carry the verdict
                report = {"error": "%s: %s" % (type(err).__name__, err)}
    graded = [c for c in checks if c["status"] != "local"]
    record = {}
    if ns is not None:
        for name in step.record:
            if name in ns:
                record[name] = _plain(ns[name])
    return {
        "exercise": exercise.id, "step": step.id, "checks": checks,
        "passed": bool(graded) and all(c["status"] == "pass" for c in graded),
        "record": record, "report": report,
        "elapsed_ms": round((time.perf_counter() - start) * 1000.0, 1),
    }


def verify_js(exercise: Exercise, step_id: str, check_id: str, code: str, job, outputs) -> dict:
    """Second half of a JS-run check: the page ran ``job`` and hands back ``outputs``."""
    step = exercise.step(step_id)
    check = next((c for c in step.checks if c.id == check_id), None)
    if check is None or check.runner in ("python", "local"):
        raise ValueError("check must name a JS-run check of step %r, got %r" % (step_id, check_id))
    try:
        ns = learner_namespace(step, code)
    except LearnerError as err:
        return result(check.id, check.title, "error", str(err), runner=check.runner)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            message = check.verify(ns, job, outputs)
    except CheckFailed as fail:
        return result(check.id, check.title, "fail", fail.message, runner=check.runner,
                      **fail.details)
    except Exception as err:
        return result(check.id, check.title, "fail", "%s: %s%s"
                      % (type(err).__name__, err, _where(err)), runner=check.runner)
    return result(check.id, check.title, "pass", message or "", runner=check.runner)


# ------------------------------------------------------------------------------------------
# Comparing arrays
# ------------------------------------------------------------------------------------------

def shapes_of(**arrays) -> dict:
    return {name: list(np.shape(a)) for name, a in arrays.items()}


def expect_array(name: str, got, shape, shapes: dict):
    """Fail unless ``got`` is array-like of ``shape``; returns it as an ndarray."""
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
