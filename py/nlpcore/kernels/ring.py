"""Ring attention over P simulated devices: the online-softmax monoid across machines.

Liu, Zaharia & Abbeel 2023, "Ring Attention with Blockwise Transformers for Near-Infinite
Context" (arXiv:2310.01889). When a sequence does not fit one device, cut it into P shards:
device r keeps the queries of shard r for the whole pass and starts with the keys and values
of shard r. In each of P steps every device attends its queries to the K/V shard it holds and
folds the resulting partial (o, lse) into its running merge with the monoid of ``split_k``;
after each of the first P − 1 steps it passes that K/V shard to device r + 1 (mod P) — P − 1
sends in all — so after P steps every query has met every key, and no device ever held more
than one Q shard and one or two K/V shards::

    step s, device r holds K/V shard t = (r − s) mod P
    (o_r, lse_r) ← (o_r, lse_r) ⊕ attention(Q_r, K_t, V_t)        the monoid of split_k
    send K_t, V_t to device r + 1                                  (not after the last step)

A real ring overlaps each send with the step's compute, which hides the send only when a
block of c tokens computes at least as long as it takes to send (c ≥ F/B: Liu et al., Sec. 3;
:func:`nlpcore.hardware.ring_min_block`; their Table 2 calls this the minimal block and asks for
a sequence of 6c per device). This simulator runs the steps one after
another and counts, it does not time.

The order in which device r meets the shards (r, r−1, r−2, ...) differs from device to
device; associativity and commutativity of ⊕ are what make every order give the same answer.

Backward passes the gradients along the ring with the keys: the K/V shard travels with its dK/dV
accumulators, each device adds its queries' contribution (``flash_np.backward`` on the block,
with the *global* o and lse, which is exact block by block), and one last pass brings every
dK/dV home. dQ stays on its device.

Causal load balance (Brandon et al. 2023, "Striped Attention: Faster Ring Attention for Causal
Transformers", arXiv:2311.09431). Under ``causal`` (query i sees key j iff j <= i) the layout
decides who works:

- ``"contiguous"``: device r holds rows cuts(N, P)[r]. Device 0's queries come first, so it has
  one useful block and idles for the other P − 1 steps while device P − 1 works every step.
- ``"striped"``: device r holds rows r, r + P, r + 2P, ... Every (Q shard, K/V shard) pair is
  then about half masked, so all devices do nearly the same work at every step.
- ``"zigzag"``: the sequence is cut into 2P chunks and device r holds chunks r and 2P − 1 − r (an
  early and a late one); the totals per device are exactly equal when 2P divides N.

:func:`work` counts the score elements each device computes at each step (a block whose every
pair is causally masked is skipped), the quantity those layouts balance; :func:`idle` turns it
into waiting time when each step lasts as long as its slowest device.

Shapes, masks, empty rows (o = 0, lse = -inf, zero gradients) and errors follow ``flash_np``.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from . import flash_np
from ._checks import attention_inputs, check_backward_inputs, positive_int, unbroadcast
from .split_k import Partial, absorb, cuts, finish, start

LAYOUTS = ("contiguous", "striped", "zigzag")


def _check_layout(layout) -> str:
    if layout not in LAYOUTS:
        raise ValueError("layout must be one of {}, got {!r}".format(LAYOUTS, layout))
    return layout


def _check_devices(devices, n_q: int, n_k: int) -> int:
    devices = positive_int(devices, "devices")
    if devices > min(n_q, n_k):
        raise ValueError(
            "devices must be at most min(Nq, Nk) = {} so that every device holds at least one query "
            "and one key (Nq = {}, Nk = {}), got {}".format(min(n_q, n_k), n_q, n_k, devices)
        )
    return devices


def shards(n: int, devices: int, layout: str) -> List[np.ndarray]:
    """The global row indices device r holds, for r = 0..devices-1, each sorted ascending."""
    _check_layout(layout)
    if layout == "contiguous":
        return [np.arange(a, b) for a, b in cuts(n, devices)]
    if layout == "striped":
        return [np.arange(r, n, devices) for r in range(devices)]
    chunks = cuts(n, 2 * devices)  # zigzag: chunk r (early) and chunk 2P-1-r (late)
    return [
        np.concatenate([np.arange(*chunks[r]), np.arange(*chunks[2 * devices - 1 - r])])
        for r in range(devices)
    ]


def _pairs(q_rows: np.ndarray, k_rows: np.ndarray, causal: bool) -> int:
    """Score elements a device computes for these query and key rows (pairs j <= i if causal)."""
    if not causal:
        return int(q_rows.size * k_rows.size)
    return int(np.searchsorted(k_rows, q_rows, side="right").sum())  # keys <= each query


def work(n: int, devices: int, causal: bool, layout: str) -> np.ndarray:
    """Score elements each device computes at each ring step, for self-attention over n rows.

    Returns an int64 array (devices, steps), steps = devices: entry [r, s] counts the pairs
    (query of device r, key of the shard it holds at step s) that are computed — all of them
    without ``causal``, the pairs with key <= query with it (fully masked blocks are skipped).
    """
    n = positive_int(n, "n")
    devices = _check_devices(devices, n, n)
    rows = shards(n, devices, layout)
    out = np.zeros((devices, devices), dtype=np.int64)
    for r in range(devices):
        for s in range(devices):
            out[r, s] = _pairs(rows[r], rows[(r - s) % devices], bool(causal))
    return out


def idle(work_per_step) -> np.ndarray:
    """Waiting time (devices, steps) in score elements when every step ends with its slowest device.

    A synchronous ring cannot pass K/V on before every device has finished the step, so device r
    idles for max_r' work[r', s] − work[r, s] (equal cost per score element assumed).
    """
    w = np.asarray(work_per_step)
    if w.ndim != 2:
        raise ValueError("work_per_step must have shape (devices, steps), got {}".format(w.shape))
    return w.max(axis=0, keepdims=True) - w


def _allowed(x, q_rows: np.ndarray, k_rows: np.ndarray) -> Optional[np.ndarray]:
    """Which of a device's queries may attend the held keys: (..., |q_rows|, |k_rows|) or None."""
    allowed = None
    if x.allowed is not None:
        allowed = x.allowed[..., q_rows[:, None], k_rows[None, :]]  # gather the user's mask
    if x.causal:
        tri = k_rows[None, :] <= q_rows[:, None]  # (|q_rows|, |k_rows|) from global indices
        allowed = tri if allowed is None else (allowed & tri)
    return allowed


def _first_head(values) -> list:
    """Row values of the first (batch, head) slice as a JSON-safe list (-inf becomes None)."""
    values = np.asarray(values)
    first = values.reshape(-1, values.shape[-1])[0]
    return [float(v) if np.isfinite(v) else None for v in first]


def _setup(q, k, v, devices, causal, mask, scale, layout, trace, pass_name):
    """Validated inputs widened to the accumulation dtype, the shards, and a trace 'begin' event."""
    x = attention_inputs(q, k, v, causal=causal, mask=mask, scale=scale)
    _check_layout(layout)
    n_q, n_k = x.q.shape[-2], x.k.shape[-2]
    devices = _check_devices(devices, n_q, n_k)
    if trace is not None and not isinstance(trace, list):
        raise TypeError("trace must be a list (events are appended to it) or None, got {!r}".format(trace))
    in_bytes = np.dtype(np.result_type(x.q.dtype, x.k.dtype, x.v.dtype)).itemsize
    # Blocks are computed from inputs widened once (exactly) to the accumulation dtype, and the
    # partials are merged there, as a GPU keeps them in float32.
    x = x._replace(q=x.q.astype(x.acc), k=x.k.astype(x.acc), v=x.v.astype(x.acc))
    q_rows, kv_rows = shards(n_q, devices, layout), shards(n_k, devices, layout)
    if trace is not None:
        trace.append({
            "op": "begin", "pass": pass_name, "devices": devices, "layout": layout,
            "causal": bool(causal), "n_q": n_q, "n_k": n_k, "d": x.q.shape[-1], "dv": x.v.shape[-1],
            "heads": int(np.prod(x.batch, dtype=np.int64)), "dtype_bytes": in_bytes,
            "acc_bytes": x.acc.itemsize,
            "q_rows": [r.tolist() for r in q_rows], "kv_rows": [r.tolist() for r in kv_rows],
        })
    return x, devices, in_bytes, q_rows, kv_rows


def _take(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.take(a, rows, axis=-2)  # (..., |rows|, last)


def forward(
    q,
    k,
    v,
    *,
    devices: int,
    causal: bool = False,
    scale=None,
    layout: str = "contiguous",
    mask=None,
    block_q: Optional[int] = None,
    block_k: Optional[int] = None,
    trace: Optional[list] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Exact attention computed by ``devices`` simulated devices passing K/V around a ring.

    Args:
        q: (..., Nq, d) queries. k: (..., Nk, d) keys. v: (..., Nk, dv) values.
            Leading (batch, head) axes broadcast. Queries and keys are both sharded by ``layout``.
        devices: P, 1 <= P <= min(Nq, Nk).
        causal: query i may attend key j only when j <= i (global, top-left aligned indices).
        scale: score scale, default 1/sqrt(d).
        layout: "contiguous", "striped" or "zigzag" (see the module docstring).
        mask: optional boolean, broadcastable to (..., Nq, Nk); True = may attend.
        block_q, block_k: tile sizes of the ``flash_np`` call each device makes per step.
        trace: a list that receives plain events: "begin" (sizes, the rows each device holds),
            per step and device "compute" (held shard, work, running m and l of the first head,
            None where -inf, and ``resident``: the elements the device holds during the step —
            its Q shard, running output and (m, l), the K/V shard it computes on and the one
            arriving for the next step), per step and device "send" (shard, bytes), and "end".

    Returns:
        o: (..., Nq, dv), q's dtype; 0 for rows with no allowed key.
        lse: (..., Nq), accumulation dtype (float32 for 16-bit inputs); -inf for such rows.
    """
    x, p, in_bytes, q_rows, kv_rows = _setup(q, k, v, devices, causal, mask, scale, layout, trace, "forward")
    n_q, d = x.q.shape[-2:]
    dv = x.v.shape[-1]
    heads = int(np.prod(x.batch, dtype=np.int64))
    # What each device keeps for the whole pass: its Q shard and its running merge.
    q_local = [_take(x.q, rows) for rows in q_rows]  # (..., |Q_r|, d)
    runs = [start(x.batch + (rows.size, dv), x.acc) for rows in q_rows]
    # What travels: (owner shard t, K_t (..., |K_t|, d), V_t (..., |K_t|, dv)), held by device r.
    held = [(t, _take(x.k, kv_rows[t]), _take(x.v, kv_rows[t])) for t in range(p)]
    for step in range(p):
        for r in range(p):
            t, k_t, v_t = held[r]
            count = _pairs(q_rows[r], kv_rows[t], x.causal)
            if count:
                o_p, lse_p = flash_np.forward(
                    q_local[r], k_t, v_t, mask=_allowed(x, q_rows[r], kv_rows[t]), scale=x.scale,
                    block_q=block_q, block_k=block_k,
                )  # o_p (..., |Q_r|, dv), lse_p (..., |Q_r|)
                runs[r] = absorb(runs[r], Partial(o_p, lse_p))
            if trace is not None:
                arriving = held[(r - 1) % p] if step < p - 1 else None  # the shard in flight to r
                resident = (q_local[r].size + runs[r].acc_o.size + runs[r].state.m.size + runs[r].state.l.size
                            + k_t.size + v_t.size + (arriving[1].size + arriving[2].size if arriving else 0))
                trace.append({
                    "op": "compute", "step": step, "device": r, "kv_shard": t, "work": count,
                    "resident": int(resident),
                    "m": _first_head(runs[r].state.m), "l": _first_head(runs[r].state.l),
                })
        if step < p - 1:  # after the last step nobody needs another shard
            _send(held, trace, step, kv_rows, {"K": heads * d * in_bytes, "V": heads * dv * in_bytes})
            held = [held[(r - 1) % p] for r in range(p)]
    o = np.zeros(x.batch + (n_q, dv), dtype=x.acc)  # (..., Nq, dv)
    lse = np.full(x.batch + (n_q,), -np.inf, dtype=x.acc)  # (..., Nq)
    for rows, run in zip(q_rows, runs):
        merged = finish(run)
        o[..., rows, :] = merged.o
        lse[..., rows] = merged.lse
    if trace is not None:
        trace.append({"op": "end"})
    return o.astype(np.asarray(q).dtype), lse


def _send(held, trace, step, kv_rows, sizes) -> None:
    """Record every device passing what it holds to device r + 1 (the caller rotates ``held``).

    ``sizes`` maps each tensor that travels ("K", "V", "dK", "dV") to its bytes per row (all
    heads, so width × element size × heads).
    """
    if trace is None:
        return
    p = len(held)
    for r in range(p):
        t = held[r][0]
        trace.append({
            "op": "send", "step": step, "from": r, "to": (r + 1) % p, "kv_shard": t,
            "tensors": list(sizes), "bytes": int(kv_rows[t].size * sum(sizes.values())),
        })


def backward(
    q,
    k,
    v,
    o,
    lse,
    do,
    *,
    devices: int,
    causal: bool = False,
    scale=None,
    layout: str = "contiguous",
    mask=None,
    block_q: Optional[int] = None,
    block_k: Optional[int] = None,
    trace: Optional[list] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ring attention; dK and dV travel around the ring with their K/V shard.

    Device r keeps Q_r, O_r, lse_r, dO_r and accumulates dQ_r. At step s it holds
    (K_t, V_t, dK_t, dV_t), t = (r − s) mod P, adds ``flash_np.backward`` of its block (with the
    global O and lse, so P_ij = exp(S_ij − lse_i) is exact), and passes all four on. A final
    pass after step P − 1 carries dK_t, dV_t back to device t.

    Args:
        q, k, v, devices, causal, scale, layout, mask, block_q, block_k: as in :func:`forward`.
        o: (..., Nq, dv) and lse: (..., Nq), from :func:`forward`.
        do: (..., Nq, dv), gradient of the loss with respect to o.
        trace: a list receiving "begin", per step and device "compute" (held shard, work) and
            "send" (what travels, bytes) events, and "end".

    Returns:
        dq (..., Nq, d), dk (..., Nk, d), dv (..., Nk, dv) in the shapes and dtypes of q, k, v.
        Rows with no allowed key contribute zero gradient.
    """
    x, p, in_bytes, q_rows, kv_rows = _setup(q, k, v, devices, causal, mask, scale, layout, trace, "backward")
    o, lse, do = check_backward_inputs(x, o, lse, do)
    n_q, d = x.q.shape[-2:]
    n_k, dv = x.v.shape[-2:]
    heads = int(np.prod(x.batch, dtype=np.int64))
    local = [
        (_take(x.q, rows), _take(o.astype(x.acc), rows), np.take(lse.astype(x.acc), rows, axis=-1), _take(do.astype(x.acc), rows))
        for rows in q_rows
    ]  # per device: Q_r (..., n_r, d), O_r (..., n_r, dv), lse_r (..., n_r), dO_r (..., n_r, dv)
    dq_local = [np.zeros(x.batch + (rows.size, d), dtype=x.acc) for rows in q_rows]
    held = [
        (t, _take(x.k, kv_rows[t]), _take(x.v, kv_rows[t]),
         np.zeros(x.batch + (kv_rows[t].size, d), dtype=x.acc), np.zeros(x.batch + (kv_rows[t].size, dv), dtype=x.acc))
        for t in range(p)
    ]  # per device: (t, K_t, V_t, dK_t, dV_t)
    for step in range(p):
        for r in range(p):
            t, k_t, v_t, dk_t, dv_t = held[r]
            count = _pairs(q_rows[r], kv_rows[t], x.causal)
            if count:
                q_r, o_r, lse_r, do_r = local[r]
                dq_p, dk_p, dv_p = flash_np.backward(
                    q_r, k_t, v_t, o_r, lse_r, do_r, mask=_allowed(x, q_rows[r], kv_rows[t]),
                    scale=x.scale, block_q=block_q, block_k=block_k,
                )
                dq_local[r] += dq_p
                dk_t += dk_p
                dv_t += dv_p
            if trace is not None:
                trace.append({"op": "compute", "step": step, "device": r, "kv_shard": t, "work": count})
        # Every step passes the shard on; the pass after the last step carries only dK, dV home.
        sizes = {"dK": heads * d * x.acc.itemsize, "dV": heads * dv * x.acc.itemsize}
        if step < p - 1:
            sizes = dict({"K": heads * d * in_bytes, "V": heads * dv * in_bytes}, **sizes)
        _send(held, trace, step, kv_rows, sizes)
        held = [held[(r - 1) % p] for r in range(p)]
    dq = np.zeros(x.batch + (n_q, d), dtype=x.acc)
    dk = np.zeros(x.batch + (n_k, d), dtype=x.acc)
    dv_out = np.zeros(x.batch + (n_k, dv), dtype=x.acc)
    for rows, g in zip(q_rows, dq_local):
        dq[..., rows, :] = g
    for r in range(p):
        t, _, _, dk_t, dv_t = held[r]
        assert t == r, "after P passes every dK/dV shard is back with its owner"
        dk[..., kv_rows[t], :] = dk_t
        dv_out[..., kv_rows[t], :] = dv_t
    if trace is not None:
        trace.append({"op": "end"})
    q, k, v = (np.asarray(a) for a in (q, k, v))
    return (
        unbroadcast(dq, q.shape).astype(q.dtype),
        unbroadcast(dk, k.shape).astype(k.dtype),
        unbroadcast(dv_out, v.shape).astype(v.dtype),
    )
