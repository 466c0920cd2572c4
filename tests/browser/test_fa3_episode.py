"""Episode 5 (FlashAttention-3 on Hopper) on the module page, in headless Chromium: the ablation
table, the timeline figure, the standing against cuDNN and the profile sentence are drawn from
the H200 records in bench/results (fa3_h200.json, triton_h200.json, fa3_h200_variants.json,
fa3_ncu.json), and
the numbers on the page are the records' own."""
from __future__ import annotations

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def test_episode_5_is_drawn_from_the_records(page, site_url):
    page.goto(site_url + "index.html#ep5")
    for testid in ("fa3-ablation", "fa3-timeline", "fa3-standing", "fa3-ncu"):
        page.wait_for_function(f"document.querySelector('[data-testid={testid}]').dataset.state === 'ready'")
    ablation = json.loads((RESULTS / "fa3_h200.json").read_text())
    cells = page.locator("[data-testid=fa3-ablation-table] tbody tr")
    assert cells.count() == len(ablation["rows"])
    first = cells.nth(0).inner_text().split()
    row = ablation["rows"][0]
    assert first[:2] == [str(row["d"]), str(row["n"])]
    assert "%.0f" % row["fwd"]["full"]["tflops"] in first  # the record's number, rounded
    svg = page.locator("[data-testid=fa3-timeline] svg")
    assert svg.count() == 1 and svg.locator("rect").count() > 30
    labels = svg.text_content()
    assert "producer warp" in labels and "tensor cores" in labels
    standing = json.loads((RESULTS / "triton_h200.json").read_text())
    top = next(r for r in standing["results"] if r["d"] == 128 and r["n"] == 16384 and not r["causal"])
    assert "%.0f TFLOP/s" % top["fwd"]["fa3"]["tflops"] in page.inner_text("[data-testid=fa3-standing]")
    ratio = {(r["d"], r["n"], r["causal"]): r["fwd"]["fa3"]["tflops"] / r["fwd"]["cudnn"]["tflops"]
             for r in standing["results"]}
    worst = min(ratio, key=ratio.get)  # named with its ratio, beside what the sweep read there
    where = "d = %d, N = %d%s at %.2f×" % (worst[0], worst[1], ", causal" if worst[2] else "", ratio[worst])
    assert "The furthest behind is " + where in page.inner_text("[data-testid=fa3-standing]")
    sweep = json.loads((RESULTS / "fa3_h200_variants.json").read_text())
    assert sweep["env"]["date_utc"] in page.inner_text("[data-testid=fa3-standing]")
    page.wait_for_function("document.querySelector('[data-testid=fa3-variants]').dataset.state === 'ready'")
    n_candidates = sum(len(r["fwd"]) - 1 for r in sweep["rows"])
    assert "from %d checked candidates" % n_candidates in page.inner_text("[data-testid=fa3-variants]")
    assert page.locator("[data-testid=fa3-variants-table] tbody tr").count() == len(sweep["rows"])
    ncu = json.loads((RESULTS / "fa3_ncu.json").read_text())
    ours = next(k for k in ncu["kernels"] if k["label"].startswith("fa3 "))
    text = page.inner_text("[data-testid=fa3-ncu]")
    assert "XU pipe" in text and "exp2 unit" not in text and "%.0f µs" % (ours["gpu__time_duration.sum"]["value"] / 1e3) in text
    assert "grid %s" % ours["grid"] in text  # the profiled launch is stated, read from fa3_ncu.json
    assert "named barriers" in text  # the profiled launch's variant, described from the sweep's name
    top_row = next(r for r in ablation["rows"] if r["d"] == 128 and r["n"] == 16384 and not r["causal"])
    tile = (64 * top_row["variant"]["consumers"], top_row["variant"]["block_n"])  # the row's own launch
    assert page.inner_text("#fa3-timeline-what").startswith("One %d×%d key tile per SM" % tile)
    heads = page.locator("[data-testid=fa3-ablation-table] thead th").all_inner_texts()
    assert any("named barriers" in h for h in heads) and any("mbarriers" in h for h in heads)
    assert "Schematic" in labels
    assert page.locator("#ep5 [data-claim^=fa3-]").count() >= 5  # stamped from nlpcore.claims
    assert page.locator("#src-shah2024").count() == 1
