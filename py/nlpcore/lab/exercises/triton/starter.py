"""Writes kernel_starter.py from kernel_solution.py (the learner's part left out):

    python -m nlpcore.lab.exercises.triton.starter

The starter is a file (the exercise page offers it for download), generated here so that it
cannot drift from the solution; tests/test_flash_triton.py fails when the two disagree.
"""
from __future__ import annotations

from nlpcore.lab.model import Folder, starter_from_solution

HERE = Folder(__file__)
SOLUTION, STARTER = "kernel_solution.py", "kernel_starter.py"


def generated() -> str:
    """The starter that kernel_solution.py implies."""
    return starter_from_solution(HERE.text(SOLUTION))


def main() -> None:
    (HERE.path / STARTER).write_text(generated(), encoding="utf-8")
    print("wrote", HERE.path / STARTER)


if __name__ == "__main__":
    main()
