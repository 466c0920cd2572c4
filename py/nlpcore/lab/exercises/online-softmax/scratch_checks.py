"""Checks of online-softmax's Scratch step: the (m, l) monoid's laws, and online_softmax streaming
over blocks and normalising with the folded state.

Two phases each: ``collect`` calls the learner's code and returns plain data; ``judge``
computes the expected values once the learner's code is gone.
"""
from __future__ import annotations

import numpy as np

from nlpcore.lab.judging import (assert_close, call_learner, plain_array, plain_tuple, rng,
                                 shapes_of)
from nlpcore.lab.model import CheckFailed
from nlpcore.kernels import online_softmax as lib


def _state(value, what):
    """Phase 1: a learner's state (m, l) as two plain arrays."""
    return plain_tuple(value, ("m", "l"), what)


def _compare_state(what, got, want, shapes):
    assert_close("m", got[0], np.asarray(want[0]), shapes=shapes, dtype="float64", context=what)
    return assert_close("l", got[1], np.asarray(want[1]), shapes=shapes, dtype="float64",
                        context=what)


def _blocks():
    r = rng(1)
    x = r.randn(4, 7) * 3.0
    x[1] = -np.inf                       # a fully masked row
    x[2, :3] = -np.inf                   # partly masked
    x[3] += 40.0                         # large values
    return x


def collect_from_block(ns):
    x = _blocks()
    return _state(call_learner(ns["from_block"], x.copy(), shapes=shapes_of(x=x),
                               context="from_block(x)"), "from_block(x)")


def judge_from_block(got):
    x = _blocks()
    _compare_state("from_block(x) with x (4, 7) incl. an all -inf row", got, lib.from_block(x),
                   shapes_of(x=x))
    return "m = row max, l = Σ exp(x - m); the all -inf row gives (-inf, 0)"


def _states():
    r = rng(2)
    xs = [r.randn(3, 5) * 4.0 + off for off in (0.0, 30.0, -30.0)]
    xs[1][0] = -np.inf                   # one row of the second block is fully masked
    return xs


def _identity_state():
    return (np.full(3, -np.inf), np.zeros(3))


def _combine(ns, a, b):
    """Phase 1: the learner's combine(a, b) on copies, as plain arrays."""
    return _state(call_learner(ns["combine"], tuple(np.array(t) for t in a),
                               tuple(np.array(t) for t in b), context="combine"), "combine")


def _lib_state(x):
    state = lib.from_block(x)
    return (np.asarray(state.m), np.asarray(state.l))


def collect_identity(ns):
    ident = _identity_state()
    out = []
    for x in _states():
        a = _lib_state(x)
        out.append((_combine(ns, ident, a), _combine(ns, a, ident)))
    return out, _combine(ns, ident, ident)


def judge_identity(collected):
    pairs, both = collected
    shapes = {"m": [3], "l": [3]}
    for x, (left, right) in zip(_states(), pairs):
        a = _lib_state(x)
        _compare_state("combine(identity, a)", left, a, shapes)
        _compare_state("combine(a, identity)", right, a, shapes)
    _compare_state("combine(identity, identity)", both, _identity_state(), shapes)
    return "(-inf, 0) is neutral on both sides, also for fully masked rows (no NaN)"


def collect_assoc(ns):
    a, b, c = [_lib_state(x) for x in _states()]
    left = _combine(ns, _combine(ns, a, b), c)
    right = _combine(ns, a, _combine(ns, b, c))
    return left, right, _combine(ns, a, b), _combine(ns, b, a)


def judge_assoc(collected):
    left, right, ab, ba = collected
    shapes = {"m": [3], "l": [3]}
    _compare_state("(a ⊕ b) ⊕ c vs a ⊕ (b ⊕ c), block maxima 30 apart", left, right, shapes)
    _compare_state("a ⊕ b vs b ⊕ a", ab, ba, shapes)
    return "associative and commutative on blocks whose maxima differ by 30"


def _pieces():
    x = np.concatenate(_states(), axis=1)           # (3, 15)
    return x, [x[:, :4], x[:, 4:11], x[:, 11:]]


def collect_pieces(ns):
    _, parts = _pieces()
    got = _state(call_learner(ns["from_block"], parts[0].copy(), context="from_block"),
                 "from_block")
    for part in parts[1:]:
        piece = _state(call_learner(ns["from_block"], part.copy(), context="from_block"),
                       "from_block")
        got = _combine(ns, got, piece)
    return got


def judge_pieces(got):
    x, _ = _pieces()
    _compare_state("from_block(x1) ⊕ from_block(x2) ⊕ from_block(x3) vs from_block(x)",
                   got, _lib_state(x), shapes_of(x=x))
    return "combining the states of the pieces gives the state of the whole"


def _softmax_cases():
    r = rng(3)
    plain = r.randn(4, 37) * 2.0
    big = r.randn(2, 20) * 5.0 + 1000.0          # exp would overflow without the max
    masked = r.randn(3, 19)
    masked[0, :10] = -np.inf                    # the first blocks of a row are masked
    masked[2] = -np.inf                         # a fully masked row gives zeros
    return [("x (4, 37), block 8 (ragged tail)", plain, 8),
            ("x (4, 37), block 1", plain, 1),
            ("x (4, 37), block 64 (one block)", plain, 64),
            ("x (2, 20) ≈ 1000 (overflow test), block 6", big, 6),
            ("x (3, 19) with masked entries and an all -inf row, block 4", masked, 4)]


def collect_online_softmax(ns):
    """Phase 1: each case's output, and the widths of the blocks online_softmax handed to the
    learner's from_block (it must fold the blocks, not reduce the whole row at once)."""
    out = []
    for label, x, block in _softmax_cases():
        widths = []
        from_block = ns["from_block"]

        def counting(blk, *args, **kwargs):
            widths.append(int(np.shape(blk)[-1]) if np.ndim(blk) else -1)
            return from_block(blk, *args, **kwargs)
        ns["from_block"] = counting
        try:
            got = call_learner(ns["online_softmax"], x.copy(), block, shapes=shapes_of(x=x),
                               context=label)
        finally:
            ns["from_block"] = from_block
        out.append((plain_array(got), list(widths)))
    label, x, block = _softmax_cases()[0]
    ns["from_block"] = _doubling(from_block)
    try:
        doubled = call_learner(ns["online_softmax"], x.copy(), block, shapes=shapes_of(x=x),
                               context=label + ", with every l from from_block doubled")
    finally:
        ns["from_block"] = from_block
    return {"cases": out, "doubled": plain_array(doubled)}


def _doubling(from_block):
    """from_block with l doubled: a softmax that folds the states it gets comes out halved; one
    that calls from_block and then normalises the row on its own does not change."""
    def doubled(blk, *args, **kwargs):
        state = from_block(blk, *args, **kwargs)
        if isinstance(state, (tuple, list)) and len(state) == 2:
            m, l = state
            pair = (m, np.asarray(l) * 2.0)
            return type(state)(*pair) if hasattr(state, "_fields") else type(state)(pair)
        return state
    return doubled


def judge_online_softmax(collected):
    worst = 0.0
    for (label, x, block), (got, widths) in zip(_softmax_cases(), collected["cases"]):
        n = x.shape[-1]
        blocks = -(-n // block)
        if len(widths) < blocks or max(widths) > block:
            raise CheckFailed(
                "%s: online_softmax must stream over the blocks -- call from_block on each "
                "block of at most block_size columns and fold the states with combine -- but it "
                "called from_block on widths %s" % (label, widths[:12] or "never"),
                expected="from_block called on %d blocks of width <= %d" % (blocks, block),
                got="%d calls, widths %s" % (len(widths), widths[:12]))
        want = lib.online_softmax(x, n)
        worst = max(worst, assert_close("softmax", got, want, shapes=shapes_of(x=x),
                                        dtype="float64", context=label))
    label, x, block = _softmax_cases()[0]
    try:
        assert_close("softmax", collected["doubled"], lib.online_softmax(x, x.shape[-1]) / 2.0,
                     shapes=shapes_of(x=x), dtype="float64")
    except CheckFailed as fail:
        raise CheckFailed("%s: with every l that from_block returns doubled, online_softmax must "
                          "come out halved -- it normalises with the (m, l) it folded -- but it "
                          "did not: %s. Use the combined state to write the probabilities, not a "
                          "second reduction of the whole row" % (label, fail.message),
                          **fail.details)
    return "5 inputs, streamed block by block, normalised by the folded state; max |Δ| = %.2g" % worst
