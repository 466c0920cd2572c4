"""The text of the lab's WGSL shaders (``wgsl/<name>`` in the repository), the same in CPython and
in Pyodide.

The shaders live in the repository's top-level ``wgsl/`` folder, where the pages fetch them from.
build.py's wheel carries a copy as ``nlpcore/_wgsl/<name>``, so Python inside the page (which has
no repository) reads the very same text. Lookup order: ``$NLPCORE_WGSL_DIR`` (a folder set by
whoever runs us), the copy inside an installed wheel, the repository checkout.

A shader may take marked regions of another instead of repeating them (the tier shaders take the
portable kernel's helpers from ``flash_fwd.wgsl``): a line

    // #include flash_fwd.wgsl chunk helpers

stands for the lines between ``// --- chunk helpers begin`` and ``// --- chunk helpers end`` of
that file. :func:`text` returns the shader with every such line replaced (:func:`compose`), so
Python, the benchmarks and, through build.py, the pages all compile the same composed text; the
files keep the directive, so a reader sees where each shared piece lives.
"""
from __future__ import annotations

import os
import pathlib
import re
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
    """Text of the shader ``name`` (e.g. ``"flash_fwd.wgsl"``) with its ``#include`` lines
    resolved (:func:`compose`); FileNotFoundError names every folder searched when none holds it."""
    return compose(raw(name), name)


INCLUDE = re.compile(r"^\s*// #include (\S+\.wgsl) (.+?)\s*$")
"""An include line: ``// #include <file> <region>``, indented or not (the region keeps its own
indentation)."""


def region(source: str, name: str, what: str = "shader") -> str:
    """The lines of ``source`` between its ``// --- <name> begin`` and ``// --- <name> end``
    lines (each exactly once; ValueError names ``what`` and the region otherwise)."""
    lines = source.split("\n")
    begins = [i for i, line in enumerate(lines) if line.lstrip().startswith("// --- {} begin".format(name))]
    ends = [i for i, line in enumerate(lines) if line.lstrip().startswith("// --- {} end".format(name))]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError("{} must mark region {!r} once with '// --- {} begin' ... '// --- {} end' lines "
                         "(found {} begin and {} end lines)".format(what, name, name, name, len(begins), len(ends)))
    return "\n".join(lines[begins[0] + 1:ends[0]]).strip("\n")


def compose(source: str, name: str = "shader", depth: int = 0) -> str:
    """``source`` with every ``// #include <file> <region>`` line replaced by that region of
    ``<file>`` (itself composed), headed by a comment naming where it came from."""
    if depth > 4:
        raise ValueError("{}: #include nested more than 4 deep".format(name))
    out = []
    for line in source.split("\n"):
        match = INCLUDE.match(line)
        if match is None:
            out.append(line)
            continue
        other, part = match.group(1), match.group(2)
        block = region(compose(raw(other), other, depth + 1), part, other)
        out.append(line[:len(line) - len(line.lstrip())] + "// (from {}: {})".format(other, part))
        out.append(block)
    return "\n".join(out)


def raw(name: str) -> str:
    """The file ``name`` as stored, ``#include`` lines left in place."""
    if not isinstance(name, str) or not name.endswith(".wgsl"):
        raise ValueError("name must be a shader file name ending in .wgsl, got %r" % (name,))
    for folder in folders():
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError("shader %s is in none of %s (set $%s to the repository's wgsl/ folder)"
                            % (name, ", ".join(str(f) for f in folders()), WGSL_DIR_ENV))
