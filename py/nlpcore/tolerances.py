"""How close is close enough: every tolerance of the lab in one place, one meaning per word.

The words, as used everywhere in nlpcore, the tests and the benchmarks:

``atol``
    The absolute term, in the units of the compared values.
``rtol``
    The relative term: it multiplies a *scale*, the magnitude of the expected values. Each table
    below states its scale: ``"entry"`` (``|expected|`` at each entry), ``"array"`` (``max
    |expected|`` over the whole array) or ``"array, at least 1"``.
``bound``
    ``atol + rtol · scale``, what ``|got - expected|`` may not exceed (:meth:`Tol.bound`).
``factor``
    The low-precision bar's multiplier (Dao et al.'s test bar in flash-attention's
    ``tests/test_flash_attn.py``): a float16/bfloat16 kernel's error against a float64 reference
    may be at most ``factor`` times the error of the naive computation in the same low precision.
``extra``
    The low-precision bar's added term, so that a naive error of 0 does not demand an exact
    kernel: ``bound = factor · naive error + extra`` (:func:`low_precision_bound`).

The tables (one per use, one entry per dtype or per compared pair):

- :data:`KERNEL` -- a kernel against the float64 reference, in the tests; scale "array, at
  least 1". float16 is judged by the low-precision bar rather than by this entry, which only
  bounds a float16 computation with float32 accumulation.
- :data:`GRADER` -- learner code against the grader's reference (:mod:`nlpcore.lab.judging`);
  scale "entry", looser, since learner code may add in another order.
- :data:`PAGE` -- the lab page's pairs of float32 results (:mod:`nlpcore.web.lab`); scale
  "array". :data:`PAGE_FLOAT16` -- the same pairs with float16 inputs.
- :data:`TRITON_FLOAT32` -- the Triton port in float32 against float64
  (:mod:`nlpcore.lab.exercises.triton.check_triton`); scale "array".
- :data:`BENCH_WEBGPU` -- a benchmark run counts as valid attention (bench/webgpu_attention.py):
  float32 shader against float32 NumPy on unit-normal inputs; absolute only.

:func:`compare` is the one comparison that applies them (ok, max error, where, bound, a problem
string): the graders, the web door, the Triton grader and the tests use it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Tuple

import numpy as np

ENTRY, ARRAY, ARRAY_AT_LEAST_1 = "entry", "array", "array, at least 1"  # the scales rtol multiplies


@dataclass(frozen=True)
class Tol:
    """``|got - expected| <= atol + rtol · scale``; ``scale`` names which magnitude rtol multiplies."""
    atol: float
    rtol: float
    scale: str

    def bound(self, magnitude: float) -> float:
        """The bound for an expected magnitude (|expected| at an entry, or over the array)."""
        return self.atol + self.rtol * magnitude

    def as_dict(self) -> dict:
        return {"atol": self.atol, "rtol": self.rtol, "scale": self.scale}


# float32/float64 are the acceptance bars (1e-6 / 1e-12 relative to scale) of the kernels,
# the float32 one with room for sums over a few hundred terms.
KERNEL = {
    "float64": Tol(atol=0.0, rtol=1e-12, scale=ARRAY_AT_LEAST_1),
    "float32": Tol(atol=0.0, rtol=1e-6, scale=ARRAY_AT_LEAST_1),
    "float16": Tol(atol=0.0, rtol=2e-3, scale=ARRAY_AT_LEAST_1),
}

GRADER = {
    "float64": Tol(atol=1e-9, rtol=1e-7, scale=ENTRY),
    "float32": Tol(atol=2e-5, rtol=2e-4, scale=ENTRY),
}

# GPU vs mirror: the same algorithm, tile plan and order of operations; they differ only by the
# GPU's exp() and fused multiply-adds, a few float32 ulps (the lab's 1e-5 relative bar). Against
# flash_np the tile sizes and the summation order differ, so rounding differs more.
PAGE = {
    "gpu_vs_mirror": Tol(atol=1e-5, rtol=1e-5, scale=ARRAY),
    "gpu_vs_flash_np": Tol(atol=2e-5, rtol=2e-5, scale=ARRAY),
    "mirror_vs_flash_np": Tol(atol=2e-5, rtol=2e-5, scale=ARRAY),
}

# The same pairs when the inputs are float16 (the lab's precision control): q, k, v are rounded
# to float16 for every path; the shader and the mirror still compute in float32, so they keep
# the float32 bar, while flash_np returns o in float16 (rounded to nearest: at most half an ulp,
# 2^-11 of |o|), which adds 2^-11 to rtol of the pairs with flash_np. lse stays float32 in
# every path (flash_np accumulates 16-bit inputs in float32).
HALF_ULP_FLOAT16 = 2.0 ** -11
PAGE_FLOAT16 = {
    "gpu_vs_mirror": PAGE["gpu_vs_mirror"],
    "gpu_vs_flash_np": Tol(atol=2e-5, rtol=2e-5 + HALF_ULP_FLOAT16, scale=ARRAY),
    "mirror_vs_flash_np": Tol(atol=2e-5, rtol=2e-5 + HALF_ULP_FLOAT16, scale=ARRAY),
}

# The lab's f16 and int8 tiers (wgsl/flash_fwd_f16.wgsl, flash_fwd_int8.wgsl) compute something
# other than float32 attention on purpose, so their pairs with flash_np get the tier's own
# accuracy as the bar (max |delta| <= atol + rtol * max |reference|): f16 stores o in float16
# (one ulp is 2^-10 relative); int8 scores measured on the H200 (bench/results/webgpu_h200.json,
# accuracy) and in tests/test_wgsl_tiers.py: max |delta| up to ~3 % of max |o| on random inputs.
# GPU vs the tier's own mirror: float16 output rounding for f16; for int8 a value within an ulp
# of a rounding midpoint may quantise one step apart on the GPU (1e-3 relative). The portable and
# subgroup tiers are float32 and use PAGE (or PAGE_FLOAT16 for float16 inputs).
PAGE_TIERS = {
    "f16": {
        "gpu_vs_mirror": Tol(atol=1e-6, rtol=2.0 ** -10, scale=ARRAY),
        "gpu_vs_flash_np": Tol(atol=1e-6, rtol=1e-2, scale=ARRAY),
        "mirror_vs_flash_np": Tol(atol=1e-6, rtol=1e-2, scale=ARRAY),
    },
    "int8": {
        "gpu_vs_mirror": Tol(atol=1e-6, rtol=1e-3, scale=ARRAY),
        "gpu_vs_flash_np": Tol(atol=1e-6, rtol=0.1, scale=ARRAY),
        "mirror_vs_flash_np": Tol(atol=1e-6, rtol=0.1, scale=ARRAY),
    },
}

TRITON_FLOAT32 = {
    "o": Tol(atol=1e-5, rtol=1e-5, scale=ARRAY),
    "lse": Tol(atol=1e-5, rtol=1e-5, scale=ARRAY),
    "grad": Tol(atol=1e-5, rtol=1e-4, scale=ARRAY),
}

BENCH_WEBGPU = Tol(atol=1e-4, rtol=0.0, scale=ARRAY)

LOW_PRECISION_FACTOR = 2.0
"""flash-attention's bar: at most twice the naive low-precision computation's error."""


def low_precision_bound(naive_err: float, extra: float, factor: float = LOW_PRECISION_FACTOR) -> float:
    """``factor · naive_err + extra``: the most a low-precision kernel may err against float64,
    where ``naive_err`` is the naive computation's error in the same precision."""
    return factor * float(naive_err) + float(extra)


def magnitude(expected, scale: str) -> float:
    """The magnitude rtol multiplies for an array scale: max |expected| over its finite entries
    (and at least 1 for ``ARRAY_AT_LEAST_1``); 0 for an array with no finite entry."""
    if scale not in (ARRAY, ARRAY_AT_LEAST_1):
        raise ValueError("scale must be %r or %r for a whole array, got %r" % (ARRAY, ARRAY_AT_LEAST_1, scale))
    want = np.asarray(expected, dtype=np.float64)
    finite = want[np.isfinite(want)]
    top = float(np.abs(finite).max()) if finite.size else 0.0
    return max(1.0, top) if scale == ARRAY_AT_LEAST_1 else top


def max_abs_diff(got, want) -> Tuple[float, tuple]:
    """(max |got - want| over entries where both are finite, the index of it)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    both = np.isfinite(got) & np.isfinite(want)
    diff = np.zeros(np.broadcast(got, want).shape)
    np.subtract(got, want, out=diff, where=both)
    diff = np.abs(diff)
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    return (float(diff.max()) if diff.size else 0.0), idx


class Verdict(NamedTuple):
    """What :func:`compare` found. ``max_err`` is max |got - want| over the entries where both
    are finite, at ``where`` (an index tuple: the worst entry relative to its bound, else the
    largest error); ``bound`` is the bound at ``where``; ``bad`` counts the entries over their
    bound (NaN and mismatched infinities included); ``problem`` is "" when ``ok``, else one
    sentence saying what differs."""
    ok: bool
    max_err: float
    where: tuple
    bound: float
    problem: str
    bad: int = 0
    size: int = 0


def compare(got, want, tol) -> Verdict:
    """The one comparison of the lab: ``got`` against ``want`` under ``tol`` (a :class:`Tol`,
    or a number: an absolute bound).

    Shapes must be equal; NaN in ``got`` never passes (NaN in ``want`` only matches NaN);
    infinities must match exactly (a fully masked row's lse is -inf in both); finite entries
    must satisfy ``|got - want| <= atol + rtol · scale`` with the scale ``tol`` names.
    """
    if not isinstance(tol, Tol):
        tol = Tol(atol=float(tol), rtol=0.0, scale=ARRAY)
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return Verdict(False, math.inf, (), math.nan,
                       "shape %s, expected %s" % (list(g.shape), list(w.shape)), 0, int(w.size))
    size = int(w.size)
    nan = np.isnan(g) & ~np.isnan(w)
    if nan.any():
        idx = tuple(int(i) for i in np.argwhere(nan)[0])
        return Verdict(False, math.nan, idx, math.nan, "NaN in %d of %d entries, first at %s"
                       % (int(nan.sum()), size, list(idx)), int(nan.sum()), size)
    mismatch = (np.isinf(g) | np.isinf(w) | np.isnan(w)) & ~((g == w) | (np.isnan(g) & np.isnan(w)))
    if mismatch.any():
        idx = tuple(int(i) for i in np.argwhere(mismatch)[0])
        return Verdict(False, math.inf, idx, math.nan, "infinities differ at %s (got %s, expected %s)"
                       % (list(idx), g[idx], w[idx]), int(mismatch.sum()), size)
    finite = np.isfinite(w)
    delta = np.zeros(w.shape)
    np.subtract(g, w, out=delta, where=finite)
    delta = np.abs(delta)
    if tol.scale == ENTRY:
        bound = tol.atol + tol.rtol * np.abs(np.where(finite, w, 0.0))
    else:
        bound = np.full(w.shape, tol.bound(magnitude(w, tol.scale)))
    bad = delta > bound
    max_err = float(delta.max()) if size else 0.0
    if not size:
        return Verdict(True, 0.0, (), float(tol.atol), "", 0, 0)
    if bad.any():
        ratio = np.where(bad, delta / np.maximum(bound, np.finfo(np.float64).tiny), 0.0)
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), w.shape))
        return Verdict(False, max_err, idx, float(bound[idx]),
                       "%d of %d entries differ by more than the bound; worst at %s: got %.7g, "
                       "expected %.7g, bound %.3g" % (int(bad.sum()), size, list(idx), g[idx],
                                                      w[idx], bound[idx]), int(bad.sum()), size)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(delta)), w.shape))
    return Verdict(True, max_err, idx, float(bound[idx]), "", 0, size)
