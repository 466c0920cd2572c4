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

NumPy arrays and scalars in a result become lists and Python numbers (:func:`to_plain`); the
encoding is :mod:`nlpcore.plain`'s, the one the graders use too.
This module must run inside Pyodide 0.17 (Python 3.8, NumPy 1.17).
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any, Dict, Optional

from ..plain import decode, encode, to_plain

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
