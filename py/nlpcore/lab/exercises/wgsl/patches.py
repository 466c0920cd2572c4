"""Texts made from the lab's shader ``wgsl/flash_fwd.wgsl`` by find -> replace edits (the Harden
starter, the planted bugs), so that they can never drift away from the shader they come from:
each find text must occur exactly once, and :func:`patch` raises when the shader has changed so
that it no longer does (regenerate the edits then)."""
from __future__ import annotations

from typing import Iterable, Tuple

from nlpcore import shaders

SHADER = "flash_fwd.wgsl"


def patch(edits: Iterable[Tuple[str, str]], what: str, source: str = None) -> str:
    """``source`` (default: the lab's shader) with every (find, replace) of ``edits`` applied in
    order. ValueError, naming ``what`` and the edit, when a find text does not occur exactly once."""
    text = shaders.text(SHADER) if source is None else source
    for number, (find, replace) in enumerate(edits, 1):
        count = text.count(find)
        if count != 1:
            raise ValueError("{}: edit {} finds {!r} {} times in {}, expected once (regenerate the "
                             "edits for the changed shader)".format(what, number, find[:60], count, SHADER))
        text = text.replace(find, replace)
    return text


INCLUDE = "// #include flash_fwd.wgsl chunk helpers"
_HELPERS_BEGIN = "// --- chunk helpers begin:"
_HELPERS_END = "// --- chunk helpers end ---"


def include_helpers(text: str) -> str:
    """``text`` with its :data:`INCLUDE` line replaced by the lab's shader's block of register-chunk
    helpers (between its "chunk helpers begin" and "end" lines), so the Scratch step shows the
    shader's own helpers instead of a copy that could drift. ValueError when either side lacks
    its marker."""
    shader = shaders.text(SHADER)
    begin, end = shader.find(_HELPERS_BEGIN), shader.find(_HELPERS_END)
    if begin < 0 or end < begin or text.count(INCLUDE) != 1:
        raise ValueError("include_helpers: {} must have one chunk-helpers block and the text one "
                         "{!r} line".format(SHADER, INCLUDE))
    block = shader[shader.index("\n", begin) + 1:end].strip("\n")
    return text.replace(INCLUDE, block)
