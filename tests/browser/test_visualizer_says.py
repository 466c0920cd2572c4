"""The visualizer says what it shows (issue 16, item 5): a change of N, d or M greys the old
trace until "Run trace"; the current tile, SRAM and m/l panels sit beside the step controls on a
1366x768 screen; with backward selected the loop-order control shows what backward runs; a case
where tiling moves more than standard attention says so."""
from __future__ import annotations

from nlpcore.web import viz

READY = ("() => { const s = document.querySelector('[data-testid=viz-status]');"
         " return s && ['ready', 'error'].includes(s.dataset.status); }")


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
