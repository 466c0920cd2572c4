"""Auto-graded exercises and the guided lab: one source of truth for the site.

Each exercise is defined here in Python -- title, tier, ladder of steps, time, statement (Markdown
with KaTeX-ready TeX), starter code, checks, hints and a reference solution -- and graded here,
in CPython for the tests and in Pyodide for the page (through ``nlpcore.web.exercises``).

- :func:`exercise` / :func:`exercises` -- the registry: one folder per exercise under
  ``nlpcore/lab/exercises/`` (ids: online-softmax, backward, triton, wgsl, break-it, ring). The
  function :func:`exercises` hides the package's name as an attribute of ``nlpcore.lab``;
  import the package by its full name, ``nlpcore.lab.exercises``.
- :func:`grade` -- grade one step of one exercise for a piece of learner code.
- :func:`export_site_data` -- what build.py writes to dist/data/exercises.json.

Adding an exercise: add a folder ``nlpcore/lab/exercises/<id>/`` (statements, starters,
solutions and checks together; see the README.md there). Checks that must run in the page (WebGPU) use
``Check(runner="webgpu", prepare=..., verify=...)``; see :mod:`nlpcore.lab.model`. Exercises
import only :mod:`nlpcore.lab.model` and :mod:`nlpcore.lab.judging`; :mod:`nlpcore.lab.session`
runs and judges them.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Dict, List, Optional

from .exercises import discover as _discover, find as _find
from . import verdict as _verdict
from .model import Exercise
from .session import library_changed
from .verdict import grade as _grade, verify_js as _verify_js

# Whether the learner's phase of a grade runs in a separate process (CPython; not Pyodide).
SEPARATE_PROCESS = sys.platform != "emscripten" and hasattr(os, "fork")

_cache: Dict[str, Exercise] = {}


def _available():
    return _discover()


def exercise(ex_id: str) -> Exercise:
    """The exercise with this id; ValueError names the known ids otherwise."""
    if ex_id in _cache:
        return _cache[ex_id]
    name = _find(ex_id)                     # that folder only
    if name is None:
        raise ValueError("exercise must be one of %s, got %r"
                         % (sorted(ex for ex, _ in _available()), ex_id))
    ex = importlib.import_module(name).build()
    if ex.id != ex_id:
        raise RuntimeError("module %s builds exercise %r, not %r" % (name, ex.id, ex_id))
    _cache[ex_id] = ex
    library_changed()           # grading's snapshot must include the new exercise's objects
    return ex


def exercises() -> List[Exercise]:
    return [exercise(ex_id) for ex_id, _ in _available()]


def grade(ex_id: str, step_id: str, code: str, seed: Optional[int] = None) -> dict:
    """Grade ``code`` for one step: {passed, checks [{id, title, status, message, ...}], stdout,
    stderr, traceback, restored, record, report, seed, elapsed_ms}.

    In CPython the learner's code runs in a fresh Python process with a time limit
    (:mod:`nlpcore.lab.runner`) and this interpreter, which never runs it, judges what came back
    (:func:`nlpcore.lab.verdict.judge`). Where processes cannot be started (Pyodide) both phases
    run in this interpreter (:func:`nlpcore.lab.verdict.grade`); the page instead judges in a
    second worker (:mod:`nlpcore.web.exercises`)."""
    ex = exercise(ex_id)
    ex.step(step_id)                        # ValueError names the steps
    if not isinstance(code, str):
        raise TypeError("code must be a str of source, got %s" % type(code).__name__)
    seed = _verdict.new_seed() if seed is None else seed
    if not SEPARATE_PROCESS:
        return _grade(ex, step_id, code, seed)
    from . import runner
    return _verdict.judge(ex, step_id, runner.collect(ex_id, step_id, code, seed))


def verify_js(ex_id: str, step_id: str, check_id: str, code: str, job, outputs) -> dict:
    return _verify_js(exercise(ex_id), step_id, check_id, code, job, outputs)


def export_site_data() -> dict:
    """Everything the pages need: exercises (statements, starters, solutions, checks) and the
    guided lab's steps. Plain JSON-ready data."""
    from . import guided
    return {
        "version": 1,
        "exercises": [ex.to_data() for ex in exercises()],
        "lab": guided.export(),
    }
