"""The only door a learner's ``ring_forward`` has to the data: ``attend``.

:func:`make_attend` builds ``attend(device, q_rows, k_rows)`` from what the learner may see and
nothing else: the shards (which the learner computes too) and the partials (o, lse) that the
ring allows, one per (device, step), computed by the grader *before* the learner's code runs.
Q, K, V and the full attention do not exist in this module, in the closure or in any frame
above the learner's call, so ``attend.__closure__``, ``__globals__`` or frame walking find only
partials the learner could have asked for anyway. Off-ring requests raise ``ValueError`` and
are logged; the judge reads the log (plain strings and counts) after the learner's code is done.
"""
from __future__ import annotations

import numpy as np


def make_attend(shards, partials):
    """(attend, calls, problems): ``partials[r][s]`` is device r's (o, lse) against the K/V
    shard it holds at step s, (r - s) mod P; ``calls[r]`` counts r's answered requests and
    ``problems`` lists refused requests, as text, in order."""
    devices = len(shards)
    calls = [0] * devices
    problems = []

    def refuse(text):
        problems.append(text)
        raise ValueError(text)

    def attend(device, q_rows, k_rows):
        """Device ``device``'s partial (o, lse) for its query rows ``q_rows`` against the keys
        ``k_rows`` it holds at its next step: shard (device - step) mod P."""
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) \
                or not 0 <= device < devices:
            refuse("attend's device must be an int in range(%d), got %s" % (devices, repr(device)[:40]))
        device = int(device)
        q_rows, k_rows = _rows(q_rows, "q_rows", refuse), _rows(k_rows, "k_rows", refuse)
        own = shards[device]
        if not np.array_equal(q_rows, own):
            refuse("device %d asked for query rows %s, but it owns rows %s: a device only computes "
                   "its own queries" % (device, short(q_rows), short(own)))
        step = calls[device]
        if step >= devices:
            refuse("device %d called attend a %d-th time: with %d devices the ring has only %d steps"
                   % (device, step + 1, devices, devices))
        held = (device - step) % devices
        if not np.array_equal(k_rows, shards[held]):
            refuse("at its step %d device %d asked for keys %s, but the ring has brought it the K/V "
                   "shard of device %d (rows %s): at step s device r holds shard (r - s) mod P, never "
                   "any other" % (step, device, short(k_rows), held, short(shards[held])))
        calls[device] += 1
        o, lse = partials[device][step]
        return o.copy(), lse.copy()

    return attend, calls, problems


def _rows(rows, name, refuse):
    try:
        rows = np.asarray(rows)
        ok = rows.ndim == 1 and rows.dtype.kind in "iu"
    except Exception:  # learner may pass anything
        ok = False
    if not ok:
        refuse("attend's %s must be a 1-D array of row indices (e.g. shards[r]), got %s"
               % (name, repr(rows)[:80]))
    return rows


def short(rows) -> str:
    """Row indices for a message: all of them up to 8, else the first three and the last."""
    rows = np.asarray(rows).tolist()
    return str(rows) if len(rows) <= 8 else "[%s, ..., %s] (%d rows)" % (
        ", ".join(map(str, rows[:3])), rows[-1], len(rows))
