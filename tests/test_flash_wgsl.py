"""The WGSL flash kernel, three ways: its NumPy mirror against the float64 reference, the shader
itself (naga + Mesa lavapipe through wgpu-py) against the mirror, and the dispatch spec both
engines execute.

Tolerances:
    mirror vs float64 reference   the float32 bar of tests/support.py (1e-6 × max(1, |o|));
    shader vs mirror              1e-5 × max |o| (the issue's bar: relative to the output's own
                                  scale), lse likewise; same -inf rows, never NaN.
"""

from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import reference, tiling

from support import assert_close

ROOT = pathlib.Path(__file__).resolve().parents[1]
PY38 = ROOT / ".venv38" / "bin" / "python"
SHADER_REL = 1e-5


def make_inputs(seed, batch, n_q, n_k, d, dv=None, mask_kind=None, spread=1.0):
    """q (*batch, Nq, d), k (*batch, Nk, d), v (*batch, Nk, dv) float32 and a mask.

    mask_kind: None; "padding" (*batch, 1, Nk) with the first batch entry's keys all padded
    (fully masked rows) and the rest padded at the end; "full" (*batch, Nq, Nk) random with
    query row 1 fully masked.
    """
    rng = np.random.default_rng(seed)
    dv = d if dv is None else dv
    q = (spread * rng.standard_normal(batch + (n_q, d))).astype(np.float32)
    k = (spread * rng.standard_normal(batch + (n_k, d))).astype(np.float32)
    v = rng.standard_normal(batch + (n_k, dv)).astype(np.float32)
    mask = None
    if mask_kind == "padding":
        mask = np.ones(batch + (1, n_k), dtype=bool)
        mask[..., 0, n_k - n_k // 3:] = False
        mask.reshape(-1, n_k)[0] = False
    elif mask_kind == "full":
        mask = rng.random(batch + (n_q, n_k)) < 0.7
        mask[..., min(1, n_q - 1), :] = False
    return q, k, v, mask


def describe(batch, n_q, n_k, d, dv, causal, mask_kind, plan):
    return "batch={} Nq={} Nk={} d={} dv={} causal={} mask={} plan=(Br={}, Bc={}, KS={})".format(
        batch, n_q, n_k, d, dv, causal, mask_kind, plan.br, plan.bc, plan.ks
    )


def assert_relative(got, want, rel, what, inputs):
    """|got - want| <= rel × max |want| (finite entries), same -inf pattern, no NaN."""
    finite = np.asarray(want, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    return assert_close(got, want, rtol=0.0, atol=rel * scale, what=what, inputs=inputs)


# (batch, Nq, Nk, d, dv, causal, mask_kind): sizes are deliberately not multiples of the tiles.
GRID = [
    ((), 37, 53, 16, None, False, None),
    ((2,), 70, 45, 16, None, True, "padding"),
    ((2,), 33, 17, 32, 24, True, "full"),
    ((), 1, 1, 32, None, True, None),
    ((2, 3), 19, 40, 64, None, False, "padding"),
    ((2,), 50, 50, 64, None, True, None),
    ((), 29, 31, 80, None, True, "padding"),
    ((2,), 21, 9, 80, 80, False, "full"),
    ((), 45, 70, 128, None, True, "padding"),
    ((2,), 17, 23, 128, 64, False, None),
    # head dims that are not multiples of 4: the shader's four-a-step loops have remainders
    ((2,), 23, 29, 7, 5, True, "padding"),
    ((2,), 12, 19, 13, 6, False, "full"),
    ((), 9, 11, 3, 1, False, None),
]


def _reference(q, k, v, causal, mask):
    return reference.forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                             causal=causal, mask=mask)


@pytest.mark.parametrize("batch, n_q, n_k, d, dv, causal, mask_kind", GRID)
def test_mirror_matches_reference(batch, n_q, n_k, d, dv, causal, mask_kind):
    q, k, v, mask = make_inputs(1, batch, n_q, n_k, d, dv, mask_kind)
    plan = tiling.plan(d, dv=dv)
    inputs = describe(batch, n_q, n_k, d, dv, causal, mask_kind, plan)
    o, lse = mirror.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    o_ref, lse_ref = _reference(q, k, v, causal, mask)
    assert o.dtype == np.float32 and lse.dtype == np.float32
    assert_close(o, o_ref, dtype=np.float32, what="o", inputs=inputs)
    assert_close(lse, lse_ref, dtype=np.float32, what="lse", inputs=inputs)


def test_mirror_rescales_when_the_max_rises_tile_after_tile():
    # Scores rise with the key index, so every new group of four keys raises the row max (alpha < 1
    # each step), and are large enough that skipping the rescale would be far off.
    n_k, d = 40, 16
    q = np.ones((5, d), dtype=np.float32)
    k = (np.linspace(0, 3, n_k, dtype=np.float32)[:, None] * np.ones(d, dtype=np.float32))
    v = np.random.default_rng(0).standard_normal((n_k, 8)).astype(np.float32)
    plan = tiling.plan(d, dv=8, br=2, bc=4)  # 40 keys: ten tiles of four
    o, lse = mirror.forward(q, k, v, plan=plan)
    o_ref, lse_ref = _reference(q, k, v, False, None)
    assert_close(o, o_ref, dtype=np.float32, what="o")
    assert_close(lse, lse_ref, dtype=np.float32, what="lse")


def test_fully_masked_rows_give_zero_and_minus_inf():
    # Causal + padding of key 0: query 0 may attend nothing.
    q, k, v, _ = make_inputs(2, (), 9, 9, 16)
    pad = np.ones((1, 9), dtype=bool)
    pad[0, 0] = False
    o, lse = mirror.forward(q, k, v, causal=True, mask=pad, plan=tiling.plan(16, br=4, bc=4))
    assert np.all(o[0] == 0) and lse[0] == -np.inf
    assert np.isfinite(lse[1:]).all() and not np.isnan(o).any()


def test_key_padding_and_full_mask_paths_agree():
    q, k, v, mask = make_inputs(3, (2,), 11, 13, 16, mask_kind="padding")
    full = np.broadcast_to(mask, (2, 11, 13)).copy()
    a = mirror.forward(q, k, v, mask=mask)
    b = mirror.forward(q, k, v, mask=full)
    assert mirror.prepare(q, k, v, mask=mask).mask_row_stride == 0
    assert mirror.prepare(q, k, v, mask=full).mask_row_stride == 13
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_other_input_dtypes_run_in_float32():
    q, k, v, _ = make_inputs(4, (), 12, 14, 16)
    o32, _ = mirror.forward(q, k, v)
    o16, _ = mirror.forward(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))
    o64, _ = mirror.forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    assert o16.dtype == o64.dtype == np.float32
    np.testing.assert_array_equal(o64, o32)  # float64 inputs are rounded to float32 first
    o_ref, _ = _reference(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), False, None)
    assert_close(o16, o_ref, dtype=np.float32, what="o (float16 inputs)")


def test_dispatch_spec_layout():
    q, k, v, mask = make_inputs(5, (2,), 21, 10, 16, 8, "padding")
    plan = tiling.plan(16, dv=8, br=8, bc=4)
    spec = mirror.dispatch_spec(q, k, v, causal=True, mask=mask, scale=0.5, plan=plan)
    assert spec["shader"] == "flash_fwd.wgsl" and spec["entry"] == "main"
    assert spec["constants"] == plan.constants()
    assert spec["workgroups"] == [3, 1, 2]  # ceil(21 / 8) query tiles, 2 batch entries
    by_name = {b["name"]: b for b in spec["bindings"]}
    assert [b["binding"] for b in spec["bindings"]] == list(range(7))
    params = by_name["params"]["data"]
    assert len(params) == mirror.PARAMS_BYTES and by_name["params"]["type"] == "uniform"
    words = np.frombuffer(params[:24], dtype="<u4")
    assert list(words) == [21, 10, 1, 1, 10, 0]  # n_q, n_k, causal, has_mask, batch/row strides
    assert np.frombuffer(params[24:28], dtype="<f4")[0] == np.float32(0.5)
    assert np.array_equal(np.frombuffer(by_name["q"]["data"], dtype="<f4"), q.ravel())
    bits = np.unpackbits(np.frombuffer(by_name["mask_bits"]["data"], dtype=np.uint8), bitorder="little")
    assert np.array_equal(bits[:20].astype(bool), mask.reshape(-1))
    for name, size in (("o", 2 * 21 * 8 * 4), ("lse", 2 * 21 * 4)):
        assert by_name[name]["output"] and by_name[name]["data"] is None and by_name[name]["size"] == size
    assert not any(b["output"] for b in spec["bindings"] if b["name"] not in ("o", "lse"))

    naive = mirror.dispatch_spec(q, k, v, causal=True, mask=mask, plan=plan, shader="attention_naive.wgsl")
    assert naive["constants"] == {"D": 16, "DV": 8, "WG": mirror.NAIVE_WORKGROUP_SIZE}
    assert naive["bindings"][-1]["name"] == "s" and naive["bindings"][-1]["size"] == 2 * 21 * 10 * 4


def test_decode_outputs_maps_the_sentinel_and_checks_sizes():
    q, k, v, _ = make_inputs(6, (2,), 3, 4, 16, 2)
    spec = mirror.dispatch_spec(q, k, v)
    o_bytes = np.arange(12, dtype="<f4").tobytes()
    lse = np.array([1, mirror.MASKED_SCORE, 3, 4, 5, 6], dtype="<f4")
    o, out_lse = mirror.decode_outputs(spec, {"o": o_bytes, "lse": memoryview(lse.tobytes())})
    assert o.shape == (2, 3, 2) and out_lse.shape == (2, 3)
    assert out_lse[0, 1] == -np.inf and out_lse[1, 2] == 6
    with pytest.raises(ValueError, match=r"outputs\['o'\] has 8 bytes, expected 48"):
        mirror.decode_outputs(spec, {"o": bytes(8), "lse": lse.tobytes()})
    with pytest.raises(ValueError, match="must contain 'lse'"):
        mirror.decode_outputs(spec, {"o": o_bytes})
    with pytest.raises(TypeError, match="bytes-like"):
        mirror.decode_outputs(spec, {"o": 3, "lse": lse.tobytes()})


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(plan=tiling.plan(32)), ValueError, r"plan was made for d=32.*tiling.plan\(16, 4, dv=16\)"),
        (dict(plan=tiling.plan(16, 2)), ValueError, "dtype_bytes=4"),
        (dict(plan=(8, 8)), TypeError, "plan must be"),
        (dict(causal=1), TypeError, "causal must be True or False"),
        (dict(mask=np.ones((4, 6))), TypeError, "mask must be a boolean"),
        (dict(mask=np.ones((3, 6), dtype=bool)), ValueError, "mask must be broadcastable"),
        (dict(shader="nope.wgsl"), ValueError, "shader must be one of"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, text):
    q, k, v, _ = make_inputs(7, (), 4, 6, 16)
    with pytest.raises(error, match=text):
        mirror.dispatch_spec(q, k, v, **kwargs)


def test_inputs_the_shader_cannot_hold_are_refused():
    q, k, v, _ = make_inputs(8, (), 4, 6, 16)
    bad = q.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="q must be finite"):
        mirror.forward(bad, k, v)
    with pytest.raises(ValueError, match="k must be finite"):
        mirror.forward(q, k.astype(np.float64) * 1e300, v)
    with pytest.raises(ValueError, match="masked-score sentinel"):
        mirror.forward(q * 1e15, k * 1e15, v)
    with pytest.raises(ValueError, match="maxComputeWorkgroupsPerDimension"):
        mirror.dispatch_spec(np.zeros((65536, 1, 1), np.float32), np.zeros((1, 1), np.float32),
                             np.zeros((1, 1), np.float32))


@pytest.mark.skipif(not PY38.exists(), reason="no .venv38 (Python 3.8 + NumPy 1.17.5, set up by scripts/setup.sh)")
def test_mirror_spec_and_wgpu_import_on_python38_with_numpy117():
    script = r"""
import warnings, numpy as np
warnings.simplefilter("error")
assert np.__version__.startswith("1.17"), np.__version__
from nlpcore.kernels import flash_wgsl_mirror as M, tiling, reference
rng = np.random.RandomState(0)
q, k, v = rng.randn(2, 13, 5), rng.randn(2, 11, 5), rng.randn(2, 11, 3)
mask = rng.rand(2, 1, 11) > 0.3
mask[0] = False
o, lse = M.forward(q, k, v, causal=True, mask=mask, plan=tiling.plan(5, 4, dv=3, br=4, bc=4))
o2, lse2 = reference.forward(q, k, v, causal=True, mask=mask)
assert np.allclose(o, o2, atol=1e-6) and np.array_equal(np.isinf(lse), np.isinf(lse2))
spec = M.dispatch_spec(q, k, v, causal=True, mask=rng.rand(13, 11) > 0.5)
o3, lse3 = M.decode_outputs(spec, {"o": bytes(spec["bindings"][5]["size"]), "lse": np.zeros(26, np.float32)})
assert o3.shape == (2, 13, 3) and lse3.shape == (2, 13)
from nlpcore.kernels import flash_wgpu  # importable without wgpu (as in Pyodide) ...
try:
    import wgpu
except ImportError:
    try:  # ... and says what is missing when called
        flash_wgpu.forward(q, k, v)
        raise AssertionError("flash_wgpu.forward ran without wgpu")
    except ImportError as err:
        assert "needs the wgpu package" in str(err), err
print("ok")
"""
    env = {"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(PY38), "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


# ---------------------------------------------------------------------------------------------
# The shader itself, through wgpu-py (naga -> SPIR-V -> Mesa lavapipe).


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("wgpu", reason="wgpu-py is not installed (pip install 'nlpcore[test]')")
    from nlpcore.kernels import flash_wgpu

    try:
        flash_wgpu.device()
    except RuntimeError as err:  # no Vulkan adapter: say so rather than fail obscurely
        pytest.skip(str(err))
    return flash_wgpu


def test_device_has_the_webgpu_default_workgroup_budget(gpu):
    assert gpu.device().limits["max-compute-workgroup-storage-size"] == tiling.WEBGPU_DEFAULT_STORAGE
    assert gpu.adapter_name()


@pytest.mark.parametrize("batch, n_q, n_k, d, dv, causal, mask_kind", GRID)
def test_shader_matches_mirror_and_reference(gpu, batch, n_q, n_k, d, dv, causal, mask_kind):
    q, k, v, mask = make_inputs(11, batch, n_q, n_k, d, dv, mask_kind)
    plan = tiling.plan(d, dv=dv)
    inputs = describe(batch, n_q, n_k, d, dv, causal, mask_kind, plan)
    o_gpu, lse_gpu = gpu.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    o_mir, lse_mir = mirror.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    assert_relative(o_gpu, o_mir, SHADER_REL, "o (shader vs mirror)", inputs)
    assert_relative(lse_gpu, lse_mir, SHADER_REL, "lse (shader vs mirror)", inputs)
    o_ref, lse_ref = _reference(q, k, v, causal, mask)
    assert_relative(o_gpu, o_ref, SHADER_REL, "o (shader vs reference)", inputs)
    if mask_kind is not None:
        masked = ~np.isfinite(lse_ref)
        assert masked.any() and np.all(o_gpu[masked] == 0)


@pytest.mark.parametrize(
    "br, bc, ks",
    [(1, 4, 1), (4, 4, 3), (16, 4, 2), (3, 8, 1), (7, 4, 4), (100, 4, 2), (200, 12, 1)],
)
def test_shader_with_other_tiles_and_lanes(gpu, br, bc, ks):
    # Odd tiles, one to four lanes a row (d = 16 fits one lane's 64 dims: with KS > 1 the
    # other lanes hold padding only, and their partial scores of 0 still go through s_part)
    # and a staging loop shorter or longer than the workgroup.
    q, k, v, mask = make_inputs(12, (2,), 23, 19, 16, 8, "padding", spread=2.0)
    plan = tiling.plan(16, dv=8, br=br, bc=bc, ks=ks)
    inputs = describe((2,), 23, 19, 16, 8, True, "padding", plan)
    o_gpu, lse_gpu = gpu.forward(q, k, v, causal=True, mask=mask, plan=plan)
    o_mir, lse_mir = mirror.forward(q, k, v, causal=True, mask=mask, plan=plan)
    assert_relative(o_gpu, o_mir, SHADER_REL, "o", inputs)
    assert_relative(lse_gpu, lse_mir, SHADER_REL, "lse", inputs)


def test_largest_d_runs_on_the_default_device(gpu):
    d = tiling.largest_d(4, tiling.WEBGPU_DEFAULT_STORAGE)
    q, k, v, _ = make_inputs(13, (), 3, 5, d)
    o_gpu, lse_gpu = gpu.forward(q, k, v)
    o_mir, lse_mir = mirror.forward(q, k, v)
    assert_relative(o_gpu, o_mir, SHADER_REL, "o (d = {})".format(d), "")
    assert_relative(lse_gpu, lse_mir, SHADER_REL, "lse (d = {})".format(d), "")


@pytest.mark.parametrize("causal, mask_kind", [(False, None), (True, "padding"), (False, "full")])
def test_naive_shader_matches_mirror(gpu, causal, mask_kind):
    q, k, v, mask = make_inputs(14, (2,), 30, 27, 32, 16, mask_kind)
    inputs = describe((2,), 30, 27, 32, 16, causal, mask_kind, tiling.plan(32, dv=16))
    o_naive, lse_naive = gpu.naive_forward(q, k, v, causal=causal, mask=mask)
    o_mir, lse_mir = mirror.forward(q, k, v, causal=causal, mask=mask)
    assert_relative(o_naive, o_mir, SHADER_REL, "o (naive shader vs mirror)", inputs)
    assert_relative(lse_naive, lse_mir, SHADER_REL, "lse (naive shader vs mirror)", inputs)


def test_run_spec_is_generic(gpu):
    # The runner reads only the spec: an unknown binding type is refused before any GPU work.
    q, k, v, _ = make_inputs(15, (), 4, 4, 16)
    spec = mirror.dispatch_spec(q, k, v)
    spec["bindings"][1] = dict(spec["bindings"][1], type="texture")
    with pytest.raises(ValueError, match="unknown type 'texture'"):
        gpu.run_spec(spec)


# --- lavapipe's loop limiter: multi-pass naive spec, the loop-count bound, the guard, large N ---

def test_naive_spec_runs_three_passes():
    q, k, v, _ = make_inputs(16, (3,), 21, 10, 16, 8)
    plan = tiling.plan(16, dv=8)
    spec = mirror.dispatch_spec(q, k, v, plan=plan, shader="attention_naive.wgsl")
    assert mirror.NAIVE_WORKGROUP_SIZE == 64
    assert spec["passes"] == [
        {"entry": "scores", "workgroups": [1, 21, 3]},   # ceil(Nk / WG) key blocks, Nq rows, B
        {"entry": "softmax", "workgroups": [21, 1, 3]},  # a workgroup per query row
        {"entry": "pv", "workgroups": [1, 21, 3]},       # ceil(dv / WG) column blocks
    ]
    assert (spec["entry"], spec["workgroups"]) == ("scores", [1, 21, 3])
    assert "passes" not in mirror.dispatch_spec(q, k, v, plan=plan)  # flash: one dispatch


def _spec_with(n_k, d, **plan_args):
    q, k, v, _ = make_inputs(17, (), 4, n_k, d)
    return mirror.dispatch_spec(q, k, v, plan=tiling.plan(d, **plan_args))


def test_loop_iterations_counted_by_hand():
    from nlpcore.kernels import flash_wgpu

    # BR = 2, BC = 8, KS = 1, Nk = 20: three key tiles, WG = 2. The chunk helpers have no
    # loops. Per tile: j 1 + staging (ceil(8·16 / 2) + 1 = 65) + four keys a step (2 + 1) = 69;
    # the j loop's exit test 1.
    q, k, v, _ = make_inputs(18, (), 3, 20, 4)
    plan = tiling.plan(4, br=2, bc=8)
    spec = mirror.dispatch_spec(q, k, v, plan=plan)
    assert flash_wgpu.loop_iterations(spec) == 3 * 69 + 1
    # KS = 2 lanes a row (WG = 4): staging ceil(8·32 / 4) + 1 = 65, partial scores into s_part
    # 8 + 1, and per group of four keys the lane-order sum 2 + 1: 1 + 65 + 9 + 3 + 2·3 = 84.
    two = mirror.dispatch_spec(q, k, v, plan=tiling.plan(4, br=2, bc=8, ks=2))
    assert flash_wgpu.loop_iterations(two) == 3 * 84 + 1
    # The naive shader's busiest pass, here softmax: 3 strided loops over Nk + 2 loops over WG.
    naive = mirror.dispatch_spec(q, k, v, plan=plan, shader="attention_naive.wgsl")
    wg = mirror.NAIVE_WORKGROUP_SIZE
    assert flash_wgpu.loop_iterations(naive) == 3 * (1 + 1) + 2 * (wg + 1)
    # A learner's inline shader of the same shape is counted with a loop over each chunk.
    big = _spec_with(4096, 64)
    assert flash_wgpu.loop_iterations(dict(big, code="// inline")) > flash_wgpu.loop_iterations(big)
    assert flash_wgpu.loop_iterations(dict(spec, shader="other.wgsl")) is None


def test_default_plan_fits_the_loop_limit_at_the_benchmark_sizes():
    from nlpcore.kernels import flash_wgpu

    limit = flash_wgpu.LAVAPIPE_LOOP_LIMIT
    spec = _spec_with(16384, 64)
    assert flash_wgpu.loop_iterations(spec) <= limit  # about 0.6 loop iterations per key
    assert flash_wgpu.loop_iterations(_spec_with(131072, 64)) > limit
    n_max = flash_wgpu.largest_n_k(spec)
    assert flash_wgpu.loop_iterations(_spec_with(n_max, 64)) <= limit < flash_wgpu.loop_iterations(
        _spec_with(n_max + 1, 64))
    q, k, v, _ = make_inputs(19, (), 4, 4096, 64)
    naive = mirror.dispatch_spec(q, k, v, shader="attention_naive.wgsl")
    assert flash_wgpu.loop_iterations(naive) == 4096 + 1  # pv pass: one iteration per key


def test_guard_names_the_limit_and_the_largest_n():
    from nlpcore.kernels import flash_wgpu

    spec = _spec_with(131072, 64)
    with pytest.raises(ValueError, match=r"65535 loop iterations; this dispatch of flash_fwd.wgsl "
                                         r"needs ~\d+ .*use N <= {} keys".format(flash_wgpu.largest_n_k(spec))):
        flash_wgpu.check_loop_budget(spec)
    flash_wgpu.check_loop_budget(_spec_with(4096, 64))  # within the limit: no error


PROBE = """
@group(0) @binding(0) var<uniform> p: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() {
  var n = 0u;
  for (var i = 0u; i < p.x; i++) { n += 1u; }
  out[0] = n;
}
"""


def test_lavapipe_stops_long_loops_and_run_spec_refuses_them(gpu):
    if not gpu.has_loop_limiter():
        pytest.skip("adapter {} is not llvmpipe/lavapipe".format(gpu.adapter_name()))
    # The limiter itself: a loop asked for 70000 iterations (a runtime count, so nothing is
    # unrolled) stops at 65535, with no error.
    spec = {"shader": "probe.wgsl", "code": PROBE, "entry": "main", "constants": {},
            "bindings": [
                {"binding": 0, "type": "uniform", "data": np.array([70000, 0, 0, 0], "<u4").tobytes(),
                 "size": 16, "name": "p", "output": False},
                {"binding": 1, "type": "storage", "data": None, "size": 4, "name": "out", "output": True}],
            "workgroups": [1, 1, 1]}
    assert int(np.frombuffer(gpu.run_spec(spec)["out"], "<u4")[0]) == gpu.LAVAPIPE_LOOP_LIMIT
    # ... so a flash dispatch whose bound is over the limit is refused before it runs (a
    # learner-shaped shader that loops over each chunk's slots reaches it at N = 8192).
    q, k, v, _ = make_inputs(20, (), 2, 8192, 64)
    spec = dict(mirror.dispatch_spec(q, k, v), code=gpu.shader_source("flash_fwd.wgsl"))
    with pytest.raises(ValueError, match="lavapipe/llvmpipe stops a shader invocation"):
        gpu.run_spec(spec)


@pytest.mark.parametrize("n", [1024, 2048])
def test_both_shaders_match_the_reference_at_benchmark_sizes(gpu, n):
    # N = 2048 was the largest size the old one-row-per-invocation naive shader could not do
    # on lavapipe (wrong from N ≈ 490); both shaders must now be right here (~3 s in all).
    q, k, v, _ = make_inputs(21, (), n, n, 64)
    o_ref, lse_ref = _reference(q, k, v, False, None)
    inputs = describe((), n, n, 64, 64, False, None, tiling.plan(64))
    for name, run in (("flash", gpu.forward), ("naive", gpu.naive_forward)):
        o, lse = run(q, k, v)
        assert_relative(o, o_ref, SHADER_REL, "o ({} shader vs reference)".format(name), inputs)
        assert_relative(lse, lse_ref, SHADER_REL, "lse ({} shader vs reference)".format(name), inputs)
