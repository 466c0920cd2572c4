"""Episode 5's measured sentences (claims fa3-ours-ablation and fa3-ours-vs-cudnn) are computed from
the H200 records by nlpcore.web.fa3_numbers, and bench/FA3.md's profile table is generated from
fa3_ncu.json: here they are held against the records, read without the claims' keys."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from nlpcore import claims
from nlpcore.web import fa3_numbers, lessons

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _record(name):
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def _pct(x):
    return "%.0f" % x if x >= 9.5 else "%.1f" % x


def test_the_ablation_sentence_is_the_records():
    """Every row's cost or gain of switching a technique off is inside the range the sentence prints
    for it, and the sign is the record's: 'costs' where the kernel got slower, 'faster' where not."""
    rec = _record("fa3_h200.json")
    text = fa3_numbers.page_numbers()["fa3_ablation"]
    assert text == fa3_numbers.ablation_text(rec) and lessons.page_numbers()["fa3_ablation"] == text
    clauses = dict((off, c) for off in ("no_warp_spec", "no_overlap", "no_pingpong")
                   for c in text.split("; ") if c.startswith("turning off " + fa3_numbers.TECHNIQUES[off][0]))
    assert len(clauses) == 3, text
    for off, clause in clauses.items():
        ratios = [r["fwd"][off]["tflops"] / r["fwd"]["full"]["tflops"] for r in rec["rows"]]
        printed = [float(x) for x in re.findall(r"(\d+(?:\.\d)?)%", clause)]
        assert ("costs" in clause) == any(x < 1 for x in ratios), clause
        assert ("faster" in clause) == any(x > 1 for x in ratios), clause
        extremes = [100 * (1 - min(ratios))] if min(ratios) < 1 else []
        extremes += [100 * (max(ratios) - 1)] if max(ratios) > 1 else []
        for e in extremes:  # the largest cost and the largest gain are printed, as rounded
            assert float(_pct(e)) in printed, (clause, e)
    # warp specialisation's variant also has ping-pong off, and the sentence says so
    assert rec["variants"]["no_warp_spec"]["pingpong"] is False and "also turns off ping-pong" in clauses["no_warp_spec"]
    costs = {off: sum(1 - r["fwd"][off]["tflops"] / r["fwd"]["full"]["tflops"] for r in rec["rows"]) for off in clauses}
    assert text.startswith(clauses[max(costs, key=costs.get)])  # the largest cost first


def test_the_hand_over_clause_is_the_records():
    """The ablation sentence ends with mbarrier against named-barrier hand-overs (the largest cost and
    gain the record shows), then the run's spread: the two timings of each shape's own launch."""
    rec = _record("fa3_h200.json")
    clause, spread = fa3_numbers.page_numbers()["fa3_ablation"].split("; ")[-2:]
    assert clause.startswith("handing over through mbarriers instead of named barriers"), clause
    ratios = [r["fwd"]["mbarrier"]["tflops"] / r["fwd"]["named"]["tflops"] for r in rec["rows"]]
    printed = [float(x) for x in re.findall(r"(\d+(?:\.\d)?)%", clause)]
    for e in ([100 * (1 - min(ratios))] if min(ratios) < 1 else []) + ([100 * (max(ratios) - 1)] if max(ratios) > 1 else []):
        assert float(_pct(e)) in printed, (clause, e)
    twin = [r["fwd"]["full"]["tflops"] / r["fwd"]["named" if r["variant"]["named"] else "mbarrier"]["tflops"]
            for r in rec["rows"]]
    assert "differs by up to %s%%" % _pct(100 * max(abs(x - 1) for x in twin)) in spread
    older = {"variants": {"full": {}}, "rows": []}  # a record without the two columns: neither clause
    assert fa3_numbers.handover_text(older) == [] and fa3_numbers.spread_text(older) == []


def test_the_standing_sentence_is_the_records():
    """Each shape lands in the group its ratio to cuDNN puts it in (default launch: persistent without a
    mask, one program per item with it), with the record's percentage."""
    rec = _record(claims.FA3_STANDING.rsplit("/", 1)[1])
    text = fa3_numbers.page_numbers()["fa3_standing"]
    ratio = {(r["d"], r["n"], r["causal"]): r["fwd"][claims.FA3_DEFAULT_LAUNCH[r["causal"]]]["tflops"]
             / r["fwd"]["cudnn"]["tflops"] for r in rec[claims.FA3_STANDING_LIST]}
    ahead = [s for s, x in ratio.items() if x >= 1]
    close = [s for s, x in ratio.items() if fa3_numbers.CLOSE <= x < 1]
    behind = [s for s, x in ratio.items() if x < fa3_numbers.CLOSE]
    assert ("at %d of the %d shapes" % (len(ahead), len(ratio)) in text) == bool(ahead)
    if close:
        assert "within %s%% of it at %d" % (_pct(100 * (1 - min(ratio[s] for s in close))), len(close)) in text
    assert ("further behind at %d" % len(behind) in text) == bool(behind)
    assert ("within" in text) == bool(close) and ("further behind" in text) == bool(behind)
    for d, n, c in ahead + behind:
        sign = "+" if ratio[(d, n, c)] >= 1 else "−"
        shape = "d = %d, N = %d%s (%s%s%%)" % (d, n, ", causal" if c else "", sign, _pct(100 * abs(ratio[(d, n, c)] - 1)))
        assert shape in text, shape
    assert "within 1%" not in text  # the old typed claim, wrong at d = 128 (0.987)


def test_effect_phrases():
    s = (128, 4096, False)
    assert fa3_numbers.effect([(s, 0.8), (s, 0.9)]) == "costs 10–20%"
    assert fa3_numbers.effect([(s, 1.012), (s, 1.031)]) == "makes it 1.2–3.1% faster"
    assert fa3_numbers.effect([(s, 0.976), ((64, 1024, True), 1.011)]) == (
        "costs up to 2.4% (d = 128, N = 4096) and makes it up to 1.1% faster (d = 64, N = 1024, causal)")


def test_not_recorded_without_the_records(monkeypatch):
    from nlpcore import measured
    monkeypatch.setattr(measured, "record", lambda name=None: None)
    assert fa3_numbers.page_numbers() == {"fa3_ablation": "not recorded", "fa3_standing": "not recorded"}


def test_the_claims_name_every_row_they_summarise():
    for cid, record, rows in (("fa3-ours-ablation", claims.FA3_ABLATION, claims.FA3_ABLATION_ROWS),
                              ("fa3-ours-vs-cudnn", claims.FA3_STANDING, claims.FA3_STANDING_ROWS)):
        claim = claims.BY_ID[cid]
        assert claim.record == record and claim.status == "measured here"
        rows_of = claims.FA3_STANDING_LIST if record == claims.FA3_STANDING else "rows"
        recorded = {(r["d"], r["n"], r["causal"]) for r in _record(record.rsplit("/", 1)[1])[rows_of]}
        assert set(rows) == recorded, cid  # every row of the record, no more
        assert "{{page.fa3_" in claim.text and not re.search(r"\d%", claim.text)  # no typed percentage


def test_fa3_md_names_the_xu_pipe_for_what_it_is():
    """sm__inst_executed_pipe_xu counts special functions and conversions, not exp2 alone."""
    text = (ROOT / "bench" / "FA3.md").read_text(encoding="utf-8")
    assert "MUFU" not in text and "XU pipe (exp2, conversions)" in text


def test_runs_on_python38():
    py38 = ROOT / ".venv38" / "bin" / "python"
    if not py38.exists():
        pytest.skip("no .venv38")
    code = "from nlpcore.web import fa3_numbers as f; print(f.page_numbers()['fa3_standing'][:9])"
    out = subprocess.run([str(py38), "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 0, out.stderr
