"""Episode 5 (FlashAttention-3 on Hopper) on the module page, in headless Chromium: the ablation
table, the timeline figure, the standing against cuDNN and the profile sentence are drawn from
the H200 records in bench/results (fa3_h200.json, fa3_h200_persistent.json, fa3_ncu.json), and
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
    standing = json.loads((RESULTS / "fa3_h200_persistent.json").read_text())
    top = next(r for r in standing["rows"] if r["d"] == 128 and r["n"] == 16384 and not r["causal"])
    assert "%.0f TFLOP/s" % top["fwd"]["full"]["tflops"] in page.inner_text("[data-testid=fa3-standing]")
    ncu = page.inner_text("[data-testid=fa3-ncu]")
    assert "XU pipe" in ncu and "exp2 unit" not in ncu  # the metric counts all special functions and conversions
    assert "grid (32, 128, 1)" in ncu  # the profiled launch is stated, read from fa3_ncu.json
    tuned = ablation["tuned"]["(128, 'torch.bfloat16', False, True, True, True, 15)"]["config (BLOCK_N, STAGES)"]
    assert page.inner_text("#fa3-timeline-what").startswith("One 128×%d key tile per SM" % tuned[0])
    assert "Schematic" in labels
    assert page.locator("#ep5 [data-claim^=fa3-]").count() >= 5  # stamped from nlpcore.claims
    assert page.locator("#src-shah2024").count() == 1
