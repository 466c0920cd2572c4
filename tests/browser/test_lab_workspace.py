"""lab.html's comparison controls (issue 16, defects 4.1, 4.11, 4.12): a refused run leaves no
old tile plan on the page; a float16 precision control runs all three paths and widens only the
tolerance against flash_np; a size that would run too long is refused before any work; a run
under way shows its stage and elapsed time and can be cancelled, after which Python restarts
and the next run works."""
from __future__ import annotations

import time

from nlpcore import tolerances
from nlpcore.web import lab

FINAL = ("match", "mismatch", "error", "no-webgpu", "cancelled")


def run(page, **params):
    """Fill the form (precision included), click Run, return the `lab:compared` detail."""
    return page.evaluate(
        """async (p) => {
          for (const [k, v] of Object.entries(p)) {
            const el = document.getElementById('in-' + k);
            if (el.type === 'checkbox') el.checked = v; else el.value = String(v);
          }
          const done = new Promise((resolve) => document.addEventListener(
              'lab:compared', (event) => resolve(event.detail), {once: true}));
          document.getElementById('run').click();
          return await done;
        }""", params)


def open_lab(page, site_url, helpers, query=""):
    page.goto(site_url + "lab.html" + query)
    assert helpers.wait_for_runtime(page) == "ready"
    assert helpers.wait_for_status(page, "compare", FINAL) in ("match", "error")


def test_a_refused_run_shows_no_old_tile_plan(page, site_url, browser_helpers):
    open_lab(page, site_url, browser_helpers)
    assert run(page, n=64, d=128, heads=1)["status"] == "match"
    assert page.get_attribute('[data-testid="tile-bytes"]', "data-bytes") != ""
    detail = run(page, n=64, d=1024, heads=1)
    assert detail["status"] == "error" and detail["plan"] is None
    assert page.inner_text('[data-testid="tile-bytes"]') == "—"
    assert page.inner_text("#dispatch") == "—"
    assert "refused" in page.inner_text("#plan")
    assert page.locator("#tile-bar span").count() == 0


def test_float16_precision_runs_all_three_and_widens_only_the_flash_np_bar(page, site_url,
                                                                          browser_helpers):
    open_lab(page, site_url, browser_helpers)
    detail = run(page, n=77, d=32, heads=2, causal=True, padding=3, precision="float16")
    assert detail["status"] == "match", detail
    assert detail["params"]["precision"] == "float16"
    pairs = {p["pair"]: p for p in detail["pairs"]}
    half = tolerances.PAGE_FLOAT16["gpu_vs_flash_np"].rtol
    assert pairs["gpu_vs_mirror"]["rtol"] == tolerances.PAGE["gpu_vs_mirror"].rtol
    assert pairs["gpu_vs_flash_np"]["rtol"] == half > tolerances.PAGE["gpu_vs_flash_np"].rtol
    # flash_np's float16 o really differs by more than the float32 bar would allow.
    assert pairs["gpu_vs_flash_np"]["o_max_abs"] > tolerances.PAGE["gpu_vs_flash_np"].atol
    float32 = run(page, n=77, d=32, heads=2, causal=True, padding=3, precision="float32")
    assert {p["pair"]: p["rtol"] for p in float32["pairs"]}["gpu_vs_flash_np"] == \
        tolerances.PAGE["gpu_vs_flash_np"].rtol


def test_a_run_that_would_take_too_long_is_refused_up_front(page, site_url, browser_helpers):
    open_lab(page, site_url, browser_helpers)
    for n, d, heads in ((1024, 448, 4), (1024, 256, 4), (1024, 136, 4)):
        started = time.time()
        detail = run(page, n=n, d=d, heads=heads, precision="float32")
        assert time.time() - started < 10
        assert detail["status"] == "error" and detail["plan"] is None
        message = page.inner_text("#error")
        assert "too long" in message and str(lab.MAX_SCORE_MACS) in message, message
    # The run the issue found (N = 1024, d = 1020, 4 heads) no longer fits the tile plan either.
    assert run(page, n=1024, d=1020, heads=4)["status"] == "error"
    assert "no tile plan fits" in page.inner_text("#error")


def test_a_long_run_shows_progress_and_can_be_cancelled(page, site_url, browser_helpers):
    browser_helpers.allow_console_error(page, "Python was restarted")
    open_lab(page, site_url, browser_helpers)
    page.evaluate("() => { for (const [k, v] of Object.entries({n: 1024, d: 64, heads: 4}))"
                  " document.getElementById('in-' + k).value = String(v);"
                  " document.getElementById('run').click(); }")
    page.wait_for_selector('[data-testid="cancel"]:visible')
    page.wait_for_function("/\\(\\d+ s so far\\)/.test(document.getElementById('run-progress').textContent)")
    assert "mirror" in page.inner_text('[data-testid="run-progress"]')
    page.click('[data-testid="cancel"]')
    assert page.get_attribute('[data-testid="compare"]', "data-status") == "cancelled"
    assert page.get_attribute('[data-testid="run-progress"]', "data-state") == "cancelled"
    page.wait_for_selector("#run:not([disabled])", timeout=120000)
    assert run(page, n=40, d=16, heads=1)["status"] == "match"
