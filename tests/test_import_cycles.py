"""Imports run one way: no import cycle among the modules of py/ (nlpcore), bench/ or site/js/.

Every import counts, also one inside a function (Python) or a dynamic ``import("./x.js")`` with
a literal path (JS): a cycle that is only taken lazily is still two modules that need each other.
A package's ``__init__`` is not counted as imported by its submodules (Python runs it first, but
that is the package's own business, not an edge between two modules).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parents[1]


def _python_modules(folder: Path, package: str) -> Dict[str, Path]:
    """Dotted module name -> file, for every .py under ``folder`` (``package`` is its name, or ""
    for a folder of scripts that import each other by bare name)."""
    modules = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(([package] if package else []) + parts)] = path
    return modules


def _python_edges(modules: Dict[str, Path]) -> Dict[str, Set[str]]:
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".") if here else []
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [base + "." + alias.name for alias in node.names] + [base]
            for target in targets:
                # the most specific module named: `from a import b` is a.b when that is a module
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
                    if isinstance(node, ast.ImportFrom):
                        break
    return edges


def _js_edges(folder: Path) -> Dict[str, Set[str]]:
    pattern = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\./[\w.-]+\.js)["']""", re.M)
    edges = {}
    for path in sorted(folder.glob("*.js")):
        text = path.read_text(encoding="utf-8")
        edges[path.name] = {m.group(1)[2:] for m in pattern.finditer(text)}
    return edges


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module, or with a self-import
    (Tarjan's algorithm), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    js = _js_edges(ROOT / "site" / "js")
    assert "runtime.js" in js["lab.js"], "the JS import reader must see lab.js's imports"


def test_no_import_cycle_in_nlpcore():
    edges = _python_edges(_python_modules(ROOT / "py" / "nlpcore", "nlpcore"))
    assert "nlpcore.lab.model" in edges["nlpcore.lab.exercises.backward.exercise"]
    assert cycles(edges) == []


def test_no_import_cycle_in_bench():
    edges = _python_edges(_python_modules(ROOT / "bench", ""))
    assert "common" in edges["webgpu_attention"]
    assert cycles(edges) == []


def test_no_import_cycle_in_the_pages():
    assert cycles(_js_edges(ROOT / "site" / "js")) == []
