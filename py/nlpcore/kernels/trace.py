"""Tile movement between "HBM" and "SRAM", counted and (optionally) traced.

The NumPy kernels in ``flash_np`` keep their full arrays (Q, K, V, O, ...) as stand-ins for
GPU high-bandwidth memory and work on slices of them as stand-ins for tiles in on-chip SRAM.
Every copy between the two goes through a :class:`Mover`, which is the *only* place HBM
traffic is counted — so the count is exactly the algorithm's loads and stores.

Trace events (plain dicts, appended in order to the ``trace`` list a caller passes in; the
visualizer draws them and nothing else):

    {"op": "begin", "pass": "forward"|"backward", "n_q", "n_k", "d", "dv", "br", "bc",
     "t_r", "t_c", "loop_order": "kv_outer"|"q_outer", "causal": bool, "dtype_bytes"}
    {"op": "load"|"store", "tensor": "Q"|"K"|"V"|"O"|"l"|"m"|"lse"|"dO"|"dQ"|"dK"|"dV"|"D",
     "block": tile index or None (whole tensor), "rows": [start, stop], "elems": n,
     "reads": cumulative elements read, "writes": cumulative elements written}
    {"op": "tile", "i": query tile, "j": key tile, "rows": [q0, q1], "cols": [k0, k1],
     "s": scores of the tile (list of rows; None where masked) — only when the tile has at most
          TILE_SCORES_MAX entries, else absent}
    {"op": "skip", "i", "j", "rows": [q0, q1], "cols": [k0, k1], "reason": "causal"}
    {"op": "state", "i", "j", "rows": [q0, q1], "m": [...], "l": [...]}   (None where m = -inf)
    {"op": "end", "reads", "writes"}

With leading batch/head axes the counts cover every head; values (s, m, l) are those of the
first head.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from .io_model import IOCounter

TILE_SCORES_MAX = 1024  # include a tile's scores in the trace only up to 32×32 entries


def _plain(values) -> list:
    """Floats of the first head as a JSON-safe list (-inf becomes None)."""
    values = np.asarray(values)
    first = values.reshape(-1, values.shape[-1])[0]  # (rows,) of the first head
    return [None if not np.isfinite(x) else float(x) for x in first]


class Mover:
    """Counts (and traces) every tile moved between HBM arrays and SRAM working copies.

    Args:
        io: an IOCounter or None.
        trace: a list to append events to, or None.
        heads: number of (batch × head) slices each tile load covers.
        in_bytes: bytes per element of Q, K, V, O and their gradients (the input dtype).
        stat_bytes: bytes per element of the row statistics m, l, lse, D (the accumulator).
    """

    def __init__(self, io: Optional[IOCounter], trace: Optional[list], heads: int, in_bytes: int, stat_bytes: int) -> None:
        if io is not None and not isinstance(io, IOCounter):
            raise TypeError("io must be an nlpcore.kernels.io_model.IOCounter or None, got {!r}".format(io))
        if trace is not None and not isinstance(trace, list):
            raise TypeError("trace must be a list (events are appended to it) or None, got {!r}".format(trace))
        # A trace needs running totals even when the caller passed no counter.
        self.io = io if io is not None else (IOCounter() if trace is not None else None)
        self.trace = trace
        self.heads = heads
        self.in_bytes = in_bytes
        self.stat_bytes = stat_bytes

    def _event(self, op: str, tensor: str, block, rows, width: int) -> None:
        elems = self.heads * (rows[1] - rows[0]) * width
        itemsize = self.in_bytes if _is_matrix(tensor) else self.stat_bytes
        if self.io is not None:
            (self.io.load if op == "load" else self.io.store)(tensor, elems, itemsize)
        if self.trace is not None:
            self.trace.append(
                {
                    "op": op,
                    "tensor": tensor,
                    "block": block,
                    "rows": [int(rows[0]), int(rows[1])],
                    "elems": int(elems),
                    "reads": self.io.reads,
                    "writes": self.io.writes,
                }
            )

    def load(self, tensor: str, hbm: np.ndarray, rows, block=None, dtype=None) -> np.ndarray:
        """Copy rows [r0, r1) of an HBM array (..., N, width) — or of (..., N) — into SRAM."""
        tile = hbm[..., rows[0] : rows[1], :] if _is_matrix(tensor) else hbm[..., rows[0] : rows[1]]
        width = tile.shape[-1] if _is_matrix(tensor) else 1
        self._event("load", tensor, block, rows, width)
        return tile.astype(dtype if dtype is not None else hbm.dtype)

    def store(self, tensor: str, hbm: np.ndarray, rows, tile: np.ndarray, block=None) -> None:
        """Write an SRAM tile back to rows [r0, r1) of an HBM array."""
        if _is_matrix(tensor):
            hbm[..., rows[0] : rows[1], :] = tile
            width = hbm.shape[-1]
        else:
            hbm[..., rows[0] : rows[1]] = tile
            width = 1
        self._event("store", tensor, block, rows, width)

    def note(self, event: dict) -> None:
        """Append a non-IO event (tile, skip, state, begin, end) when tracing."""
        if self.trace is not None:
            self.trace.append(event)

    def state(self, i: int, j: int, rows, m: np.ndarray, l: np.ndarray) -> None:
        if self.trace is not None:
            self.trace.append({"op": "state", "i": i, "j": j, "rows": [int(rows[0]), int(rows[1])], "m": _plain(m), "l": _plain(l)})

    def tile(self, i: int, j: int, rows, cols, s: np.ndarray) -> None:
        if self.trace is None:
            return
        event = {"op": "tile", "i": i, "j": j, "rows": [int(rows[0]), int(rows[1])], "cols": [int(cols[0]), int(cols[1])]}
        if s.shape[-1] * s.shape[-2] <= TILE_SCORES_MAX:
            first = s.reshape(-1, *s.shape[-2:])[0]
            event["s"] = [[None if not np.isfinite(x) else float(x) for x in row] for row in first]
        self.trace.append(event)

    def end(self) -> None:
        if self.trace is not None:
            self.trace.append({"op": "end", "reads": self.io.reads, "writes": self.io.writes})


_VECTORS = ("l", "m", "lse", "D")


def _is_matrix(tensor: str) -> bool:
    return tensor not in _VECTORS


__all__: List[str] = ["Mover", "TILE_SCORES_MAX"]
