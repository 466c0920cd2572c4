"""exercise.html's scratch cell is worth using (issue 23 item 7): its namespace persists between
runs until reset (the editor's definitions run again each time), and a last-line value that is a
1-D or 2-D array is drawn -- a line plot, or a heatmap with the vendored Chart.js matrix chart."""
from __future__ import annotations

SETTLED = "document.querySelector('[data-testid=scratch-output]').dataset.state !== 'running'"


def open_step(page, site_url, helpers):
    page.goto(f"{site_url}exercise.html?id=online-softmax&step=scratch")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-scratch]:not([disabled])")


def type_in(page, host, code):
    page.click(f"{host} .CodeMirror-code")
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def run_cell(page, code):
    type_in(page, "#scratch-host", code)
    page.click("[data-testid=run-scratch]")
    page.wait_for_function(SETTLED, timeout=60000)
    return page.get_attribute("[data-testid=scratch-output]", "data-state")


def chart_type(page):
    return page.evaluate("(() => { const c = document.querySelector('#scratch-plot canvas'); "
                         "return c && Chart.getChart(c) ? Chart.getChart(c).config.type : null; })()")


def painted(page):
    """How many distinct colours the plot's canvas holds (a blank canvas has one)."""
    return page.evaluate("""(() => { const c = document.querySelector('#scratch-plot canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; const seen = new Set();
        for (let i = 0; i < d.length; i += 4 * 7) seen.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]);
        return seen.size; })()""")


def test_the_namespace_persists_until_reset_and_the_editor_runs_again(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    type_in(page, "#editor-host", "def twice(x):\n    return 2 * x\n")
    assert run_cell(page, "import numpy as np\ncount = 1\ncount") == "done"
    assert page.get_attribute("[data-testid=scratch-namespace]", "data-runs") == "1"
    assert run_cell(page, "count += 1\ntwice(count)") == "done"        # count is still there
    assert page.inner_text("[data-testid=scratch-output] [data-testid=value]").strip() == "4"
    assert page.get_attribute("[data-testid=scratch-namespace]", "data-runs") == "2"
    type_in(page, "#editor-host", "def twice(x):\n    return 3 * x\n")  # edits take effect
    assert run_cell(page, "twice(count)") == "done"
    assert page.inner_text("[data-testid=scratch-output] [data-testid=value]").strip() == "6"
    assert "3 runs" in page.inner_text("[data-testid=scratch-namespace]")
    page.click("[data-testid=reset-scratch]")
    assert page.get_attribute("[data-testid=scratch-namespace]", "data-runs") == "0"
    assert run_cell(page, "count") == "error"
    assert "NameError" in page.inner_text("[data-testid=scratch-output] [data-testid=traceback]")
    # Not graded, and nothing restarted Python: the checks never ran.
    assert page.get_attribute("[data-testid=results]", "data-state") == "idle"


def test_a_2d_array_is_a_heatmap_and_a_1d_array_a_line_plot(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers)
    code = ("import numpy as np\ns = np.arange(12.).reshape(3, 4)\n"
            "s[0, 3] = -np.inf   # a masked score\ns")
    assert run_cell(page, code) == "done"
    page.wait_for_function("document.querySelector('#scratch-plot').dataset.kind === 'heatmap'")
    page.wait_for_selector("#scratch-plot canvas")
    assert chart_type(page) == "matrix"
    assert painted(page) > 4
    caption = page.inner_text("[data-testid=plot-caption]")
    assert "shape (3, 4)" in caption and "1 entries not finite" in caption and "max 11" in caption, caption
    page.click("[data-testid=plot-line]")                               # the same rows as lines
    page.wait_for_function("document.querySelector('#scratch-plot').dataset.kind === 'line'")
    assert chart_type(page) == "line"
    assert page.evaluate("Chart.getChart(document.querySelector('#scratch-plot canvas')).data.datasets.length") == 3
    assert run_cell(page, "s.max(axis=0)") == "done"                   # 1-D: a line, no heatmap
    page.wait_for_function("document.querySelector('#scratch-plot').dataset.kind === 'line'")
    assert page.locator("[data-testid=plot-heatmap]").count() == 0
    assert run_cell(page, "'not an array'") == "done"
    assert page.is_hidden("[data-testid=plot-choices]")
    assert page.locator("#scratch-plot canvas").count() == 0
