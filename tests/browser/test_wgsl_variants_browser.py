"""The benchmark variants of the tiled kernel (nlpcore.kernels.flash_wgsl_variants) in headless
Chromium: Dawn's Tint compiles them (stricter than naga: barriers in uniform control flow) and
SwiftShader runs them, with subgroups of 4 (so ``pair`` at d = 128, four lanes a row pair, still
fits) and no shader-f16 (so ``pair-f16`` is refused by the adapter, and skipped here). js/gpu.js
runs the spec, its WGSL inline in ``code``, on a device from js/tiers.js with the variant's
features. Ragged tiles, causal with key tiles of both kinds, a padding mask with fully masked
rows.

Tolerance: 1e-5 × max |o| against the variant's mirror (as tests/test_wgsl_variants.py).
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import flash_wgsl_variants as variants

RUN_VARIANT = """async (spec) => {
  const gpu = await import(new URL("js/gpu.js", location.href).href);
  const tiers = await import(new URL("js/tiers.js", location.href).href);
  const adapter = await navigator.gpu.requestAdapter();
  const missing = spec.features.filter((f) => !adapter.features.has(f));
  if (missing.length) return {missing};
  const device = await tiers.openTierDevice(adapter, spec.features.length ? "subgroup" : "portable", "test");
  const bytes = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  spec.bindings = spec.bindings.map((b) => ({...b, data: b.data === null ? null : bytes(b.data)}));
  try {
    const {outputs} = await gpu.runSpec(device, spec);
    const text = (u8) => { let s = ""; for (const x of u8) s += String.fromCharCode(x); return btoa(s); };
    return {outputs: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, text(v)])),
            subgroupMinSize: (adapter.info || {}).subgroupMinSize};
  } catch (error) {
    return {error: error.message};
  } finally {
    device.device.destroy();
  }
}"""

CASES = [  # batch, Nq, Nk, d, causal, padding, plan sizes
    ((2,), 45, 61, 64, True, True, {"br": 6, "bc": 8}),
    ((), 70, 33, 128, False, False, {}),
]


def _for_page(spec: dict) -> dict:
    out = dict(spec)
    out["bindings"] = [dict(b, data=None if b["data"] is None else base64.b64encode(b["data"]).decode("ascii"))
                       for b in spec["bindings"]]
    return out


@pytest.mark.parametrize("name", sorted(variants.VARIANTS))
@pytest.mark.parametrize("case", CASES, ids=["causal-padding-d64", "ragged-d128"])
def test_variant_in_chromium_matches_its_mirror(page, site_url, name, case):
    batch, n_q, n_k, d, causal, padding, sizes = case
    rng = np.random.default_rng(7)
    q = rng.standard_normal(batch + (n_q, d)).astype(np.float32)
    k = rng.standard_normal(batch + (n_k, d)).astype(np.float32)
    v = rng.standard_normal(batch + (n_k, d)).astype(np.float32)
    mask = None
    if padding:
        mask = np.ones(batch + (1, n_k), dtype=bool)
        mask[..., 0, n_k - 9:] = False
        mask[0, 0, :] = False  # every row of the first batch entry fully masked
    plan = variants.plan(name, d, **sizes)
    spec = variants.dispatch_spec(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    page.goto(site_url + "performance.html")
    got = page.evaluate(RUN_VARIANT, _for_page(spec))
    if got.get("missing"):
        pytest.skip("Chromium's adapter lacks {} (SwiftShader has no shader-f16)".format(", ".join(got["missing"])))
    assert "error" not in got, got.get("error")
    o, lse = mirror.decode_outputs(spec, {key: base64.b64decode(text) for key, text in got["outputs"].items()})
    want_o, want_lse = variants.forward(q, k, v, causal=causal, mask=mask, variant=name, plan=plan)
    assert (np.isinf(lse) == np.isinf(want_lse)).all() and (not padding or np.isinf(lse[0]).all())
    bar = 1e-5 * float(np.abs(want_o).max())
    err = float(np.abs(o.astype(np.float64) - want_o).max())
    assert err <= bar, "{}: o off by {:.3g} > {:.3g}".format(name, err, bar)
    fin = np.isfinite(want_lse)
    assert float(np.abs(lse[fin] - want_lse[fin]).max()) <= 1e-5 * max(1.0, float(np.abs(want_lse[fin]).max()))
