"""Pins the workaround in tests/conftest.py: Triton loaded before wgpu-py's lavapipe device works.

The subprocess does what the suite does in one process: import triton, run the WGSL kernel on
lavapipe through wgpu-py, then run a Triton kernel (interpreter on CPU).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="needs the triton extra")
pytest.importorskip("triton", reason="needs the triton extra")
pytest.importorskip("wgpu", reason="needs wgpu-py")

SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import triton, triton.language as tl, torch
import numpy as np
from nlpcore.kernels import flash_wgpu

q = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
o, lse = flash_wgpu.forward(q, q, q)
assert o.shape == (8, 16)

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x + 1, mask=offs < n)

x = torch.zeros(5)
add_one[(1,)](x, 5, BLOCK=8)
assert x.tolist() == [1.0] * 5
print("ok")
"""


def test_triton_then_wgpu_in_one_process():
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, "exit {}: {}".format(out.returncode, out.stderr[-2000:])
    assert out.stdout.strip().endswith("ok")
