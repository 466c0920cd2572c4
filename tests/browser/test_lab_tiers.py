"""The lab's kernel tiers in headless Chromium (Dawn on SwiftShader): site/js/tiers.js picks the
best tier the adapter offers (SwiftShader: subgroups of 4, no shader-f16, no subgroup matrices,
so the subgroup tier), says which ran and why, and a tier the adapter lacks falls back with the
reason. The GPU is compared with that tier's mirror and with flash_np, as for the portable tier."""

from __future__ import annotations

from test_lab import FINAL, compare_attrs


def tier_text(page):
    return page.get_attribute('[data-testid="tier"]', "data-tier"), page.inner_text('[data-testid="tier"]')


def test_best_tier_on_swiftshader_is_subgroup_and_matches(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=45&d=64&causal=1&padding=3&heads=2")
    assert browser_helpers.wait_for_runtime(page) == "ready"
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    tier, text = tier_text(page)
    assert tier == "subgroup", text
    assert "best tier this adapter offers" in text and "int8" in text and "f16: the adapter lacks shader-f16" in text
    status, max_abs = compare_attrs(page)
    assert float(max_abs) <= 1e-5


def test_a_picked_tier_the_adapter_lacks_falls_back_with_the_reason(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=20&d=32&tier=f16")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    tier, text = tier_text(page)
    assert tier == "subgroup" and "you picked f16, but the adapter lacks shader-f16" in text, text


def test_the_portable_tier_can_be_picked(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=33&d=128&tier=portable")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    tier, text = tier_text(page)
    assert tier == "portable" and "you picked portable float32" in text, text


def test_performance_page_shows_the_tiers_against_their_peaks(page, site_url, lab_dist, browser_helpers):
    import json

    record = json.loads((lab_dist / "bench" / "results" / "webgpu_h200.json").read_text())
    want = [r for e in record["engines"] if e.get("run") == "tiers" for r in e["rows"]
            if r["n"] == 16384 and r["heads"] == 16 and r["valid"]]
    want += [s for s in record["sdpa"] if s["n"] == 16384 and s["heads"] == 16]
    page.goto(site_url + "performance.html")
    page.wait_for_function("document.querySelector('[data-testid=h200-tiers]').dataset.status !== 'loading'")
    assert page.get_attribute("[data-testid=h200-tiers]", "data-status") == "recorded"
    rows = page.query_selector_all("#h200-tiers-rows tr")
    assert len(rows) == len(want) > 0
    first = rows[0].inner_text().split("\t")
    assert first[0] == want[0]["tier"] and abs(float(first[4]) - want[0]["tflops"]) <= 0.01 * want[0]["tflops"]
    peak = record["tier_peaks_tflops"][want[0]["tier"]]
    assert "{:.2g} %".format(100 * want[0]["tflops"] / peak) in first[5] or "%" in first[5]
    lesson = page.inner_text("[data-testid=h200-tiers-lesson]")
    assert "What int8 costs" in lesson and "NaN" not in lesson and "–" not in lesson, lesson
    assert "{:.4g}".format(record["tier_peaks_tflops"]["sdpa"]) in lesson, lesson


def test_a_size_the_best_tier_cannot_plan_runs_on_the_portable_tier(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=8&d=192")  # KS = 3: no shuffle butterfly for the subgroup tier
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    tier, text = tier_text(page)
    assert tier == "portable" and "subgroup cannot run this size" in text and "power of two" in text, text
