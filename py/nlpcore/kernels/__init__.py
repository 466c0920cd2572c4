"""Attention kernels: the naive oracle, the online-softmax monoid, tiled FlashAttention and its
IO model, the WGSL shader's plan and twin, the monoid across blocks and devices (split-K
decoding, ring attention), and the Triton port.

Import rule (``tests/test_kernel_imports.py`` holds every module to it). The modules sit in
layers, listed bottom first below; a module imports from this package only modules of layers
below its own, and the browser layers come below the native ones:

- a browser module runs inside Pyodide, so it imports nothing but the standard library, NumPy
  and the modules below it — never torch, triton or a native module; ``flash_wgpu`` (CPython
  only) imports wgpu inside the function that needs it, so importing it costs nothing.
- a native module needs torch and triton (an NVIDIA GPU, or Triton's CPU interpreter); it may
  import any browser module, and no browser module imports it.
- outside this package a kernel imports only ``nlpcore.hardware`` (the figures of real GPUs)
  and ``nlpcore.shaders`` (the WGSL sources with their ``#include`` lines resolved; standard
  library only), and this ``__init__`` imports nothing, so ``import nlpcore.kernels`` loads no
  kernel.

A new module goes into the lowest layer above everything it imports.
"""

# Browser layers, bottom first: NumPy only.
BROWSER_LAYERS = (
    ("_checks", "dropout"),  # input checks; the keep-mask hash
    ("io_model", "online_softmax", "reference", "tiling"),  # HBM traffic; the monoid; the oracle; the tile plan
    ("flash_wgsl_mirror", "trace"),  # the shader's NumPy twin; counted tile moves
    # tiled attention; the shader via wgpu-py; the int8 shader's twin; the benchmark variants' twins (experiments)
    ("flash_np", "flash_wgpu", "flash_wgsl_int8", "flash_wgsl_variants"),
    ("split_k", "flash_wgsl_int8pv"),  # split-K decoding: flash_np's partials merged by the monoid; the staged int8 variant's twin (an experiment)
    ("ring",),  # ring attention over split_k's partials
)

# Native layers, above every browser layer: torch and triton.
NATIVE_LAYERS = (
    # the hash in registers; Flash-Decoding; tile sizes; FlashAttention-3's Hopper kernel (Gluon)
    ("dropout_triton", "split_k_triton", "triton_tuning", "flash_fa3_gluon"),
    ("flash_triton_bwd",),  # the backward kernels
    ("flash_triton",),  # the forward kernel and the wrappers (forward, backward, attention)
    ("flash_fa3",),  # FlashAttention-3's wrapper (falls back to flash_triton)
)
# The Triton exercise's grader, check_triton, lives in its exercise folder
# (nlpcore.lab.exercises.triton.check_triton), not here.

# What a kernel may import from nlpcore outside this package.
OUTSIDE = ("nlpcore.hardware", "nlpcore.shaders")
