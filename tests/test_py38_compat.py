"""nlpcore must run unchanged inside Pyodide 0.17 (Python 3.8, NumPy 1.17).

Two checks: every module parses with Python 3.8's grammar; and, where a Python 3.8 interpreter
with NumPy 1.17.5 has been set up by scripts/setup.sh (.venv38), the core kernels run there.
The browser tests then run the real thing in Pyodide.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY = ROOT / "py"
PY38 = ROOT / ".venv38" / "bin" / "python"


@pytest.mark.parametrize("path", sorted(p.relative_to(PY).as_posix() for p in PY.rglob("*.py")))
def test_module_parses_with_python38_grammar(path):
    source = (PY / path).read_text(encoding="utf-8")
    ast.parse(source, filename=path, feature_version=(3, 8))


SMOKE = r"""
import warnings, numpy as np
warnings.simplefilter("error")
assert np.__version__.startswith("1.17"), np.__version__
from nlpcore.kernels import reference, flash_np, online_softmax, io_model, ring, split_k
rng = np.random.RandomState(0)
q, k, v = rng.randn(2, 13, 5), rng.randn(2, 11, 5), rng.randn(2, 11, 3)
mask = rng.rand(2, 1, 11) > 0.3
mask[0] = False
for order in ("kv_outer", "q_outer"):
    o, lse = flash_np.forward(q, k, v, causal=True, mask=mask, block_q=4, block_k=3, loop_order=order)
    o2, lse2 = reference.forward(q, k, v, causal=True, mask=mask)
    assert np.allclose(o, o2, rtol=0, atol=1e-12), order
    assert np.array_equal(np.isinf(lse), np.isinf(lse2)), order       # empty rows: -inf in both
    finite = np.isfinite(lse2)
    assert np.allclose(lse[finite], lse2[finite], rtol=0, atol=1e-12), order
do = rng.randn(*o.shape)
g = flash_np.backward(q, k, v, o, lse, do, causal=True, mask=mask, block_q=4, block_k=3)
g2 = reference.backward(q, k, v, o2, lse2, do, causal=True, mask=mask)
assert all(np.allclose(a, b, rtol=0, atol=1e-12) for a, b in zip(g, g2))
io = io_model.IOCounter()
flash_np.forward(q[0], k[0], v[0], block_q=2, block_k=4, io=io)
assert io.accesses == io_model.flash_accesses_for_blocks(13, 11, 5, 2, 4, dv=3)
keep = flash_np.keep_mask(1234, (2, 3, 5, 7), 0.5)  # the bits pinned in tests/test_dropout.py
assert np.packbits(keep.ravel()).tolist() == [10, 74, 68, 205, 17, 221, 45, 232, 149, 117, 175, 108, 235, 165, 112, 206, 203, 107, 204, 176, 212, 203, 169, 23, 125, 159, 64]
od, lsed = flash_np.forward(q, k, v, causal=True, block_q=4, block_k=3, dropout_p=0.3, seed=9)
od2, _ = reference.forward(q, k, v, causal=True, keep=flash_np.keep_mask(9, (2, 13, 11), 0.3), dropout_p=0.3)
assert np.allclose(od, od2, atol=1e-12)
print(online_softmax.online_softmax(np.array([[1.0, 2.0, -np.inf]]), 2))
o3, _ = split_k.forward(q, k, v, splits=3, causal=True, mask=mask, order=[2, 0, 1])
assert np.allclose(o3, o2, atol=1e-12)
for layout in ring.LAYOUTS:
    o4, lse4 = ring.forward(q, k, v, devices=3, causal=True, mask=mask, layout=layout)
    assert np.allclose(o4, o2, atol=1e-12), layout
    g4 = ring.backward(q, k, v, o4, lse4, do, devices=3, causal=True, mask=mask, layout=layout)
    assert all(np.allclose(a, b, atol=1e-12) for a, b in zip(g4, g2)), layout
assert ring.idle(ring.work(16, 4, True, "zigzag")).sum() == 0
print("ok")
"""


@pytest.mark.skipif(not PY38.exists(), reason="no .venv38 (Python 3.8 + NumPy 1.17.5); scripts/setup.sh makes it where python3.8 exists")
def test_kernels_run_on_python38_with_numpy117():
    env = {"PYTHONPATH": str(PY), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(PY38), "-c", SMOKE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
