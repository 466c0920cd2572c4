"""exercise.html: Run checks asked for before Python is ready (Ctrl+Enter while Python starts;
the button is disabled until then) is not dropped in silence: the results' summary says that the
checks will run when Python is ready, and they run then, once however often it was pressed."""
from __future__ import annotations

from nlpcore import lab


def test_ctrl_enter_before_python_is_ready_is_said_and_runs_once_when_ready(page, site_url, browser_helpers):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step=compose")
    page.wait_for_selector("#editor-host .CodeMirror")
    page.evaluate("window.__graded = 0; document.addEventListener('exercise:graded', () => { window.__graded += 1; })")
    # Precondition: Pyodide takes seconds to start, so the editor is there long before.
    assert page.get_attribute("[data-testid=runtime-status]", "data-state") == "loading"
    assert page.is_disabled("[data-testid=run-checks]")
    page.click("#editor-host .CodeMirror-code")
    for _ in range(3):                                          # pressed again and again: one run
        page.keyboard.press("Control+Enter")
    summary = "[data-testid=results-summary]"
    assert page.get_attribute(summary, "data-state") == "queued"
    assert page.inner_text(summary) == ("Python is still starting \u2014 your checks will run "
                                        "when it is ready.")
    assert page.get_attribute(summary, "aria-live") == "polite"  # said to a screen reader too

    assert browser_helpers.wait_for_runtime(page) == "ready"
    page.wait_for_function("() => document.querySelector('[data-testid=results]').dataset.state === 'done'",
                           timeout=60000)
    step = lab.exercise("online-softmax").step("compose")
    graded = [c for c in step.checks if c.runner != "local"]
    assert page.locator("[data-testid=check]").count() == len(graded)   # the starter's checks ran
    page.wait_for_timeout(1500)
    assert page.evaluate("window.__graded") == 1


def test_a_run_asked_for_before_ready_is_dropped_when_the_step_changes(page, site_url, browser_helpers):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step=compose")
    page.wait_for_selector("#editor-host .CodeMirror")
    page.evaluate("window.__graded = 0; document.addEventListener('exercise:graded', () => { window.__graded += 1; })")
    assert page.get_attribute("[data-testid=runtime-status]", "data-state") == "loading"
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Enter")
    assert page.get_attribute("[data-testid=results-summary]", "data-state") == "queued"
    page.click("[data-testid=step-tab][data-step=scratch]")    # another step: not what was asked
    assert page.get_attribute("[data-testid=results-summary]", "data-state") == "idle"
    assert browser_helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])", timeout=60000)
    page.wait_for_timeout(1500)
    assert page.evaluate("window.__graded") == 0
    assert page.get_attribute("[data-testid=results]", "data-state") == "idle"
