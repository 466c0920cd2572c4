"""Graders of the auto-graded exercises (nlpcore.lab): for every exercise and step, the reference
solution passes, the starter fails with a helpful message, and plausible wrong answers fail."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import time

import numpy as np
import pytest

from nlpcore import lab
from nlpcore.lab import judging, model, session

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONTRACT_IDS = {"online-softmax", "backward", "triton", "wgsl", "break-it", "ring"}
# The exercises whose checks all run in Python; `wgsl` (checks run on a GPU) has its own tests
# (tests/test_ex_wgsl.py runs its GPU jobs through wgpu-py).
PYTHON_GRADED = ("online-softmax", "backward", "break-it", "triton", "ring")
STEPS = [(ex_id, s.id) for ex_id in PYTHON_GRADED for s in lab.exercise(ex_id).steps]


def graded(result):
    return [c for c in result["checks"] if c["status"] != "local"]


def test_exercise_ids_are_the_contract_ones():
    ids = [ex.id for ex in lab.exercises()]
    assert {"online-softmax", "backward", "break-it", "triton", "ring"} <= set(ids)
    assert set(ids) <= CONTRACT_IDS


@pytest.mark.parametrize("ex_id,step_id", STEPS)
def test_solution_passes_every_check(ex_id, step_id):
    step = lab.exercise(ex_id).step(step_id)
    result = lab.grade(ex_id, step_id, step.solution)
    failures = [c for c in graded(result) if c["status"] != "pass"]
    assert not failures, json.dumps(failures, indent=1)
    assert result["passed"]
    assert len(graded(result)) >= 1
    assert result["restored"] == []    # honest code leaves nothing to undo (the page keeps its worker)


def assert_helpful(check: dict, step):
    """A failure tells the learner what is missing: either the learner's own exception with the
    line of their code, or what was expected and what came instead -- and it names a function,
    a quantity or a case of the step (not a generic 'wrong')."""
    message = check["message"]
    raised = re.search(r"your code raised \w+: .+ \(line \d+ of your code\)", message)
    compared = "expected" in check and "got" in check
    assert raised or compared, check
    names = set(step.required) | {"o", "lse", "dq", "dk", "dv", "m", "l", "softmax", "prediction",
                                  check["id"].replace("kills-", "")}
    named = any(re.search(r"\b%s\b" % re.escape(n), message) for n in names)
    assert named or re.search(r"N[qk]?=\d+|\(\d+, \d+\)", message), check


@pytest.mark.parametrize("ex_id,step_id", STEPS)
def test_starter_fails_with_a_message(ex_id, step_id):
    step = lab.exercise(ex_id).step(step_id)
    result = lab.grade(ex_id, step_id, step.starter)
    assert not result["passed"]
    failed = [c for c in graded(result) if c["status"] != "pass"]
    assert failed
    for c in failed:
        assert_helpful(c, step)


@pytest.mark.parametrize("ex_id,step_id", STEPS)
def test_grading_a_step_is_fast(ex_id, step_id):
    """CPython bound (CPU time, so other processes do not make it flaky); the page measures the
    wall time in Pyodide against 1 s (tests/browser/test_exercises.py)."""
    step = lab.exercise(ex_id).step(step_id)
    lab.grade(ex_id, step_id, step.solution)  # warm imports
    start = time.process_time()
    lab.grade(ex_id, step_id, step.solution)
    assert time.process_time() - start < 1.0


def mutate(code: str, old, new) -> str:
    """``code`` with ``old`` replaced by ``new`` (or each of a tuple of olds by its new); each
    must occur exactly once."""
    if isinstance(old, tuple):
        for o, n in zip(old, new):
            code = mutate(code, o, n)
        return code
    assert code.count(old) == 1, "the wrong answer must change exactly one place: %r" % old
    return code.replace(old, new)


def before(line: str, inserted: str):
    """(old, new) that insert ``inserted`` just before ``line`` (an early return, an import)."""
    return line, inserted + line


ATTENTION_START = "    n_q, d = q.shape\n"     # the first line of compose's / harden's body
ALL = None   # must_fail = ALL: every graded check of the step fails

# Sneaky submissions: each must fail the checks named (None = every graded check).
FULL_SCORES = """    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True)
    return p @ v / l, (m + np.log(l))[:, 0]
"""
QUERY_CHUNKED = """    o, lse = np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0])
    for q0 in range(0, q.shape[0], block_q):                # one query tile against ALL keys
        s = q[q0:q0 + block_q] @ k.T / np.sqrt(q.shape[1])
        if causal:
            rows = np.arange(q0, min(q0 + block_q, q.shape[0]))[:, None]
            s = np.where(np.arange(k.shape[0])[None, :] <= rows, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=1, keepdims=True)
        o[q0:q0 + block_q] = p @ v / l
        lse[q0:q0 + block_q] = (m + np.log(l))[:, 0]
    return o, lse
"""
FRAME_WALK = """    import sys
    frame = sys._getframe(1)
    while frame is not None:                                # read the grader's expected values
        found = frame.f_locals
        if "want_o" in found and "want_lse" in found:
            return found["want_o"], found["want_lse"]
        frame = frame.f_back
    return np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0])
"""
PATCH_REFERENCE = """import nlpcore.kernels.reference as _ref
_ref.forward = lambda q, k, v, causal=False, mask=None, scale=None: (
    np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0]))   # the oracle now agrees with zeros
"""
PATCH_GRADER = """import importlib
from nlpcore.lab import judging as _fw
_ex = importlib.import_module("nlpcore.lab.exercises.online-softmax.exercise")
_fw.assert_close = _ex.assert_close = lambda *a, **k: 0.0      # every comparison passes
_fw.assert_tiled = _ex.assert_tiled = lambda *a, **k: "fine"
np.allclose = lambda *a, **k: True
"""
DENSE_BACKWARD = """    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled
    allowed = np.isfinite(lse)[:, None] & np.ones(s.shape, bool)
    if mask is not None:
        allowed = allowed & np.broadcast_to(mask, s.shape)
    if causal:
        allowed = allowed & (np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None])
    p = np.where(allowed, np.exp(np.where(allowed, s, 0) - np.where(np.isfinite(lse), lse, 0)[:, None]), 0)
    dp = do @ v.T
    ds = p * (dp - (do * o).sum(axis=1)[:, None])
    scale = 1 / np.sqrt(q.shape[1])
    return scale * ds @ k, scale * ds.T @ q, p.T @ do
"""


# (exercise, step, old text in the solution, replacement, check ids that must fail)
WRONG_ANSWERS = [
    ("online-softmax", "predict", "flash = 2 * N * d + Tc * 3 * N * d", "flash = N * N * d * d / M",
     {"flash"}),
    ("online-softmax", "predict", "standard = 4 * N * N + 4 * N * d", "standard = N * N",
     {"standard"}),
    ("online-softmax", "scratch", "return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)",
     "return m, l_a + l_b", {"pieces", "softmax"}),  # still a monoid: only "pieces" sees it
    ("online-softmax", "scratch", "    return np.where(np.isfinite(m), m, 0.0)",
     "    return m", {"identity", "softmax"}),
    ("online-softmax", "compose", "acc = alpha[:, None] * acc + p @ v[k0:k1]",
     "acc = acc + p @ v[k0:k1]", {"ragged", "causal"}),  # o only: lse is checked on its own
    ("online-softmax", "compose", "s = np.where(cols <= rows, s, -np.inf)",
     "s = np.where(cols < rows, s, -np.inf)", {"causal"}),
    ("online-softmax", "probe", "    fig = io_model.figure2()\n    return {",
     "    return {'slope_n': 2.0, 'slope_m': -1.0, 'slope_d': 2.0, 'figure2_ratio': 40.3 / 4.4}\n"
     "    return {", {"slopes", "figure2", "measures"}),
    ("online-softmax", "probe", '"measured_ratio": h200["baseline"]["hbm_gb"] / h200["triton"]["hbm_gb"],',
     '"measured_ratio": 40.3 / 4.4,', {"h200", "measures"}),
    ("online-softmax", "probe", '"baseline_ratio": fig["baseline_standard_gb"] / fig["baseline_flash_gb"],',
     '"baseline_ratio": fig["standard_gb"] / fig["flash_gb"],', {"figure2", "measures"}),
    ("backward", "harden", "return o.astype(q.dtype), lse", "return o, lse", {"float16"}),
    ("backward", "harden", "shift = np.where(np.isfinite(m_new), m_new, 0).astype(acc_dtype)",
     "shift = m_new", {"empty-rows"}),
    ("backward", "harden", "k1 = min(k0 + block_k, n_k)", "k1 = k0 + block_k - 1",
     {"plain", "ragged", "padding"}),
    ("backward", "scratch", "ds = p * (dp - D[q0:q1, None])", "ds = p * dp",
     {"reference", "masks", "empty-rows", "finite-diff"}),
    ("backward", "scratch", "dq[q0:q1] += scale * ds @ k[k0:k1]", "dq[q0:q1] += ds @ k[k0:k1]",
     {"reference", "masks", "empty-rows", "finite-diff"}),
    ("break-it", "predict", '"global-max": [],', '"global-max": ["test_rows_sum_to_one"],',
     {"matrix"}),
    ("break-it", "break", "    x[0, :8] = -np.inf\n", "", {"kills-unguarded-inf"}),
    ("break-it", "break", "def test_ragged_tail(softmax):                     # dropped-tail\n",
     "def test_ragged_tail(softmax):\n    assert softmax(np.zeros((1, 4)), block=2).sum() == 2\n",
     {"clean"}),
    ("triton", "port", "p = np.exp2(s - m_new[:, None])", "p = np.exp(s - m_new[:, None])",
     {"ragged", "causal", "wide"}),
    ("triton", "port", "lse = (m_i + np.log2(l_i)) * np.float32(LN2)",
     "lse = m_i + np.log(l_i)", {"ragged", "causal", "wide"}),
    ("triton", "port", "full_end = min(m0, n_k) // BLOCK_N * BLOCK_N",
     "full_end = min(m0 + BLOCK_M, n_k) // BLOCK_N * BLOCK_N", {"key-range", "causal"}),
    ("triton", "compose", "        f /= 2\n", "", {"flops", "tflops"} - {"tflops"}),
    ("triton", "compose", "return (BLOCK_M * d + stages * 2 * BLOCK_N * d) * dtype_bytes",
     "return (BLOCK_M * d + 2 * BLOCK_N * d) * dtype_bytes", {"smem", "block-n"}),
    ("triton", "compose", "t_unfused = max(work / peak_flops, unfused_bytes / hbm_bytes_per_s)",
     "t_unfused = unfused_bytes / hbm_bytes_per_s", {"speedup"}),
    ("triton", "compose", "    return best\n", "    return block_n // 2\n", {"block-n"}),
    ("ring", "predict", "bytes_sent = (P - 1) * n", "bytes_sent = P * n", {"bytes"}),
    ("ring", "predict", "2 * n + 2 * n * (d + d)", "2 * n + n * (d + d)", {"memory"}),
    ("ring", "compose", "held = (r - step) % devices", "held = (r + step) % devices",
     {"schedule", "ring", "causal"}),
    ("ring", "compose", "shift = np.where(np.isfinite(m), m, 0.0)", "shift = m", {"identity", "causal"}),
    ("ring", "compose", "lse = np.where(l > 0, shift + np.log(safe), -np.inf)",
     "lse = np.where(l > 0, np.log(safe), -np.inf)", {"split", "ring", "causal"}),
    ("ring", "compose", "o = (w_a[:, None] * o_a + w_b[:, None] * o_b) / safe[:, None]",
     "o = (o_a + o_b) / 2", {"identity", "split", "ring", "causal"}),
    ("ring", "balance", "chunks[2 * devices - 1 - r]", "chunks[devices + r]", {"shards", "work", "balance"}),
    ("ring", "balance", "int((keys[None, :] <= rows[r][:, None]).sum())", "int(keys.size * rows[r].size)", {"work", "balance"}),
    ("ring", "balance", "w).max(axis=0).sum()", "w).sum(axis=0).max()", {"makespan"}),
    # -- steps that teach a kernel refuse the library's kernels --------------------------------
    ("online-softmax", "compose", *before(ATTENTION_START, "    from nlpcore.kernels import reference\n"
                                          "    return reference.forward(q, k, v, causal=causal)\n"), ALL),
    ("online-softmax", "compose", *before(ATTENTION_START, "    from nlpcore.kernels import flash_np\n"
                                          "    return flash_np.forward(q, k, v, causal=causal)\n"), ALL),
    ("online-softmax", "scratch", "def from_block(x):",
     "from nlpcore.kernels.online_softmax import from_block\n\n\ndef _unused(x):",
     {"from-block", "pieces", "softmax"}),                      # its own combine still passes
    ("online-softmax", "predict", "standard = 4 * N * N + 4 * N * d",
     "from nlpcore.kernels import io_model\nstandard = io_model.standard_accesses(N, N, d)", ALL),
    ("backward", "harden", *before(ATTENTION_START, "    from nlpcore.kernels.reference import forward as f\n"
                                   "    return f(q, k, v, causal=causal, mask=mask)\n"), ALL),
    ("backward", "scratch", *before("    n_q, d = q.shape\n", "    from nlpcore.kernels import reference\n"
                                    "    return reference.backward(q, k, v, o, lse, do, causal=causal, mask=mask)\n"), ALL),
    ("break-it", "predict", "prediction = {",
     "import importlib\n_mu = importlib.import_module('nlpcore.lab.exercises.break-it.mutants')\n"
     "_live = _mu.killers(_mu.kill_matrix(_mu.load_suite(_mu.WEAK_SUITE_SOURCE)))\nprediction = {", ALL),
    ("triton", "port", "    n_q, n_k = q.shape[0], k.shape[0]\n",
     "    from nlpcore.kernels import reference\n    reference.forward(q, k, v)\n"
     "    n_q, n_k = q.shape[0], k.shape[0]\n", {"ragged", "causal", "wide"}),
    ("triton", "compose", "def flops(", "import importlib\n_ex = importlib.import_module("
     "'nlpcore.lab.exercises.triton.exercise')\n\n\ndef flops(*a, **k):\n    return _ex._want_flops(*a, **k)\n\n\ndef _mine(",
     {"flops"}),
    # -- tiled steps fail when memory grows with Nq·Nk ---------------------------------------
    ("online-softmax", "compose", *before(ATTENTION_START, FULL_SCORES), {"tiled"}),
    ("online-softmax", "compose", *before(ATTENTION_START, QUERY_CHUNKED), {"tiled"}),
    ("backward", "harden", *before(ATTENTION_START, FULL_SCORES.replace(
        "return p @ v / l,", "if mask is not None:\n        pass\n    return p @ v / l,")), {"tiled"}),
    ("backward", "scratch", *before("    n_q, d = q.shape\n", DENSE_BACKWARD), {"tiled"}),
    ("online-softmax", "scratch", "    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))\n",
     "    m = x.max(axis=-1, keepdims=True)                       # the whole row at once\n"
     "    e = np.exp(x - np.where(np.isfinite(m), m, 0))\n"
     "    s = e.sum(axis=-1, keepdims=True)\n"
     "    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)\n"
     "    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))\n", {"softmax"}),
    # -- causal conventions, large logits, float16 accumulation --------------------------------
    ("online-softmax", "compose", "s = np.where(cols <= rows, s, -np.inf)",
     "s = np.where(cols <= rows + (n_k - n_q), s, -np.inf)", {"causal"}),   # bottom-right
    ("online-softmax", "compose",
     ("            shift = np.where(np.isfinite(m_new), m_new, 0.0)\n", "            p = np.exp(s - shift[:, None])",
      "            alpha = np.exp(m - shift) "),
     ("", "            p = np.exp(s)", "            alpha = np.ones_like(m)  # "), {"large"}),  # no max shift
    ("backward", "harden",
     ("acc_dtype = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype", "return o.astype(q.dtype), lse"),
     ("acc_dtype = q.dtype", "return o.astype(q.dtype), lse.astype(np.float32)"), {"float16"}),
    # -- expected values are out of reach; patches do not outlive the learner's phase ---------
    ("online-softmax", "compose", *before(ATTENTION_START, FRAME_WALK), {"ragged", "causal", "large", "lse"}),
    ("online-softmax", "compose", ("def attention(", ATTENTION_START),
     (PATCH_REFERENCE + "\n\ndef attention(", ATTENTION_START + "    return np.zeros((n_q, v.shape[1])), np.zeros(n_q)\n"),
     ALL),
    ("online-softmax", "compose", ("def attention(", ATTENTION_START),
     (PATCH_GRADER + "\n\ndef attention(", ATTENTION_START + "    return np.zeros((n_q, v.shape[1])), np.zeros(n_q)\n"),
     ALL),
]


@pytest.mark.parametrize("ex_id,step_id,old,new,must_fail", WRONG_ANSWERS,
                         ids=["%s/%s/%d" % (w[0], w[1], i) for i, w in enumerate(WRONG_ANSWERS)])
def test_plausible_wrong_answer_fails(ex_id, step_id, old, new, must_fail):
    step = lab.exercise(ex_id).step(step_id)
    result = lab.grade(ex_id, step_id, mutate(step.solution, old, new))
    assert not result["passed"]
    status = {c["id"]: c["status"] for c in result["checks"] if c["status"] != "local"}
    must_fail = set(status) if must_fail is None else set(must_fail)
    assert {c for c in must_fail if status[c] != "pass"} == must_fail, status


def test_every_step_has_statement_hints_and_checks():
    for ex in map(lab.exercise, PYTHON_GRADED):
        assert ex.tier in ("browser", "gpu", "systems · wgsl") and ex.minutes > 0 and ex.sources
        for s in ex.steps:
            assert s.kind in model.LADDER_KINDS
            assert len(s.statement) > 100 and len(s.hints) >= 2 and s.checks
            compile(s.starter, "starter", "exec")
            compile(s.solution, "solution", "exec")


def test_failure_reports_expected_got_tolerance_max_delta_and_shapes():
    step = lab.exercise("online-softmax").step("compose")
    wrong = mutate(step.solution, "acc = alpha[:, None] * acc + p @ v[k0:k1]",
                   "acc = acc + p @ v[k0:k1]")
    check = lab.grade("online-softmax", "compose", wrong)["checks"][0]
    assert check["status"] == "fail"
    for key in ("expected", "got", "tolerance", "max_abs_err", "shapes", "where"):
        assert key in check, key
    assert check["shapes"]["q"] == [37, 16] and check["max_abs_err"] > 1e-3
    assert "blocks 8×16" in check["message"]


def test_learner_code_errors_are_stated():
    r = lab.grade("online-softmax", "compose", "def attention(:\n")
    assert {c["status"] for c in r["checks"]} == {"error"}
    assert "does not compile" in r["checks"][0]["message"]
    r = lab.grade("online-softmax", "compose", "x = 1\n")
    assert "must define attention" in r["checks"][0]["message"]
    r = lab.grade("online-softmax", "compose", "raise KeyError('boom')\n")
    assert "KeyError" in r["checks"][0]["message"] and "line 1" in r["checks"][0]["message"]


def test_fresh_namespace_per_grade():
    """Names defined by one run do not exist in the next."""
    assert lab.grade("online-softmax", "predict", "standard = 1.2e6\nflash = 3e5\n")["passed"]
    r = lab.grade("online-softmax", "predict", "flash = 3e5\n")
    assert r["checks"][0]["status"] == "error"
    assert "missing: standard" in r["checks"][0]["message"]


def test_assert_close_rules():
    shapes = {"x": [3]}
    assert judging.assert_close("x", [1.0, -np.inf, 2.0], [1.0, -np.inf, 2.0], shapes=shapes) == 0.0
    with pytest.raises(model.CheckFailed) as info:
        judging.assert_close("x", [1.0, np.nan, 2.0], [1.0, 0.0, 2.0], shapes=shapes)
    assert "NaN" in info.value.message
    with pytest.raises(model.CheckFailed) as info:
        judging.assert_close("x", [1.0, 0.0, 2.0], [1.0, -np.inf, 2.0], shapes=shapes)
    assert "infinities" in info.value.message
    with pytest.raises(model.CheckFailed) as info:
        judging.assert_close("x", [1.0, 0.0], [1.0, -np.inf, 2.0], shapes=shapes)
    assert "shape" in info.value.message


def test_js_check_protocol_pending_then_verify():
    """A check with runner="webgpu" is returned pending with its job; verify() finishes it."""
    def prepare(ns):
        return {"double": ns["x"]}

    def verify(ns, job, outputs):
        got = np.frombuffer(outputs["y"], dtype="<f4")
        if not np.allclose(got, 2 * job["double"]):
            raise model.CheckFailed("wrong", expected=str(2 * job["double"]), got=str(got))
        return "ok"

    ex = model.Exercise(id="demo", title="t", tier="browser", minutes=1, summary="s", steps=(
        model.Step(id="s", kind="Scratch", title="t", minutes=1, statement="s", starter="",
                solution="", required=("x",), checks=(
                    model.Check("gpu", "runs on the GPU", runner="webgpu", prepare=prepare,
                             verify=verify),)),))
    r = session.grade(ex, "s", "x = 3.0")
    (pending,) = r["checks"]
    assert pending["status"] == "pending" and pending["runner"] == "webgpu"
    assert pending["job"] == {"double": 3.0} and not r["passed"]
    good = session.verify_js(ex, "s", "gpu", "x = 3.0", pending["job"],
                        {"y": np.float32([6.0]).tobytes()})
    bad = session.verify_js(ex, "s", "gpu", "x = 3.0", pending["job"],
                       {"y": np.float32([5.0]).tobytes()})
    assert good["status"] == "pass" and bad["status"] == "fail" and bad["expected"] == "6.0"


def test_triton_local_checks_are_not_graded_and_show_commands():
    ex = lab.exercise("triton")
    local = []
    for step in ("port", "compose"):
        r = lab.grade("triton", step, ex.step(step).solution)
        local += [c for c in r["checks"] if c["status"] == "local"]
        assert r["passed"]
    assert len(local) == 3 and all("check_triton" in c["command"] or "bench" in c["command"]
                                   for c in local)


def test_export_site_data_is_plain_json():
    data = lab.export_site_data()
    text = json.dumps(data, allow_nan=False)
    back = json.loads(text)
    ids = [e["id"] for e in back["exercises"]]
    assert ids[:5] == ["online-softmax", "backward", "triton", "wgsl", "break-it"]  # the seed's order
    for e in back["exercises"]:
        assert e["ladder"] and e["steps"] and e["minutes"]
        for s in e["steps"]:
            assert s["starter"] and s["solution"] and s["checks"]
    assert [s["number"] for s in back["lab"]] == list(range(1, len(back["lab"]) + 1))


def test_web_door_grades_and_refuses_other_names():
    from nlpcore.web import call
    step = lab.exercise("backward").step("harden")
    r = call("exercises.grade", {"exercise": "backward", "step": "harden", "code": step.solution})
    assert r["passed"]
    with pytest.raises(ValueError):
        call("exercises.load_learner", {"code": "x = 1"})
    with pytest.raises(TypeError, match="code"):
        call("exercises.grade", {"exercise": "backward", "step": "harden", "code": 3})
    with pytest.raises(ValueError, match="exercise must be one of"):
        call("exercises.grade", {"exercise": "nope", "step": "harden", "code": ""})


PY38 = ROOT / ".venv38" / "bin" / "python"
PY38_SMOKE = r"""
import sys
from nlpcore import lab
for ex in map(lab.exercise, %r):
    for s in ex.steps:
        r = lab.grade(ex.id, s.id, s.solution)
        assert r["passed"], (ex.id, s.id, [c for c in r["checks"] if c["status"] != "pass"])
        assert not lab.grade(ex.id, s.id, s.starter)["passed"], (ex.id, s.id)
# isolation on 3.8: a patched NumPy/grader does not reach the next grade; SystemExit fails
r = lab.grade("online-softmax", "predict", "import numpy as np\nfrom nlpcore.lab import judging as fw\n"
              "np.allclose = lambda *a, **k: True\nfw.assert_close = lambda *a, **k: 0.0\n"
              "standard = 1.2e6\nflash = 3e5\nraise SystemExit(0)\n")
assert r["restored"] and all("SystemExit" in c["message"] for c in r["checks"]), r
compose = lab.exercise("online-softmax").step("compose").solution
wrong = compose.replace("acc = alpha[:, None] * acc + p @ v[k0:k1]", "acc = acc + p @ v[k0:k1]")
assert not lab.grade("online-softmax", "compose", wrong)["passed"]
untiled = compose.replace("    n_q, d = q.shape\n", %r + "    n_q, d = q.shape\n", 1)
tiled = [c for c in lab.grade("online-softmax", "compose", untiled)["checks"] if c["id"] == "tiled"][0]
assert tiled["status"] == "fail" and "MiB" in tiled["message"], tiled   # tracemalloc sees NumPy 1.17
print("ok")
"""


@pytest.mark.skipif(not PY38.exists(), reason="no Python 3.8 + NumPy 1.17 venv (.venv38)")
def test_graders_run_on_python38_numpy117():
    """The graders run in Pyodide 0.17; .venv38 has the same Python and NumPy versions."""
    smoke = PY38_SMOKE % (PYTHON_GRADED, FULL_SCORES.replace("    if causal:", "    if False:"))
    out = subprocess.run([str(PY38), "-W", "error::SyntaxWarning", "-c", smoke],
                         cwd=str(ROOT), env={"PYTHONPATH": str(ROOT / "py")},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


RING_CHEATS = [
    # merge through the library's split-K monoid instead of writing it
    ("from nlpcore.kernels.split_k import merge as library_merge, Partial\n",
     "def merge(a, b):", "def merge(a, b):\n    return tuple(library_merge(Partial(*a), Partial(*b)))\n\n\ndef _unused(a, b):"),
    # the same through the module, called at grading time
    ("import nlpcore.kernels.split_k as sk\n",
     "def merge(a, b):", "def merge(a, b):\n    return tuple(sk.merge(sk.Partial(*a), sk.Partial(*b)))\n\n\ndef _unused(a, b):"),
]


@pytest.mark.parametrize("prefix,old,new", RING_CHEATS)
def test_ring_compose_refuses_the_library_monoid_and_says_why(prefix, old, new):
    solution = lab.exercise("ring").step("compose").solution
    result = lab.grade("ring", "compose", prefix + mutate(solution, old, new))
    assert not result["passed"]
    status = {c["id"]: c for c in result["checks"]}
    assert status["own"]["status"] == "fail" or status["split"]["status"] == "fail"
    failed = [c for c in result["checks"] if c["status"] == "fail"]
    assert any("would compute the answer for you" in c["message"] for c in failed), failed
    from nlpcore.kernels import split_k  # the library is whole again after grading
    assert split_k.merge.__module__ == "nlpcore.kernels.split_k"


def test_ring_attend_refuses_requests_off_the_ring():
    solution = lab.exercise("ring").step("compose").solution
    greedy = mutate(solution, "part = attend(r, shards[r], shards[held])",
                    "part = attend(r, shards[r], np.arange(n))")
    result = lab.grade("ring", "compose", greedy)
    schedule = next(c for c in result["checks"] if c["id"] == "schedule")
    assert schedule["status"] == "fail" and "the ring has brought it" in schedule["message"]


def test_ring_graders_survive_learner_code_raising_anything():
    for step in lab.exercise("ring").steps:
        for code in ("raise SystemError('boom')\n", "merge = 3\nring_forward = None\nshards = work = makespan = 1\n"
                     "bytes_sent = 'x'\npeak_elements = float('nan')\n"):
            result = lab.grade("ring", step.id, code)
            assert not result["passed"]
            assert all(c["status"] in ("fail", "error", "pass") for c in result["checks"])


def test_ring_predict_code_states_the_graders_setting():
    """The statement is stamped from the grader's constants; the code cells type them once more."""
    from nlpcore.lab.exercises import module

    grader = module("ring", "exercise")
    want = (grader.PREDICT_N, grader.PREDICT_D, grader.PREDICT_P, grader.PREDICT_BYTES)
    step = lab.exercise("ring").step("predict")
    for code in (step.solution, step.starter):
        ns = {}
        exec(compile(code, "predict", "exec"), ns)
        assert (ns["N"], ns["d"], ns["P"], ns["BYTES"]) == want


RING_PREDICT_CHEATS = [
    # read the answer off the ring simulator instead of predicting it
    "import numpy as np\nfrom nlpcore.kernels import ring\n_t = []\n"
    "_x = np.zeros((512, 64), np.float32)\nring.forward(_x, _x, _x, devices=4, trace=_t)\n"
    "bytes_sent = max(sum(e['bytes'] for e in _t if e['op'] == 'send' and e['from'] == r) for r in range(4))\n"
    "peak_elements = max(e['resident'] for e in _t if e['op'] == 'compute')\n",
    # or off the grader's own cache
    "from nlpcore.lab.exercises.ring import exercise as _g\n_m = _g.measured_ring()\n"
    "bytes_sent, peak_elements = _m['bytes_sent'], _m['peak_elements']\n",
]


@pytest.mark.parametrize("code", RING_PREDICT_CHEATS, ids=["simulator", "grader-cache"])
def test_ring_predict_refuses_the_simulator(code):
    result = lab.grade("ring", "predict", code)
    assert not result["passed"], result["checks"]
    assert any("refused" in c["message"] for c in result["checks"] if c["status"] != "pass"), result["checks"]


def test_ring_split_answer_does_not_exist_while_learner_code_runs():
    # A merge that walks up the grader's frames for the answer (a local named `whole`, as the
    # check once had) and returns nonsense when it finds none. With the answer computed only
    # after the learner's merges returned (two phases), there is nothing to find: split fails.
    solution = lab.exercise("ring").step("compose").solution
    walker = (
        "import sys\n\n"
        "def _peek():\n"
        "    f = sys._getframe(2)\n"
        "    while f is not None:\n"
        "        w = f.f_locals.get('whole')\n"
        "        if w is not None:\n"
        "            return w\n"
        "        f = f.f_back\n"
        "    return None\n\n"
    )
    cheat = walker + mutate(solution, "def merge(a, b):",
                            "def merge(a, b):\n    w = _peek()\n    return w if w is not None else a\n\n\n"
                            "def _unused(a, b):")
    result = lab.grade("ring", "compose", cheat)
    split = next(c for c in result["checks"] if c["id"] == "split")
    assert split["status"] == "fail", split
