"""exercise.html after a grade (issue 23 item 8): once a step is passed the learner can put their
solution beside the reference (a line diff, only after passing); a failing check can be rerun
alone and is shown by itself with its inputs (shapes, the grade's seed, expected and got)."""
from __future__ import annotations

import re

from nlpcore import lab

SOLUTION = lab.exercise("online-softmax").step("scratch").solution
RESULTS_DONE = ("() => ['done', 'error'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")


def open_step(page, site_url, helpers):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step=scratch")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def run_with(page, code):
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)
    page.evaluate("document.querySelector('[data-testid=results]').dataset.state = 'idle'")
    page.click("[data-testid=run-checks]")
    page.wait_for_function(RESULTS_DONE, timeout=60000)
    return page.eval_on_selector_all("[data-testid=check]", "els => els.map(e => e.dataset.status)")


def test_after_passing_the_solution_sits_beside_the_reference(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    assert page.is_hidden("[data-testid=after-pass]")              # not before passing
    mine = SOLUTION.replace("    m = x.max(axis=-1)\n", "    m = np.max(x, axis=-1)  # the row max\n") + "\n# my note\n"  # a blank line, a note
    assert mine != SOLUTION
    assert set(run_with(page, mine)) == {"pass"}
    page.click("[data-testid=compare-reference]")
    page.wait_for_selector("[data-testid=diff-table]")
    kinds = page.eval_on_selector_all("[data-testid=diff-table] tbody tr", "rs => rs.map(r => r.dataset.kind)")
    assert kinds.count("changed") == 1 and kinds.count("removed") == 2 and kinds.count("added") == 0, kinds
    changed = page.inner_text("[data-testid=diff-table] tr[data-kind=changed]")
    assert "np.max(x, axis=-1)" in changed and "x.max(axis=-1)" in changed
    assert "# my note" in page.inner_text("[data-testid=diff-table] tbody")
    assert page.locator("[data-testid=diff-table] tr[data-kind=removed]", has_text="# my note").count() == 1
    assert "3 lines differ" in page.inner_text("[data-testid=diff-summary]")
    page.click("[data-testid=compare-reference]")                  # closes again
    assert page.locator("[data-testid=diff-table]").count() == 0
    # Another visit to the passed step offers the comparison at once.
    page.reload()
    page.wait_for_selector("[data-testid=after-pass]:not([hidden])")


def test_a_failing_check_reruns_alone_with_its_inputs(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    wrong = SOLUTION.replace("return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)",
                             "return m, l_a + l_b * np.exp(m_b - s)")      # l_a not rescaled
    statuses = run_with(page, wrong)
    assert "fail" in statuses and page.is_hidden("[data-testid=after-pass]")
    failing = page.locator("[data-testid=check][data-status=fail]")
    assert page.locator("[data-testid=check][data-status=pass] [data-testid=rerun-check]").count() == 0
    check_id = failing.first.get_attribute("data-check")
    seeded = re.search(r"inputs seeded with (\d+)", failing.first.inner_text())
    failing.first.locator("[data-testid=rerun-check]").focus()
    page.keyboard.press("Enter")                                            # by keyboard
    page.wait_for_selector(f"[data-testid=rerun][data-check={check_id}]")
    page.wait_for_function("document.activeElement.dataset.testid === 'rerun-check'")  # focus kept
    panel = page.locator("[data-testid=rerun]")
    assert panel.get_attribute("data-status") == "fail"
    inputs = page.inner_text("[data-testid=rerun-inputs]")
    for label in ("seed", "input shapes", "expected", "got", "tolerance"):
        assert label in inputs, inputs
    assert page.locator("[data-testid=rerun] [data-testid=check]").count() == 0  # one check, on its own
    # It ran alone (the grade's `only`: the other checks did not run in either worker), with the
    # inputs of the grade it repeats.
    assert panel.get_attribute("data-ran") == "1"
    assert seeded and f"(seed {seeded.group(1)})" in panel.inner_text(), panel.inner_text()
    assert "other checks did not run" in panel.inner_text()


def test_passing_with_the_loaded_solution_says_solution_viewed(page, site_url, browser_helpers):
    """The Load solution question promises that a pass shows as "solution viewed", not "solved":
    the summary after that pass says which one it is."""
    open_step(page, site_url, browser_helpers)
    page.click("[data-testid=load-solution]")
    assert "solution viewed" in page.inner_text("[data-testid=confirm-replace]")
    page.click("[data-testid=confirm-replace-yes]")
    page.click("[data-testid=run-checks]")
    page.wait_for_function(RESULTS_DONE, timeout=60000)
    summary = page.inner_text("[data-testid=results-summary]")
    assert "Step complete" in summary and "solution viewed" in summary, summary
    assert set(run_with(page, SOLUTION + "\n# typed again by hand\n")) == {"pass"}
    assert "solution viewed" in page.inner_text("[data-testid=results-summary]")  # still viewed first


def test_a_grade_over_a_second_says_where_its_time_went(page, site_url, browser_helpers):
    """Issue 22: a regrade above 1 s gives its reason on the page, from the grade's own per-check
    timings (`ms`) or, when Python itself was quick, the wait for a worker."""
    open_step(page, site_url, browser_helpers)
    said = page.evaluate("""async () => {
        const {slowReason} = await import('./js/exercise-results.js');
        const checks = [{title: 'ragged tiles', ms: 700}, {title: 'lse', ms: 900}, {title: 'shape', ms: 5}];
        return [slowReason({elapsed_ms: 1700}, checks, 1800),
                slowReason({elapsed_ms: 300}, checks, 4000),
                slowReason({elapsed_ms: 300}, checks, 400)];
    }""")
    assert "\u201clse\u201d (0.9 s) and \u201cragged tiles\u201d (0.7 s)" in said[0], said[0]
    assert "3.7 s of it went to starting or waiting for a Python worker" in said[1], said[1]
    assert said[2] == ""                                  # under a second: nothing to explain
    grade = page.evaluate("""async () => {
        const {getRuntime} = await import('./js/runtime.js');
        const {grade} = await import('./js/check-runner.js');
        return grade(getRuntime(), {exercise: 'online-softmax', step: 'scratch', code: %r});
    }""" % SOLUTION)
    graded = [c for c in grade["checks"] if c["status"] != "local"]
    assert graded and all(c["ms"] >= 0 for c in graded), graded   # every check carries its time
