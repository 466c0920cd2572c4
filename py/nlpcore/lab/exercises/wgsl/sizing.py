"""Workgroup memory of a shader: WGSL type sizes, the layout one set of overrides gives,
the refusal when it exceeds ``maxComputeWorkgroupStorageSize``, and a tile plan that fits.

Bytes are counted as the WebGPU spec counts them against the limit: each ``var<workgroup>``
the entry point uses, rounded up to 16 bytes, summed (as :mod:`nlpcore.kernels.tiling` does for
the lab's own shader).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
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
                "dv": self.env.get("DV"), "ks": self.env.get("KS"),
                "workgroup_size": self.invocations}


def _evaluate_pending(pending: Dict[str, str], env: Dict[str, int]) -> None:
    """Move into ``env`` every expression of ``pending`` that can be evaluated; defaults may
    refer to each other, in any order."""
    for _ in range(len(pending) + 1):
        for name, expr in list(pending.items()):
            try:
                env[name] = evaluate(expr, env)
                del pending[name]
            except ShaderError:
                pass


def _resolve(info: ShaderInfo, host: Dict[str, int]) -> Dict[str, int]:
    """Values of overrides and consts. D and DV are the host's (the data's shape); BR, BC and KS
    are the shader's own defaults when it gives them (the learner's tile plan), else the host's;
    SPART, unless the shader gives it, is what tiling makes of those: Br·KS·Bc partial scores
    when a row has several lanes, else 1 (:func:`nlpcore.kernels.tiling.spart_elements`)."""
    env = {"D": host["D"], "DV": host["DV"]}
    pending = dict(info.consts)
    pending.update({n: e for n, e in info.overrides.items() if e is not None})
    for name in ("D", "DV"):
        pending.pop(name, None)
    _evaluate_pending(pending, env)
    for name in ("BR", "BC", "KS"):
        if name not in env and name not in pending:
            env[name] = host[name]
    _evaluate_pending(pending, env)
    if "SPART" not in env and "SPART" not in pending and all(n in env for n in ("BR", "BC", "KS")):
        env["SPART"] = tiling.spart_elements(env["BR"], env["BC"], env["KS"])
        _evaluate_pending(pending, env)
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
        if not isinstance(env.get(name), int) or env[name] <= 0:
            raise ShaderError("%s must be a positive integer, got %s" % (name, env.get(name)))
    if env["BC"] % tiling.KEY_STEP:
        raise ShaderError("BC = %d is not a multiple of %d: the kernel takes keys %d at a time "
                          "(a vec4 of scores)" % (env["BC"], tiling.KEY_STEP, tiling.KEY_STEP))
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


def _with_blocks(info: ShaderInfo, br: int, bc: int) -> ShaderInfo:
    """The shader with BR and BC fixed (their defaults, or const values, replaced)."""
    fixed = {"BR": str(br), "BC": str(bc)}
    return replace(info, overrides={n: fixed.get(n, e) for n, e in info.overrides.items()},
                   consts={n: fixed.get(n, e) for n, e in info.consts.items()})


def fitting_plan(info: ShaderInfo, host: Dict[str, int]) -> Optional[Layout]:
    """A tile plan for which this shader's own workgroup arrays fit the limit, chosen by
    :func:`nlpcore.kernels.tiling.plan`'s rule: Br is the shader's own (its BR default), else the
    host's, halved while even Bc = KEY_STEP does not fit (or the workgroup would pass 256
    invocations); Bc is then the largest multiple of KEY_STEP up to MAX_BLOCK that fits.
    The bytes are those of the learner's declarations (for the lab's shader they are
    tiling.bytes_needed, so this is tiling.plan's choice). None if nothing fits."""
    env = _resolve(info, host)
    step = tiling.KEY_STEP

    def trial(br: int, bc: int) -> Optional[Layout]:
        try:
            lay = layout(_with_blocks(info, br, bc), dict(host, BR=br, BC=bc))
        except ShaderError:
            return None
        fits = lay.bytes_used <= STORAGE_LIMIT and lay.invocations <= tiling.WEBGPU_DEFAULT_INVOCATIONS
        return lay if fits else None

    br = env.get("BR") if isinstance(env.get("BR"), int) and env["BR"] > 0 else host["BR"]
    while br > 1 and trial(br, step) is None:
        br //= 2
    best = trial(br, step)
    if best is None:
        return None
    bc = step
    while bc + step <= tiling.MAX_BLOCK:
        bigger = trial(br, bc + step)
        if bigger is None:
            break
        best, bc = bigger, bc + step
    return best


def refusal(lay: Layout, info: ShaderInfo, host: Dict[str, int]) -> str:
    parts = ", ".join("%s %d (line %d)" % a for a in lay.arrays)
    text = ("refused: with BR=%d, BC=%d, D=%d, DV=%d your shader needs %d bytes of workgroup "
            "storage (%s), over the %d of maxComputeWorkgroupStorageSize"
            % (lay.env["BR"], lay.env["BC"], lay.env["D"], lay.env["DV"], lay.bytes_used, parts,
               STORAGE_LIMIT))
    fit = fitting_plan(info, host)
    if fit is None:
        return text + "; no tile plan fits d=%d with these arrays, not even BR = 1, BC = %d" % (
            host["D"], tiling.KEY_STEP)
    return text + "; a plan that fits: BR=%d, BC=%d (%d bytes)" % (fit.env["BR"], fit.env["BC"],
                                                                   fit.bytes_used)
