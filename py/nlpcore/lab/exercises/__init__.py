"""The exercises, one folder each: ``nlpcore/lab/exercises/<id>/`` (see README.md here).

A folder is an exercise when it is a package whose ``__init__.py`` defines ``ORDER`` (an int:
where pages list it) and ``build() -> Exercise`` with ``Exercise.id`` equal to the folder name.
Adding an exercise is adding a folder; nothing else lists them.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from typing import List, Optional, Tuple

_FOLDER_NAME = re.compile(r"^[a-z][a-z0-9-]*$")   # an exercise id: a folder name, no dots


def _exercise_module(name: str, folder: str):
    """The imported package ``name`` when it is an exercise (defines ``build``), else None;
    TypeError when it has ``build`` but no int ``ORDER``."""
    module = importlib.import_module(name)
    if not hasattr(module, "build"):
        return None
    order = getattr(module, "ORDER", None)
    if not isinstance(order, int):
        raise TypeError("exercise folder %s must define ORDER as an int, got %r" % (folder, order))
    return module


def find(ex_id: str) -> Optional[str]:
    """The module name of the exercise folder ``ex_id``, importing that folder only (a page
    grades one exercise: importing every folder, as :func:`discover` must, cost each Python
    worker of the page the other exercises' graders); None when there is no such exercise."""
    if not isinstance(ex_id, str) or not _FOLDER_NAME.match(ex_id):
        return None
    name = __name__ + "." + ex_id
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is None:  # a module, not a folder
        return None
    return name if _exercise_module(name, ex_id) is not None else None


def discover() -> List[Tuple[str, str]]:
    """(exercise id, module name) of every exercise folder, in ``ORDER``, then by id.

    Folders are found on this package's ``__path__`` (so a test can add a folder elsewhere)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        name = __name__ + "." + info.name
        module = _exercise_module(name, info.name)
        if module is not None:
            found.append((module.ORDER, info.name, name))
    return [(ex_id, name) for _, ex_id, name in sorted(found)]


def module(ex_id: str, part: str):
    """A module of one exercise folder by name, e.g. ``module("break-it", "mutants")`` (folder
    names may hold a hyphen, which an ``import`` statement cannot spell)."""
    return importlib.import_module("%s.%s.%s" % (__name__, ex_id, part))
