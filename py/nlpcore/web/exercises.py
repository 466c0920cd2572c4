"""The exercise pages' door into Python (called through :func:`nlpcore.web.call`).

    exercises.catalog()                                  -> ids, titles, steps (summary)
    exercises.prepare(exercise)                          -> its step ids, once its graders are
                                                            imported (the judge's boot)
    exercises.solution(exercise, step)                   -> the step's reference solution (a
                                                            Predict step's is left out of the
                                                            page's data: it holds the answer)
    exercises.collect(exercise, step, code, only=None, seed=None)
                                                         -> {phase, restored}: the learner's half of a
                                                            grade (the worker that runs learner code;
                                                            only: check ids to run alone)
    exercises.judge(exercise, step, phase)               -> the grade {checks, passed, record, report,
                                                            elapsed_ms, stdout, stderr, traceback,
                                                            restored, seed} (the judge worker)
    exercises.conclude(exercise, step, code, grade, ran) -> the finished grade after the page ran
                                                            the pending (GPU) jobs (judge worker)
    exercises.grade(exercise, step, code)                -> both halves in one worker
    exercises.scratch(exercise, step, definitions, code, keep=False, reset=False)
                                                         -> {stdout, stderr, traceback, value,
                                                            plot, runs, restored, elapsed_ms}:
                                                            runs code against the learner's
                                                            definitions, ungraded (with keep,
                                                            in a namespace kept until reset)
    exercises.verify(exercise, step, check, code, job, outputs)
                                                         -> one check's verdict after the page ran
                                                            its job (JS-run checks, e.g. WebGPU)
    exercises.lab_check(step, answer, observed=None)     -> a guided-lab answer's verdict
    exercises.lab_timing_spec(n, kernel)                 -> the dispatch spec the lab times on
                                                            the learner's GPU (tiled or naive)

Learner code arrives as a plain string and runs with ``exec`` in a fresh namespace (see
:func:`nlpcore.lab.session.load_learner`); whatever it changes in the interpreter is undone
after each call (:func:`nlpcore.lab.session.isolated`) and listed in ``restored``; when that
list is not empty the page replaces its worker (js/runtime.js, which also enforces the time
limit). A grade carries the learner's ``stdout``, ``stderr`` and ``traceback``. Must run in
Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""
from __future__ import annotations

import ast
import linecache
import time
import traceback as _traceback
from typing import Any, Dict, Optional

from .. import lab
from ..lab import guided, session, verdict, wire

__all__ = ["catalog", "prepare", "solution", "grade", "collect", "judge", "conclude", "scratch", "verify", "lab_check",
           "lab_timing_spec"]

LEARNER_FILE = "<your code>"  # the file name session.load_learner compiles the learner's code as
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


def prepare(exercise: str) -> list:
    """Build one exercise, importing its graders and no other exercise's (the judge worker does
    it while it boots, so that the first grade does not); returns its step ids."""
    return [s.id for s in lab.exercise(_str(exercise, "exercise")).steps]


def solution(exercise: str, step: str) -> str:
    """The reference solution of one step. A Predict step's holds the answer, so the build
    leaves it out of data/exercises.json (``solution_held``, Exercise.to_data) and the page asks
    for it here only once the learner's first prediction is recorded (js/exercise-predict.js)."""
    return lab.exercise(_str(exercise, "exercise")).step(_str(step, "step")).solution


def grade(exercise: str, step: str, code: str) -> Dict[str, Any]:
    """Grade ``code`` for one step of one exercise; see nlpcore.lab.grade (in Pyodide: nlpcore.lab.verdict.grade)."""
    return lab.grade(_str(exercise, "exercise"), _str(step, "step"), _str(code, "code"))


def collect(exercise: str, step: str, code: str, only: Optional[list] = None,
            seed: Optional[int] = None) -> Dict[str, Any]:
    """The learner's half of a grade, in the worker that runs learner code: {phase (the
    collected data as one JSON text, nlpcore.lab.wire), restored}. Hand ``phase`` to
    :func:`judge` in the judge worker. ``only``: the ids of the checks to run alone (the rest
    are left out, and the grade does not pass the step); ``seed``: the inputs' seed (a rerun
    takes the seed of the grade it repeats), a fresh one when None."""
    ex = lab.exercise(_str(exercise, "exercise"))
    if seed is not None and (type(seed) is not int or seed < 0):
        raise TypeError("seed: expected a non-negative int or None, got %r" % (seed,))
    phase = session.collect(ex, _str(step, "step"), _str(code, "code"),
                            verdict.new_seed() if seed is None else seed, only=only)
    return {"phase": wire.pack(phase), "restored": phase["restored"]}


def judge(exercise: str, step: str, phase: str) -> Dict[str, Any]:
    """The finished grade from :func:`collect`'s ``phase``, in a worker that never runs learner
    code: {passed, checks, record, report, stdout, stderr, traceback, restored, seed, elapsed_ms};
    checks that run in the page come back "pending" with their job (then :func:`conclude`)."""
    ex = lab.exercise(_str(exercise, "exercise"))
    return verdict.judge(ex, _str(step, "step"), wire.unpack(_str(phase, "phase")))


def conclude(exercise: str, step: str, code: str, grade: Dict[str, Any],
             ran: Dict[str, Any]) -> Dict[str, Any]:
    """The finished grade after the page ran the pending jobs of ``grade`` (from :func:`judge`):
    ``ran`` maps each pending check's id to {outputs: {name: bytes}} or {error, fails_all}. Every
    rule of the verdict is applied here; the page only shows it."""
    if not isinstance(grade, dict) or not isinstance(grade.get("checks"), list):
        raise TypeError("grade: expected the dict judge() returned")
    if not isinstance(ran, dict):
        raise TypeError("ran: expected a dict {check id: {outputs} or {error, fails_all}}")
    return verdict.conclude(lab.exercise(_str(exercise, "exercise")), _str(step, "step"),
                            _str(code, "code"), grade, ran)


def _remember(filename: str, source: str) -> None:
    """Lets tracebacks quote the learner's lines (their code has no file on disk)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _scratch_traceback(err: BaseException) -> str:
    """The traceback of ``err`` from the first frame in the scratch cell or the learner's code on
    (the frames of this module are left out)."""
    frames = _traceback.extract_tb(err.__traceback__)
    first = next((i for i, f in enumerate(frames) if f.filename in (LEARNER_FILE, SCRATCH_FILE)), None)
    kept = frames[first:] if first is not None else []
    lines = ["Traceback (most recent call last):\n"] if kept else []
    lines += _traceback.format_list(kept)
    lines += _traceback.format_exception_only(type(err), err)
    return "".join(lines)


class _KeptScratch:
    """The scratch cell's namespace, kept between runs until the learner resets it: one at a
    time, for the step it belongs to (``key`` "<exercise>/<step>", ``ns``, ``runs`` it has seen).
    It is the learner's own state, so the grading sandbox neither records nor restores it
    (``sandbox_skip``): restoring it would wipe it after every run."""

    sandbox_skip = True

    def __init__(self) -> None:
        self.key, self.ns, self.runs = None, None, 0

    def clear(self) -> None:
        self.key, self.ns, self.runs = None, None, 0


_SCRATCH_KEPT = _KeptScratch()
PLOT_LIMIT = 16384  # elements of an array the page draws (a heatmap of 128 x 128, or a line)


def _plottable(value: Any) -> Optional[Dict[str, Any]]:
    """A 1-D or 2-D real array (ndarray, or a list of numbers) as plain data the page can draw:
    {shape, dtype, data (row-major floats, None where not finite), min, max}; None otherwise."""
    import numpy as np

    if isinstance(value, (list, tuple)):
        try:
            value = np.asarray(value)
        except Exception:  # ragged or odd lists are simply not drawn
            return None
    if not isinstance(value, np.ndarray) or value.ndim not in (1, 2) or value.size == 0:
        return None
    if value.dtype.kind not in "biuf" or value.size > PLOT_LIMIT:
        return None
    flat = value.astype(np.float64).ravel()
    finite = np.isfinite(flat)
    return {"shape": list(value.shape), "dtype": str(value.dtype),
            "data": [float(x) if ok else None for x, ok in zip(flat, finite)],
            "min": float(flat[finite].min()) if finite.any() else None,
            "max": float(flat[finite].max()) if finite.any() else None}


def scratch(exercise: str, step: str, definitions: str, code: str, keep: bool = False,
            reset: bool = False) -> Dict[str, Any]:
    """Run ``code`` against the learner's current ``definitions`` (the editor's text), without
    grading: the definitions run first, then ``code`` in the same namespace, isolated as a grade
    is (:func:`nlpcore.lab.session.isolated`, no kernel refused: the cell is for exploring). A
    last line that is an expression is shown like at a Python prompt (``value``: its repr; and
    ``plot``: the value as plain data when it is a 1-D or 2-D real array, see :func:`_plottable`).

    With ``keep``, the namespace outlives the run: the next run of the same step's cell starts
    from it (the definitions run again first, so edits in the editor take effect) until
    ``reset`` (or another step's cell, or a restart of Python). Returns {stdout, stderr,
    traceback, value, plot, runs (runs this namespace has seen), restored, elapsed_ms}."""
    exercise, step = _str(exercise, "exercise"), _str(step, "step")
    definitions, code = _str(definitions, "definitions"), _str(code, "code")
    language = lab.exercise(exercise).step(step).language
    if language != "python":
        raise ValueError("step: the scratch cell runs Python; step %r of %r is %s"
                         % (step, exercise, language))
    _remember(LEARNER_FILE, definitions)
    _remember(SCRATCH_FILE, code)
    key = exercise + "/" + step
    if reset or not keep or _SCRATCH_KEPT.key != key:
        _SCRATCH_KEPT.clear()
    ns = _SCRATCH_KEPT.ns
    value, plot, error = None, None, None
    start = time.perf_counter()
    with session.isolated() as run:
        ns = ns or {"__name__": "learner", "__builtins__": __builtins__}
        try:
            exec(compile(definitions, LEARNER_FILE, "exec", dont_inherit=True), ns)
            tree = ast.parse(code, SCRATCH_FILE, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, SCRATCH_FILE, "exec", dont_inherit=True), ns)
            if last is not None:
                shown = eval(compile(last, SCRATCH_FILE, "eval", dont_inherit=True), ns)
                if shown is not None:
                    value = repr(shown)
                    plot = _plottable(shown)
        except Exception as err:  # learner code may raise anything
            error = err
    if keep:
        _SCRATCH_KEPT.key, _SCRATCH_KEPT.ns, _SCRATCH_KEPT.runs = key, ns, _SCRATCH_KEPT.runs + 1
    ns = None
    output = run.output()  # formatted after the interpreter is restored
    return {"stdout": output["stdout"], "stderr": output["stderr"],
            "traceback": "" if error is None else _scratch_traceback(error),
            "value": None if value is None else value[:session.OUTPUT_LIMIT],
            "plot": plot, "runs": _SCRATCH_KEPT.runs if keep else 1,
            "restored": run.restored,
            "elapsed_ms": round((time.perf_counter() - start) * 1000.0, 1)}


def verify(exercise: str, step: str, check: str, code: str, job: Any = None,
           outputs: Optional[Dict[str, bytes]] = None) -> Dict[str, Any]:
    """Finish a check that ran partly in the page: ``outputs`` is {name: bytes} from the JS
    runner that executed ``job`` (as returned in the pending check of :func:`grade`)."""
    if outputs is not None and not isinstance(outputs, dict):
        raise TypeError("outputs: expected a dict {name: bytes}, got %s" % type(outputs).__name__)
    return lab.verify_js(_str(exercise, "exercise"), _str(step, "step"), _str(check, "check"),
                         _str(code, "code"), job, outputs or {})


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
