"""Shared test helpers: one tolerance table per dtype and one assert_close that explains itself."""

from __future__ import annotations

import numpy as np

# Absolute + relative tolerance *relative to the scale of the expected output*
# (max |expected|, at least 1): |got - want| <= atol + rtol * scale.
# float32 and float64 are the acceptance bars (1e-6 / 1e-12 relative to scale) with a
# small factor for sums over a few hundred terms; float16 is judged by the low-precision bar
# (see low_precision_bar) rather than by a fixed number.
TOL = {
    np.dtype(np.float64): dict(rtol=1e-12, atol=0.0),
    np.dtype(np.float32): dict(rtol=1e-6, atol=0.0),
    np.dtype(np.float16): dict(rtol=2e-3, atol=0.0),
}


def max_abs_diff(got, want):
    """(max |got - want| over entries where both are finite, index of it)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    both = np.isfinite(got) & np.isfinite(want)
    diff = np.zeros(np.broadcast(got, want).shape)
    np.subtract(got, want, out=diff, where=both)
    diff = np.abs(diff)
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    return float(diff.max()) if diff.size else 0.0, idx


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
    tol = TOL[np.dtype(dtype if dtype is not None else got.dtype)]
    rtol = tol["rtol"] if rtol is None else rtol
    atol = tol["atol"] if atol is None else atol
    finite = w[np.isfinite(w)]
    scale = max(1.0, float(np.abs(finite).max()) if finite.size else 1.0)
    err, where = max_abs_diff(g, w)
    bound = atol + rtol * scale
    assert err <= bound, "{}: max |Δ| = {:.3e} at {} > bound {:.3e} (atol {}, rtol {} × scale {:.3g}); {}".format(
        what, err, where, bound, atol, rtol, scale, inputs
    )
    return err


def low_precision_bar(err_kernel, err_naive, slack):
    """flash-attention's bar: a low-precision kernel may err at most 2× the plain low-precision
    computation (both measured against a float64 reference), plus a small absolute slack."""
    return err_kernel <= 2.0 * err_naive + slack
