"""Suite-wide set-up that must happen before any test module is imported.

Why Triton is imported here, first: Mesa's lavapipe (the Vulkan driver wgpu-py runs on in the
WGSL tests) and Triton's libtriton each carry their own LLVM. When libtriton is loaded into a
process *after* lavapipe has loaded its LLVM, the import segfaults (seen with triton 3.9.0 and
Debian 12's mesa-vulkan-drivers); loaded in the other order both work. pytest imports every
test module during collection, so a WGSL test that opens a device at import time would crash
the Triton tests collected after it. Importing Triton here fixes the order for the whole run;
tests/test_import_order.py pins that the safe order works.

Without a CUDA GPU the Triton tests run under the interpreter, which must be switched on before
triton is first imported.
"""

from __future__ import annotations

import importlib.util
import os

if importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import triton  # noqa: F401  (see the module docstring: load libtriton before lavapipe's LLVM)

import pytest  # noqa: E402  (after the Triton import above, on purpose)


@pytest.fixture(scope="module")
def wgpu_device():
    """Fails (never skips) where wgpu-py has no Vulkan driver: the WGSL tests must run."""
    from nlpcore.kernels import flash_wgpu

    try:
        flash_wgpu.device()
    except (ImportError, RuntimeError) as err:
        pytest.fail("wgpu-py with a Vulkan driver is required: %s" % err)
