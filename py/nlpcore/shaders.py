"""The text of the lab's WGSL shaders (``wgsl/<name>`` in the repository), the same in CPython and
in Pyodide.

The shaders live in the repository's top-level ``wgsl/`` folder, where the pages fetch them from.
build.py's wheel carries a copy as ``nlpcore/_wgsl/<name>``, so Python inside the page (which has
no repository) reads the very same text. Lookup order: ``$NLPCORE_WGSL_DIR`` (a folder set by
whoever runs us), the copy inside an installed wheel, the repository checkout.
"""
from __future__ import annotations

import os
import pathlib
from typing import List

WGSL_DIR_ENV = "NLPCORE_WGSL_DIR"
PACKAGED = pathlib.Path(__file__).resolve().parent / "_wgsl"       # inside the wheel
REPOSITORY = pathlib.Path(__file__).resolve().parents[2] / "wgsl"   # py/nlpcore/ -> repo


def folders() -> List[pathlib.Path]:
    """The folders searched for a shader, in order."""
    found = []
    if os.environ.get(WGSL_DIR_ENV):
        found.append(pathlib.Path(os.environ[WGSL_DIR_ENV]))
    return found + [PACKAGED, REPOSITORY]


def text(name: str) -> str:
    """Text of the shader ``name`` (e.g. ``"flash_fwd.wgsl"``); FileNotFoundError names every
    folder searched when none holds it."""
    if not isinstance(name, str) or not name.endswith(".wgsl"):
        raise ValueError("name must be a shader file name ending in .wgsl, got %r" % (name,))
    for folder in folders():
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError("shader %s is in none of %s (set $%s to the repository's wgsl/ folder)"
                            % (name, ", ".join(str(f) for f in folders()), WGSL_DIR_ENV))
