"""The learner's workspace on exercise.html and index.html (issue 16, items 1-3 and honest
progress): what the learner's code prints shows beside the checks per run; a scratch cell runs
code against the editor's definitions ungraded; the page names its Python and NumPy; "Load
solution" and "Reset to starter" ask first and keep the draft (restorable after a reload);
drafts are saved per step while typing; "Clear saved progress" asks first; Predict steps
withhold the answer until asked after an attempt; a step passed with the solution loaded shows
as "solution viewed", apart from "solved"."""
from __future__ import annotations

import json

from nlpcore import lab
from nlpcore.lab.exercises import module as exercise_module

RESULTS_DONE = ("() => ['done', 'error'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")
SOFTMAX_SCRATCH = lab.exercise("online-softmax").step("scratch")


def open_step(page, site_url, helpers, ex_id, step):
    page.goto(f"{site_url}exercise.html?id={ex_id}&step={step}")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def type_code(page, code, host="#editor-host"):
    """Replace an editor's text the way a learner does: select all, then type (one insert)."""
    page.click(f"{host} .CodeMirror-code")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def editor_text(page, host="#editor-host"):
    return page.evaluate(f"document.querySelector('{host} .CodeMirror').CodeMirror.getValue()")


def run_checks(page):
    page.click("[data-testid=run-checks]")
    page.wait_for_function(RESULTS_DONE, timeout=60000)
    return page.eval_on_selector_all("[data-testid=check]", "els => els.map(e => e.dataset.status)")


def load_solution(page):
    page.click("[data-testid=load-solution]")
    page.click("[data-testid=confirm-replace-yes]")


def test_print_stderr_and_traceback_show_beside_the_checks_per_run(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    type_code(page, "import sys\nprint('first run says hi')\nprint('to stderr', file=sys.stderr)\n"
                    "def from_block(x):\n    print('from_block sees', x.shape)\n    return 1, 2\n"
                    "def combine(a, b):\n    return a\n"
                    "def online_softmax(x, block):\n    return x\n")
    run_checks(page)
    assert "first run says hi" in page.inner_text("[data-testid=run-output] [data-testid=stdout]")
    assert "from_block sees" in page.inner_text("[data-testid=run-output] [data-testid=stdout]")
    assert "to stderr" in page.inner_text("[data-testid=run-output] [data-testid=stderr]")
    assert page.inner_text("[data-testid=run-stamp]").startswith("Run 1")

    type_code(page, "print('second run')\nx = [1, 2][5]\n")
    statuses = run_checks(page)
    assert set(statuses) == {"error"}
    stdout = page.inner_text("[data-testid=run-output] [data-testid=stdout]")
    assert "second run" in stdout and "first run" not in stdout  # per run, not appended
    trace = page.inner_text("[data-testid=run-output] [data-testid=traceback]")
    assert "IndexError" in trace and '"<your code>", line 2' in trace
    assert page.inner_text("[data-testid=run-stamp]").startswith("Run 2")


def test_scratch_cell_runs_against_the_current_definitions_without_grading(page, site_url,
                                                                           browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    type_code(page, "def twice(x):\n    return 2 * x\n")
    type_code(page, "import numpy as np\nprint('hello from scratch')\ntwice(np.arange(3))",
              host="#scratch-host")
    page.click("[data-testid=run-scratch]")
    page.wait_for_function("document.querySelector('[data-testid=scratch-output]').dataset.state "
                           "!== 'running'")
    out = page.inner_text("[data-testid=scratch-output]")
    assert "hello from scratch" in out and "array([0, 2, 4])" in out
    # Not graded: the checks were not run and progress is untouched.
    assert page.get_attribute("[data-testid=results]", "data-state") == "idle"
    assert page.evaluate("localStorage.getItem('fa-lab-progress-v1')") is None
    # An error in the learner's function shows the traceback through both cells.
    type_code(page, "def twice(x):\n    return x / 0\n")
    type_code(page, "twice(1)", host="#scratch-host")
    page.click("[data-testid=run-scratch]")
    page.wait_for_function("document.querySelector('[data-testid=scratch-output]').dataset.state "
                           "=== 'error'")
    trace = page.inner_text("[data-testid=scratch-output] [data-testid=traceback]")
    assert "ZeroDivisionError" in trace and "return x / 0" in trace and "<scratch>" in trace


def test_page_says_which_python_and_numpy_and_what_that_rules_out(page, site_url,
                                                                  browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    page.wait_for_selector("[data-testid=runtime-note][data-state=ready]")
    page.click("[data-testid=runtime-note] summary")   # "What that rules out" opens
    note = page.inner_text("[data-testid=runtime-note]")
    python = page.get_attribute("[data-testid=runtime-note]", "data-python")
    numpy = page.get_attribute("[data-testid=runtime-note]", "data-numpy")
    assert python.startswith("3.8.") and numpy.startswith("1.17."), (python, numpy)
    assert f"Python {python}" in note and f"NumPy {numpy}" in note
    assert "match statements" in note and "sliding_window_view" in note


def test_load_solution_asks_first_and_keeps_the_draft_across_a_reload(page, site_url,
                                                                      browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    draft = "# my own attempt\ndef from_block(x):\n    return None\n"
    type_code(page, draft)
    page.click("[data-testid=load-solution]")
    assert page.is_visible("[data-testid=confirm-replace]")
    assert editor_text(page) == draft                      # nothing replaced before the answer
    page.click("[data-testid=confirm-replace-no]")
    assert not page.is_visible("[data-testid=confirm-replace]")
    assert editor_text(page) == draft

    load_solution(page)
    assert editor_text(page) == SOFTMAX_SCRATCH.solution
    assert page.is_visible("[data-testid=kept-draft]")
    page.reload()
    assert browser_helpers.wait_for_runtime(page) == "ready"
    assert editor_text(page) == SOFTMAX_SCRATCH.solution
    assert page.is_visible("[data-testid=kept-draft]")     # still restorable after a reload
    page.click("[data-testid=restore-draft]")
    assert editor_text(page) == draft
    assert not page.is_visible("[data-testid=kept-draft]")

    # Reset to starter asks too, and keeps the draft the same way.
    page.click("#reset-code")
    assert page.is_visible("[data-testid=confirm-replace]") and editor_text(page) == draft
    page.click("[data-testid=confirm-replace-yes]")
    assert editor_text(page) == SOFTMAX_SCRATCH.starter
    page.click("[data-testid=restore-draft]")
    assert editor_text(page) == draft


def test_drafts_are_saved_per_step_while_typing(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    type_code(page, "# draft for scratch\n")
    # Switch steps at once (before the typing pause has passed): the draft stays with its step.
    page.click("[data-testid=step-tab][data-step=compose]")
    type_code(page, "# draft for compose\n")
    page.reload()  # at once again: the page saves what is pending when it goes away
    assert browser_helpers.wait_for_runtime(page) == "ready"
    assert editor_text(page) == "# draft for compose\n"
    page.click("[data-testid=step-tab][data-step=scratch]")
    assert editor_text(page) == "# draft for scratch\n"
    page.wait_for_selector("[data-testid=draft-state]")
    assert "saved draft" in page.inner_text("[data-testid=draft-state]")


def test_clear_saved_progress_asks_first(page, site_url):
    page.goto(f"{site_url}exercise.html?id=online-softmax")
    page.evaluate("localStorage.setItem('fa-lab-progress-v1', JSON.stringify({version: 1, "
                  "exercises: {'online-softmax': {scratch: {done: true}}}, lab: {}}))")
    page.goto(f"{site_url}index.html")
    page.wait_for_selector("[data-testid=progress][data-state=ready]")
    assert page.get_attribute("[data-testid=progress]", "data-steps-done") == "1"
    page.click("[data-testid=progress-reset]")
    assert page.is_visible("[data-testid=progress-reset-confirm]")
    page.click("[data-testid=progress-reset-no]")
    assert page.get_attribute("[data-testid=progress]", "data-steps-done") == "1"
    page.click("[data-testid=progress-reset]")
    page.click("[data-testid=progress-reset-yes]")
    page.wait_for_selector("[data-testid=progress][data-steps-done='0']")


def test_predict_step_withholds_the_answer_until_asked_after_an_attempt(page, site_url,
                                                                       browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "predict")
    assert page.is_disabled("[data-testid=load-solution]")  # the solution holds the answer
    assert not page.is_visible("[data-testid=reveal-answer]")
    type_code(page, "standard = 1\nflash = 10 ** 12\n")
    statuses = run_checks(page)
    assert statuses == ["pass", "fail", "fail"], statuses
    text = page.inner_text("#results")
    assert "too low" in text and "too high" in text
    truth = lab.exercise("online-softmax").step("predict")
    ns = lab.session.load_learner(truth.solution)
    for value in (ns["standard"], ns["flash"]):  # neither true count appears before asked
        assert f"{value:.6g}" not in text and str(value) not in text
    first = json.loads(page.evaluate("localStorage.getItem('fa-lab-progress-v1')"))
    record = first["exercises"]["online-softmax"]["predict"]
    assert record["first"]["answer"] == {"standard": 1, "flash": 10 ** 12}
    assert not record.get("done")

    # A second, different attempt does not overwrite the first prediction.
    type_code(page, "standard = 2\nflash = 3\n")
    run_checks(page)
    page.click("[data-testid=reveal-answer]")
    text = page.inner_text("#results")
    assert f"{ns['standard']:.6g}" in text                 # the answer, now that it was asked for
    assert "standard = 1" in page.inner_text("[data-testid=first-prediction]")
    assert page.get_attribute("[data-testid=step-tab][data-step=predict]",
                              "data-solution-viewed") == "1"


def test_break_it_predict_says_which_rows_are_wrong_without_the_matrix(page, site_url,
                                                                      browser_helpers):
    open_step(page, site_url, browser_helpers, "break-it", "predict")
    mutants = list(exercise_module("break-it", "mutants").MUTANTS)
    type_code(page, f"prediction = {{m: [] for m in {mutants!r}}}\n")
    run_checks(page)
    withheld = page.inner_text("[data-testid=check][data-check=matrix] [data-testid=withheld]")
    assert "Right:" in withheld and "Wrong:" in withheld
    assert page.query_selector("#results table") is None  # the live kill matrix is withheld


def test_solution_viewed_is_shown_apart_from_solved(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "scratch")
    load_solution(page)
    assert set(run_checks(page)) == {"pass"}
    tab = "[data-testid=step-tab][data-step=scratch]"
    assert page.get_attribute(tab, "data-done") == "1"
    assert "solution viewed" in page.inner_text(f"{tab} [data-testid=step-mark]")

    page.click("[data-testid=step-tab][data-step=compose]")
    page.click("[data-testid=load-solution]")
    page.click("[data-testid=confirm-replace-yes]")
    solution = editor_text(page)
    page.evaluate("() => { const doc = JSON.parse(localStorage.getItem('fa-lab-progress-v1'));"
                  " delete doc.exercises['online-softmax'].compose;"  # a learner who never looked
                  " localStorage.setItem('fa-lab-progress-v1', JSON.stringify(doc)); }")
    page.reload()
    assert browser_helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")
    type_code(page, solution)                              # ...types the code in themselves
    assert set(run_checks(page)) == {"pass"}
    mark = page.inner_text("[data-testid=step-tab][data-step=compose] [data-testid=step-mark]")
    assert "solved" in mark and "solution viewed" not in mark

    load_solution(page)  # compose was solved before the solution was viewed: it stays solved
    page.goto(f"{site_url}index.html")
    page.wait_for_selector("[data-testid=progress][data-state=ready]")
    status = page.inner_text("[data-testid=exercise-status-online-softmax]")
    assert "solution viewed" in status, status
    assert page.get_attribute("[data-testid=progress]", "data-steps-solution-viewed") == "1"
