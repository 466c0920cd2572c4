"""Exercise ``ring``: the online-softmax monoid across devices — predict a ring's traffic and
memory, compose ring attention from the monoid, balance causal work with the layout.

Sources: Dao, Haziza, Massa & Sizov 2023 (Flash-Decoding) for split-K merging of partials; Liu,
Zaharia & Abbeel 2023 (Ring Attention, arXiv:2310.01889); Brandon et al. 2023 (Striped
Attention, arXiv:2311.09431); Milakov & Gimelshein 2018 (arXiv:1805.02867) for the monoid.

What the graders hold the learner to (each is the property the step teaches):

- Predict: the numbers are compared with what the ring simulator ``kernels.ring.forward``
  reports in its trace (bytes in its "send" events, elements in its "resident" counts).
- Compose: ``ring_forward`` never sees Q, K or V. It gets ``attend(device, q_rows, k_rows)``,
  which returns one device's partial (o, lse) for the keys that device holds *at that step* and
  refuses any other request — so the only way to the answer is to follow the ring and merge the
  partials with the learner's own monoid. Calling the library's ring, split-K or reference
  (which would hand over the answer) is refused too, and the message says why.
- Balance: the learner's layouts and work counts are compared with ``ring.shards`` and
  ``ring.work``; the balance itself is measured from the learner's own functions.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from nlpcore import hardware
from nlpcore.kernels import flash_np, reference, ring, split_k
from nlpcore.lab.judging import assert_close, call_learner, expect_number, relative_close, rng, shapes_of
from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, Step

HERE = Folder(__file__)  # this exercise's folder: statements and solutions (starters marked in)

# The library functions a learner must not call (they would compute the answer for them),
# and the originals the graders themselves use while those names are blocked.
FORBIDDEN = (
    (ring, ("forward", "backward", "work", "shards", "idle")),
    (split_k, ("forward", "merge", "absorb", "finish", "start")),
    (reference, ("forward", "backward")),
    (flash_np, ("forward", "backward")),
)
FORBIDDEN_MODULES = tuple(module.__name__ for module, _ in FORBIDDEN)
_REF_FORWARD = reference.forward
_RING_FORWARD = ring.forward
_RING_SHARDS = ring.shards
_RING_WORK = ring.work

# The Predict step's setting (also written in its starter).
PREDICT_N, PREDICT_D, PREDICT_P, PREDICT_BYTES = 512, 64, 4, 4
PREDICT_RTOL = 0.10

WHY_OWN = ("this step is about composing the ring from the monoid yourself; the library's "
           "ring, split-K and reference kernels would compute the answer for you")


def _check_no_library(ns):
    """No name in the learner's namespace may be one of the forbidden modules or their functions."""
    found = []
    for name, value in ns.items():
        if name.startswith("__"):
            continue
        owner = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
        if isinstance(owner, str) and owner in FORBIDDEN_MODULES:
            found.append("%s (from %s)" % (name, owner))
    if found:
        raise CheckFailed("your code imports %s: %s" % (", ".join(found), WHY_OWN),
                          expected="no import of nlpcore.kernels.ring, split_k, reference or flash_np",
                          got=", ".join(found))
    return "merge and ring_forward are your own: no library ring, split-K or reference imported"


# ------------------------------------------------------------------------------------------
# Step 1 -- Predict: bytes on the wire and memory per device
# ------------------------------------------------------------------------------------------

_measured = {}


def measured_ring() -> dict:
    """What the simulator reports for the Predict setting (computed once, then cached)."""
    if not _measured:
        x = np.zeros((PREDICT_N, PREDICT_D), dtype=np.float32)
        trace = []
        _RING_FORWARD(x, x, x, devices=PREDICT_P, trace=trace)
        sent = [0] * PREDICT_P
        for e in trace:
            if e["op"] == "send":
                sent[e["from"]] += e["bytes"]
        resident = [e["resident"] for e in trace if e["op"] == "compute"]
        _measured.update(bytes_sent=max(sent), peak_elements=max(resident), sent=sent,
                         one_device_elements=PREDICT_N * (4 * PREDICT_D + 2))
    return _measured


def _check_recorded(ns):
    b = expect_number("bytes_sent", ns.get("bytes_sent"))
    e = expect_number("peak_elements", ns.get("peak_elements"))
    if b <= 0 or e <= 0:
        raise CheckFailed("predictions must be positive", expected="bytes_sent > 0 and peak_elements > 0",
                          got="%g, %g" % (b, e))
    return "recorded: bytes_sent = %.6g, peak_elements = %.6g" % (b, e)


def _check_bytes(ns):
    m = measured_ring()
    return relative_close("bytes_sent", ns.get("bytes_sent"), m["bytes_sent"], PREDICT_RTOL,
                          what="the simulator's send events add up to") + \
        " (every device sends the same: %s)" % ", ".join(str(s) for s in m["sent"])


def _check_memory(ns):
    m = measured_ring()
    text = relative_close("peak_elements", ns.get("peak_elements"), m["peak_elements"], PREDICT_RTOL,
                          what="the simulator's largest resident count is")
    return text + "; one device holding Q, K, V, O and (m, l) whole would need %d" % m["one_device_elements"]


# ------------------------------------------------------------------------------------------
# Step 2 -- Compose: merge partials, then the ring
# ------------------------------------------------------------------------------------------

def _pair(value, what):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed("%s must return a pair (o, lse)" % what, expected="(o, lse)",
                          got=type(value).__name__)
    return value[0], value[1]


def _compare(what, got, want, shapes):
    o, lse = got
    assert_close("o", o, want[0], shapes=shapes, dtype="float64", context=what)
    return assert_close("lse", lse, want[1], shapes=shapes, dtype="float64", context=what)


_MERGE_CUTS = [(0, 4), (4, 8), (8, 12)]


def _merge_inputs():
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


def _merge_data():
    """The three partials over A, B, C (the learner's inputs), and the shapes for messages."""
    q, k, v, mask = _merge_inputs()
    parts = [_REF_FORWARD(q, k[a:b], v[a:b], mask=mask[:, a:b]) for a, b in _MERGE_CUTS]
    return parts, None, shapes_of(q=q, k=k, v=v)


def _merge(ns, a, b, what, shapes):
    out = call_learner(ns["merge"], (a[0].copy(), a[1].copy()), (b[0].copy(), b[1].copy()),
                       shapes=shapes, context=what)
    return _pair(out, "merge")


def _check_identity(ns):
    parts, _, shapes = _merge_data()
    a = parts[0]  # rows 0 and 1 are themselves empty here
    e = (np.zeros_like(a[0]), np.full_like(a[1], -np.inf))
    _compare("merge(identity, a)", _merge(ns, e, a, "merge(identity, a)", shapes), a, shapes)
    _compare("merge(a, identity)", _merge(ns, a, e, "merge(a, identity)", shapes), a, shapes)
    _compare("merge(identity, identity)", _merge(ns, e, e, "merge(identity, identity)", shapes), e, shapes)
    return "(0, -inf) is neutral on both sides, and two empty partials stay empty (no NaN)"


def _collect_split(ns):
    """Phase 1: the learner's merges of the three partials (the answer does not exist yet)."""
    parts, _, shapes = _merge_data()
    a, b, c = parts
    ab = _merge(ns, a, b, "merge(A, B)", shapes)
    o, lse = _merge(ns, ab, c, "merge(merge(A, B), C)", shapes)
    try:
        return np.array(o, dtype=np.float64), np.array(lse, dtype=np.float64)
    except Exception:  # learner may return anything
        raise CheckFailed("merge must return arrays (o, lse)", expected="(o, lse) arrays",
                          got="%s, %s" % (type(o).__name__, type(lse).__name__))


def _judge_split(got):
    """Phase 2: attention over all keys, computed only now, against the learner's merge."""
    q, k, v, mask = _merge_inputs()
    whole = _REF_FORWARD(q, k, v, mask=mask)
    worst = _compare("merge of the partials over keys 0:4, 4:8, 8:12 vs attention over all 12",
                     got, whole, shapes_of(q=q, k=k, v=v))
    return "partials over three key sets merge to attention over all keys (max |Δ| = %.2g), " \
        "including rows empty in some parts or in all" % worst


def _check_laws(ns):
    parts, _, shapes = _merge_data()
    a, b, c = parts
    left = _merge(ns, _merge(ns, a, b, "a ⊕ b", shapes), c, "(a ⊕ b) ⊕ c", shapes)
    right = _merge(ns, a, _merge(ns, b, c, "b ⊕ c", shapes), "a ⊕ (b ⊕ c)", shapes)
    _compare("(a ⊕ b) ⊕ c vs a ⊕ (b ⊕ c)", left, (np.asarray(right[0], float), np.asarray(right[1], float)), shapes)
    ba = _merge(ns, b, a, "b ⊕ a", shapes)
    ab = _merge(ns, a, b, "a ⊕ b", shapes)
    _compare("a ⊕ b vs b ⊕ a", ab, (np.asarray(ba[0], float), np.asarray(ba[1], float)), shapes)
    lse = np.array([p[1] for p in parts])
    spread = max(float(np.ptp(col[np.isfinite(col)])) for col in lse.T if np.isfinite(col).sum() > 1)
    return "associative and commutative, with partials whose lse differ by up to %.0f: " \
        "so the ring may meet the shards in any order" % spread


class RingData:
    """Hidden Q, K, V of one ring run, and the ``attend`` a learner's ring_forward must use.

    ``attend(device, q_rows, k_rows)`` answers only the request the ring allows: device r's own
    query rows, against the K/V shard that device holds at its next step, (r - s) mod P.
    """

    def __init__(self, n, devices, causal=False, padded=False, dv=3, seed=0):
        r = rng(seed)
        self.n, self.devices, self.causal = n, devices, causal
        self.q, self.k, self.v = r.randn(n, 5), r.randn(n, 5) * 2.0, r.randn(n, dv)
        self.mask = np.ones((n, n), dtype=bool)
        if padded:
            self.mask[:, 1::3] = False  # padding keys
            self.mask[n // 2] = False   # and one query row that may attend nothing at all
        self.shards = np.array_split(np.arange(n), devices)
        self.calls = [0] * devices
        self.shapes = shapes_of(q=self.q, k=self.k, v=self.v)

    def label(self):
        return "n=%d, devices=%d%s%s" % (self.n, self.devices, ", causal" if self.causal else "",
                                         ", padding mask with an empty row" if self.mask.sum(1).min() == 0 else "")

    def _rows(self, rows, name):
        try:
            rows = np.asarray(rows)
            ok = rows.ndim == 1 and rows.dtype.kind in "iu"
        except Exception:  # learner may pass anything
            ok = False
        if not ok:
            raise CheckFailed("attend's %s must be a 1-D array of row indices" % name,
                              expected="e.g. shards[r]", got=repr(rows)[:80])
        return rows

    def attend(self, device, q_rows, k_rows):
        p = self.devices
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or not 0 <= device < p:
            raise CheckFailed("attend's device must be an int in range(%d)" % p, expected="0..%d" % (p - 1),
                              got=repr(device)[:40])
        device = int(device)
        q_rows, k_rows = self._rows(q_rows, "q_rows"), self._rows(k_rows, "k_rows")
        own = self.shards[device]
        if not np.array_equal(q_rows, own):
            raise CheckFailed("device %d asked for query rows %s, but it owns rows %s: a device only "
                              "computes its own queries" % (device, _short(q_rows), _short(own)),
                              expected=_short(own), got=_short(q_rows))
        step = self.calls[device]
        if step >= p:
            raise CheckFailed("device %d called attend a %d-th time: with %d devices the ring has "
                              "only %d steps" % (device, step + 1, p, p), expected="%d calls" % p,
                              got="%d" % (step + 1))
        held = (device - step) % p
        if not np.array_equal(k_rows, self.shards[held]):
            raise CheckFailed("at its step %d device %d asked for keys %s, but the ring has brought it "
                              "the K/V shard of device %d (rows %s): at step s device r holds shard "
                              "(r - s) mod P, never any other" % (step, device, _short(k_rows), held,
                                                                  _short(self.shards[held])),
                              expected=_short(self.shards[held]), got=_short(k_rows))
        self.calls[device] += 1
        allowed = self.mask[np.ix_(q_rows, k_rows)]
        if self.causal:
            allowed = allowed & (k_rows[None, :] <= q_rows[:, None])
        o, lse = _REF_FORWARD(self.q[q_rows], self.k[k_rows], self.v[k_rows], mask=allowed)
        return o.copy(), lse.copy()

    def run(self, ns):
        out = call_learner(ns["ring_forward"], self.n, self.devices, self.attend,
                           shapes=self.shapes, context="ring_forward(%s)" % self.label())
        missing = [r for r in range(self.devices) if self.calls[r] != self.devices]
        if missing:
            r = missing[0]
            raise CheckFailed("device %d called attend %d times, but it must meet all %d K/V shards "
                              "(one per step)" % (r, self.calls[r], self.devices),
                              expected="%d calls per device" % self.devices, got="%d" % self.calls[r])
        return _pair(out, "ring_forward")

    def want(self):
        allowed = self.mask & (np.tril(np.ones((self.n, self.n), dtype=bool)) if self.causal else True)
        return _REF_FORWARD(self.q, self.k, self.v, mask=allowed)


def _short(rows):
    rows = np.asarray(rows).tolist()
    return str(rows) if len(rows) <= 8 else "[%s, ..., %s] (%d rows)" % (
        ", ".join(map(str, rows[:3])), rows[-1], len(rows))


def _check_schedule(ns):
    data = RingData(10, 4, seed=21)
    data.run(ns)
    return "each device computed its own queries against shard r, r-1, r-2, ... (mod 4), once each"


def _check_ring(ns):
    worst = 0.0
    for n, p in ((10, 4), (7, 1), (13, 3), (6, 6)):
        data = RingData(n, p, seed=n + p)
        worst = max(worst, _compare(data.label(), data.run(ns), data.want(), data.shapes))
    return "4 rings (ragged shards, one device, one row per device) equal attention over all " \
        "keys; max |Δ| = %.2g" % worst


def _check_causal(ns):
    worst = 0.0
    for n, p, padded in ((12, 4, False), (11, 3, True)):
        data = RingData(n, p, causal=True, padded=padded, seed=40 + n)
        worst = max(worst, _compare(data.label(), data.run(ns), data.want(), data.shapes))
    return "causal: blocks above the diagonal arrive as empty partials (0, -inf) and merge as the " \
        "identity; a row with no key gives o = 0, lse = -inf (max |Δ| = %.2g)" % worst


# ------------------------------------------------------------------------------------------
# Step 3 -- Balance: layouts and causal work
# ------------------------------------------------------------------------------------------

BALANCE_N, BALANCE_P = 1024, 8
LAYOUTS = ring.LAYOUTS


def _learner_shards(ns, n, p, layout):
    out = call_learner(ns["shards"], n, p, layout, context="shards(%d, %d, %r)" % (n, p, layout))
    try:
        rows = [np.sort(np.asarray(x).astype(np.int64).ravel()) for x in out]
    except Exception:  # learner may return anything
        raise CheckFailed("shards(%d, %d, %r) must return a list of %d index arrays" % (n, p, layout, p),
                          expected="list of arrays", got=type(out).__name__)
    if len(rows) != p:
        raise CheckFailed("shards(%d, %d, %r) returned %d shards" % (n, p, layout, len(rows)),
                          expected="%d (one per device)" % p, got=str(len(rows)))
    return rows


def _check_shards(ns):
    for layout in LAYOUTS:
        for n, p in ((16, 4), (17, 4), (23, 3), (8, 8)):
            got = _learner_shards(ns, n, p, layout)
            want = _RING_SHARDS(n, p, layout)
            for r in range(p):
                if not np.array_equal(got[r], want[r]):
                    raise CheckFailed("%s layout, n=%d, %d devices: device %d holds the wrong rows"
                                      % (layout, n, p, r), expected=_short(want[r]), got=_short(got[r]))
    return "contiguous, striped and zig-zag shards match the ring simulator's (ragged n included)"


def _learner_work(ns, n, p, layout):
    out = call_learner(ns["work"], n, p, layout, context="work(%d, %d, %r)" % (n, p, layout))
    try:
        w = np.asarray(out, dtype=np.float64)
    except Exception:  # learner may return anything
        raise CheckFailed("work must return a (devices, steps) array of counts", expected="array",
                          got=type(out).__name__)
    if w.shape != (p, p):
        raise CheckFailed("work(%d, %d, %r) has the wrong shape" % (n, p, layout),
                          expected="(%d, %d)" % (p, p), got=str(w.shape))
    return w


def _check_work(ns):
    for layout in LAYOUTS:
        for n, p in ((16, 4), (50, 3), (64, 8)):
            got = _learner_work(ns, n, p, layout)
            want = _RING_WORK(n, p, True, layout)
            if not np.array_equal(got, want):
                r, s = (int(i) for i in np.argwhere(got != want)[0])
                raise CheckFailed("%s layout, n=%d, %d devices: device %d at step %d computes %d "
                                  "causal scores, not %g" % (layout, n, p, r, s, want[r, s], got[r, s]),
                                  expected="work[%d, %d] = %d" % (r, s, want[r, s]), got="%g" % got[r, s],
                                  where=[r, s])
    return "causal work per device and step matches ring.work for every layout"


def _check_makespan(ns):
    r = rng(7)
    for shape in ((4, 4), (3, 3), (1, 1)):
        w = r.randint(0, 100, size=shape)
        got = call_learner(ns["makespan"], w.copy(), context="makespan of a %dx%d matrix" % shape)
        want = float(w.max(axis=0).sum())
        if not isinstance(got, (int, float, np.integer, np.floating)) or float(got) != want:
            raise CheckFailed("makespan(w) for w = %s" % w.tolist(), expected="%g (sum over steps of the "
                              "busiest device's work)" % want, got=repr(got)[:60])
    return "a step lasts as long as its busiest device"


def balance_table(ns) -> dict:
    """makespan / ideal and idle share per layout, from the learner's own work and makespan."""
    rows = []
    for layout in LAYOUTS:
        w = _learner_work(ns, BALANCE_N, BALANCE_P, layout)
        span = expect_number("makespan(work(...))", call_learner(ns["makespan"], w))
        ideal = float(w.sum()) / BALANCE_P
        rows.append([layout, int(w.sum()), span, span / ideal if ideal else math.inf,
                     1.0 - ideal / span if span else 0.0])
    return {"columns": ["layout", "causal scores", "makespan", "makespan / ideal", "idle share"], "rows": rows}


def _check_balance(ns):
    table = balance_table(ns)
    ratio = {row[0]: row[3] for row in table["rows"]}
    if not (ratio["striped"] < 1.02 and ratio["zigzag"] < 1.02 and ratio["contiguous"] > 1.5):
        raise CheckFailed("with your work and makespan at n=%d, %d devices: contiguous %.3f, striped "
                          "%.3f, zigzag %.3f times the ideal" % (BALANCE_N, BALANCE_P, ratio["contiguous"],
                                                                 ratio["striped"], ratio["zigzag"]),
                          expected="contiguous > 1.5, striped and zigzag < 1.02", got=str(ratio),
                          table=table)
    return "n=%d, %d devices, causal: contiguous takes %.2f× the ideal time, striped %.3f×, " \
        "zig-zag %.3f×" % (BALANCE_N, BALANCE_P, ratio["contiguous"], ratio["striped"], ratio["zigzag"])


def _report_balance(ns):
    table = balance_table(ns)
    rows = [[layout, scores, span, "%.3f×" % ratio, "%.1f%%" % (100 * idle)]
            for layout, scores, span, ratio, idle in table["rows"]]
    return {"title": "Measured with your work() and makespan(): causal, n = %d, %d devices"
            % (BALANCE_N, BALANCE_P), "table": {"columns": table["columns"], "rows": rows}}


# ------------------------------------------------------------------------------------------

def _overlap_numbers() -> dict:
    """The ring's overlap condition in numbers for the statement (nlpcore.hardware)."""
    out = {}
    for link in ("NVLink", "PCIe"):
        out["h200_%s_min_block" % link.lower()] = "{:,}".format(hardware.ring_min_block("H200", link))
        out["h200_%s_oneway" % link.lower()] = "%g" % (hardware.link_bytes_per_s("H200", link) / 1e9)
    return out


def build() -> Exercise:
    predict = Step(
        id="predict", kind="Predict", title="Predict the ring's traffic and memory", minutes=15,
        statement=HERE.statement("predict", N=PREDICT_N, d=PREDICT_D, P=PREDICT_P, BYTES=PREDICT_BYTES,
                                 rtol_percent=int(round(100 * PREDICT_RTOL)),
                                 **_overlap_numbers()),
        starter=HERE.starter("predict"), solution=HERE.solution("predict"),
        hints=(
            "A shard is $n = N / P = 128$ rows. After every step but the last, a device sends the "
            "K and V rows of the shard it holds: $n(d + d_v)$ elements.",
            "The last step sends nothing: nobody needs another shard. That makes $P - 1$ sends.",
            "Memory: $Q_r$ and $O_r$ are $n \\times d$ each, $(m, \\ell)$ is $2n$, and two K/V "
            "shards of $n(d + d_v)$ each (the one in use, the one arriving).",
        ),
        required=("bytes_sent", "peak_elements"), record=("bytes_sent", "peak_elements"),
        refuse=FORBIDDEN_MODULES,  # predict by reasoning: the simulator would give the numbers
        checks=(
            Check("recorded", "prediction recorded", _check_recorded),
            Check("bytes", "bytes sent per device within 10% of the simulator's count", _check_bytes),
            Check("memory", "peak elements per device within 10% of the simulator's count", _check_memory),
        ))
    compose = Step(
        id="compose", kind="Compose", title="Compose the ring from the monoid", minutes=30,
        statement=HERE.statement("compose"),
        starter=HERE.starter("compose"), solution=HERE.solution("compose"),
        hints=(
            "Subtract the larger lse before exponentiating, as in the online softmax: "
            "`m = np.maximum(lse_a, lse_b)`.",
            "Where both lse are $-\\infty$, shift by 0 instead (`np.where(np.isfinite(m), m, 0)`), "
            "so both weights are 0 and you return $(0, -\\infty)$ without computing $0/0$.",
            "`ring_forward`: keep one running partial per device; for `step` in range(P) and `r` "
            "in range(P) call `attend(r, shards[r], shards[(r - step) % P])` and merge. Then "
            "`np.concatenate` the devices' o and lse in device order.",
        ),
        required=("merge", "ring_forward"),
        refuse=FORBIDDEN_MODULES,  # attend() keeps the reference it computes partials with
        checks=(
            Check("own", "your own monoid (no library ring, split-K or reference)", _check_no_library),
            Check("identity", "identity: (0, -inf) is neutral", _check_identity),
            Check("split", "partials over key sets merge to attention over all keys",
                  collect=_collect_split, judge=_judge_split),
            Check("laws", "associative and commutative", _check_laws),
            Check("schedule", "the ring schedule: shard (r - s) mod P at step s", _check_schedule),
            Check("ring", "ring output equals attention (ragged shards)", _check_ring),
            Check("causal", "causal rings and empty rows", _check_causal),
        ))
    balance = Step(
        id="balance", kind="Balance", title="Balance causal work", minutes=25,
        statement=HERE.statement("balance", n=BALANCE_N, P=BALANCE_P),
        starter=HERE.starter("balance"), solution=HERE.solution("balance"),
        hints=(
            "`np.arange(r, n, devices)` is the striped shard of device r.",
            "Zig-zag: `chunks = np.array_split(np.arange(n), 2 * devices)`, then "
            "`np.concatenate([chunks[r], chunks[2 * devices - 1 - r]])`.",
            "Work of one block: `(keys[None, :] <= rows[:, None]).sum()`, with `rows` the device's "
            "queries and `keys` the shard it holds at that step. Makespan: "
            "`w.max(axis=0).sum()`.",
        ),
        required=("shards", "work", "makespan"), refuse=FORBIDDEN_MODULES,
        report=_report_balance,
        checks=(
            Check("shards", "contiguous, striped and zig-zag shards", _check_shards),
            Check("work", "causal work per device and step", _check_work),
            Check("makespan", "makespan of a synchronous ring", _check_makespan),
            Check("balance", "striped and zig-zag balance causal work, contiguous does not", _check_balance),
        ))
    return Exercise(
        id="ring", title="The monoid across devices: split-K decoding and ring attention",
        tier="browser", minutes=70,
        summary=("Predict a ring's traffic and memory per device, compose ring attention from the "
                 "online-softmax monoid over partial (o, lse), and balance causal work with striped "
                 "and zig-zag layouts."),
        steps=(predict, compose, balance),
        sources=("Dao, Haziza, Massa & Sizov 2023, Flash-Decoding for long-context inference "
                 "(PyTorch blog / Stanford CRFM)",
                 "Liu, Zaharia & Abbeel 2023, Ring Attention with Blockwise Transformers for "
                 "Near-Infinite Context, arXiv:2310.01889",
                 "Brandon et al. 2023, Striped Attention: Faster Ring Attention for Causal "
                 "Transformers, arXiv:2311.09431",
                 "Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
                 "arXiv:1805.02867"))
