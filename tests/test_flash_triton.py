"""The Triton FlashAttention (nlpcore.kernels.flash_triton) under Triton's CPU interpreter.

Oracles, each independent of the kernel: a float64 PyTorch computation written here, the NumPy
reference nlpcore.kernels.reference (float64), and torch's scaled_dot_product_attention.
Sizes are small (the interpreter is slow) and chosen against the interpreter's block sizes
(BLOCK_M=32, BLOCK_N=16 forward): one partial block (N=1, 17), exact blocks (N=64), ragged
tails (N=100), causal diagonals, Nq != Nk. The same checks at full sizes on an H200 run in
bench/triton_h200.py (see bench/TRITON.md).

Skips, with the reason, when torch or triton is not installed.
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the Triton port needs PyTorch (pip install -e '.[triton]')")
if not torch.cuda.is_available():
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
pytest.importorskip("triton", reason="the Triton port needs Triton (pip install -e '.[triton]')")

from nlpcore import tolerances  # noqa: E402
from nlpcore.kernels import reference  # noqa: E402
from nlpcore.lab.exercises.triton import check_triton  # noqa: E402
from nlpcore.kernels import flash_triton as ft  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE = "cpu" if ft.INTERPRET else "cuda"

# Tolerances (nlpcore.tolerances, the grader's own): float32, |got - ref| <= atol + rtol · max|ref|
# against float64 (TRITON_FLOAT32); float16, the low-precision bar check_triton.flash_bound.


def ref64(q, k, v, do, causal, scale=None):
    """Float64 attention written out (S and P materialised), with autograd for the gradients."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale  # (B, H, Nq, Nk)
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()  # j <= i, top-left aligned
        s = s.masked_fill(~keep, float("-inf"))
    o = torch.softmax(s, -1) @ v
    o.backward(do.double())
    return o.detach(), torch.logsumexp(s, -1).detach(), (q.grad, k.grad, v.grad)


def assert_close(name, got, want, dtype, kind, plain=None, inputs=""):
    """Shape, no NaN, and the dtype's bar (nlpcore.tolerances.compare); the message names max
    |Δ|, where, and the inputs."""
    want = want.detach()
    if dtype == torch.float32:
        bound = tolerances.TRITON_FLOAT32[kind].bound(float(want.abs().max()))
    else:
        bound = check_triton.flash_bound(plain, want)
    verdict = tolerances.compare(got.detach().double().cpu().numpy(), want.double().cpu().numpy(), bound)
    assert verdict.ok, f"{name}: {verdict.problem} (max|Δ| {verdict.max_err:.3g}, bound {bound:.3g}; {inputs})"
    return verdict.max_err


def make(b, h, n_q, n_k, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=g)
    k = torch.randn(b, h, n_k, d, generator=g)
    v = torch.randn(b, h, n_k, d, generator=g)
    do = torch.randn(b, h, n_q, d, generator=g)
    return [t.to(DEVICE, dtype) for t in (q, k, v, do)]


CASES = [(n, d, causal) for n in (1, 17, 64, 100) for d in (16, 32, 64) for causal in (False, True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("n,d,causal", CASES, ids=[f"N{n}-d{d}-{'causal' if c else 'full'}" for n, d, c in CASES])
def test_forward_backward_match_float64(n, d, causal, dtype):
    q, k, v, do = make(1, 2, n, n, d, dtype, seed=n * 1000 + d + causal)
    inputs = f"B=1 H=2 N={n} d={d} causal={causal} {dtype}"
    o, lse = ft.forward(q, k, v, causal=causal)
    dq, dk, dv = ft.backward(q, k, v, o, lse, do, causal=causal)
    want_o, want_lse, want_grads = ref64(q, k, v, do, causal)
    plain_o = plain_grads = None
    if dtype != torch.float32:
        plain_o, plain_grads = check_triton.plain(q, k, v, do, causal=causal)
    assert o.dtype == dtype and lse.dtype == torch.float32 and lse.shape == (1, 2, n)
    assert_close("o", o, want_o, dtype, "o", plain_o, inputs)
    assert_close("lse", lse, want_lse, torch.float32, "lse", inputs=inputs)  # always fp32
    for name, got, want, pl in zip(("dq", "dk", "dv"), (dq, dk, dv), want_grads, plain_grads or (None,) * 3):
        assert got.dtype == dtype
        assert_close(name, got, want, dtype, "grad", pl, inputs)


@pytest.mark.parametrize("use_tma,dq_strategy", [(False, "separate"), (False, "atomic"), (True, "atomic")],
                         ids=["pointers", "pointers-atomic-dq", "tma-atomic-dq"])
@pytest.mark.parametrize("n,causal,dtype", [(100, True, torch.float32), (77, False, torch.float32),
                                            (64, True, torch.float16)])
def test_every_code_path(monkeypatch, use_tma, dq_strategy, n, causal, dtype):
    """The default path (tensor descriptors, dQ by a second kernel here) is covered above; this
    covers plain pointer loads and atomic dQ accumulation the same way."""
    monkeypatch.setattr(ft, "USE_TMA", use_tma)
    monkeypatch.setattr(ft, "DQ_STRATEGY", dq_strategy)
    q, k, v, do = make(1, 2, n, n, 32, dtype, seed=n + 5)
    inputs = f"N={n} causal={causal} {dtype} tma={use_tma} dq={dq_strategy}"
    o, lse = ft.forward(q, k, v, causal=causal)
    grads = ft.backward(q, k, v, o, lse, do, causal=causal)
    want_o, want_lse, want_grads = ref64(q, k, v, do, causal)
    plain_o, plain_grads = check_triton.plain(q, k, v, do, causal=causal) if dtype != torch.float32 else (None, None)
    assert_close("o", o, want_o, dtype, "o", plain_o, inputs)
    assert_close("lse", lse, want_lse, torch.float32, "lse", inputs=inputs)
    for name, got, want, pl in zip(("dq", "dk", "dv"), grads, want_grads, plain_grads or (None,) * 3):
        assert_close(name, got, want, dtype, "grad", pl, inputs)


def test_unknown_dq_strategy(monkeypatch):
    monkeypatch.setattr(ft, "DQ_STRATEGY", "magic")
    q = _q(1, 1, 8, 16)
    o, lse = ft.forward(q, q, q)
    with pytest.raises(ValueError, match="DQ_STRATEGY must be"):
        ft.backward(q, q, q, o, lse, o)


@pytest.mark.parametrize("n_q,n_k,causal", [(37, 80, True), (80, 37, True), (33, 70, False), (100, 16, True)])
def test_nq_differs_from_nk(n_q, n_k, causal):
    q, k, v, do = make(2, 1, n_q, n_k, 32, torch.float32, seed=n_q + n_k)
    inputs = f"Nq={n_q} Nk={n_k} causal={causal}"
    o, lse = ft.forward(q, k, v, causal=causal)
    grads = ft.backward(q, k, v, o, lse, do, causal=causal)
    want_o, want_lse, want_grads = ref64(q, k, v, do, causal)
    assert_close("o", o, want_o, torch.float32, "o", inputs=inputs)
    assert_close("lse", lse, want_lse, torch.float32, "lse", inputs=inputs)
    for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
        assert_close(name, got, want, torch.float32, "grad", inputs=inputs)


@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_reference(causal):
    """The NumPy oracle of the whole package agrees, forward and backward."""
    q, k, v, do = make(1, 2, 50, 50, 32, torch.float32, seed=7)
    o, lse = ft.forward(q, k, v, causal=causal)
    dq, dk, dv = ft.backward(q, k, v, o, lse, do, causal=causal)
    qn, kn, vn, don = (t.cpu().double().numpy() for t in (q, k, v, do))
    want_o, want_lse = reference.forward(qn, kn, vn, causal=causal)
    want_grads = reference.backward(qn, kn, vn, want_o, want_lse, don, causal=causal)
    assert_close("o", o, torch.from_numpy(want_o), torch.float32, "o")
    assert_close("lse", lse, torch.from_numpy(want_lse), torch.float32, "lse")
    for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), want_grads):
        assert_close(name, got, torch.from_numpy(np.ascontiguousarray(want)), torch.float32, "grad")


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_matches_sdpa(causal):
    """attention() as a torch.autograd.Function against torch's own SDPA (math backend on CPU)."""
    q, k, v, do = make(2, 2, 45, 45, 64, torch.float32, seed=11)
    mine = [t.clone().requires_grad_() for t in (q, k, v)]
    theirs = [t.clone().requires_grad_() for t in (q, k, v)]
    o = ft.attention(*mine, causal=causal)
    o.backward(do)
    o_sdpa = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal)
    o_sdpa.backward(do)
    assert_close("o", o, o_sdpa.double(), torch.float32, "o")
    for name, a, b in zip(("dq", "dk", "dv"), mine, theirs):
        assert_close(name, a.grad, b.grad.double(), torch.float32, "grad")


def test_scale_and_strided_inputs():
    """A non-default scale, and q, k, v viewed from a (B, N, H, d) layout (not contiguous)."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(3, 2, 40, 2, 16, generator=g).to(DEVICE)  # (qkv, B, N, H, d)
    q, k, v = (t.transpose(1, 2) for t in base)  # (B, H, N, d) views
    assert not q.is_contiguous()
    do = torch.randn(2, 2, 40, 16, generator=g).to(DEVICE)
    o, lse = ft.forward(q, k, v, causal=True, scale=0.3)
    grads = ft.backward(q, k, v, o, lse, do, causal=True, scale=0.3)
    want_o, want_lse, want_grads = ref64(q, k, v, do, True, scale=0.3)
    assert_close("o", o, want_o, torch.float32, "o")
    assert_close("lse", lse, want_lse, torch.float32, "lse")
    for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
        assert_close(name, got, want, torch.float32, "grad")


def _q(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(DEVICE, dtype)


@pytest.mark.parametrize("args,error,words", [
    ((_q(2, 16, 16), _q(2, 16, 16), _q(2, 16, 16)), ValueError, "q must have shape (B, H, N, d)"),
    (([[1.0]], _q(1, 1, 4, 16), _q(1, 1, 4, 16)), TypeError, "q must be a torch.Tensor"),
    ((_q(1, 1, 4, 16), _q(1, 1, 4, 16, dtype=torch.float16), _q(1, 1, 4, 16)), TypeError, "share one dtype"),
    ((_q(1, 1, 4, 16).int(), _q(1, 1, 4, 16).int(), _q(1, 1, 4, 16).int()), TypeError, "q must be float16"),
    ((_q(1, 1, 4, 48), _q(1, 1, 4, 48), _q(1, 1, 4, 48)), ValueError, "head dim d must be one of"),
    ((_q(1, 1, 4, 16), _q(1, 1, 4, 32), _q(1, 1, 4, 32)), ValueError, "k must have shape (B, H, Nk, d)"),
    ((_q(1, 1, 4, 16), _q(1, 1, 5, 16), _q(1, 1, 6, 16)), ValueError, "v must have k's shape"),
    ((_q(1, 2, 4, 16), _q(1, 1, 4, 16), _q(1, 1, 4, 16)), ValueError, "k and v must have q's (B, H)"),
    ((_q(1, 1, 0, 16), _q(1, 1, 4, 16), _q(1, 1, 4, 16)), ValueError, "sequence lengths must be >= 1"),
])
def test_bad_inputs_name_the_argument(args, error, words):
    with pytest.raises(error, match=re.escape(words)):
        ft.forward(*args)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), "0.5", True])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        ft.forward(_q(1, 1, 4, 16), _q(1, 1, 4, 16), _q(1, 1, 4, 16), scale=scale)


def test_backward_checks_lse_and_do():
    q = _q(1, 1, 8, 16)
    o, lse = ft.forward(q, q, q)
    with pytest.raises(ValueError, match=r"lse must be a tensor of shape \(B, H, Nq\)"):
        ft.backward(q, q, q, o, lse[..., :4], o)
    with pytest.raises(ValueError, match="do must have q's shape"):
        ft.backward(q, q, q, o, lse, o[..., :4, :])


@pytest.mark.skipif(DEVICE != "cpu", reason="the interpreter's bfloat16 limitation only")
def test_bfloat16_refused_under_interpreter():
    """Pins the workaround: the interpreter's tl.dot is wrong for bfloat16, so we refuse it."""
    x = _q(1, 1, 16, 16, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="bfloat16 is not supported under TRITON_INTERPRET=1"):
        ft.forward(x, x, x)


def test_import_without_torch_or_triton_says_what_to_install():
    code = ("import sys; sys.modules['triton'] = None\n"
            "try:\n    import nlpcore.kernels.flash_triton\n"
            "except ImportError as e:\n    print('MSG', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert "MSG nlpcore.kernels.flash_triton needs PyTorch and Triton" in out.stdout, out.stdout + out.stderr
    assert "pip install" in out.stdout


def test_nothing_else_in_nlpcore_imports_the_triton_port():
    """The browser has no torch: only check_triton (a CLI) may import flash_triton, and only the
    native kernels (nlpcore.kernels.NATIVE_LAYERS: flash_triton, the modules it is split into,
    split_k_triton, ...) import torch or triton. tests/test_kernel_imports.py checks the layers
    inside kernels/."""
    from nlpcore import kernels

    native = {f"kernels/{name}.py" for layer in kernels.NATIVE_LAYERS for name in layer}
    allowed = native | {"lab/exercises/triton/check_triton.py",
                        "lab/exercises/triton/kernel_starter.py",  # the learner's kernel, never imported
                        "lab/exercises/triton/kernel_solution.py"}
    offenders = []
    for path in (ROOT / "py" / "nlpcore").rglob("*.py"):
        if path.relative_to(ROOT / "py" / "nlpcore").as_posix() in allowed:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*(from\s+\S*(flash|split_k)_triton\S*\s+import|import\s+\S*(flash|split_k)_triton)", text, re.M) \
                or re.search(r"^\s*(import\s+(torch|triton)|from\s+(torch|triton)\b)", text, re.M):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"these modules import torch/triton/flash_triton: {offenders}"


# --- the exercise: the grader passes the solution, fails the starter, passes the marked solution
EXERCISE = ROOT / "py" / "nlpcore" / "lab" / "exercises" / "triton"
STARTER = EXERCISE / "kernel_starter.py"
KERNEL_SOLUTION = EXERCISE / "kernel_solution.py"


def _grade(path, capsys):
    status = check_triton.main(([str(path)] if path else []) + ["--device", DEVICE])
    return status, capsys.readouterr().out


def test_grader_passes_the_solution(capsys):
    status, out = _grade(None, capsys)
    assert status == 0, out
    assert "FAIL" not in out and "ERROR" not in out
    assert re.search(r"(\d+)/\1 checks passed", out), out


def test_the_starter_is_generated_from_the_marked_solution():
    from nlpcore.lab.exercises.triton import starter
    assert STARTER.read_text(encoding="utf-8") == starter.generated(), \
        "kernel_starter.py is stale: run python -m nlpcore.lab.exercises.triton.starter"


def test_the_learner_writes_the_kernel_body_and_the_autograd_wrapper():
    from nlpcore.lab.model import solution_text
    starter, solution = STARTER.read_text(encoding="utf-8"), solution_text(KERNEL_SOLUTION.read_text(encoding="utf-8"))
    for line in ("m_new = tl.maximum(m_i, tl.max(s, 1))", "alpha = tl.exp2(m_i - m_new)",
                 "lse = (m_i + tl.log2(l_i)) * LN2", "ctx.save_for_backward(q, k, v, o, lse)",
                 "grid = (triton.cdiv(n_q, BLOCK_M), b * h)",
                 "dq = dq + tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)"):
        assert line in solution and line not in starter, line
    # The forward kernel's body is the learner's: no load, loop or causal bound is given.
    fwd = starter[starter.index("def _fwd_kernel"):starter.index("def _bwd_dkdv_kernel")]
    for given in ("tl.load", "for start_n", "CAUSAL else", "tl.dot", "tl.exp2"):
        assert given not in fwd, given
    assert "NotImplementedError" in starter


def test_grader_fails_the_starter_and_passes_the_solution(capsys, tmp_path):
    from nlpcore.lab.model import solution_text
    status, out = _grade(STARTER, capsys)
    assert status == 1 and "FAIL" in out, out
    assert "forward o · ragged N=100, d=32" in out  # names the case that failed
    assert "autograd attention()" in out
    path = tmp_path / "my_flash.py"
    path.write_text(solution_text(KERNEL_SOLUTION.read_text(encoding="utf-8")), encoding="utf-8")
    status, out = _grade(path, capsys)
    assert status == 0, out


# A Triton kernel that does nothing useful: launching it is not computing attention with it.
TOUCH = """import torch, triton, triton.language as tl
from nlpcore.lab.exercises.triton import check_triton


@triton.jit
def _touch(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


def _launch(t):
    _touch[(1,)](t)


def _torch_attention(q, k, v, causal, dtype):
    s = (q.to(dtype) @ k.to(dtype).transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.to(dtype), torch.logsumexp(s, -1)


def backward(q, k, v, o, lse, do, causal=False, scale=None):
    return q * 0, k * 0, v * 0


def attention(q, k, v, causal=False, scale=None):
    return forward(q, k, v, causal, scale)[0]
"""
SNEAKY_TRITON = {
    "returns the grader's oracle": TOUCH + """
def forward(q, k, v, causal=False, scale=None):
    _launch(q)
    o, lse, _ = check_triton.reference(q, k, v, causal=causal)
    return o.to(q.dtype), lse.float()
""",
    "computes with torch, launches nothing": TOUCH + """
def forward(q, k, v, causal=False, scale=None):
    o, lse = _torch_attention(q, k, v, causal, torch.float32)
    return o.to(q.dtype), lse
""",
    "returns float64": TOUCH + """
def forward(q, k, v, causal=False, scale=None):
    _launch(q)
    return _torch_attention(q, k, v, causal, torch.float64)
""",
}
SNEAKY_VERDICT = {"returns the grader's oracle": "check_triton.reference is the grader's oracle",
                  "computes with torch, launches nothing": "no Triton kernel was launched",
                  "returns float64": "dtype float64, expected float32"}


@pytest.mark.parametrize("name", sorted(SNEAKY_TRITON))
def test_grader_fails_modules_whose_outputs_do_not_come_from_a_triton_kernel(capsys, tmp_path, name):
    path = tmp_path / "sneaky.py"
    path.write_text(SNEAKY_TRITON[name], encoding="utf-8")
    status, out = _grade(path, capsys)
    assert status == 1, out
    assert "0/" in out.splitlines()[-1] or "FAIL" in out, out
    assert SNEAKY_VERDICT[name] in out, out
    passed = re.search(r"(\d+)/\d+ checks passed", out)
    assert passed and int(passed.group(1)) == 0, out      # no forward check passes


def test_grader_refuses_a_module_without_a_triton_kernel(capsys, tmp_path):
    path = tmp_path / "no_kernel.py"
    path.write_text("def forward(q, k, v, causal=False, scale=None):\n    return q, q[..., 0]\n"
                    "def backward(*a, **k):\n    return a[:3]\n"
                    "def attention(q, k, v, causal=False, scale=None):\n    return q\n", encoding="utf-8")
    status, out = _grade(path, capsys)
    assert status == 1 and "defines no Triton kernel" in out, out


def test_grader_reports_a_broken_module(capsys, tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(TOUCH + "def forward(q, k, v, causal=False, scale=None):\n    raise RuntimeError('boom')\n"
                    "def backward(*a, **k):\n    raise RuntimeError('boom')\n"
                    "def attention(*a, **k):\n    raise RuntimeError('boom')\n", encoding="utf-8")
    status, out = _grade(path, capsys)
    assert status == 1
    assert "ERROR" in out and "RuntimeError: boom" in out
    # Deleting the autograd wrapper does not dodge its checks.
    path.write_text(TOUCH.replace("def attention(", "def _not_attention(")
                    + "def forward(*a, **k):\n    pass\n", encoding="utf-8")
    status, out = _grade(path, capsys)
    assert status == 1 and "must define attention(...)" in out
    status, out = _grade(tmp_path / "missing.py", capsys)
    assert status == 1 and "no such file" in out


# --- fused dropout ----------------------------------------------------------------------------
def ref64_dropout(q, k, v, do, causal, keep, p):
    """Float64 attention with the keep-mask applied to P, gradients by autograd."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf"))
    o = (torch.softmax(s, -1) * keep.to(s.device) / (1 - p)) @ v
    o.backward(do.double())
    return o.detach(), torch.logsumexp(s, -1).detach(), (q.grad, k.grad, v.grad)


@pytest.mark.parametrize("shape,p", [((1, 2, 5, 7), 0.5), ((2, 3, 33, 17), 0.1), ((1, 1, 64, 100), 0.9)])
def test_keep_mask_equals_numpy_keep_mask(shape, p):
    from nlpcore.kernels import flash_np

    got = ft.keep_mask(11, shape, p, device=DEVICE).cpu().numpy()
    assert got.dtype == np.bool_ and got.shape == shape
    assert np.array_equal(got, flash_np.keep_mask(11, shape, p))


DROP_CASES = [(45, 45, 16, False), (45, 45, 16, True), (100, 64, 32, True), (17, 70, 32, False)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("n_q,n_k,d,causal", DROP_CASES,
                         ids=[f"{a}x{b}-d{d}-{'causal' if c else 'full'}" for a, b, d, c in DROP_CASES])
def test_dropout_matches_float64_with_the_same_keep_mask(n_q, n_k, d, causal, dtype):
    q, k, v, do = make(1, 2, n_q, n_k, d, dtype, seed=n_q * 7 + n_k + d)
    p, seed = 0.3, 2024
    keep = ft.keep_mask(seed, (1, 2, n_q, n_k), p, device=DEVICE)
    inputs = f"Nq={n_q} Nk={n_k} d={d} causal={causal} {dtype} p={p}"
    o, lse = ft.forward(q, k, v, causal=causal, dropout_p=p, seed=seed)
    grads = ft.backward(q, k, v, o, lse, do, causal=causal, dropout_p=p, seed=seed)
    want_o, want_lse, want_grads = ref64_dropout(q, k, v, do, causal, keep, p)
    plain_o, plain_grads = None, None
    if dtype != torch.float32:
        plain_o, plain_grads = check_triton.plain(q, k, v, do, causal=causal, keep=keep, dropout_p=p)
    assert_close("o", o, want_o, dtype, "o", plain_o, inputs)
    assert_close("lse", lse, want_lse, torch.float32, "lse", inputs=inputs)  # the undropped softmax's
    for name, got, want, pl in zip(("dq", "dk", "dv"), grads, want_grads, plain_grads or (None,) * 3):
        assert_close(name, got, want, dtype, "grad", pl, inputs)
    o0, _ = ft.forward(q, k, v, causal=causal)
    assert float((o.double() - o0.double()).abs().max()) > 1e-2  # dropout did something


def test_dropout_through_autograd_and_every_dq_path(monkeypatch):
    q, k, v, do = make(1, 2, 50, 50, 32, torch.float32, seed=3)
    keep = ft.keep_mask(5, (1, 2, 50, 50), 0.2, device=DEVICE)
    want_o, _, want_grads = ref64_dropout(q, k, v, do, True, keep, 0.2)
    for dq_strategy in ("separate", "atomic"):
        monkeypatch.setattr(ft, "DQ_STRATEGY", dq_strategy)
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        o = ft.attention(*leaves, causal=True, dropout_p=0.2, seed=5)
        o.backward(do)
        assert_close("o", o, want_o, torch.float32, "o", inputs=dq_strategy)
        for name, t, want in zip(("dq", "dk", "dv"), leaves, want_grads):
            assert_close(name, t.grad, want, torch.float32, "grad", inputs=dq_strategy)


def test_dropout_p_zero_is_bit_identical():
    q, k, v, do = make(1, 2, 40, 40, 32, torch.float32, seed=8)
    o, lse = ft.forward(q, k, v, causal=True)
    o0, lse0 = ft.forward(q, k, v, causal=True, dropout_p=0.0, seed=77)
    assert torch.equal(o, o0) and torch.equal(lse, lse0)
    g = ft.backward(q, k, v, o, lse, do, causal=True)
    g0 = ft.backward(q, k, v, o, lse, do, causal=True, dropout_p=0.0, seed=77)
    assert all(torch.equal(a, b) for a, b in zip(g, g0))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"dropout_p": 1.0}, ValueError, r"dropout_p must be in \[0, 1\)"),
    ({"dropout_p": 0.1, "seed": -3}, ValueError, r"seed must be an int in \[0, 2\*\*32\)"),
    ({"dropout_p": None}, TypeError, "dropout_p must be a number"),
])
def test_bad_dropout_arguments(kwargs, error, match):
    q = _q(1, 1, 8, 16)
    with pytest.raises(error, match=match):
        ft.forward(q, q, q, **kwargs)
