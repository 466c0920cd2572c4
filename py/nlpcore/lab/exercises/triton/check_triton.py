"""Grade a Triton FlashAttention against a float64 oracle, one printed verdict per check.

    python -m nlpcore.lab.exercises.triton.check_triton                       # grades nlpcore.kernels.flash_triton
    python -m nlpcore.lab.exercises.triton.check_triton my_flash.py           # grades your module
    python -m nlpcore.lab.exercises.triton.check_triton my_flash.py --device cpu --json

The module under test must define ``forward(q, k, v, causal=False, scale=None) -> (o, lse)``
and ``backward(q, k, v, o, lse, do, causal=False, scale=None) -> (dq, dk, dv)`` on tensors
``(B, H, N, d)``; and ``attention(q, k, v, causal, scale)``, the autograd wrapper, which must exist.
Without a CUDA GPU (or with ``--device cpu``) the kernels run under Triton's CPU interpreter
(``TRITON_INTERPRET=1``, set here before triton is imported): slow, so the sizes are small.

What the grader holds a module to, besides the numbers: it must define at least one Triton
kernel (``@triton.jit``), each call of ``forward``/``backward``/``attention`` must launch one
(launches are counted on Triton's own launch path, compiled and interpreted), it may not call
this grader's ``reference`` or ``plain`` (refused while the module runs, by
:mod:`nlpcore.refusal`), and its outputs
must have the right dtypes: o, dq, dk, dv in the inputs' dtype, lse in float32.

What "correct" means (the bar of the flash-attention test suite):
- float32: max |kernel - ref| <= atol + rtol · max |ref|, ref computed in float64.
- float16/bfloat16: max |kernel - ref| <= 2 · max |plain - ref| + extra, where ``plain`` is
  ordinary PyTorch attention in the same low precision and ``extra`` is twice the rounding
  error of the dtype at the reference's magnitude plus eps/64 of the dtype. A kernel may be as inaccurate as the naive
  computation, up to a factor of two, but no worse.
Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import warnings
from typing import NamedTuple, Optional



def install_hint() -> str:
    """What a user of the nlpcore wheel runs to get PyTorch and Triton: the versions of the
    wheel's ``triton`` extra (from its metadata; plain names where there is none), then the
    exercise's own command (``extra.check_command``, shown on the Triton page)."""
    from .exercise import CHECK_COMMAND
    pins = []
    try:
        from importlib import metadata
        for req in metadata.requires("nlpcore") or ():
            spec, _, marker = req.partition(";")
            if "extra" in marker and "triton" in marker:
                pins.append(spec.strip().replace(" ", ""))
    except Exception:  # no metadata (a source checkout on sys.path): plain names
        pins = []
    return ("python -m pip install %s, then run again: %s"
            % (" ".join(pins or ["torch", "triton"]), CHECK_COMMAND))


try:
    import torch
except ImportError as exc:  # pragma: no cover - only where torch is absent
    raise ImportError("nlpcore.lab.exercises.triton.check_triton needs PyTorch and Triton, "
                      "which the nlpcore wheel does not install: " + install_hint()) from exc

from nlpcore import tolerances  # noqa: E402  (after the torch check, which says what is missing)
from nlpcore import refusal  # noqa: E402

# float32 is compared with float64 directly (tolerances.TRITON_FLOAT32: o, lse, grad); low
# precision by the low-precision bar (tolerances.LOW_PRECISION_FACTOR times the plain error).


def reference(q, k, v, do=None, causal=False, scale=None):
    """Naive attention in float64: S, P materialised. Returns o, lse and (dq, dk, dv) if do.

    q (B, H, Nq, d), k and v (B, H, Nk, d); o (B, H, Nq, d), lse (B, H, Nq), all float64.
    """
    q, k, v = (t.detach().to(torch.float64).requires_grad_(do is not None) for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale  # (B, H, Nq, Nk)
    if causal:
        n_q, n_k = s.shape[-2:]
        allowed = torch.arange(n_k, device=s.device)[None, :] <= torch.arange(n_q, device=s.device)[:, None]
        s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, Nq)
    o = torch.softmax(s, dim=-1) @ v
    if do is None:
        return o.detach(), lse.detach(), None
    o.backward(do.to(torch.float64))
    return o.detach(), lse.detach(), (q.grad, k.grad, v.grad)


def plain(q, k, v, do=None, causal=False, scale=None, keep=None, dropout_p=0.0):
    """Ordinary PyTorch attention in the inputs' own precision (the low-precision yardstick):
    scores and products in q's dtype, softmax in float32 then rounded, as most code does it.
    With ``keep`` (bool, broadcastable to (..., Nq, Nk)), P is replaced by P ∘ keep / (1 − p)."""
    q, k, v = (t.detach().clone().requires_grad_(do is not None) for t in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        n_q, n_k = s.shape[-2:]
        allowed = torch.arange(n_k, device=s.device)[None, :] <= torch.arange(n_q, device=s.device)[:, None]
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s.float(), dim=-1).to(q.dtype)
    if keep is not None:
        p = p * keep.to(p.device) / (1.0 - dropout_p)
    o = p @ v
    if do is None:
        return o.detach(), None
    o.backward(do)
    return o.detach(), (q.grad, k.grad, v.grad)


class _Watch:
    """While a module under test runs: counts Triton kernel launches (``run`` of JITFunction and
    of the interpreter's InterpretedFunction, through which every ``kernel[grid](...)`` goes,
    autotuned or not)."""

    def __init__(self):
        self.launches = 0
        self._patched = []

    def __enter__(self):
        self.launches = 0
        for cls in _launch_classes():
            original = cls.__dict__["run"]
            self._patched.append((cls, original))
            cls.run = self._counting(original)
        return self

    def __exit__(self, *exc):
        while self._patched:
            cls, original = self._patched.pop()
            cls.run = original
        return False

    def _counting(self, original):
        watch = self

        def run(kernel, *args, **kwargs):
            if not kwargs.get("warmup", False):
                watch.launches += 1
            return original(kernel, *args, **kwargs)
        return run


_WATCH = _Watch()


def _launch_classes():
    """Triton's classes whose ``run`` launches a kernel (compiled, and the CPU interpreter's)."""
    classes = []
    try:
        from triton.runtime.jit import JITFunction
        classes.append(JITFunction)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


def _kernels_in(module):
    """Names of the Triton kernels a module defines (jit, interpreted or autotuned)."""
    found = []
    kinds = tuple(_launch_classes())
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
        kinds += (Autotuner, Heuristics)
    except ImportError:
        pass
    for name, value in vars(module).items():
        if kinds and isinstance(value, kinds):
            found.append(name)
    return found


def _call(what, fn, *args, **kwargs):
    """Run one call of the module under test; (output, None) or (None, Result explaining why not).
    While it runs, this grader's functions (``reference``, ``plain``) are refused to it
    (:mod:`nlpcore.refusal`, the mechanism the page's graders use)."""
    learner = os.path.abspath(getattr(getattr(fn, "__code__", None), "co_filename", "") or "")
    with _WATCH as watch, refusal.refused([__name__], learner_files=(learner,),
                                          grader_files=(os.path.abspath(__file__),)) as refused:
        try:
            with refused.learner_running():
                out = fn(*args, **kwargs)
        except Exception as exc:  # the learner's code: report, never crash the grader
            if refused.refused:
                return None, Result(what, "fail", _oracle(refused.refused))
            return None, Result(what, "error", f"{type(exc).__name__}: {exc}")
    if refused.refused:
        return None, Result(what, "fail", _oracle(refused.refused))
    if watch.launches == 0:
        return None, Result(what, "fail", "no Triton kernel was launched: the outputs must come "
                            "from your @triton.jit kernel (kernel[grid](...))")
    return out, None


def _oracle(names):
    name = names[0].rsplit(".", 2)
    short = ".".join(name[-2:])
    return (f"called {short}: {short} is the grader's oracle, not a Triton kernel; a module "
            "under test must compute attention with its own Triton kernel")


def _dtype_result(name, got, want):
    """None when ``got`` (a tensor) has dtype ``want``, else a failing Result."""
    dtype = getattr(got, "dtype", None)
    if dtype == want:
        return None
    return Result(name, "fail", f"dtype {str(dtype).replace('torch.', '')}, expected "
                                f"{str(want).replace('torch.', '')}")


class Verdict(NamedTuple):
    ok: bool
    err: float  # max |got - ref|
    bound: float  # what err had to stay under
    where: str  # index of the largest error, and the two values there


def compare(got, ref, bound):
    """max |got - ref| against bound (:func:`nlpcore.tolerances.compare`); NaN, a mismatched
    infinity or a wrong shape never passes."""
    g = got.detach().to(torch.float64).cpu().numpy()
    r = ref.detach().to(torch.float64).cpu().numpy()
    v = tolerances.compare(g, r, bound)
    if not v.where and g.shape != r.shape:
        return Verdict(False, math.inf, bound, f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
    err = v.max_err if v.ok or math.isfinite(v.max_err) else math.inf
    where = (f"at {v.where}: got {float(g[v.where]):.6g}, expected {float(r[v.where]):.6g}"
             if g.size else "no entries")
    return Verdict(v.ok, err, bound, where)


def fp32_bound(ref, kind):
    return tolerances.TRITON_FLOAT32[kind].bound(float(ref.abs().max()))


def flash_bound(plain_out, ref):
    """2 · max |plain - ref| + twice the dtype's rounding at the reference's magnitude, and never
    below eps/64 of the dtype (a reference that is exactly 0, such as dq when N = 1, would
    otherwise demand exact zeros from fp32 accumulations)."""
    low = ref.to(plain_out.dtype)
    rounding = float(((low + 0.3 - 0.3).to(torch.float64) - low.to(torch.float64)).abs().max())
    plain_err = float((plain_out.to(torch.float64) - ref).abs().max())
    floor = torch.finfo(plain_out.dtype).eps / 64
    return tolerances.low_precision_bound(plain_err, 2 * rounding + floor)


class Case(NamedTuple):
    name: str
    b: int
    h: int
    n_q: int
    n_k: int
    d: int
    causal: bool
    dtype: torch.dtype
    grad: bool  # also check backward and the autograd attention()


def cases(device):
    """Small cases for the CPU interpreter, full-sized ones on a GPU. Sizes deliberately not
    multiples of any block size; every case has a causal or ragged twist."""
    f32, f16 = torch.float32, torch.float16
    if device == "cpu":
        return [
            Case("one tile, N=16, d=16", 1, 2, 16, 16, 16, False, f32, True),
            Case("ragged N=100, d=32", 1, 2, 100, 100, 32, False, f32, True),
            Case("causal, ragged N=100, d=64", 1, 2, 100, 100, 64, True, f32, True),
            Case("causal, Nq=37 < Nk=80, d=32", 1, 1, 37, 80, 32, True, f32, True),
            Case("causal, Nq=80 > Nk=37, d=16", 1, 1, 80, 37, 16, True, f32, False),
            Case("single token, N=1, d=16", 2, 1, 1, 1, 16, True, f32, True),
            Case("float16, causal N=128, d=64", 1, 2, 128, 128, 64, True, f16, True),
            Case("float16, ragged N=77, d=32", 2, 1, 77, 77, 32, False, f16, True),
        ]
    bf16 = torch.bfloat16
    return [
        Case("ragged N=1000, d=64", 2, 4, 1000, 1000, 64, False, f32, True),
        Case("causal, Nq=300 < Nk=1111, d=128", 1, 4, 300, 1111, 128, True, f32, True),
        Case("float16, causal N=2047, d=64", 2, 4, 2047, 2047, 64, True, f16, True),
        Case("bfloat16, N=4096, d=128", 2, 4, 4096, 4096, 128, False, bf16, True),
        Case("bfloat16, causal ragged N=3001, d=128", 2, 4, 3001, 3001, 128, True, bf16, True),
        Case("bfloat16, causal N=1024, d=32", 2, 4, 1024, 1024, 32, True, bf16, True),
        Case("bfloat16, causal N=512, d=16", 2, 4, 512, 512, 16, True, bf16, True),
    ]


class Result(NamedTuple):
    check: str
    status: str  # "pass" | "fail" | "error"
    detail: str


def _tensors(case, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def rand(n):
        return torch.randn(case.b, case.h, n, case.d, generator=gen).to(device=device, dtype=case.dtype)

    return rand(case.n_q), rand(case.n_k), rand(case.n_k), rand(case.n_q)


def _verdict(name, got, ref, bound):
    v = compare(got, ref, bound)
    detail = f"max|Δ| {v.err:.3g} {'<=' if v.ok else '>'} {v.bound:.3g}"
    if not v.ok:
        detail += f"; worst {v.where}"
    return Result(name, "pass" if v.ok else "fail", detail)


def check_case(module, case, device, seed=0):
    """Run one case through the module; return one Result per output checked."""
    q, k, v, do = _tensors(case, device, seed)
    label = f"{case.name} · {str(case.dtype).replace('torch.', '')}"
    low = case.dtype != torch.float32
    results = []
    ref_o, ref_lse, ref_grads = reference(q, k, v, do if case.grad else None, causal=case.causal)
    plain_o, plain_grads = plain(q, k, v, do if (case.grad and low) else None, causal=case.causal) if low else (None, None)
    out, failure = _call(f"forward · {label}", module.forward, q, k, v, causal=case.causal)
    if failure:
        return [failure]
    o, lse = out
    dtypes = [_dtype_result(f"forward o · {label}", o, case.dtype),
              _dtype_result(f"forward lse · {label}", lse, torch.float32)]
    if any(dtypes):
        return [r for r in dtypes if r]
    o_bound = flash_bound(plain_o, ref_o) if low else fp32_bound(ref_o, "o")
    results.append(_verdict(f"forward o · {label}", o, ref_o, o_bound))
    results.append(_verdict(f"forward lse · {label}", lse, ref_lse, fp32_bound(ref_lse, "lse") * (10 if low else 1)))
    if not case.grad:
        return results
    grads, failure = _call(f"backward · {label}", module.backward, q, k, v, o, lse, do,
                           causal=case.causal)
    if failure:
        return results + [failure]
    bounds = []
    for name, got, ref, pl in zip(("dq", "dk", "dv"), grads, ref_grads, plain_grads or (None,) * 3):
        bounds.append(flash_bound(pl, ref) if low else fp32_bound(ref, "grad"))
        wrong = _dtype_result(f"backward {name} · {label}", got, case.dtype)
        results.append(wrong or _verdict(f"backward {name} · {label}", got, ref, bounds[-1]))
    results.append(_check_autograd(module, case, q, k, v, do, ref_grads, bounds, label))
    return results


def _check_autograd(module, case, q, k, v, do, ref_grads, bounds, label):
    """attention(...).backward(do) must fill q.grad, k.grad, v.grad within backward's bounds."""
    name = f"autograd attention() · {label}"
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    _, failure = _call(name, lambda: module.attention(*leaves, causal=case.causal).backward(do))
    if failure:
        return failure
    details = []
    for grad_name, leaf, ref, bound in zip(("dq", "dk", "dv"), leaves, ref_grads, bounds):
        if leaf.grad is None:
            return Result(name, "fail", f"{grad_name} was not filled in")
        v = compare(leaf.grad, ref, bound)
        if not v.ok:
            return Result(name, "fail", f"{grad_name} max|Δ| {v.err:.3g} > {v.bound:.3g}; worst {v.where}")
        details.append(f"{grad_name} {v.err:.3g}")
    return Result(name, "pass", "max|Δ| " + ", ".join(details))


def run_checks(module, device):
    out = []
    for i, case in enumerate(cases(device)):
        out.extend(check_case(module, case, device, seed=i))
    return out


def load_module(path):
    """Import a learner's file as a module (or nlpcore.kernels.flash_triton when path is None)."""
    if path is None:
        return importlib.import_module("nlpcore.kernels.flash_triton")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location("learner_flash_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for fn in ("forward", "backward", "attention"):
        if not callable(getattr(module, fn, None)):
            raise AttributeError(f"{path} must define {fn}(...)" + (
                " (the torch.autograd wrapper around forward and backward)" if fn == "attention" else ""))
    if not _kernels_in(module):
        raise TypeError(f"{path} defines no Triton kernel: write the attention as a "
                        "@triton.jit function and launch it from forward and backward")
    return module


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nlpcore.lab.exercises.triton.check_triton",
                                     description="Grade a Triton FlashAttention module.")
    parser.add_argument("path", nargs="?", help="your module (default: nlpcore.kernels.flash_triton)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="cpu runs Triton's interpreter; auto picks cuda when available")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is visible to PyTorch")
    if device == "cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            parser.error("triton was imported before TRITON_INTERPRET=1 could be set; "
                         "run with TRITON_INTERPRET=1 in the environment")
        os.environ["TRITON_INTERPRET"] = "1"  # must precede the first import of triton

    # PyTorch warns once when autograd's device thread makes the first cuBLAS call of the
    # process on a thread that has no CUDA context yet; it is harmless and would only confuse.
    warnings.filterwarnings("ignore", message="Attempting to run cuBLAS, but there was no current CUDA context")
    try:
        module = load_module(args.path)
    except Exception as exc:
        print(f"ERROR  could not load {args.path or 'nlpcore.kernels.flash_triton'}: "
              f"{type(exc).__name__}: {exc}")
        return 1
    results = run_checks(module, device)
    if args.json:
        print(json.dumps([r._asdict() for r in results], indent=1))
    else:
        where = "Triton interpreter on the CPU" if device == "cpu" else torch.cuda.get_device_name()
        print(f"checking {args.path or 'nlpcore.kernels.flash_triton'} on {where}")
        for r in results:
            print(f"{r.status.upper():5}  {r.check:62}  {r.detail}")
        passed = sum(r.status == "pass" for r in results)
        print(f"{passed}/{len(results)} checks passed")
    return 0 if all(r.status == "pass" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
