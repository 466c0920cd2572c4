"""What the visualizer's ring view asks Python for (run inside Pyodide).

:func:`trace` runs ``kernels.ring.forward`` over P simulated devices with ``trace=[]`` on small
random inputs and folds its events into one entry per ring step: which K/V shard each device
holds, the score elements it computes, how long it then waits for the slowest device, its
running (m, ℓ) per query row, and the bytes on the wire. The page draws these numbers and
nothing else — it never re-runs the ring in JavaScript. Beside them it returns ``ring.work`` for
all three layouts at the same size, so the page can show idle time with and without striping.

Every function here takes and returns plain data (see ``nlpcore.web.call``).
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ..kernels import reference, ring

__all__ = ["options", "trace"]

OFFERED_N = (8, 12, 16, 24, 32, 48, 64)
OFFERED_DEVICES = (2, 3, 4, 6, 8)
HEAD_DIM = 8  # small: the page shows rows and counts, not the values of q, k, v
BYTES = 4  # float32 inputs


def options() -> Dict[str, Any]:
    """What the ring view offers, and its defaults."""
    return {"n": list(OFFERED_N), "devices": list(OFFERED_DEVICES), "layouts": list(ring.LAYOUTS),
            "d": HEAD_DIM, "dtype_bytes": BYTES,
            "defaults": {"n": 16, "devices": 4, "layout": "contiguous", "causal": True}}


def _choice(value, offered, name):
    if isinstance(value, bool) or value not in offered:
        raise ValueError("{} must be one of {}, got {!r}".format(name, list(offered), value))
    return value


def _summary(work: np.ndarray) -> Dict[str, Any]:
    """Makespan (each step as long as its busiest device), the ideal, and the idle share."""
    idle = ring.idle(work)
    makespan = int(work.max(axis=0).sum())
    ideal = float(work.sum()) / work.shape[0]
    return {"work": work.tolist(), "idle": idle.tolist(), "makespan": makespan, "ideal": ideal,
            "idle_share": float(idle.sum()) / (makespan * work.shape[0]) if makespan else 0.0,
            "over_ideal": makespan / ideal if ideal else 1.0}


def trace(n: int = 16, devices: int = 4, layout: str = "contiguous", causal: bool = True,
          seed: int = 0) -> Dict[str, Any]:
    """One ring forward pass, step by step, from ``ring.forward``'s own trace.

    Returns ``params``; ``q_rows`` and ``kv_rows`` (global rows per device); ``steps`` (per ring
    step: per device the shard held, ``work``, ``idle``, running ``m``/``l`` of its query rows
    (None where -inf), ``resident`` elements and ``sent`` bytes so far; the step's ``sends``);
    ``summary`` of this run's work; ``layouts``: the same summary for every layout (from
    ``ring.work``); ``max_abs_err`` of the ring's output against ``reference.forward``.
    """
    n = _choice(n, OFFERED_N, "n")
    devices = _choice(devices, OFFERED_DEVICES, "devices")
    layout = _choice(layout, ring.LAYOUTS, "layout")
    if not isinstance(causal, bool):
        raise TypeError("causal must be true or false, got {!r}".format(causal))
    rng = np.random.RandomState(seed)
    q, k, v = (rng.randn(n, HEAD_DIM).astype(np.float32) for _ in range(3))
    events: List[dict] = []
    o, lse = ring.forward(q, k, v, devices=devices, causal=causal, layout=layout, trace=events)
    o_ref, _ = reference.forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=causal)
    begin = events[0]
    compute = [e for e in events if e["op"] == "compute"]
    sends = [e for e in events if e["op"] == "send"]
    work = np.zeros((devices, devices), dtype=np.int64)
    for e in compute:
        work[e["device"], e["step"]] = e["work"]
    idle = ring.idle(work)
    sent = [0] * devices
    steps = []
    for s in range(devices):
        step_sends = [e for e in sends if e["step"] == s]
        for e in step_sends:
            sent[e["from"]] += e["bytes"]
        per_device = []
        for e in sorted((e for e in compute if e["step"] == s), key=lambda e: e["device"]):
            r = e["device"]
            per_device.append({
                "device": r, "kv_shard": e["kv_shard"], "kv_rows": begin["kv_rows"][e["kv_shard"]],
                "work": e["work"], "idle": int(idle[r, s]), "m": e["m"], "l": e["l"],
                "resident": e["resident"], "sent": sent[r],
            })
        steps.append({"step": s, "devices": per_device,
                      "sends": [{"from": e["from"], "to": e["to"], "kv_shard": e["kv_shard"],
                                 "bytes": e["bytes"]} for e in step_sends]})
    return {
        "params": {"n": n, "devices": devices, "layout": layout, "causal": causal, "d": HEAD_DIM,
                   "dtype_bytes": BYTES},
        "q_rows": begin["q_rows"], "kv_rows": begin["kv_rows"], "steps": steps,
        "summary": _summary(work),
        "layouts": {name: _summary(ring.work(n, devices, causal, name)) for name in ring.LAYOUTS},
        "bytes_total": int(sum(e["bytes"] for e in sends)),
        "max_abs_err": float(np.abs(o.astype(np.float64) - o_ref).max()),
        "lse_finite": bool(np.isfinite(lse).all()),
    }
