"""One launch each of the kernels bench/FA3.md profiles with Nsight Compute (run under ncu):

    ncu --clock-control none -k regex:'fa3_fwd|fprop|sdpa' --section SpeedOfLight \\
        --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \\
        --csv --page raw python3 bench/fa3_ncu.py

bf16, the benchmark's shapes: FlashAttention-3 (full) and cuDNN at d = 64, N = 4096, causal
(where our forward trails cuDNN), and FlashAttention-3 at d = 128, N = 16384 (where it leads).
Each kernel runs once, in the variant flash_fa3.choose picks for its shape.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "py"))

import torch  # noqa: E402

import triton_h200 as tb  # noqa: E402
from nlpcore.kernels import flash_fa3  # noqa: E402

for d, n, causal, who in ((64, 4096, True, "fa3"), (64, 4096, True, "cudnn"), (128, 16384, False, "fa3"),
                          (128, 16384, False, "cudnn")):
    q, k, v = tb.inputs(tb.TOKENS // n, tb.HIDDEN // d, n, d, seed=1)[:3]
    if who == "fa3":
        flash_fa3.forward(q, k, v, causal=causal, fallback=False)
    else:
        with tb.sdpa_kernel(tb.BACKENDS["cudnn"]), torch.no_grad():
            tb.sdpa(q, k, v, is_causal=causal)
    torch.cuda.synchronize()
    print(f"launched {who} d={d} N={n} causal={causal}", flush=True)
