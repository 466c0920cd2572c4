"""Shared test helpers: one assert_close that explains itself, with the kernels' tolerance table
(nlpcore.tolerances.KERNEL: one entry per dtype, rtol times max(1, max |expected|))."""

from __future__ import annotations

import numpy as np

from nlpcore import tolerances
from nlpcore.tolerances import max_abs_diff  # noqa: F401  (re-exported for the tests)


def assert_close(got, want, *, dtype=None, rtol=None, atol=None, what="output", inputs=""):
    """Assert same shape, same non-finite pattern (-inf stays -inf), and values within tolerance.

    The message reports max |Δ|, where it is, the bound and a description of the inputs.
    """
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, "{}: shape {} != expected {} ({})".format(what, got.shape, want.shape, inputs)
    assert not np.isnan(got.astype(np.float64)).any(), "{}: NaN in result ({})".format(what, inputs)
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert (np.isfinite(g) == np.isfinite(w)).all() and (g[~np.isfinite(g)] == w[~np.isfinite(w)]).all(), (
        "{}: infinities differ from expected ({})".format(what, inputs)
    )
    tol = tolerances.KERNEL[np.dtype(dtype if dtype is not None else got.dtype).name]
    rtol = tol.rtol if rtol is None else rtol
    atol = tol.atol if atol is None else atol
    scale = tolerances.magnitude(w, tol.scale)
    err, where = max_abs_diff(g, w)
    bound = atol + rtol * scale
    assert err <= bound, "{}: max |Δ| = {:.3e} at {} > bound {:.3e} (atol {}, rtol {} × scale {:.3g}); {}".format(
        what, err, where, bound, atol, rtol, scale, inputs
    )
    return err


def low_precision_bar(err_kernel, err_naive, extra):
    """flash-attention's bar: a low-precision kernel may err at most LOW_PRECISION_FACTOR (2) times
    the plain low-precision computation (both against a float64 reference), plus ``extra``."""
    return err_kernel <= tolerances.low_precision_bound(err_naive, extra)
