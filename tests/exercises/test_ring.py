"""The ring exercise: independent correct solutions pass every step, the graders judge from
plain data after the learner's code is gone, attend exposes nothing hidden, and the library's
ring, split-K and reference kernels are refused with a reason."""
from __future__ import annotations

import numpy as np
import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

from .helpers import assert_passes, check, marker, mutate, statuses

pytestmark = marker("ring")

# -- independent correct solutions, written differently from the folder's -------------------

PREDICT = """
N, d, P, BYTES = 512, 64, 4, 4
shard_rows = N // P
kv_shard_bytes = shard_rows * 2 * d * BYTES
bytes_sent = sum(kv_shard_bytes for step in range(P) if step < P - 1)   # nothing after the last
peak_elements = shard_rows * (d + d + 2) + 2 * shard_rows * 2 * d
"""

COMPOSE = """
import numpy as np


def merge(a, b):
    # lse form: lse = logaddexp(lse_a, lse_b); o weighted by exp(lse_x - lse)
    o_a, lse_a = (np.asarray(x, dtype=np.float64) for x in a)
    o_b, lse_b = (np.asarray(x, dtype=np.float64) for x in b)
    lse = np.logaddexp(lse_a, lse_b)
    both_empty = np.isneginf(lse)
    ref = np.where(both_empty, 0.0, lse)
    w_a = np.where(np.isneginf(lse_a), 0.0, np.exp(lse_a - ref))
    w_b = np.where(np.isneginf(lse_b), 0.0, np.exp(lse_b - ref))
    return w_a[:, None] * o_a + w_b[:, None] * o_b, lse


def ring_forward(n, devices, attend):
    shards = np.array_split(np.arange(n), devices)
    outs = {}
    for step in range(devices):             # the ring's steps, devices in reverse order
        for r in reversed(range(devices)):
            part = attend(r, shards[r], shards[(r - step) % devices])
            outs[r] = merge(outs[r], part) if r in outs else part
    return (np.vstack([outs[r][0] for r in range(devices)]),
            np.hstack([outs[r][1] for r in range(devices)]))
"""

BALANCE = """
import math
import numpy as np


def shards(n, devices, layout):
    rows = np.arange(n)
    if layout == "contiguous":
        return np.array_split(rows, devices)
    if layout == "striped":
        return [rows[rows % devices == r] for r in range(devices)]
    size = math.ceil(n / (2 * devices))            # ceil-sized chunks; the last ones may be short
    chunk = [rows[i * size:(i + 1) * size] for i in range(2 * devices)]
    return [np.sort(np.concatenate([chunk[r], chunk[-1 - r]])) for r in range(devices)]


def work(n, devices, layout):
    held = shards(n, devices, layout)
    out = np.zeros((devices, devices), dtype=int)
    for r in range(devices):
        mine = np.sort(held[r])
        for s in range(devices):
            keys = held[(r - s) % devices]
            out[r, s] = sum(int(np.searchsorted(keys, i, side="right")) for i in mine)
    return out


def makespan(w):
    return float(sum(max(col) for col in np.asarray(w).T))
"""


@pytest.mark.parametrize("step,code", [("predict", PREDICT), ("compose", COMPOSE),
                                       ("balance", BALANCE)])
def test_an_independent_solution_passes(step, code):
    assert_passes("ring", step, code)


def test_zigzag_from_ceil_sized_chunks_is_accepted_and_its_work_judged_on_it():
    """n = 17 over 4 devices: 8 chunks of at most 3 rows. The folder's solution cuts with
    np.array_split; ceil-sized chunks are as valid, and work is counted on the learner's own
    layout (this failed before: shards were compared with ring.shards exactly)."""
    bal = module("ring", "balance_checks")
    ns = {}
    exec(BALANCE, ns)
    rows = [np.asarray(x).tolist() for x in ns["shards"](17, 4, "zigzag")]
    assert bal.zigzag_problem(rows, 17, 4) is None
    assert sorted(map(len, rows)) != sorted(map(len, module("ring", "balance_checks").ring.shards(17, 4, "zigzag")))
    assert (bal.work_of(rows) == ns["work"](17, 4, "zigzag")).all()


@pytest.mark.parametrize("rows,why", [
    ([[0, 1, 15, 16], [2, 3, 13, 14], [4, 5, 11, 12], [6, 7, 8, 9, 10]], "chunk"),   # 5-row peak run
    ([[0, 1, 2, 3, 16], [4, 5, 14, 15], [6, 7, 12, 13], [8, 9, 10, 11]], "zig-zag"),  # 4 > ⌈17/8⌉
    ([[0, 1, 2], [3, 4, 5], [6, 7, 8, 15, 16], [9, 10, 11, 12, 13, 14]], None),       # ceil-sized
])
def test_zigzag_validity_rule(rows, why):
    bal = module("ring", "balance_checks")
    problem = bal.zigzag_problem(rows, 17, 4)
    assert (problem is None) == (why is None), problem
    if why:
        assert why in problem


def test_ring_layouts_of_the_library_are_valid_zigzags():
    bal = module("ring", "balance_checks")
    ring = module("ring", "balance_checks").ring
    for n, p in ((16, 4), (17, 4), (23, 3), (8, 8), (13, 4), (1024, 8)):
        rows = [x.tolist() for x in ring.shards(n, p, "zigzag")]
        assert bal.zigzag_problem(rows, n, p) is None, (n, p)
        assert (bal.work_of(rows) == ring.work(n, p, True, "zigzag")).all()


def test_predict_with_p_minus_one_sends_passes_and_p_sends_fails_saying_so():
    """The simulator sends after every step but the last (P − 1 sends); the message says so."""
    ok = lab.grade("ring", "predict", "bytes_sent = 3 * 128 * 128 * 4\npeak_elements = 98560\n")
    assert statuses(ok)["bytes"] == "pass"
    wrong = lab.grade("ring", "predict", "bytes_sent = 4 * 128 * 128 * 4\npeak_elements = 98560\n")
    assert "P − 1" in check(wrong, "bytes")["message"]
    assert "196608" not in check(wrong, "bytes")["message"]         # the rule, not the answer
    assert "too high" in check(wrong, "bytes")["message"]


# -- attend holds only what the learner may see -----------------------------------------------

PEEK = """
import numpy as np

seen = {}


def merge(a, b):
    return a


def ring_forward(n, devices, attend):
    found = []
    for cell in attend.__closure__ or ():
        found.append(type(cell.cell_contents).__name__)
    found.append(sorted(k for k in attend.__globals__ if not k.startswith("__")))
    seen["found"] = found
    raise ValueError(repr(found))
"""


def test_attend_reaches_no_hidden_data():
    """It has no closure (its partials and log are sealed in its code constants: review 2, D8);
    its module globals name NumPy, the factory and its helpers, and hold no array: no q, k, v,
    mask or reference function."""
    result = lab.grade("ring", "compose", PEEK)
    message = check(result, "ring")["message"]
    door = module("ring", "door")
    public = sorted(k for k in vars(door) if not k.startswith("__"))
    assert not any(isinstance(vars(door)[k], (np.ndarray, list, dict)) for k in public), public
    assert "reference" not in public and "flash_np" not in public, public
    reached = message.split("ValueError: ", 1)[1]
    assert reached.startswith("[["), reached        # no closure cell before the globals
    assert "ndarray" not in reached and "reference" not in reached, reached
    assert "'make_attend'" in reached and "'np'" in reached, reached


def test_ring_compose_refuses_the_library_monoid():
    solution = lab.exercise("ring").step("compose").solution
    for prefix, new in (
            ("from nlpcore.kernels.split_k import merge as library_merge, Partial\n",
             "def merge(a, b):\n    return tuple(library_merge(Partial(*a), Partial(*b)))\n\n\ndef _unused(a, b):"),
            ("import nlpcore.kernels.split_k as sk\n",
             "def merge(a, b):\n    return tuple(sk.merge(sk.Partial(*a), sk.Partial(*b)))\n\n\ndef _unused(a, b):")):
        result = lab.grade("ring", "compose", prefix + mutate(solution, "def merge(a, b):", new))
        assert not result["passed"]
        failed = [c for c in result["checks"] if c["status"] == "fail"]
        assert any("refused" in c["message"] or "would compute the answer for you" in c["message"]
                   for c in failed), failed
    from nlpcore.kernels import split_k  # the library is whole again after grading
    assert split_k.merge.__module__ == "nlpcore.kernels.split_k"


def test_ring_attend_refuses_requests_off_the_ring_even_when_caught():
    solution = lab.exercise("ring").step("compose").solution
    greedy = mutate(solution, "part = attend(r, shards[r], shards[held])",
                    "part = attend(r, shards[r], np.arange(n))")
    schedule = check(lab.grade("ring", "compose", greedy), "schedule")
    assert schedule["status"] == "fail" and "the ring has brought it" in schedule["message"]
    swallowed = mutate(solution, "part = attend(r, shards[r], shards[held])",
                       "try:\n                attend(r, shards[r], np.arange(n))\n"
                       "            except ValueError:\n                pass\n"
                       "            part = attend(r, shards[r], shards[held])")
    schedule = check(lab.grade("ring", "compose", swallowed), "schedule")
    assert schedule["status"] == "fail" and "the ring has brought it" in schedule["message"]


def test_patching_the_graders_helpers_does_not_pass_a_wrong_merge():
    """Before: the ring's checks were one-phase, and patching its comparison helper passed 6
    of 7 checks with a wrong merge. Now every verdict is computed after the restore."""
    solution = lab.exercise("ring").step("compose").solution
    wrong = mutate(solution, "o = (w_a[:, None] * o_a + w_b[:, None] * o_b) / safe[:, None]",
                   "o = (o_a + o_b) / 2")
    patch = ("import importlib\n"
             "for _name in ('compose_checks', 'exercise'):\n"
             "    try:\n"
             "        _m = importlib.import_module('nlpcore.lab.exercises.ring.' + _name)\n"
             "        _m._compare = lambda *a, **k: 0.0\n"
             "        _m.assert_close = lambda *a, **k: 0.0\n"
             "    except Exception:\n"
             "        pass\n")
    result = lab.grade("ring", "compose", patch + wrong)
    failed = {c["id"] for c in result["checks"] if c["status"] == "fail"}
    assert {"split", "ring", "causal"} <= failed, result["checks"]


def test_balance_cannot_be_passed_by_patching_module_tables():
    solution = lab.exercise("ring").step("balance").solution
    wrong = mutate(solution, "w).max(axis=0).sum()", "w).sum(axis=0).max()")
    patch = ("import numpy as _np\nimport nlpcore.kernels.ring as _ring\n"
             "_ring.LAYOUTS = ()\n_ring.work = lambda *a, **k: _np.zeros((1, 1))\n")
    result = lab.grade("ring", "balance", patch + wrong)
    assert statuses(result)["makespan"] == "fail"


def test_ring_graders_survive_learner_code_raising_anything():
    for step in lab.exercise("ring").steps:
        for code in ("raise SystemError('boom')\n", "merge = 3\nring_forward = None\nshards = work = makespan = 1\n"
                     "bytes_sent = 'x'\npeak_elements = float('nan')\n"):
            result = lab.grade("ring", step.id, code)
            assert not result["passed"]
            # "not-run": a Predict answer refused as incomplete (bytes_sent = 'x' is no number)
            allowed = ("fail", "error", "pass") + (("not-run",) if result["refused"] else ())
            assert all(c["status"] in allowed for c in result["checks"]), result["checks"]


def test_ring_predict_code_states_the_graders_setting():
    """The statement is stamped from the grader's constants; the code cells type them once more."""
    grader = module("ring", "predict_checks")
    want = (grader.PREDICT_N, grader.PREDICT_D, grader.PREDICT_P, grader.PREDICT_BYTES)
    step = lab.exercise("ring").step("predict")
    for code in (step.solution, step.starter):
        ns = {}
        exec(compile(code, "predict", "exec"), ns)
        assert (ns["N"], ns["d"], ns["P"], ns["BYTES"]) == want


@pytest.mark.parametrize("code", [
    # read the answer off the ring simulator instead of predicting it
    "import numpy as np\nfrom nlpcore.kernels import ring\n_t = []\n"
    "_x = np.zeros((512, 64), np.float32)\nring.forward(_x, _x, _x, devices=4, trace=_t)\n"
    "bytes_sent = max(sum(e['bytes'] for e in _t if e['op'] == 'send' and e['from'] == r) for r in range(4))\n"
    "peak_elements = max(e['resident'] for e in _t if e['op'] == 'compute')\n",
    # or off the grader's own functions
    "from nlpcore.lab.exercises.ring import predict_checks as _g\n_m = _g.measured_ring()\n"
    "bytes_sent, peak_elements = _m['bytes_sent'], _m['peak_elements']\n",
], ids=["simulator", "grader"])
def test_ring_predict_refuses_the_simulator(code):
    result = lab.grade("ring", "predict", code)
    assert not result["passed"], result["checks"]
    assert any("refused" in c["message"] for c in result["checks"] if c["status"] != "pass")


def test_ring_split_answer_does_not_exist_while_learner_code_runs():
    """A merge that walks up the grader's frames for the answer finds none: the whole attention
    is computed only in the judge, and the partials in a frame that has returned."""
    solution = lab.exercise("ring").step("compose").solution
    walker = (
        "import sys\n\n"
        "def _peek():\n"
        "    f = sys._getframe(2)\n"
        "    while f is not None:\n"
        "        for name in ('whole', 'q', 'k', 'v'):\n"
        "            if name in f.f_locals:\n"
        "                return f.f_locals[name]\n"
        "        f = f.f_back\n"
        "    return None\n\n"
    )
    cheat = walker + mutate(solution, "def merge(a, b):",
                            "def merge(a, b):\n    w = _peek()\n    if w is not None:\n"
                            "        raise RuntimeError('found hidden data')\n    return a\n\n\n"
                            "def _unused(a, b):")
    result = lab.grade("ring", "compose", cheat)
    assert "found hidden data" not in str(result["checks"])


def test_predict_cannot_be_answered_by_the_ring_page():
    code = ("from nlpcore.web import ringviz\nt = ringviz.trace(n=512, devices=4, layout='contiguous',"
            " causal=False)\nbytes_sent = peak_elements = 1\n")
    result = lab.grade("ring", "predict", code)
    assert not result["passed"]
    assert all("refused" in c["message"] for c in result["checks"]), result["checks"]


def test_balance_shards_must_be_sorted_as_the_docstring_says():
    """shards() returns sorted index arrays; striped shards in descending order fail 'shards'
    (review of the graders, defect 11)."""
    solution = lab.exercise("ring").step("balance").solution
    old = "return [np.arange(r, n, devices) for r in range(devices)]"
    assert old in solution
    result = lab.grade("ring", "balance", solution.replace(
        old, "return [np.arange(r, n, devices)[::-1] for r in range(devices)]"))
    assert check(result, "shards")["status"] == "fail"
    assert "not sorted ascending" in check(result, "shards")["message"]


def test_an_incomplete_prediction_is_refused_and_nothing_of_it_is_graded():
    """One part filled, one still None: the grade refuses it (the page shows `refused` and
    records nothing) and grades no part, so no part can be narrowed in on before the first
    prediction; a complete answer is graded as usual."""
    half = lab.grade("ring", "predict", "bytes_sent = 1\npeak_elements = None\n")
    assert not half["passed"]
    assert "incomplete" in half["refused"] and "peak_elements" in half["refused"], half["refused"]
    assert set(statuses(half).values()) == {"not-run"}, half["checks"]
    assert not any("low" in c["message"] or "expected" in c for c in half["checks"]), half["checks"]
    whole = lab.grade("ring", "predict", "bytes_sent = 1\npeak_elements = 1\n")
    assert whole["refused"] is None and statuses(whole)["bytes"] == "fail"
    refused_module = lab.grade("ring", "predict", "import nlpcore.kernels.ring as r\nbytes_sent = peak_elements = 1\n")
    assert refused_module["refused"] is None      # refused for what it calls, not "incomplete"
