"""Named wrong answers of the ring exercise: each row changes its step's solution and names the
checks that must fail (``fails=None``: every graded check). One generic test runs them all
(tests/exercises/test_wrong_answers.py); a row's name is its test id, so adding a row renames
nothing. ``old`` must occur exactly once in the solution (a tuple: several places at once).
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

# ring_forward that takes the partials out of attend's closure instead of asking for them
READ_CLOSURE = """\
    cells = [c.cell_contents for c in attend.__closure__]
    table = next(c for c in cells if isinstance(c, list) and c and isinstance(c[0], list))
    running = [None] * devices
    for r in range(devices):
        for part in table[r]:
            running[r] = part if running[r] is None else merge(running[r], part)
    return np.concatenate([x[0] for x in running]), np.concatenate([x[1] for x in running])
"""

WRONG_ANSWERS = [
    Wrong('p-sends', 'predict',
          'bytes_sent = (P - 1) * n',
          'bytes_sent = P * n',
          fails=['bytes']),
    Wrong('one-kv-shard', 'predict',
          '2 * n + 2 * n * (d + d)',
          '2 * n + n * (d + d)',
          fails=['memory']),
    Wrong('ring-turns-backwards', 'compose',
          'held = (r - step) % devices',
          'held = (r + step) % devices',
          fails=['causal', 'ring', 'schedule']),
    Wrong('shift-by-minus-inf', 'compose',
          'shift = np.where(np.isfinite(m), m, 0.0)',
          'shift = m',
          fails=['causal', 'identity']),
    Wrong('lse-without-shift', 'compose',
          'lse = np.where(l > 0, shift + np.log(safe), -np.inf)',
          'lse = np.where(l > 0, np.log(safe), -np.inf)',
          fails=['causal', 'ring', 'split']),
    Wrong('average-partials', 'compose',
          'o = (w_a[:, None] * o_a + w_b[:, None] * o_b) / safe[:, None]',
          'o = (o_a + o_b) / 2',
          fails=['causal', 'identity', 'ring', 'split']),
    Wrong('zigzag-wrong-pairing', 'balance',
          'chunks[2 * devices - 1 - r]',
          'chunks[devices + r]',
          fails=['balance', 'shards', 'work']),
    Wrong('work-ignores-causal', 'balance',
          'int((keys[None, :] <= rows[r][:, None]).sum())',
          'int(keys.size * rows[r].size)',
          fails=['balance', 'work']),
    Wrong('makespan-max-of-sums', 'balance',
          'w).max(axis=0).sum()',
          'w).sum(axis=0).max()',
          fails=['makespan']),
    Wrong('reads-attend-closure', 'compose',
          '    running = [None] * devices\n',
          READ_CLOSURE + '    running = [None] * devices\n',
          fails=['schedule', 'ring', 'causal']),
]
