"""flash_np forward and backward against the naive reference (the oracle)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from nlpcore.kernels import flash_np, reference
from support import assert_close, low_precision_bar, max_abs_diff

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # any RuntimeWarning (e.g. 0/0, log 0) fails

# (leading axes, Nq, Nk, d, dv, block_q, block_k): ragged tiles, odd head dims, Nq != Nk, dv != d,
# one-element cases, and tiles larger than the whole sequence.
SHAPES = [
    ((), 1, 1, 1, 1, 1, 1),
    ((), 1, 7, 3, 5, 4, 2),
    ((), 33, 33, 16, 16, 8, 8),
    ((), 37, 29, 19, 11, 8, 5),
    ((2,), 64, 100, 32, 32, 16, 32),
    ((2, 3), 17, 45, 59, 24, 7, 13),
    ((1, 2), 113, 203, 64, 64, 32, 64),
    ((), 50, 20, 8, 8, 128, 256),
]
LOOP_ORDERS = ("kv_outer", "q_outer")


def make_inputs(rng, lead, n_q, n_k, d, dv, dtype):
    q = rng.standard_normal(lead + (n_q, d)).astype(dtype)
    k = rng.standard_normal(lead + (n_k, d)).astype(dtype)
    v = rng.standard_normal(lead + (n_k, dv)).astype(dtype)
    return q, k, v


def padding_mask(rng, lead, n_k, empty_rows=True):
    """Key padding (..., 1, Nk); with empty_rows the first head masks every key."""
    keep = rng.random(lead + (1, n_k)) > 0.3
    keep[..., 0] = True
    if empty_rows:
        keep.reshape(-1, n_k)[0] = False
    return keep


def describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, order):
    return "q {} k/v {} d={} dv={} tiles {}x{} {} causal={} mask={} {}".format(
        lead + (n_q, d), lead + (n_k, d), d, dv, bq, bk, np.dtype(dtype).name, causal, masked, order
    )


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (False, True), (True, True)])
def test_forward_and_backward_match_reference(shape, dtype, causal, masked):
    lead, n_q, n_k, d, dv, bq, bk = shape
    rng = np.random.default_rng(hash(shape) % 2**32)
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, dv, dtype)
    mask = padding_mask(rng, lead, n_k) if masked else None
    o_ref, lse_ref = reference.forward(q, k, v, causal=causal, mask=mask)
    do = rng.standard_normal(o_ref.shape).astype(dtype)
    grads_ref = reference.backward(q, k, v, o_ref, lse_ref, do, causal=causal, mask=mask)
    for order in LOOP_ORDERS:
        info = describe(lead, n_q, n_k, d, dv, bq, bk, dtype, causal, masked, order)
        o, lse = flash_np.forward(q, k, v, causal=causal, mask=mask, block_q=bq, block_k=bk, loop_order=order)
        assert o.dtype == np.dtype(dtype) and lse.dtype == np.dtype(dtype)
        assert_close(o, o_ref, what="o", inputs=info)
        assert_close(lse, lse_ref, what="lse", inputs=info)
    grads = flash_np.backward(q, k, v, o, lse, do, causal=causal, mask=mask, block_q=bq, block_k=bk)
    for name, g, g_ref, x in zip(("dq", "dk", "dv"), grads, grads_ref, (q, k, v)):
        assert g.shape == x.shape and g.dtype == x.dtype
        assert_close(g, g_ref, what=name, inputs=info)


@pytest.mark.parametrize("causal", [False, True])
def test_float16_within_twice_the_naive_float16_error(causal):
    rng = np.random.default_rng(7)
    lead, n_q, n_k, d = (2, 2), 77, 130, 40
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, d, np.float64)
    mask = padding_mask(rng, lead, n_k)
    h = [t.astype(np.float16) for t in (q, k, v)]
    exact = [t.astype(np.float64) for t in h]  # the float64 truth for the float16 inputs
    o64, lse64 = reference.forward(*exact, causal=causal, mask=mask)
    do = rng.standard_normal(o64.shape)
    g64 = reference.backward(*exact, o64, lse64, do, causal=causal, mask=mask)

    o_naive, lse_naive = reference.forward(*h, causal=causal, mask=mask)
    o_flash, lse_flash = flash_np.forward(*h, causal=causal, mask=mask, block_q=16, block_k=24)
    assert o_flash.dtype == np.float16 and lse_flash.dtype == np.float32
    err_naive, _ = max_abs_diff(o_naive, o64)
    err_flash, _ = max_abs_diff(o_flash, o64)
    assert low_precision_bar(err_flash, err_naive, 1e-4), (err_flash, err_naive)
    assert_close(lse_flash, lse64, rtol=1e-5, what="lse float16")

    do16 = do.astype(np.float16)
    g_naive = reference.backward(*h, o_naive, lse_naive, do16, causal=causal, mask=mask)
    g_flash = flash_np.backward(*h, o_flash, lse_flash, do16, causal=causal, mask=mask, block_q=16, block_k=24)
    for name, gf, gn, gx in zip(("dq", "dk", "dv"), g_flash, g_naive, g64):
        assert gf.dtype == np.float16
        ef, _ = max_abs_diff(gf, gx)
        en, _ = max_abs_diff(gn, gx)
        assert low_precision_bar(ef, en, 1e-3), (name, ef, en)


def test_bfloat16_within_twice_the_naive_bfloat16_error():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 for NumPy comes from ml_dtypes")
    rng = np.random.default_rng(12)
    lead, n_q, n_k, d = (2,), 41, 37, 24
    q, k, v = make_inputs(rng, lead, n_q, n_k, d, d, np.float64)
    mask = padding_mask(rng, lead, n_k)
    b = [t.astype(ml_dtypes.bfloat16) for t in (q, k, v)]
    exact = [t.astype(np.float64) for t in b]
    o64, lse64 = reference.forward(*exact, causal=True, mask=mask)
    o_naive, _ = reference.forward(*b, causal=True, mask=mask)
    o_flash, lse_flash = flash_np.forward(*b, causal=True, mask=mask, block_q=16, block_k=8)
    assert o_flash.dtype == ml_dtypes.bfloat16 and lse_flash.dtype == np.float32
    err_flash, _ = max_abs_diff(o_flash.astype(np.float64), o64)
    err_naive, _ = max_abs_diff(o_naive.astype(np.float64), o64)
    assert low_precision_bar(err_flash, err_naive, 1e-3), (err_flash, err_naive)
    do = rng.standard_normal(o64.shape)
    g64 = reference.backward(*exact, o64, lse64, do, causal=True, mask=mask)
    do_b = do.astype(ml_dtypes.bfloat16)
    o_naive_b, lse_naive_b = reference.forward(*b, causal=True, mask=mask)
    g_naive = reference.backward(*b, o_naive_b, lse_naive_b, do_b, causal=True, mask=mask)
    g_flash = flash_np.backward(*b, o_flash, lse_flash, do_b, causal=True, mask=mask, block_q=16,
                                block_k=8)
    for name, gf, gn, gx in zip(("dq", "dk", "dv"), g_flash, g_naive, g64):
        assert gf.dtype == ml_dtypes.bfloat16
        ef, _ = max_abs_diff(gf.astype(np.float64), gx)
        en, _ = max_abs_diff(gn.astype(np.float64), gx)
        assert low_precision_bar(ef, en, 1e-3), (name, ef, en)


@pytest.mark.parametrize("order", LOOP_ORDERS)
def test_fully_masked_rows_are_zero_without_nan_or_warnings(order):
    rng = np.random.default_rng(3)
    q, k, v = make_inputs(rng, (2,), 9, 12, 4, 6, np.float32)
    mask = np.ones((2, 9, 12), dtype=bool)
    mask[0, 3] = False  # one query row with no allowed key
    mask[1, :, :] = False  # a whole head with no allowed key
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        o, lse = flash_np.forward(q, k, v, mask=mask, block_q=4, block_k=5, loop_order=order)
        grads = flash_np.backward(q, k, v, o, lse, np.ones_like(o), mask=mask, block_q=4, block_k=5)
    assert (o[0, 3] == 0).all() and (o[1] == 0).all()
    assert np.isneginf(lse[0, 3]) and np.isneginf(lse[1]).all()
    assert np.isfinite(lse[0, :3]).all()
    for g in grads:
        assert not np.isnan(g).any()
    dq, dk, dv = grads
    assert (dq[0, 3] == 0).all() and (dq[1] == 0).all() and (dk[1] == 0).all() and (dv[1] == 0).all()


@pytest.mark.parametrize("n_q,n_k", [(5, 9), (9, 5)])
def test_causal_is_top_left_aligned_for_fewer_and_more_queries_than_keys(n_q, n_k):
    """causal=True means query i may attend key j iff j <= i, whatever Nq and Nk are (as
    torch's is_causal): checked against an explicit (Nq, Nk) mask, not the oracle's own causal
    path. No row is ever empty (key 0 is always allowed): row 0 is exactly v[0], and with
    Nq > Nk the rows i >= Nk - 1 attend every key."""
    rng = np.random.default_rng(4)
    q, k, v = make_inputs(rng, (), n_q, n_k, 3, 3, np.float64)
    top_left = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None]      # (Nq, Nk)
    o, lse = flash_np.forward(q, k, v, causal=True, block_q=2, block_k=2)
    o_ref, lse_ref = reference.forward(q, k, v, mask=top_left)
    assert np.isfinite(lse).all()
    assert_close(o, o_ref)
    assert_close(lse, lse_ref)
    assert np.allclose(o[0], v[0], rtol=0, atol=1e-15)
    if n_q > n_k:
        o_full, _ = reference.forward(q[n_k - 1:], k, v)
        assert_close(o[n_k - 1:], o_full)


def _finite_difference_grads(f, arrays, eps=1e-6):
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        for idx in itertools.product(*(range(n) for n in a.shape)):
            old = a[idx]
            a[idx] = old + eps
            up = f()
            a[idx] = old - eps
            down = f()
            a[idx] = old
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("causal,masked", [(False, False), (True, True)])
def test_backward_matches_finite_differences(causal, masked):
    rng = np.random.default_rng(11)
    q, k, v = make_inputs(rng, (), 5, 6, 3, 2, np.float64)
    mask = padding_mask(rng, (), 6, empty_rows=False) if masked else None
    w = rng.standard_normal((5, 2))  # loss = sum(w * o)

    def loss():
        o, _ = flash_np.forward(q, k, v, causal=causal, mask=mask, block_q=2, block_k=4)
        return float((w * o).sum())

    o, lse = flash_np.forward(q, k, v, causal=causal, mask=mask, block_q=2, block_k=4)
    grads = flash_np.backward(q, k, v, o, lse, w, causal=causal, mask=mask, block_q=2, block_k=4)
    fd = _finite_difference_grads(loss, [q, k, v])
    for name, g, g_fd in zip(("dq", "dk", "dv"), grads, fd):
        assert_close(g, g_fd, rtol=1e-7, atol=1e-8, what=name + " vs finite differences")


def test_any_broadcastable_mask_is_accepted():
    rng = np.random.default_rng(8)
    q, k, v = make_inputs(rng, (2,), 6, 9, 4, 4, np.float64)
    keep = rng.random(9) > 0.4
    keep[0] = True
    want = reference.forward(q, k, v, mask=keep[None, None, :])
    for mask in (keep, keep[None, :], keep[None, None, :]):  # (Nk,), (1, Nk), (1, 1, Nk)
        got = flash_np.forward(q, k, v, mask=mask, block_q=4, block_k=4)
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])


def test_sram_bytes_gives_paper_block_sizes():
    rng = np.random.default_rng(5)
    q, k, v = make_inputs(rng, (), 40, 40, 8, 8, np.float32)
    trace = []
    flash_np.forward(q, k, v, sram_bytes=4 * 256, trace=trace)  # M = 256 elements -> Bc = 8, Br = 8
    begin = trace[0]
    assert (begin["br"], begin["bc"]) == (8, 8)
    trace2 = []
    flash_np.forward(q, k, v, sram_bytes=4 * 64, trace=trace2)  # M = 64 -> Bc = 2, Br = 2
    assert (trace2[0]["br"], trace2[0]["bc"]) == (2, 2)


def test_trace_events_are_plain_and_end_at_counter_totals():
    from nlpcore.kernels.io_model import IOCounter

    rng = np.random.default_rng(6)
    q, k, v = make_inputs(rng, (), 10, 10, 4, 4, np.float32)
    io, trace = IOCounter(), []
    flash_np.forward(q, k, v, causal=True, block_q=4, block_k=4, io=io, trace=trace)
    ops = [e["op"] for e in trace]
    assert ops[0] == "begin" and ops[-1] == "end"
    assert trace[-1]["reads"] == io.reads and trace[-1]["writes"] == io.writes
    assert "skip" in ops and "state" in ops and "tile" in ops
    tile = next(e for e in trace if e["op"] == "tile" and e["i"] == 0 and e["j"] == 0)
    assert tile["s"][0][1] is None  # query 0 may not see key 1 under causal
    import json

    json.dumps(trace, allow_nan=False)  # plain, JSON-safe data only


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda q, k, v: flash_np.forward(q[0], k, v), "q must have at least 2 dimensions"),
        (lambda q, k, v: flash_np.forward(q, k[:, :3], v), r"k must have shape \(\.\.\., Nk, d\)"),
        (lambda q, k, v: flash_np.forward(q, k, v[:4]), r"v must have shape \(\.\.\., Nk, dv\)"),
        (lambda q, k, v: flash_np.forward(q[:0], k, v), "at least one row"),
        (lambda q, k, v: flash_np.forward(q, k, v, block_q=0), "block_q must be a positive integer"),
        (lambda q, k, v: flash_np.forward(q, k, v, block_k=-2), "block_k must be a positive integer"),
        (lambda q, k, v: flash_np.forward(q, k, v, mask=np.ones((3, 5), bool)), r"mask must be broadcastable to \(\.\.\., Nq, Nk\)"),
        (lambda q, k, v: flash_np.forward(q, k, v, loop_order="zigzag"), "loop_order must be one of"),
        (lambda q, k, v: flash_np.backward(q, k, v, np.zeros((6, 5)), np.zeros(6), np.zeros((6, 5))), r"o must have shape \(6, 4\)"),
    ],
)
def test_bad_inputs_raise_value_errors_naming_the_argument(call, match):
    rng = np.random.default_rng(0)
    q, k, v = make_inputs(rng, (), 6, 8, 4, 4, np.float32)
    with pytest.raises(ValueError, match=match):
        call(q, k, v)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(q=np.ones((3, 4), dtype=np.int64)), "q must be a floating-point array"),
        (dict(mask=np.ones((1, 8))), "mask must be a boolean array"),
        (dict(block_q=2.5), "block_q must be a positive integer"),
        (dict(io="counter"), "io must be an nlpcore.kernels.io_model.IOCounter"),
    ],
)
def test_bad_types_raise_type_errors(kwargs, match):
    rng = np.random.default_rng(0)
    q, k, v = make_inputs(rng, (), 3, 8, 4, 4, np.float32)
    args = dict(q=q, k=k, v=v)
    args.update(kwargs)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    with pytest.raises(TypeError, match=match):
        flash_np.forward(q, k, v, **args)
