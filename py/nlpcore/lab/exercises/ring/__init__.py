"""Exercise ``ring``: the monoid across devices — split-K decoding and ring attention.

The steps and checks are in ``exercise.py``; each step's statement is ``<step>.md`` and its
code ``<step>_solution.py`` beside it, the starter marked in (see ../README.md).
"""
from .exercise import build

ORDER = 6  # where the pages list this exercise

__all__ = ["build", "ORDER"]
