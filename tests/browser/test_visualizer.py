"""The tiling visualizer (visualizer.html) in headless Chromium.

Expected numbers come from CPython: nlpcore.web.viz.trace with the same parameters and seed
(the page shows exactly the kernel's trace) and io_model.flash_accesses (the closed form).
"""
from __future__ import annotations

import os
import pathlib
import re

from nlpcore.kernels import io_model
from nlpcore.web import viz

READY = ("() => { const s = document.querySelector('[data-testid=viz-status]');"
         " return s && ['ready', 'error'].includes(s.dataset.status); }")
BOOT_MS = 180_000


def shots(tmp_path) -> pathlib.Path:
    out = pathlib.Path(os.environ.get("LAB_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def wait_ready(page, steps: int) -> None:
    """Waits until the page shows a finished trace of `steps` steps."""
    page.wait_for_function(
        "(steps) => { const s = document.querySelector('[data-testid=viz-status]');"
        " return s.dataset.status === 'error' || (s.dataset.status === 'ready' &&"
        " document.querySelector('[data-testid=viz-total-steps]').textContent === String(steps)); }",
        arg=steps, timeout=BOOT_MS)
    status = page.locator("[data-testid=viz-status]")
    assert status.get_attribute("data-status") == "ready", status.inner_text()


def number(page, testid: str) -> int:
    return int(page.inner_text(f"[data-testid={testid}]").replace(",", ""))


def counts_after(steps, k: int) -> tuple:
    """(reads, writes) after the first k steps: those of the last event that carries them."""
    for step in reversed(steps[:k]):
        if "reads" in step:
            return step["reads"], step["writes"]
    return 0, 0


def run(page, n, d, sram, causal=False, order="kv_outer", mode="forward") -> dict:
    """Sets the form, runs the trace, and returns what CPython's viz.trace gives for the same."""
    expected = viz.trace(n, d, sram, causal=causal, loop_order=order, mode=mode)
    page.select_option("#p-n", str(n))
    page.select_option("#p-d", str(d))
    page.select_option("#p-sram", str(sram))
    page.set_checked("#p-causal", causal)
    page.check(f"input[name=mode][value={mode}]")
    if mode == "forward":
        page.check(f"input[name=order][value={order}]")
    page.click("[data-testid=viz-run]")
    wait_ready(page, len(expected["steps"]))
    return expected


def test_steps_forward_and_back_and_ends_on_the_closed_form(page, site_url, tmp_path):
    n, d, sram = 24, 4, 64
    expected = viz.trace(n, d, sram)
    page.goto(f"{site_url}visualizer.html?n={n}&d={d}&m={sram}")
    wait_ready(page, len(expected["steps"]))
    assert page.inner_text("[data-testid=viz-step]") == "0"
    assert number(page, "viz-reads") == 0

    for _ in range(12):
        page.click("[data-testid=viz-next]")
    assert page.inner_text("[data-testid=viz-step]") == "12"
    assert (number(page, "viz-reads"), number(page, "viz-writes")) == counts_after(expected["steps"], 12)
    page.click("[data-testid=viz-prev]")
    assert page.inner_text("[data-testid=viz-step]") == "11"
    assert (number(page, "viz-reads"), number(page, "viz-writes")) == counts_after(expected["steps"], 11)

    page.click("h1")  # keyboard: arrows step, space plays and pauses
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.inner_text("[data-testid=viz-step]") == "13"
    page.keyboard.press("ArrowLeft")
    assert page.inner_text("[data-testid=viz-step]") == "12"
    page.keyboard.press("Space")
    page.wait_for_function("Number(document.querySelector('[data-testid=viz-step]').textContent) > 13")
    page.keyboard.press("Space")
    assert page.get_attribute("[data-testid=viz-play]", "aria-pressed") == "false"
    page.screenshot(path=str(shots(tmp_path) / "visualizer.png"), full_page=True)

    page.click("[data-testid=viz-end]")
    closed = io_model.flash_accesses(n, n, d, sram)
    assert number(page, "viz-step") == number(page, "viz-total-steps") == len(expected["steps"])
    assert number(page, "viz-accesses") == number(page, "viz-closed") == closed
    assert number(page, "viz-reads") + number(page, "viz-writes") == closed
    assert page.get_attribute("[data-testid=viz-check]", "data-equal") == "true"
    assert page.inner_text("[data-testid=viz-check]").startswith("✓")
    page.screenshot(path=str(shots(tmp_path) / "visualizer-end.png"), full_page=True)
    page.click("[data-testid=viz-start]")
    assert page.inner_text("[data-testid=viz-step]") == "0"
    assert page.get_attribute("[data-testid=viz-check]", "data-equal") == "false"


def test_final_counters_equal_the_closed_form_for_several_settings(page, site_url, tmp_path):
    page.goto(f"{site_url}visualizer.html?n=12&d=2&m=16")
    wait_ready(page, len(viz.trace(12, 2, 16)["steps"]))
    settings = [
        dict(n=50, d=8, sram=128, causal=True, order="kv_outer"),
        dict(n=50, d=8, sram=128, causal=True, order="q_outer"),
        dict(n=100, d=16, sram=512, causal=False, order="q_outer"),
        dict(n=50, d=8, sram=128, causal=True, mode="backward"),
        dict(n=256, d=4, sram=64, causal=True, order="kv_outer"),  # 4096 tiles: grouped steps
    ]
    for s in settings:
        expected = run(page, **s)
        page.click("[data-testid=viz-end]")
        closed = io_model.flash_accesses(s["n"], s["n"], s["d"], s["sram"], causal=s["causal"],
                                         loop_order=s.get("order", "kv_outer"),
                                         backward=s.get("mode") == "backward")
        assert number(page, "viz-accesses") == closed == expected["counted"]["accesses"], s
        br, bc = io_model.block_sizes(s["sram"], s["d"])
        reads, writes = io_model.flash_io(s["n"], s["n"], s["d"], br, bc, causal=s["causal"],
                                          loop_order=s.get("order", "kv_outer"),
                                          backward=s.get("mode") == "backward")
        assert (number(page, "viz-reads"), number(page, "viz-writes")) == (reads, writes), s
        assert (number(page, "viz-closed-reads"), number(page, "viz-closed-writes")) == (reads, writes), s
        assert page.get_attribute("[data-testid=viz-check]", "data-equal") == "true", s
        if expected["grouped"]:
            assert "one per outer-loop iteration" in page.inner_text("[data-testid=viz-status]")
            page.click("[data-testid=viz-start]")
            page.click("[data-testid=viz-play]")  # playing a summarised big trace stays responsive
            page.wait_for_function("Number(document.querySelector('[data-testid=viz-step]').textContent) >= 3")
            page.click("[data-testid=viz-play]")
    page.screenshot(path=str(shots(tmp_path) / "visualizer-grouped.png"), full_page=True)


def test_causal_mode_skips_fully_masked_tiles(page, site_url):
    n, d, sram = 48, 4, 128
    br, bc = io_model.block_sizes(sram, d)
    page.goto(f"{site_url}visualizer.html?n={n}&d={d}&m={sram}")
    wait_ready(page, len(viz.trace(n, d, sram)["steps"]))
    page.click("[data-testid=viz-end]")
    full_visited = number(page, "viz-tiles-visited")
    assert full_visited == len(io_model.visited_tiles(n, n, br, bc)) and number(page, "viz-tiles-skipped") == 0

    run(page, n, d, sram, causal=True)
    page.click("[data-testid=viz-end]")
    visited = number(page, "viz-tiles-visited")
    skipped = number(page, "viz-tiles-skipped")
    assert visited == len(io_model.visited_tiles(n, n, br, bc, causal=True)) < full_visited
    assert skipped > 0 and visited + skipped == full_visited


def test_states_a_reason_when_python_cannot_start(page, site_url, browser_helpers):
    page.route("**/vendor/pyodide/pyodide.asm.wasm", lambda route: route.abort())
    browser_helpers.allow_console_error(page, "")  # the aborted download is logged; that is the point
    page.goto(f"{site_url}visualizer.html")
    page.wait_for_function(READY, timeout=BOOT_MS)
    status = page.locator("[data-testid=viz-status]")
    assert status.get_attribute("data-status") == "error"
    assert "Python (Pyodide) is unavailable" in status.inner_text(), status.inner_text()
    assert page.inner_text("[data-testid=viz-total-steps]") == "0"


def test_closed_form_panel_shows_the_h200_measurement_beside_the_model(page, site_url, lab_dist):
    from nlpcore import measured

    page.goto(site_url + "visualizer.html")
    page.wait_for_function("document.querySelector('[data-testid=viz-measured]').dataset.status !== 'loading'",
                           timeout=30_000)
    status = page.get_attribute("[data-testid=viz-measured]", "data-status")
    if not (lab_dist / "bench" / "results" / "io_h200.json").exists():
        assert status == "not-recorded"
        return
    assert status == "recorded"
    fig = measured.figure2_h200()
    cells = page.eval_on_selector_all("#viz-measured-body tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert cells[0][1:] == ["%.1f" % fig["baseline"]["hbm_gb"], "%.1f" % fig["baseline"]["model_gb"]]
    assert cells[1][1:] == ["%.2f" % fig["triton"]["hbm_gb"], "%.2f" % fig["triton"]["model_gb"]]


def test_picture_and_controls_fit_a_laptop_screen_and_over_m_is_explained(page, site_url):
    """Issue 23.9: at 1366 × 768 the tile map, the current tile and the player are on screen
    without scrolling; when the SRAM bar passes M, the page says by how much and why."""
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{site_url}visualizer.html")  # the defaults: N = 48, d = 4, M = 128
    wait_ready(page, len(viz.trace(48, 4, 128)["steps"]))
    over = None
    for _ in range(40):
        page.click("[data-testid=viz-next]")
        text = page.inner_text("[data-testid=viz-sram-used]")
        if "over M" in text:
            over = text
            break
    assert over, "the default trace never passes M within 40 steps"
    total, sram, excess = (int(x.replace(",", "")) for x in re.search(
        r"= ([\d,]+) of M = ([\d,]+) — over M by ([\d,]+)", over).groups())
    assert total - sram == excess > 0
    assert "Algorithm 1" in over and "score tile" in over and "registers" in over
    for selector in ("#tile-map", "#tile-canvas", "[data-testid=viz-next]", "[data-testid=viz-play]",
                     "#scrub", "[data-testid=viz-event]", "#meter-sram"):
        box = page.locator(selector).bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 768, (selector, box)


# ---- the visualizer says what it shows (issue 16, item 5) ----------------------------------------

def open_viz(page, site_url, query=""):
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{site_url}visualizer.html{query}")
    page.wait_for_function(READY, timeout=180_000)
    assert page.get_attribute("[data-testid=viz-status]", "data-status") == "ready"


def test_changing_the_sizes_greys_the_old_trace_until_run(page, site_url):
    open_viz(page, site_url, "?n=48&d=4&m=128")
    assert not page.is_visible("[data-testid=viz-stale]")
    page.select_option("#p-n", "64")
    page.wait_for_selector("[data-testid=viz-stale]:visible")
    assert page.get_attribute("[data-testid=viz-grid]", "data-stale") == "1"
    assert "N = 48" in page.inner_text("[data-testid=viz-stale]")
    page.select_option("#p-n", "48")                     # back to what is shown: not stale
    page.wait_for_selector("[data-testid=viz-stale]", state="hidden")
    page.select_option("#p-sram", "256")
    page.wait_for_selector("[data-testid=viz-stale]:visible")
    page.click("[data-testid=viz-run]")
    page.wait_for_function("document.querySelector('[data-testid=viz-grid]').dataset.stale === '0'"
                           " && document.querySelector('[data-testid=viz-status]').dataset.status === 'ready'",
                           timeout=60_000)
    assert not page.is_visible("[data-testid=viz-stale]")


def test_step_panels_sit_beside_the_controls_on_1366x768(page, site_url):
    open_viz(page, site_url, "?n=48&d=4&m=128")
    page.click("[data-testid=viz-next]")
    # The learner scrolls down to the controls: they stick at the top, the panels follow.
    page.evaluate("window.scrollTo(0, document.getElementById('player-bar').offsetTop)")
    boxes = page.evaluate(
        "() => Object.fromEntries(['player-bar', 'tile-canvas', 'meter-sram', 'stats-body']"
        ".map(id => { const r = document.getElementById(id).getBoundingClientRect();"
        " return [id, [r.top, r.bottom]]; }))")
    player_top, player_bottom = boxes["player-bar"]
    assert player_top >= 0 and player_bottom <= 768, boxes      # the controls are on screen
    for panel in ("tile-canvas", "meter-sram", "stats-body"):
        top, bottom = boxes[panel]
        assert top >= player_bottom - 1 and top + 40 <= 768, (panel, boxes)  # not under the bar


def test_backward_shows_the_loop_order_it_runs(page, site_url):
    open_viz(page, site_url, "?n=48&d=4&m=128&order=q_outer")
    assert page.is_checked("input[name=order][value=q_outer]")
    page.check("input[name=mode][value=backward]")
    page.wait_for_selector("[data-testid=viz-order-note]:visible")
    assert page.is_checked("input[name=order][value=kv_outer]")
    assert page.is_disabled("input[name=order][value=q_outer]")
    assert "K/V outer" in page.inner_text("[data-testid=viz-order-note]")
    page.check("input[name=mode][value=forward]")              # the learner's choice comes back
    page.wait_for_selector("[data-testid=viz-order-note]", state="hidden")
    assert page.is_checked("input[name=order][value=q_outer]")


def test_a_case_where_tiling_moves_more_says_so(page, site_url):
    expected = viz.trace(256, 64, 8192)
    flash, standard = expected["closed_form"]["accesses"], expected["closed_form"]["standard_accesses"]
    assert flash > standard  # the case the issue names
    open_viz(page, site_url, "?n=256&d=64&m=8192")
    box = page.locator("[data-testid=viz-more-than-standard]")
    assert box.is_visible()
    text = box.inner_text()
    assert "more than standard attention" in text and f"{flash:,}" in text and f"{standard:,}" in text
    assert "d²/M = 0.50" in text
    open_viz(page, site_url, "?n=256&d=16&m=8192")             # the usual case: no such note
    assert not page.locator("[data-testid=viz-more-than-standard]").is_visible()


def test_the_sram_meter_has_a_value_before_the_first_trace(page, site_url):
    """role=meter needs aria-valuenow at all times (axe aria-required-attr), also while Python
    is still starting and no trace has been drawn."""
    page.route("**/vendor/pyodide/pyodide.asm.wasm", lambda route: route.abort())
    page.lab_log.allowed.append("")  # the aborted download is logged; no trace ever comes
    page.goto(f"{site_url}visualizer.html")
    page.wait_for_selector("#meter-sram")
    assert page.get_attribute("#meter-sram", "aria-valuenow") == "0"
    assert page.get_attribute("#meter-sram", "role") == "meter"
