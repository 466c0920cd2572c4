"""Honest code that the grader once failed (review r-grade4, F0/F1/F4): a dataclass with
annotated fields (learner code compiled with the grader's ``from __future__ import annotations``),
a warning's once-registry written into a NumPy or grader module (``np.mean`` of an empty array,
``warnings.warn(..., stacklevel=2)``), a submodule import binding a name on its loaded parent
(``import json.tool``). Each is the reference solution of online-softmax/compose plus the
pattern, graded by ``lab.grade`` in CPython 3.11 and in Python 3.8 + NumPy 1.17."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY38 = ROOT / ".venv38" / "bin" / "python"
INTERPRETERS = [pytest.param(sys.executable, id="py3")] + [
    pytest.param(str(PY38), id="py38", marks=pytest.mark.skipif(
        not PY38.exists(), reason="no Python 3.8 + NumPy 1.17 venv (.venv38)"))]

PATTERNS = {
    "dataclass": "from dataclasses import dataclass\n@dataclass\nclass Tile:\n    lo: int\n    hi: int\n",
    "empty mean": "import numpy as np\n_x = np.mean(np.array([]))\n",
    "warn with stacklevel": "import warnings\nwarnings.warn('a note', UserWarning, stacklevel=2)\n",
    "submodule import": "import json.tool\n",
}

SCRIPT = """
import json, sys
from nlpcore import lab
patterns = json.loads(sys.argv[1])
ref = lab.exercise("online-softmax").step("compose").solution
out = {}
for name, head in patterns.items():
    g = lab.grade("online-softmax", "compose", head + ref)
    out[name] = {"passed": g["passed"], "restored": g["restored"],
                 "failed": [c["message"][:200] for c in g["checks"] if c["status"] != "pass"]}
print(json.dumps(out))
"""

_results: dict = {}


def _graded(python: str) -> dict:
    if python not in _results:
        proc = subprocess.run([python, "-c", SCRIPT, json.dumps(PATTERNS)], capture_output=True,
                              text=True, timeout=600, cwd=str(ROOT),
                              env={"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        _results[python] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _results[python]


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_honest_code_passes(python, name):
    got = _graded(python)[name]
    assert got["passed"] and got["restored"] == [], got
