"""Episode 5's measured conclusions, computed from the H200 records (never typed), and the
Nsight Compute table of ``bench/FA3.md``.

build.py stamps :func:`page_numbers` as ``{{page.<name>}}`` (through ``lessons.page_numbers``)
into the claims ``fa3-ours-ablation`` and ``fa3-ours-vs-cudnn``, so a re-run that rewrites the
records rewrites the sentences with them:

- ``fa3_ablation``: what turning each of FlashAttention-3's techniques off does to our kernel's
  forward, read from ``bench/results/fa3_h200.json`` through ``claims.fa3_key`` at the rows
  ``claims.FA3_ABLATION_ROWS``; one clause per technique, the largest cost first, split by head
  dimension where the sign differs between them, and last the hand-overs on mbarriers against named
  barriers (``claims.FA3_HANDOVER``) and the run's spread (one launch timed twice);
- ``fa3_standing``: the default launch (``claims.FA3_DEFAULT_LAUNCH``) against cuDNN on
  ``claims.FA3_STANDING_ROWS`` of ``claims.FA3_STANDING`` (the fa3 column of ``bench/results/triton_h200.json``): at or above it,
  within :data:`CLOSE`, and further behind, with the shapes and ratios.

FA3.md's profile tables come from ``bench/fa3_ncu.py --markdown`` (tests/test_flash_fa3.py holds
them equal to the records). Reads files only when called; runs on
Python 3.8 like the rest of nlpcore.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from .. import claims, measured

CLOSE = 0.97  # "within" cuDNN: at most 3% behind in one run (one configuration spread ±4% between runs)
TECHNIQUES = {"no_warp_spec": ("warp specialisation", "warp_spec"), "no_overlap": ("the intra-warpgroup overlap", "overlap"),
              "no_pingpong": ("ping-pong", "pingpong")}  # record variant -> (name on the page, its flag)
Shape = Tuple[int, int, bool]  # (d, N, causal)


def _pct(x: float) -> str:
    return "%.0f" % x if x >= 9.5 else "%.1f" % x


def _span(values: Sequence[float]) -> str:
    """'a–b%' over percentages (one number when both round alike)."""
    lo, hi = _pct(min(values)), _pct(max(values))
    return lo + "%" if lo == hi else "%s–%s%%" % (lo, hi)


def _where(shape: Shape, with_d: bool) -> str:
    d, n, causal = shape
    return ("d = %d, " % d if with_d else "") + "N = %d" % n + (", causal" if causal else "")


def effect(rows: Sequence[Tuple[Shape, float]], with_d: bool = True) -> str:
    """What switching a technique off does, from ``(shape, off/full TFLOP/s)`` pairs: 'costs a–b%',
    'makes it a–b% faster', or both with the shapes where each extreme happens."""
    costs = [(s, 100.0 * (1 - r)) for s, r in rows if r < 1]
    gains = [(s, 100.0 * (r - 1)) for s, r in rows if r > 1]
    if not gains:
        return "costs " + _span([c for _, c in costs]) if costs else "changes nothing"
    if not costs:
        return "makes it " + _span([g for _, g in gains]) + " faster"
    worst, best = max(costs, key=lambda x: x[1]), max(gains, key=lambda x: x[1])
    return "costs up to %s%% (%s) and makes it up to %s%% faster (%s)" % (
        _pct(worst[1]), _where(worst[0], with_d), _pct(best[1]), _where(best[0], with_d))


def ablation_text(record: dict) -> str:
    """One clause per technique of ``claims.FA3_ABLATION_OFF``, the largest mean cost first."""
    full_flags = record["variants"]["full"]
    clauses = []
    for off in claims.FA3_ABLATION_OFF:
        name, flag = TECHNIQUES[off]
        also = [TECHNIQUES["no_" + f][0] for f, on in full_flags.items()
                if f != flag and on and not record["variants"][off][f] and "no_" + f in TECHNIQUES]
        rows = [(s, _tf(record, s, off) / _tf(record, s, "full")) for s in claims.FA3_ABLATION_ROWS]
        by_d = {}  # type: Dict[int, List[Tuple[Shape, float]]]
        for s, r in rows:
            by_d.setdefault(s[0], []).append((s, r))
        signs = {d: (min(r for _, r in rs) < 1, max(r for _, r in rs) > 1) for d, rs in by_d.items()}
        if len(set(signs.values())) == 1:
            what = effect(rows)
        else:
            what = ", and ".join("at d = %d %s" % (d, effect(rs, with_d=False)) for d, rs in sorted(by_d.items(), reverse=True))
        text = "turning off %s%s %s" % (name, " (which also turns off %s)" % " and ".join(also) if also else "", what)
        clauses.append((-sum(r for _, r in rows) / len(rows), text))  # mean off/full: lowest = largest cost
    clauses.sort(key=lambda c: -c[0])
    return "; ".join([text for _, text in clauses] + handover_text(record) + spread_text(record))


def handover_text(record: dict) -> List[str]:
    """The clause for the hand-overs (``claims.FA3_HANDOVER``: mbarriers against named barriers, both with
    all three techniques on), or none in a record without those two variants."""
    named, mbarrier = claims.FA3_HANDOVER
    if not {named, mbarrier} <= set(record["variants"]):
        return []
    rows = [(s, _tf(record, s, mbarrier) / _tf(record, s, named)) for s in claims.FA3_ABLATION_ROWS]
    return ["handing over through mbarriers instead of named barriers " + effect(rows)]


def spread_text(record: dict) -> List[str]:
    """The run's own spread, where the record timed one launch twice: "all three" is the shape's chosen
    launch, which hands over one of the two ways, so it equals one of the ``claims.FA3_HANDOVER``
    columns. None in a record without them."""
    named, mbarrier = claims.FA3_HANDOVER
    if not {named, mbarrier} <= set(record["variants"]):
        return []
    by_shape = {(r["d"], r["n"], r["causal"]): r for r in record["rows"]}
    spread = [abs(_tf(record, s, "full") / _tf(record, s, named if by_shape[s]["variant"]["named"] else mbarrier) - 1)
              for s in claims.FA3_ABLATION_ROWS if "named" in by_shape[s].get("variant", {})]
    if not spread:
        return []
    return ["the same launch timed twice in this run (as \u201call three\u201d and as one of the two hand-over "
            "columns) differs by up to %s%%, so a smaller difference is inside the run's spread" % _pct(100 * max(spread))]


def _tf(record: dict, shape: Shape, variant: str) -> float:
    return claims.resolve(record, claims.fa3_key(*shape, variant))


def _shapes(shapes: Sequence[Shape], ratios: Dict[Shape, float]) -> str:
    """'d = 64, N = 1024, causal (−24%); …': each shape with its ratio against cuDNN."""
    return "; ".join("%s (%s%s%%)" % (_where(s, True), "+" if ratios[s] >= 1 else "−", _pct(100 * abs(ratios[s] - 1)))
                     for s in shapes)


def _count(shapes: Sequence[Shape]) -> str:
    return "%d shape%s" % (len(shapes), "" if len(shapes) == 1 else "s")


def standing_text(record: dict) -> str:
    """Where the default launch stands against cuDNN on ``claims.FA3_STANDING_ROWS``."""
    ours = {s: claims.fa3_key(*s, claims.FA3_DEFAULT_LAUNCH[s[2]], claims.FA3_STANDING_LIST)
            for s in claims.FA3_STANDING_ROWS}
    ratio = {s: claims.resolve(record, ours[s]) / claims.resolve(record, claims.fa3_key(*s, "cudnn", claims.FA3_STANDING_LIST))
             for s in claims.FA3_STANDING_ROWS}
    order = sorted(ratio, key=lambda s: -ratio[s])
    ahead = [s for s in order if ratio[s] >= 1.0]
    close = [s for s in order if CLOSE <= ratio[s] < 1.0]
    behind = [s for s in order if ratio[s] < CLOSE]
    parts = []
    if ahead:
        parts.append("at or above cuDNN's speed at %d of the %d shapes (%s)" % (len(ahead), len(ratio), _shapes(ahead, ratio)))
    if close:
        gap = 100.0 * (1 - min(ratio[s] for s in close))
        parts.append("within %s%% of it at %s (%s)" % (_pct(gap), _count(close), _shapes(close, ratio)))
    if behind:
        parts.append("further behind at %s (%s)" % (_count(behind), _shapes(behind[::-1], ratio)))
    return ", ".join(parts[:-1]) + (", and " if len(parts) > 1 else "") + parts[-1]


def page_numbers(ablation: Any = None, standing: Any = None) -> Dict[str, str]:
    """``fa3_ablation`` and ``fa3_standing`` (module docstring); "not recorded" without a record."""
    ablation = measured.record(claims.FA3_ABLATION.rsplit("/", 1)[1]) if ablation is None else ablation
    standing = measured.record(claims.FA3_STANDING.rsplit("/", 1)[1]) if standing is None else standing
    return {"fa3_ablation": "not recorded" if ablation is None else ablation_text(ablation),
            "fa3_standing": "not recorded" if standing is None else standing_text(standing)}


__all__ = ["ablation_text", "effect", "handover_text", "page_numbers", "spread_text", "standing_text"]
