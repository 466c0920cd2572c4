"""Which newer Python a learner's line or error needs: the page runs Python 3.8 (Pyodide 0.17).

:func:`needs` looks at the line that stops the learner's code from loading (and the error it
raised) and returns ``{"what", "version"}`` when a newer Python would have taken it, so the
grade can say "this page runs Python 3.8; match statements came in 3.10" as data
(``problem.newer``, see :func:`nlpcore.lab.session.load_learner`) instead of the page reading
it out of a message.
"""
from __future__ import annotations

import re
from typing import Dict, Optional

# (what, the Python that brought it, a pattern of the failing line or None, of the error or None)
CONSTRUCTS = (
    ("match statements", "3.10", re.compile(r"^\s*(match\s+\S.*|case\s+\S.*):\s*(#.*)?$"), None),
    ("except* (exception groups)", "3.11", re.compile(r"\bexcept\s*\*"), None),
    ("type X = ... aliases", "3.12", re.compile(r"^\s*type\s+[A-Za-z_]\w*\s*(\[.*\])?\s*="), None),
    ("generic parameter lists (def f[T])", "3.12",
     re.compile(r"^\s*(async\s+)?(def|class)\s+[A-Za-z_]\w*\s*\["), None),
    ("dict merges with |", "3.9", None, re.compile(r"unsupported operand type\(s\) for \|: 'dict' and 'dict'")),
    ("X | Y type unions at runtime", "3.10", None,
     re.compile(r"unsupported operand type\(s\) for \|: '(type|NoneType|typing\.\w+)'")),
    ("list[int] and dict[str, int] outside annotations", "3.9", None,
     re.compile(r"'type' object is not subscriptable")),
    ("str.removeprefix / str.removesuffix", "3.9", None, re.compile(r"has no attribute 'remove(prefix|suffix)'")),
    ("zip(..., strict=True)", "3.10", None, re.compile(r"zip\(\) takes no keyword arguments")),
)


def needs(line: str, error: str) -> Optional[Dict[str, str]]:
    """{"what", "version"} of the newer Python construct in ``line`` (the failing source line)
    or named by ``error`` ("TypeError: ..."), or None."""
    for what, version, source, message in CONSTRUCTS:
        if (source is not None and source.search(line or "")) or (message is not None and message.search(error or "")):
            return {"what": what, "version": version}
    return None
