"""The interface every learner shader keeps: the bindings and overrides of
``wgsl/flash_fwd.wgsl``, and :func:`check_interface`, which names what is missing."""
from __future__ import annotations

from .expressions import ShaderError
from .reader import ShaderInfo

# The interface every learner shader keeps (names and bindings of wgsl/flash_fwd.wgsl).
BINDINGS = (
    (0, "params", "uniform"),
    (1, "q", "read-only-storage"),
    (2, "k", "read-only-storage"),
    (3, "v", "read-only-storage"),
    (4, "mask_bits", "read-only-storage"),
    (5, "o", "storage"),
    (6, "lse", "storage"),
)
REQUIRED_USE = ("params", "q", "k", "v", "o", "lse")  # mask_bits only once masks are handled
HOST_OVERRIDES = ("BR", "BC", "D", "DV", "KS", "SPART")  # what the host can set (tiling.plan's names)


def check_interface(info: ShaderInfo) -> None:
    """ShaderError unless the shader has what the host binds and sets."""
    problems = []
    if info.entry_line is None:
        problems.append("an entry point `fn main(...)`")
    elif info.workgroup_size is None:
        problems.append("`@compute @workgroup_size(...)` on fn main")
    for index, name, kind in BINDINGS:
        got = info.bindings.get(index)
        if got is None:
            if name in REQUIRED_USE:
                problems.append("`@group(0) @binding(%d) var<%s> %s` (%s)"
                                % (index, _space(kind), name, kind))
            continue
        got_name, space, line = got
        if got_name != name:
            problems.append("binding %d named %s, not %s (line %d)" % (index, name, got_name, line))
        elif (space if space != "storage" else "storage,read") != _space(kind):
            problems.append("binding %d (%s) as var<%s>, not var<%s> (line %d)"
                            % (index, name, _space(kind).replace(",", ", "), space.replace(",", ", "),
                               line))
    for name in ("D", "DV"):
        if name not in info.overrides:
            problems.append("`override %s: u32;` (the host sets it per case)" % name)
    for name in ("BR", "BC"):
        if name not in info.overrides and name not in info.consts:
            problems.append("`override %s: u32;` (or with a default: your tile plan)" % name)
    unknown = sorted(n for n, default in info.overrides.items()
                     if default is None and n not in HOST_OVERRIDES)
    if unknown:
        problems.append("defaults for the overrides %s (the host sets only %s)"
                        % (", ".join(unknown), ", ".join(HOST_OVERRIDES)))
    if problems:
        raise ShaderError("your shader needs " + "; ".join(problems))


def _space(kind: str) -> str:
    return {"uniform": "uniform", "read-only-storage": "storage, read",
            "storage": "storage, read_write"}[kind].replace(" ", "")
