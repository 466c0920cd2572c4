"""Browser tests for the defects a new learner found (issue 16, item 4): each would have caught
its defect on the main of that day."""
from __future__ import annotations

import pathlib

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
