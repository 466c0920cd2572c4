"""Named wrong answers of the online-softmax exercise: each row changes its step's solution and names the
checks that must fail (``fails=None``: every graded check). One generic test runs them all
(tests/exercises/test_wrong_answers.py); a row's name is its test id, so adding a row renames
nothing. ``old`` must occur exactly once in the solution (a tuple: several places at once).
"""
from __future__ import annotations

from collections import namedtuple

Wrong = namedtuple("Wrong", "name step old new fails")

# the whole (Nq, Nk) score matrix at once, returned before the tiled body
FULL_SCORES = """\
    s = q @ k.T / np.sqrt(q.shape[1])                       # (Nq, Nk): untiled
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True)
    return p @ v / l, (m + np.log(l))[:, 0]
"""

# query tiles, each against all Nk keys
QUERY_CHUNKED = """\
    o, lse = np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0])
    for q0 in range(0, q.shape[0], block_q):                # one query tile against ALL keys
        s = q[q0:q0 + block_q] @ k.T / np.sqrt(q.shape[1])
        if causal:
            rows = np.arange(q0, min(q0 + block_q, q.shape[0]))[:, None]
            s = np.where(np.arange(k.shape[0])[None, :] <= rows, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=1, keepdims=True)
        o[q0:q0 + block_q] = p @ v / l
        lse[q0:q0 + block_q] = (m + np.log(l))[:, 0]
    return o, lse
"""

# reads the grader's expected values off its frames
FRAME_WALK = """\
    import sys
    frame = sys._getframe(1)
    while frame is not None:                                # read the grader's expected values
        found = frame.f_locals
        if "want_o" in found and "want_lse" in found:
            return found["want_o"], found["want_lse"]
        frame = frame.f_back
    return np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0])
"""

# patches the library's oracle
PATCH_REFERENCE = """\
import nlpcore.kernels.reference as _ref
_ref.forward = lambda q, k, v, causal=False, mask=None, scale=None: (
    np.zeros((q.shape[0], v.shape[1])), np.zeros(q.shape[0]))   # the oracle now agrees with zeros
"""

# patches the grader's comparisons
PATCH_GRADER = """\
import importlib
from nlpcore.lab import judging as _fw
_ex = importlib.import_module("nlpcore.lab.exercises.online-softmax.exercise")
_fw.assert_close = _ex.assert_close = lambda *a, **k: 0.0      # every comparison passes
_fw.assert_tiled = _ex.assert_tiled = lambda *a, **k: "fine"
np.allclose = lambda *a, **k: True
"""

# one query row at a time against all Nk keys: exact, but no key tiling at all
ONE_ROW = """\
    o, lse = np.zeros((q.shape[0], v.shape[1])), np.full(q.shape[0], -np.inf)
    for i in range(q.shape[0]):                             # one query row against ALL keys
        s = k @ q[i] / np.sqrt(q.shape[1])                  # (Nk,)
        if causal:
            s = np.where(np.arange(k.shape[0]) <= i, s, -np.inf)
        m = s.max()
        p = np.exp(s - m)
        o[i] = p @ v / p.sum()
        lse[i] = m + np.log(p.sum())
    return o, lse
"""

WRONG_ANSWERS = [
    Wrong('flash-as-theta-bound', 'predict',
          'flash = 2 * N * d + Tc * 3 * N * d',
          'flash = N * N * d * d / M',
          fails=['flash']),
    Wrong('standard-n-squared-only', 'predict',
          'standard = 4 * N * N + 4 * N * d',
          'standard = N * N',
          fails=['standard']),
    Wrong('combine-without-rescale', 'scratch',
          'return m, l_a * np.exp(m_a - s) + l_b * np.exp(m_b - s)',
          'return m, l_a + l_b',
          fails=['pieces', 'softmax']),
    Wrong('shift-by-minus-inf', 'scratch',
          '    return np.where(np.isfinite(m), m, 0.0)',
          '    return m',
          fails=['identity', 'softmax']),
    Wrong('acc-not-rescaled', 'compose',
          'acc = alpha[:, None] * acc + p @ v[k0:k1]',
          'acc = acc + p @ v[k0:k1]',
          fails=['causal', 'ragged']),
    Wrong('strict-causal-mask', 'compose',
          's = np.where(cols <= rows, s, -np.inf)',
          's = np.where(cols < rows, s, -np.inf)',
          fails=['causal']),
    Wrong('fixed-theory-numbers', 'probe',
          '    fig = io_model.figure2()\n    return {',
          "    return {'slope_n': 2.0, 'slope_m': -1.0, 'slope_d': 2.0, 'figure2_ratio': 40.3 / 4.4}\n    return {",
          fails=['figure2', 'measures', 'slopes']),
    Wrong('measured-ratio-typed', 'probe',
          '"measured_ratio": h200["baseline"]["hbm_gb"] / h200["triton"]["hbm_gb"],',
          '"measured_ratio": 40.3 / 4.4,',
          fails=['h200', 'measures']),
    Wrong('baseline-is-attention-alone', 'probe',
          '"baseline_ratio": fig["baseline_standard_gb"] / fig["baseline_flash_gb"],',
          '"baseline_ratio": fig["standard_gb"] / fig["flash_gb"],',
          fails=['figure2', 'measures']),
    Wrong('calls-reference', 'compose',
          '    n_q, d = q.shape\n',
          '    from nlpcore.kernels import reference\n    return reference.forward(q, k, v, causal=causal)\n    n_q, d = q.shape\n',
          fails=None),
    Wrong('calls-flash-np', 'compose',
          '    n_q, d = q.shape\n',
          '    from nlpcore.kernels import flash_np\n    return flash_np.forward(q, k, v, causal=causal)\n    n_q, d = q.shape\n',
          fails=None),
    Wrong('imports-library-from-block', 'scratch',
          'def from_block(x):',
          'from nlpcore.kernels.online_softmax import from_block\n\n\ndef _unused(x):',
          fails=['from-block', 'pieces', 'softmax']),
    Wrong('measures-with-io-model', 'predict',
          'standard = 4 * N * N + 4 * N * d',
          'from nlpcore.kernels import io_model\nstandard = io_model.standard_accesses(N, N, d)',
          fails=None),
    Wrong('full-score-matrix', 'compose',
          '    n_q, d = q.shape\n',
          FULL_SCORES + '    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('query-tile-against-all-keys', 'compose',
          '    n_q, d = q.shape\n',
          QUERY_CHUNKED + '    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('one-shot-softmax', 'scratch',
          '    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))\n',
          '    m = x.max(axis=-1, keepdims=True)                       # the whole row at once\n    e = np.exp(x - np.where(np.isfinite(m), m, 0))\n    s = e.sum(axis=-1, keepdims=True)\n    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)\n    state = (np.full(x.shape[:-1], -np.inf), np.zeros(x.shape[:-1]))\n',
          fails=['softmax']),
    Wrong('bottom-right-causal', 'compose',
          's = np.where(cols <= rows, s, -np.inf)',
          's = np.where(cols <= rows + (n_k - n_q), s, -np.inf)',
          fails=['causal']),
    Wrong('no-max-shift', 'compose',
          ('            shift = np.where(np.isfinite(m_new), m_new, 0.0)\n', '            p = np.exp(s - shift[:, None])', '            alpha = np.exp(m - shift) '),
          ('', '            p = np.exp(s)', '            alpha = np.ones_like(m)  # '),
          fails=['large']),
    Wrong('frame-walk', 'compose',
          '    n_q, d = q.shape\n',
          FRAME_WALK + '    n_q, d = q.shape\n',
          fails=['causal', 'large', 'lse', 'ragged']),
    Wrong('patch-reference', 'compose',
          ('def attention(', '    n_q, d = q.shape\n'),
          (PATCH_REFERENCE + '\n\ndef attention(', '    n_q, d = q.shape\n    return np.zeros((n_q, v.shape[1])), np.zeros(n_q)\n'),
          fails=None),
    Wrong('patch-grader', 'compose',
          ('def attention(', '    n_q, d = q.shape\n'),
          (PATCH_GRADER + '\n\ndef attention(', '    n_q, d = q.shape\n    return np.zeros((n_q, v.shape[1])), np.zeros(n_q)\n'),
          fails=None),
    Wrong('one-row-against-all-keys', 'compose',
          '    n_q, d = q.shape\n',
          ONE_ROW + '    n_q, d = q.shape\n',
          fails=['tiled']),
    Wrong('from-block-ignored', 'scratch',
          '    m, l = state\n    p = np.exp(x - _shift(m)[..., None])\n    l = l[..., None]\n',
          '    m = x.max(axis=-1)                                  # the folded state is ignored\n'
          '    p = np.exp(x - _shift(m)[..., None])\n    l = p.sum(axis=-1, keepdims=True)\n',
          fails=['softmax']),
    Wrong('scale-one-over-d', 'compose',
          'scale = 1.0 / np.sqrt(d)',
          'scale = 1.0 / d',
          fails=['ragged', 'causal', 'large', 'lse']),
]
