"""Exercise ``wgsl`` (systems tier: Scratch · Harden): tiled exact attention as a WebGPU compute
shader, written by the learner, run on the page's GPU and checked against the CPU mirror.

The learner's code is a WGSL shader (``Step.language = "wgsl"``), so Python never runs it. Each
GPU check has two halves (see :mod:`nlpcore.lab.framework`): :meth:`GpuCase.prepare` reads the
shader's interface and workgroup arrays, fixes the tile plan, refuses a shader that needs more
than 16384 bytes of workgroup storage, and returns a dispatch spec carrying the shader inline
(``"code"``); the page runs it (``site/js/wgsl-exercise.js``, through ``navigator.gpu``) and
:meth:`GpuCase.verify` compares what came back with :mod:`nlpcore.kernels.flash_wgsl_mirror`,
the NumPy re-enactment of ``wgsl/flash_fwd.wgsl``. The Python-only checks (interface, memory
budget, the mirror with the learner's plan) run without WebGPU too.

The host sets the overrides ``D``, ``DV`` and ``WG`` per case; ``BR`` and ``BC`` come from the
shader's own ``override`` defaults when it gives them (that is the learner's tile plan) and from
:func:`nlpcore.kernels.tiling.plan` otherwise. Workgroup bytes are counted as the WebGPU spec
counts them against ``maxComputeWorkgroupStorageSize``: each ``var<workgroup>`` that the shader
uses, rounded up to 16 bytes, summed.

Shader texts: the starters, the Scratch solution and the planted bugs are in
``wgsl/exercises/``; the Harden solution is the lab's own ``wgsl/flash_fwd.wgsl``. They are read
from the repository when the site data is exported (CPython); the wheel that Pyodide installs
does not carry them, and grading never needs them.

Sources: Dao et al. 2022 (arXiv:2205.14135) Algorithm 1; Dao 2023 FlashAttention-2
(arXiv:2307.08691) loop order; Milakov & Gimelshein 2018 (arXiv:1805.02867) online softmax;
the WebGPU spec's ``maxComputeWorkgroupStorageSize`` (default 16384 bytes).
"""
from __future__ import annotations

import math
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..kernels import flash_wgsl_mirror as mirror
from ..kernels import reference, tiling
from .framework import TOLERANCES, Check, CheckFailed, Exercise, Step, assert_close, shapes_of

STORAGE_LIMIT = tiling.WEBGPU_DEFAULT_STORAGE  # bytes; the page's device has the default limits
HOST_WG = 64                                   # invocations per workgroup unless the shader says
MAX_INVOCATIONS = tiling.WEBGPU_DEFAULT_INVOCATIONS
TOLERANCE = dict(TOLERANCES["float32"])       # GPU vs mirror, both float32: the same sums,
                                               # possibly added in another order

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
HOST_OVERRIDES = ("BR", "BC", "D", "DV", "WG")


# ------------------------------------------------------------------------------------------
# Reading a shader: overrides, consts, bindings, workgroup arrays (a small WGSL subset)
# ------------------------------------------------------------------------------------------

class ShaderError(ValueError):
    """The shader does not have the interface the host needs; the message says what is wrong."""


def _strip_comments(source: str) -> str:
    """WGSL without // and /* */ comments; newlines kept so line numbers still match."""
    def blank(match):
        return re.sub(r"[^\n]", " ", match.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, source, flags=re.S)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uif]?|([A-Za-z_]\w*)|(\S))")


def evaluate(expr: str, env: Dict[str, int]) -> int:
    """Value of an integer WGSL expression made of literals, names in ``env``, + - * / % and
    parentheses (u32 arithmetic: / truncates). Raises ShaderError naming what is unknown."""
    tokens = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            break
        num, name, sym = m.groups()
        tokens.append(("num", int(num, 0)) if num else ("name", name) if name else ("sym", sym))
        pos = m.end()
    tokens.append(("end", None))
    at = [0]

    def peek():
        return tokens[at[0]]

    def take():
        tok = tokens[at[0]]
        at[0] += 1
        return tok

    def factor():
        kind, val = take()
        if kind == "num":
            return val
        if kind == "name":
            if peek() == ("sym", "("):  # u32(...) / i32(...) conversions
                if val not in ("u32", "i32"):
                    raise ShaderError("cannot evaluate %s(...) in %r" % (val, expr))
                take()
                inner = total()
                if take() != ("sym", ")"):
                    raise ShaderError("unbalanced parentheses in %r" % expr)
                return inner
            if val not in env:
                raise ShaderError("%r in %r has no value the host knows" % (val, expr))
            return env[val]
        if (kind, val) == ("sym", "("):
            inner = total()
            if take() != ("sym", ")"):
                raise ShaderError("unbalanced parentheses in %r" % expr)
            return inner
        if (kind, val) == ("sym", "-"):
            return -factor()
        raise ShaderError("cannot evaluate %r (unexpected %r)" % (expr, val))

    def term():
        value = factor()
        while peek() in (("sym", "*"), ("sym", "/"), ("sym", "%")):
            op = take()[1]
            rhs = factor()
            if op != "*" and rhs == 0:
                raise ShaderError("division by zero in %r" % expr)
            value = value * rhs if op == "*" else (value // rhs if op == "/" else value % rhs)
        return value

    def total():
        value = term()
        while peek() in (("sym", "+"), ("sym", "-")):
            op = take()[1]
            rhs = term()
            value = value + rhs if op == "+" else value - rhs
        return value

    value = total()
    if peek()[0] != "end":
        raise ShaderError("cannot evaluate %r (trailing %r)" % (expr, peek()[1]))
    return value


@dataclass(frozen=True)
class WorkgroupVar:
    name: str
    type: str
    line: int


@dataclass(frozen=True)
class ShaderInfo:
    """What the host reads from a learner's shader (comments stripped)."""
    text: str                                   # the source without comments
    overrides: Dict[str, Optional[str]]         # name -> default expression or None
    consts: Dict[str, str]                      # module-scope const name -> expression
    bindings: Dict[int, Tuple[str, str, int]]   # binding -> (name, address space text, line)
    workgroup: Tuple[WorkgroupVar, ...]
    workgroup_size: Optional[str]               # the @workgroup_size(...) of fn main
    entry_line: Optional[int]
    names: Dict[str, int]                       # identifier -> occurrences (not after a ".")

    def uses(self, name: str) -> bool:
        """Is ``name`` referenced anywhere besides its declaration? (How WebGPU decides which
        bindings and workgroup variables an entry point uses, to a first approximation.)"""
        return self.names.get(name, 0) > 1


_parsed: Dict[str, ShaderInfo] = {}


def parse_shader(source: str) -> ShaderInfo:
    """Read a shader's interface (cached: every check of one grading reads the same source)."""
    if not isinstance(source, str):
        raise TypeError("source must be a str of WGSL, got %s" % type(source).__name__)
    if source not in _parsed:
        if len(_parsed) > 8:
            _parsed.clear()
        _parsed[source] = _parse(source)
    return _parsed[source]


def _parse(source: str) -> ShaderInfo:
    if not isinstance(source, str):
        raise TypeError("source must be a str of WGSL, got %s" % type(source).__name__)
    text = _strip_comments(source)
    overrides = {}
    for m in re.finditer(r"\boverride\s+(\w+)\s*(?::\s*\w+)?\s*(?:=\s*([^;]+))?;", text):
        overrides[m.group(1)] = m.group(2).strip() if m.group(2) else None
    consts = {m.group(1): m.group(2).strip() for m in
              re.finditer(r"\bconst\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([^;]+);", text)}
    bindings = {}
    for m in re.finditer(r"((?:@\s*\w+\s*\([^)]*\)\s*)+)var\s*(?:<([^>]*)>)?\s*(\w+)\s*:", text):
        attrs = dict(re.findall(r"@\s*(\w+)\s*\(\s*([^)]*?)\s*\)", m.group(1)))
        if "binding" in attrs:
            try:
                index = int(attrs["binding"], 0)
            except ValueError:
                continue
            if attrs.get("group", "0").strip() in ("0", "0u", "0i"):
                bindings[index] = (m.group(3), (m.group(2) or "").replace(" ", ""),
                                   _line_of(text, m.start(3)))
    workgroup = []
    for m in re.finditer(r"\bvar\s*<\s*workgroup\s*>\s*(\w+)\s*:\s*", text):
        end = text.find(";", m.end())
        workgroup.append(WorkgroupVar(m.group(1), text[m.end():end if end >= 0 else None].strip(),
                                      _line_of(text, m.start())))
    entry = re.search(r"\bfn\s+main\s*\(", text)
    size = line = None
    if entry is not None:
        line = _line_of(text, entry.start())
        before = text[max(text.rfind(";", 0, entry.start()), text.rfind("}", 0, entry.start())) + 1:
                      entry.start()]
        sm = re.search(r"@\s*workgroup_size\s*\(([^)]*)\)", before)
        if "@compute" in before.replace(" ", "") and sm:
            size = sm.group(1)
    names: Dict[str, int] = {}
    for name in re.findall(r"(?<![\w.])[A-Za-z_]\w*", text):
        names[name] = names.get(name, 0) + 1
    return ShaderInfo(text, overrides, consts, bindings, tuple(workgroup), size, line, names)


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


# ------------------------------------------------------------------------------------------
# The tile plan a shader implies, and its workgroup memory
# ------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------
# Cases and GPU checks
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One input of the ladder. ``n`` sizes of 0 mean "whole tiles": Nq = Nk = tiles · lcm(BR, BC)
    of the learner's plan (the Scratch step's square sizes that are multiples of the tile)."""
    id: str
    title: str
    batch: int
    n_q: int
    n_k: int
    d: int
    dv: int
    causal: bool = False
    mask: Optional[str] = None     # None, "padding" (key padding), "rows" (fully masked rows)
    spread: float = 1.0            # q and k scale: large values stress the running max
    tiles: int = 0                 # whole-tile case: this many lcm(BR, BC) blocks
    seed: int = 0

    def sizes(self, br: int, bc: int) -> Tuple[int, int]:
        if self.tiles:
            lcm = br * bc // math.gcd(br, bc)
            if lcm > MAX_WHOLE_TILE:
                raise CheckFailed(
                    "not run: with BR=%d and BC=%d the smallest size made of whole tiles is "
                    "lcm(BR, BC) = %d rows, more than this step's cases use (%d); choose tiles "
                    "whose sizes divide each other, e.g. powers of two" % (br, bc, lcm, MAX_WHOLE_TILE),
                    expected="lcm(BR, BC) <= %d" % MAX_WHOLE_TILE, got="lcm = %d" % lcm)
            return self.tiles * lcm, self.tiles * lcm
        return self.n_q, self.n_k

    def inputs(self, br: int, bc: int):
        """q (B, Nq, d), k (B, Nk, d), v (B, Nk, dv) float32 and the mask (or None)."""
        n_q, n_k = self.sizes(br, bc)
        r = np.random.RandomState(1000 + self.seed)
        q = (self.spread * r.standard_normal((self.batch, n_q, self.d))).astype(np.float32)
        k = (self.spread * r.standard_normal((self.batch, n_k, self.d))).astype(np.float32)
        v = r.standard_normal((self.batch, n_k, self.dv)).astype(np.float32)
        mask = None
        if self.mask == "padding":  # (B, 1, Nk): batch entry b pads its last 7 + 11·b keys
            mask = np.ones((self.batch, 1, n_k), dtype=bool)
            for b in range(self.batch):
                mask[b, 0, n_k - 7 - 11 * b:] = False
        elif self.mask == "rows":   # (B, Nq, Nk): random, with rows 3 and Nq-2 fully masked
            mask = r.random_sample((self.batch, n_q, n_k)) < 0.6
            mask[:, 3, :] = False
            mask[:, n_q - 2, :] = False
        return q, k, v, mask

    def describe(self, br: int, bc: int) -> str:
        n_q, n_k = self.sizes(br, bc)
        text = "B=%d, Nq=%d, Nk=%d, d=%d, dv=%d" % (self.batch, n_q, n_k, self.d, self.dv)
        if self.causal:
            text += ", causal"
        if self.mask == "padding":
            text += ", key padding"
        elif self.mask == "rows":
            text += ", mask with fully masked rows"
        if self.spread != 1.0:
            text += ", |q|,|k| ~ %g" % self.spread
        return text


SCRATCH_CASES = (
    Case("one-tile", "One tile: Nq = Nk = lcm(BR, BC), d = 64", 1, 0, 0, 64, 64, tiles=1, seed=1),
    Case("many-tiles", "Many tiles and a batch of 2: d = 32", 2, 0, 0, 32, 32, tiles=4, seed=2),
    Case("large-scores", "Large scores: the running max must rescale", 1, 0, 0, 16, 16,
         spread=6.0, tiles=3, seed=3),
)

HARDEN_CASES = (
    Case("ragged", "Ragged N: 77 is no multiple of any tile", 1, 77, 77, 32, 32, seed=11),
    Case("nq-ne-nk", "Nq ≠ Nk (50 queries, 123 keys)", 1, 50, 123, 32, 32, seed=12),
    Case("causal", "Causal, ragged, batch of 2", 2, 70, 70, 32, 32, causal=True, seed=13),
    Case("key-padding", "Key padding mask (whole tiles)", 2, 64, 64, 32, 32, mask="padding",
         seed=14),
    Case("masked-rows", "Fully masked rows: o = 0, lse = -inf, no NaN", 1, 64, 64, 32, 32,
         mask="rows", seed=15),
    Case("odd-d", "d = 24 and dv = 40 (not powers of two)", 1, 64, 64, 24, 40, seed=16),
    Case("many-workgroups", "Many workgroups: B = 4, N = 384", 4, 384, 384, 16, 16, seed=17),
)

MAX_WHOLE_TILE = 256    # rows: the Scratch cases are 1-4 tiles of lcm(BR, BC) rows
MAX_MIRROR_STEPS = 4096  # tile steps the mirror takes with the learner's plan before it uses
                         # the host's (tiny tiles would take minutes in Pyodide; the result
                         # differs by float32 rounding only, far inside the tolerance)

TIMING_CASES = ("many-tiles", "many-workgroups")  # the page also times the reference shader here


def _host(case: Case) -> Dict[str, int]:
    auto = tiling.plan(case.d, 4, dv=case.dv)
    return {"BR": auto.br, "BC": auto.bc, "D": case.d, "DV": case.dv, "WG": HOST_WG}


def _source(ns) -> str:
    source = ns.get("source")
    if not isinstance(source, str) or not source.strip():
        raise CheckFailed("the editor is empty: write a WGSL compute shader",
                          expected="WGSL source", got=repr(source)[:40])
    return source


def _plan_for(ns, case: Case) -> Tuple[ShaderInfo, Layout]:
    """The learner's interface and layout for this case; CheckFailed (a refusal) when the
    interface is wrong or the workgroup arrays exceed the limit."""
    info = parse_shader(_source(ns))
    host = _host(case)
    try:
        check_interface(info)
        lay = layout(info, host)
    except ShaderError as err:
        raise CheckFailed(str(err), expected="the interface of the starter shader")
    if lay.bytes_used > STORAGE_LIMIT:
        raise CheckFailed(refusal(lay, info, host), expected="<= %d bytes" % STORAGE_LIMIT,
                          got="%d bytes" % lay.bytes_used, layout=dict(lay.as_dict(), case=case.id))
    if lay.invocations > MAX_INVOCATIONS:
        raise CheckFailed("refused: @workgroup_size gives %d invocations, over WebGPU's default "
                          "maxComputeInvocationsPerWorkgroup of %d" % (lay.invocations, MAX_INVOCATIONS),
                          expected="<= %d" % MAX_INVOCATIONS, got=str(lay.invocations))
    return info, lay


_reference_cache: Dict[tuple, tuple] = {}


def reference64(case: Case, br: int, bc: int):
    """(o, lse) of nlpcore.kernels.reference in float64 on the case's inputs (cached)."""
    key = (case, br, bc)
    if key not in _reference_cache:
        q, k, v, mask, _, _ = expected(case, br, bc)
        if len(_reference_cache) > 32:
            _reference_cache.clear()
        _reference_cache[key] = reference.forward(q.astype(np.float64), k.astype(np.float64),
                                                  v.astype(np.float64), causal=case.causal,
                                                  mask=mask)
    return _reference_cache[key]


def _tile_plan(case: Case, lay: Layout) -> tiling.TilePlan:
    """The learner's plan as a TilePlan for the mirror (arrays as the learner declared them)."""
    return tiling.TilePlan(d=case.d, dv=case.dv, dtype_bytes=4, br=lay.env["BR"], bc=lay.env["BC"],
                           workgroup_size=lay.invocations, storage_limit=STORAGE_LIMIT,
                           arrays=tuple((n, b) for n, b, _ in lay.arrays),
                           bytes_used=lay.bytes_used)


_expected_cache: Dict[tuple, tuple] = {}


def expected(case: Case, br: int, bc: int):
    """(q, k, v, mask, o, lse) with o, lse from the CPU mirror of wgsl/flash_fwd.wgsl under the
    learner's block sizes (the host's when those need over MAX_MIRROR_STEPS tile steps); cached,
    since grade() and every verify() need them. (The float64 reference of the same inputs is
    :func:`reference64`.)"""
    key = (case, br, bc)
    if key not in _expected_cache:
        q, k, v, mask = case.inputs(br, bc)
        steps = q.shape[0] * -(-q.shape[1] // br) * -(-k.shape[1] // bc)
        if steps <= MAX_MIRROR_STEPS:
            plan = tiling.plan(case.d, 4, storage_limit=1 << 30, dv=case.dv, br=br, bc=bc)
        else:
            plan = tiling.plan(case.d, 4, dv=case.dv)
        o, lse = mirror.forward(q, k, v, causal=case.causal, mask=mask, plan=plan)
        if len(_expected_cache) > 32:
            _expected_cache.clear()
        _expected_cache[key] = (q, k, v, mask, o, lse)
    return _expected_cache[key]


class GpuCase:
    """prepare/verify of one GPU check (runner "webgpu")."""

    def __init__(self, case: Case):
        self.case = case

    def spec(self, ns) -> dict:
        info, lay = _plan_for(ns, self.case)
        unused = [n for n in REQUIRED_USE if not info.uses(n)]
        if unused:
            raise CheckFailed("not run: your shader declares but never uses %s — the kernel must "
                              "read params, q, k, v and write o and lse (see the TODOs)"
                              % ", ".join(unused), expected="every binding in use",
                              got="unused: " + ", ".join(unused))
        br, bc = lay.env["BR"], lay.env["BC"]
        q, k, v, mask, _, _ = expected(self.case, br, bc)
        spec = mirror.dispatch_spec(q, k, v, causal=self.case.causal, mask=mask,
                                    plan=_tile_plan(self.case, lay))
        spec["shader"] = "your-shader.wgsl"
        spec["code"] = ns["source"]
        spec["constants"] = dict(lay.constants)
        unbound = [b for b in spec["bindings"] if not info.uses(b["name"])]
        spec["bindings"] = [b for b in spec["bindings"] if info.uses(b["name"])]
        spec["meta"].update({
            "case": self.case.id, "case_text": self.case.describe(br, bc),
            "layout": lay.as_dict(),
        })
        if self.case.id in TIMING_CASES:  # the same inputs through the lab's reference shader
            auto = tiling.plan(self.case.d, 4, dv=self.case.dv)
            spec["meta"]["reference"] = {"shader": mirror.FLASH_SHADER,
                                         "constants": auto.constants(),
                                         "workgroups": [-(-q.shape[1] // auto.br), 1, q.shape[0]],
                                         "br": auto.br, "bc": auto.bc,
                                         "bindings": unbound}  # those the learner's shader lacks
        return spec

    def prepare(self, ns) -> dict:
        return self.spec(ns)

    def verify(self, ns, job, outputs) -> str:
        spec = self.spec(ns)  # rebuilt from the case, not trusted from the page
        br, bc = spec["meta"]["layout"]["br"], spec["meta"]["layout"]["bc"]
        q, k, v, mask, o_want, lse_want = expected(self.case, br, bc)
        missing = [n for n in ("o", "lse") if n not in (outputs or {})]
        if missing:
            raise CheckFailed("the page returned no %s buffer" % " or ".join(missing),
                              expected="outputs o and lse", got=sorted(outputs or {}))
        o, lse = mirror.decode_outputs(spec, outputs)
        context = "%s [%s; BR=%d, BC=%d]" % (self.case.title, self.case.describe(br, bc), br, bc)
        shapes = shapes_of(q=q, k=k, v=v, o=o_want)
        if not np.any(o) and np.any(o_want):
            raise CheckFailed("%s: your kernel left o all zeros — nothing was written back "
                              "(TODO 6?)" % context, expected="o ≈ the mirror's output",
                              got="all zeros", shapes=shapes, tolerance=_tol_text())
        err_o = assert_close("o", o, o_want, shapes=shapes, context=context, **TOLERANCE)
        err_lse = assert_close("lse", lse, lse_want, shapes=shapes, context=context, **TOLERANCE)
        return ("max |Δ| o = %.2g, lse = %.2g vs the CPU mirror (tolerance %s) on %s; BR=%d, BC=%d"
                % (err_o, err_lse, _tol_text(), self.case.describe(br, bc), br, bc))


def _tol_text() -> str:
    return "|Δ| <= %g + %g·|expected|, float32" % (TOLERANCE["atol"], TOLERANCE["rtol"])


def _gpu_check(case: Case) -> Check:
    g = GpuCase(case)
    return Check(case.id, case.title, runner="webgpu", prepare=g.prepare, verify=g.verify)


# ------------------------------------------------------------------------------------------
# Checks that run in Python alone (also without WebGPU)
# ------------------------------------------------------------------------------------------

def _check_interface(ns) -> str:
    info = parse_shader(_source(ns))
    try:
        check_interface(info)
    except ShaderError as err:
        raise CheckFailed(str(err), expected="the interface of the starter shader")
    plan = ", ".join("%s = %s" % (n, info.overrides[n] or "set by the host")
                     for n in ("BR", "BC", "WG") if n in info.overrides)
    return "bindings 0-6, overrides D, DV%s and @compute fn main (line %d) are in place" % (
        (", " + plan) if plan else "", info.entry_line)


def _budget(cases):
    def run(ns) -> str:
        worst = None
        for case in cases:
            _, lay = _plan_for(ns, case)
            if worst is None or lay.bytes_used > worst[1].bytes_used:
                worst = (case, lay)
        case, lay = worst
        return ("largest use %d of %d bytes (%s) on %s, BR=%d, BC=%d"
                % (lay.bytes_used, STORAGE_LIMIT, ", ".join("%s %d" % (n, b) for n, b, _ in lay.arrays),
                   case.describe(lay.env["BR"], lay.env["BC"]), lay.env["BR"], lay.env["BC"]))
    return run


def _mirror(cases):
    def run(ns) -> str:
        worst = 0.0
        for case in cases:
            _, lay = _plan_for(ns, case)
            br, bc = lay.env["BR"], lay.env["BC"]
            q, k, v, mask, o, lse = expected(case, br, bc)
            o64, lse64 = reference64(case, br, bc)
            shapes = shapes_of(q=q, k=k, v=v)
            context = "mirror with BR=%d, BC=%d on %s" % (br, bc, case.describe(br, bc))
            worst = max(worst, assert_close("o", o, o64, shapes=shapes, context=context),
                        assert_close("lse", lse, lse64, shapes=shapes, context=context))
        return ("the CPU mirror with your tile plan matches the float64 reference on all %d cases "
                "(max |Δ| %.2g); these are the values the GPU checks compare against"
                % (len(cases), worst))
    return run


def _python_checks(cases) -> Tuple[Check, ...]:
    return (
        Check("interface", "Interface: bindings, overrides, entry point (runs without WebGPU)",
              run=_check_interface),
        Check("budget", "Workgroup memory fits 16384 bytes (runs without WebGPU)",
              run=_budget(cases)),
        Check("mirror", "Mirror only: the CPU mirror with your plan vs float64 (runs without WebGPU)",
              run=_mirror(cases)),
    )


# ------------------------------------------------------------------------------------------
# Texts
# ------------------------------------------------------------------------------------------

WGSL_DIR_ENV = "NLPCORE_WGSL_DIR"

# Planted bugs, used by the tests: each is the reference shader wgsl/flash_fwd.wgsl with ONE
# edit (find -> replace, the find text occurring exactly once), so a bug can never drift away
# from the shader it breaks. name: (what goes wrong, find, replace).
_V_STAGED = "      v_tile[e] = x;\n    }\n    workgroupBarrier();\n"
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
    source = wgsl_text("flash_fwd.wgsl")
    if source.count(find) != 1:
        raise ValueError("planted bug {!r}: its find text occurs {} times in flash_fwd.wgsl, "
                         "expected once".format(name, source.count(find)))
    return "// Planted bug: {}.\n".format(why) + source.replace(find, replace)


def wgsl_text(rel: str) -> str:
    """Text of wgsl/<rel> from $NLPCORE_WGSL_DIR or the repository; "" where neither exists
    (inside Pyodide, whose wheel has no wgsl/ folder: the page reads the shaders from
    data/exercises.json, exported at build time, and grading does not need them)."""
    candidates = []
    if os.environ.get(WGSL_DIR_ENV):
        candidates.append(pathlib.Path(os.environ[WGSL_DIR_ENV]) / rel)
    candidates.append(pathlib.Path(__file__).resolve().parents[3] / "wgsl" / rel)
    for path in candidates:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


SCRATCH_STATEMENT = r"""
Write FlashAttention's forward pass as a WebGPU compute shader: one workgroup per query tile
$Q_i$ ($B_r$ rows), key/value tiles $K_j, V_j$ ($B_c$ rows) streamed through workgroup memory,
and for each row a running max $m$ and sum $\ell$:

$$S_{ij} = \tau\, Q_i K_j^\top,\qquad m^{new} = \max\big(m,\ \mathrm{rowmax}(S_{ij})\big),\qquad
\tilde P_{ij} = e^{S_{ij} - m^{new}},$$

$$\alpha = e^{m - m^{new}},\qquad \ell \leftarrow \alpha\,\ell + \mathrm{rowsum}(\tilde P_{ij}),\qquad
O_i \leftarrow \mathrm{diag}(\alpha)\,O_i + \tilde P_{ij} V_j,$$

and at the end $O_i \leftarrow \mathrm{diag}(\ell)^{-1} O_i$ and $\mathrm{lse} = m + \log \ell$
(Dao et al. 2022, Algorithm 1, in FlashAttention-2's loop order; Milakov & Gimelshein 2018).

Everything one workgroup keeps in `var<workgroup>` must fit WebGPU's
`maxComputeWorkgroupStorageSize` of **16384 bytes**, counted as the spec does: each array
rounded up to 16 bytes. With $d = 64$ and the host's plan $B_r = 16$, $B_c = 8$ the eight arrays
take $4(B_r d + 2 B_c d + B_r B_c + B_r d + 3 B_r) = 12992$ bytes. To choose your own tiles, give
`BR` and `BC` defaults (`override BR: u32 = 32;`); a plan over the limit is refused before any
pipeline is built, with the bytes it needs and a plan that fits.

In this step the sizes are whole tiles (square, $N$ a multiple of $B_r$ and $B_c$), with no mask.
Fill in the TODOs: stage $K_j, V_j$, compute $S_{ij}$, update $m, \ell, \alpha$, accumulate
$O_i$, put `workgroupBarrier()` where invocations hand data to each other, and write $o$ and
lse. The page compiles your shader with `navigator.gpu` (errors are marked in the editor), runs
it on each case, and compares with the CPU mirror of the lab's shader in Python. Each check shows
max $|\Delta|$, the tolerance and the case.
"""

HARDEN_STATEMENT = r"""
The Scratch kernel is correct only for whole tiles and no masking. Harden it for every input the
host may send; the starter is the Scratch solution, with TODO H1–H5 where it breaks:

- **Ragged tiles**: the last query tile may have fewer than $B_r$ rows and the last key tile fewer than $B_c$ keys. Read nothing past the end, write nothing past the end, and give missing keys no share of the softmax.
- $N_q \ne N_k$, and **causal** masking: query $i$ sees key $j$ only if $j \le i$. Whole key tiles after the query tile can be skipped, but the loop bound must stay uniform so that the barriers inside stay in uniform control flow.
- A **mask** as packed bits (binding 4); a key-padding mask has `mask_row_stride = 0`.
- **Fully masked rows** have $\ell = 0$: return $o = 0$ and lse $= -\infty$ (the shader writes the finite sentinel `MASKED_SCORE`), never $0/0$.
- A head dim $d$ that is not a power of two, and enough rows to need many workgroups.

A masked score is the sentinel $-10^{30}$, not $-\infty$: WGSL may assume floats are finite, so
an expression that produces an infinity may give any value. The checks run each case on this
page's GPU and compare $o$ and lse with the CPU mirror; the starter already passes two of them.
"""

SCRATCH_HINTS = (
    "Stage a tile the way Q_i is loaded: `for (var e = t; e < BC * D; e += WG) { k_tile[e] = "
    "k[(b * params.n_k + k0) * D + e]; }` — every invocation takes every WG-th element.",
    "Score element e of S_ij is row r = e / BC, column c = e % BC: "
    "`dot(Q_i[r], K_j[c]) = Σ_x q_tile[r * D + x] * k_tile[c * D + x]`.",
    "Barriers: after staging K_j, V_j (others read them); after S (the row pass reads a whole "
    "row); after the row pass (O reads P~ and alpha); at the top of the loop (the next staging "
    "overwrites tiles others may still read); once after the loop (the final write reads l).",
    "Rescale before you add: `o_tile[e] = alpha_row[r] * o_tile[e] + Σ_kk s_tile[r * BC + kk] * "
    "v_tile[kk * DV + c]`. Without the max subtraction the large-scores case overflows exp.",
)

HARDEN_HINTS = (
    "Keep `rows = min(BR, n_q - q0)` and `cols = min(BC, n_k - k0)`; load 0 past the end and "
    "give scores with `r >= rows || c >= cols` the sentinel MASKED_SCORE.",
    "Set a masked probability to 0 by comparison, `select(exp(s - m_new), 0.0, s == MASKED_SCORE)`"
    ": exp(-1e30 - m) is 0 anyway unless the whole row so far is masked (m = -1e30, s - m = 0).",
    "Causal: the last key tile with any allowed key is ceil((q0 + rows) / BC); it depends only on "
    "workgroup_id and params, so every invocation runs the same number of iterations.",
    "Mask bit index: `b * params.mask_batch_stride + qi * params.mask_row_stride + kj`, word "
    "`bit / 32u`, bit `bit % 32u`.",
    "Rows with l = 0: divide by `select(l, 1.0, l == 0.0)` and write lse = MASKED_SCORE there.",
)


def build() -> Exercise:
    scratch = Step(
        id="scratch", kind="Scratch", title="A tiled attention shader, whole tiles", minutes=60,
        statement=SCRATCH_STATEMENT.strip(), language="wgsl",
        starter=wgsl_text("exercises/scratch_starter.wgsl"),
        solution=wgsl_text("exercises/scratch_solution.wgsl"),
        checks=_python_checks(SCRATCH_CASES) + tuple(_gpu_check(c) for c in SCRATCH_CASES),
        hints=SCRATCH_HINTS,
    )
    harden = Step(
        id="harden", kind="Harden", title="Ragged, causal, masked, empty rows, many workgroups",
        minutes=60, statement=HARDEN_STATEMENT.strip(), language="wgsl",
        starter=wgsl_text("exercises/harden_starter.wgsl"),
        solution=wgsl_text(mirror.FLASH_SHADER),
        checks=_python_checks(HARDEN_CASES) + tuple(_gpu_check(c) for c in HARDEN_CASES),
        hints=HARDEN_HINTS,
    )
    return Exercise(
        id="wgsl", title="WGSL tiled attention", tier="systems", minutes=120,
        summary=("Write FlashAttention's forward pass as a WebGPU compute shader sized to the "
                 "16384-byte workgroup memory, run it on this page's GPU against the CPU mirror, "
                 "then harden it: ragged tiles, Nq ≠ Nk, causal, masks, empty rows."),
        steps=(scratch, harden),
        sources=(
            "Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithm 1)",
            "Dao 2023, FlashAttention-2, arXiv:2307.08691 (one workgroup per query tile)",
            "Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
            "arXiv:1805.02867",
            "WebGPU spec, limits: maxComputeWorkgroupStorageSize (16384 bytes by default)",
        ),
        extra={"js_modules": ["js/wgsl-exercise.js"], "language": "wgsl"},
    )
