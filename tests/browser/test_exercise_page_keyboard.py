"""exercise.html by keyboard alone (issue 23 item 1): Tab indents only while an editor has focus
and the page says so; Esc then Tab leaves the editor; Ctrl+Enter runs the checks, Shift+Enter
the scratch cell; Enter on a step tab keeps focus there; Esc closes the "Load solution" question
and gives focus back; a focus ring shows; the shortcuts are listed on the page."""
from __future__ import annotations

RESULTS_DONE = ("() => ['done', 'error'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")
IN_EDITOR = "(host) => Boolean(document.activeElement.closest(host + ' .CodeMirror'))"


def open_step(page, site_url, helpers, ex_id="online-softmax", step=None):
    page.goto(f"{site_url}exercise.html?id={ex_id}" + (f"&step={step}" if step else ""))
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def editor_text(page, host="#editor-host"):
    return page.evaluate(f"document.querySelector('{host} .CodeMirror').CodeMirror.getValue()")


def focused(page):
    return page.evaluate("(() => { const e = document.activeElement; return {id: e.id, testid: "
                         "e.dataset.testid || null, step: e.dataset.step || null, "
                         "outline: getComputedStyle(e).outlineStyle}; })()")


def test_tab_indents_in_the_editor_and_esc_then_tab_leaves_it(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    before = editor_text(page)
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Home")
    assert page.evaluate(IN_EDITOR, "#editor-host")
    assert "Tab indents" in page.inner_text("[data-testid=editor-keys]")
    page.keyboard.press("Tab")
    assert editor_text(page) == "    " + before          # Tab indented, focus stayed
    assert page.evaluate(IN_EDITOR, "#editor-host")
    page.keyboard.press("Shift+Tab")
    assert editor_text(page) == before                   # Shift+Tab dedented
    page.keyboard.press("Escape")
    assert page.get_attribute("[data-testid=editor-keys]", "data-mode") == "leave"
    assert "Tab now leaves" in page.inner_text("[data-testid=editor-keys]")
    page.keyboard.press("Tab")
    assert not page.evaluate(IN_EDITOR, "#editor-host"), "Esc then Tab must leave the editor"
    assert editor_text(page) == before, "the Tab that left must not change the code"
    # The editor says nothing about Tab once it has lost focus; Run checks is reachable.
    assert page.inner_text("[data-testid=editor-keys]").strip() == ""
    for _ in range(12):
        if focused(page)["testid"] == "run-checks":
            break
        page.keyboard.press("Tab")
    assert focused(page)["testid"] == "run-checks"
    assert focused(page)["outline"] not in ("none", ""), "a focused button shows a focus ring"


def test_the_wgsl_editor_keeps_the_keyboard_rules(page, site_url, browser_helpers):
    """The WGSL page sets its own indent (two spaces) but not its own keys: Tab indents, Esc then
    Tab leaves, Ctrl+Enter runs the checks (a page that replaced the editor's keys trapped focus)."""
    open_step(page, site_url, browser_helpers, ex_id="wgsl", step="scratch")
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Home")
    before = editor_text(page)
    page.keyboard.press("Tab")
    assert editor_text(page) == "  " + before and page.evaluate(IN_EDITOR, "#editor-host")
    page.keyboard.press("Shift+Tab")
    assert editor_text(page) == before
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    # The shader is taller than its box, so its scroller is a tab stop of its own ("Code view",
    # js/scroll-box.js: the arrow keys scroll it); the next Tab leaves the editor altogether.
    in_input = "document.activeElement.matches('#editor-host .CodeMirror textarea')"
    assert not page.evaluate(in_input), "Esc then Tab must leave the WGSL editor's input"
    if page.evaluate(IN_EDITOR, "#editor-host"):
        assert page.evaluate("document.activeElement.getAttribute('role')") == "region"
        page.keyboard.press("Tab")
    assert not page.evaluate(IN_EDITOR, "#editor-host"), "Tab must get out of the WGSL editor"
    assert editor_text(page) == before
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Enter")
    page.wait_for_function(RESULTS_DONE, timeout=120_000)


def test_esc_then_shift_tab_leaves_backwards_and_any_key_returns_to_editing(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Escape")
    page.keyboard.press("ArrowDown")                    # changed their mind: Tab indents again
    assert page.get_attribute("[data-testid=editor-keys]", "data-mode") == "indent"
    before = editor_text(page)
    page.keyboard.press("Tab")
    assert editor_text(page) != before and page.evaluate(IN_EDITOR, "#editor-host")
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Tab")
    assert not page.evaluate(IN_EDITOR, "#editor-host")
    # The editor host draws a ring while it has focus.
    page.click("#editor-host .CodeMirror-code")
    ring = page.evaluate("getComputedStyle(document.getElementById('editor-host')).outlineStyle")
    assert ring not in ("none", "")


def test_ctrl_enter_runs_the_checks_from_the_editor_and_from_the_page(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, step="scratch")
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+Enter")
    page.wait_for_function(RESULTS_DONE, timeout=60000)
    assert page.locator("[data-testid=check]").count() > 0
    assert page.get_attribute("#run-output", "data-run") == "1"
    assert "\n\n" not in editor_text(page)[-2:], "Ctrl+Enter must not insert a line"
    page.focus("[data-testid=next-hint]")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("document.getElementById('run-output').dataset.run === '2'", timeout=60000)


def test_shift_enter_runs_the_scratch_cell(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, step="scratch")
    page.click("#scratch-host .CodeMirror-code")
    page.keyboard.insert_text("6 * 7")
    assert "Shift+Enter runs the cell" in page.inner_text("[data-testid=scratch-keys]")
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("document.querySelector('[data-testid=scratch-output]').dataset.state === 'done'",
                           timeout=60000)
    assert page.inner_text("[data-testid=scratch-output] [data-testid=value]").strip() == "42"
    assert editor_text(page, "#scratch-host") == "6 * 7"


def test_enter_on_a_step_tab_keeps_focus_on_it(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    tabs = page.locator("[data-testid=step-tab]")
    second = tabs.nth(1).get_attribute("data-step")
    tabs.nth(1).focus()
    page.keyboard.press("Enter")
    page.wait_for_function("(s) => new URL(location.href).searchParams.get('step') === s", arg=second)
    assert focused(page)["step"] == second
    assert page.get_attribute(f"[data-testid=step-tab][data-step={second}]", "aria-current") == "step"
    page.keyboard.press("Shift+Tab")                      # the previous tab, then Space opens it
    page.keyboard.press("Space")
    first = tabs.nth(0).get_attribute("data-step")
    assert focused(page)["step"] == first
    assert page.get_attribute(f"[data-testid=step-tab][data-step={first}]", "aria-current") == "step"


def test_esc_closes_the_load_solution_question_and_gives_focus_back(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, step="scratch")
    before = editor_text(page)
    page.focus("[data-testid=load-solution]")
    page.keyboard.press("Enter")
    assert page.is_visible("[data-testid=confirm-replace]")
    assert focused(page)["testid"] == "confirm-replace-yes"
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-testid=confirm-replace]")
    assert focused(page)["testid"] == "load-solution"
    assert editor_text(page) == before
    # The same for "Reset to starter".
    page.focus("#reset-code")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-testid=confirm-replace]")
    assert focused(page)["id"] == "reset-code"


def test_the_shortcuts_are_listed_on_the_page(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    page.click("[data-testid=shortcuts] summary")
    text = page.inner_text("[data-testid=shortcuts]")
    for shortcut in ("Ctrl+Enter", "Shift+Enter", "Esc, then Tab", "Shift+Tab"):
        assert shortcut in text.replace(" + ", "+"), shortcut


def test_each_editor_input_has_a_name_and_the_label_points_at_it(page, site_url, browser_helpers):
    """CodeMirror hides the original textarea; the textarea it types into must carry the name
    (axe `label`), and <label for> must target that input (a <div> cannot be labelled)."""
    open_step(page, site_url, browser_helpers)
    named = page.evaluate("""() => [...document.querySelectorAll('.CodeMirror')].map(cm => {
        const input = cm.CodeMirror.getInputField();
        return {host: cm.parentElement.id, label: input.getAttribute('aria-label'), id: input.id}; })""")
    assert {n["host"]: n["label"] for n in named} == {"editor-host": "your code", "scratch-host": "scratch cell"}
    target = page.get_attribute("#editor-label", "for")
    assert target == next(n["id"] for n in named if n["host"] == "editor-host")
    assert page.evaluate("(id) => document.getElementById(id).tagName", target) == "TEXTAREA"
    page.click("#editor-label")
    assert page.evaluate(IN_EDITOR, "#editor-host"), "clicking the label focuses the editor"


def test_enter_on_load_the_solution_puts_focus_in_the_editor(page, site_url, browser_helpers):
    """The question's button disappears with the question: focus goes to the editor that now
    holds the solution, never to the page body."""
    open_step(page, site_url, browser_helpers, step="compose")
    page.focus("[data-testid=load-solution]")
    page.keyboard.press("Enter")
    assert focused(page)["testid"] == "confirm-replace-yes"
    assert "solution viewed" in page.inner_text("[data-testid=confirm-replace]")
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('[data-testid=confirm-replace]').hidden")
    assert page.evaluate(IN_EDITOR, "#editor-host"), page.evaluate("document.activeElement.tagName")
    assert "def " in editor_text(page)
