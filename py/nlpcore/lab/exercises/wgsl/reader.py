"""Reading a learner's shader: overrides, consts, bindings, workgroup arrays, entry point.

A small WGSL subset, read with regular expressions after comments are blanked out (line numbers
still match the editor; :func:`blank_comments` is shared with :mod:`.guard`).
:func:`parse_shader` caches, since every check of one grading reads the same source.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Dict, FrozenSet, Optional, Tuple


_COMMENT_MARK = re.compile(r"//|/\*|\*/")


def blank_comments(source: str) -> str:
    """WGSL with its comments blanked out: every character of a ``//`` or ``/* */`` comment
    becomes a space, newlines stay, so positions, line and column numbers still match the
    source. Block comments nest in WGSL (``/* a /* b */ c */`` is one comment), and ``//``
    inside a block comment starts nothing."""
    spans, pos, depth, start = [], 0, 0, 0
    while True:
        m = _COMMENT_MARK.search(source, pos)
        if m is None:
            break
        mark, pos = m.group(), m.end()
        if depth == 0 and mark == "//":
            end = source.find("\n", pos)
            end = len(source) if end < 0 else end
            spans.append((m.start(), end))
            pos = end
        elif mark == "/*":
            if depth == 0:
                start = m.start()
            depth += 1
        elif mark == "*/" and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, pos))
    if depth:  # an unterminated block comment runs to the end
        spans.append((start, len(source)))
    parts, last = [], 0
    for a, b in spans:
        parts.append(source[last:a])
        parts.append(re.sub(r"[^\n]", " ", source[a:b]))
        last = b
    parts.append(source[last:])
    return "".join(parts)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


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
    used: FrozenSet[str]                        # identifiers in main and the functions it calls

    def uses(self, name: str) -> bool:
        """Is ``name`` referenced by the entry point ``main``, in its body or in a function it
        calls (directly or not)? That is how WebGPU decides which bindings and workgroup
        variables an entry point statically uses: a helper that touches ``k`` but is never
        called does not count. (Identifiers are matched by name, so a local that shadows a
        module-scope name counts too: an approximation.)"""
        return name in self.used


_parsed: Dict[str, ShaderInfo] = {}


def _depths(text: str) -> List[int]:
    """Brace depth at every position of ``text`` (comments already blanked): 0 at module scope."""
    out, depth = [], 0
    for ch in text:
        if ch == "}":
            depth = max(depth - 1, 0)
        out.append(depth)
        if ch == "{":
            depth += 1
    return out


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
    text = blank_comments(source)
    depth = _depths(text)
    overrides = {}
    for m in re.finditer(r"\boverride\s+(\w+)\s*(?::\s*\w+)?\s*(?:=\s*([^;]+))?;", text):
        overrides[m.group(1)] = m.group(2).strip() if m.group(2) else None
    # module-scope consts only: a `const` inside a function body is that function's own
    consts = {m.group(1): m.group(2).strip() for m in
              re.finditer(r"\bconst\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([^;]+);", text)
              if depth[m.start()] == 0}
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
    return ShaderInfo(text, overrides, consts, bindings, tuple(workgroup), size, line,
                      _statically_used(text))


_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _function_bodies(text: str) -> Dict[str, str]:
    """Module-scope ``fn name(...) ... { body }``: name -> the text from its parameters to the
    brace that closes its body (braces matched; comments are already blanked)."""
    bodies = {}
    for m in re.finditer(r"\bfn\s+(\w+)\s*\(", text):
        start = text.find("{", m.end())
        if start < 0:
            continue
        depth, end = 0, len(text)
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        bodies[m.group(1)] = text[m.end():end]
    return bodies


def _statically_used(text: str) -> FrozenSet[str]:
    """Identifiers in ``main`` and in every function reachable from it by calls; without a
    ``main``, every identifier that occurs more than once (its declaration and a use)."""
    bodies = _function_bodies(text)
    if "main" not in bodies:
        counts: Dict[str, int] = {}
        for name in _IDENTIFIER.findall(text):
            counts[name] = counts.get(name, 0) + 1
        return frozenset(n for n, c in counts.items() if c > 1)
    used, todo, seen = set(), ["main"], {"main"}
    while todo:
        names = set(_IDENTIFIER.findall(bodies[todo.pop()]))
        used |= names
        for callee in names & set(bodies):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return frozenset(used)
