"""Checks of ring's Compose step: merge partials with the monoid, then run the ring.

Every check has two phases (``collect`` with the learner's code live, ``judge`` after it is
gone). ``ring_forward`` never sees Q, K or V: it gets :func:`door.make_attend`'s ``attend``,
which holds only the partials the ring allows, computed before the learner's code is called;
the attention over all keys is computed only in the judge.
"""
from __future__ import annotations

import numpy as np

from nlpcore.kernels import reference
from nlpcore.lab.judging import assert_close, call_learner, plain_tuple, rng, shapes_of
from nlpcore.lab.model import CheckFailed
from .door import log_of, make_attend

FORBIDDEN_MODULES = ("nlpcore.kernels.ring", "nlpcore.kernels.split_k",
                     "nlpcore.kernels.reference", "nlpcore.kernels.flash_np")
WHY_OWN = ("this step is about composing the ring from the monoid yourself; the library's "
           "ring, split-K and reference kernels would compute the answer for you")


def collect_own(ns):
    """Phase 1: the names in the learner's namespace that are forbidden modules or their
    functions, as text."""
    found = []
    for name, value in list(ns.items()):
        if name.startswith("__"):
            continue
        try:
            owner = value.__name__ if isinstance(value, type(np)) else getattr(value, "__module__", None)
        except BaseException:  # learner objects may raise anything from attribute access
            continue
        if isinstance(owner, str) and owner in FORBIDDEN_MODULES:
            found.append("%s (from %s)" % (name, owner))
    return [str(f) for f in found]


def judge_own(found):
    if found:
        raise CheckFailed("your code imports %s: %s" % (", ".join(found), WHY_OWN),
                          expected="no import of nlpcore.kernels.ring, split_k, reference or flash_np",
                          got=", ".join(found))
    return "merge and ring_forward are your own: no library ring, split-K or reference imported"


def _compare(what, got, want, shapes):
    o, lse = got
    assert_close("o", o, want[0], shapes=shapes, dtype="float64", context=what)
    return assert_close("lse", lse, want[1], shapes=shapes, dtype="float64", context=what)


MERGE_CUTS = [(0, 4), (4, 8), (8, 12)]


def merge_inputs():
    """q, k, v and mask of one small attention whose keys are cut into sets A, B, C.

    Row 0 sees no key at all, row 1 none of A, row 2 only keys of A; B's keys are 40× longer,
    so its lse lies tens above the others' and the rescaling matters.
    """
    r = rng(5)
    n, n_k, d, dv = 6, 12, 4, 3
    q = r.randn(n, d)
    k = r.randn(n_k, d)
    k[4:8] *= 40.0
    v = r.randn(n_k, dv)
    mask = np.ones((n, n_k), dtype=bool)
    mask[0] = False
    mask[1, :4] = False
    mask[2, 4:] = False
    return q, k, v, mask


def _parts():
    """The three partials over A, B, C (the learner's inputs) and the shapes for messages;
    computed in a frame of their own, so no q, k or v is live while the learner merges."""
    q, k, v, mask = merge_inputs()
    parts = [reference.forward(q, k[a:b], v[a:b], mask=mask[:, a:b]) for a, b in MERGE_CUTS]
    return parts, shapes_of(q=q, k=k, v=v)


def _identity(part):
    return np.zeros_like(part[0]), np.full_like(part[1], -np.inf)


def _merge(ns, a, b, what, shapes):
    """Phase 1: the learner's merge(a, b) on copies, as plain arrays (o, lse)."""
    out = call_learner(ns["merge"], (a[0].copy(), a[1].copy()), (b[0].copy(), b[1].copy()),
                       shapes=shapes, context=what)
    return plain_tuple(out, ("o", "lse"), "merge")


def collect_merges(ns):
    """Phase 1: every merge the identity, split and laws checks judge, as plain arrays."""
    (a, b, c), shapes = _parts()
    e = _identity(a)
    out = {"shapes": shapes}
    for key, x, y in (("e.a", e, a), ("a.e", a, e), ("e.e", e, e)):
        out[key] = _merge(ns, x, y, "merge(%s, %s)" % tuple(key.replace("e", "identity").split(".")),
                          shapes)
    ab = _merge(ns, a, b, "merge(A, B)", shapes)
    out["ab.c"] = _merge(ns, ab, c, "merge(merge(A, B), C)", shapes)
    out["a.bc"] = _merge(ns, a, _merge(ns, b, c, "merge(B, C)", shapes), "merge(A, merge(B, C))",
                         shapes)
    out["ab"], out["ba"] = ab, _merge(ns, b, a, "merge(B, A)", shapes)
    return out


def judge_identity(got):
    (a, _, _), shapes = _parts()
    e = _identity(a)
    _compare("merge(identity, a)", got["e.a"], a, shapes)
    _compare("merge(a, identity)", got["a.e"], a, shapes)
    _compare("merge(identity, identity)", got["e.e"], e, shapes)
    return "(0, -inf) is neutral on both sides, and two empty partials stay empty (no NaN)"


def judge_split(got):
    """Phase 2: attention over all keys, computed only now, against the learner's merge."""
    q, k, v, mask = merge_inputs()
    whole = reference.forward(q, k, v, mask=mask)
    worst = _compare("merge of the partials over keys 0:4, 4:8, 8:12 vs attention over all 12",
                     got["ab.c"], whole, shapes_of(q=q, k=k, v=v))
    return "partials over three key sets merge to attention over all keys (max |Δ| = %.2g), " \
        "including rows empty in some parts or in all" % worst


def _as_float(pair, shapes):
    out = []
    for name, x in zip(("o", "lse"), pair):
        try:
            out.append(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError):
            raise CheckFailed("merge must return arrays (o, lse)", expected="(o, lse) arrays",
                              got=name + " is not an array", shapes=shapes)
    return tuple(out)


def judge_laws(got):
    (a, b, c), shapes = _parts()
    _compare("(a ⊕ b) ⊕ c vs a ⊕ (b ⊕ c)", got["ab.c"], _as_float(got["a.bc"], shapes), shapes)
    _compare("a ⊕ b vs b ⊕ a", got["ab"], _as_float(got["ba"], shapes), shapes)
    lse = np.array([p[1] for p in (a, b, c)])
    spread = max(float(np.ptp(col[np.isfinite(col)])) for col in lse.T if np.isfinite(col).sum() > 1)
    return "associative and commutative, with partials whose lse differ by up to %.0f: " \
        "so the ring may meet the shards in any order" % spread


# ------------------------------------------------------------------------------------------
# The ring
# ------------------------------------------------------------------------------------------

# (n, devices, causal, padded, seed): the schedule case, then the "ring" and "causal" cases
RINGS = {"schedule": [(10, 4, False, False, 21)],
         "ring": [(10, 4, False, False, 14), (7, 1, False, False, 8), (13, 3, False, False, 16),
                  (6, 6, False, False, 12)],
         "causal": [(12, 4, True, False, 52), (11, 3, True, True, 51)]}


def ring_data(n, devices, causal, padded, seed, dv=3):
    """Hidden Q, K, V and the allowed-pairs mask (n, n) of one ring case."""
    r = rng(seed)
    q, k, v = r.randn(n, 5), r.randn(n, 5) * 2.0, r.randn(n, dv)
    mask = np.ones((n, n), dtype=bool)
    if padded:
        mask[:, 1::3] = False      # padding keys
        mask[n // 2] = False       # and one query row that may attend nothing at all
    if causal:
        mask &= np.tril(np.ones((n, n), dtype=bool))
    return q, k, v, mask


def ring_label(n, devices, causal, padded, seed):
    return "n=%d, devices=%d%s%s" % (n, devices, ", causal" if causal else "",
                                     ", padding mask with an empty row" if padded else "")


def _ring_partials(case):
    """Shards and partials[r][s] of one ring case (a frame of its own: q, k, v end with it)."""
    n, devices = case[0], case[1]
    q, k, v, mask = ring_data(*case)
    shards = np.array_split(np.arange(n), devices)
    partials = [[reference.forward(q[shards[r]], k[shards[(r - s) % devices]],
                                   v[shards[(r - s) % devices]],
                                   mask=mask[np.ix_(shards[r], shards[(r - s) % devices])])
                 for s in range(devices)] for r in range(devices)]
    return shards, partials, shapes_of(q=q, k=k, v=v)


def _run_ring(ns, case):
    shards, partials, shapes = _ring_partials(case)
    attend = make_attend(shards, partials)
    del partials                            # (the log lives sealed in attend: no frame holds it)
    try:
        out = call_learner(ns["ring_forward"], case[0], case[1], attend, shapes=shapes,
                           context="ring_forward(%s)" % ring_label(*case))
        got = plain_tuple(out, ("o", "lse"), "ring_forward")
    except CheckFailed as fail:
        got = fail
    calls, problems = log_of(attend)
    return {"got": got, "calls": [int(c) for c in calls], "problems": [str(p) for p in problems]}


def collect_rings(ns):
    """Phase 1: every ring case's output, attend's call counts and refused requests."""
    return {name: [_run_ring(ns, case) for case in cases] for name, cases in RINGS.items()}


def _judge_schedule(case, run):
    label = "ring_forward(%s)" % ring_label(*case)
    if run["problems"]:
        raise CheckFailed("%s: %s" % (label, run["problems"][0]),
                          expected="requests on the ring's schedule",
                          got="%d refused request(s)" % len(run["problems"]))
    if isinstance(run["got"], CheckFailed):
        raise run["got"]
    devices = case[1]
    missing = [r for r in range(devices) if run["calls"][r] != devices]
    if missing:
        r = missing[0]
        raise CheckFailed("%s: device %d called attend %d times, but it must meet all %d K/V "
                          "shards (one per step)" % (label, r, run["calls"][r], devices),
                          expected="%d calls per device" % devices, got="%d" % run["calls"][r])


def _judge_ring_case(case, run):
    _judge_schedule(case, run)
    q, k, v, mask = ring_data(*case)
    return _compare(ring_label(*case), run["got"], reference.forward(q, k, v, mask=mask),
                    shapes_of(q=q, k=k, v=v))


def judge_schedule(collected):
    case, run = RINGS["schedule"][0], collected["schedule"][0]
    _judge_schedule(case, run)
    return "each device computed its own queries against shard r, r-1, r-2, ... (mod 4), once each"


def judge_ring(collected):
    worst = max(_judge_ring_case(c, r) for c, r in zip(RINGS["ring"], collected["ring"]))
    return "4 rings (ragged shards, one device, one row per device) equal attention over all " \
        "keys; max |Δ| = %.2g" % worst


def judge_causal(collected):
    worst = max(_judge_ring_case(c, r) for c, r in zip(RINGS["causal"], collected["causal"]))
    return "causal: blocks above the diagonal arrive as empty partials (0, -inf) and merge as the " \
        "identity; a row with no key gives o = 0, lse = -inf (max |Δ| = %.2g)" % worst

