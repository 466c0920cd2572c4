"""How much memory a tiled attention kernel may hold at once, relative to its block sizes.

A tiled kernel keeps its outputs, a few numbers per query row (m, ℓ, lse, D: the paper's
Algorithm 1 keeps ℓ and m in HBM) and a few tiles: scores (Br, Bc) and the K, V, Q, O slices
of width d that go with them. Nothing else grows with Nq or Nk. The tiled checks choose
sizes where one float64 row against all keys (Nk entries) is larger than that whole budget,
so skipping the key tiling -- one query row, or one query tile, against every key -- fails,
and so does a whole copy of K or V (``x.astype(...)`` copies; ``np.asarray(x, dtype)`` does
not when the dtype already matches).
"""
from __future__ import annotations

import tracemalloc

from .judging import peak_memory
from .model import CheckFailed

# The memory case measured from outside the learner's process (CPython grades; the runner reads
# the process's peak resident memory from the kernel, which learner code cannot talk down):
# (label, Nq, Nk, d, dv, block_q, block_k). Its full float64 score matrix is 128 MiB and a naive
# kernel holds two or three of them; a tiled one holds tiles of 1 MiB. The grade fails when the
# whole learner process grew by more than 1/OUTSIDE_SHARE of one score matrix.
OUTSIDE_CASE = ("Nq=2048, Nk=8192, d=4, blocks 256×512, measured by the operating system",
                2048, 8192, 4, 4, 256, 512)
OUTSIDE_SHARE = 2
OUTSIDE_ROWS = 16           # rows of its output sent to the judge and checked there
# The backward's case: Nq a quarter of the forward's (a grade stays near a second); P, dP and dS
# whole are 32 MiB each.
OUTSIDE_BACKWARD_CASE = ("Nq=512, Nk=8192, d=4, blocks 128×512, measured by the operating "
                         "system", 512, 8192, 4, 4, 128, 512)


def first_rows(x):
    """The first OUTSIDE_ROWS rows of a collected array (anything else as it is)."""
    import numpy as np
    return x[:OUTSIDE_ROWS] if isinstance(x, np.ndarray) and x.ndim else x

TILE_BUFFERS = 12    # (Br, Bc) float64 temporaries (scores, exp, masks, dP, dS) with their
                     # (B, d) slices; the reference backward holds about 7 at once
ROW_STATS = 6        # float64 numbers per query row (m, ℓ, lse, D and a copy or two)
MIB = 1.0 / (1 << 20)


def measure(fn, *args, **kwargs):
    """(fn(*args, **kwargs), peak bytes) by :func:`nlpcore.lab.judging.peak_memory`, with a
    sentinel allocated before the call: tracemalloc stopped and started again inside the call
    forgets every earlier allocation, the sentinel's included, and that fails the check rather
    than hiding what was allocated before the restart."""
    def watched():
        sentinel = bytearray(256)          # traced from here on
        out = fn(*args, **kwargs)
        if tracemalloc.is_tracing() and tracemalloc.get_object_traceback(sentinel) is None:
            raise CheckFailed("your code restarted tracemalloc, which measures the memory it uses",
                              expected="tracemalloc left running", got="stopped and started again")
        return out
    return peak_memory(watched)


def budget(*, out_bytes: int, n_q: int, block_q: int, block_k: int, width: int) -> int:
    """Bytes a tiled kernel may allocate at peak: its outputs, ROW_STATS per query row, and
    TILE_BUFFERS tiles of Br×Bc scores with their Q/O (Br × width) and K/V (Bc × width)
    slices, all float64."""
    tile = block_q * block_k + (block_q + block_k) * width
    return out_bytes + ROW_STATS * n_q * 8 + TILE_BUFFERS * tile * 8


def assert_tiled(peak: int, *, n_q: int, n_k: int, out_bytes: int, block_q: int, block_k: int,
                 width: int, context: str, shapes: dict) -> str:
    """Fail when ``peak`` (bytes, ``framework.peak_memory``) exceeds :func:`budget`; the
    message compares it with one row against all keys."""
    limit = budget(out_bytes=out_bytes, n_q=n_q, block_q=block_q, block_k=block_k, width=width)
    row = n_k * 8
    if peak > limit:
        raise CheckFailed(
            "%s: your code allocated %.3f MiB at peak, more than a tiled kernel needs (%.3f MiB: "
            "its outputs, a few numbers per query row and %d tiles). One float64 row against all "
            "%d keys is already %.3f MiB and a %d×%d score matrix %.2f MiB: compute scores one "
            "(block_q × block_k) tile at a time, carry the row statistics (m, l) between key "
            "tiles, and slice K and V per tile instead of copying them whole"
            % (context, peak * MIB, limit * MIB, TILE_BUFFERS, n_k, row * MIB, n_q, n_k,
               n_q * n_k * 8 * MIB),
            expected="peak <= %.3f MiB (outputs + %d numbers per query row + %d tiles of "
            "%d×%d scores with their width-%d slices, float64)"
            % (limit * MIB, ROW_STATS, TILE_BUFFERS, block_q, block_k, width),
            got="%.3f MiB" % (peak * MIB), shapes=shapes)
    return ("%s: %.3f MiB at peak (budget %.3f MiB; one row against all keys would be %.3f "
            "MiB, the full score matrix %.2f MiB)" % (context, peak * MIB, limit * MIB,
                                                      row * MIB, n_q * n_k * 8 * MIB))


def assert_outside(growth: int, *, n_q: int, n_k: int, context: str) -> str:
    """Fail when the learner process's peak memory growth (bytes, measured by the operating
    system) exceeds 1/OUTSIDE_SHARE of one float64 Nq×Nk score matrix."""
    full = n_q * n_k * 8
    limit = full // OUTSIDE_SHARE
    if growth > limit:
        raise CheckFailed(
            "%s: the process that ran your code grew by %.0f MiB at its peak, as the operating "
            "system counted it: more than half of one %d×%d float64 score matrix (%.0f MiB). A "
            "tiled kernel on these inputs needs a few MiB: compute the scores one (block_q × "
            "block_k) tile at a time" % (context, growth * MIB, n_q, n_k, full * MIB),
            expected="peak growth <= %.0f MiB" % (limit * MIB), got="%.0f MiB" % (growth * MIB))
    return ("%s: the process grew by %.1f MiB at its peak (operating system's count; the full "
            "score matrix is %.0f MiB)" % (context, growth * MIB, full * MIB))
