"""How the Triton kernels pick their tile sizes: the autotuning space, its pruning, its key.

What you will learn here: a Triton kernel's speed depends on launch parameters that do not
change its result — rows per query tile (BLOCK_M), rows per key tile (BLOCK_N), warps per
program and software-pipeline depth (num_stages). ``triton.autotune`` compiles and times each
candidate once per *tuning key* and keeps the fastest. Three choices keep that search honest:

- a small space per kernel, measured on the H200 (bench/TRITON.md), searched only where it
  pays (16-bit inputs with d >= 64, the benchmarked case);
- a pruning rule that drops the candidates the sweeps saw lose clearly (:func:`fits`), so a
  noisy first timing cannot pick them;
- a key that includes the problem's size class (:func:`size_class`), so the tiles chosen for a
  small check are not reused for a large benchmark.

Under ``TRITON_INTERPRET=1`` (the CPU interpreter, for tests) each kernel gets one small config,
chosen so that the test sizes cover several blocks, ragged ends and the causal diagonal.

Also here: the tensor descriptors the kernels load tiles through (TMA, Hopper's copy engine),
whose block shape depends on the config, and the config pre-hook that sets it.

Dependency rule: needs triton; imported by the Triton kernels (``flash_triton``), never by a
module the browser runs.
"""

from __future__ import annotations

import os

import triton

__all__ = [
    "INTERPRET", "FWD_SPACE", "BWD_SPACE", "DQ_SPACE", "FP32_FWD", "FP32_BWD", "FP32_DQ",
    "INTERPRET_FWD", "INTERPRET_BWD", "INTERPRET_DQ", "FWD_CONFIGS", "FWD_PRUNE", "BWD_CONFIGS",
    "BWD_PRUNE", "DQ_CONFIGS", "DQ_PRUNE", "TUNE_KEY", "RUNTIME_INTS",
    "config", "space", "fits", "size_class", "descriptor", "set_block_shapes",
]

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

# --- the space ------------------------------------------------------------------------------
# Each entry is (BLOCK_M, BLOCK_N, num_warps, num_stages). BLOCK_M counts query rows and BLOCK_N
# key rows of one tile; num_stages is the depth of Triton's software pipeline (how many K/V or
# Q/dO tiles are in flight in shared memory). Every entry is compiled and timed once per tuning
# key on first use. Smaller heads take the first entry; fp32 inputs (exact fp32 products, twice
# the bytes per tile) take a smaller tile that fits shared memory. The entries come from sweeps
# on an H200 (bench/TRITON.md).
FWD_SPACE = [(128, 128, 8, 3), (128, 64, 8, 3), (128, 64, 4, 4)]
BWD_SPACE = [(64, 128, 8, 3), (64, 64, 4, 3), (64, 128, 8, 2)]  # dK/dV: BLOCK_N keys resident
DQ_SPACE = [(128, 64, 8, 2), (128, 32, 4, 3), (64, 64, 4, 3)]  # dQ: BLOCK_M queries resident
FP32_FWD, FP32_BWD, FP32_DQ = (64, 32, 4, 2), (32, 64, 4, 2), (64, 32, 4, 2)
INTERPRET_FWD, INTERPRET_BWD, INTERPRET_DQ = (32, 16, 4, 1), (16, 32, 4, 1), (32, 16, 4, 1)

# --- the key --------------------------------------------------------------------------------
# The autotuner keeps one config per key. The key holds the problem's size class (log2 buckets of
# B·H·Nq and of Nk, see size_class): without it the first call's size chose the tiles for every
# later size — a small check before a benchmark once pinned 8-warp dK/dV tiles that cost the
# Figure 2 step 0.37 ms (bench/IO_H200.md). Each kernel adds its own switches to it.
TUNE_KEY = ["HEAD_DIM", "CAUSAL", "PRECISION", "DROPOUT", "size_class"]
# Integer arguments that must stay runtime values: Triton specialises an int argument equal to 1
# (and marks one divisible by 16), so a seed key or size class that happened to be one would
# compile another variant of the kernel.
RUNTIME_INTS = ["seed_key", "thresh", "size_class"]


def size_class(bh: int, n_q: int, n_k: int) -> int:
    """The autotuner's size key: ceil(log2) of B·H·Nq (how many query rows, so how many programs)
    and of Nk, packed in one int. Calls in one class share a config; a new class is tuned once."""
    return 64 * (bh * n_q - 1).bit_length() + (n_k - 1).bit_length()


def set_block_shapes(nargs):
    """Config pre-hook: descriptor block shapes follow the config's BLOCK_M/BLOCK_N; an atomic
    dQ buffer is zeroed before every launch (autotuning launches the kernel several times)."""
    d = nargs["HEAD_DIM"]
    for name, rows in (("Q", "BLOCK_M"), ("O", "BLOCK_M"), ("DO", "BLOCK_M"), ("DQ", "BLOCK_M"),
                       ("K", "BLOCK_N"), ("V", "BLOCK_N"), ("DK", "BLOCK_N"), ("DV", "BLOCK_N")):
        t = nargs.get(name)
        if hasattr(t, "block_shape"):
            t.block_shape = [1, nargs[rows], d]
    if nargs.get("ATOMIC_DQ", 0):
        dq = nargs["DQ"]
        (dq.base if hasattr(dq, "base") else dq).zero_()


def descriptor(t):
    """A tensor descriptor over the contiguous (B·H, N, d) view of t (B, H, N, d); the block
    shape is set per autotuning config by :func:`set_block_shapes`."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    t3 = t.reshape(-1, t.shape[2], t.shape[3])
    return TensorDescriptor(t3, list(t3.shape), list(t3.stride()), [1, 16, t3.shape[2]])


def config(entry) -> "triton.Config":
    """One (BLOCK_M, BLOCK_N, num_warps, num_stages) entry as a triton.Config."""
    bm, bn, w, s = entry
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s,
                         pre_hook=set_block_shapes)


def fits(config, head_dim: int) -> bool:
    """Entries the H200 sweeps saw lose clearly for this head dim (timing noise on a short first
    call could otherwise pick them): 4 warps at d = 128 (up to 2.4x slower: too few registers
    per thread for (rows, 128) fp32 accumulators), and 128-key forward tiles at d = 64."""
    kw = config.kwargs
    if head_dim >= 128 and config.num_warps < 8:
        return False
    if head_dim == 64 and kw["BLOCK_M"] == 128 and kw["BLOCK_N"] == 128:
        return False
    return True


def space(entries, fp32_entry, interpret_entry):
    """The configs of one kernel, and the pruning rule that narrows them per call (the
    ``prune_configs_by`` argument of ``triton.autotune``; None under the interpreter)."""
    if INTERPRET:
        return [config(interpret_entry)], None

    def prune(configs, named_args, **kwargs):
        args = {**named_args, **kwargs}
        if args["PRECISION"] == "ieee":
            return [config(fp32_entry)]
        if args["HEAD_DIM"] < 64:
            return configs[:1]
        keep = [c for c in configs if fits(c, args["HEAD_DIM"])]
        return keep or configs[:1]

    return [config(e) for e in entries], {"early_config_prune": prune}


FWD_CONFIGS, FWD_PRUNE = space(FWD_SPACE, FP32_FWD, INTERPRET_FWD)
BWD_CONFIGS, BWD_PRUNE = space(BWD_SPACE, FP32_BWD, INTERPRET_BWD)
DQ_CONFIGS, DQ_PRUNE = space(DQ_SPACE, FP32_DQ, INTERPRET_DQ)
