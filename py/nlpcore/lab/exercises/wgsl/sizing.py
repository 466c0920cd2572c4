"""Workgroup memory of a shader: WGSL type sizes, the layout one set of overrides gives,
the refusal when it exceeds ``maxComputeWorkgroupStorageSize``, and a tile plan that fits.

Bytes are counted as the WebGPU spec counts them against the limit: each ``var<workgroup>``
the entry point uses, rounded up to 16 bytes, summed (as :mod:`nlpcore.kernels.tiling` does for
the lab's own shader).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from nlpcore.kernels import tiling

from .expressions import ShaderError, evaluate
from .reader import ShaderInfo

STORAGE_LIMIT = tiling.WEBGPU_DEFAULT_STORAGE  # bytes; the page's device has the default limits


_SCALAR_BYTES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "bool": 4}


def _split_args(inner: str) -> List[str]:
    depth, start, parts = 0, 0, []
    for i, ch in enumerate(inner):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return [p for p in parts if p]


def type_layout(type_text: str, env: Dict[str, int]) -> Tuple[int, int]:
    """(size, align) in bytes of a WGSL type (scalars, vectors, matrices, atomics, arrays), per
    the WGSL spec's memory layout rules. ShaderError for anything else (structs)."""
    t = type_text.replace(" ", "")
    if t in _SCALAR_BYTES:
        return _SCALAR_BYTES[t], _SCALAR_BYTES[t]
    m = re.fullmatch(r"vec([234])(?:<(\w+)>|([fiuh]))", t)
    if m:
        n = int(m.group(1))
        scalar = m.group(2) or {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}[m.group(3)]
        s = _SCALAR_BYTES[scalar]
        return n * s, (4 if n == 3 else n) * s
    m = re.fullmatch(r"mat([234])x([234])(?:<(\w+)>|([fh]))", t)
    if m:
        cols, rows = int(m.group(1)), int(m.group(2))
        col_size, col_align = type_layout("vec%d<%s>" % (rows, m.group(3) or
                                          {"f": "f32", "h": "f16"}[m.group(4)]), env)
        stride = -(-col_size // col_align) * col_align
        return cols * stride, col_align
    m = re.fullmatch(r"atomic<(\w+)>", t)
    if m:
        return 4, 4
    m = re.fullmatch(r"array<(.*)>", t)
    if m:
        args = _split_args(m.group(1))
        if len(args) != 2:
            raise ShaderError("a workgroup array needs a fixed element count: %s" % type_text)
        size, align = type_layout(args[0], env)
        count = evaluate(args[1], env)
        if count <= 0:
            raise ShaderError("array size %s = %d, must be positive" % (args[1], count))
        return count * (-(-size // align) * align), align
    raise ShaderError("cannot size the workgroup type %s (use arrays of f32/u32/i32/vecN/matCxR)"
                      % type_text)


@dataclass(frozen=True)
class Layout:
    """Workgroup memory of one shader for one set of override values."""
    constants: Dict[str, int]                    # the overrides the host passes (declared ones)
    env: Dict[str, int]                          # every known value (overrides and consts)
    arrays: Tuple[Tuple[str, int, int], ...]     # (name, bytes rounded to 16, line)
    bytes_used: int
    invocations: int

    def as_dict(self) -> dict:
        return {"arrays": [{"name": n, "bytes": b, "line": line} for n, b, line in self.arrays],
                "bytes_used": self.bytes_used, "storage_limit": STORAGE_LIMIT,
                "br": self.env.get("BR"), "bc": self.env.get("BC"), "d": self.env.get("D"),
                "dv": self.env.get("DV"), "workgroup_size": self.invocations}


def _resolve(info: ShaderInfo, host: Dict[str, int]) -> Dict[str, int]:
    """Values of overrides and consts: the shader's defaults win for BR/BC/WG, the host's
    values for D and DV (which are the data's shape)."""
    env: Dict[str, int] = {}
    pending = dict(info.consts)
    pending.update({n: e for n, e in info.overrides.items() if e is not None})
    for name in ("D", "DV"):
        env[name] = host[name]
        pending.pop(name, None)
    for _ in range(len(pending) + 1):  # defaults may refer to each other, in any order
        for name, expr in list(pending.items()):
            try:
                env[name] = evaluate(expr, env)
                del pending[name]
            except ShaderError:
                pass
    for name in ("BR", "BC", "WG"):
        if name not in env and name in host:
            env[name] = host[name]
    return env


def layout(info: ShaderInfo, host: Dict[str, int]) -> Layout:
    """The overrides the host will pass and the workgroup bytes the shader then needs."""
    env = _resolve(info, host)
    constants = {}
    for name in info.overrides:
        if name not in env:
            raise ShaderError("override %s = %s cannot be evaluated" % (name, info.overrides[name]))
        constants[name] = env[name]
    for name in ("BR", "BC"):
        if env.get(name, 0) <= 0:
            raise ShaderError("%s must be a positive integer, got %s" % (name, env.get(name)))
    arrays = []
    for var in info.workgroup:
        if not info.uses(var.name):
            continue  # not used by the entry point: WebGPU does not count it
        size, _ = type_layout(var.type, env)
        arrays.append((var.name, (size + 15) // 16 * 16, var.line))
    invocations = 1
    for dim in _split_args(info.workgroup_size or "1"):
        invocations *= evaluate(dim, env)
    return Layout(constants, env, tuple(arrays), sum(b for _, b, _ in arrays), invocations)


def fitting_plan(info: ShaderInfo, host: Dict[str, int]) -> Optional[Layout]:
    """The power-of-two BR, BC <= 64 with the largest tile area (ties: larger BR) for which
    this shader's own workgroup arrays fit the limit; None if none does."""
    best = None
    for br in (64, 32, 16, 8, 4, 2, 1):
        for bc in (64, 32, 16, 8, 4, 2, 1):
            trial = ShaderInfo(info.text, {n: (str(br) if n == "BR" else str(bc) if n == "BC" else e)
                                           for n, e in info.overrides.items()},
                               {n: (str(br) if n == "BR" else str(bc) if n == "BC" else e)
                                for n, e in info.consts.items()},
                               info.bindings, info.workgroup, info.workgroup_size, info.entry_line,
                               info.names)
            try:
                lay = layout(trial, dict(host, BR=br, BC=bc))
            except ShaderError:
                continue
            if lay.bytes_used <= STORAGE_LIMIT and (best is None or (br * bc, br) > best[0]):
                best = ((br * bc, br), lay)
    return None if best is None else best[1]


def refusal(lay: Layout, info: ShaderInfo, host: Dict[str, int]) -> str:
    parts = ", ".join("%s %d (line %d)" % a for a in lay.arrays)
    text = ("refused: with BR=%d, BC=%d, D=%d, DV=%d your shader needs %d bytes of workgroup "
            "storage (%s), over the %d of maxComputeWorkgroupStorageSize"
            % (lay.env["BR"], lay.env["BC"], lay.env["D"], lay.env["DV"], lay.bytes_used, parts,
               STORAGE_LIMIT))
    fit = fitting_plan(info, host)
    if fit is None:
        return text + "; no power-of-two tile plan fits d=%d with these arrays" % host["D"]
    return text + "; a plan that fits: BR=%d, BC=%d (%d bytes)" % (fit.env["BR"], fit.env["BC"],
                                                                   fit.bytes_used)
