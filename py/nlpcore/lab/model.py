"""The exercise model: folders, solution regions and starters, Check / Step / Exercise, and
one check's result.

An exercise is a ladder of steps (Predict, Scratch, Compose, Probe a claim, Harden, Break it,
Port, Balance). Each step holds a statement (Markdown with KaTeX-ready TeX between ``$...$``),
starter code, a reference solution, hints (revealed one at a time by the page) and a list of
checks. Exercises import this module and :mod:`nlpcore.lab.judging`, nothing else of the grader.

A check runs in one of three places, named by ``Check.runner``:

* ``"python"`` -- in two phases. ``collect(ns)`` calls the learner's code and returns plain
  data (arrays copied out, numbers, strings, :class:`CheckFailed`); it runs where the learner's
  code runs. ``judge(collected)`` computes the expected values with the untouched library and
  compares; it runs in an interpreter that never ran learner code (:mod:`nlpcore.lab.session`).
* any other name, e.g. ``"webgpu"`` -- the check runs partly in the page. ``prepare(ns)``
  returns a *job* (plain data, e.g. a dispatch spec) where the learner's code runs; the page
  hands it to the JS runner registered under that name, which returns ``{name: bytes}``; the
  judge then calls ``verify(job, outputs)`` for the verdict.
* ``"local"`` checks cannot run in a browser at all (a GPU, PyTorch, Triton). They are listed
  with the command that runs them, never graded by the page, and never count as failures.

A result is a plain dict (see :func:`result`): ``status`` is ``"pass"``, ``"fail"`` (the
learner's code ran and gave a wrong answer, or raised -- any BaseException, SystemExit
included) or ``"error"`` (the check itself could not run: the code does not compile, a required
name is missing, the time limit hit, the grader broke).
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence

from ..plain import to_plain
from ..refusal import RefusedCall  # noqa: F401  (part of the model's vocabulary)

LADDER_KINDS = ("Predict", "Scratch", "Compose", "Probe a claim", "Harden", "Break it", "Port", "Balance")
LANGUAGES = ("python", "wgsl")  # what a step's learner code is written in

# Library modules whose kernels a step that teaches a kernel refuses (Step.refuse): the naive
# oracle, the tiled kernels and the monoid. Modules missing from this build are skipped.
LIBRARY_KERNELS = ("nlpcore.kernels.reference", "nlpcore.kernels.flash_np",
                   "nlpcore.kernels.online_softmax", "nlpcore.kernels.split_k",
                   "nlpcore.kernels.ring", "nlpcore.kernels.flash_wgsl_mirror")


class _Inputs:
    """The grade under way: checks derive their inputs from its seed (``judging.rng``), the same
    on the learner's side and the judge's. Kept out of the snapshot (``sandbox_skip``)."""
    sandbox_skip = True

    def __init__(self):
        self.seed = 0
        self.measured = False   # learner side: its process's peak memory is read from outside
        self.growth = None      # judge side: that peak's growth in bytes (None: not measured)


_INPUTS = _Inputs()


def set_outside(growth) -> None:
    """Judge side: the learner process's peak memory growth in bytes as the operating system
    counted it (:mod:`nlpcore.lab.runner`), or None where it was not measured."""
    _INPUTS.growth = None if growth is None else int(growth)


def outside_growth():
    return _INPUTS.growth


def set_seed(seed: int) -> None:
    """The seed of the grade under way (an int >= 0)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError("seed must be an int >= 0, got %r" % (seed,))
    _INPUTS.seed = seed


def grade_seed() -> int:
    return _INPUTS.seed


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
    """Learner code could not be loaded (syntax error, exception at import, missing name).
    ``problem``: where, as data for the page ({kind: "compile" | "load", line, error, newer}),
    or None (a missing name has no line)."""

    def __init__(self, message: str, problem: Optional[dict] = None):
        super().__init__(message)
        self.problem = problem


# A check's status: graded (pass, fail, error), run by the page (pending), run on the learner's
# own machine (local), or not run because the grade refused the answer (not-run: a Predict step's
# incomplete prediction, see nlpcore.lab.verdict.finish), or waiting for the page's compiler
# (waiting: a WGSL step's Python check, until conclude sees the shader compiled; verdict.WAITING).
STATUSES = ("pass", "fail", "error", "pending", "local", "not-run", "waiting")


def result(check_id: str, title: str, status: str, message: str = "", **details) -> dict:
    """One check's verdict, as plain data for the page.

    details may hold: expected, got, tolerance, max_abs_err, where, shapes (dict name ->
    shape list), table (``{"columns": [...], "rows": [[...], ...]}``), parts (``{part:
    "right" | "wrong"}``, what a Predict step shows before the answer), runner, command.
    """
    if status not in STATUSES:
        raise ValueError("status must be %s, got %r" % ("|".join(STATUSES), status))
    out = {"id": check_id, "title": title, "status": status, "message": message}
    for key, value in details.items():
        if value is not None:
            out[key] = to_plain(value)
    return out


@dataclass(frozen=True)
class Check:
    """One graded property of a step: ``collect(ns)`` then ``judge(collected)`` (two phases, see
    the module docstring), or ``run(ns)``; each returns a message or raises CheckFailed."""
    id: str
    title: str
    run: Optional[Callable] = None          # one phase, run(ns) -> message: WGSL steps only
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
            "summary": self.summary, "sources": list(self.sources), "extra": to_plain(self.extra),
            "ladder": [s.kind for s in self.steps],
            "steps": [{
                "id": s.id, "kind": s.kind, "title": s.title, "minutes": s.minutes,
                "statement": s.statement, "starter": s.starter,
                # A Predict step's solution is its answer: not sent with the page's data; the
                # page asks Python for it once a first prediction is recorded (solution_held).
                "solution": None if s.kind == "Predict" else s.solution,
                "solution_held": s.kind == "Predict",
                "hints": list(s.hints), "record": list(s.record), "language": s.language,
                "checks": [{"id": c.id, "title": c.title, "runner": c.runner,
                            "command": c.command, "explain": c.explain} for c in s.checks],
            } for s in self.steps],
        }


# ------------------------------------------------------------------------------------------
# Learner code
# ------------------------------------------------------------------------------------------
