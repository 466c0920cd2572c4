import numpy as np


def slope(xs, ys):
    # SOLUTION BEGIN
    # """Least-squares slope of log(ys) against log(xs): the exponent of a power law."""  STARTER
    # SOLUTION END
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def probe(io_model, h200):
    # SOLUTION BEGIN
    # """Measure the exponents of FlashAttention's forward HBM accesses with the IO model, and  STARTER
    # set the model's Figure 2 beside what an H200 measured.  STARTER
# STARTER
    # Use io_model.flash_accesses(n_q, n_k, d, sram_elems) (forward, elements) and return  STARTER
      # slope_n: N in (1024, 2048, 4096, 8192, 16384), d = 64, M = 98304  STARTER
      # slope_m: M in (16384, 32768, 65536, 131072), N = 4096, d = 64  STARTER
      # slope_d: d in (16, 32, 64, 128), N = 4096, M = 98304  STARTER
      # figure2_ratio: standard_gb / flash_gb of io_model.figure2()  STARTER
      # baseline_ratio: baseline_standard_gb / baseline_flash_gb of io_model.figure2()  STARTER
      # measured_ratio: h200["baseline"]["hbm_gb"] / h200["triton"]["hbm_gb"]  STARTER
      # measured_speedup: h200["baseline"]["runtime_ms"] / h200["triton"]["runtime_ms"]  STARTER
    # """  STARTER
    # raise NotImplementedError("probe: call io_model, fit the slopes, read h200")  STARTER
    ns = [1024, 2048, 4096, 8192, 16384]
    ms = [16384, 32768, 65536, 131072]
    ds = [16, 32, 64, 128]
    fig = io_model.figure2()
    return {
        "slope_n": slope(ns, [io_model.flash_accesses(n, n, 64, 98304) for n in ns]),
        "slope_m": slope(ms, [io_model.flash_accesses(4096, 4096, 64, m) for m in ms]),
        "slope_d": slope(ds, [io_model.flash_accesses(4096, 4096, d, 98304) for d in ds]),
        "figure2_ratio": fig["standard_gb"] / fig["flash_gb"],
        "baseline_ratio": fig["baseline_standard_gb"] / fig["baseline_flash_gb"],
        "measured_ratio": h200["baseline"]["hbm_gb"] / h200["triton"]["hbm_gb"],
        "measured_speedup": h200["baseline"]["runtime_ms"] / h200["triton"]["runtime_ms"],
    }
    # SOLUTION END
