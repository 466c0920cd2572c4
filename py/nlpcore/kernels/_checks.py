"""Input validation shared by every attention kernel in this package.

Each kernel calls :func:`attention_inputs` first, so a learner who passes the wrong shape gets
the same clear message whichever kernel they call: the message names the argument and says
what shape or dtype was expected.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np


class AttentionInputs(NamedTuple):
    """Validated inputs, all with the same (broadcast) leading axes.

    q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv), allowed (..., Nq, Nk) or None.
    ``acc`` is the dtype arithmetic runs in (float32 for 16-bit inputs, else the input dtype).
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    allowed: Optional[np.ndarray]
    causal: bool
    scale: float
    acc: np.dtype
    batch: Tuple[int, ...]


def broadcast_shapes(*shapes: Tuple[int, ...]) -> Tuple[int, ...]:
    """NumPy's broadcasting rule for shapes (``np.broadcast_shapes`` needs NumPy >= 1.20)."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(ndim):
        size = 1
        for s in shapes:
            dim = s[axis - ndim + len(s)] if axis - ndim + len(s) >= 0 else 1
            if dim != 1:
                if size not in (1, dim):
                    raise ValueError("shapes {} do not broadcast".format(list(shapes)))
                size = dim
        out.append(size)
    return tuple(out)


def accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """float16 (and any other sub-32-bit float) accumulates in float32; float32/float64 stay."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def is_float_dtype(dtype) -> bool:
    """NumPy floats, plus bfloat16 from ml_dtypes (a 2-byte float NumPy itself lacks)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _as_float_array(x, name: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if not is_float_dtype(x.dtype):
        raise TypeError(
            "{} must be a floating-point array (float16, bfloat16, float32 or float64), got dtype {}".format(
                name, x.dtype
            )
        )
    return x


def attention_inputs(q, k, v, *, causal: bool = False, mask=None, scale=None) -> AttentionInputs:
    """Check q, k, v, mask and scale; return them broadcast to common leading axes.

    ``allowed`` is the user's mask broadcast to (..., Nq, Nk) (a view, no copy), or None. The
    causal rule (query i may attend key j iff j <= i, top-left aligned) is kept as a flag, so
    that tiled kernels never build an Nq×Nk array: :func:`allowed_tile` combines the two for one
    tile.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim < 2:
            raise ValueError(
                "{} must have at least 2 dimensions (..., N, d), got shape {}".format(name, x.shape)
            )
    n_q, d = q.shape[-2:]
    n_k = k.shape[-2]
    if n_q == 0 or n_k == 0:
        raise ValueError(
            "q and k need at least one row: got Nq = {} (q shape {}) and Nk = {} (k shape {})".format(
                n_q, q.shape, n_k, k.shape
            )
        )
    if d == 0:
        raise ValueError("q must have head dimension d >= 1, got shape {}".format(q.shape))
    if k.shape[-1] != d:
        raise ValueError(
            "k must have shape (..., Nk, d) with d = {} to match q {}, got {}".format(d, q.shape, k.shape)
        )
    if v.shape[-2] != n_k:
        raise ValueError(
            "v must have shape (..., Nk, dv) with Nk = {} to match k {}, got {}".format(
                n_k, k.shape, v.shape
            )
        )
    if v.shape[-1] == 0:
        raise ValueError("v must have value dimension dv >= 1, got shape {}".format(v.shape))
    try:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            "leading (batch, head) axes of q {}, k {} and v {} do not broadcast".format(
                q.shape, k.shape, v.shape
            )
        ) from None

    allowed = None
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise TypeError(
                "mask must be a boolean array (True = may attend), got dtype {}".format(mask.dtype)
            )
        try:
            full = broadcast_shapes(batch + (n_q, n_k), mask.shape)
        except ValueError:
            full = None
        if full is None or full[-2:] != (n_q, n_k):
            raise ValueError(
                "mask must be broadcastable to (..., Nq, Nk) = {} (key padding: (..., 1, Nk)), "
                "got shape {}".format(batch + (n_q, n_k), mask.shape)
            )
        batch = full[:-2]
        allowed = mask

    if scale is None:
        scale = 1.0 / float(np.sqrt(d))
    else:
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise TypeError("scale must be a real number, got {!r}".format(scale)) from None
        if not np.isfinite(scale):
            raise ValueError("scale must be finite, got {}".format(scale))

    acc = accumulation_dtype(np.result_type(q.dtype, k.dtype, v.dtype))
    q = np.broadcast_to(q, batch + q.shape[-2:])
    k = np.broadcast_to(k, batch + k.shape[-2:])
    v = np.broadcast_to(v, batch + v.shape[-2:])
    if allowed is not None:
        allowed = np.broadcast_to(allowed, batch + (n_q, n_k))
    return AttentionInputs(q, k, v, allowed, bool(causal), scale, acc, batch)


def allowed_tile(x: AttentionInputs, rows: Tuple[int, int], cols: Tuple[int, int]) -> Optional[np.ndarray]:
    """Which queries rows[0]:rows[1] may attend keys cols[0]:cols[1]: (..., Br, Bc) bool, or None.

    Combines the user's mask with the causal rule j <= i; None means "all allowed".
    """
    allowed = None
    if x.allowed is not None:
        allowed = x.allowed[..., rows[0] : rows[1], cols[0] : cols[1]]
    if x.causal and cols[1] - 1 > rows[0]:  # some key in the tile lies after some query
        tri = np.arange(cols[0], cols[1])[None, :] <= np.arange(rows[0], rows[1])[:, None]  # (Br, Bc)
        allowed = tri if allowed is None else (allowed & tri)
    return allowed


def check_backward_inputs(inputs: AttentionInputs, o, lse, do) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check o (..., Nq, dv), lse (..., Nq) and do (..., Nq, dv) against validated inputs."""
    n_q = inputs.q.shape[-2]
    dv = inputs.v.shape[-1]
    expect_o = inputs.batch + (n_q, dv)
    out = []
    for name, x, shape in (
        ("o", o, expect_o),
        ("lse", lse, inputs.batch + (n_q,)),
        ("do", do, expect_o),
    ):
        x = _as_float_array(x, name)
        try:
            ok = broadcast_shapes(x.shape, shape) == shape
        except ValueError:
            ok = False
        if not ok:
            raise ValueError("{} must have shape {} (or broadcast to it), got {}".format(name, shape, x.shape))
        out.append(np.broadcast_to(x, shape))
    return out[0], out[1], out[2]


def positive_int(value, name: str) -> int:
    """A block size or similar count: an int >= 1, else a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError("{} must be a positive integer, got {!r}".format(name, value))
    if value < 1:
        raise ValueError("{} must be a positive integer, got {}".format(name, value))
    return int(value)


def unbroadcast(grad: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad
