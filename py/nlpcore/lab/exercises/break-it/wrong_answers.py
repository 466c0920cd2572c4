"""Named wrong answers of the break-it exercise: each row changes its step's solution and names the
checks that must fail (``fails=None``: every graded check). One generic test runs them all
(tests/exercises/test_wrong_answers.py); a row's name is its test id, so adding a row renames
nothing. ``old`` must occur exactly once in the solution (a tuple: several places at once).
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

WRONG_ANSWERS = [
    Wrong('global-max-killed-by-sum', 'predict',
          '"global-max": [],',
          '"global-max": ["test_rows_sum_to_one"],',
          fails=['matrix']),
    Wrong('no-masked-first-block', 'break',
          '    x[0, :8] = -np.inf\n',
          '',
          fails=['kills-unguarded-inf']),
    Wrong('test-fails-clean-kernel', 'break',
          'def test_ragged_tail(softmax):                     # dropped-tail\n',
          'def test_ragged_tail(softmax):\n    assert softmax(np.zeros((1, 4)), block=2).sum() == 2\n',
          fails=['clean']),
    Wrong('runs-the-kill-matrix', 'predict',
          'prediction = {',
          "import importlib\n_mu = importlib.import_module('nlpcore.lab.exercises.break-it.mutants')\n_live = _mu.killers(_mu.kill_matrix(_mu.load_suite(_mu.WEAK_SUITE_SOURCE)))\nprediction = {",
          fails=None),
]
