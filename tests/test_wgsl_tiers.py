"""The tiled kernel's tiers beyond the portable one (nlpcore.kernels.tiling.TIERS).

- subgroup (wgsl/flash_fwd_pair_fma.wgsl, mirrored by flash_wgsl_variants) and f16
  (wgsl/flash_fwd_f16.wgsl): their NumPy mirror
  against float64, and the shaders on lavapipe through wgpu-py (which offers ``subgroup`` and
  ``shader-f16`` there) against the mirror: ragged tiles, causal, masks, fully masked rows,
  Nq != Nk, batch and heads, d = 64 and 128 (KS = 2, where the subgroup tier differs).
- f16 at flash-attention's same-precision bar: its error against float64 at most twice that of a
  plain float16 attention (scores and P·V accumulated in float32 from float16 operands, S and P
  rounded to float16, o rounded to float16), the bar of flash-attention's tests/test_flash_attn.py.
- int8 (wgsl/flash_fwd_int8.wgsl): subgroup matrices exist only in Dawn on GPUs that offer them
  (not lavapipe, not SwiftShader), so the real shader is tested on the H200 by a recorded run
  (bench/results/webgpu_h200.json, its int8 rows' ``valid`` and accuracy). Here: its mirror's
  quantisation against hand-computed values, its accuracy against float64 on random and
  outlier-channel inputs, and the same shader with the matrix block replaced by scalar integer
  arithmetic (``flash_wgsl_int8.emulated_source``) on lavapipe against the mirror, which runs
  every other line of it (quantisation passes, staging, softmax, masks, lse shift).

Tolerances: mirror vs float64, float32 tiers: 1e-6 × max(1, |o|) as tests/test_flash_wgsl.py;
shader vs mirror: 1e-5 × max |o| (float32), one float16 ulp of max |o| (f16), 1e-5 (emulated int8;
the quantisation is exact integer work, only float32 sums may be contracted differently).
"""

from __future__ import annotations

import numpy as np
import pytest

from nlpcore import shaders
from nlpcore.kernels import flash_wgsl_int8 as int8
from nlpcore.kernels import flash_wgsl_int8pv as int8pv
from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import reference, tiling

CASES = [  # batch, Nq, Nk, d, causal, mask kind
    ((), 37, 53, 64, False, None),
    ((2,), 70, 45, 64, True, None),
    ((2, 3), 33, 70, 128, False, "padding"),
    ((2,), 29, 29, 128, True, "full"),
    ((), 129, 17, 40, False, None),
]


def make(seed, batch, n_q, n_k, d, mask_kind, kind="random"):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(batch + (n_q, d)).astype(np.float32)
    k = rng.standard_normal(batch + (n_k, d)).astype(np.float32)
    v = rng.standard_normal(batch + (n_k, d)).astype(np.float32)
    if kind == "outlier":  # a channel bias shared by every key, and a few channels ten times larger
        k += (4.0 * rng.standard_normal(d)).astype(np.float32)
        hot = rng.choice(d, size=max(1, d // 16), replace=False)
        q[..., hot] *= 10.0
        k[..., hot] *= 10.0
        q *= 0.5
    mask = None
    if mask_kind == "padding":
        mask = np.ones(batch + (1, n_k), dtype=bool)
        mask[..., 0, n_k - n_k // 3:] = False
        mask.reshape(-1, n_k)[0] = False  # the first batch entry's rows are fully masked
    elif mask_kind == "full":
        mask = rng.random(batch + (n_q, n_k)) < 0.7
        mask[..., 1, :] = False
    return q, k, v, mask


def ref(q, k, v, causal, mask):
    return reference.forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                             causal=causal, mask=mask)


def close(got, want, atol, what):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert not np.isnan(got).any(), what + ": NaN"
    assert (np.isinf(got) == np.isinf(want)).all(), what + ": -inf rows differ"
    fin = np.isfinite(want)
    err = float(np.abs(got[fin] - want[fin]).max()) if fin.any() else 0.0
    assert err <= atol, "{}: max |Δ| = {:.3g} > {:.3g}".format(what, err, atol)


# --- tiling ---------------------------------------------------------------------------------------

def test_every_tier_is_planned_from_the_adapter_limits():
    big = {"maxComputeWorkgroupStorageSize": 49152}
    for tier in ("portable", "subgroup"):  # always within WebGPU's default budget
        assert tiling.plan_for(tier, 64, limits=big).bytes_used <= tiling.WEBGPU_DEFAULT_STORAGE
    f16 = tiling.plan_for("f16", 128, limits=big)
    assert tiling.WEBGPU_DEFAULT_STORAGE < f16.bytes_used <= 49152 and f16.dtype_bytes == 2
    i8 = tiling.plan_for("int8", 64, limits=big)
    assert i8.bytes_used <= 49152 and i8.br % 16 == 0 and i8.bc % 16 == 0 and i8.workgroup_size % 32 == 0
    assert "SPART" not in i8.constants() and "SPART" not in tiling.plan_for("subgroup", 128).constants()
    assert tiling.plan_for("int8", 64).bytes_used <= tiling.WEBGPU_DEFAULT_STORAGE


def test_tier_plans_refuse_what_their_shaders_cannot_do():
    with pytest.raises(ValueError, match="multiple of 32"):
        tiling.plan_int8(40, 49152)
    with pytest.raises(ValueError, match="subgroup size"):
        tiling.plan_int8(64, 49152, subgroup_size=256)
    with pytest.raises(ValueError, match="tier must be"):
        tiling.plan_for("fp8", 64)
    with pytest.raises(ValueError, match="f16 tier"):
        tiling.plan(64, 4, tier="f16")
    with pytest.raises(ValueError, match="power of two"):
        tiling.plan(192, 4, tier="subgroup")


# --- mirrors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch, n_q, n_k, d, causal, mask_kind", CASES)
def test_subgroup_mirror_matches_reference(batch, n_q, n_k, d, causal, mask_kind):
    q, k, v, mask = make(0, batch, n_q, n_k, d, mask_kind)
    o, lse = mirror.forward(q, k, v, causal=causal, mask=mask, tier="subgroup")
    want = ref(q, k, v, causal, mask)
    close(o, want[0], 1e-6 * max(1.0, float(np.abs(want[0]).max())), "o")
    close(lse, want[1], 2e-6 * max(1.0, float(np.abs(want[1][np.isfinite(want[1])]).max(initial=1))), "lse")


def plain_f16(q, k, v, causal, mask):
    """Attention as a plain float16 implementation computes it: float16 operands, float32
    accumulation, S and P rounded to float16, o rounded to float16."""
    q16, k16, v16 = (x.astype(np.float16).astype(np.float32) for x in (q, k, v))
    s = (np.matmul(q16, np.swapaxes(k16, -1, -2)) / np.float32(np.sqrt(q.shape[-1]))).astype(np.float16)
    s = s.astype(np.float32)
    allowed = np.ones(s.shape, dtype=bool)
    if causal:
        allowed &= np.tril(np.ones(s.shape[-2:], dtype=bool))
    if mask is not None:
        allowed &= mask
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    p = (e / np.where(l == 0, 1, l)).astype(np.float16).astype(np.float32)
    return np.matmul(p, v16).astype(np.float16)


@pytest.mark.parametrize("batch, n_q, n_k, d, causal, mask_kind", CASES)
def test_f16_mirror_meets_the_same_precision_bar(batch, n_q, n_k, d, causal, mask_kind):
    q, k, v, mask = make(1, batch, n_q, n_k, d, mask_kind)
    o, lse = mirror.forward(q, k, v, causal=causal, mask=mask, tier="f16")
    assert o.dtype == np.float16
    want_o, want_lse = ref(q, k, v, causal, mask)
    ours = float(np.abs(o.astype(np.float64) - want_o).max())
    plain = float(np.abs(plain_f16(q, k, v, causal, mask).astype(np.float64) - want_o).max())
    assert ours <= 2 * plain + 1e-7, "f16 tier max|Δo| {:.3g} > 2 × plain float16 {:.3g}".format(ours, plain)
    rounded = ref(*(x.astype(np.float16).astype(np.float32) for x in (q, k, v)), causal, mask)
    close(lse, rounded[1], 1e-5 * max(1.0, float(np.abs(rounded[1][np.isfinite(rounded[1])]).max(initial=1))),
          "lse (float32 from float16 inputs)")


def test_int8_quantisation_by_hand():
    q = np.zeros((1, 16, 32), dtype=np.float32)
    q[0, 0, :4] = [1.0, -0.5, 0.25, 127.0]
    k = np.ones((1, 16, 32), dtype=np.float32)
    k[0, 0, 0] = 17.0  # mean of channel 0 is (17 + 15) / 16 = 2, so key 0 holds 15 after smoothing
    launch, plan = int8.prepare(q, k, q, plan=tiling.plan_int8(32, 49152))
    quant = int8.quantize(launch, plan)
    assert quant["q_scale"][0, 0] == np.float32(1.0)
    assert quant["q8"][0, 0, :4].tolist() == [1, 0, 0, 127]  # 0.5 and 0.25 round half to even
    assert quant["k_bar"][0, 0] == np.float32(2.0) and quant["k_bar"][0, 1] == np.float32(1.0)
    assert quant["k_scale"][0, 0] == np.float32(15.0 / 127.0)
    assert quant["k8"][0, 0, 0] == 127 and quant["k8"][0, 1, 0] == -8  # -1 / (15/127) = -8.47
    assert not quant["k8"][0, :, 1:].any()  # channels with no spread quantise to 0


@pytest.mark.parametrize("kind", ["random", "outlier"])
@pytest.mark.parametrize("d", [64, 128])
def test_int8_mirror_accuracy_against_float64(kind, d):
    q, k, v, _ = make(2, (2,), 200, 300, d, None, kind)
    o, lse = int8.forward(q, k, v, plan=tiling.plan_int8(d, 49152))
    want_o, want_lse = ref(q, k, v, False, None)
    stats = int8.error_stats(o, want_o)
    # What int8 costs, measured on these inputs (seed 2): random rel L1 ~0.011, worst row cosine
    # 0.9998; outlier channels (scores up to ~60) rel L1 0.020-0.027, worst row cosine 0.980-0.984.
    rel_l1, cos_min = {"random": (0.02, 0.9995), "outlier": (0.04, 0.97)}[kind]
    assert stats["rel_l1"] < rel_l1 and stats["cos_min"] > cos_min and stats["cos_mean"] > 0.998, stats
    assert float(np.abs(lse - want_lse).max()) < 0.01 * max(1.0, float(np.abs(want_lse).max()))


def test_int8_smoothing_shift_keeps_lse_and_fully_masked_rows():
    q, k, v, mask = make(3, (2,), 40, 50, 64, "padding", "outlier")
    o, lse = int8.forward(q, k, v, mask=mask, plan=tiling.plan_int8(64, 16384))
    want_o, want_lse = ref(q, k, v, False, mask)
    assert np.isneginf(lse[0]).all() and not o[0].any()
    # without the shift q·k̄ added back, lse would be off by far more than the quantisation error
    assert float(np.abs(lse[1] - want_lse[1]).max()) < 0.01 * float(np.abs(want_lse[1]).max())


# --- the shaders on lavapipe ----------------------------------------------------------------------

@pytest.mark.parametrize("tier", ["subgroup", "f16"])
@pytest.mark.parametrize("batch, n_q, n_k, d, causal, mask_kind", CASES)
def test_tier_shader_matches_mirror(wgpu_device, tier, batch, n_q, n_k, d, causal, mask_kind):
    from nlpcore.kernels import flash_wgpu

    feature = {"subgroup": "subgroup", "f16": "shader-f16"}[tier]
    if feature not in flash_wgpu.device().features:
        pytest.skip("this wgpu adapter lacks {} (lavapipe has it)".format(feature))
    q, k, v, mask = make(4, batch, n_q, n_k, d, mask_kind)
    got = flash_wgpu.forward(q, k, v, causal=causal, mask=mask, tier=tier)
    want = mirror.forward(q, k, v, causal=causal, mask=mask, tier=tier)
    scale = float(np.abs(want[0]).max()) or 1.0
    atol = scale * (2.0 ** -10 if tier == "f16" else 1e-5)
    close(got[0], want[0], atol, "o " + tier)
    close(got[1], want[1], 1e-5 * max(1.0, float(np.abs(want[1][np.isfinite(want[1])]).max(initial=1))), "lse " + tier)


@pytest.mark.parametrize("batch, n_q, n_k, d, causal, mask_kind", [c for c in CASES if c[3] % 32 == 0])
def test_int8_shader_with_emulated_matrices_matches_mirror(wgpu_device, batch, n_q, n_k, d, causal, mask_kind):
    from nlpcore.kernels import flash_wgpu

    if "subgroup" not in flash_wgpu.device().features:
        pytest.skip("the int8 shader reads @builtin(subgroup_size): this adapter lacks subgroups")
    q, k, v, mask = make(5, batch, n_q, n_k, d, mask_kind, "outlier")
    plan = tiling.plan_int8(d, 16384)
    spec = int8.dispatch_spec(q, k, v, causal=causal, mask=mask, plan=plan)
    spec["code"] = int8.emulated_source(shaders.text(int8.SHADER))
    spec["features"] = ["subgroups"]
    got = mirror.decode_outputs(spec, flash_wgpu.run_spec(spec, check_loops=False))  # small sizes only
    want = int8.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    close(got[0], want[0], 1e-5 * (float(np.abs(want[0]).max()) or 1.0), "o int8 (emulated)")
    close(got[1], want[1], 1e-5 * max(1.0, float(np.abs(want[1][np.isfinite(want[1])]).max(initial=1))), "lse")


def test_naga_drops_only_the_subgroups_enable():
    from nlpcore.kernels import flash_wgpu

    text = shaders.text(mirror.TIER_SHADERS["subgroup"])
    assert flash_wgpu.NAGA_UNSUPPORTED_ENABLE in text.split("\n")  # Dawn needs it
    out = flash_wgpu.naga_source(text)
    assert flash_wgpu.NAGA_UNSUPPORTED_ENABLE not in out.split("\n")
    assert out.count("\n") == text.count("\n")  # line numbers in naga's errors stay the file's


def test_emulated_source_replaces_only_the_matrix_block():
    text = shaders.text(int8.SHADER)
    out = int8.emulated_source(text)
    code = [line for line in out.split("\n") if not line.lstrip().startswith("//")]
    assert "subgroupMatrix" in text and not any("subgroupMatrix" in l or "subgroup_matrix" in l for l in code)
    assert out.count("fn quantize_k") == 1 and out.count("chunk_update(&o_reg, alpha, p") == 1


@pytest.mark.parametrize("name", sorted(set(mirror.TIER_SHADERS.values())
                                        | {int8.SHADER, int8pv.SHADER, "attention_naive.wgsl"}))
def test_tier_shaders_compose_from_marked_regions(name):
    raw, text = shaders.raw(name), shaders.text(name)
    includes = [line for line in raw.split("\n") if shaders.INCLUDE.match(line)]
    assert not any(shaders.INCLUDE.match(line) for line in text.split("\n")), name
    for line in includes:  # every include's region appears in the composed text as it stands
        other, part = shaders.INCLUDE.match(line).groups()
        assert shaders.region(shaders.text(other), part) in text, (name, other, part)
    if name != "flash_fwd.wgsl":
        assert includes, "{} repeats flash_fwd.wgsl instead of including its regions".format(name)


def test_compose_names_a_missing_region():
    with pytest.raises(ValueError, match="no such part"):
        shaders.compose("// #include flash_fwd.wgsl no such part\n", "test.wgsl")
    with pytest.raises(ValueError, match="'dup'"):
        shaders.region("// --- dup begin\n// --- dup end\n// --- dup begin\n// --- dup end\n", "dup")


# --- the int8 tier's staged variant (flash_fwd_int8_staged.wgsl: S and P·V on subgroup matrices,
# K8 and V8 staged in workgroup memory; a bench variant, not plan_for's choice) ---------------------

STAGED_CASES = sorted({(b, nq, nk, 64, c, m) for b, nq, nk, d, c, m in CASES if d % 32 == 0}
                      | {((2,), 40, 77, 32, True, "padding")}, key=repr)
"""CASES at d = 64 (d = 128 needs more than lavapipe's 16384 bytes of workgroup storage even at
Br = 16, Bc = 32: 20224), and one at d = 32."""


def test_int8_staged_plan_fits_the_h200_and_names_what_fails():
    plan = tiling.plan_int8_staged(64, 49152)
    assert (plan.br, plan.bc, plan.ks, plan.tier) == (64, 64, 1, "int8")
    assert plan.bytes_used == 48128 <= 49152  # S 16384 + P 5120 + PV 16384 + K 5120 + V 5120
    lengths = int8pv.tile_lengths(plan)
    assert 4 * sum(lengths.values()) == plan.bytes_used
    text = int8pv.source(plan)
    for name, value in lengths.items():
        assert "const {}: u32 = {}u;".format(name, value) in text.split("\n")
    wide = tiling.plan_int8_staged(128, 49152)
    assert wide.br * wide.dv <= tiling.INT8_STAGED_TILE and wide.bytes_used <= 49152
    with pytest.raises(ValueError, match="K_WORDS"):
        int8pv.source(plan, text.replace("const K_WORDS", "const K_WORD"))
    with pytest.raises(ValueError, match="multiple of 32"):
        tiling.plan_int8_staged(64, 49152, bc=48)
    with pytest.raises(ValueError, match="no staged int8 plan fits"):
        tiling.plan_int8_staged(64, 16384)
    with pytest.raises(TypeError, match="plan_int8_staged"):
        int8pv.forward(*make(1, (), 8, 8, 64, None)[:3], plan=tiling.plan_int8(64, 49152))


@pytest.mark.parametrize("kind", ["random", "outlier"])
def test_int8_staged_mirror_accuracy_against_float64(kind):
    q, k, v, _ = make(2, (2,), 300, 300, 64, None, kind)
    o, lse = int8pv.forward(q, k, v, plan=tiling.plan_int8_staged(64, 49152))
    want_o, want_lse = ref(q, k, v, False, None)
    stats = int8.error_stats(o, want_o)
    # P and V quantised too (branch t-wgsl3's measure, seed 2): random rel L1 0.017-0.018, worst
    # row cosine 0.9996; outlier channels rel L1 0.023-0.028, worst row cosine 0.975-0.984.
    rel_l1, cos_min = {"random": (0.02, 0.9995), "outlier": (0.04, 0.97)}[kind]
    assert stats["rel_l1"] < rel_l1 and stats["cos_min"] > cos_min and stats["cos_mean"] > 0.998, stats
    assert float(np.abs(lse - want_lse).max()) < 0.01 * max(1.0, float(np.abs(want_lse).max()))


@pytest.mark.parametrize("batch, n_q, n_k, d, causal, mask_kind", STAGED_CASES)
def test_int8_staged_shader_with_emulated_matrices_matches_mirror(wgpu_device, batch, n_q, n_k, d, causal,
                                                                  mask_kind):
    from nlpcore.kernels import flash_wgpu

    if "subgroup" not in flash_wgpu.device().features:
        pytest.skip("the int8 shader reads @builtin(subgroup_size): this adapter lacks subgroups")
    q, k, v, mask = make(5, batch, n_q, n_k, d, mask_kind, "outlier")
    plan = tiling.plan_int8_staged(d, 16384, br=16, bc=32, subgroup_size=16)  # within lavapipe's default
    spec = int8pv.dispatch_spec(q, k, v, causal=causal, mask=mask, plan=plan)
    assert spec["code"] == int8pv.source(plan) and spec["constants"]["SG"] == 16
    assert [p["entry"] for p in spec["passes"]] == ["k_sums", "quantize_k", "quantize_v", "quantize_q", "main"]
    spec["code"] = int8pv.emulated_source(spec["code"])
    spec["features"] = ["subgroups"]
    got = mirror.decode_outputs(spec, flash_wgpu.run_spec(spec, check_loops=False))  # small sizes only
    want = int8pv.forward(q, k, v, causal=causal, mask=mask, plan=plan)
    close(got[0], want[0], 1e-5 * (float(np.abs(want[0]).max()) or 1.0), "o int8 staged (emulated)")
    close(got[1], want[1], 1e-5 * max(1.0, float(np.abs(want[1][np.isfinite(want[1])]).max(initial=1))), "lse")


def test_int8_staged_emulation_reads_the_staged_tiles():
    text = int8pv.source(tiling.plan_int8_staged(64, 49152))
    out = int8pv.emulated_source(text)
    code = [line for line in out.split("\n") if not line.lstrip().startswith("//")]
    assert "subgroupMatrix" in text and not any("subgroupMatrix" in l or "subgroup_matrix" in l for l in code)
    assert out.count("by scalar integer arithmetic") == 2 and out.count("// --- stage K8 and V8 begin ---") == 1
    emulated = out[out.index("S_ij by scalar"):out.index("// --- tile softmax begin")]
    assert "k_tile[" in emulated and "k8[" not in emulated
    emulated = out[out.index("PV_ij by scalar"):]
    assert "v_tile[" in emulated.split("workgroupBarrier")[0] and "v8[" not in emulated.split("workgroupBarrier")[0]
