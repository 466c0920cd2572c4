"""Named wrong answers of the triton exercise: each row changes its step's solution and names the
checks that must fail (``fails=None``: every graded check). One generic test runs them all
(tests/exercises/test_wrong_answers.py); a row's name is its test id, so adding a row renames
nothing. ``old`` must occur exactly once in the solution (a tuple: several places at once).
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

WRONG_ANSWERS = [
    Wrong('exp-instead-of-exp2', 'port',
          'p = np.exp2(s - m_new[:, None])',
          'p = np.exp(s - m_new[:, None])',
          fails=['causal', 'ragged', 'wide']),
    Wrong('lse-natural-log', 'port',
          'lse = (m_i + np.log2(l_i)) * np.float32(LN2)',
          'lse = m_i + np.log(l_i)',
          fails=['causal', 'ragged', 'wide']),
    Wrong('full-end-past-diagonal', 'port',
          'full_end = min(m0, n_k) // BLOCK_N * BLOCK_N',
          'full_end = min(m0 + BLOCK_M, n_k) // BLOCK_N * BLOCK_N',
          fails=['causal', 'key-range']),
    Wrong('causal-not-halved', 'compose',
          '        f /= 2\n',
          '',
          fails=['flops']),
    Wrong('smem-ignores-stages', 'compose',
          'return (BLOCK_M * d + stages * 2 * BLOCK_N * d) * dtype_bytes',
          'return (BLOCK_M * d + 2 * BLOCK_N * d) * dtype_bytes',
          fails=['block-n', 'smem']),
    Wrong('unfused-memory-only', 'compose',
          't_unfused = max(work / peak_flops, unfused_bytes / hbm_bytes_per_s)',
          't_unfused = unfused_bytes / hbm_bytes_per_s',
          fails=['speedup']),
    Wrong('block-n-halved', 'compose',
          '    return best\n',
          '    return block_n // 2\n',
          fails=['block-n']),
    Wrong('calls-reference', 'port',
          '    n_q, n_k = q.shape[0], k.shape[0]\n',
          '    from nlpcore.kernels import reference\n    reference.forward(q, k, v)\n    n_q, n_k = q.shape[0], k.shape[0]\n',
          fails=['causal', 'ragged', 'wide']),
    Wrong('calls-graders-flops', 'compose',
          'def flops(',
          "import importlib\n_ex = importlib.import_module('nlpcore.lab.exercises.triton.exercise')\n\n\ndef flops(*a, **k):\n    return _ex._want_flops(*a, **k)\n\n\ndef _mine(",
          fails=['flops']),
]
