"""The benchmark variants of the tiled WGSL kernel (nlpcore.kernels.flash_wgsl_variants: ``lean``,
``half``, ``pair``, ``pair-wg``, ``pair-f16``, ``lean-fma``, ``pair-fma``, ``pair-fma-f16``; timed on the
H200 by bench/webgpu_tiers.py --tier-variants).

- plans: every variant within WebGPU's default 16384 bytes, what each refuses;
- mirrors against float64 (float32 variants at tests/test_wgsl_tiers.py's bar; pair-f16 at
  flash-attention's same-precision bar, at most twice a plain float16 attention's error);
- the shaders on lavapipe through wgpu-py against their mirrors: ragged tiles, causal (with
  plans small enough that some key tiles take the unmasked path and others the masked one),
  masks, fully masked rows, Nq != Nk, batch and heads, d = 40, 64 and 128;
- two planted bugs the comparison must catch (l not rescaled when o is; every tile taken as
  unmasked);
- the H200 record: TIER_LIMITS quotes its numbers as recorded (and the candidates probe's, for the
  subgroup tier's first shader), bench/results/webgpu_h200.json was merged after TIER_LIMITS last
  changed, and the subgroup tier's shader is its variant (same mirror, same speed there);
- Dawn (Tint) through Node, when $DAWN_NODE names npm webgpu 0.6.2's dawn.node (run with
  VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json without a GPU; SwiftShader has
  subgroups of 4 but no shader-f16, so pair-f16 is skipped there); tests/browser/
  test_wgsl_variants_browser.py runs the same in Chromium.

Tolerances (as tests/test_wgsl_tiers.py): mirror vs float64 1e-6 × max(1, |o|); shader vs mirror
1e-5 × max |o| (float32) or one float16 ulp of max |o| (float16 output).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from nlpcore import shaders
from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import flash_wgsl_variants as variants
from nlpcore.kernels import tiling
from test_wgsl_tiers import CASES, close, make, plain_f16, ref

BENCH = Path(__file__).resolve().parents[1] / "bench"
NAMES = sorted(variants.VARIANTS)
F32 = [name for name in NAMES if variants.VARIANTS[name].data == "f32"]
F16 = [name for name in NAMES if variants.VARIANTS[name].data == "f16"]

SMALL = [  # batch, Nq, Nk, d, causal, mask kind, plan sizes: several query tiles, full and masked key tiles
    ((), 150, 150, 64, True, None, {"br": 16, "bc": 8}),
    ((2,), 100, 77, 128, True, None, {"br": 8, "bc": 4}),
    ((), 64, 96, 64, False, None, {"br": 16, "bc": 8}),  # every key tile full: only the unmasked path
    ((2,), 40, 57, 32, True, "full", {"br": 8, "bc": 8}),
    ((), 50, 60, 64, True, None, {"br": 6, "bc": 8}),  # a tile ending at key q0 + 1 (rows 6.., keys 0..7)
]


def all_cases():
    return [c + ({},) for c in CASES] + SMALL


def case_id(case):
    batch, n_q, n_k, d, causal, mask_kind, sizes = case
    return "{}x{}x{}-d{}{}{}{}".format("x".join(map(str, batch)) or "1", n_q, n_k, d, "-causal" if causal else "",
                                       "-" + mask_kind if mask_kind else "",
                                       "-" + "-".join("{}{}".format(k, v) for k, v in sizes.items()) if sizes else "")


def full_tiles(plan, n_q, n_k, causal, masked):
    """(unmasked, masked) key tiles the variants' shaders visit over all query tiles (their ``full``)."""
    counts = [0, 0]
    for q0 in range(0, n_q, plan.br):
        rows = min(plan.br, n_q - q0)
        t_c = -(-n_k // plan.bc)
        for j in range(min(t_c, -(-(q0 + rows) // plan.bc)) if causal else t_c):
            k0 = j * plan.bc
            full = not masked and min(plan.bc, n_k - k0) == plan.bc and (not causal or k0 + plan.bc <= q0 + 1)
            counts[0 if full else 1] += 1
    return tuple(counts)


# --- plans ----------------------------------------------------------------------------------------

def test_variant_plans_fit_webgpu_defaults():
    for name in NAMES:
        for d in (32, 40, 64, 128):
            p = variants.plan(name, d)
            assert p.bytes_used <= tiling.WEBGPU_DEFAULT_STORAGE and p.workgroup_size <= 256, (name, d, p)
            assert p.bc % 4 == 0 and p.bc <= tiling.UNROLL_BLOCK and p.br % variants.VARIANTS[name].rows == 0
    wg = variants.plan("pair-wg", 64)
    assert (wg.br, wg.bc, wg.spart, wg.bytes_used) == (128, 8, 512, 12288)  # tiles 2·2048 + s_part 8192
    assert wg.constants()["SPART"] == 512 and "SPART" not in variants.plan("pair", 64).constants()
    assert variants.plan("lean", 64) == tiling.plan_for("portable", 64)  # the portable tier's plan
    assert variants.plan("pair", 64) == tiling.plan_for("subgroup", 64)


def test_variant_plans_refuse_what_their_shaders_cannot_do():
    with pytest.raises(ValueError, match="variant must be one of"):
        variants.plan("quad", 64)
    with pytest.raises(ValueError, match="br must be even"):
        variants.plan("pair", 64, br=7)
    with pytest.raises(ValueError, match="br must be even"):
        variants.plan("pair-wg", 64, br=9)
    with pytest.raises(ValueError, match="subgroups may have only 2"):
        variants.plan("pair", 128, subgroup_min=2)  # 2·KS = 4 lanes a row pair
    variants.plan("pair-wg", 128, subgroup_min=2)  # adds through workgroup memory: no subgroup needed
    with pytest.raises(ValueError, match="no pair-wg plan fits"):
        variants.plan("pair-wg", 64, bc=28)
    q, k, v, _ = make(0, (), 8, 8, 64, None)
    with pytest.raises(ValueError, match="flash_wgsl_variants.plan"):
        variants.forward(q, k, v, variant="pair", plan=variants.plan("lean", 64))
    with pytest.raises(ValueError, match="flash_wgsl_variants.plan"):
        variants.forward(q, k, v, variant="half", plan=variants.plan("pair", 64))  # half the invocations
    assert variants.plan("half", 64).workgroup_size == 256 and variants.plan("half", 128).workgroup_size == 256
    with pytest.raises(ValueError, match="over WebGPU's default of 256"):
        variants.plan("half", 64, br=256)


def test_the_bench_times_every_variant_at_its_tier():
    sys.path.insert(0, str(BENCH))
    try:
        import webgpu_tiers
    finally:
        sys.path.remove(str(BENCH))
    rows = [row for row in webgpu_tiers.VARIANTS if webgpu_tiers.SHADER_VARIANT in row[3]]
    assert sorted({row[3][webgpu_tiers.SHADER_VARIANT] for row in rows}) == NAMES
    for key, tier, what, sizes, main_only in rows:
        name = sizes[webgpu_tiers.SHADER_VARIANT]
        assert tier == variants.VARIANTS[name].tier and key.startswith(name) and main_only is False, key
        plan = webgpu_tiers.variant_plan(tier, 64, {}, 32, sizes)
        assert plan == variants.plan(name, 64, **{k: v for k, v in sizes.items() if k in ("br", "bc")}), key
        if key == name:
            assert what.startswith(name + ":") and sizes == {webgpu_tiers.SHADER_VARIANT: name}
    half64 = [row[3] for row in rows if row[0] == "half-br64"][0]
    assert webgpu_tiers.variant_plan("subgroup", 64, {}, 32, half64).workgroup_size == 128
    assert [row[0] for row in webgpu_tiers.select_variants("pair,lean")] == ["lean", "pair"]
    assert webgpu_tiers.select_variants() == webgpu_tiers.select_variants("all") == webgpu_tiers.VARIANTS
    with pytest.raises(ValueError, match="unknown quad"):
        webgpu_tiers.select_variants("pair,quad")


def test_probe_variants_fold_into_the_record():
    sys.path.insert(0, str(BENCH))
    try:
        import webgpu_tiers
    finally:
        sys.path.remove(str(BENCH))
    tier_row = {"tier": "portable", "n": 16384, "heads": 16, "d": 64, "causal": False, "kernel": "tiled",
                "valid": True, "tflops": 20.0, "rel_l1": 1e-7}
    record = {"engines": [{"engine": "wgpu-py", "run": "tiers", "rows": [tier_row]}],
              "variants": [{"engine": "dawn", "tier": "int8", "variant": "old, no key", "tflops": 9.0},
                           {"engine": "dawn", "key": "pair", "tier": "subgroup", "tflops": 1.0}]}
    probe = {"variants": [{"engine": "dawn", "key": "pair", "tier": "subgroup", "tflops": 31.0},
                          {"engine": "wgpu-py", "key": "lean", "tier": "portable", "tflops": 22.0}]}
    out = webgpu_tiers.fold_variants(probe, record, "bench/results/probe.json")
    assert [(v.get("key"), v["tflops"], v.get("source")) for v in out["variants"]] == [
        (None, 9.0, None), ("pair", 31.0, "bench/results/probe.json"), ("lean", 22.0, "bench/results/probe.json")]
    portable = [t for t in out["tier_targets"] if t["name"].startswith("portable tier")][0]
    assert portable["measured"] == 20.0 and record["variants"][1]["tflops"] == 1.0  # tier rows, input untouched
    assert "pair" in webgpu_tiers.summary(dict(out, accuracy=[], sdpa=[]))


def _webgpu_tiers():
    sys.path.insert(0, str(BENCH))
    try:
        import webgpu_tiers
    finally:
        sys.path.remove(str(BENCH))
    return webgpu_tiers


def _at_16k(record):
    """(record's tier TFLOP/s keyed (engine, tier, d, causal), variant TFLOP/s keyed (engine, key))
    at N = 16384, 16 heads; valid rows only."""
    tiers = {(e["engine"], r["tier"], r["d"], r["causal"]): r["tflops"] for e in record["engines"]
             if e.get("run", "tiers") == "tiers" for r in e["rows"]
             if r.get("valid") and r.get("n") == 16384 and r.get("heads") == 16}
    keyed = {(v["engine"], v["key"]): v["tflops"] for v in record["variants"] if v.get("valid") and v.get("key")}
    return tiers, keyed


def test_tier_limits_quote_the_record():
    """Every number TIER_LIMITS gives is its record's, rounded as written there (TFLOP/s to 0.1,
    ratios to whole per cent or 0.01x): Dawn / wgpu-py where both ran; d = 64, no mask unless said."""
    webgpu_tiers = _webgpu_tiers()
    main = json.loads((BENCH.parent / webgpu_tiers.RECORD).read_text(encoding="utf-8"))
    first = json.loads((BENCH.parent / webgpu_tiers.CANDIDATES).read_text(encoding="utf-8"))
    tiers, keyed = _at_16k(main)
    old_tiers, old_keyed = _at_16k(first)
    one = "{:.1f}".format
    engines = ("dawn", "wgpu-py")

    def tier(e, name, d=64, causal=False):
        return tiers[e, name, d, causal]

    def gain(a, b):
        return "{:+.0f}".format(100 * (a / b - 1))

    def both(values):
        return "{} / {}".format(*values)

    lean = [gain(keyed[e, "lean"], tier(e, "portable")) for e in engines]
    assert lean[0] == lean[1]  # written once for both engines
    ms = {(e["engine"], r["causal"]): r["ms"] for e in main["engines"] if e.get("run") == "tiers" for r in e["rows"]
          if (r.get("tier"), r.get("n"), r.get("heads"), r.get("d")) == ("portable", 16384, 16, 64)}
    causal = {round(ms[e, True] / ms[e, False], 2) for e in engines}
    f16 = tier("wgpu-py", "f16")
    timing = {(v["engine"], v.get("key")): v["tflops"] for v in main["variants"]}  # timing-only rows too
    int8_main = 100 * (1 - keyed["dawn", "int8"] / timing["dawn", "int8-main"])
    want = {
        "portable": [
            "this tier {} TFLOP/s".format(both(one(tier(e, "portable")) for e in engines)),
            "runs at {} ({} % on both)".format(both(one(keyed[e, "lean"]) for e in engines), lean[0]),
            "(lean-fma) {}, {} % over lean".format(both(one(keyed[e, "lean-fma"]) for e in engines),
                                                 both(gain(keyed[e, "lean-fma"], keyed[e, "lean"]) for e in engines)),
            "slower, {}, and {} with 64 rows".format(both(one(keyed[e, "half"]) for e in engines),
                                                    both(one(keyed[e, "half-br64"]) for e in engines)),
            "8-key tiles) runs at {}, no faster than lean".format(both(one(keyed[e, "pair-wg"]) for e in engines)),
            "Causal runs at {:.2f}x the non-causal time".format(causal.pop())],
        "subgroup": [
            "interleaving the lanes (pair) ran {} % faster than it".format(
                both(gain(old_keyed[e, "pair"], old_tiers[e, "subgroup", 64, False]) for e in engines)),
            "this tier runs at {} TFLOP/s".format(both(one(tier(e, "subgroup")) for e in engines)),
            "{} % over the portable tier".format(both(gain(tier(e, "subgroup"), tier(e, "portable")) for e in engines)),
            "gain {} % over pair".format(both(gain(keyed[e, "pair-fma"], keyed[e, "pair"]) for e in engines)),
            "timed beside it: {})".format(both(one(keyed[e, "pair"]) for e in engines)),
            "At d = 128 it runs at {}, {}x the portable tier".format(
                both(one(tier(e, "subgroup", 128)) for e in engines),
                both("{:.2f}".format(tier(e, "subgroup", 128) / tier(e, "portable", 128)) for e in engines))],
        "f16": [
            "this tier {} TFLOP/s, {:.2f}x the portable tier's {}".format(
                one(f16), f16 / tier("wgpu-py", "portable"), one(tier("wgpu-py", "portable"))),
            "runs at {}, {} % over this tier".format(one(keyed["wgpu-py", "pair-f16"]),
                                                    gain(keyed["wgpu-py", "pair-f16"], f16)),
            "at {}, {} % over this tier and {:+.1f} % over the subgroup tier's float32 shader timed as a variant "
            "({})".format(one(keyed["wgpu-py", "pair-fma-f16"]), gain(keyed["wgpu-py", "pair-fma-f16"], f16),
                          100 * (keyed["wgpu-py", "pair-fma-f16"] / keyed["wgpu-py", "pair-fma"] - 1),
                          one(keyed["wgpu-py", "pair-fma"]))],
        "int8": ["the three quantisation passes cost {:.0f} % of its time".format(int8_main)],
    }
    assert not causal  # one ratio for both engines
    for name, parts in want.items():
        text = webgpu_tiers.TIER_LIMITS[name]
        if name != "int8":
            assert webgpu_tiers.RECORD in text, name
        for part in parts:
            assert part in text, "{}: {!r} not in TIER_LIMITS[{!r}]".format(name, part, name)
    assert first["note"].count("3af7591") == 1 and "pytest was NOT run" in first["note"]


def test_the_record_says_the_current_limits_and_times_every_variant():
    """bench/results/webgpu_h200.json was merged or folded after TIER_LIMITS last changed (its
    tier_targets say TIER_LIMITS' words), and it times the subgroup tier's shader twice, as the
    tier and as its variant, in one run: within 3 % of each other on both engines."""
    webgpu_tiers = _webgpu_tiers()
    main = json.loads((BENCH.parent / webgpu_tiers.RECORD).read_text(encoding="utf-8"))
    assert main["tier_targets"] == webgpu_tiers.tier_targets(main["engines"])
    tiers, keyed = _at_16k(main)
    assert {key for _, key in keyed} >= set(NAMES)
    assert mirror.TIER_SHADERS["subgroup"] == variants.VARIANTS[mirror.SUBGROUP_VARIANT].shader
    for e in ("dawn", "wgpu-py"):
        assert abs(keyed[e, mirror.SUBGROUP_VARIANT] / tiers[e, "subgroup", 64, False] - 1) < 0.03, e


def test_the_subgroup_tier_mirror_is_its_variant():
    """mirror.forward(tier="subgroup") and flash_wgsl_variants.forward(variant=SUBGROUP_VARIANT)
    are one computation (the tier's shader is that variant's): equal to the bit."""
    q, k, v, mask = make(11, (2,), 45, 37, 64, "full")
    for causal in (False, True):
        a = mirror.forward(q, k, v, causal=causal, mask=mask, tier="subgroup")
        b = variants.forward(q, k, v, variant=mirror.SUBGROUP_VARIANT, causal=causal, mask=mask)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("name", NAMES)
def test_variant_shaders_compose_from_marked_regions(name):
    raw, text = shaders.raw(variants.VARIANTS[name].shader), shaders.text(variants.VARIANTS[name].shader)
    includes = [line for line in raw.split("\n") if shaders.INCLUDE.match(line)]
    assert includes and not any(shaders.INCLUDE.match(line) for line in text.split("\n"))
    for line in includes:
        other, part = shaders.INCLUDE.match(line).groups()
        assert shaders.region(shaders.text(other), part) in text, (name, other, part)
    assert ("enable subgroups;" in text.split("\n")) == ("subgroups" in variants.VARIANTS[name].features)
    assert ("enable f16;" in text.split("\n")) == ("shader-f16" in variants.VARIANTS[name].features)


# --- mirrors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", F32)
@pytest.mark.parametrize("case", all_cases(), ids=case_id)
def test_variant_mirror_matches_reference(name, case):
    batch, n_q, n_k, d, causal, mask_kind, sizes = case
    q, k, v, mask = make(0, batch, n_q, n_k, d, mask_kind)
    o, lse = variants.forward(q, k, v, causal=causal, mask=mask, variant=name, plan=variants.plan(name, d, **sizes))
    want = ref(q, k, v, causal, mask)
    close(o, want[0], 1e-6 * max(1.0, float(np.abs(want[0]).max())), "o " + name)
    close(lse, want[1], 2e-6 * max(1.0, float(np.abs(want[1][np.isfinite(want[1])]).max(initial=1))), "lse " + name)


@pytest.mark.parametrize("name", F16)
@pytest.mark.parametrize("case", all_cases(), ids=case_id)
def test_f16_variant_meets_the_same_precision_bar(name, case):
    batch, n_q, n_k, d, causal, mask_kind, sizes = case
    q, k, v, mask = make(1, batch, n_q, n_k, d, mask_kind)
    o, lse = variants.forward(q, k, v, causal=causal, mask=mask, variant=name, plan=variants.plan(name, d, **sizes))
    assert o.dtype == np.float16
    want_o, _ = ref(q, k, v, causal, mask)
    ours = float(np.abs(o.astype(np.float64) - want_o).max())
    plain = float(np.abs(plain_f16(q, k, v, causal, mask).astype(np.float64) - want_o).max())
    assert ours <= 2 * plain + 1e-7, "{} max|Δo| {:.3g} > 2 × plain float16 {:.3g}".format(name, ours, plain)
    rounded = ref(*(x.astype(np.float16).astype(np.float32) for x in (q, k, v)), causal, mask)
    close(lse, rounded[1], 1e-5 * max(1.0, float(np.abs(rounded[1][np.isfinite(rounded[1])]).max(initial=1))),
          "lse (float32 from float16 inputs)")
    tier = mirror.forward(q, k, v, causal=causal, mask=mask, tier="f16")  # the f16 tier computes the same
    close(o, tier[0], 2.0 ** -10 * (float(np.abs(tier[0]).max()) or 1.0), name + " vs the f16 tier's mirror")


def test_the_small_plans_take_both_paths():
    """The SMALL cases visit key tiles of both kinds (the shaders' ``full`` branch), where a
    default plan with Br = 128 rows and one query tile never has an unmasked causal tile."""
    kinds = [full_tiles(variants.plan("pair", c[3], **c[6]), c[1], c[2], c[4], c[5] is not None) for c in SMALL]
    assert kinds[0][0] > 0 and kinds[0][1] > 0 and kinds[1][0] > 0 and kinds[1][1] > 0
    assert kinds[2] == (4 * 12, 0) and kinds[3][0] == 0  # all unmasked; a mask makes every tile masked
    assert full_tiles(variants.plan("pair", 64), 70, 45, True, False)[0] == 0


# --- the shaders on lavapipe ----------------------------------------------------------------------

def run_variant(name, q, k, v, causal, mask, plan, code=None):
    from nlpcore.kernels import flash_wgpu

    missing = [f for f in variants.VARIANTS[name].features
               if flash_wgpu.WGPU_FEATURE_NAMES.get(f, f) not in flash_wgpu.device().features]
    if missing:
        pytest.skip("this wgpu adapter lacks {} (lavapipe has both)".format(", ".join(missing)))
    spec = variants.dispatch_spec(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    if code is not None:
        spec["code"] = code
    return mirror.decode_outputs(spec, flash_wgpu.run_spec(spec))


def shader_bar(name, want_o):
    scale = float(np.abs(want_o).max()) or 1.0
    return scale * (2.0 ** -10 if variants.VARIANTS[name].data == "f16" else 1e-5)


def lse_bar(want_lse):
    return 1e-5 * max(1.0, float(np.abs(want_lse[np.isfinite(want_lse)]).max(initial=1)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", all_cases(), ids=case_id)
def test_variant_shader_matches_mirror(wgpu_device, name, case):
    batch, n_q, n_k, d, causal, mask_kind, sizes = case
    q, k, v, mask = make(4, batch, n_q, n_k, d, mask_kind)
    plan = variants.plan(name, d, **sizes)
    got = run_variant(name, q, k, v, causal, mask, plan)
    want = variants.forward(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    close(got[0], want[0], shader_bar(name, want[0]), "o " + name)
    close(got[1], want[1], lse_bar(want[1]), "lse " + name)


PLANTED = {  # a wrong line in each variant's text, and a case where it must show
    "l not rescaled with o": (lambda text: text.replace("l_a = alpha * l_a;", ""),
                              ((), 37, 53, 64, False, None, {})),
    "every tile unmasked": (lambda text: text.replace("let full = ", "let full = true; let full_as_written = "),
                            ((2,), 70, 45, 64, True, None, {})),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_caught(wgpu_device, bug):
    plant, (batch, n_q, n_k, d, causal, mask_kind, sizes) = PLANTED[bug]
    q, k, v, mask = make(4, batch, n_q, n_k, d, mask_kind)
    plan = variants.plan("pair", d, **sizes)
    text = shaders.text("flash_fwd_pair.wgsl")
    assert plant(text) != text, "the planted line is no longer in the shader"
    got = run_variant("pair", q, k, v, causal, mask, plan, code=plant(text))
    want = variants.forward(q, k, v, causal=causal, mask=mask, variant="pair", plan=plan)
    with pytest.raises(AssertionError):
        close(got[0], want[0], shader_bar("pair", want[0]), "o")


# --- Dawn (Tint) through Node ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def dawn():
    dawn_node = os.environ.get("DAWN_NODE", "")
    node = os.environ.get("NODE", shutil.which("node") or "")
    if not dawn_node or not Path(dawn_node).is_file() or not node:
        pytest.skip("Dawn through Node needs $DAWN_NODE, the dawn.node of npm's webgpu 0.6.2 (bench/README.md, "
                    "'Dawn without a GPU'), and node on PATH or $NODE")
    sys.path.insert(0, str(BENCH))
    try:
        import webgpu_tiers
    finally:
        sys.path.remove(str(BENCH))
    runner = webgpu_tiers.DawnRunner(node, dawn_node)
    yield runner
    runner.close()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", [c + ({},) for c in CASES[:2]] + SMALL[:2] + SMALL[3:], ids=case_id)
def test_variant_on_dawn_matches_mirror(dawn, name, case):
    feature_names = set(dawn.info.get("features", []))
    missing = [f for f in variants.VARIANTS[name].features if f not in feature_names]
    if missing:
        pytest.skip("Dawn's adapter ({}) lacks {}".format(dawn.adapter, ", ".join(missing)))
    batch, n_q, n_k, d, causal, mask_kind, sizes = case
    q, k, v, mask = make(4, batch, n_q, n_k, d, mask_kind)
    plan = variants.plan(name, d, subgroup_min=dawn.info.get("subgroupMinSize"), **sizes)
    spec = variants.dispatch_spec(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    handle = dawn.prepare(spec)
    try:
        dawn.dispatch(spec, handle)
        got = mirror.decode_outputs(spec, dawn.outputs(spec, handle))
    finally:
        dawn.release(handle)
    want = variants.forward(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    close(got[0], want[0], shader_bar(name, want[0]), "o " + name)
    close(got[1], want[1], lse_bar(want[1]), "lse " + name)
