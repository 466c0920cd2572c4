"""The one door between the web pages and Python.

The page's Web Worker (``site/js/pyworker.js``) answers each message ``{id, name, payload}`` by
calling :func:`call_json`, which decodes the payload, calls :func:`call` and encodes the result.
:func:`call` imports ``nlpcore.web.<module>`` and calls ``<function>(**payload)``, but only when
``<function>`` is listed in that module's ``__all__``: the page can reach nothing else.

Payloads and results are plain data (dict, list, str, int, float, bool, None). Two extras
travel through the JSON encoding used between the worker and Python:

- ``bytes`` (for example a float32 buffer read back from the GPU) travel as
  ``{"__bytes__": "<base64>"}``; the worker turns them into a ``Uint8Array`` and back;
- non-finite floats (the ``lse`` of a fully masked row is ``-inf``) travel as
  ``{"__float__": "inf" | "-inf" | "nan"}``, because JSON has no spelling for them.

NumPy arrays and scalars in a result become lists and Python numbers (see :func:`to_plain`).
This module must run inside Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import re
from typing import Any, Dict, Optional

__all__ = ["call", "call_json", "to_plain", "encode", "decode"]

# "module.function", both plain Python identifiers (no dunder tricks, no deeper paths).
_NAME = re.compile(r"^([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)$")


def call(name: str, payload: Optional[Dict[str, Any]] = None) -> Any:
    """Call ``nlpcore.web.<module>.<function>(**payload)`` and return its plain-data result.

    Raises TypeError when ``name`` is not a string or ``payload`` not a dict, ValueError when
    ``name`` is not "module.function" or the function is not exported by the module's
    ``__all__``.
    """
    if not isinstance(name, str):
        raise TypeError("name: expected a str like 'lab.prepare', got {}".format(type(name).__name__))
    match = _NAME.match(name)
    if match is None:
        raise ValueError("name: expected 'module.function' (lower-case identifiers), "
                         "got {!r}".format(name))
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise TypeError("payload: expected a dict of keyword arguments, got {}".format(
            type(payload).__name__))
    module_name, function_name = match.groups()
    try:
        module = importlib.import_module("nlpcore.web." + module_name)
    except ModuleNotFoundError as error:
        if error.name == "nlpcore.web." + module_name:
            raise ValueError("name: there is no module nlpcore.web.{}".format(module_name))
        raise
    exported = getattr(module, "__all__", ())
    if function_name not in exported:
        raise ValueError("name: nlpcore.web.{} does not export {!r} (exported: {})".format(
            module_name, function_name, ", ".join(sorted(exported)) or "nothing"))
    return to_plain(getattr(module, function_name)(**payload))


def call_json(name: str, payload_json: str) -> str:
    """The worker's entry point: JSON in (see module docstring), JSON out."""
    payload = decode(json.loads(payload_json)) if payload_json else None
    return json.dumps(encode(call(name, payload)), allow_nan=False, separators=(",", ":"))


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
