"""nlpcore.web.ringviz: the ring view's data is ring.forward's own trace, folded per step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nlpcore import web
from nlpcore.kernels import ring
from nlpcore.web import ringviz


@pytest.mark.parametrize("layout", ring.LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
def test_steps_follow_the_ring_and_count_what_ring_work_counts(layout, causal):
    n, p = 24, 4
    res = ringviz.trace(n, p, layout, causal)
    assert len(res["steps"]) == p
    work = np.array([[step["devices"][r]["work"] for step in res["steps"]] for r in range(p)])
    np.testing.assert_array_equal(work, ring.work(n, p, causal, layout))
    idle = np.array([[step["devices"][r]["idle"] for step in res["steps"]] for r in range(p)])
    np.testing.assert_array_equal(idle, ring.idle(work))
    for s, step in enumerate(res["steps"]):
        for d in step["devices"]:
            assert d["kv_shard"] == (d["device"] - s) % p
            assert d["kv_rows"] == res["kv_rows"][d["kv_shard"]]
            assert len(d["m"]) == len(d["l"]) == len(res["q_rows"][d["device"]])
        assert len(step["sends"]) == (p if s < p - 1 else 0)
        for e in step["sends"]:
            assert e["to"] == (e["from"] + 1) % p
            assert e["bytes"] == len(res["kv_rows"][e["kv_shard"]]) * 2 * ringviz.HEAD_DIM * ringviz.BYTES
    last = res["steps"][-1]["devices"]
    assert all(d["sent"] == (p - 1) * (n // p) * 2 * ringviz.HEAD_DIM * ringviz.BYTES for d in last)
    assert res["bytes_total"] == sum(d["sent"] for d in last)
    assert res["max_abs_err"] < 1e-5 and res["lse_finite"]
    assert res["summary"] == res["layouts"][layout]


def test_layout_summaries_show_what_striping_buys():
    res = ringviz.trace(32, 4, "contiguous", True)
    share = {name: s["idle_share"] for name, s in res["layouts"].items()}
    assert share["contiguous"] > share["striped"] > share["zigzag"] == 0.0
    assert res["layouts"]["contiguous"]["over_ideal"] > 1.5
    no_mask = ringviz.trace(32, 4, "contiguous", False)
    assert all(s["idle_share"] == 0.0 for s in no_mask["layouts"].values())


def test_through_the_one_door_as_plain_json():
    out = json.loads(web.call_json("ringviz.trace", json.dumps({"n": 16, "devices": 4, "layout": "zigzag", "causal": True})))
    assert out["params"] == {"n": 16, "devices": 4, "layout": "zigzag", "causal": True, "d": ringviz.HEAD_DIM,
                             "dtype_bytes": ringviz.BYTES}
    opts = web.call("ringviz.options")
    assert set(opts["layouts"]) == set(ring.LAYOUTS) and opts["defaults"]["n"] in opts["n"]


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=10), "n must be one of"),
    (dict(devices=5), "devices must be one of"),
    (dict(layout="spiral"), "layout must be one of"),
    (dict(n=True), "n must be one of"),
])
def test_bad_parameters_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        web.call("ringviz.trace", kwargs)
    with pytest.raises(TypeError, match="causal must be true or false"):
        ringviz.trace(causal="yes")
