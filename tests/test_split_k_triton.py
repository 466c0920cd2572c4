"""The Triton split-K decoder (nlpcore.kernels.split_k_triton) under Triton's CPU interpreter.

Checked against the NumPy reference: the merged (o, lse) and every partial (attention over its
part's keys alone), at cache lengths that leave a ragged last tile and a ragged last part.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the Triton decoder needs PyTorch (pip install -e '.[triton]')")
if not torch.cuda.is_available():
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set", allow_module_level=True)
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
pytest.importorskip("triton", reason="the Triton decoder needs Triton (pip install -e '.[triton]')")

from nlpcore.kernels import reference  # noqa: E402
from nlpcore.kernels import split_k_triton as skt  # noqa: E402
from support import assert_close, low_precision_bar, max_abs_diff  # noqa: E402

DEVICE = "cpu" if skt.INTERPRET else "cuda"


def inputs(b, h, n_q, n_k, d, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=gen)
    k = torch.randn(b, h, n_k, d, generator=gen)
    v = torch.randn(b, h, n_k, d, generator=gen)
    return [t.to(dtype).to(DEVICE) for t in (q, k, v)]


def as_np(t):
    return t.detach().cpu().double().numpy()


@pytest.mark.parametrize("n_q,n_k,splits", [(1, 100, 1), (1, 100, 3), (3, 173, 4), (5, 40, 8), (16, 70, 2)])
def test_float32_matches_reference_and_each_partial_is_its_part(n_q, n_k, splits):
    q, k, v = inputs(2, 3, n_q, n_k, 16, torch.float32, seed=n_k + splits)
    o, lse, (o_parts, lse_parts) = skt.forward(q, k, v, splits=splits, partials=True)
    o_ref, lse_ref = reference.forward(as_np(q), as_np(k), as_np(v))
    info = "Nq={} Nk={} splits={}".format(n_q, n_k, splits)
    assert_close(as_np(o), o_ref, dtype=np.float32, rtol=2e-5, what="o", inputs=info)
    assert_close(as_np(lse), lse_ref, dtype=np.float32, rtol=2e-6, what="lse", inputs=info)
    per = skt.keys_per_split(n_k, splits)
    assert o_parts.shape[0] == -(-n_k // per) <= splits
    for p in range(o_parts.shape[0]):
        cols = slice(p * per, min(n_k, (p + 1) * per))
        po, plse = reference.forward(as_np(q), as_np(k)[..., cols, :], as_np(v)[..., cols, :])
        assert_close(as_np(o_parts[p]), po, dtype=np.float32, rtol=2e-5, what="partial o", inputs=info + " part {}".format(p))
        assert_close(as_np(lse_parts[p]), plse, dtype=np.float32, rtol=2e-6, what="partial lse", inputs=info)


def test_float16_within_twice_the_naive_float16_error():
    q, k, v = inputs(1, 4, 2, 301, 32, torch.float16, seed=3)
    qn, kn, vn = (t.cpu().numpy() for t in (q, k, v))
    o64, lse64 = reference.forward(*(t.astype(np.float64) for t in (qn, kn, vn)))
    o_naive, _ = reference.forward(qn, kn, vn)
    err_naive, _ = max_abs_diff(o_naive, o64)
    for splits in (1, 5, 19):
        o, lse = skt.forward(q, k, v, splits=splits)
        assert o.dtype == torch.float16 and lse.dtype == torch.float32
        err, _ = max_abs_diff(as_np(o), o64)
        assert low_precision_bar(err, err_naive, 1e-4), (splits, err, err_naive)
        assert_close(as_np(lse), lse64, dtype=np.float32, rtol=1e-5, what="lse float16")


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(splits=0), ValueError, "splits must be a positive integer"),
        (dict(q_rows=17), ValueError, r"need 1 <= Nq <= 16"),
        (dict(d=24), ValueError, "head dim d must be one of"),
        (dict(k_rank=3), ValueError, r"k must have shape \(B, H, N, d\)"),
    ],
)
def test_bad_inputs_are_refused_with_a_reason(kwargs, error, match):
    q, k, v = inputs(1, 2, kwargs.get("q_rows", 1), 40, kwargs.get("d", 16), torch.float32, seed=0)
    if kwargs.get("k_rank"):
        k = k[0]
    with pytest.raises(error, match=match):
        skt.forward(q, k, v, splits=kwargs.get("splits", 2))
