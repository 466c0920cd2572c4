"""Strictly typed answers: an ``integer`` is an int or a string of digits (never a bool, never
1.9); a ``number`` is an int, a float or a numeric string (never a bool, NaN or infinity); a
``choice`` is the index of one of the choices. Each parser returns None for anything else."""
from __future__ import annotations

import math
import re
from typing import Optional

_INTEGER = re.compile(r"^[+-]?\d+$")


def integer(answer) -> Optional[int]:
    """An int, or a string of digits; None for anything else (bools, 1.9, "1.9", "2e3")."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int):
        return answer
    if isinstance(answer, str):
        text = answer.strip().replace(",", "").replace("_", "")
        return int(text) if _INTEGER.match(text) else None
    return None


def number(answer) -> Optional[float]:
    """A finite int/float or numeric string ("7.1", "7.1×", "3e-7"); None otherwise (bools too)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)):
        value = float(answer)
    elif isinstance(answer, str):
        text = answer.strip().replace(",", "").rstrip("×xX").strip()
        try:
            value = float(text)
        except ValueError:
            return None
    else:
        return None
    return value if math.isfinite(value) else None


def choice_index(answer, count: int) -> Optional[int]:
    index = integer(answer)
    return index if index is not None and 0 <= index < count else None


def parse(spec: dict, answer):
    """(value, None) for a well-typed answer to step ``spec``, else (None, the message why not)."""
    kind = spec["answer"]["kind"]
    if kind == "choice":
        count = len(spec["answer"]["choices"])
        value = choice_index(answer, count)
        return (value, None) if value is not None else (None, "Pick one of the %d answers." % count)
    if kind == "integer":
        value = integer(answer)
        return (value, None) if value is not None else (
            None, "Enter a whole number (digits only), got %r." % (answer,))
    value = number(answer)
    return (value, None) if value is not None else (None, "Enter a number, got %r." % (answer,))
