"""What a check's ``collect`` returned, carried from the interpreter that ran the learner's code
to the one that judges it, as one JSON text (:func:`pack` / :func:`unpack`).

Arrays travel as dtype, shape and bytes; :class:`~nlpcore.lab.model.CheckFailed` and
:class:`NotAnArray` as their fields; tuples, lists and dicts (any keys) tagged. Every value is
copied by its exact builtin type, through the base type's own methods: a learner's ``str`` or
``float`` subclass arrives as a plain ``str`` or ``float`` (its methods never run in the judge),
and anything else (a function, a module, an object) is refused with a TypeError naming it.

Must run in Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""
from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

from .model import CheckFailed

__all__ = ["pack", "unpack", "NotAnArray"]


class NotAnArray:
    """What the learner returned where an array was expected, described for the judge."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self):
        return "NotAnArray(%r)" % (self.what,)


# -- collected data between interpreters ------------------------------------------------------

ARRAY_KINDS = "biuf"        # bool, signed and unsigned integers, floats; never object arrays
MAX_DEPTH = 32              # nesting a collect may return


def pack(value: Any) -> str:
    """``value`` (what collect phases returned) as one JSON text; TypeError names a value that
    is not plain data."""
    return json.dumps(_pack(value, MAX_DEPTH, CheckFailed), allow_nan=False, separators=(",", ":"))


def unpack(text: str) -> Any:
    """Inverse of :func:`pack`: exact builtin types, fresh NumPy arrays."""
    if type(text) is not str:
        raise TypeError("collected data must arrive as JSON text, got %s" % type(text).__name__)
    return _unpack(json.loads(text), CheckFailed)


def _float(x: float):
    return x if math.isfinite(x) else {"f": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def _pack(value, depth, failed):
    if depth <= 0:
        raise TypeError("collected data is nested more than %d levels deep" % MAX_DEPTH)
    # Exact types first, by their base type's own methods: a subclass's overrides never run.
    if value is None or value is True or value is False:
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return _float(float.__float__(value))
    if isinstance(value, str):
        return {"s": str.__str__(value)}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(bytes(memoryview(value))).decode("ascii")}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in ARRAY_KINDS or value.dtype.fields is not None:
            raise TypeError("collected arrays must hold numbers or bools, got dtype %s" % value.dtype)
        arr = np.ascontiguousarray(np.ndarray.view(value, np.ndarray))
        return {"a": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode("ascii")]}
    if isinstance(value, np.generic):
        return _pack(np.asarray(value).item(), depth, failed)
    if isinstance(value, tuple):
        return {"t": [_pack(v, depth - 1, failed) for v in tuple.__iter__(value)]}
    if isinstance(value, list):
        return {"l": [_pack(v, depth - 1, failed) for v in list.__iter__(value)]}
    if isinstance(value, dict):
        return {"d": [[_pack(k, depth - 1, failed),
                       _pack(dict.__getitem__(value, k), depth - 1, failed)]
                      for k in list(dict.__iter__(value))]}
    if isinstance(value, failed):
        return {"x": [_pack(value.message, depth - 1, failed),
                      _pack(dict(value.details), depth - 1, failed)]}
    if isinstance(value, NotAnArray):
        return {"n": _pack(value.what, depth - 1, failed)}
    raise TypeError("a check collected a %s, which is not plain data (numbers, strings, arrays, "
                    "tuples, lists, dicts)" % type(value).__name__)


def _unpack(value, failed):
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is list:             # only ever a list of tags inside a tag
        raise TypeError("collected data: a bare list where a tagged value was expected")
    if type(value) is not dict or len(value) != 1:
        raise TypeError("collected data: unexpected %s" % type(value).__name__)
    (tag, body), = value.items()
    if tag == "s":
        return str(body)
    if tag == "f":
        return float(body)
    if tag == "b":
        return base64.b64decode(body)
    if tag == "a":
        dtype, shape, data = body
        dtype = np.dtype(str(dtype))
        if dtype.kind not in ARRAY_KINDS:
            raise TypeError("collected data: an array of dtype %s" % dtype)
        return np.frombuffer(base64.b64decode(data), dtype=dtype).reshape([int(n) for n in shape]).copy()
    if tag == "t":
        return tuple(_unpack(v, failed) for v in body)
    if tag == "l":
        return [_unpack(v, failed) for v in body]
    if tag == "d":
        return {_unpack(k, failed): _unpack(v, failed) for k, v in body}
    if tag == "x":
        details = _unpack(body[1], failed)
        return failed(_unpack(body[0], failed), **{str(k): v for k, v in details.items()})
    if tag == "n":
        return NotAnArray(_unpack(body, failed))
    raise TypeError("collected data: unknown tag %r" % (tag,))
