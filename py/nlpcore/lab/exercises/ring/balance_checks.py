"""Checks of ring's Balance step: layouts, causal work per device and step, makespan, balance.

Two phases: ``collect`` gathers the learner's shards, work counts and makespans as plain data;
``judge`` computes what they should be. A zig-zag layout is accepted in every valid form: the
rows cut, in order, into 2P contiguous chunks of at most ⌈n / 2P⌉ rows, sizes never growing
(``np.array_split`` and ceil-sized chunks both qualify), device r holding chunks r and 2P-1-r.
Work is judged against the learner's own layout when it is valid.
"""
from __future__ import annotations

import math

import numpy as np

from nlpcore.kernels import ring
from nlpcore.lab.judging import call_learner, expect_number, rng
from nlpcore.lab.model import CheckFailed
from .door import short

BALANCE_N, BALANCE_P = 1024, 8
LAYOUTS = ring.LAYOUTS
SHARD_CASES = ((16, 4), (17, 4), (23, 3), (8, 8), (13, 4))
WORK_CASES = ((16, 4), (50, 3), (64, 8), (17, 4))


def key(layout, n, p):
    """The plain-text key of one (layout, n, devices) case in the collected data."""
    return "%s/%d/%d" % (layout, n, p)


def _failure(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except CheckFailed as fail:
        return fail


def _learner_shards(ns, n, p, layout):
    out = call_learner(ns["shards"], n, p, layout, context="shards(%d, %d, %r)" % (n, p, layout))
    try:
        rows = [np.sort(np.asarray(x).astype(np.int64).ravel()).tolist() for x in out]
    except Exception:  # learner may return anything
        raise CheckFailed("shards(%d, %d, %r) must return a list of %d index arrays" % (n, p, layout, p),
                          expected="list of arrays", got=type(out).__name__)
    return rows


def _learner_work(ns, n, p, layout):
    out = call_learner(ns["work"], n, p, layout, context="work(%d, %d, %r)" % (n, p, layout))
    try:
        w = np.array(out, dtype=np.float64)
    except Exception:  # learner may return anything
        raise CheckFailed("work must return a (devices, steps) array of counts", expected="array",
                          got=type(out).__name__)
    if w.shape != (p, p):
        raise CheckFailed("work(%d, %d, %r) has the wrong shape" % (n, p, layout),
                          expected="(%d, %d)" % (p, p), got=str(w.shape))
    return w


def _makespan(ns, w, what):
    return expect_number("makespan(%s)" % what, call_learner(ns["makespan"], w.copy(),
                                                             context="makespan of %s" % what))


def makespan_cases():
    r = rng(7)
    return [r.randint(0, 100, size=shape) for shape in ((4, 4), (3, 3), (1, 1), (2, 5))]


def collect_balance(ns):
    """Phase 1: shards and work for every case and layout, makespans, and the balance run at
    BALANCE_N, BALANCE_P (work and makespan from the learner's own functions)."""
    out = {"shards": {}, "work": {}, "makespan": [], "balance": {}}
    for layout in LAYOUTS:
        for n, p in sorted(set(SHARD_CASES) | set(WORK_CASES)):
            out["shards"][key(layout, n, p)] = _failure(_learner_shards, ns, n, p, layout)
        for n, p in WORK_CASES:
            out["work"][key(layout, n, p)] = _failure(_learner_work, ns, n, p, layout)
        w = _failure(_learner_work, ns, BALANCE_N, BALANCE_P, layout)
        span = w if isinstance(w, CheckFailed) else _failure(_makespan, ns, w, "work(...)")
        out["balance"][layout] = (w, span)
    out["makespan"] = [_failure(_makespan, ns, w, "a %dx%d matrix" % w.shape)
                       for w in makespan_cases()]
    return out


def zigzag_problem(rows, n, p):
    """Why ``rows`` (p sorted lists) is not a zig-zag layout of n rows, or None when it is."""
    owner = np.full(n, -1)
    for r, shard in enumerate(rows):
        if any(not 0 <= i < n for i in shard) or (owner[shard] >= 0).any():
            return "the shards must split range(%d) into %d disjoint parts" % (n, p)
        owner[shard] = r
    if (owner < 0).any():
        return "row %d is on no device" % int(np.argmax(owner < 0))
    most = -(-n // (2 * p))
    sizes, i = [], 0
    for j, r in enumerate(list(range(p)) + list(range(p - 1, -1, -1))):  # chunks 0..P-1, P-1..0
        run = 0
        while i + run < n and owner[i + run] == r:
            run += 1
        # device P-1's two chunks are adjacent: split its run as evenly as sizes allow
        take = -(-run // 2) if j == p - 1 else min(run, most)
        sizes.append(take)
        i += take
    if i != n:
        return ("row %d is held by device %d, but zig-zag chunks run 0, 1, ..., %d, %d, ..., 0 "
                "in order, each of at most ⌈n / 2P⌉ = %d rows" % (i, owner[i], p - 1, p - 1, most))
    if any(b > a for a, b in zip(sizes, sizes[1:])):
        return "chunk sizes %s grow along the sequence: cut with np.array_split or ceil-sized " \
            "chunks" % sizes
    return None


def _valid(rows, n, p, layout):
    """None when ``rows`` is a valid ``layout`` of n rows over p devices, else why not."""
    if isinstance(rows, CheckFailed):
        return rows.message
    if len(rows) != p:
        return "%d shards, expected one per device (%d)" % (len(rows), p)
    if layout == "zigzag":
        return zigzag_problem(rows, n, p)
    want = ring.shards(n, p, layout)
    for r in range(p):
        if not np.array_equal(rows[r], want[r]):
            return "device %d holds %s, expected %s" % (r, short(rows[r]), short(want[r]))
    return None


def judge_shards(collected):
    for layout in LAYOUTS:
        for n, p in SHARD_CASES:
            rows = collected["shards"][key(layout, n, p)]
            if isinstance(rows, CheckFailed):
                raise rows
            problem = _valid(rows, n, p, layout)
            if problem:
                raise CheckFailed("%s layout, n=%d, %d devices: %s" % (layout, n, p, problem),
                                  expected="a %s layout" % layout, got=str(rows)[:200])
    return "contiguous, striped and zig-zag shards are valid layouts (ragged n included; zig-zag " \
        "from np.array_split or ceil-sized chunks)"


def work_of(rows):
    """Causal score pairs (key <= query) device r computes at step s: (P, P) int64."""
    p = len(rows)
    rows = [np.asarray(x, dtype=np.int64) for x in rows]
    out = np.zeros((p, p), dtype=np.int64)
    for r in range(p):
        for s in range(p):
            out[r, s] = int((rows[(r - s) % p][None, :] <= rows[r][:, None]).sum())
    return out


def _want_work(collected, layout, n, p):
    rows = collected["shards"].get(key(layout, n, p))
    if rows is None or _valid(rows, n, p, layout):
        return ring.work(n, p, True, layout)
    return work_of(rows)                       # the learner's own valid layout


def judge_work(collected):
    for layout in LAYOUTS:
        for n, p in WORK_CASES:
            got = collected["work"][key(layout, n, p)]
            if isinstance(got, CheckFailed):
                raise got
            want = _want_work(collected, layout, n, p)
            if not np.array_equal(got, want):
                r, s = (int(i) for i in np.argwhere(got != want)[0])
                raise CheckFailed("%s layout, n=%d, %d devices: device %d at step %d computes %d "
                                  "causal scores, not %g" % (layout, n, p, r, s, want[r, s], got[r, s]),
                                  expected="work[%d, %d] = %d" % (r, s, want[r, s]),
                                  got="%g" % got[r, s], where=[r, s])
    return "causal work per device and step matches your layouts' pairs j <= i, every layout"


def judge_makespan(collected):
    for w, got in zip(makespan_cases(), collected["makespan"]):
        if isinstance(got, CheckFailed):
            raise got
        want = float(w.max(axis=0).sum())
        if got != want:
            raise CheckFailed("makespan(w) for w = %s" % w.tolist(), expected="%g (sum over steps "
                              "of the busiest device's work)" % want, got="%g" % got)
    return "a step lasts as long as its busiest device"


def balance_rows(collected):
    """[layout, causal scores, makespan, makespan / ideal, idle share] per layout."""
    rows = []
    for layout in LAYOUTS:
        w, span = collected["balance"][layout]
        for x in (w, span):
            if isinstance(x, CheckFailed):
                raise x
        ideal = float(w.sum()) / BALANCE_P
        rows.append([layout, int(w.sum()), span, span / ideal if ideal else math.inf,
                     1.0 - ideal / span if span else 0.0])
    return rows


COLUMNS = ["layout", "causal scores", "makespan", "makespan / ideal", "idle share"]


def judge_balance(collected):
    table = {"columns": COLUMNS, "rows": balance_rows(collected)}
    ratio = {row[0]: row[3] for row in table["rows"]}
    if not (ratio["striped"] < 1.02 and ratio["zigzag"] < 1.02 and ratio["contiguous"] > 1.5):
        raise CheckFailed("with your work and makespan at n=%d, %d devices: contiguous %.3f, striped "
                          "%.3f, zigzag %.3f times the ideal" % (BALANCE_N, BALANCE_P, ratio["contiguous"],
                                                                 ratio["striped"], ratio["zigzag"]),
                          expected="contiguous > 1.5, striped and zigzag < 1.02", got=str(ratio),
                          table=table)
    return "n=%d, %d devices, causal: contiguous takes %.2f× the ideal time, striped %.3f×, " \
        "zig-zag %.3f×" % (BALANCE_N, BALANCE_P, ratio["contiguous"], ratio["striped"], ratio["zigzag"])


def report_balance(ns) -> dict:
    """The balance table from the learner's own work() and makespan() (a courtesy; the checks
    carry the verdict)."""
    collected = {"balance": {}}
    for layout in LAYOUTS:
        w = _learner_work(ns, BALANCE_N, BALANCE_P, layout)
        collected["balance"][layout] = (w, _makespan(ns, w, "work(...)"))
    rows = [[layout, scores, span, "%.3f×" % ratio, "%.1f%%" % (100 * idle)]
            for layout, scores, span, ratio, idle in balance_rows(collected)]
    return {"title": "Measured with your work() and makespan(): causal, n = %d, %d devices"
            % (BALANCE_N, BALANCE_P), "table": {"columns": COLUMNS, "rows": rows}}
