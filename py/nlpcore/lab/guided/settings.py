"""The sizes the guided lab's steps use, named once: the statements (steps/*.md) refer to them as
``{NAME}`` and the checkers compute their truths from them."""
from __future__ import annotations

from ... import hardware
from ...kernels import tiling
from ...kernels.tiling import CHUNK4, KEY_STEP, WEBGPU_DEFAULT_STORAGE

# The visualizer setting of the causal-skip step (visualizer.html?n=24&d=4&m=64&causal=1).
VIZ_N, VIZ_D, VIZ_M = 24, 4, 64
# The IO-model step: the paper's M (an A100 SM's 192 KB of L1 + shared memory, in fp16).
IO_N, IO_D, IO_M = 4096, 64, hardware.A100_SRAM_FP16_ELEMENTS
# The small-M step: the smallest power of two M at which tiling moves less than standard.
SMALL_M_N, SMALL_M_D = 256, 64
TILE_D = 128  # the tile-bytes step: a d whose plan differs from the default d = 64's
REFUSE_D = 1024  # the refusal step
TIMING_SIZES = (64, 256, 1024)  # the timing widget's default sequence lengths
TIMING_D = 64
NUMBER_RTOL = 0.05  # "within 5 %" for measured numbers

OK_STATUSES = ("match", "no-webgpu")  # a comparison whose numbers may be copied


def fields() -> dict:
    """The values a statement may name as ``{NAME}``."""
    return {
        "WEBGPU_DEFAULT_STORAGE": WEBGPU_DEFAULT_STORAGE, "TILE_D": TILE_D, "REFUSE_D": REFUSE_D,
        "REFUSE_ROW_BYTES": 4 * REFUSE_D,  # one float32 row of K at d = REFUSE_D
        "KEY_STEP": KEY_STEP,  # keys a shader tile takes at a time (one vec4 of scores)
        "TILE_KS": tiling.plan(TILE_D).ks,  # invocations a query row at d = TILE_D
        "PLAN_CHUNK_D": 4 * CHUNK4,  # head dims one invocation holds (CHUNK4 vec4 slots)
        "VIZ_N": VIZ_N, "VIZ_D": VIZ_D, "VIZ_M": VIZ_M, "IO_N": IO_N, "IO_D": IO_D, "IO_M": IO_M,
        "SMALL_M_N": SMALL_M_N, "SMALL_M_D": SMALL_M_D, "TIMING_D": TIMING_D,
        "H200_FP32_TFLOPS": hardware.as_dict()["h200_fp32_tflops"],
    }
