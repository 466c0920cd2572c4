"""How the page's Python workers boot (js/runtime.js, js/pyworker.js): the order, and the two
things that make them cheaper -- Pyodide's WebAssembly compiled once by the page and handed to
every worker, and the precompiled bytecode of pyc/bundle.bin. Speed itself is measured by
bench/exercise_page.py, not here; these tests hold the mechanisms in place (each is a workaround
of Pyodide 0.17's loader, see js/pyworker.js)."""
from __future__ import annotations

BOOT = """async () => {
  const m = await import('./js/runtime.js');
  const judge = m.getJudge();
  await judge.ready;
  return {learner: m.getRuntime().info, judge: judge.info};
}"""


def _exercise(page, site_url, helpers):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step=compose")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_function("document.documentElement.dataset.judge === 'ready'", timeout=180000)
    return page.evaluate(BOOT)


def test_both_workers_take_the_pages_compiled_wasm_and_the_precompiled_bytecode(page, site_url, browser_helpers):
    info = _exercise(page, site_url, browser_helpers)
    for role in ("learner", "judge"):
        assert info[role]["wasm"] == "page", (role, info[role])
        assert info[role]["pyc"]["usable"] and info[role]["pyc"]["files"] > 100, (role, info[role])
    # Boot order (runtime.js JUDGE_STARTS_AT): an exercise page starts its judge while the
    # learner's worker is still booting, not after it is ready.
    assert info["judge"]["boot"]["runtime"] < info["learner"]["boot"]["ready"], info


def test_without_the_bytecode_bundle_python_compiles_from_source_and_still_grades(page, site_url, browser_helpers):
    page.route("**/pyc/bundle.bin", lambda route: route.fulfill(status=404, body="not here"))
    browser_helpers.allow_console_error(page, "bundle.bin")  # the 404 itself
    info = _exercise(page, site_url, browser_helpers)
    assert info["learner"]["pyc"] == {"files": 0, "usable": False}, info
    page.click("[data-testid=load-solution]")
    page.click("[data-testid=confirm-replace-yes]")
    page.click("[data-testid=run-checks]")
    page.wait_for_function("document.getElementById('results-summary').dataset.state === 'passed'",
                           timeout=180000)


def test_a_page_that_does_not_grade_boots_no_judge(page, site_url, browser_helpers):
    page.goto(f"{site_url}lab.html")
    assert browser_helpers.wait_for_runtime(page) == "ready"
    page.wait_for_timeout(500)
    assert page.evaluate("document.documentElement.dataset.judge") is None
