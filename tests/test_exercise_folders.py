"""The exercise folders (nlpcore/lab/exercises/<id>/): found by folder, starters generated from
marked solutions, and every file grading needs inside the wheel that Pyodide installs."""
from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from nlpcore import lab, shaders
from nlpcore.lab import model as fw, session
from nlpcore.lab.exercises import discover

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ROOT / "py" / "nlpcore" / "lab" / "exercises"
CONTRACT_IDS = ["online-softmax", "backward", "triton", "wgsl", "break-it", "ring"]  # the seed's order, then ring

EXTRA = '''
from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, Step

ORDER = 99
HERE = Folder(__file__)


def _collect(ns):
    return ns["answer"] if isinstance(ns["answer"], int) else repr(ns["answer"])


def _judge(answer):
    if answer != 42:
        raise CheckFailed("answer is %r" % (answer,), expected="42", got=repr(answer))


def build():
    return Exercise(id="extra-one", title="An extra exercise", tier="browser", minutes=1,
                    summary="only for the test", steps=(Step(
                        id="only", kind="Predict", title="The answer", minutes=1,
                        statement=HERE.statement("only"), starter=HERE.starter("only"),
                        solution=HERE.solution("only"), required=("answer",),
                        checks=(Check("answer", "the answer", collect=_collect,
                                      judge=_judge),)),))
'''


def test_every_folder_is_an_exercise_in_page_order():
    assert [ex_id for ex_id, _ in discover()] == CONTRACT_IDS
    assert sorted(p.name for p in FOLDERS.iterdir() if (p / "__init__.py").is_file()) == sorted(CONTRACT_IDS)


def test_adding_a_folder_adds_an_exercise(tmp_path, monkeypatch):
    """A folder on the package's path is found, graded and exported; nothing else lists it."""
    package = importlib.import_module("nlpcore.lab.exercises")  # lab.exercises is the function

    folder = tmp_path / "extra-one"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(EXTRA))
    (folder / "only.md").write_text("Set $x$ to the answer.\n")
    (folder / "only_solution.py").write_text(
        "# SOLUTION BEGIN\n# answer = None  STARTER\nanswer = 42\n# SOLUTION END\n")
    monkeypatch.setattr(package, "__path__", list(package.__path__) + [str(tmp_path)])
    monkeypatch.setattr(lab, "_cache", {})
    # Grading restores the interpreter to a snapshot taken before the first grade; this test
    # changes the library on purpose, so the snapshot is retaken (and put back afterwards).
    session.library_changed()
    try:
        assert [ex_id for ex_id, _ in discover()][-1] == "extra-one"
        step = lab.exercise("extra-one").step("only")
        assert step.starter == "answer = None\n" and step.solution == "answer = 42\n"
        assert step.statement == "Set $x$ to the answer."
        assert lab.grade("extra-one", "only", step.solution)["passed"]
        assert not lab.grade("extra-one", "only", step.starter)["passed"]
        assert "extra-one" in [e["id"] for e in lab.export_site_data()["exercises"]]
    finally:
        sys.modules.pop("nlpcore.lab.exercises.extra-one", None)
        session.library_changed()       # the next grade retakes it without the extra one


def test_marked_regions_give_starter_and_solution():
    text = ("import numpy as np\n\ndef f(x):\n    # SOLUTION BEGIN\n"
            "    # raise NotImplementedError('f')  STARTER\n    # STARTER\n"
            "    return np.exp(x)\n    # SOLUTION END\n")
    assert fw.starter_from_solution(text) == ("import numpy as np\n\ndef f(x):\n"
                                              "    raise NotImplementedError('f')\n\n")
    assert fw.solution_text(text) == "import numpy as np\n\ndef f(x):\n    return np.exp(x)\n"
    with pytest.raises(ValueError, match="not closed"):
        fw.solution_text("# SOLUTION BEGIN\nx = 1\n")
    with pytest.raises(ValueError, match="without SOLUTION BEGIN"):
        fw.solution_text("x = 1\n# SOLUTION END\n")


def test_no_marker_leaks_into_what_the_page_shows():
    for ex in lab.exercises():
        for step in ex.steps:
            for text in (step.starter, step.solution):
                assert "SOLUTION BEGIN" not in text and "SOLUTION END" not in text, (ex.id, step.id)
                assert not any(line.rstrip().endswith("STARTER") for line in text.splitlines()), \
                    (ex.id, step.id)


def test_the_wheel_carries_what_grading_needs(tmp_path):
    """Install the wheel build.py makes (the one Pyodide installs) into a bare folder and load
    every exercise from it, away from the repository: no text is empty, shaders come from the
    wheel's nlpcore/_wgsl/."""
    from labtools import build

    wheel = build.build_wheel(tmp_path / "wheel")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    assert "nlpcore/_wgsl/flash_fwd.wgsl" in names
    assert "nlpcore/lab/exercises/wgsl/scratch.md" in names
    assert "nlpcore/lab/exercises/triton/kernel_starter.py" in names
    script = ("import json, nlpcore, nlpcore.shaders as s\n"
              "from nlpcore import lab\n"
              "assert nlpcore.__file__.startswith(%r), nlpcore.__file__\n"
              "print(json.dumps({'shader_dir': str(s.folders()[0]), 'data': lab.export_site_data()}))"
              % str(site))
    out = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(site), "PATH": "/usr/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["shader_dir"] == str(site / "nlpcore" / "_wgsl")
    exported = {e["id"]: e for e in got["data"]["exercises"]}
    assert list(exported) == CONTRACT_IDS
    for ex in exported.values():
        for step in ex["steps"]:
            assert step["statement"] and step["starter"], (ex["id"], step["id"])
            # a Predict step's solution is its answer: held back from the page's data
            assert step["solution_held"] == (step["kind"] == "Predict"), (ex["id"], step["id"])
            assert bool(step["solution"]) != step["solution_held"], (ex["id"], step["id"])
    assert exported["wgsl"]["steps"][1]["solution"] == shaders.text("flash_fwd.wgsl")


def test_every_folder_has_its_wrong_answers_tests_and_marker():
    """DESIGN's layout: <id>/wrong_answers.py with named rows, tests/exercises/test_<id>.py with
    the exercise's marker, registered in pyproject.toml."""
    import tomllib

    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    registered = {m.split(":")[0].strip() for m in markers}
    for ex_id, _ in discover():
        rows = importlib.import_module("nlpcore.lab.exercises.%s.wrong_answers" % ex_id).WRONG_ANSWERS
        assert rows and all(r.name and r.step for r in rows), ex_id
        test_file = ROOT / "tests" / "exercises" / ("test_%s.py" % ex_id.replace("-", "_"))
        assert test_file.is_file(), test_file
        marker = "ex_" + ex_id.replace("-", "_")
        assert marker in registered, marker
        text = test_file.read_text()
        assert re.search(r"pytestmark = marker\([\"']%s[\"']\)" % re.escape(ex_id), text), test_file


def test_the_triton_cli_grader_is_in_its_folder():
    assert (FOLDERS / "triton" / "check_triton.py").is_file()
    assert not (ROOT / "py" / "nlpcore" / "kernels" / "check_triton.py").exists()
    assert "python -m nlpcore.lab.exercises.triton.check_triton" in (ROOT / "README.md").read_text()
