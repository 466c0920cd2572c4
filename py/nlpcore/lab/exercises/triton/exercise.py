"""Exercise ``triton`` (gpu tier: Port · Compose): write FlashAttention as a Triton kernel.

The learner writes the kernel -- the forward's body (offsets, masks, the online-softmax loop,
causal block skipping), the launch grid, the backward's recomputed tiles and the autograd
wrapper -- in ``kernel_starter.py``, which is generated from the marked solution
``kernel_solution.py`` (``python -m nlpcore.lab.exercises.triton.starter`` rewrites it). The
kernel needs PyTorch, Triton and (for speed) an NVIDIA GPU, so it is graded locally with
``python -m nlpcore.lab.exercises.triton.check_triton``. In the page we check the reasoning that *can* run
in a browser: a NumPy emulation of one Triton program (loop bounds, the exp2 online softmax, the
ragged tail), and the numbers needed to size, launch and judge the kernel -- the grid, block
sizes from the shared-memory budget, FLOPs and TFLOP/s, and a roofline estimate of the speed-up
over unfused PyTorch attention.

Sources: Dao 2023 FlashAttention-2 (arXiv:2307.08691): one program per query block, loop over
keys, exp2 with the scale folded into log2(e); Triton's fused-attention tutorial.
"""
from __future__ import annotations

import math

import numpy as np

from nlpcore import hardware
from nlpcore.kernels import reference
from nlpcore.kernels.tiling import WEBGPU_DEFAULT_STORAGE
from nlpcore.lab.judging import (assert_close, call_learner, expect_array, expect_number,
                                 plain_tuple, rng, shapes_of)
from nlpcore.lab.model import Check, CheckFailed, Exercise, Folder, LIBRARY_KERNELS, Step

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions

LOG2E = 1.4426950408889634
CHECK_COMMAND = "python -m nlpcore.lab.exercises.triton.check_triton my_flash.py"
RESULTS_PATH = "bench/results/triton_h200.json"


def expected_key_range(pid_m, block_m, block_n, n_k, causal):
    m0 = pid_m * block_m
    if causal:
        return min(m0, n_k) // block_n * block_n, min(m0 + block_m, n_k)
    return n_k // block_n * block_n, n_k


KEY_RANGE_CASES = [(p, bm, bn, n, c) for (bm, bn, n) in ((16, 16, 50), (32, 16, 100), (64, 32, 64))
                   for c in (False, True) for p in range(-(-n // bm))]


def _ints(got):
    """Phase 1: a learner's tuple of whole numbers as a plain tuple of ints (compared by value:
    ``128.0`` is 128), or its repr."""
    if isinstance(got, (tuple, list)):
        try:
            values = [float(x) for x in got if not isinstance(x, bool)]
            if len(values) == len(got) and all(v == int(v) for v in values):
                return tuple(int(v) for v in values)
        except BaseException:
            pass
    return repr(got)[:80]


def key_range_ok(got, pid_m, block_m, block_n, n_k, causal) -> bool:
    """Whether (full_end, end) visits the same key blocks as the kernel: ``full_end`` exactly
    (blocks [0, full_end) load no mask), ``end`` anywhere from the last key needed up to the
    end of its block (the masked tail visits the same blocks either way)."""
    want_full, want_end = expected_key_range(pid_m, block_m, block_n, n_k, causal)
    if not isinstance(got, tuple) or len(got) != 2:
        return False
    full_end, end = got
    return full_end == want_full and want_end <= end <= -(-want_end // block_n) * block_n


def _collect_key_range(ns):
    return [_ints(call_learner(ns["key_range"], *case, context="key_range%s" % (case,)))
            for case in KEY_RANGE_CASES]


def _check_key_range(collected):
    for (pid_m, bm, bn, n_k, causal), got in zip(KEY_RANGE_CASES, collected):
        want = expected_key_range(pid_m, bm, bn, n_k, causal)
        if not key_range_ok(got, pid_m, bm, bn, n_k, causal):
            raise CheckFailed("key_range(pid_m=%d, BLOCK_M=%d, BLOCK_N=%d, n_k=%d, causal=%s)"
                              % (pid_m, bm, bn, n_k, causal),
                              expected="(full_end, end) = (%d, %d..%d): end may stop at the last "
                              "key or at the end of its block" % (want[0], want[1],
                                                                 -(-want[1] // bn) * bn),
                              got=str(got))
    return "%d programs: unmasked blocks and causal skipping as in the kernel" % len(KEY_RANGE_CASES)


def _run_programs(ns, q, k, v, block_m, block_n, causal):
    """Phase 1: every program's (o, lse) block, assembled into plain arrays."""
    n_q, d = q.shape
    qk_scale = (1.0 / math.sqrt(d)) * LOG2E
    o = np.zeros((n_q, v.shape[1]), dtype=np.float64)
    lse = np.zeros(n_q, dtype=np.float64)
    for pid_m in range(-(-n_q // block_m)):
        out = call_learner(ns["program"], q.copy(), k.copy(), v.copy(), pid_m, block_m,
                           block_n, causal, qk_scale, shapes=shapes_of(q=q, k=k, v=v),
                           context="program %d (BLOCK_M=%d, BLOCK_N=%d, causal=%s)"
                           % (pid_m, block_m, block_n, causal))
        ob, lb = plain_tuple(out, ("o", "lse"), "program")
        ob = expect_array("o of program %d" % pid_m, ob, (block_m, v.shape[1]), {})
        lb = expect_array("lse of program %d" % pid_m, lb, (block_m,), {})
        rows = min(block_m, n_q - pid_m * block_m)
        o[pid_m * block_m: pid_m * block_m + rows] = ob[:rows]
        lse[pid_m * block_m: pid_m * block_m + rows] = lb[:rows]
    return o, lse


def _program_inputs(n, d, seed):
    r = rng(seed)
    return tuple(r.randn(n, d).astype(np.float32) for _ in range(3))


def _program_case(label, n, d, block_m, block_n, causal, seed):
    def collect(ns):
        q, k, v = _program_inputs(n, d, seed)
        return _run_programs(ns, q, k, v, block_m, block_n, causal)

    def judge(collected):
        o, lse = collected
        q, k, v = _program_inputs(n, d, seed)
        want_o, want_lse = reference.forward(q.astype(np.float64), k.astype(np.float64),
                                             v.astype(np.float64), causal=causal)
        shapes = shapes_of(q=q, k=k, v=v)
        ctx = "%s, BLOCK_M=%d, BLOCK_N=%d" % (label, block_m, block_n)
        err = assert_close("o", o, want_o, shapes=shapes, dtype="float32", context=ctx)
        err = max(err, assert_close("lse", lse, want_lse, shapes=shapes, dtype="float32",
                                    context=ctx))
        return "%s: all %d programs, max |Δ| = %.2g vs float64 reference" % (
            label, -(-n // block_m), err)
    return dict(collect=collect, judge=judge)


GRID_CASES = ((4, 16, 4096, 128), (1, 1, 50, 16), (2, 8, 1000, 64))
FLOPS_CASES = [(4, 32, 4096, 64, False, False), (1, 16, 16384, 128, True, False),
               (16, 32, 1024, 64, True, True), (4, 16, 4096, 128, False, True)]


def _number_or_failure(name, fn, *args, **kwargs):
    try:
        return expect_number(name, call_learner(fn, *args, context=name, **kwargs))
    except CheckFailed as fail:
        return fail


def _grid_or_failure(ns, case):
    try:
        return _ints(call_learner(ns["grid"], *case, context="grid%s" % (case,)))
    except CheckFailed as fail:
        return fail


def _collect_compose(ns):
    """Phase 1: each function's answers, or the failure it raised (kept per function, so a
    broken grid does not hide a right flops)."""
    return {
        "grid": [_grid_or_failure(ns, case) for case in GRID_CASES],
        "flops": [_number_or_failure("flops", ns["flops"], b, h, n, d, causal, backward=bwd)
                  for b, h, n, d, causal, bwd in FLOPS_CASES],
        "tflops": _number_or_failure("tflops", ns["tflops"], 1.0, 4, 16, 4096, 128, False),
        "smem": [_plain_or_failure("smem_bytes", ns["smem_bytes"], *case) for case in SMEM_CASES],
        "block_n": [_plain_or_failure("largest_block_n", ns["largest_block_n"], *case[:5])
                    for case in _block_n_cases()],
        "speedup": [_number_or_failure("expected_speedup", ns["expected_speedup"], *case[1:])
                    for case in _speedup_cases()],
    }


def _plain_or_failure(name, fn, *args):
    """Phase 1: an int or float answer as a plain Python number (bool kept, to be refused), else
    a short repr, or the failure the call raised."""
    try:
        got = call_learner(fn, *args, context=name)
    except CheckFailed as fail:
        return fail
    if isinstance(got, bool):
        return bool(got)
    if isinstance(got, (int, np.integer)):
        return int(got)
    if isinstance(got, (float, np.floating)):
        return float(got)
    return repr(got)[:80]


def _check_grid(collected):
    for (b, h, n, bm), got in zip(GRID_CASES, collected["grid"]):
        if isinstance(got, CheckFailed):
            raise got
        want = (-(-n // bm), b * h)
        if got != want:
            raise CheckFailed("grid(batch=%d, heads=%d, n_q=%d, BLOCK_M=%d)" % (b, h, n, bm),
                              expected=repr(want), got=str(got))
    return "(ceil(N / BLOCK_M), B·H) programs"


def _want_flops(b, h, n, d, causal, backward):
    return 4.0 * n * n * d * h * b * (0.5 if causal else 1.0) * (2.5 if backward else 1.0)


def _check_flops(collected):
    for (b, h, n, d, causal, bwd), got in zip(FLOPS_CASES, collected["flops"]):
        if isinstance(got, CheckFailed):
            raise got
        want = _want_flops(b, h, n, d, causal, bwd)
        if abs(got - want) > 1e-9 * want:
            raise CheckFailed("flops(B=%d, H=%d, N=%d, d=%d, causal=%s, backward=%s)"
                              % (b, h, n, d, causal, bwd), expected="%.6g" % want,
                              got="%.6g" % got, tolerance="1e-9 relative")
    return "4·N²·d·H·B, ½ when causal, ×2.5 backward"


def _want_smem(bm, bn, d, nbytes, stages):
    return (bm * d + stages * 2 * bn * d) * nbytes


SMEM_CASES = [(128, 64, 64, 2, 2), (64, 128, 128, 2, 3), (128, 32, 80, 4, 1), (16, 16, 16, 2, 1)]


def _check_smem(collected):
    for case, got in zip(SMEM_CASES, collected["smem"]):
        if isinstance(got, CheckFailed):
            raise got
        want = _want_smem(*case)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            raise CheckFailed("smem_bytes(BLOCK_M=%d, BLOCK_N=%d, d=%d, dtype_bytes=%d, stages=%d)"
                              % case, expected=str(want), got=repr(got)[:80])
    return "Q tile + stages × (K tile + V tile), in bytes"


def _want_block_n(limit, bm, d, nbytes, stages):
    fits = [bn for bn in (16, 32, 64, 128, 256) if _want_smem(bm, bn, d, nbytes, stages) <= limit]
    return max(fits) if fits else 0


def _block_n_cases():
    """(limit, BLOCK_M, d, dtype_bytes, stages, where): the real per-block limits of the GPUs in
    nlpcore.hardware, and WebGPU's default, where nothing of this shape fits."""
    out = []
    for name in ("A100", "H100"):
        limit = hardware.GPUS[name].smem_per_block_bytes
        out += [(limit, 128, 64, 2, 3, name), (limit, 128, 128, 2, 2, name),
                (limit, 64, 128, 4, 2, name)]
    out.append((WEBGPU_DEFAULT_STORAGE, 128, 128, 2, 2, "WebGPU default"))
    return out


def _check_block_n(collected):
    for (limit, bm, d, nbytes, stages, where), got in zip(_block_n_cases(), collected["block_n"]):
        if isinstance(got, CheckFailed):
            raise got
        want = _want_block_n(limit, bm, d, nbytes, stages)
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != want:
            raise CheckFailed("largest_block_n(smem_limit=%d (%s), BLOCK_M=%d, d=%d, dtype_bytes=%d, "
                              "stages=%d)" % (limit, where, bm, d, nbytes, stages),
                              expected=str(want), got=repr(got)[:80])
    h100 = hardware.GPUS["H100"].smem_per_block_bytes
    return "e.g. H100 (%d KiB a block), BLOCK_M=128, d=128, bf16, 2 stages: BLOCK_N = %d" % (
        h100 // 1024, _want_block_n(h100, 128, 128, 2, 2))


def _want_speedup(b, h, n, d, nbytes, peak, bw):
    work = 4.0 * n * n * d * h * b
    unfused = (4.0 * n * n + 4.0 * n * d) * nbytes * b * h
    fused = 4.0 * n * d * nbytes * b * h
    return max(work / peak, unfused / bw) / max(work / peak, fused / bw)


def _speedup_cases():
    cases = []
    for name in ("A100", "H200"):
        gpu = hardware.GPUS[name]
        cases += [(name, 4, 16, 4096, 64, 2, gpu.fp16_flops, gpu.hbm_bytes_per_s),
                  (name, 16, 32, 1024, 128, 2, gpu.fp16_flops, gpu.hbm_bytes_per_s)]
    cases.append(("a made-up memory-rich GPU", 1, 1, 512, 64, 4, 1e12, 1e15))
    return cases


def _check_speedup(collected):
    for (where, *args), got in zip(_speedup_cases(), collected["speedup"]):
        if isinstance(got, CheckFailed):
            raise got
        want = _want_speedup(*args)
        if abs(got - want) > 1e-6 * want:
            raise CheckFailed("expected_speedup(B=%d, H=%d, N=%d, d=%d, dtype_bytes=%d, "
                              "peak_flops=%.4g, hbm_bytes_per_s=%.4g) on %s" % (tuple(args) + (where,)),
                              expected="%.4g" % want, got="%.4g" % got, tolerance="1e-6 relative")
    gpu = hardware.GPUS["H200"]
    return "H200, bf16, B=4, H=16, N=4096, d=64: about %.1f× over unfused attention, at best" % (
        _want_speedup(4, 16, 4096, 64, 2, gpu.fp16_flops, gpu.hbm_bytes_per_s))


def _check_tflops(collected):
    # 16k tokens per batch, hidden 2048, d = 128: B = 4, H = 16 at N = 4096.
    got = collected["tflops"]
    if isinstance(got, CheckFailed):
        raise got
    want = _want_flops(4, 16, 4096, 128, False, False) / 1e-3 / 1e12
    if abs(got - want) > 1e-6 * want:
        raise CheckFailed("tflops(ms=1.0, B=4, H=16, N=4096, d=128, causal=False)",
                          expected="%.4g TFLOP/s" % want, got="%.4g" % got,
                          tolerance="1e-6 relative")
    return "1 ms for B=4, H=16, N=4096, d=128 is %.0f TFLOP/s, %.0f%% of an H200's bf16 peak" % (
        want, 100 * hardware.fraction_of_peak(want, "H200"))


KERNEL_STARTER = "kernel_starter.py"  # the Triton kernel to complete (generated, see starter.py)
KERNEL_SOLUTION = "kernel_solution.py"  # the same kernel, complete, with the learner's part marked


def _starter_panel() -> dict:
    return {"title": "Your kernel: nlpcore/lab/exercises/triton/" + KERNEL_STARTER,
            "code": HERE.text(KERNEL_STARTER), "missing": None, "language": "python",
            "download": "src/nlpcore/lab/exercises/triton/" + KERNEL_STARTER,
            "steps": ["port"]}


KERNEL_CHECKS = (
    Check("interpreter", "your kernel vs a float64 oracle, on the CPU", runner="local",
          command="TRITON_INTERPRET=1 " + CHECK_COMMAND + " --device cpu",
          explain="needs PyTorch and Triton, which do not run in a browser; Triton's "
                  "interpreter runs the kernel on the CPU (small sizes, slow)"),
    Check("gpu", "the same checks on an NVIDIA GPU", runner="local", command=CHECK_COMMAND,
          explain="needs a CUDA GPU; same checks at larger sizes, fp16/bf16 held to the "
                  "flash-attention bar (error ≤ 2× plain attention in the same precision)"),
)
BENCH_CHECKS = (
    Check("bench", "TFLOP/s against PyTorch SDPA's backends", runner="local",
          command="PYTHONPATH=py python bench/triton_h200.py",
          explain="needs the GPU; writes bench/results/triton_h200.json, which this page plots"),
)


def _figure2_estimate() -> dict:
    """The Compose step's roofline estimate (unfused / fused, forward, non-causal) at the paper's
    Figure 2 setting on an A100, and the paper's measured ratio there, for the statement."""
    from nlpcore.kernels import io_model
    a100 = hardware.GPUS["A100"]
    b, h, n, d, nbytes = 64, 16, 1024, 64, hardware.FP16_BYTES
    flops = 4.0 * n * n * d * b * h

    def seconds(elements):
        return max(flops / a100.fp16_flops, elements * nbytes * b * h / a100.hbm_bytes_per_s)
    paper = io_model.PAPER_FIGURE2
    return {"a100_tflops": "%g" % (a100.fp16_flops / 1e12), "a100_hbm_tb_per_s": "%g" % (a100.hbm_bytes_per_s / 1e12),
            "fig2_estimate": "%.2f" % (seconds(4 * n * n + 4 * n * d) / seconds(4 * n * d)),
            "fig2_paper_speedup": "%.1f" % (paper["standard_ms"] / paper["flash_ms"])}


def build() -> Exercise:
    port = Step(
        id="port", kind="Port", title="Write the kernel: one program, then the GPU", minutes=70,
        statement=HERE.statement("port"),
        starter=HERE.starter("port"), solution=HERE.solution("port"),
        hints=(
            "Causal: `end = min(m0 + BLOCK_M, n_k)`; `full_end = min(m0, n_k) // BLOCK_N * "
            "BLOCK_N` (blocks entirely left of the diagonal need no mask). Non-causal: "
            "`end = n_k`, `full_end = n_k // BLOCK_N * BLOCK_N`.",
            "`m_new = max(m_i, rowmax(s))`, `p = exp2(s - m_new)`, `alpha = exp2(m_i - m_new)`, "
            "then `l_i = l_i·alpha + rowsum(p)` and `acc = acc·alpha + p @ v`.",
            "Every row's first key block contains key 0, which every row may attend, so "
            "`m_new` is finite from the first block on: no -inf guard is needed here.",
        ),
        required=("key_range", "program"),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("key-range", "loop bounds: unmasked blocks and causal skipping",
                  collect=_collect_key_range, judge=_check_key_range),
            Check("ragged", "ragged N = 50, d = 16",
                  **_program_case("N=50, d=16", 50, 16, 16, 16, False, seed=31)),
            Check("causal", "causal, N = 70, d = 32",
                  **_program_case("causal N=70, d=32", 70, 32, 32, 16, True, seed=32)),
            Check("wide", "BLOCK_N > BLOCK_M, causal, N = 45",
                  **_program_case("causal N=45, d=16", 45, 16, 16, 32, True, seed=33)),
        ) + KERNEL_CHECKS)
    compose = Step(
        id="compose", kind="Compose", title="Size, launch, predict and measure", minutes=50,
        statement=HERE.statement(
            "compose", a100_smem_kib=hardware.GPUS["A100"].smem_per_block_bytes // 1024,
            h100_smem_kib=hardware.GPUS["H100"].smem_per_block_bytes // 1024,
            h200_tflops="%g" % (hardware.GPUS["H200"].fp16_flops / 1e12),
            webgpu_storage=WEBGPU_DEFAULT_STORAGE, **_figure2_estimate()),
        starter=HERE.starter("compose"), solution=HERE.solution("compose"),
        hints=(
            "`grid = (math.ceil(n_q / BLOCK_M), batch * heads)`: the first axis walks query "
            "blocks, the second (batch, head) pairs.",
            "Try BLOCK_N = 16, 32, 64, 128, 256 and keep the largest whose `smem_bytes` fits; "
            "if even 16 does not fit, the answer is 0.",
            "`tflops = flops(...) / (ms · 1e-3) / 1e12`.",
            "Unfused: `max(flops / peak, (4N² + 4Nd)·bytes·B·H / bandwidth)`; fused: the same "
            "with 4Nd. The ratio of the two is the estimate.",
        ),
        required=("grid", "smem_bytes", "largest_block_n", "flops", "tflops", "expected_speedup"),
        checks=(
            Check("grid", "launch grid", collect=_collect_compose, judge=_check_grid),
            Check("smem", "shared memory of one program", collect=_collect_compose,
                  judge=_check_smem),
            Check("block-n", "the largest BLOCK_N the shared memory allows",
                  collect=_collect_compose, judge=_check_block_n),
            Check("flops", "benchmark FLOP count", collect=_collect_compose, judge=_check_flops),
            Check("tflops", "TFLOP/s from a time", collect=_collect_compose,
                  judge=_check_tflops),
            Check("speedup", "the roofline's expected speed-up over unfused attention",
                  collect=_collect_compose, judge=_check_speedup),
        ) + BENCH_CHECKS)
    return Exercise(
        id="triton", title="Port FlashAttention to Triton", tier="gpu", minutes=120,
        summary=("Write the Triton kernel's body and its autograd wrapper, grade it with the CPU "
                 "interpreter or a GPU; here, check one program's logic in NumPy, size its "
                 "blocks from shared memory, and predict its speed-up before you measure it."),
        steps=(port, compose),
        sources=("Dao 2023, FlashAttention-2, arXiv:2307.08691 (loop order, exp2, causal "
                 "block skipping)",
                 "Dao et al. 2022, FlashAttention, arXiv:2205.14135"),
        extra={"panels": [_starter_panel()],
               "check_command": CHECK_COMMAND,
               "results": RESULTS_PATH,
               "js_modules": ["js/exercises/triton.js"]})
