"""Checks every page of the site shares (issue 23, items 1 and 4): an axe-core scan finds no
serious or critical accessibility violation, and at a phone's width (390 px) no page scrolls
sideways — a wide table or formula scrolls inside its own box.

axe-core is vendored by the build (vendor/axe-core/axe.min.js, from the pinned npm package) and
injected here; no page loads it. Each page is scanned once it has drawn what it draws on load
(the comparison on lab.html, the trace in the visualizer, the records on the performance page,
an exercise's editor), so content added by scripts is scanned too. The scan runs at a laptop's
size (1366×768) and at a phone's (390×844): some rules only fire at one of them (a table that
only scrolls inside its box on a phone is `scrollable-region-focusable` there alone).
"""
from __future__ import annotations

import pytest

from nlpcore import lab

AXE = "vendor/axe-core/axe.min.js"
BLOCKING = ("serious", "critical")
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}

# page -> a JavaScript condition that holds once the page has drawn what it draws on load
READY = {
    "index.html": "document.getElementById('progress').dataset.state === 'ready'",
    "lab.html": "['match', 'mismatch', 'error', 'no-webgpu'].includes("
                "document.querySelector('[data-testid=compare]').dataset.status)"
                " && !!document.querySelector('[data-testid=lab-step]')",
    "visualizer.html": "document.querySelector('[data-testid=viz-status]').dataset.status === 'ready'",
    "visualizer.html?view=ring": "document.querySelector('[data-testid=ring-status]').dataset.status === 'ready'",
    "performance.html": "[...document.querySelectorAll('section[data-status]')].every("
                        "s => s.dataset.status !== 'loading')",
    "source.html?path=src/nlpcore/kernels/flash_np.py": "!!document.querySelector('.CodeMirror')",
    "bench.html": "document.readyState === 'complete'",
}
for _ex in lab.exercises():
    READY[f"exercise.html?id={_ex.id}"] = "document.documentElement.dataset.runtime === 'ready'" \
        " && !!document.querySelector('[data-testid=run-checks]:not([disabled])')"
TIMEOUT_MS = 180_000


def open_ready(open_page, site_url, path, viewport=None):
    page = open_page(webgpu=True)
    if viewport:
        page.set_viewport_size(viewport)
    page.goto(site_url + path)
    page.wait_for_function(READY[path], timeout=TIMEOUT_MS)
    # js/scroll-box.js (every page) makes boxes that scroll reachable one frame after content lands
    page.wait_for_function("document.documentElement.dataset.scrollBoxes === 'done'")
    return page


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1366x768", "390x844"])
@pytest.mark.parametrize("path", list(READY))
def test_axe_finds_no_serious_violation(open_page, site_url, path, viewport):
    page = open_ready(open_page, site_url, path, viewport)
    page.add_script_tag(url=site_url + AXE)
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})"
                           ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
                           " nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))})))")
    blocking = [v for v in result if v["impact"] in BLOCKING]
    assert not blocking, f"{path} at {viewport['width']}x{viewport['height']}: " + "; ".join(
        f"{v['impact']} {v['id']} ({v['help']}): {v['nodes']}" for v in blocking)


@pytest.mark.parametrize("path", list(READY))
def test_no_page_scrolls_sideways_on_a_phone(open_page, site_url, path):
    page = open_ready(open_page, site_url, path, PHONE)
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"{path} is {widths[0]} px wide in a {widths[1]} px viewport"


# The pages a learner walks with the keyboard here (the exercise page has its own keyboard tests).
KEYBOARD_PAGES = ["index.html", "lab.html", "visualizer.html", "visualizer.html?view=ring", "performance.html"]


@pytest.mark.parametrize("path", KEYBOARD_PAGES)
def test_tab_walks_the_page_with_a_visible_focus_ring(open_page, site_url, path):
    """Tab reaches controls in order, never sticks, and every focused control draws a ring."""
    page = open_ready(open_page, site_url, path)
    seen = []
    for _ in range(25):
        page.keyboard.press("Tab")
        focus = page.evaluate("""() => {
          const e = document.activeElement;
          if (!e || e === document.body) return null;
          const s = getComputedStyle(e);
          return {tag: e.tagName, id: e.id || e.getAttribute('data-testid') || e.textContent.trim().slice(0, 30),
                  ring: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2};
        }""")
        if focus is None:
            break
        assert focus["ring"], f"{path}: {focus['tag']} {focus['id']!r} has focus but no visible ring"
        seen.append((focus["tag"], focus["id"]))
    assert len(set(seen)) >= min(len(seen), 5), f"{path}: focus stuck on {seen[-3:]}"
    assert len(seen) >= 5, f"{path}: Tab reached only {seen}"
