"""The true answers that come from the library, computed when an answer is checked (never typed):
the trace of ``flash_np.forward``, ``io_model``'s closed forms and ``tiling.plan``."""
from __future__ import annotations

import numpy as np

from ...kernels import io_model
from .settings import IO_D, IO_M, IO_N, REFUSE_D, SMALL_M_D, SMALL_M_N


def skipped_tiles(n: int, d: int, sram_elems: int) -> int:
    """Tiles the causal forward of flash_np skips, counted from its trace."""
    from ...kernels import flash_np
    br, bc = io_model.block_sizes(sram_elems, d)
    x = np.random.RandomState(0).randn(n, d)
    events = []
    flash_np.forward(x, x, x, causal=True, block_q=br, block_k=bc, trace=events)
    return sum(1 for e in events if e.get("op") == "skip")


def io_ratio() -> float:
    """Standard / tiled forward HBM accesses at (IO_N, IO_D, IO_M), from io_model's closed forms."""
    return (io_model.standard_accesses(IO_N, IO_N, IO_D)
            / float(io_model.flash_accesses(IO_N, IO_N, IO_D, IO_M)))


def io_ratio_shortcut() -> float:
    """The same ratio with the shortcut (4Nd/M)·3Nd for the tiled count (no rounding)."""
    standard = io_model.standard_accesses(IO_N, IO_N, IO_D)
    return standard / (4.0 * IO_N * IO_D / IO_M * 3 * IO_N * IO_D)


def smallest_winning_m(n: int = SMALL_M_N, d: int = SMALL_M_D) -> int:
    """The smallest power of two M at which io_model's tiled forward count is below standard's."""
    standard = io_model.standard_accesses(n, n, d)
    m = 16
    while io_model.flash_accesses(n, n, d, m) >= standard:
        m *= 2
        if m > (1 << 24):
            raise ValueError("no M up to 2^24 makes the tiled kernel win at N=%d, d=%d" % (n, d))
    return m


def plan_refuses(d: int = REFUSE_D) -> bool:
    """Whether tiling.plan refuses head dimension d (float32) within WebGPU's default limit."""
    from ...kernels import tiling
    try:
        tiling.plan(d)
    except ValueError:
        return True
    return False
