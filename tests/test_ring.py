"""Ring attention over simulated devices against the naive reference; causal work balance."""

from __future__ import annotations

import numpy as np
import pytest

from nlpcore.kernels import reference, ring
from support import assert_close, low_precision_bar, max_abs_diff
from test_flash_np import SHAPES, describe, make_inputs, padding_mask

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def device_counts(n_q, n_k):
    """One device, two, an odd count that leaves ragged shards, and one row per device."""
    return sorted({p for p in (1, 2, 3, 5, min(n_q, n_k, 9)) if p <= min(n_q, n_k)})


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (False, True), (True, True)])
def test_forward_and_backward_match_reference_for_every_layout(shape, dtype, causal, masked):
    lead, n_q, n_k, d, dv, bq, bk = shape
    rng = np.random.default_rng(hash(shape) % 2**32)
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, dv, dtype)
    mask = padding_mask(rng, lead, n_k) if masked else None
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal, mask=mask)
    do = rng.standard_normal(o_ref.shape).astype(dtype)
    grads_ref = reference.backward(q, k, v, o_ref, lse_ref, do, causal=causal, mask=mask)
    for layout in ring.LAYOUTS:
        for devices in device_counts(n_q, n_k):
            info = describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, "{} P={}".format(layout, devices))
            kw = dict(devices=devices, causal=causal, mask=mask, layout=layout, block_q=bq, block_k=bk)
            o, lse = ring.forward(q, k, v, **kw)
            assert o.dtype == np.dtype(dtype) and lse.dtype == np.dtype(dtype)
            assert_close(o, o_ref, what="o", inputs=info)
            assert_close(lse, lse_ref, what="lse", inputs=info)
            grads = ring.backward(q, k, v, o, lse, do, **kw)
            for name, g, g_ref, x in zip(("dq", "dk", "dv"), grads, grads_ref, (q, k, v)):
                assert g.shape == x.shape and g.dtype == x.dtype
                assert_close(g, g_ref, what=name, inputs=info)


@pytest.mark.parametrize("layout", ring.LAYOUTS)
def test_float16_within_twice_the_naive_float16_error(layout):
    rng = np.random.default_rng(27)
    lead, n, d = (2, 2), 97, 40
    q, k, v = make_inputs(rng, lead, n, n, d, d, np.float64)
    mask = padding_mask(rng, lead, n)
    h = [t.astype(np.float16) for t in (q, k, v)]
    exact = [t.astype(np.float64) for t in h]
    o64, lse64 = reference.forward(*exact, causal=True, mask=mask)
    do = rng.standard_normal(o64.shape)
    g64 = reference.backward(*exact, o64, lse64, do, causal=True, mask=mask)
    o_naive, lse_naive = reference.forward(*h, causal=True, mask=mask)
    kw = dict(devices=4, causal=True, mask=mask, layout=layout, block_q=16, block_k=8)
    o, lse = ring.forward(*h, **kw)
    assert o.dtype == np.float16 and lse.dtype == np.float32
    err, _ = max_abs_diff(o, o64)
    err_naive, _ = max_abs_diff(o_naive, o64)
    assert low_precision_bar(err, err_naive, 1e-4), (err, err_naive)
    assert_close(lse, lse64, rtol=1e-5, what="lse float16")
    do16 = do.astype(np.float16)
    g_naive = reference.backward(*h, o_naive, lse_naive, do16, causal=True, mask=mask)
    grads = ring.backward(*h, o, lse, do16, **kw)
    for name, g, gn, gx in zip(("dq", "dk", "dv"), grads, g_naive, g64):
        assert g.dtype == np.float16
        e, _ = max_abs_diff(g, gx)
        en, _ = max_abs_diff(gn, gx)
        assert low_precision_bar(e, en, 1e-3), (name, e, en)


def test_fully_masked_rows_have_zero_output_and_gradients():
    rng = np.random.default_rng(28)
    q, k, v = make_inputs(rng, (2,), 9, 12, 4, 6, np.float32)
    mask = np.ones((2, 9, 12), dtype=bool)
    mask[0, 3] = False
    mask[1] = False
    for layout in ring.LAYOUTS:
        o, lse = ring.forward(q, k, v, devices=3, mask=mask, layout=layout)
        dq, dk, dv = ring.backward(q, k, v, o, lse, np.ones_like(o), devices=3, mask=mask, layout=layout)
        assert (o[0, 3] == 0).all() and (o[1] == 0).all()
        assert np.isneginf(lse[0, 3]) and np.isneginf(lse[1]).all() and np.isfinite(lse[0, :3]).all()
        assert (dq[0, 3] == 0).all() and (dq[1] == 0).all() and (dk[1] == 0).all() and (dv[1] == 0).all()
        assert not any(np.isnan(g).any() for g in (o, dq, dk, dv))


@pytest.mark.parametrize("layout", ring.LAYOUTS)
def test_shards_cover_every_row_once(layout):
    for n, p in ((16, 4), (17, 4), (5, 5), (23, 3)):
        rows = ring.shards(n, p, layout)
        assert sorted(np.concatenate(rows).tolist()) == list(range(n))
        assert max(r.size for r in rows) - min(r.size for r in rows) <= (2 if layout == "zigzag" else 1)
    assert [r.tolist() for r in ring.shards(8, 2, "striped")] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert [r.tolist() for r in ring.shards(8, 2, "zigzag")] == [[0, 1, 6, 7], [2, 3, 4, 5]]


@pytest.mark.parametrize("layout", ring.LAYOUTS)
def test_every_allowed_score_is_computed_exactly_once(layout):
    for n, p in ((64, 4), (50, 3), (7, 7)):
        assert ring.work(n, p, False, layout).sum() == n * n
        assert ring.work(n, p, True, layout).sum() == n * (n + 1) // 2


def makespan_over_ideal(w):
    """Time of a synchronous ring (each step lasts as long as its busiest device) over the
    time if the work were spread evenly: 1 means perfect balance."""
    return w.max(axis=0).sum() / (w.sum() / w.shape[0])


@pytest.mark.parametrize("n,p", [(256, 4), (1024, 8), (300, 3)])
def test_striped_and_zigzag_balance_causal_work_and_contiguous_does_not(n, p):
    contiguous, striped, zigzag = (ring.work(n, p, True, layout) for layout in ring.LAYOUTS)
    # Contiguous: device 0 has one useful block, device P-1 works every step.
    assert (contiguous[0, 1:] == 0).all() and (contiguous[-1] > 0).all()
    assert makespan_over_ideal(contiguous) > 1.5
    assert ring.idle(contiguous).sum() > n * n / 8
    # Striped: every block is about half masked; per step, devices differ by at most one row.
    for w in (striped, zigzag):
        assert makespan_over_ideal(w) < 1.02
    assert (striped.max(axis=0) - striped.min(axis=0) <= -(-n // p)).all()
    if n % (2 * p) == 0:  # zigzag: exactly equal work at every step
        assert (ring.idle(zigzag) == 0).all()
        assert (zigzag == zigzag[0]).all()


def test_without_causal_every_layout_is_balanced():
    for layout in ring.LAYOUTS:
        assert (ring.idle(ring.work(64, 4, False, layout)) == 0).all()


@pytest.mark.parametrize("layout", ring.LAYOUTS)
def test_trace_reports_work_bytes_and_the_ring_schedule(layout):
    rng = np.random.default_rng(29)
    n, p, d = 24, 4, 8
    q, k, v = make_inputs(rng, (2,), n, n, d, d, np.float32)  # two heads
    trace = []
    o, lse = ring.forward(q, k, v, devices=p, causal=True, layout=layout, trace=trace)
    assert trace[0]["op"] == "begin" and trace[-1]["op"] == "end"
    compute = [e for e in trace if e["op"] == "compute"]
    w = np.zeros((p, p), dtype=np.int64)
    for e in compute:
        assert e["kv_shard"] == (e["device"] - e["step"]) % p  # device r holds shard r - s
        w[e["device"], e["step"]] = e["work"]
    np.testing.assert_array_equal(w, ring.work(n, p, True, layout))
    sends = [e for e in trace if e["op"] == "send"]
    assert len(sends) == p * (p - 1)  # P - 1 passes: after the last step nothing is sent
    rows = [len(r) for r in trace[0]["kv_rows"]]
    for e in sends:
        assert e["to"] == (e["from"] + 1) % p
        assert e["bytes"] == rows[e["kv_shard"]] * 2 * (d + d) * 4  # K and V, two heads, float32
    last = [e for e in compute if e["step"] == p - 1]
    for e in last:  # the running (m, l) after the last step is the final lse = m + log l
        rows_r = trace[0]["q_rows"][e["device"]]
        np.testing.assert_allclose(np.array(e["m"]) + np.log(e["l"]), lse[0, rows_r], rtol=1e-5)
    back = []
    ring.backward(q, k, v, o, lse, np.ones_like(o), devices=p, causal=True, layout=layout, trace=back)
    sends = [e for e in back if e["op"] == "send"]
    assert len(sends) == p * p and {tuple(e["tensors"]) for e in sends if e["step"] == p - 1} == {("dK", "dV")}


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda q, k, v: ring.forward(q, k, v, devices=0), ValueError, "devices must be a positive integer"),
        (lambda q, k, v: ring.forward(q, k, v, devices=7), ValueError, r"devices must be at most min\(Nq, Nk\) = 6"),
        (lambda q, k, v: ring.forward(q, k, v, devices="2"), TypeError, "devices must be a positive integer"),
        (lambda q, k, v: ring.forward(q, k, v, devices=2, layout="spiral"), ValueError, "layout must be one of"),
        (lambda q, k, v: ring.forward(q, k, v, devices=2, trace=()), TypeError, "trace must be a list"),
        (lambda q, k, v: ring.forward(q[0], k, v, devices=2), ValueError, "q must have at least 2 dimensions"),
        (lambda q, k, v: ring.forward(q, k, v[:4], devices=2), ValueError, r"v must have shape \(\.\.\., Nk, dv\)"),
        (lambda q, k, v: ring.backward(q, k, v, np.zeros((6, 5)), np.zeros(6), np.zeros((6, 5)), devices=2), ValueError, r"o must have shape \(6, 4\)"),
        (lambda q, k, v: ring.work(0, 2, True, "striped"), ValueError, "n must be a positive integer"),
        (lambda q, k, v: ring.work(8, 9, True, "striped"), ValueError, "devices must be at most"),
        (lambda q, k, v: ring.work(8, 2, True, "diagonal"), ValueError, "layout must be one of"),
        (lambda q, k, v: ring.idle(np.zeros(3)), ValueError, r"work_per_step must have shape \(devices, steps\)"),
    ],
)
def test_bad_arguments_raise_errors_naming_them(call, error, match):
    rng = np.random.default_rng(0)
    q, k, v = make_inputs(rng, (), 6, 8, 4, 4, np.float32)
    with pytest.raises(error, match=match):
        call(q, k, v)
