"""Browser tests for the defects a new learner found (issue 16, item 4): each would have caught
its defect on the main of that day."""
from __future__ import annotations

import pathlib
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def chart_colours(page, canvas_ids):
    """{dataset label: colour} of the Chart.js charts drawn on the given canvases."""
    return page.evaluate(
        "ids => { const out = {}; for (const id of ids) { const c = Chart.getChart(document.getElementById(id));"
        " if (!c) throw new Error('no chart on ' + id);"
        " for (const d of c.data.datasets) out[d.label] = d.backgroundColor; } return out; }",
        canvas_ids)


def test_triton_backends_have_one_colour_everywhere(page, site_url, lab_dist):
    assert (lab_dist / "bench/results/triton_h200.json").is_file()
    page.goto(f"{site_url}performance.html")
    page.wait_for_function("document.querySelector('[data-testid=\"section-triton\"]').dataset.status"
                           " === 'recorded'", timeout=60000)
    on_performance = chart_colours(page, ["chart-triton-fwd", "chart-triton-bwd"])
    page.goto(f"{site_url}exercise.html?id=triton&step=compose")
    page.wait_for_function("document.getElementById('plot-note').dataset.state === 'ready'",
                           timeout=60000)
    on_exercise = chart_colours(page, ["plot-fwd", "plot-bwd"])
    assert on_exercise == on_performance, (on_exercise, on_performance)
    assert len(set(on_exercise.values())) == len(on_exercise) >= 4  # one colour per backend


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "site" / "img").glob("*.svg")))
def test_svg_figures_keep_every_text_inside_their_frame(page, site_url, name):
    page.goto(f"{site_url}img/{name}")
    outside = page.evaluate(
        "() => { const svg = document.documentElement; const f = svg.getBoundingClientRect(); const out = [];"
        " for (const t of svg.querySelectorAll('text')) { const b = t.getBoundingClientRect();"
        "   if (b.left < f.left - 0.5 || b.top < f.top - 0.5 || b.right > f.right + 0.5"
        "       || b.bottom > f.bottom + 0.5)"
        "     out.push([t.textContent, Math.round(b.left - f.left), Math.round(b.right - f.left)]); }"
        " return out; }")
    assert not outside, f"{name}: text clipped at the frame (text, left, right): {outside}"


def test_an_empty_episode_field_says_it_is_empty(page, site_url):
    page.goto(f"{site_url}index.html")
    page.fill("[data-testid=cell-exact] input[name=n]", "")
    page.click("[data-testid=cell-run-exact]")
    page.wait_for_selector("[data-testid=cell-exact][data-status=error]")
    out = page.inner_text("[data-testid=cell-output-exact]")
    assert out.startswith("N is empty") and "got 0" not in out, out


WGSL_RESULTS_DONE = ("() => ['done', 'error'].includes("
                     "document.querySelector('[data-testid=results]').dataset.state)")
SET_CODE = "code => document.querySelector('#editor-host .CodeMirror').CodeMirror.setValue(code)"


def wgsl_run(page, timeout_s=150):
    page.click("[data-testid=run-checks]")
    page.wait_for_function(WGSL_RESULTS_DONE, timeout=timeout_s * 1000)
    return dict(page.eval_on_selector_all(
        "[data-testid=check]", "els => els.map(e => [e.dataset.check, e.dataset.status])"))


def wgsl_page(page, site_url, helpers, step):
    page.goto(f"{site_url}exercise.html?id=wgsl&step={step}")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")
    page.wait_for_selector("[data-testid=gpu-status][data-state=ready]")


def test_wgsl_endless_shader_costs_one_time_limit_not_one_per_check(browser, site_url,
                                                                    browser_helpers):
    """One 30 s time limit, then the run's other GPU checks are not started (they were three
    30 s waits). The endless shader keeps SwiftShader's GPU process busy for good (a CPU adapter
    has no watchdog to stop it), so this test runs in a browser of its own and closes it."""
    from labtools import chromium
    from nlpcore.lab import exercise

    step = exercise("wgsl").step("scratch")
    gpu_checks = [c.id for c in step.checks if c.runner == "webgpu"]
    assert len(gpu_checks) >= 2
    own = browser.browser_type.launch(executable_path=chromium.EXECUTABLE, headless=True,
                                      args=list(chromium.WEBGPU_ARGS))
    try:
        page = own.new_context(service_workers="block").new_page()
        wgsl_page(page, site_url, browser_helpers, "scratch")
        assert "j++) {" in step.solution
        endless = step.solution.replace("j++) {", "j += 0u) {", 1)  # the key-tile loop never ends
        page.evaluate(SET_CODE, endless)
        started = time.time()
        statuses = wgsl_run(page)
        took = time.time() - started
        assert took < 30 + 20, took  # one time limit (30 s), not one per GPU check
        assert [statuses[c] for c in gpu_checks] == ["error"] * len(gpu_checks), statuses
        text = page.inner_text("#results")
        assert text.count("did not finish within 30 s") == len(gpu_checks), text
        assert text.count("not run: this shader did not finish") == len(gpu_checks) - 1, text
        assert "recreated" in page.inner_text("[data-testid=gpu-status]")
        # Running the same shader again does not wait again: it is refused at once.
        # (Polling by timer: with the GPU process busy the page draws no more frames.)
        assert page.get_attribute("[data-testid=run-output]", "data-run") == "1"
        started = time.time()
        page.evaluate("document.getElementById('run-checks').click()")
        page.wait_for_function("document.querySelector('[data-testid=run-output]').dataset.run === '2'",
                               polling=250, timeout=20000)
        assert time.time() - started < 10
        assert page.inner_text("#results").count("not run: this shader did not finish") == len(gpu_checks)
    finally:
        own.close()


def test_wgsl_compile_error_fails_every_check_with_the_compilers_message(page, site_url,
                                                                        browser_helpers):
    from nlpcore.lab import exercise

    step = exercise("wgsl").step("scratch")
    wgsl_page(page, site_url, browser_helpers, "scratch")
    lines = step.solution.split("\n")
    bad = next(i for i, line in enumerate(lines) if "j++) {" in line)
    lines[bad] = lines[bad].replace("j < t_c", "j < t_c_typo")
    page.evaluate(SET_CODE, "\n".join(lines))
    statuses = wgsl_run(page)
    graded = [c.id for c in step.checks if c.runner != "local"]
    assert statuses == {c: "error" for c in graded}, statuses   # Python's static checks too
    for check in graded:
        text = page.inner_text(f"[data-testid=check][data-check='{check}']")
        assert f"line {bad + 1}:" in text and "t_c_typo" in text, (check, text)
