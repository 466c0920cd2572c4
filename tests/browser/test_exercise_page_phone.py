"""exercise.html on a phone (issue 23 item 4, the exercise page): at 390 x 844 no exercise page
scrolls sideways; the editor grows with the viewport (the 229-line WGSL shader is no longer in a
fixed box) and "Next TODO" (Alt+T in the editor) jumps to what is left to write."""
from __future__ import annotations

import pytest

from nlpcore import lab

PHONE = {"width": 390, "height": 844}
EXERCISES = [ex.id for ex in lab.exercises()]


@pytest.fixture
def phone(browser, site_url):
    context = browser.new_context(viewport=PHONE)
    yield context.new_page()
    context.close()


def editor_height(page):
    return page.evaluate("document.querySelector('#editor-host .CodeMirror').getBoundingClientRect().height")


@pytest.mark.parametrize("ex_id", EXERCISES)
def test_no_exercise_page_scrolls_sideways_on_a_phone(phone, site_url, ex_id):
    phone.goto(f"{site_url}exercise.html?id={ex_id}")
    phone.wait_for_selector("#editor-host .CodeMirror")
    phone.wait_for_timeout(500)     # page modules (WGSL panel, Triton chart) settle
    for step in [s.id for s in lab.exercise(ex_id).steps]:
        phone.click(f"[data-testid=step-tab][data-step={step}]")
        width = phone.evaluate("document.scrollingElement.scrollWidth")
        assert width <= PHONE["width"], f"{ex_id}/{step} is {width} px wide"


def test_the_editor_grows_with_the_viewport(phone, site_url):
    phone.goto(f"{site_url}exercise.html?id=wgsl&step=harden")
    phone.wait_for_selector("#editor-host .CodeMirror")
    tall = editor_height(phone)
    assert tall >= 0.75 * PHONE["height"] - 150, tall         # most of the screen, not a small box
    phone.set_viewport_size({"width": 390, "height": 600})
    phone.wait_for_timeout(200)
    assert editor_height(phone) < tall - 150
    # A Python editor with a long starter grows too, and scrolls inside past the screen.
    phone.set_viewport_size(PHONE)
    phone.goto(f"{site_url}exercise.html?id=backward&step=harden")
    phone.wait_for_selector("#editor-host .CodeMirror")
    assert editor_height(phone) <= PHONE["height"]


def test_next_todo_jumps_to_what_is_left_to_write(phone, site_url):
    phone.goto(f"{site_url}exercise.html?id=online-softmax&step=compose")
    phone.wait_for_selector("#editor-host .CodeMirror")
    lines = [i + 1 for i, text in enumerate(lab.exercise("online-softmax").step("compose").starter.splitlines())
             if "TODO" in text or "raise NotImplementedError" in text]
    cursor = "document.querySelector('#editor-host .CodeMirror').CodeMirror.getCursor().line + 1"
    seen = []
    for _ in lines:
        phone.click("[data-testid=next-todo]")
        seen.append(phone.evaluate(cursor))
    assert seen == lines, (seen, lines)
    assert phone.evaluate("Boolean(document.activeElement.closest('#editor-host'))")
    phone.keyboard.press("Alt+T")                              # wraps to the first again
    assert phone.evaluate(cursor) == lines[0]
    assert f"Line {lines[0]}" in phone.inner_text("[data-testid=todo-state]")


def test_the_wgsl_editor_shows_a_screenful_of_the_shader_on_a_phone(phone, site_url):
    # Wrapped at 390 px, the 355-line shader showed ~12 of its lines per screen: on a phone long
    # lines scroll sideways inside the editor (the page does not), and the step tabs sit two to
    # a row instead of one above the other.
    phone.goto(f"{site_url}exercise.html?id=wgsl&step=harden")
    phone.wait_for_function("document.querySelector('#editor-host .CodeMirror') && "
                            "document.querySelector('#editor-host .CodeMirror').CodeMirror.getOption('mode') === 'wgsl'")
    shown = """() => { const cm = document.querySelector('#editor-host .CodeMirror').CodeMirror;
        const scroller = cm.getScrollerElement();
        const top = cm.lineAtHeight(scroller.getBoundingClientRect().top, 'window');
        const bottom = cm.lineAtHeight(scroller.getBoundingClientRect().bottom - 1, 'window');
        return {wrap: cm.getOption('lineWrapping'), lines: bottom - top + 1,
                sideways: scroller.scrollWidth > scroller.clientWidth}; }"""
    editor = phone.evaluate(shown)
    assert editor["wrap"] is False and editor["sideways"], editor
    assert editor["lines"] >= 30, editor
    assert phone.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    tabs = phone.eval_on_selector_all("[data-testid=step-tab]", "els => els.map(e => e.getBoundingClientRect().top)")
    assert len(tabs) == 2 and abs(tabs[0] - tabs[1]) < 2, tabs          # side by side
    phone.set_viewport_size({"width": 1366, "height": 768})                # a desktop wraps again
    phone.wait_for_function("document.querySelector('#editor-host .CodeMirror').CodeMirror.getOption('lineWrapping')")
