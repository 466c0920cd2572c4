"""exercise.html names the line that stops Python code from loading (issue 23 item 6): a syntax
error or an error while loading is marked in the editor and named under it, with a button to
go there; where a newer Python would accept the construct, the page says it runs Python 3.8."""
from __future__ import annotations

RESULTS_DONE = ("() => ['done', 'error'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")


def open_step(page, site_url, helpers, ex_id="online-softmax", step="scratch"):
    page.goto(f"{site_url}exercise.html?id={ex_id}&step={step}")
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


def marked_lines(page):
    return page.eval_on_selector_all("#editor-host .py-error-line", "els => els.map(e => e.querySelector('.CodeMirror-line').textContent)")


def test_a_match_statement_is_marked_and_the_page_says_it_runs_python_3_8(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    run_with(page, "import numpy as np\n\ndef from_block(x):\n    match x.ndim:\n        case 1:\n            return x\n")
    box = page.locator("[data-testid=code-problem]")
    assert box.is_visible()
    text = box.inner_text()
    assert "line 4" in text and "Python 3.8" in text and "match statements came in Python 3.10" in text, text
    assert box.get_attribute("data-newer") == "3.10"
    assert marked_lines(page) == ["    match x.ndim:"]
    page.click("[data-testid=code-problem-go]")
    assert page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror.getCursor().line") == 3
    assert page.evaluate("Boolean(document.activeElement.closest('#editor-host'))")


def test_a_newer_runtime_feature_and_a_plain_syntax_error(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    run_with(page, "x = 1\nmerged = {'a': 1} | {'b': 2}\n")
    text = page.inner_text("[data-testid=code-problem]")
    assert "line 2" in text and "TypeError" in text and "dict merges with | came in Python 3.9" in text, text
    assert marked_lines(page) == ["merged = {'a': 1} | {'b': 2}"]

    run_with(page, "def from_block(x)\n    return x\n")      # a missing colon: no version talk
    box = page.locator("[data-testid=code-problem]")
    assert "line 1" in box.inner_text() and "Python 3." not in box.inner_text()
    assert box.get_attribute("data-newer") == ""
    assert marked_lines(page) == ["def from_block(x)"]

    run_with(page, "x = 1\n")                                 # loads: no mark, no notice
    assert not box.is_visible()
    assert marked_lines(page) == []
