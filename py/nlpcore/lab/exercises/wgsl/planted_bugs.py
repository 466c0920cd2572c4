"""Planted bugs, used by the tests: each is the reference shader ``wgsl/flash_fwd.wgsl`` with
ONE edit (find -> replace, the find text occurring exactly once), so a bug can never drift away
from the shader it breaks. This file is the only place they are defined: when the shader changes,
regenerate the find/replace pairs here (``planted_bug`` raises if a find text no longer occurs
exactly once).
"""
from __future__ import annotations

from nlpcore import shaders

_V_STAGED = "      v_tile[e] = x;\n    }\n    workgroupBarrier();\n"

# name: (what goes wrong, find, replace)
PLANTED_BUGS = {
    "missing_barrier": (
        "no barrier between staging K_j, V_j and reading them, so an invocation may read a key "
        "another has not stored yet",
        _V_STAGED, "      v_tile[e] = x;\n    }\n"),
    "nan_masked_rows": (
        "the output divides by l itself, so a row with no allowed key (l = 0) computes 0 / 0 = NaN",
        "= o_tile[e] / safe_l;", "= o_tile[e] / l;"),
    "no_ragged_guard": (
        "the score loop forgets `c < cols`, so in a ragged last key tile the zero-filled keys past "
        "Nk get a real score (0) and a share of the softmax",
        "if (r < rows && c < cols && allowed(", "if (r < rows && allowed("),
    "nonuniform_barrier": (
        "a barrier in non-uniform control flow (it depends on the invocation index t); Tint "
        "(Chromium) rejects the shader at compile time, naga may accept it",
        _V_STAGED,
        "      v_tile[e] = x;\n    }\n    if (t < BR) {\n      workgroupBarrier();  // only row owners wait: not allowed\n    }\n"),
    "over_budget": (
        "tiles of 64 x 64 fixed by override defaults; with d = 64 the workgroup arrays need far "
        "more than 16384 bytes, so the page must refuse the pipeline",
        "override BR: u32;\noverride BC: u32;", "override BR: u32 = 64;\noverride BC: u32 = 64;"),
}


def planted_bug(name: str) -> str:
    """The reference shader with the one-edit bug ``name`` of :data:`PLANTED_BUGS` applied."""
    if name not in PLANTED_BUGS:
        raise ValueError("name must be one of {}, got {!r}".format(sorted(PLANTED_BUGS), name))
    why, find, replace = PLANTED_BUGS[name]
    source = shaders.text("flash_fwd.wgsl")
    if source.count(find) != 1:
        raise ValueError("planted bug {!r}: its find text occurs {} times in flash_fwd.wgsl, "
                         "expected once".format(name, source.count(find)))
    return "// Planted bug: {}.\n".format(why) + source.replace(find, replace)
