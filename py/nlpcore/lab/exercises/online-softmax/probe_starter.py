import numpy as np


def slope(xs, ys):
    """Least-squares slope of log(ys) against log(xs): the exponent of a power law."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def probe(io_model):
    """Measure the exponents of FlashAttention's forward HBM accesses with the IO model.

    Use io_model.flash_accesses(n_q, n_k, d, sram_elems) (forward, elements) and return
      slope_n: N in (1024, 2048, 4096, 8192, 16384), d = 64, M = 98304
      slope_m: M in (16384, 32768, 65536, 131072), N = 4096, d = 64
      slope_d: d in (16, 32, 64, 128), N = 4096, M = 98304
      figure2_ratio: standard_gb / flash_gb of io_model.figure2()
    """
    raise NotImplementedError("probe: call io_model and fit the slopes")
