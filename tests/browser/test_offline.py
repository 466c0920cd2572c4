"""Offline use (issue 16, item 6): after one visit, the service worker (site/sw.js) holds the
whole site and the Pyodide runtime, so with the server gone a learner can still open the pages,
boot Python and grade an exercise."""
from __future__ import annotations

from labtools import build
from nlpcore import lab


def test_the_lab_works_offline_after_the_first_visit(browser, lab_dist):
    server, url = build.serve_in_thread(lab_dist)  # our own server, so the test can cut it
    context = browser.new_context()                 # service workers allowed (conftest blocks them)
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url + "exercise.html?id=online-softmax&step=scratch")
        page.wait_for_function("document.documentElement.dataset.offline === 'ready'", timeout=180000)
        cached = page.evaluate("caches.open('fa-lab-site-v1').then(c => c.keys()).then(k => k.length)")
        assert cached >= 140, cached

        server.shutdown()                           # the network is cut: nothing answers now
        server.server_close()
        # A file the cache does not hold cannot be had: the server is really gone.
        assert page.evaluate(f"fetch('{url}not-in-the-cache.txt').then(() => 'up', () => 'down')") == "down"

        page.goto(url + "exercise.html?id=online-softmax&step=scratch")
        page.wait_for_function("['ready', 'error'].includes(document.documentElement.dataset.runtime)",
                               timeout=180000)
        assert page.evaluate("document.documentElement.dataset.runtime") == "ready"
        page.wait_for_selector("[data-testid=run-checks]:not([disabled])")
        page.evaluate("code => document.querySelector('#editor-host .CodeMirror').CodeMirror.setValue(code)",
                      lab.exercise("online-softmax").step("scratch").solution)
        page.click("[data-testid=run-checks]")
        page.wait_for_function("document.querySelector('[data-testid=results]').dataset.state === 'done'",
                               timeout=60000)
        statuses = page.eval_on_selector_all("[data-testid=check]", "els => els.map(e => e.dataset.status)")
        assert statuses and set(statuses) == {"pass"}, statuses

        for other in ("index.html", "lab.html", "visualizer.html", "performance.html"):
            response = page.goto(url + other)
            assert response is not None and response.ok, other
            assert page.locator("header.site-header").count() == 1, other
        assert not errors, errors
    finally:
        context.close()
        server.server_close()
