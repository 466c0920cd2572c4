"""Plain data: the one encoder of results for the page and the web door.

- :func:`to_plain` -- NumPy arrays and scalars, tuples and nested containers into Python's
  plain types (dict, list, str, int, float, bool, None, bytes). Non-finite floats stay floats:
  only the JSON edge spells them.
- :func:`encode` / :func:`decode` -- plain data to JSON-safe data and back, tagging ``bytes``
  as ``{"__bytes__": base64}`` and non-finite floats as ``{"__float__": "inf"|"-inf"|"nan"}``
  (JSON has no spelling for them). The page's worker (site/js/pyworker.js) reads the same tags.

Must run in Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""
from __future__ import annotations

import base64
import math
from typing import Any

__all__ = ["to_plain", "encode", "decode"]


def to_plain(value: Any) -> Any:
    """Turn NumPy arrays/scalars, tuples and nested containers into plain Python data."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    tolist = getattr(value, "tolist", None)  # NumPy arrays and NumPy scalars
    if tolist is not None:
        return to_plain(tolist())
    raise TypeError("result: cannot send a {} to the page (expected plain data)".format(
        type(value).__name__))


def encode(value: Any) -> Any:
    """Plain data -> JSON-safe data, tagging bytes and non-finite floats."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, dict):
        if len(value) == 1 and "__bytes__" in value:
            return base64.b64decode(value["__bytes__"])
        if len(value) == 1 and "__float__" in value:
            return float(value["__float__"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value
