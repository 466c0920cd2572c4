"""The triton exercise (page side): independent correct solutions pass both steps -- key_range
with end rounded up to whole blocks or stopping at n_k, numbers returned as floats -- and the
local checks carry the command of the CLI grader in this folder."""
from __future__ import annotations

import pytest

from nlpcore import lab
from nlpcore.lab.exercises import module

from .helpers import assert_passes, check, marker

pytestmark = marker("triton")

# key_range's end rounded up to whole blocks; the program in natural-log units, masks built up
# front, key blocks visited with a while loop.
PORT = """
import numpy as np


def key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal):
    last = min(n_k, (pid_m + 1) * BLOCK_M) if causal else n_k     # keys after this are unseen
    first_diag = min(pid_m * BLOCK_M, n_k) if causal else n_k
    end = -(-last // BLOCK_N) * BLOCK_N                               # whole blocks
    return (first_diag // BLOCK_N) * BLOCK_N, end


def program(q, k, v, pid_m, BLOCK_M, BLOCK_N, causal, qk_scale):
    n_q, n_k, dv = q.shape[0], k.shape[0], v.shape[1]
    rows = pid_m * BLOCK_M + np.arange(BLOCK_M)
    qb = np.zeros((BLOCK_M, q.shape[1]), np.float64)
    qb[rows < n_q] = q[rows[rows < n_q]]
    scale = qk_scale / 1.4426950408889634                              # back to natural log
    m = np.full(BLOCK_M, -np.inf)
    l = np.zeros(BLOCK_M)
    acc = np.zeros((BLOCK_M, dv))
    _, end = key_range(pid_m, BLOCK_M, BLOCK_N, n_k, causal)
    start = 0
    while start < end:
        cols = np.arange(start, min(start + BLOCK_N, n_k))
        s = (qb @ k[cols].T) * scale
        if causal:
            s[cols[None, :] > rows[:, None]] = -np.inf
        new = np.maximum(m, s.max(axis=1))
        shift = np.where(np.isfinite(new), new, 0.0)
        e = np.exp(s - shift[:, None])
        a = np.exp(m - shift)
        l = a * l + e.sum(axis=1)
        acc = a[:, None] * acc + e @ v[cols]
        m = new
        start += BLOCK_N
    with np.errstate(divide="ignore", invalid="ignore"):
        return (acc / l[:, None]).astype(np.float32), (m + np.log(l)).astype(np.float32)
"""

# Every answer a float, block sizes found by a closed form, the speed-up from times.
COMPOSE = """
import math


def grid(batch, heads, n_q, BLOCK_M):
    return (-(-n_q // BLOCK_M), heads * batch)


def smem_bytes(BLOCK_M, BLOCK_N, d, dtype_bytes, stages):
    q_tile = BLOCK_M * d * dtype_bytes
    kv_tiles = 2.0 * BLOCK_N * d * dtype_bytes
    return q_tile + stages * kv_tiles


def largest_block_n(smem_limit, BLOCK_M, d, dtype_bytes, stages):
    room = (smem_limit / dtype_bytes - BLOCK_M * d) / (stages * 2.0 * d)
    if room < 16:
        return 0.0
    return float(min(256, 2 ** int(math.floor(math.log2(room)))))


def flops(batch, heads, n, d, causal, backward=False):
    return 2.0 * 2.0 * batch * heads * n * n * d * (0.5 if causal else 1.0) * (2.5 if backward else 1.0)


def tflops(ms, batch, heads, n, d, causal, backward=False):
    return flops(batch, heads, n, d, causal, backward) / ms / 1e9


def expected_speedup(batch, heads, n, d, dtype_bytes, peak_flops, hbm_bytes_per_s):
    compute = flops(batch, heads, n, d, False) / peak_flops
    io = lambda elements: elements * dtype_bytes * batch * heads / hbm_bytes_per_s
    return max(compute, io(4.0 * n * n + 4.0 * n * d)) / max(compute, io(4.0 * n * d))
"""


@pytest.mark.parametrize("step,code", [("port", PORT), ("compose", COMPOSE)])
def test_an_independent_solution_passes(step, code):
    assert_passes("triton", step, code)


@pytest.mark.parametrize("end", ["n_k if not causal else min(m0 + BLOCK_M, n_k)",
                                 "-(-end // BLOCK_N) * BLOCK_N",
                                 "min(-(-end // BLOCK_N) * BLOCK_N, end + 1)"])
def test_key_range_end_may_stop_at_the_last_key_or_at_its_blocks_end(end):
    """Before: only end = n_k (min(m0 + BLOCK_M, n_k) causal) passed; every end in
    [that, its block's end] visits the same key blocks."""
    solution = lab.exercise("triton").step("port").solution
    code = solution.replace("    return full_end, end\n", "    return full_end, %s\n" % end, 1)
    assert code != solution
    assert check(lab.grade("triton", "port", code), "key-range")["status"] == "pass"


def test_key_range_still_refuses_a_block_too_many_or_too_few():
    solution = lab.exercise("triton").step("port").solution
    for end in ("-(-end // BLOCK_N) * BLOCK_N + 1", "end - 1", "m0 + BLOCK_M if causal else n_k"):
        code = solution.replace("    return full_end, end\n", "    return full_end, %s\n" % end, 1)
        assert check(lab.grade("triton", "port", code), "key-range")["status"] == "fail", end


def test_numbers_compare_by_value():
    """Before: largest_block_n returning 128.0 failed as "expected 128, got 128.0"."""
    solution = lab.exercise("triton").step("compose").solution
    code = solution.replace("    return best\n", "    return float(best)\n", 1)
    result = lab.grade("triton", "compose", code)
    assert check(result, "block-n")["status"] == "pass"
    code = solution.replace("    return best\n", "    return best + 0.5\n", 1)
    assert check(lab.grade("triton", "compose", code), "block-n")["status"] == "fail"


def test_local_checks_are_not_graded_and_show_the_folders_cli_grader():
    ex = lab.exercise("triton")
    local = []
    for step in ("port", "compose"):
        r = lab.grade("triton", step, ex.step(step).solution)
        local += [c for c in r["checks"] if c["status"] == "local"]
        assert r["passed"]
    assert len(local) == 3
    commands = [c["command"] for c in local]
    assert sum("python -m nlpcore.lab.exercises.triton.check_triton" in c for c in commands) == 2
    assert any("bench/triton_h200.py" in c for c in commands)


def test_the_cli_grader_lives_in_the_folder():
    import importlib.util
    spec = importlib.util.find_spec("nlpcore.lab.exercises.triton.check_triton")
    assert spec is not None and spec.origin.endswith("lab/exercises/triton/check_triton.py")
    assert importlib.util.find_spec("nlpcore.kernels.check_triton") is None
    assert "nlpcore.lab.exercises.triton.check_triton" in module("triton", "exercise").CHECK_COMMAND


def test_a_wrong_flops_count_says_expected_and_got():
    """The flops failure states both numbers, not only the call (review of the graders,
    defect 12)."""
    solution = lab.exercise("triton").step("compose").solution
    old = "    if causal:\n        f /= 2\n"
    assert solution.count(old) == 1
    result = lab.grade("triton", "compose", solution.replace(old, ""))
    message = check(result, "flops")["message"]
    assert check(result, "flops")["status"] == "fail"
    assert "returned" in message and "expected" in message, message


def test_the_cli_grader_without_pytorch_names_what_a_wheel_user_runs():
    """Before: "pip install -e '.[triton]'", a command of this repository, which a learner who
    installed the wheel from the Triton page cannot run. Now: pip install of PyTorch and Triton
    (the wheel's pins where its metadata is installed), then the page's own check command."""
    import subprocess
    import sys

    from nlpcore.lab.exercises.triton.exercise import CHECK_COMMAND
    probe = ("import sys; sys.modules['torch'] = None\n"
             "try:\n    import nlpcore.lab.exercises.triton.check_triton\n"
             "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120).stdout
    assert "python -m pip install torch" in out and "triton" in out, out
    assert CHECK_COMMAND in out and "-e '.[" not in out, out
