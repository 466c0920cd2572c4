"""exercise.html safe across tabs (issue 23 item 2): a draft edited in another tab is noticed
and the learner chooses (nothing is written over silently, either way); all progress and drafts
export as one file and import back, merging and setting aside what the file replaces."""
from __future__ import annotations

import json

from nlpcore import lab

STEP = "scratch"
KEY = f"online-softmax/{STEP}"
DRAFT_SAVED = "document.querySelector('[data-testid=draft-state]').dataset.state === 'saved'"


def open_step(page, site_url):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step={STEP}")
    page.wait_for_selector("#editor-host .CodeMirror")


def type_code(page, code):
    page.click("#editor-host .CodeMirror-code")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def editor_text(page):
    return page.evaluate("document.querySelector('#editor-host .CodeMirror').CodeMirror.getValue()")


def stored(page):
    return page.evaluate(f"JSON.parse(localStorage.getItem('fa-lab-drafts-v1') || '{{}}')['{KEY}']")


def test_a_draft_changed_in_another_tab_is_noticed_and_the_learner_chooses(page, site_url):
    open_step(page, site_url)
    other = page.context.new_page()
    try:
        open_step(other, site_url)
        type_code(page, "# typed in tab A\n")
        page.wait_for_function(DRAFT_SAVED)
        # Tab B hears of it, asks, and changes nothing yet.
        other.wait_for_selector("[data-testid=other-tab]:not([hidden])")
        starter = lab.exercise("online-softmax").step(STEP).starter
        assert editor_text(other) == starter
        # Typing in B while the question is open saves nothing over A's draft.
        type_code(other, "# typed in tab B\n")
        other.wait_for_function("document.querySelector('[data-testid=draft-state]').dataset.state === 'conflict'")
        other.wait_for_timeout(600)
        assert stored(page) == "# typed in tab A\n"
        # B takes A's version; B's own text is kept and restorable.
        other.click("[data-testid=other-tab-theirs]")
        assert editor_text(other) == "# typed in tab A\n"
        assert other.is_visible("[data-testid=kept-draft]")
        assert "another tab" in other.inner_text("[data-testid=kept-draft]")
        other.click("[data-testid=restore-draft]")
        assert editor_text(other) == "# typed in tab B\n"
        other.wait_for_function(DRAFT_SAVED)
        # Now A is asked in turn; A keeps its own, and that is written (B is asked again).
        page.wait_for_selector("[data-testid=other-tab]:not([hidden])")
        assert editor_text(page) == "# typed in tab A\n"
        page.keyboard.press("Escape")                      # decide later: the question closes
        assert not page.is_visible("[data-testid=other-tab]")
        assert stored(page) == "# typed in tab B\n"
        type_code(page, "# tab A again\n")                 # still held: nothing written
        page.wait_for_function("document.querySelector('[data-testid=draft-state]').dataset.state === 'conflict'")
        assert stored(page) == "# typed in tab B\n"
        page.click("[data-testid=other-tab-reopen]")        # the line under the editor asks again
        page.click("[data-testid=other-tab-mine]")
        page.wait_for_function(DRAFT_SAVED)
        assert stored(page) == "# tab A again\n"
        other.wait_for_selector("[data-testid=other-tab]:not([hidden])")
    finally:
        other.close()


def test_all_work_exports_as_one_file_and_imports_back(page, site_url, tmp_path):
    open_step(page, site_url)
    type_code(page, "# my draft to take along\n")
    page.wait_for_function(DRAFT_SAVED)
    page.evaluate("""localStorage.setItem('fa-lab-progress-v1', JSON.stringify({version: 1, lab: {},
        exercises: {'online-softmax': {predict: {done: true, at: '2026-01-01T00:00:00Z'}}}}))""")
    page.evaluate("""localStorage.setItem('fa-lab-guided-v1', JSON.stringify({form: {n: 256}, drafts:
        {'predict-agree': 'b', 'tile-refuse': 'x'}, predicted: ['predict-agree'], revealed: []}))""")
    with page.expect_download() as info:
        page.click("[data-testid=export-work]")
    path = tmp_path / "work.json"
    info.value.save_as(path)
    doc = json.loads(path.read_text())
    assert doc["format"] == "fa-lab-work" and doc["version"] == 1
    assert doc["drafts"][KEY] == "# my draft to take along\n"
    assert doc["progress"]["exercises"]["online-softmax"]["predict"]["done"] is True
    assert doc["guided"]["drafts"]["predict-agree"] == "b"    # the guided lab's answers travel too

    # Somewhere else (fresh storage) with a different draft of the same step.
    page.evaluate("localStorage.clear()")
    page.evaluate("""localStorage.setItem('fa-lab-guided-v1', JSON.stringify({form: null, drafts:
        {'tile-refuse': 'typed here'}, predicted: ['causal-skip'], revealed: []}))""")
    open_step(page, site_url)
    type_code(page, "# a draft made here\n")
    page.wait_for_function(DRAFT_SAVED)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    page.set_input_files("[data-testid=import-work]", str(bad))
    page.wait_for_function("document.querySelector('[data-testid=work-status]').textContent.startsWith('Not imported')")
    assert "not a lab work file" in page.inner_text("[data-testid=work-status]")
    page.set_input_files("[data-testid=import-work]", str(path))
    page.wait_for_selector("[data-testid=confirm-import]:not([hidden])")
    question = page.inner_text("[data-testid=confirm-import]")
    assert "1 of your drafts here differs" in question and ": 1 draft and" in question, question
    page.keyboard.press("Escape")                          # Esc closes the question, imports nothing
    assert not page.is_visible("[data-testid=confirm-import]")
    assert editor_text(page) == "# a draft made here\n"
    page.set_input_files("[data-testid=import-work]", str(path))
    page.click("[data-testid=confirm-import-yes]")
    assert editor_text(page) == "# my draft to take along\n"
    assert page.inner_text("[data-testid=work-status]").startswith("Imported 1 draft and")  # not "1 drafts"
    assert page.is_visible("[data-testid=kept-draft]")     # the draft made here is set aside
    page.click("[data-testid=restore-draft]")
    assert editor_text(page) == "# a draft made here\n"
    assert page.get_attribute("[data-testid=step-tab][data-step=predict]", "data-done") == "1"
    guided = page.evaluate("JSON.parse(localStorage.getItem('fa-lab-guided-v1'))")
    assert guided["drafts"] == {"predict-agree": "b", "tile-refuse": "typed here"}  # nothing typed here lost
    assert sorted(guided["predicted"]) == ["causal-skip", "predict-agree"] and guided["form"] == {"n": 256}


def test_the_other_tab_question_takes_focus_and_esc_closes_it_even_from_the_editor(page, site_url):
    """The question takes focus when it appears, says what Esc does (closes it for now, changes
    nothing), and Esc does that even after the learner went back to typing in the editor."""
    open_step(page, site_url)
    other = page.context.new_page()
    try:
        open_step(other, site_url)
        type_code(page, "# typed in tab A\n")
        page.wait_for_function(DRAFT_SAVED)
        other.wait_for_selector("[data-testid=other-tab]:not([hidden])")
        assert other.evaluate("Boolean(document.activeElement.closest('[data-testid=other-tab]'))")
        assert "Esc closes this question for now and changes nothing" in other.inner_text("[data-testid=other-tab]")
        other.click("#editor-host .CodeMirror-code")      # back to typing, the question still open
        other.keyboard.press("Escape")
        assert not other.is_visible("[data-testid=other-tab]")
        assert other.is_visible("[data-testid=other-tab-reopen]")
        assert stored(page) == "# typed in tab A\n"      # closing chose nothing, wrote nothing
        assert editor_text(other) == lab.exercise("online-softmax").step(STEP).starter
    finally:
        other.close()
