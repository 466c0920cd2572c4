"""The import rule written in ``nlpcore/kernels/__init__.py`` holds for every kernel module.

Imports are read from the source (``ast``), not by importing, so the rule is checked on machines
without torch, triton or wgpu too. Every import counts, also one inside a function; only the
browser modules' third-party imports are told apart by where they sit (module level or not).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from nlpcore import kernels

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "py" / "nlpcore" / "kernels"
PACKAGE = "nlpcore.kernels"
NATIVE_LIBRARIES = ("torch", "triton")
LAZY_LIBRARIES = ("wgpu",)  # a browser module may import these inside a function only


def _layers() -> Dict[str, Tuple[int, bool]]:
    """module name -> (rank, native): rank orders every layer, browser layers first."""
    ranks = {}
    layers = [(layer, False) for layer in kernels.BROWSER_LAYERS] + [(layer, True) for layer in kernels.NATIVE_LAYERS]
    for rank, (layer, native) in enumerate(layers):
        for name in layer:
            assert name not in ranks, f"{name} is listed in two layers of nlpcore.kernels"
            ranks[name] = (rank, native)
    return ranks


def _imports(source: str) -> List[Tuple[str, bool]]:
    """(absolute dotted name, at module level) for every import in a kernel module's source;
    ``from . import x`` and ``from .x import y`` both name ``nlpcore.kernels.x``."""
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                anchor = PACKAGE.split(".")[: len(PACKAGE.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base == PACKAGE:  # from . import a, b: one import per module named
                found += [(base + "." + alias.name, id(node) in top) for alias in node.names]
            elif base == "nlpcore":  # from nlpcore import tolerances, or from .. import hardware
                found += [("nlpcore." + alias.name, id(node) in top) for alias in node.names]
            else:
                found.append((base, id(node) in top))
    return found


def violations(module: str, source: str, ranks: Dict[str, Tuple[int, bool]]) -> List[str]:
    """What in ``source`` (the kernel module ``module``) breaks the import rule."""
    rank, native = ranks[module]
    problems = []
    for name, at_top in _imports(source):
        root = name.split(".")[0]
        if name.startswith(PACKAGE + "."):
            target = name[len(PACKAGE) + 1:].split(".")[0]
            if target not in ranks:
                problems.append(f"{module} imports {target}, which no layer lists")
            elif ranks[target][0] >= rank:
                kind = "a native module" if ranks[target][1] and not native else "a module of its own layer or above"
                problems.append(f"{module} imports {target}, {kind}")
        elif name == PACKAGE:
            problems.append(f"{module} imports the package nlpcore.kernels itself")
        elif root == "nlpcore":
            if name not in kernels.OUTSIDE:
                problems.append(f"{module} imports {name}; outside nlpcore.kernels only {kernels.OUTSIDE} may be")
        elif not native:
            if root in NATIVE_LIBRARIES:
                problems.append(f"{module} runs in the browser but imports {name}")
            elif root in LAZY_LIBRARIES and at_top:
                problems.append(f"{module} imports {name} at module level (only inside a function)")
            elif at_top and root != "numpy" and root not in _standard_library():
                problems.append(f"{module} runs in the browser but imports {name} "
                                "(only the standard library and NumPy)")
    return problems


def _standard_library():
    return getattr(sys, "stdlib_module_names", frozenset()) | {"__future__"}


def test_every_kernel_module_sits_in_exactly_one_layer():
    ranks = _layers()
    files = {path.stem for path in KERNELS.glob("*.py") if path.stem != "__init__"}
    unlisted = sorted(files - set(ranks))
    stale = sorted(set(ranks) - files)
    assert not unlisted, (f"kernels/{unlisted[0]}.py is in no layer of nlpcore.kernels: add it to "
                          "BROWSER_LAYERS or NATIVE_LAYERS in kernels/__init__.py, in the lowest layer "
                          f"above everything it imports (unlisted: {unlisted})")
    assert not stale, f"nlpcore.kernels lists modules that do not exist: {stale}"


@pytest.mark.skipif(not hasattr(sys, "stdlib_module_names"),
                    reason="needs Python 3.10+ to tell the standard library apart")
def test_every_kernel_module_keeps_the_import_rule():
    ranks = _layers()
    problems = []
    for path in sorted(KERNELS.glob("*.py")):
        if path.stem != "__init__" and path.stem in ranks:
            problems += violations(path.stem, path.read_text(encoding="utf-8"), ranks)
    assert not problems, "the import rule of nlpcore/kernels/__init__.py is broken:\n" + "\n".join(problems)


def test_every_outside_module_the_rule_allows_is_used():
    """OUTSIDE lists what kernels import from nlpcore, no more: an entry nothing uses is stale."""
    used = {name for path in KERNELS.glob("*.py") for name, _ in _imports(path.read_text(encoding="utf-8"))}
    stale = [name for name in kernels.OUTSIDE if name not in used]
    assert not stale, f"nlpcore.kernels.OUTSIDE lists modules no kernel imports: {stale}"


def test_the_package_init_imports_nothing():
    tree = ast.parse((KERNELS / "__init__.py").read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("module,source,words", [
    ("reference", "from .flash_np import forward\n", "flash_np, a module of its own layer or above"),
    ("flash_np", "from . import flash_triton\n", "flash_triton, a native module"),
    ("flash_np", "from .nowhere import x\n", "nowhere, which no layer lists"),
    ("split_k", "def f():\n    import torch\n", "runs in the browser but imports torch"),
    ("flash_wgpu", "import wgpu\n", "imports wgpu at module level"),
    ("trace", "import scipy.special\n", "imports scipy.special (only the standard library and NumPy)"),
    ("io_model", "from ..lab import framework\n", "imports nlpcore.lab"),
    ("ring", "from .. import web\n", "imports nlpcore.web"),
    ("flash_triton_bwd", "from .flash_triton import LN2\n", "flash_triton, a module of its own layer or above"),
])
def test_the_checker_finds_each_kind_of_violation(module, source, words):
    if "scipy" in source and not hasattr(sys, "stdlib_module_names"):
        pytest.skip("needs Python 3.10+ to tell the standard library apart")
    found = violations(module, source, _layers())
    assert any(words in problem for problem in found), found


def test_the_checker_accepts_what_the_rule_allows():
    ranks = _layers()
    allowed = ("from . import flash_np\nfrom ._checks import positive_int\nimport numpy as np\n"
               "from typing import List\nfrom .. import hardware\n")
    assert violations("ring", allowed, ranks) == []
    assert violations("flash_wgpu", "def f():\n    import wgpu\n", ranks) == []
    assert violations("flash_triton", "import torch\nfrom . import flash_np, triton_tuning\n", ranks) == []


@pytest.mark.skipif(not hasattr(sys, "stdlib_module_names"),
                    reason="needs Python 3.10+ to tell the standard library apart")
def test_what_kernels_may_import_from_outside_imports_only_the_standard_library():
    """nlpcore.hardware and nlpcore.shaders are the kernels' only imports from the rest of
    nlpcore (OUTSIDE), so they must not pull anything else in, in the browser or on CPython."""
    import ast
    from nlpcore import kernels
    for name in kernels.OUTSIDE:
        path = KERNELS.parent / (name.split(".", 1)[1] + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = ["nlpcore"] if node.level else [(node.module or "").split(".")[0]]
            else:
                continue
            assert all(r in sys.stdlib_module_names or r == "__future__" for r in roots), (name, ast.dump(node))
