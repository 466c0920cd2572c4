"""The only door a learner's ``ring_forward`` has to the data: ``attend``.

:func:`make_attend` builds ``attend(device, q_rows, k_rows)`` from what the learner may see and
nothing else: the shards (which the learner computes too) and the partials (o, lse) that the
ring allows, one per (device, step), computed by the grader *before* the learner's code runs.
Q, K, V and the full attention do not exist in this module or in any frame above the learner's
call. The partials and the log the judge reads (each device's answered requests, the refused
ones as text) are sealed in ``attend``'s code constants (:func:`nlpcore.refusal.seal`), not a
closure cell or a frame's variable: only an audited read of ``__code__`` (which fails the grade)
reaches them, so learner code can neither take a partial without asking for it nor rewrite the
count (review 2, D8). ``attend`` turns its arguments into a plain int and plain index arrays
before it reads that state, so no code of the learner's (``__index__``, ``__array__``) runs
while a frame holding it is on the stack. Off-ring requests raise ``ValueError`` and are
logged; :func:`log_of` reads the log after the learner's code is done.
"""
from __future__ import annotations

import operator

import numpy as np

from nlpcore import refusal

_STATE = "\0ring: attend's partials and log"   # stands for the sealed state in _ring_step
_AT = 0


def make_attend(shards, partials):
    """``attend``: ``partials[r][s]`` is device r's (o, lse) against the K/V shard it holds at
    step s, (r - s) mod P. Its log (:func:`log_of`) counts each device's answered requests and
    lists refused requests, as text, in order."""
    shards = [np.array(s) for s in shards]
    state = (shards, partials, [0] * len(shards), [])
    step = refusal.seal(_TEMPLATES[1], _STATE, state)
    return refusal.seal(_TEMPLATES[0], _STEP, step)


def log_of(attend):
    """(calls, problems) of an ``attend`` made by :func:`make_attend`: answered requests per
    device, and the refused requests' messages (the grader's, after the learner's code ran)."""
    step = [c for c in attend.__code__.co_consts if isinstance(c, tuple) and len(c) == 2
            and callable(c[0]) and c[1] is None][0][0]
    state = [c for c in step.__code__.co_consts if isinstance(c, tuple) and len(c) == 2
             and isinstance(c[0], tuple) and len(c[0]) == 4 and c[1] is None][0][0]
    return list(state[2]), list(state[3])


_STEP = "\0ring: the sealed step"   # stands for _ring_step, sealed, in _attend


def _attend(device, q_rows, k_rows):
    """Device ``device``'s partial (o, lse) for its query rows ``q_rows`` against the keys
    ``k_rows`` it holds at its next step: shard (device - step) mod P."""
    device, q_rows, k_rows = _plain_device(device), _rows(q_rows, "q_rows"), _rows(k_rows, "k_rows")
    return ("\0ring: the sealed step", None)[_AT](device, q_rows, k_rows)


def _ring_step(device, q_rows, k_rows):
    """attend's work on plain arguments (an int or an error text; int arrays or error texts)."""
    shards, partials, calls, problems = ("\0ring: attend's partials and log", None)[_AT]
    devices = len(shards)
    for value in (device, q_rows, k_rows):
        if isinstance(value, str):
            problems.append(value)
            raise ValueError(value)
    if not 0 <= device < devices:
        return _refuse(problems, "attend's device must be an int in range(%d), got %d"
                       % (devices, device))
    own = shards[device]
    if not np.array_equal(q_rows, own):
        return _refuse(problems, "device %d asked for query rows %s, but it owns rows %s: a device "
                       "only computes its own queries" % (device, short(q_rows), short(own)))
    step = calls[device]
    if step >= devices:
        return _refuse(problems, "device %d called attend a %d-th time: with %d devices the ring "
                       "has only %d steps" % (device, step + 1, devices, devices))
    held = (device - step) % devices
    if not np.array_equal(k_rows, shards[held]):
        return _refuse(problems, "at its step %d device %d asked for keys %s, but the ring has "
                       "brought it the K/V shard of device %d (rows %s): at step s device r holds "
                       "shard (r - s) mod P, never any other"
                       % (step, device, short(k_rows), held, short(shards[held])))
    calls[device] += 1
    o, lse = partials[device][step]
    return o.copy(), lse.copy()


# The templates, kept in a tuple: a module-level function of this (the exercise's own, refused)
# module is replaced by a refusal guard while a grade runs.
_TEMPLATES = (_attend, _ring_step)
del _attend, _ring_step


def _refuse(problems, text):
    problems.append(text)
    raise ValueError(text)


def _plain_device(device):
    """``device`` as a plain int, or the text of why it is not one."""
    if isinstance(device, bool) or not isinstance(device, (int, np.integer)):
        return "attend's device must be an int, got %s" % repr(device)[:40]
    return int.__index__(operator.index(device))


def _rows(rows, name):
    """``rows`` as a plain 1-D int array (a copy), or the text of why it is not one."""
    try:
        plain = np.array(rows)
        if type(plain) is np.ndarray and plain.ndim == 1 and plain.dtype.kind in "iu":
            return np.array(plain, dtype=np.int64)
    except Exception:  # learner may pass anything
        pass
    return ("attend's %s must be a 1-D array of row indices (e.g. shards[r]), got %s"
            % (name, repr(rows)[:80]))


def short(rows) -> str:
    """Row indices for a message: all of them up to 8, else the first three and the last."""
    rows = np.asarray(rows).tolist()
    return str(rows) if len(rows) <= 8 else "[%s, ..., %s] (%d rows)" % (
        ", ".join(map(str, rows[:3])), rows[-1], len(rows))
