"""The judging vocabulary: what checks use to turn the learner's outputs into a verdict.

Collect side (runs where the learner's code runs): :func:`call_learner` (any exception becomes
a failure naming the case), :func:`peak_memory`, :func:`plain_array` / :func:`plain_tuple`
(the learner's results copied into plain arrays). Judge side (runs where no learner code ever
ran): :func:`expect_array`, :func:`assert_close` (per-dtype tolerances), :func:`flash_bar`
(flash-attention's low-precision bar), :func:`expect_number`, :func:`relative_close`,
:func:`assert_tiled` (the working set of a tiled kernel). Each failure raises
:class:`~nlpcore.lab.model.CheckFailed` with expected / got / tolerance / max |Δ| / where /
shapes, which the page shows.
"""
from __future__ import annotations

import math
import sys
import tracemalloc
from typing import Sequence

import numpy as np

from .. import refusal, tolerances
from . import model
from .model import CheckFailed
from .session import call_learner, repair_builtins
from .wire import NotAnArray

__all__ = ["TOLERANCES", "CheckFailed", "NotAnArray", "call_learner", "peak_memory", "plain_array",
           "plain_tuple", "shapes_of", "expect_array", "assert_close", "is_close", "flash_bar", "expect_number",
           "relative_close", "prediction_close", "rng", "measured_outside", "outside_growth"]

# Tolerances per dtype of the computation being checked (nlpcore.tolerances.GRADER):
# |got - want| <= atol + rtol · |want| at each entry. float16 checks use the low-precision bar
# instead (see ``flash_bar``).
TOLERANCES = tolerances.GRADER


class _Tracemalloc:
    """tracemalloc's C functions as they were when the grader was imported, and the calls that
    would hide a peak (``reset_peak``, ``clear_traces``, ``stop``, ``start``) made while
    :func:`peak_memory` measures. Sealed into the code of the functions that use it
    (:func:`nlpcore.refusal.seal`), out of reach of learner code."""
    sandbox_skip = True

    def __init__(self):
        import _tracemalloc
        self.c = {name: getattr(_tracemalloc, name) for name in dir(_tracemalloc)
                  if not name.startswith("__")}
        self.measuring = 0
        self.hiding: list = []          # names of the calls made while measuring


_TM = "\0nlpcore.lab.judging: tracemalloc"     # stands for the _Tracemalloc in sealed code
_AT = 0


def _watched(name: str, state: _Tracemalloc):
    def call(*args, **kwargs):
        state = ("\0nlpcore.lab.judging: tracemalloc", None)[_AT]
        if state.measuring:
            state.hiding.append(name)
            return None                         # not done: the measurement stays whole
        return state.c[name](*args, **kwargs)
    call = refusal.seal(call, _TM, state)
    call.__name__ = call.__qualname__ = name
    return call


def _create_builtin(spec):
    """``_imp.create_builtin``, except that ``_tracemalloc`` is the module already loaded, with
    its watchers: a fresh copy would carry the C functions unwatched."""
    create, watched = ("\0nlpcore.lab.judging: tracemalloc", None)[_AT]
    if getattr(spec, "name", None) == "_tracemalloc":
        return watched
    return create(spec)


def _sealed_peak_memory():
    """:func:`peak_memory`, and watchers in place of the functions that would hide a peak, in
    ``tracemalloc`` and ``_tracemalloc`` (once, when the grader is imported: before any learner
    code, so the grade's snapshot keeps them). Their state is sealed into their code, never a
    global. A fresh copy of ``_tracemalloc`` imported by learner code is reported by
    :mod:`nlpcore.refusal`'s audit hook."""
    import _tracemalloc
    state = _Tracemalloc()
    for name in ("reset_peak", "clear_traces", "stop", "start"):
        if name in state.c:
            watcher = _watched(name, state)
            for module in (tracemalloc, _tracemalloc):
                setattr(module, name, watcher)
    _imp = sys.modules.get("_imp")
    if _imp is not None and hasattr(_imp, "create_builtin"):     # (not in every build)
        _imp.create_builtin = refusal.seal(_create_builtin, _TM, (_imp.create_builtin, _tracemalloc))
    measure = refusal.seal(_peak_memory, _TM, state)
    measure.__name__ = measure.__qualname__ = "peak_memory"
    return measure


def _peak_memory(fn, *args, **kwargs):
    # tracemalloc's own functions (sealed: learner code can neither patch nor reset them)
    outer = ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["is_tracing"]()
    if outer:
        ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["stop"]()
    ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["start"]()
    ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].measuring += 1
    try:
        base = ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["get_traced_memory"]()[0]
        out = fn(*args, **kwargs)
        peak = ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["get_traced_memory"]()[1] - base
        hiding = list(("\0nlpcore.lab.judging: tracemalloc", None)[_AT].hiding)
        if hiding or not ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["is_tracing"]():
            raise CheckFailed("your code called tracemalloc.%s, which would hide the memory it "
                              "uses from the measurement" % (hiding or ["stop"])[0],
                              expected="tracemalloc left alone", got=", ".join(hiding) or "stopped")
    finally:
        ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].measuring -= 1
        del ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].hiding[:]
        ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["stop"]()
        if outer:
            ("\0nlpcore.lab.judging: tracemalloc", None)[_AT].c["start"]()
    return out, peak


peak_memory = _sealed_peak_memory()
peak_memory.__doc__ = """(fn(*args, **kwargs), peak bytes allocated during the call), measured
    with tracemalloc (NumPy reports its array buffers to it, in CPython and in Pyodide), read
    through tracemalloc's C functions kept where learner code cannot patch them. CheckFailed if
    the call stops, restarts, clears or resets tracemalloc, which would hide what it allocates."""


def plain_array(got):
    """Phase 1 (collect): the learner's array as a copy of plain ``np.ndarray`` type with a
    number or bool dtype -- nothing the learner defined survives into the judge -- or a
    :class:`NotAnArray` saying what it was instead."""
    if got is None or isinstance(got, (str, bytes, dict)):
        return NotAnArray(type(got).__name__)
    try:
        arr = np.array(got)
    except BaseException as err:  # learner objects may raise anything from __array__/__len__
        repair_builtins()
        return NotAnArray("%s (converting it raised %s)" % (type(got).__name__,
                                                            type(err).__name__))
    repair_builtins()
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
    tol = tolerances.Tol(atol=TOLERANCES[dtype].atol if atol is None else atol,
                         rtol=TOLERANCES[dtype].rtol if rtol is None else rtol,
                         scale=tolerances.ENTRY)
    want = np.asarray(want, dtype=np.float64)
    got = expect_array(name, got, want.shape, shapes)
    if not np.issubdtype(got.dtype, np.number) and got.dtype != np.bool_:
        raise CheckFailed("%s must hold numbers, got dtype %s" % (name, got.dtype),
                          shapes=shapes)
    got = got.astype(np.float64)
    verdict = tolerances.compare(got, want, tol)
    if verdict.ok:
        return verdict.max_err
    tol_text = "|Δ| <= %g + %g·|expected| (%s)" % (tol.atol, tol.rtol, dtype)
    prefix = (context + ": ") if context else ""
    idx = verdict.where
    if math.isnan(verdict.max_err):
        raise CheckFailed("%s%s contains NaN (%d entries), first at %s"
                          % (prefix, name, verdict.bad, list(idx)),
                          expected="%s%s = %.6g" % (name, list(idx), want[idx]), got="nan",
                          tolerance=tol_text, max_abs_err="nan", where=list(idx), shapes=shapes)
    if math.isinf(verdict.max_err):
        raise CheckFailed("%s%s: infinities differ at %s" % (prefix, name, list(idx)),
                          expected="%s%s = %s" % (name, list(idx), _num(want[idx])),
                          got=_num(got[idx]), tolerance=tol_text, max_abs_err="inf",
                          where=list(idx), shapes=shapes)
    raise CheckFailed("%s%s differs from the reference in %d of %d entries"
                      % (prefix, name, verdict.bad, verdict.size),
                      expected="%s%s = %.7g" % (name, list(idx), want[idx]),
                      got="%.7g" % got[idx], tolerance=tol_text, max_abs_err=verdict.max_err,
                      where=list(idx), shapes=shapes)


def is_close(got, want, dtype: str = "float64") -> bool:
    """Whether :func:`assert_close` would accept ``got`` for ``want`` at ``dtype``'s tolerance
    (used to test an output against the known wrong variants of an exercise)."""
    try:
        assert_close("x", got, want, shapes={}, dtype=dtype)
    except CheckFailed:
        return False
    return True


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
    prefix = (context + ": ") if context else ""
    if np.isnan(g).any():
        idx = tuple(int(i) for i in np.argwhere(np.isnan(g))[0])
        raise CheckFailed("%s%s contains NaN" % (prefix, name),
                          expected="finite values", got="nan at %s" % list(idx),
                          max_abs_err="nan", where=list(idx), shapes=shapes)
    base = tolerances.compare(np.where(np.isfinite(want64), naive, want64), want64, 0.0).max_err
    bound = tolerances.low_precision_bound(base, extra, factor)
    verdict = tolerances.compare(g, want64, bound)
    if not verdict.ok:
        idx = verdict.where
        raise CheckFailed("%s%s is less accurate than the flash-attention bar allows"
                          % (prefix, name),
                          expected="%s%s = %.6g (float64 reference)" % (name, list(idx),
                                                                        want64[idx]),
                          got="%.6g" % g[idx],
                          tolerance="max|Δ| <= %g × %.3g (naive, same precision) + %g"
                          % (factor, base, extra),
                          max_abs_err=verdict.max_err, where=list(idx), shapes=shapes)
    return verdict.max_err


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


PREDICTION_FACTORS = (1.5, 2.0, 4.0, 10.0)    # the ranges a wrong prediction is placed in


def prediction_close(name: str, got: float, want: float, rtol: float, *, what: str = "",
                     hint: str = "") -> str:
    """A Predict step's check: fail unless |got - want| <= rtol·|want|. The failure says whether
    the prediction is too high or too low and by how much, as a range of factors
    (PREDICTION_FACTORS), never the true number -- a wrong guess must not hand over the
    answer; ``hint`` (a rule, not a number) is added to it. The true value travels only as the
    failure's ``answer`` detail, which the page shows once the learner, after a recorded
    attempt, asks for the answer (js/exercise-predict.js). The message of a pass states both
    numbers."""
    got = expect_number(name, got)
    if abs(got - want) <= rtol * abs(want):
        return relative_close(name, got, want, rtol, what=what)
    side = "too high" if got > want else "too low"
    factor = (got / want if got > want else want / got) if got > 0 and want > 0 else math.inf
    low = 1.0 + rtol
    for high in PREDICTION_FACTORS + (math.inf,):
        if factor <= high:
            break
        low = high
    span = ("by a factor of more than %g" % low if math.isinf(high)
            else "by a factor between %g and %g" % (low, high))
    raise CheckFailed("%s = %.6g is %s, %s (a prediction passes within %g%% of the true "
                      "value): recount the terms rather than adjusting the number%s"
                      % (name, got, side, span, 100 * rtol, ("; " + hint) if hint else ""),
                      expected="within %g%% of the true value" % (100 * rtol), answer="%.6g" % want,
                      got="%.6g (%s, %s)" % (got, side, span))


def measured_outside() -> bool:
    """Collect side: whether the operating system measures this learner process's peak memory
    (a CPython grade's own process, :mod:`nlpcore.lab.runner`); a tiled check then runs its
    large memory case too (:data:`nlpcore.lab.working_set.OUTSIDE_CASE`)."""
    return bool(model._INPUTS.measured)


def outside_growth():
    """Judge side: the learner process's peak memory growth in bytes as the operating system
    counted it, or None where the grade was not measured that way (the page, tests that grade
    in one interpreter)."""
    return model.outside_growth()


def rng(case: int):
    """The random inputs of one case of a check: seeded by the case number and the grade's seed
    (:func:`nlpcore.lab.model.grade_seed`), so inputs differ from grade to grade and a failure's
    message names the seed that reproduces it."""
    return np.random.RandomState((model.grade_seed() * 1000003 + case) % (1 << 32))
