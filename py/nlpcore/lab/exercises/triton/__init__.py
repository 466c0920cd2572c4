"""Exercise ``triton``: Port the NumPy tiles to Triton.

The steps and checks are in ``exercise.py``; each step's statement is ``<step>.md`` and its
code ``<step>_starter.*`` / ``<step>_solution.*`` beside it (see ../README.md).
"""
from .exercise import build

ORDER = 3  # where the pages list this exercise

__all__ = ["build", "ORDER"]
