"""The ring view of the visualizer and the module page's "Beyond one kernel" section, in Chromium.

Expected numbers come from CPython: nlpcore.web.ringviz.trace with the same parameters (the page
draws exactly the ring simulator's trace) and the recorded bench/results/split_k_h200.json.
"""
from __future__ import annotations

import json

from nlpcore.web import ringviz

BOOT_MS = 180_000
READY = ("(want) => { const s = document.querySelector('[data-testid=ring-status]');"
         " return s.dataset.status === 'error' || (s.dataset.status === 'ready' &&"
         " s.textContent.includes(want)); }")


def device_rows(page):
    return page.eval_on_selector_all(
        "[data-testid=ring-device-table] tbody tr",
        "trs => trs.map(tr => Array.from(tr.cells).map(td => td.textContent))")


def wait_ready(page, layout):
    page.wait_for_function(READY, arg=f"{layout} layout", timeout=BOOT_MS)
    status = page.locator("[data-testid=ring-status]")
    assert status.get_attribute("data-status") == "ready", status.inner_text()


def test_ring_view_draws_the_simulators_trace_step_by_step(page, site_url):
    expected = ringviz.trace(16, 4, "contiguous", True)
    page.goto(site_url + "visualizer.html?view=ring&n=16&devices=4&layout=contiguous&causal=1")
    wait_ready(page, "contiguous")
    assert page.locator("#tiles-view").is_hidden() and page.locator("[data-testid=ring-view]").is_visible()
    assert page.inner_text("[data-testid=ring-step]") == "0"
    assert page.inner_text("[data-testid=ring-last-step]") == "3"
    for s in range(4):
        rows = device_rows(page)
        want = expected["steps"][s]["devices"]
        assert [int(r[3]) for r in rows] == [d["work"] for d in want], s  # work column
        assert [int(r[4]) for r in rows] == [d["idle"] for d in want], s  # idle column
        assert [r[2].startswith(f"device {d['kv_shard']}:") for r, d in zip(rows, want)] == [True] * 4
        if s < 3:
            page.click("[data-testid=ring-next]")
    assert page.is_disabled("[data-testid=ring-next]")
    assert "nothing is sent" in page.inner_text("[data-testid=ring-event]")
    summary = page.locator("[data-testid=ring-summary]")
    assert abs(float(summary.get_attribute("data-idle-share")) - expected["summary"]["idle_share"]) < 1e-12
    assert float(page.get_attribute("[data-testid=ring-exact]", "data-max-abs-err")) < 1e-5
    compare = page.eval_on_selector_all("[data-testid=ring-compare] tbody tr",
                                        "trs => trs.map(tr => [tr.dataset.layout, tr.cells[1].textContent])")
    assert compare == [[name, "%.3f×" % s["over_ideal"]] for name, s in expected["layouts"].items()]

    striped = ringviz.trace(16, 4, "striped", True)
    page.check("input[name=layout][value=striped]")
    page.click("[data-testid=ring-run]")
    wait_ready(page, "striped")
    assert abs(float(summary.get_attribute("data-idle-share")) - striped["summary"]["idle_share"]) < 1e-12
    assert striped["summary"]["idle_share"] < expected["summary"]["idle_share"]
    assert "layout=striped" in page.url


def test_tiles_view_is_the_default_and_links_to_the_ring(page, site_url):
    page.goto(site_url + "visualizer.html")
    page.wait_for_function("document.querySelector('[data-testid=viz-status]').dataset.status !== 'loading'",
                           timeout=BOOT_MS)
    assert page.locator("[data-testid=ring-view]").is_hidden() and page.locator("#tiles-view").is_visible()
    assert page.get_attribute("[data-testid=viz-view-ring]", "href") == "visualizer.html?view=ring"


def test_module_page_explains_distribution_with_the_recorded_split_k_numbers(page, site_url, lab_dist):
    page.goto(site_url + "index.html")
    box = page.locator("[data-testid=splitk-result]")
    page.wait_for_function("document.getElementById('splitk-result').dataset.state !== undefined")
    section = page.inner_text("[data-testid=section-distributed]")
    for ref in ("Flash-Decoding", "Ring", "Striped", "associative", "not measured yet"):
        assert ref in section, ref
    sources = page.inner_text("[data-testid=section-sources]")
    for ref in ("2310.01889", "2311.09431", "flashdecoding"):
        assert ref in sources
    record = json.loads((lab_dist / "bench" / "results" / "split_k_h200.json").read_text())
    assert box.get_attribute("data-state") == "ready"
    one = max((c for c in record["cases"] if c["batch"] == 1 and c["n_q"] == 1), key=lambda c: c["n_k"])
    text = box.inner_text()
    assert "%.3f ms" % one["results"]["split_1"]["ms"] in text
    assert "%.3f ms" % one["results"][one["best_split"]]["ms"] in text
    assert record["env"]["gpu"] in text
