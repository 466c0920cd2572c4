import numpy as np


def slope(xs, ys):
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def probe(io_model):
    ns = [1024, 2048, 4096, 8192, 16384]
    ms = [16384, 32768, 65536, 131072]
    ds = [16, 32, 64, 128]
    fig = io_model.figure2()
    return {
        "slope_n": slope(ns, [io_model.flash_accesses(n, n, 64, 98304) for n in ns]),
        "slope_m": slope(ms, [io_model.flash_accesses(4096, 4096, 64, m) for m in ms]),
        "slope_d": slope(ds, [io_model.flash_accesses(4096, 4096, d, 98304) for d in ds]),
        "figure2_ratio": fig["standard_gb"] / fig["flash_gb"],
    }
