"""The page judges in a second Pyodide worker that never runs learner code (js/runtime.js
getJudge, js/check-runner.js): the learner worker only collects outputs as data, so code that
patches the grader where it runs, or leaves callbacks behind, cannot change a verdict."""
from __future__ import annotations

import textwrap

from nlpcore import lab

RESULTS_DONE = ("() => ['done', 'error', 'refused'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")
# Patches the judging vocabulary and leaves a gc callback that patches it again later: in the
# learner worker. A wrong prediction must still fail.
PATCHING = textwrap.dedent("""
    import gc
    from nlpcore.lab import judging, verdict
    def _win(*a):
        judging.relative_close = lambda *a, **k: "fine"
        verdict._judged = lambda check, fn, *a, **k: {"id": check.id, "title": check.title,
                                                       "status": "pass", "message": ""}
    _win()
    gc.callbacks.append(_win)
    standard = 1.0
    flash = 2.0
""")


def _open(page, site_url, helpers, ex_id, step):
    page.goto(f"{site_url}exercise.html?id={ex_id}&step={step}")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def _run(page, code):
    page.evaluate("code => document.querySelector('.CodeMirror').CodeMirror.setValue(code)", code)
    page.click("[data-testid=run-checks]")
    page.wait_for_function(RESULTS_DONE, timeout=180000)
    statuses = page.eval_on_selector_all("[data-testid=check]", "els => els.map(e => e.dataset.status)")
    return statuses, page.eval_on_selector("[data-testid=results-summary]", "e => e.dataset.state")


def test_the_page_judges_in_a_worker_that_runs_no_learner_code(page, site_url, browser_helpers):
    _open(page, site_url, browser_helpers, "online-softmax", "predict")
    statuses, state = _run(page, PATCHING)
    assert state != "passed" and statuses.count("fail") >= 2, (state, statuses)
    page.wait_for_function("document.documentElement.dataset.judge === 'ready'", timeout=180000)
    refused = page.evaluate("""async () => {
        const {getJudge} = await import('./js/runtime.js');
        try { await getJudge().call('exercises.collect', {exercise: 'online-softmax',
                                                           step: 'predict', code: 'x = 1'});
              return 'answered'; } catch (error) { return error.message; } }""")
    assert "answers only" in refused, refused
    solution = lab.exercise("online-softmax").step("predict").solution
    assert _run(page, solution) == (["pass"] * 3, "passed")
    statuses, state = _run(page, "standard = 1.0\nflash = 2.0\n")
    assert state != "passed" and statuses.count("fail") == 2, (state, statuses)
