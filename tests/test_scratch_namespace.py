"""The exercise page's scratch cell (nlpcore.web.exercises.scratch): with keep=True its namespace
outlives the run until reset, another step, or keep=False; the kept namespace is not mistaken
for tampering (restored stays empty, so the page keeps its worker); a last-line value that is a
1-D or 2-D real array comes back as plain data to draw."""
from __future__ import annotations

import numpy as np
import pytest

from nlpcore.web import exercises as web

STEP = ("online-softmax", "scratch")
DEFS = "def twice(x):\n    return 2 * x\n"


def run(code, definitions=DEFS, step=STEP, **kw):
    return web.scratch(step[0], step[1], definitions, code, **kw)


@pytest.fixture(autouse=True)
def fresh():
    run("", reset=True)
    yield
    run("", reset=True)


def test_the_namespace_persists_until_reset_and_is_not_reported_as_tampering():
    first = run("count = 1\ncount", keep=True)
    assert first["value"] == "1" and first["runs"] == 1 and first["restored"] == []
    second = run("count += 1\ntwice(count)", keep=True)
    assert second["value"] == "4" and second["runs"] == 2 and second["restored"] == []
    edited = run("twice(count)", definitions="def twice(x):\n    return 3 * x\n", keep=True)
    assert edited["value"] == "6" and edited["restored"] == []   # the editor's code ran again
    assert "NameError" in run("count", keep=True, reset=True)["traceback"]


def test_without_keep_or_on_another_step_the_namespace_is_fresh():
    run("count = 1", keep=True)
    assert "NameError" in run("count")["traceback"]                 # keep=False: a fresh namespace
    run("count = 1", keep=True)
    other = run("count", step=("online-softmax", "compose"), definitions="", keep=True)
    assert "NameError" in other["traceback"] and other["runs"] == 1


@pytest.mark.parametrize("code, shape", [("np.arange(5.)", [5]), ("np.ones((3, 4), dtype=np.float32)", [3, 4]),
                                         ("[1, 2, 3]", [3]), ("np.array([True, False])", [2])])
def test_a_1d_or_2d_real_array_comes_back_to_draw(code, shape):
    out = run("import numpy as np\n" + code)
    assert out["plot"]["shape"] == shape
    assert len(out["plot"]["data"]) == int(np.prod(shape))


def test_non_finite_entries_are_none_and_bounds_skip_them():
    plot = run("import numpy as np\nx = np.arange(4.)\nx[0] = -np.inf\nx[1] = np.nan\nx")["plot"]
    assert plot["data"] == [None, None, 2.0, 3.0] and (plot["min"], plot["max"]) == (2.0, 3.0)


@pytest.mark.parametrize("code", ["np.zeros((2, 2, 2))", "np.array(['a', 'b'])", "np.zeros(0)", "3.5",
                                  "np.zeros(web_limit + 1)", "np.array([1 + 2j])", "[[1, 2], [3]]"])
def test_other_values_are_not_drawn(code):
    code = code.replace("web_limit", str(web.PLOT_LIMIT))
    out = run("import numpy as np\n" + code)
    assert out["plot"] is None and out["traceback"] == ""
