"""exercise.html Predict steps are honest (issue 23 item 3, the exercise page's part): the
untouched starter and an incomplete answer are refused with the specific message, and neither
is recorded as the learner's first prediction; the first complete answer is."""
from __future__ import annotations

import json

from nlpcore import lab

SETTLED = ("() => ['done', 'error', 'refused'].includes("
           "document.querySelector('[data-testid=results]').dataset.state)")


def open_step(page, site_url, helpers, ex_id, step):
    page.goto(f"{site_url}exercise.html?id={ex_id}&step={step}")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def submit(page, code=None):
    if code is not None:
        page.click("#editor-host .CodeMirror-code")
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")
        page.keyboard.insert_text(code)
    page.evaluate("document.querySelector('[data-testid=results]').dataset.state = 'idle'")
    page.click("[data-testid=run-checks]")
    page.wait_for_function(SETTLED, timeout=60000)
    return page.get_attribute("[data-testid=results-summary]", "data-state"), \
        page.inner_text("[data-testid=results-summary]")


def first_prediction(page, ex_id, step):
    doc = json.loads(page.evaluate("localStorage.getItem('fa-lab-progress-v1') || '{}'") or "{}")
    return ((doc.get("exercises") or {}).get(ex_id) or {}).get(step, {}).get("first")


def test_untouched_and_incomplete_predictions_are_refused_and_not_recorded(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "ring", "predict")
    state, text = submit(page)                                  # the untouched starter
    assert state == "refused" and "untouched starter" in text, text
    assert first_prediction(page, "ring", "predict") is None
    assert page.is_disabled("[data-testid=load-solution]")      # still no attempt ...
    assert "after your first prediction" in page.inner_text("[data-testid=load-solution-why]")  # ... and why

    starter = lab.exercise("ring").step("predict").starter
    half = starter.replace("bytes_sent = None", "bytes_sent = 12345")
    state, text = submit(page, half)
    assert state == "refused", text
    assert "incomplete" in text and "peak_elements is still None" in text, text
    assert first_prediction(page, "ring", "predict") is None
    # Nothing of a refused answer is graded (Python refuses it, nlpcore.lab.verdict): no part can
    # be narrowed in on by leaving the other None; no verdict, no "Rerun this check alone".
    assert page.locator("[data-testid=check]").count() == 0
    assert page.locator("#results li").count() == 3
    assert page.locator("#results li[data-state=not-run]").count() == 3
    assert page.locator("[data-testid=rerun-check]").count() == 0
    assert "too low" not in page.inner_text("#results")

    whole = half.replace("peak_elements = None", "peak_elements = 6789")
    state, text = submit(page, whole)
    assert state == "failed", text
    first = first_prediction(page, "ring", "predict")
    assert first and first["answer"] == {"bytes_sent": 12345, "peak_elements": 6789}
    # the solution (it holds the answer) arrives from Python once the prediction is recorded
    page.wait_for_selector("[data-testid=load-solution]:not([disabled])", timeout=30000)
    assert not page.is_visible("[data-testid=load-solution-why]")


def test_break_it_untouched_prediction_is_refused(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "break-it", "predict")
    state, text = submit(page)
    assert state == "refused" and "untouched starter" in text, text
    assert first_prediction(page, "break-it", "predict") is None
    assert page.locator("[data-testid=check]").count() == 0     # nothing graded, nothing scored


def test_a_predict_steps_solution_reaches_the_page_only_after_the_first_prediction(page, site_url,
                                                                                    browser_helpers):
    """The solution of a Predict step is its answer: nothing the page receives before the first
    prediction holds it (not data/exercises.json, whose step says solution_held); once a
    prediction is recorded Python sends it, and Load solution puts it in the editor."""
    step = lab.exercise("online-softmax").step("predict")
    answer_line = "standard = 4 * N * N + 4 * N * d"
    assert answer_line in step.solution
    received = []

    def keep(response):
        kind = response.headers.get("content-type", "")
        if any(t in kind for t in ("json", "javascript", "html", "text")):
            received.append((response.url, response.text()))

    page.on("response", keep)
    open_step(page, site_url, browser_helpers, "online-softmax", "predict")
    assert any(url.endswith("data/exercises.json") for url, _ in received), [u for u, _ in received]
    assert not [url for url, body in received if answer_line in body]
    data = page.evaluate("fetch('data/exercises.json').then(r => r.json())")
    held = next(s for e in data["exercises"] if e["id"] == "online-softmax" for s in e["steps"] if s["id"] == "predict")
    assert held["solution"] is None and held["solution_held"] is True
    assert page.is_disabled("[data-testid=load-solution]")

    wrong = step.starter.replace("standard = None", "standard = 1000").replace("flash = None", "flash = 1000")
    state, text = submit(page, wrong)
    assert state == "failed", text
    assert first_prediction(page, "online-softmax", "predict")
    page.wait_for_selector("[data-testid=load-solution]:not([disabled])", timeout=30000)
    page.click("[data-testid=load-solution]")
    page.click("[data-testid=confirm-replace-yes]")
    editor = page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror.getValue()")
    assert editor == step.solution
