"""A variant of the int8 tier, ``wgsl/flash_fwd_int8_staged.wgsl``: its dispatch spec and its
NumPy re-enactment, pass for pass. The tier's default shader (``flash_fwd_int8.wgsl``,
:mod:`flash_wgsl_int8`) puts only S = QKᵀ on subgroup matrices; this one puts P·V there too and
stages each key tile's K8 and V8 in workgroup memory for the matrix loads. It is a benchmark
variant (``bench/webgpu_tiers.py``), sized by :func:`tiling.plan_int8_staged`, not
:func:`tiling.plan_for`'s choice.

Steps, in the shader's order and with its rounding points (Q and K quantisation exactly as
:func:`flash_wgsl_int8.quantize`):

- V per block of BC keys and per channel c: s_v[c] = max |v[:, c]| / 127, v8 = round(v / s_v);
- per key tile: S = f32(Q8 K8ᵀ) · ((s_q · scale) · s_k) (the integer product is exact); the
  tile's row max m_tile = top · f from the int32 scores; m_new = max(m, m_tile); alpha =
  exp(m - m_new), beta = exp(m_tile - m_new); p8 = round(127 · exp(S - m_tile)) (0 where
  masked); l = alpha · l + beta · Σ p8; o = alpha · o + beta · (f32(P8 V8) · s_v) (exact
  integer product);
- o / l, lse = m + log l + (q_shift - log 127).

Staging moves int8 words and changes no value, so the mirror has no step for it; the emulated
shader (:func:`emulated_source`, the two matrix blocks replaced by scalar integer products that
read the staged tiles) checks the staging on lavapipe. Where mirror and GPU may part: as
:mod:`flash_wgsl_int8` says, plus ``exp`` a few ULP (one int8 step of p in rare elements).
Pure NumPy; runs inside Pyodide too.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import flash_wgsl_int8 as int8
from . import flash_wgsl_mirror as mirror
from . import tiling

SHADER = "flash_fwd_int8_staged.wgsl"
P_LEVELS = np.float32(127.0)
"""The shader's ``P_LEVELS``: p8 = round(P_LEVELS · p) for p in [0, 1]."""
LOG_P_LEVELS = np.float32(4.8441871)
"""The shader's ``LOG_P_LEVELS`` (log 127 as a float32 literal): l carries the factor 127."""
_NO_SCORE = -2147483647
"""The shader's starting value for a row's integer maximum (no live key)."""

_S_BEGIN, _S_END = "    // --- S_ij on subgroup matrices begin ---", "    // --- S_ij on subgroup matrices end ---"
_PV_BEGIN, _PV_END = "    // --- PV_ij on subgroup matrices begin ---", "    // --- PV_ij on subgroup matrices end ---"
_EMULATED_S = """    // --- S_ij by scalar integer arithmetic (flash_wgsl_int8pv.emulated_source) ---
    for (var e = t; e < BR * BC; e += BR * KS) {
      let rr = e / BC;
      let cc = e % BC;
      var acc = 0i;
      for (var w = 0u; w < D / 4u; w++) {
        let a = q8[((b * q_rows + q0 + rr) * D) / 4u + w];
        let c = k_tile[cc * (k_stride / 4u) + w];
        acc += ((a << 24u) >> 24u) * ((c << 24u) >> 24u) + ((a << 16u) >> 24u) * ((c << 16u) >> 24u)
             + ((a << 8u) >> 24u) * ((c << 8u) >> 24u) + (a >> 24u) * (c >> 24u);
      }
      s_tile[cc * BR + rr] = acc;           // column-major, as the matrices store it
    }"""
_EMULATED_PV = """    // --- PV_ij by scalar integer arithmetic (flash_wgsl_int8pv.emulated_source) ---
    for (var e = t; e < BR * DV; e += BR * KS) {
      let rr = e / DV;
      let cc = e % DV;
      var acc = 0i;
      for (var w = 0u; w < BC / 4u; w++) {
        let a = p_tile[(rr * p_stride) / 4u + w];
        for (var u = 0u; u < 4u; u++) {
          let at = (4u * w + u) * v_stride + cc;   // int8 index of V8[key, cc] in v_tile
          let vv = (v_tile[at / 4u] << (24u - 8u * (at % 4u))) >> 24u;
          acc += ((a << (24u - 8u * u)) >> 24u) * vv;
        }
      }
      pv_tile[cc * BR + rr] = acc;
    }"""


def tile_lengths(plan) -> dict:
    """The shader's five tile-array lengths for ``plan`` (tiling.int8_staged_arrays): S_TILE =
    Br·Bc and PV_TILE = Br·DV int32; P_WORDS, K_WORDS, V_WORDS words of four int8, rows padded by
    tiling.INT8_STAGED_PAD (the shader's "Banks")."""
    pad = tiling.INT8_STAGED_PAD
    return {"S_TILE": plan.br * plan.bc, "P_WORDS": plan.br * (plan.bc + pad) // 4, "PV_TILE": plan.br * plan.dv,
            "K_WORDS": plan.bc * (plan.d + pad) // 4, "V_WORDS": plan.bc * (plan.dv + pad) // 4}


def source(plan, text: Optional[str] = None) -> str:
    """The shader (``text``, default its composed file) with the ``const`` lines of its "tile
    arrays" region set to :func:`tile_lengths` of ``plan`` (Dawn takes subgroup matrices only
    from constant-length workgroup arrays); ValueError when a line is missing."""
    from nlpcore import shaders

    text = shaders.text(SHADER) if text is None else text
    lines = text.split("\n")
    for name, value in tile_lengths(plan).items():
        at = [i for i, line in enumerate(lines) if line.startswith("const {}: u32 = ".format(name))]
        if len(at) != 1:
            raise ValueError("{} must declare 'const {}: u32 = ...;' once, found {}".format(SHADER, name, len(at)))
        lines[at[0]] = "const {}: u32 = {}u;".format(name, value)
    return "\n".join(lines)


def emulated_source(text: str) -> str:
    """``text`` (this shader) with its two subgroup-matrix blocks replaced by scalar int32
    products of the same packed int8 words (read from q8 and the staged k_tile, p_tile and
    v_tile), and the subgroup-matrix enable and diagnostic lines dropped: the same kernel for
    adapters without subgroup matrices (tests only). ValueError when the markers are missing."""
    for begin_mark, end_mark, block in ((_S_BEGIN, _S_END, _EMULATED_S), (_PV_BEGIN, _PV_END, _EMULATED_PV)):
        begin, end = text.find(begin_mark), text.find(end_mark)
        if begin < 0 or end < begin:
            raise ValueError("emulated_source: the shader lacks its subgroup-matrix block markers "
                             "({!r})".format(begin_mark.strip()))
        text = text[:begin] + block + text[end + len(end_mark):]
    drop = ("enable chromium_experimental_subgroup_matrix;",
            "diagnostic(off, chromium.subgroup_matrix_uniformity);")
    return "\n".join(line for line in text.split("\n") if line.strip() not in drop)


def prepare(q, k, v, *, causal=False, mask=None, scale=None, plan=None):
    """Validated inputs and the plan (default ``tiling.plan_int8_staged(d, 49152)``, the H200's
    budget through Dawn); TypeError for a plan that is not the staged variant's."""
    if plan is None:
        d, dv = np.shape(q)[-1], np.shape(v)[-1]
        plan = tiling.plan_int8_staged(d, 49152, dv=dv)
    elif not isinstance(plan, tiling.TilePlan) or dict(plan.arrays).keys() != {
            name for name, _ in tiling.int8_staged_arrays(1, 32, 32, 16)}:
        raise TypeError("plan must come from tiling.plan_int8_staged, got {!r}".format(plan))
    return int8.prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)


def dispatch_spec(q, k, v, *, causal: bool = False, mask=None, scale=None, plan=None) -> dict:
    """The five-pass dispatch spec (passes k_sums, quantize_k, quantize_v, quantize_q, main):
    :func:`flash_wgsl_int8.dispatch_spec`'s with v8 and v_scale bound, the quantize_v pass, the
    shader as ``code`` sized by :func:`source` and its ``SG`` override (the plan's subgroup size)."""
    launch, plan = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    spec = int8.dispatch_spec(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    n_batch, _, _, _, _, t_c = int8._sizes(launch, plan)
    b = mirror._binding
    spec["bindings"] += [b(13, "storage", "v8", None, size=n_batch * t_c * plan.bc * plan.dv),
                         b(14, "storage", "v_scale", None, size=n_batch * t_c * plan.dv * 4)]
    passes = spec["passes"]
    passes.insert(2, {"entry": "quantize_v", "workgroups": [t_c, 1, n_batch]})
    assert [p["entry"] for p in passes] == ["k_sums", "quantize_k", "quantize_v", "quantize_q", "main"]
    spec.update(shader=SHADER, code=source(plan), constants=dict(plan.constants(), SG=plan.subgroup_size))
    return spec


def quantize(launch, plan) -> dict:
    """The four quantisation passes in NumPy: :func:`flash_wgsl_int8.quantize`'s arrays plus
    ``v8`` (B, Tc·BC, DV) int8 (zero past Nk) and ``v_scale`` (B, Tc, DV) float32."""
    quant = int8.quantize(launch, plan)
    n_batch, _, _, _, _, t_c = int8._sizes(launch, plan)
    BC, DV = plan.bc, plan.dv
    v8 = np.zeros((n_batch, t_c * BC, DV), dtype=np.int8)
    v_scale = np.zeros((n_batch, t_c, DV), dtype=np.float32)
    for b in range(n_batch):
        for j in range(t_c):  # quantize_v
            y = launch.v[b, j * BC:(j + 1) * BC]
            v_scale[b, j] = [int8._scale_of(a) for a in np.abs(y).max(axis=0)]
            v8[b, j * BC:j * BC + len(y)] = int8._to_int8(y, v_scale[b, j])
    return dict(quant, v8=v8, v_scale=v_scale)


def forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
            plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """O = softmax(scale · Q Kᵀ, masked) V as ``wgsl/flash_fwd_int8_staged.wgsl`` computes it.

    Args and shapes as :func:`flash_wgsl_mirror.forward`; ``plan`` from
    :func:`tiling.plan_int8_staged` (d a multiple of 32, dv of 16).

    Returns:
        o (..., Nq, dv) float32, 0 in rows with no allowed key; lse (..., Nq) float32, -inf there.
    """
    launch, plan = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    return int8.run_workgroups(launch, plan, quantize(launch, plan), _workgroup)


def _workgroup(launch, plan, quant, b: int, i: int, o: np.ndarray, lse: np.ndarray) -> None:
    """One workgroup of ``main``: query tile i of batch entry b, its BR rows at once (a row's KS
    lanes compute the same row statistics; o is kept as (BR, DV))."""
    BR, BC, DV = plan.br, plan.bc, plan.dv
    n_q, n_k = launch.q.shape[1], launch.k.shape[1]
    q0 = i * BR
    rows = min(BR, n_q - q0)
    r = np.arange(BR)
    dq = np.float32(quant["q_scale"][b, i] * launch.scale)
    o_reg = np.zeros((BR, DV), dtype=np.float32)
    m = np.full(BR, mirror.MASKED_SCORE, dtype=np.float32)
    l = np.zeros(BR, dtype=np.float32)
    t_c = -(-n_k // BC)
    j_end = min(t_c, -(-(q0 + rows) // BC)) if launch.causal else t_c
    q8 = quant["q8"][b, q0:q0 + BR].astype(np.int64)  # (BR, D)
    for j in range(j_end):
        k0 = j * BC
        cols = min(BC, n_k - k0)
        s_tile = (q8 @ quant["k8"][b, k0:k0 + BC].astype(np.int64).T).astype(np.int32)  # (BR, BC), exact
        f = np.float32(dq * quant["k_scale"][b, j])
        live = np.zeros((BR, BC), dtype=bool)
        live[:rows, :cols] = mirror.allowed(launch, b, q0 + r[:rows, None], k0 + np.arange(cols)[None, :])
        top = np.where(live, s_tile, _NO_SCORE).max(axis=1)
        m_tile = np.where(top != _NO_SCORE, top.astype(np.float32) * f, mirror.MASKED_SCORE).astype(np.float32)
        m_new = np.maximum(m, m_tile)
        alpha = np.exp(m - m_new)
        beta = np.exp(m_tile - m_new)
        s = s_tile.astype(np.float32) * f
        with np.errstate(over="ignore"):  # exp of masked scores, discarded by the where
            p = np.where(live, np.exp(s - m_tile[:, None]), np.float32(0))
        p8 = np.minimum(np.round(p * P_LEVELS), P_LEVELS).astype(np.int64)
        l = alpha * l + beta * p8.sum(axis=1).astype(np.float32)
        m = m_new
        pv = (p8 @ quant["v8"][b, k0:k0 + BC].astype(np.int64)).astype(np.float32)  # (BR, DV), exact
        o_reg = alpha[:, None] * o_reg + beta[:, None] * (pv * quant["v_scale"][b, j][None, :])
    safe_l = np.where(l == 0, np.float32(1), l)
    out = b * n_q + q0
    o.reshape(-1, DV)[out:out + rows] = (o_reg / safe_l[:, None])[:rows]
    shift = quant["q_shift"][b, q0:q0 + rows] - LOG_P_LEVELS
    lse[out:out + rows] = np.where(l[:rows] == 0, mirror.MASKED_SCORE, (m[:rows] + np.log(safe_l[:rows])) + shift)
