"""Shared test helpers: one assert_close that explains itself, with the kernels' tolerance table
(nlpcore.tolerances.KERNEL: one entry per dtype, rtol times max(1, max |expected|)), applied by
the lab's one comparison, nlpcore.tolerances.compare."""

from __future__ import annotations

import numpy as np

from nlpcore import tolerances
from nlpcore.tolerances import max_abs_diff  # noqa: F401  (re-exported for the tests)


def assert_close(got, want, *, dtype=None, rtol=None, atol=None, what="output", inputs=""):
    """Assert same shape, same non-finite pattern (-inf stays -inf), and values within tolerance.

    The message reports max |Δ|, where it is, the bound and a description of the inputs.
    """
    got = np.asarray(got)
    tol = tolerances.KERNEL[np.dtype(dtype if dtype is not None else got.dtype).name]
    tol = tolerances.Tol(atol=tol.atol if atol is None else atol,
                         rtol=tol.rtol if rtol is None else rtol, scale=tol.scale)
    verdict = tolerances.compare(got, want, tol)
    assert verdict.ok, "{}: {} (max |Δ| = {:.3e}; atol {}, rtol {} × scale {:.3g}); {}".format(
        what, verdict.problem, verdict.max_err, tol.atol, tol.rtol,
        tolerances.magnitude(want, tol.scale) if np.size(want) else 0.0, inputs)
    return verdict.max_err


def low_precision_bar(err_kernel, err_naive, extra):
    """flash-attention's bar: a low-precision kernel may err at most LOW_PRECISION_FACTOR (2) times
    the plain low-precision computation (both against a float64 reference), plus ``extra``."""
    return err_kernel <= tolerances.low_precision_bound(err_naive, extra)
