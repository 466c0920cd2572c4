"""Checks of ring's Predict step: bytes one device sends and its peak resident elements.

The learner's numbers are collected as plain floats; the judge runs the ring simulator
(``kernels.ring.forward``) afresh and compares. The simulator sends after every step but the
last: P − 1 sends of one K/V shard per device. The simulator is refused while the learner's
code runs (predict, don't measure).
"""
from __future__ import annotations

import numpy as np

from nlpcore.kernels import ring
from nlpcore.lab.judging import expect_number, relative_close
from nlpcore.lab.model import CheckFailed

PREDICT_N, PREDICT_D, PREDICT_P, PREDICT_BYTES = 512, 64, 4, 4
PREDICT_RTOL = 0.10
# Predict, don't measure: the simulator, the kernels it runs, and the pages that run it.
PREDICT_REFUSES = ("nlpcore.kernels.ring", "nlpcore.kernels.split_k", "nlpcore.kernels.reference",
                   "nlpcore.kernels.flash_np", "nlpcore.web.ringviz", "nlpcore.web.viz",
                   "nlpcore.web.lab")


def measured_ring() -> dict:
    """What the simulator reports for the Predict setting (run each time it is asked, so no
    cached copy can be changed between runs)."""
    x = np.zeros((PREDICT_N, PREDICT_D), dtype=np.float32)
    trace = []
    ring.forward(x, x, x, devices=PREDICT_P, trace=trace)
    sent = [0] * PREDICT_P
    sends = [0] * PREDICT_P
    for e in trace:
        if e["op"] == "send":
            sent[e["from"]] += e["bytes"]
            sends[e["from"]] += 1
    resident = [e["resident"] for e in trace if e["op"] == "compute"]
    return {"bytes_sent": max(sent), "peak_elements": max(resident), "sent": sent,
            "sends": max(sends), "one_device_elements": PREDICT_N * (4 * PREDICT_D + 2)}


def collect_prediction(ns):
    """Phase 1: the two predictions as plain floats, or the failure saying why not."""
    out = {}
    for name in ("bytes_sent", "peak_elements"):
        try:
            out[name] = expect_number(name, ns.get(name))
        except CheckFailed as fail:
            out[name] = fail
    return out


def _number(collected, name):
    if isinstance(collected[name], CheckFailed):
        raise collected[name]
    return collected[name]


def judge_recorded(collected):
    b, e = _number(collected, "bytes_sent"), _number(collected, "peak_elements")
    if b <= 0 or e <= 0:
        raise CheckFailed("predictions must be positive", expected="bytes_sent > 0 and peak_elements > 0",
                          got="%g, %g" % (b, e))
    return "recorded: bytes_sent = %.6g, peak_elements = %.6g" % (b, e)


def judge_bytes(collected):
    m = measured_ring()
    return relative_close("bytes_sent", _number(collected, "bytes_sent"), m["bytes_sent"],
                          PREDICT_RTOL, what="the simulator's %d send events (P − 1: none after "
                          "the last step) add up to" % m["sends"]) + \
        " (every device sends the same: %s)" % ", ".join(str(s) for s in m["sent"])


def judge_memory(collected):
    m = measured_ring()
    text = relative_close("peak_elements", _number(collected, "peak_elements"), m["peak_elements"],
                          PREDICT_RTOL, what="the simulator's largest resident count is")
    return text + "; one device holding Q, K, V, O and (m, l) whole would need %d" % m["one_device_elements"]
