"""Grading isolation in the page's Pyodide (0.17: Python 3.8, NumPy 1.17): a submission that
reaches into the interpreter gets its worker replaced, and a later grade is not affected; the
memory check of a tiled step works there (tracemalloc sees NumPy's buffers); SystemExit is a
failed check; a grade carries the learner's stdout, stderr and traceback."""
from __future__ import annotations

import json

from nlpcore import lab

RESULTS_DONE = ("() => ['done', 'error'].includes("
                "document.querySelector('[data-testid=results]').dataset.state)")
MISCHIEF = """import numpy as np
from nlpcore.lab import judging as fw
np.allclose = lambda *a, **k: True
np.abs = lambda x, *a, **k: 0 * np.asarray(x, dtype=float)
fw.assert_close = lambda *a, **k: 0.0
standard = 1.2e6
flash = 3e5
"""
UNTILED = """import numpy as np

def attention(q, k, v, block_q, block_k, causal=False):
    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True)
    return p @ v / l, (m + np.log(l))[:, 0]
"""


def open_step(page, site_url, helpers, ex_id, step):
    page.goto(f"{site_url}exercise.html?id={ex_id}&step={step}")
    assert helpers.wait_for_runtime(page) == "ready"
    page.wait_for_selector("[data-testid=run-checks]:not([disabled])")


def set_code(page, code):
    page.evaluate("code => document.querySelector('.CodeMirror').CodeMirror.setValue(code)", code)


def run_checks(page, timeout_s=120):
    page.click("[data-testid=run-checks]")
    page.wait_for_function(RESULTS_DONE, timeout=timeout_s * 1000)
    return page.eval_on_selector_all("[data-testid=check]", "els => els.map(e => e.dataset.status)")


def grade_in_page(page, ex_id, step, code):
    """exercises.grade through the page's own runtime (the same worker the page grades in)."""
    return page.evaluate(
        """async ([ex, step, code]) => {
             const {getRuntime} = await import('./js/runtime.js');
             return await getRuntime().call('exercises.grade', {exercise: ex, step, code});
           }""", [ex_id, step, code])


def starts(page):
    return int(page.evaluate("document.documentElement.dataset.runtimeStarts || '0'"))


def test_mischief_replaces_the_worker_and_does_not_reach_a_later_grade(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "predict")
    before = starts(page)
    result = grade_in_page(page, "online-softmax", "predict", MISCHIEF)
    assert "module numpy" in result["restored"], result["restored"]     # restored in Pyodide too
    assert any("judging" in r for r in result["restored"]), result["restored"]
    page.wait_for_function(f"Number(document.documentElement.dataset.runtimeStarts) > {before}")
    page.wait_for_function("document.documentElement.dataset.runtime === 'ready'", timeout=120000)
    solution = lab.exercise("online-softmax").step("compose").solution
    wrong = solution.replace("acc = alpha[:, None] * acc + p @ v[k0:k1]", "acc = acc + p @ v[k0:k1]")
    after = grade_in_page(page, "online-softmax", "compose", wrong)
    assert not after["passed"] and after["restored"] == []
    assert grade_in_page(page, "online-softmax", "compose", solution)["passed"]
    assert starts(page) == before + 1                # honest grades keep the warm worker


def test_tiled_memory_check_and_captured_output_in_pyodide(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "compose")
    untiled = grade_in_page(page, "online-softmax", "compose",
                            "print('hello')\n" + UNTILED)
    status = {c["id"]: c["status"] for c in untiled["checks"]}
    assert status.pop("tiled") == "fail" and set(status.values()) == {"pass"}, untiled["checks"]
    tiled = next(c for c in untiled["checks"] if c["id"] == "tiled")
    assert "MiB" in tiled["message"] and "score matrix" in tiled["message"]
    assert untiled["stdout"] == "hello\n"
    solution = lab.exercise("online-softmax").step("compose").solution
    good = grade_in_page(page, "online-softmax", "compose", solution)
    assert good["passed"], json.dumps(good["checks"])[:2000]
    broken = grade_in_page(page, "online-softmax", "compose",
                           "def attention(q, k, v, block_q, block_k, causal=False):\n"
                           "    return q[10 ** 6]\n")
    assert 'File "<your code>", line 2, in attention' in broken["traceback"]


def test_system_exit_is_a_failed_check_in_the_page(page, site_url, browser_helpers):
    open_step(page, site_url, browser_helpers, "online-softmax", "predict")
    set_code(page, "standard = 1\nflash = 2\nraise SystemExit(0)\n")
    assert set(run_checks(page)) == {"error"}
    assert "SystemExit" in page.inner_text("#results")
    page.click("[data-testid=load-solution]")
    page.click("[data-testid=confirm-replace-yes]")  # "Load solution" asks first
    assert set(run_checks(page)) == {"pass"}
