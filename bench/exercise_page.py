"""Exercise page readiness and grading: time to "Python is ready", the first grade and a regrade.

In headless Debian chromium (the flags the tests use), for each of a few trials in a fresh
browser context (empty cache, empty localStorage; the server sends no-store), on
``exercise.html?id=<exercise>&step=<step>`` (default ``online-softmax``, step ``compose``):
- ``ready_ms``: navigation start (performance.timeOrigin) -> ``#runtime-status`` data-state
  "ready" (Pyodide, NumPy and nlpcore in the worker, and the graders imported);
- the reference solution is put in the editor ("Load solution", confirmed), then
  ``first_grade_ms``: click on "Run checks" -> the summary leaves "running" (wall time in the
  page, the learner's wait), beside the page's own ``round_trip_ms`` and Python's
  ``elapsed_ms`` (data attributes of the summary);
- ``regrade_ms``: the same again on the warm page.
Long tasks on the main thread (PerformanceObserver "longtask") during the grades are recorded.

Run:  .venv/bin/python bench/exercise_page.py [--trials 3] [--dist DIR] [--exercise ID] [--step ID] [--out PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

TRIALS = 3
TIMEOUT_MS = 180_000
GRADE_TARGET_MS = 1000  # issue 22: a regrade above 1 s needs a reason on the page

OBSERVER = """
(() => {
  const perf = window.__exPerf = {longtasks: []};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) perf.longtasks.push({start: e.startTime, duration: e.duration});
  }).observe({type: "longtask", buffered: true});
})();
"""
GRADED = ("document.getElementById('results-summary') && "
          "['passed', 'failed', 'error'].includes(document.getElementById('results-summary').dataset.state)")


def _grade(page) -> dict:
    start = page.evaluate("performance.now()")
    page.click('[data-testid="run-checks"]')
    page.wait_for_function("document.getElementById('results-summary').dataset.state === 'running' || (%s)" % GRADED)
    page.wait_for_function(GRADED)
    end = page.evaluate("performance.now()")
    summary = page.locator("#results-summary")
    tasks = page.evaluate("window.__exPerf.longtasks")
    return {
        "wall_ms": end - start,
        "round_trip_ms": float(summary.get_attribute("data-round-trip-ms") or "nan"),
        "python_ms": float(summary.get_attribute("data-elapsed-ms") or "nan"),
        "state": summary.get_attribute("data-state"),
        "longest_task_ms": max((x["duration"] for x in tasks
                                if x["start"] + x["duration"] > start and x["start"] < end), default=0.0),
    }


def trial(browser, url: str, exercise: str, step: str) -> dict:
    context = browser.new_context()
    offsite: list = []
    common.offsite_guard(context, url.rstrip("/"), offsite)
    context.add_init_script(OBSERVER)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url + "exercise.html?id={}&step={}".format(exercise, step))
        page.wait_for_function("document.getElementById('runtime-status').dataset.state === 'ready'")
        ready = page.evaluate("performance.now()")
        page.click('[data-testid="load-solution"]')
        page.click('[data-testid="confirm-replace-yes"]')
        first = _grade(page)
        page.wait_for_timeout(200)
        second = _grade(page)
    finally:
        context.close()
    return {"ready_ms": ready, "first_grade": first, "regrade": second,
            "page_errors": errors, "offsite_requests": offsite}


def run(trials: int, dist, exercise: str, step: str) -> dict:
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    record = {
        "benchmark": "exercise_page",
        "recorded_at": common.now_iso(),
        "machine": common.machine(["chromium", "playwright"]),
        "load_average": common.load_average(),
        "parameters": {
            "page": "exercise.html?id={}&step={} (reference solution loaded)".format(exercise, step),
            "trials": trials, "browser": "headless Debian chromium, " + " ".join(common.chromium.WEBGPU_ARGS),
            "server": "build.py's server on 127.0.0.1 (Cache-Control: no-store), fresh context per trial",
            "ready": "navigation start -> #runtime-status data-state=ready",
            "grade": "click on Run checks -> #results-summary leaves running (wall time in the page)",
        },
        "trials": [],
    }
    with common.Site(dist) as url, sync_playwright() as pw:
        browser = common.chromium.launch(pw)
        try:
            for i in range(trials):
                t = trial(browser, url, exercise, step)
                print("  trial {}: ready {:.0f} ms, first grade {:.0f} ms ({}), regrade {:.0f} ms".format(
                    i + 1, t["ready_ms"], t["first_grade"]["wall_ms"], t["first_grade"]["state"],
                    t["regrade"]["wall_ms"]), flush=True)
                record["trials"].append(t)
        finally:
            browser.close()
    ts = record["trials"]
    record["summary"] = {
        "ready_ms": common.median([t["ready_ms"] for t in ts]),
        "first_grade_ms": common.median([t["first_grade"]["wall_ms"] for t in ts]),
        "first_grade_python_ms": common.median([t["first_grade"]["python_ms"] for t in ts]),
        "regrade_ms": common.median([t["regrade"]["wall_ms"] for t in ts]),
        "longest_task_during_grades_ms": max(max(t["first_grade"]["longest_task_ms"], t["regrade"]["longest_task_ms"])
                                             for t in ts),
    }
    s = record["summary"]
    record["targets"] = [
        common.target("exercise page regrade", s["regrade_ms"] <= GRADE_TARGET_MS, round(s["regrade_ms"]),
                      "<= {} ms (median)".format(GRADE_TARGET_MS)),
    ]
    record["total_seconds"] = time.perf_counter() - started
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--dist", default=None, help="a built site (default: build one into a temp folder)")
    parser.add_argument("--exercise", default="online-softmax")
    parser.add_argument("--step", default="compose")
    parser.add_argument("--out", default=str(common.RESULTS / "exercise_page.json"))
    args = parser.parse_args(argv)
    record = run(args.trials, args.dist, args.exercise, args.step)
    s = record["summary"]
    print(common.table(["ready ms", "first grade ms", "(python ms)", "regrade ms", "longest task ms"],
                       [[s["ready_ms"], s["first_grade_ms"], s["first_grade_python_ms"], s["regrade_ms"],
                         s["longest_task_during_grades_ms"]]]))
    common.print_targets(record["targets"])
    print("wrote", common.write_result(Path(args.out), record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
