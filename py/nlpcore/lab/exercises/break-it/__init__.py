"""Exercise ``break-it``: Break it: tests that kill mutants of a softmax kernel.

The steps and checks are in ``exercise.py``; each step's statement is ``<step>.md`` and its
code ``<step>_starter.*`` / ``<step>_solution.*`` beside it (see ../README.md).
"""
from .exercise import build

ORDER = 5  # where the pages list this exercise

__all__ = ["build", "ORDER"]
