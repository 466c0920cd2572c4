"""The guided lab on lab.html, end to end: every step answered and checked in the page (answers
computed here from the same library, or read from what the page reported), saved into progress,
and counted on index.html."""
from __future__ import annotations

from nlpcore.lab import guided


def answer(page, step, value=None, choice=None):
    item = page.locator(f"[data-testid=lab-step][data-step={step}]")
    if choice is not None:
        item.locator(f"input[type=radio][value='{choice}']").check()
    else:
        item.locator("[data-testid=lab-answer]").fill(str(value))
    item.locator("[data-testid=lab-check]").click()
    page.wait_for_function(
        "step => { const v = document.querySelector(`[data-testid=lab-step][data-step=${step}] "
        "[data-testid=lab-verdict]`); return v && ['pass', 'fail', 'error'].includes(v.dataset.status); }",
        arg=step, timeout=60000)
    return item.get_attribute("data-status"), item.locator("[data-testid=lab-verdict]").inner_text()


def test_guided_lab_end_to_end(page, site_url, browser_helpers):
    page.goto(f"{site_url}lab.html")
    page.locator("[data-testid=lab-step]").first.wait_for(timeout=60000)
    assert page.locator("[data-testid=lab-step]").count() == len(guided.STEPS)
    assert browser_helpers.wait_for_runtime(page) == "ready"
    status = browser_helpers.wait_for_status(page, "compare", ["match", "no-webgpu", "mismatch", "error"])
    assert status in ("match", "no-webgpu"), page.inner_text("[data-testid=compare]")

    wrong = answer(page, "run-compare", value="12345")
    assert wrong[0] == "fail"
    reported = page.get_attribute("[data-testid=compare]", "data-max-abs-err")
    assert answer(page, "run-compare", value=reported)[0] == "pass"
    assert answer(page, "why-not-zero", choice=0)[0] == "fail"
    assert answer(page, "why-not-zero", choice=guided.WHY_ANSWER)[0] == "pass"

    # tile-bytes needs a run with d = TILE_D: before it, the page says so.
    state, text = answer(page, "tile-bytes", value=1)
    assert state == "fail" and f"d = {guided.TILE_D}" in text
    page.fill("#in-d", str(guided.TILE_D))
    page.click("[data-testid=run]")
    page.wait_for_function(
        "d => document.querySelector('[data-testid=compare]').dataset.status !== 'running'"
        " && document.querySelector('[data-testid=tile-bytes]').dataset.bytes"
        " && document.querySelector('#plan').textContent.length > 0", arg=guided.TILE_D,
        timeout=120000)
    browser_helpers.wait_for_status(page, "compare", ["match", "no-webgpu"])
    used = page.get_attribute("[data-testid=tile-bytes]", "data-bytes")
    assert answer(page, "tile-bytes", value=used)[0] == "pass", used

    skipped = guided.skipped_tiles(guided.VIZ_N, guided.VIZ_D, guided.VIZ_M)
    assert answer(page, "causal-skip", value=skipped + 1)[0] == "fail"
    assert answer(page, "causal-skip", value=skipped)[0] == "pass"
    assert answer(page, "io-ratio", value="%.2f" % guided.io_ratio())[0] == "pass"
    assert answer(page, "memory-bound", choice=guided.BOUND_ANSWER)[0] == "pass"

    page.goto(f"{site_url}index.html")
    page.wait_for_function("document.getElementById('progress').dataset.state === 'ready'")
    assert page.get_attribute("#progress", "data-lab-done") == str(len(guided.STEPS))
    # Progress persists: the lab page shows the steps as done after a reload.
    page.goto(f"{site_url}lab.html")
    page.locator("[data-testid=lab-step]").first.wait_for(timeout=60000)
    statuses = page.eval_on_selector_all("[data-testid=lab-step]", "els => els.map(e => e.dataset.status)")
    assert statuses == ["pass"] * len(guided.STEPS)
