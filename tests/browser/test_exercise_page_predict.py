"""exercise.html Predict steps are honest (issue 23 item 3, the exercise page's part): the
untouched starter and an incomplete answer are refused with the specific message, and neither
is recorded as the learner's first prediction; the first complete answer is."""
from __future__ import annotations

import json

import pytest

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


def test_break_it_untouched_and_incomplete_predictions_are_refused(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "break-it", "predict")
    state, text = submit(page)
    assert state == "refused" and "untouched starter" in text, text
    assert first_prediction(page, "break-it", "predict") is None
    assert page.locator("[data-testid=check]").count() == 0     # nothing graded, nothing scored

    # One mutant answered, four left at the starter's None: refused, naming the four, and no
    # row scored (the starter used to hold [] for every mutant, three of them right answers).
    starter = lab.exercise("break-it").step("predict").starter
    state, text = submit(page, starter.replace('"missing-rescale": None',
                                               '"missing-rescale": ["test_rows_sum_to_one"]'))
    assert state == "refused" and "incomplete" in text, text
    for mutant in ("dropped-tail", "zero-init-max", "global-max", "unguarded-inf"):
        assert mutant in text, (mutant, text)
    assert first_prediction(page, "break-it", "predict") is None
    assert page.locator("[data-testid=check]").count() == 0
    assert "Right:" not in page.inner_text("#results")


def selection(page):
    return page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror.getSelection()")


def cursor_line(page):
    return page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror.getCursor().line + 1")


@pytest.mark.parametrize("ex_id", ["online-softmax", "ring", "break-it"])
def test_next_todo_on_a_predict_step_stops_at_each_none_placeholder(page, site_url, browser_helpers, ex_id):
    """Alt+T on a Predict step goes to each None the starter leaves for the answer (selected, so
    typing replaces it), not to a comment that mentions None; with none left it says so."""
    open_step(page, site_url, browser_helpers, ex_id, "predict")
    starter = lab.exercise(ex_id).step("predict").starter
    placeholders = [n + 1 for n, line in enumerate(starter.split("\n"))
                    if "None" in line.split("#")[0]]
    assert len(placeholders) >= 2, starter
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Home")
    seen = []
    for _ in placeholders:
        page.keyboard.press("Alt+t")
        seen.append(cursor_line(page))
        assert selection(page) == "None"
        assert page.inner_text("[data-testid=todo-state]") == f"Line {seen[-1]}."
    assert sorted(seen) == placeholders
    page.keyboard.type("7")                                     # the selected None is replaced
    code = page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror"
                         ".getLine(%d)" % (seen[-1] - 1)).split("#")[0]
    assert "None" not in code and "7" in code, code

    answered = "\n".join(line.split("#")[0].replace("None", "[]") if "None" in line.split("#")[0]
                         else line for line in starter.split("\n"))
    page.evaluate("code => document.querySelector('#editor-host .CodeMirror').CodeMirror.setValue(code)",
                  answered)
    page.click("[data-testid=next-todo]")
    assert page.inner_text("[data-testid=todo-state]") == "No TODO or None placeholder left in your code."


def test_no_data_or_text_response_holds_a_predict_answer_before_the_first_prediction(page, site_url,
                                                                                     browser_helpers):
    """What this checks: before the first prediction, none of the responses the page receives as
    data or text (JSON, JavaScript, HTML, text/*: data/exercises.json, whose step says
    solution_held, the scripts, the pages) holds the answer, and the manifest (so the service
    worker's cache) lists no src/ copy of a held solution; once a prediction is recorded Python
    sends the solution, and Load solution puts it in the editor.
    What it does not check, because it does not hold: the answer is held back against spoilers,
    not as a secret. The judge needs it and runs in this browser, so it ships in the binary
    downloads (the nlpcore wheel and pyc/bundle.bin), and the learner's own Python can read it."""
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
    listed = page.evaluate("fetch('manifest.json').then(r => r.json()).then(m => Object.keys(m.files))")
    assert "src/nlpcore/lab/exercises/online-softmax/exercise.py" in listed
    assert not [name for name in listed if name.startswith("src/") and name.endswith("predict_solution.py")]
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
