"""The online-softmax exercise: independent correct solutions pass every step; the checks
check what each step teaches (streaming with the folded state, a working set bounded by the
tiles); a failure names a known slip and carries a per-case table with shapes and seeds."""
from __future__ import annotations

import numpy as np
import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

from .helpers import assert_passes, check, marker, mutate

pytestmark = marker("online-softmax")

# -- independent correct solutions, written differently from the folder's -------------------

PREDICT = """
N, d, M = 512, 64, 98304
# standard: Q, K read; S written; S read, P written; P, V read; O written
standard = sum([N * d, N * d, N * N, N * N, N * N, N * N, N * d, N * d])
block_cols = -(-M // (4 * d))
key_tiles = -(-N // block_cols)
flash = N * d * 2 + key_tiles * (N * d + 2 * N * d)
"""

SCRATCH = """
import numpy as np


def from_block(x):
    x = np.array(x, dtype=np.float64)
    if x.shape[-1] == 0:
        return np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1])
    m = np.max(x, axis=-1)
    safe = np.nan_to_num(m, neginf=0.0)
    return m, np.sum(np.exp(x - safe[..., None]), axis=-1)


def combine(a, b):
    # via log-sum-exp: lse = m + log l; merge lses, keep m as the max
    m = np.fmax(a[0], b[0])
    with np.errstate(divide="ignore"):
        lse = np.logaddexp(a[0] + np.log(a[1]), b[0] + np.log(b[1]))
    l = np.where(np.isneginf(m), 0.0, np.exp(lse - np.where(np.isneginf(m), 0.0, m)))
    return m, l


def online_softmax(x, block_size):
    x = np.array(x, dtype=np.float64)
    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))
    start = 0
    while start < x.shape[-1]:
        state = combine(state, from_block(x[..., start:start + block_size]))
        start += block_size
    m, l = state
    out = np.zeros_like(x)
    rows = l > 0
    out[rows] = np.exp(x[rows] - m[rows][:, None]) / l[rows][:, None]
    return out
"""

# Algorithm 1's loop order: key tiles outside, query tiles inside, (m, l) of every row kept
COMPOSE = """
import numpy as np


def attention(q, k, v, block_q, block_k, causal=False):
    n_q, d = q.shape
    n_k, dv = v.shape
    m = np.full(n_q, -np.inf)
    l = np.zeros(n_q)
    acc = np.zeros((n_q, dv))
    for k0 in range(0, n_k, block_k):
        kt, vt = k[k0:k0 + block_k], v[k0:k0 + block_k]
        for q0 in range(0, n_q, block_q):
            rows = slice(q0, q0 + block_q)
            s = (q[rows] @ kt.T) / np.sqrt(d)
            if causal:
                i = np.arange(q0, min(q0 + block_q, n_q))[:, None]
                j = np.arange(k0, k0 + kt.shape[0])[None, :]
                s[j > i] = -np.inf
            tile_max = s.max(axis=1)
            new = np.maximum(m[rows], tile_max)
            base = np.where(new == -np.inf, 0.0, new)
            decay = np.exp(m[rows] - base)
            e = np.exp(s - base[:, None])
            l[rows] = l[rows] * decay + e.sum(axis=1)
            acc[rows] = acc[rows] * decay[:, None] + e @ vt
            m[rows] = new
    seen = l > 0
    o = np.zeros((n_q, dv))
    o[seen] = acc[seen] / l[seen][:, None]
    lse = np.full(n_q, -np.inf)
    lse[seen] = m[seen] + np.log(l[seen])
    return o, lse
"""

PROBE = """
import numpy as np


def _exponent(xs, ys):
    a = np.vstack([np.log(xs), np.ones(len(xs))]).T
    return float(np.linalg.lstsq(a, np.log(ys), rcond=None)[0][0])


def probe(io_model, h200):
    f = io_model.flash_accesses
    fig = io_model.figure2()
    base, tri = h200["baseline"], h200["triton"]
    return dict(
        slope_n=_exponent([2 ** e for e in range(10, 15)], [f(2 ** e, 2 ** e, 64, 98304) for e in range(10, 15)]),
        slope_m=_exponent([2 ** e for e in range(14, 18)], [f(4096, 4096, 64, 2 ** e) for e in range(14, 18)]),
        slope_d=_exponent([2 ** e for e in range(4, 8)], [f(4096, 4096, 2 ** e, 98304) for e in range(4, 8)]),
        figure2_ratio=fig["standard_gb"] / fig["flash_gb"],
        baseline_ratio=fig["baseline_standard_gb"] / fig["baseline_flash_gb"],
        measured_ratio=base["hbm_gb"] / tri["hbm_gb"],
        measured_speedup=base["runtime_ms"] / tri["runtime_ms"],
    )
"""


@pytest.mark.parametrize("step,code", [("predict", PREDICT), ("scratch", SCRATCH),
                                       ("compose", COMPOSE), ("probe", PROBE)])
def test_an_independent_solution_passes(step, code):
    assert_passes("online-softmax", step, code)


# -- checks that check what the step teaches --------------------------------------------------

def test_from_block_called_and_its_result_ignored_fails_softmax():
    """Before: calling from_block on each block and then normalising the whole row at once
    passed (the check only counted from_block's calls)."""
    wrong = module("online-softmax", "wrong_answers")
    row = next(r for r in wrong.WRONG_ANSWERS if r.name == "from-block-ignored")
    solution = lab.exercise("online-softmax").step("scratch").solution
    softmax = check(lab.grade("online-softmax", "scratch", mutate(solution, row.old, row.new)),
                    "softmax")
    assert softmax["status"] == "fail" and "folded" in softmax["message"]


def test_one_query_row_against_all_keys_fails_the_working_set():
    """Before: the budget admitted a row of Nk (it allowed 4 copies of K and V); now one float64
    row against all keys is over the bound and the message says so."""
    wrong = module("online-softmax", "wrong_answers")
    row = next(r for r in wrong.WRONG_ANSWERS if r.name == "one-row-against-all-keys")
    solution = lab.exercise("online-softmax").step("compose").solution
    result = lab.grade("online-softmax", "compose", mutate(solution, row.old, row.new))
    tiled = check(result, "tiled")
    assert tiled["status"] == "fail" and "row against all 16384 keys" in tiled["message"]
    assert all(c["status"] == "pass" for c in result["checks"] if c["id"] != "tiled")


def test_working_set_bound_is_below_one_row_of_keys():
    com = module("online-softmax", "compose_checks")
    from nlpcore.lab import working_set
    label, n_q, n_k, d, dv, bq, bk = com.TILED_CASE
    bound = working_set.budget(out_bytes=8 * (n_q * dv + n_q), n_q=n_q, block_q=bq, block_k=bk,
                               width=max(d, dv))
    assert bound < 8 * n_k < 8 * bq * n_k


# -- feedback names the likely mistake ---------------------------------------------------------

COMPOSE_SLIPS = [
    ("l = alpha * l + p.sum(axis=1)", "l = l + p.sum(axis=1)", "ragged", "ℓ is not rescaled"),
    ("scale = 1.0 / np.sqrt(d)", "scale = 1.0 / d", "ragged", "1/d instead of 1/√d"),
    ("s = np.where(cols <= rows, s, -np.inf)", "s = np.where(cols < rows, s, -np.inf)", "causal",
     "strict (j < i)"),
    ("    return o, lse\n", "    return o.T, lse\n", "ragged", "the transpose"),
    ("        lse[q0:q1] = np.where(seen, m + np.log(np.where(seen, l, 1.0)), -np.inf)\n",
     "        last = np.where(np.isfinite(s.max(axis=1)), s.max(axis=1), 0.0)\n"
     "        lt = np.exp(s - last[:, None]).sum(axis=1)\n"
     "        lse[q0:q1] = np.where(lt > 0, last + np.log(np.where(lt > 0, lt, 1.0)), -np.inf)\n",
     "lse", "last key tile only"),
]


@pytest.mark.parametrize("old,new,check_id,named", COMPOSE_SLIPS,
                         ids=["l-not-rescaled", "scale-1/d", "strict-causal", "transposed",
                              "last-tile-lse"])
def test_a_known_slip_is_named(old, new, check_id, named):
    """Before: each of these read "o differs from the reference in N of N entries"."""
    solution = lab.exercise("online-softmax").step("compose").solution
    failed = check(lab.grade("online-softmax", "compose", mutate(solution, old, new)), check_id)
    assert failed["status"] == "fail" and named in failed["message"], failed["message"]


def test_a_failure_carries_a_per_case_table_with_shapes_and_seeds():
    solution = lab.exercise("online-softmax").step("compose").solution
    wrong = mutate(solution, "s = np.where(cols <= rows, s, -np.inf)",
                   "s = np.where(cols < rows, s, -np.inf)")
    result = lab.grade("online-softmax", "compose", wrong)
    causal = check(result, "causal")
    table = causal["table"]
    assert table["columns"][:4] == ["case", "shapes", "seed", "verdict"]
    assert len(table["rows"]) == 4 and {r[3] for r in table["rows"]} == {"fail"}
    assert "q (45, 16)" in table["rows"][0][1] and table["rows"][0][2] == result["seed"]
    assert causal["message"].startswith("4 of 4 cases fail")


def test_variants_equal_the_reference_when_no_slip_is_on():
    var = module("online-softmax", "variants")
    from nlpcore.kernels import reference
    r = np.random.RandomState(0)
    q, k, v = r.randn(13, 4), r.randn(17, 4), r.randn(17, 3)
    for causal in (False, True):
        o, lse = var.tiled(q, k, v, 4, 5, causal)
        want_o, want_lse = reference.forward(q, k, v, causal=causal)
        assert np.allclose(o, want_o) and np.allclose(lse, want_lse)


def test_failure_reports_expected_got_tolerance_max_delta_and_shapes():
    step = lab.exercise("online-softmax").step("compose")
    wrong = mutate(step.solution, "acc = alpha[:, None] * acc + p @ v[k0:k1]",
                   "acc = acc + p @ v[k0:k1]")
    ragged = lab.grade("online-softmax", "compose", wrong)["checks"][0]
    assert ragged["status"] == "fail"
    for key in ("expected", "got", "tolerance", "max_abs_err", "shapes", "where", "table"):
        assert key in ragged, key
    assert ragged["shapes"]["q"] == [37, 16] and ragged["max_abs_err"] > 1e-3
    assert "blocks 8×16" in ragged["message"]


def test_predict_cannot_be_answered_by_the_pages_that_run_the_io_model():
    """Before: the lessons page's loop_order_bytes (nlpcore code calling io_model) handed over the
    flash count; every module that computes it is refused in Predict now."""
    code = ("from nlpcore.web import lessons\nflash = lessons.loop_order_bytes(512, 64, 98304)"
            "['kv_outer'] / 2\nstandard = 4 * 512 * 512 + 4 * 512 * 64\n")
    result = lab.grade("online-softmax", "predict", code)
    assert not result["passed"]
    assert all("refused" in c["message"] for c in result["checks"]), result["checks"]


def test_restarting_tracemalloc_does_not_hide_a_row_against_all_keys():
    """Before: stopping and starting tracemalloc inside the call cleared the traces, and one row
    against all keys measured 0.001 MiB."""
    wrong = module("online-softmax", "wrong_answers")
    row = next(r for r in wrong.WRONG_ANSWERS if r.name == "one-row-against-all-keys")
    restart = row.new.replace("    return o, lse\n", "    import tracemalloc\n    tracemalloc.stop()\n"
                              "    tracemalloc.start()\n    return o, lse\n", 1)
    solution = lab.exercise("online-softmax").step("compose").solution
    tiled = check(lab.grade("online-softmax", "compose", mutate(solution, row.old, restart)), "tiled")
    assert tiled["status"] == "fail" and "tracemalloc" in tiled["message"], tiled["message"]


def test_predict_cannot_be_answered_through_the_web_door_at_load_time():
    """Before: nlpcore code that the learner's top-level code called (nlpcore.web.call) passed
    the strict refusal, as no learner *function* was running; now a learner frame anywhere
    below the caller, before any grader frame, refuses it."""
    code = ("import nlpcore.web as w\nimport nlpcore.web.lessons\n"
            "flash = w.call('lessons.loop_order_bytes', {'n': 512, 'd': 64, 'sram': 98304})"
            "['kv_outer'] / 2\nstandard = 4 * 512 * 512 + 4 * 512 * 64\n")
    result = lab.grade("online-softmax", "predict", code)
    assert not result["passed"]
    assert all("refused" in c["message"] for c in result["checks"]), result["checks"]


def test_a_wrong_prediction_is_told_its_direction_not_the_answer():
    """A wrong guess is placed (too high or too low, by a range of factors); the true count,
    which a second try would copy, is not in the message (review of the graders, defect 6)."""
    want = module("online-softmax", "predict_checks").measured_flash()
    result = lab.grade("online-softmax", "predict", "standard = 1.2e6\nflash = %d\n" % (want * 0.6))
    flash = check(result, "flash")
    assert flash["status"] == "fail" and "too low" in flash["message"]
    assert "between 1.5 and 2" in flash["message"]
    shown = {k: v for k, v in flash.items() if k != "answer"}  # what the page draws before asked
    assert str(want) not in str(shown) and ("%.6g" % want) not in str(shown)
    assert flash["answer"] == "%.6g" % want  # kept for "reveal the answer" after an attempt


def test_a_case_that_raises_fails_only_the_checks_it_belongs_to():
    """The Compose checks share one collect; an exception in a causal case is the causal check's
    failure, not every check's (review of the graders, defect 9)."""
    code = lab.exercise("online-softmax").step("compose").solution + (
        "\n\n_inner = attention\n\n\n"
        "def attention(q, k, v, block_q, block_k, causal=False):\n"
        "    if block_q == 1:\n"
        "        raise ValueError('blocks of one row')\n"
        "    return _inner(q, k, v, block_q, block_k, causal=causal)\n")
    result = lab.grade("online-softmax", "compose", code)
    assert check(result, "ragged")["status"] == "pass"
    assert check(result, "large")["status"] == "pass"
    causal = check(result, "causal")
    assert causal["status"] == "fail" and "blocks of one row" in causal["message"]
