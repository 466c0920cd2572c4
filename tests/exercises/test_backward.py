"""The backward exercise: independent correct solutions pass both steps -- one of them rounds P
to float16 before P·V and divides in float16, as this lab's Triton kernel does, and must meet
flash-attention's same-precision bar -- and the tiled checks refuse one row against all keys."""
from __future__ import annotations

import numpy as np
import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

from .helpers import assert_passes, check, marker, mutate

pytestmark = marker("backward")

# Partials merged by their lse, tile by tile (Flash-Decoding's merge), cast per tile; float16
# inputs: P rounded to float16 before P·V and the final division in float16.
HARDEN = """
import numpy as np


def forward(q, k, v, mask=None, causal=False, block_q=16, block_k=16):
    n_q, n_k, dv = q.shape[0], k.shape[0], v.shape[1]
    low = q.dtype.itemsize < 4
    acc = np.float32 if low else np.float64
    allow = None if mask is None else np.broadcast_to(mask, (n_q, n_k))
    o = np.zeros((n_q, dv), dtype=q.dtype)
    lse = np.full(n_q, -np.inf, dtype=acc)
    for q0 in range(0, n_q, block_q):
        q1 = min(n_q, q0 + block_q)
        qt = q[q0:q1].astype(acc)
        run_o = np.zeros((q1 - q0, dv), acc)
        run_lse = np.full(q1 - q0, -np.inf, acc)
        for k0 in range(0, n_k, block_k):
            k1 = min(n_k, k0 + block_k)
            s = (qt @ k[k0:k1].astype(acc).T) / acc(np.sqrt(q.shape[1]))
            ok = np.ones(s.shape, bool) if allow is None else allow[q0:q1, k0:k1]
            if causal:
                ok = ok & (np.arange(k0, k1)[None, :] <= np.arange(q0, q1)[:, None])
            s = np.where(ok, s, -np.inf)
            mx = s.max(axis=1)
            ref = np.where(np.isfinite(mx), mx, 0).astype(acc)
            e = np.exp(s - ref[:, None])
            tot = e.sum(axis=1)
            if low:
                e = e.astype(np.float16).astype(acc)            # P in float16 before P·V
            part_o = e @ v[k0:k1].astype(acc)                    # unnormalised
            part_lse = np.where(tot > 0, ref + np.log(np.where(tot > 0, tot, 1)), -np.inf)
            new = np.logaddexp(run_lse, part_lse)
            base = np.where(np.isfinite(new), new, 0)
            wa = np.exp(run_lse - base)
            wb = np.where(tot > 0, np.exp(ref - base), 0)
            run_o = wa[:, None] * run_o + wb[:, None] * part_o
            run_lse = new.astype(acc)
        if low:                                                  # divide in float16
            o[q0:q1] = np.where(np.isfinite(run_lse)[:, None], run_o.astype(np.float16), 0)
        else:
            o[q0:q1] = np.where(np.isfinite(run_lse)[:, None], run_o, 0)
        lse[q0:q1] = run_lse
    return o, lse
"""

# Queries outside, keys inside (the paper's Algorithm 4 has keys outside); D per query tile.
SCRATCH = """
import numpy as np


def backward(q, k, v, o, lse, do, mask=None, causal=False, block_q=16, block_k=16):
    n_q, d = q.shape
    n_k = k.shape[0]
    c = d ** -0.5
    allow = None if mask is None else np.broadcast_to(mask, (n_q, n_k))
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for q0 in range(0, n_q, block_q):
        rows = np.arange(q0, min(n_q, q0 + block_q))
        live = np.isfinite(lse[rows])
        d_i = np.einsum("ij,ij->i", do[rows], o[rows])
        base = np.where(live, lse[rows], 0.0)
        for k0 in range(0, n_k, block_k):
            cols = np.arange(k0, min(n_k, k0 + block_k))
            ok = np.repeat(live[:, None], len(cols), axis=1)
            if allow is not None:
                ok &= allow[np.ix_(rows, cols)]
            if causal:
                ok &= cols[None, :] <= rows[:, None]
            s = c * (q[rows] @ k[cols].T)
            p = np.exp(np.where(ok, s, -np.inf) - base[:, None])
            dp = do[rows] @ v[cols].T
            ds = p * (dp - d_i[:, None]) * c
            dv[cols] += p.T @ do[rows]
            dk[cols] += ds.T @ q[rows]
            dq[rows] += ds @ k[cols]
    return dq, dk, dv
"""


@pytest.mark.parametrize("step,code", [("harden", HARDEN), ("scratch", SCRATCH)])
def test_an_independent_solution_passes(step, code):
    assert_passes("backward", step, code)


def test_rounding_p_and_dividing_in_float16_passes():
    """The folder's solution with P rounded to float16 before P·V and the division in float16."""
    solution = lab.exercise("backward").step("harden").solution
    rounded = mutate(solution, (
        "acc = alpha[:, None] * acc + p @ va[k0:k1]",
        "o[q0:q1] = np.where(seen[:, None], acc / safe_l[:, None], 0)"), (
        "acc = alpha[:, None] * acc + p.astype(q.dtype).astype(acc_dtype) @ va[k0:k1]",
        "o[q0:q1] = np.where(seen[:, None], (acc.astype(q.dtype) / safe_l.astype(q.dtype)[:, None])"
        ".astype(acc_dtype), 0)"))
    assert_passes("backward", "harden", rounded)


def test_float16_bar_is_flash_attentions_same_precision_bar():
    """Before: the bar was 2× plain attention accumulated in float32, so the kernel above (P in
    float16, division in float16, as this lab's Triton kernel) failed. Now the yardstick is plain
    attention in float16, as flash-attention's tests, and keeping the running sums in float16
    still fails (the long case)."""
    float16 = check(lab.grade("backward", "harden", HARDEN), "float16")
    assert float16["status"] == "pass" and "flash-attention" in float16["message"]
    wrong = module("backward", "wrong_answers")
    row = next(r for r in wrong.WRONG_ANSWERS if r.name == "float16-accumulation")
    solution = lab.exercise("backward").step("harden").solution
    failed = check(lab.grade("backward", "harden", mutate(solution, row.old, row.new)), "float16")
    assert failed["status"] == "fail" and "flash-attention bar" in failed["message"]


def test_same_precision_yardstick_is_worse_than_float32_accumulation():
    ex = module("backward", "exercise")
    from nlpcore.kernels import reference
    for case in ex.HALF_CASES:
        q, k, v = ex._half_inputs(case)
        want = reference.forward(*(x.astype(np.float64) for x in (q, k, v)))[0]
        o16 = ex.same_precision(q, k, v)[0].astype(np.float64)
        o32 = reference.forward(*(x.astype(np.float32) for x in (q, k, v)))[0]
        assert np.abs(o16 - want).max() >= np.abs(o32.astype(np.float16) - want).max()
        assert ex.flash_atol(want) > 0        # float16 rounding noise at o's size


@pytest.mark.parametrize("step", ["harden", "scratch"])
def test_one_query_row_against_all_keys_fails_tiled(step):
    """Before: the memory budget admitted one row against all Nk keys in both steps."""
    wrong = module("backward", "wrong_answers")
    row = next(r for r in wrong.WRONG_ANSWERS if r.name == "one-row-against-all-keys" and r.step == step)
    solution = lab.exercise("backward").step(step).solution
    result = lab.grade("backward", step, mutate(solution, row.old, row.new))
    assert check(result, "tiled")["status"] == "fail"
    others = [c for c in result["checks"] if c["id"] != "tiled" and c["status"] != "pass"]
    assert not others, [(c["id"], c["message"][:200]) for c in others]
