"""The exercises, one folder each: ``nlpcore/lab/exercises/<id>/`` (see README.md here).

A folder is an exercise when it is a package whose ``__init__.py`` defines ``ORDER`` (an int:
where pages list it) and ``build() -> Exercise`` with ``Exercise.id`` equal to the folder name.
Adding an exercise is adding a folder; nothing else lists them.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import List, Tuple


def discover() -> List[Tuple[str, str]]:
    """(exercise id, module name) of every exercise folder, in ``ORDER``, then by id.

    Folders are found on this package's ``__path__`` (so a test can add a folder elsewhere)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        name = __name__ + "." + info.name
        module = importlib.import_module(name)
        if not hasattr(module, "build"):
            continue
        order = getattr(module, "ORDER", None)
        if not isinstance(order, int):
            raise TypeError("exercise folder %s must define ORDER as an int, got %r"
                            % (info.name, order))
        found.append((order, info.name, name))
    return [(ex_id, name) for _, ex_id, name in sorted(found)]


def module(ex_id: str, part: str):
    """A module of one exercise folder by name, e.g. ``module("break-it", "mutants")`` (folder
    names may hold a hyphen, which an ``import`` statement cannot spell)."""
    return importlib.import_module("%s.%s.%s" % (__name__, ex_id, part))
