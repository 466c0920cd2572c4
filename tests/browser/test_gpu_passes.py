"""js/gpu.js runs multi-pass dispatch specs: the naive shader's three passes (scores, softmax,
pv) over one bind group in Chromium (Dawn on SwiftShader) give the reference's output, as a
single-pass flash spec does; a malformed ``passes`` list is refused with its index named.

Tolerance: 1e-5 × max |o| against the float64 reference (as tests/test_flash_wgsl.py).
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import reference

REL = 1e-5

RUN_SPEC = """async (spec) => {
  const gpu = await import(new URL("js/gpu.js", location.href).href);
  const device = await gpu.openGpu();
  const bytes = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  spec.bindings = spec.bindings.map((b) => ({...b, data: b.data === null ? null : bytes(b.data)}));
  try {
    const {outputs} = await gpu.runSpec(device, spec);
    const text = (u8) => { let s = ""; for (const x of u8) s += String.fromCharCode(x); return btoa(s); };
    return {outputs: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, text(v)]))};
  } catch (error) {
    return {error: error.message};
  }
}"""


def _for_page(spec: dict) -> dict:
    """The spec with its buffers as base64 text (page.evaluate passes JSON)."""
    out = dict(spec)
    out["bindings"] = [dict(b, data=None if b["data"] is None else base64.b64encode(b["data"]).decode("ascii"))
                       for b in spec["bindings"]]
    return out


def _inputs():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 13, 16)).astype(np.float32)
    k = rng.standard_normal((2, 29, 16)).astype(np.float32)
    v = rng.standard_normal((2, 29, 8)).astype(np.float32)
    mask = np.ones((2, 1, 29), dtype=bool)
    mask[1, 0, 20:] = False  # key padding in the second batch entry
    return q, k, v, mask


@pytest.mark.parametrize("shader", [mirror.NAIVE_SHADER, mirror.FLASH_SHADER])
def test_run_spec_in_chromium_matches_reference(page, site_url, shader):
    q, k, v, mask = _inputs()
    spec = mirror.dispatch_spec(q, k, v, causal=True, mask=mask, shader=shader)
    assert ("passes" in spec) == (shader == mirror.NAIVE_SHADER)
    page.goto(site_url + "/performance.html")
    got = page.evaluate(RUN_SPEC, _for_page(spec))
    assert "error" not in got, got.get("error")
    o, lse = mirror.decode_outputs(spec, {name: base64.b64decode(text) for name, text in got["outputs"].items()})
    o_ref, lse_ref = reference.forward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                       causal=True, mask=mask)
    bar = REL * float(np.abs(o_ref).max())
    assert float(np.abs(o - o_ref).max()) <= bar, "{}: o off by {:.3g} > {:.3g}".format(
        shader, float(np.abs(o - o_ref).max()), bar)
    assert float(np.abs(lse - lse_ref).max()) <= REL * float(np.abs(lse_ref).max())


def test_malformed_passes_are_refused(page, site_url):
    q, k, v, mask = _inputs()
    spec = mirror.dispatch_spec(q, k, v, shader=mirror.NAIVE_SHADER)
    spec["passes"][1] = {"entry": "softmax", "workgroups": [13, 1]}
    page.goto(site_url + "/performance.html")
    got = page.evaluate(RUN_SPEC, _for_page(spec))
    assert "spec.passes[1]" in got.get("error", ""), got
