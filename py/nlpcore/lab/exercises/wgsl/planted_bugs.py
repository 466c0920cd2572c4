"""Planted bugs, used by the tests: each is the reference shader ``wgsl/flash_fwd.wgsl`` with
ONE edit (find -> replace through :func:`.patches.patch`, the find text occurring exactly once),
so a bug can never drift away from the shader it breaks. This file is the only place they are
defined: when the shader changes, regenerate the find/replace pairs here (``planted_bug``
raises if a find text no longer occurs exactly once).
"""
from __future__ import annotations

from .patches import patch

_STAGED = ("      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, nv);\n"
           "    }\n"
           "    workgroupBarrier();\n")
_STAGED_NO_BARRIER = ("      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, nv);\n"
                      "    }\n")
_LIVE = """      let live = vec4<bool>(row_ok && g < cols && allowed(b, qi, k0 + g),
                            row_ok && g + 1u < cols && allowed(b, qi, k0 + g + 1u),
                            row_ok && g + 2u < cols && allowed(b, qi, k0 + g + 2u),
                            row_ok && g + 3u < cols && allowed(b, qi, k0 + g + 3u));
"""
NONUNIFORM_BARRIER_LINE = "      workgroupBarrier();  // only rows that exist wait: not allowed"

# name: (what goes wrong, find, replace)
PLANTED_BUGS = {
    "missing_barrier": (
        "no barrier between staging K_j, V_j and reading them, so an invocation may read a key "
        "another has not stored yet",
        _STAGED, _STAGED_NO_BARRIER),
    "nan_masked_rows": (
        "the output divides by l itself, not safe_l, so a row with no allowed key (l = 0) "
        "computes 0 / 0 = NaN",
        "chunk_store_o(&o_reg, (b * params.n_q + qi) * DV, mine * 4u, safe_l);",
        "chunk_store_o(&o_reg, (b * params.n_q + qi) * DV, mine * 4u, l);"),
    "no_ragged_guard": (
        "the scores forget `g + u < cols`, so in a ragged last key tile the zero-filled keys past "
        "Nk get a real score (0) and a share of the softmax",
        _LIVE, _LIVE.replace(" && g < cols", "").replace(" && g + 1u < cols", "")
                    .replace(" && g + 2u < cols", "").replace(" && g + 3u < cols", "")),
    "nonuniform_barrier": (
        "a barrier in non-uniform control flow (row_ok depends on the invocation index t); Tint "
        "(Chromium) rejects the shader at compile time, naga may accept it",
        _STAGED,
        _STAGED_NO_BARRIER + "    if (row_ok) {\n" + NONUNIFORM_BARRIER_LINE + "\n    }\n"),
    "over_budget": (
        "tiles of 64 rows x 64 keys fixed by override defaults; the K/V tiles alone then need "
        "twice the 16384 bytes of workgroup memory, so the page must refuse the pipeline",
        "override BR: u32;\noverride BC: u32;", "override BR: u32 = 64;\noverride BC: u32 = 64;"),
}


def planted_bug(name: str) -> str:
    """The reference shader with the one-edit bug ``name`` of :data:`PLANTED_BUGS` applied."""
    if name not in PLANTED_BUGS:
        raise ValueError("name must be one of {}, got {!r}".format(sorted(PLANTED_BUGS), name))
    why, find, replace = PLANTED_BUGS[name]
    return "// Planted bug: {}.\n".format(why) + patch([(find, replace)], "planted bug " + repr(name))
