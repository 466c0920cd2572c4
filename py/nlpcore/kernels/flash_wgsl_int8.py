"""The int8 tensor-core tier, ``wgsl/flash_fwd_int8.wgsl``: its dispatch spec and its NumPy
re-enactment, pass for pass.

The shader computes S = QKᵀ on int8 subgroup matrices (tensor cores, through Dawn's
``chromium-experimental-subgroup-matrix``) and the softmax and P·V in float32, after smoothing K
and quantising Q and K per block as SageAttention does (Zhang et al. 2024, arXiv:2410.02367,
section 4; the shader's header says where ours differs). Four passes share one bind group:
``k_sums``, ``quantize_k``, ``quantize_q``, ``main``. :func:`forward` does the same steps in
the same order with the same names and rounding points:

- k_sum[b, j] = Σ_c k[b, k0 + c] over the BC keys of block j, in key order (float32);
  k̄ = (Σ_j k_sum[b, j], in block order) / Nk;
- s_k = max |k - k̄| over block j / 127, k8 = round(clamp((k - k̄) / s_k, ±127)), half to even;
  s_q = max |q| over the BR rows of block i / 127, q8 likewise; q_shift = (Σ_d q·k̄, in dim
  order) · scale;
- per key tile: S = f32(Q8 K8ᵀ) · ((s_q · scale) · s_k) (the integer product is exact), then
  the portable kernel's online softmax and o update, four keys at a time;
- lse = m + log l + q_shift.

Where the mirror and a GPU may part: WGSL lets ``x / s`` be 2.5 ULP off, so a value within an
ULP of a rounding midpoint can quantise one step apart (an error of s/127 in one element, far
below the quantisation error itself); the float32 sums may be contracted into fused
multiply-adds. Tests compare the shader with this mirror at a tolerance that allows for that,
and both with float64 at the int8 tier's own accuracy (:func:`error_stats`).

:func:`emulated_source` is the same shader with the subgroup-matrix block replaced by scalar
integer arithmetic over the same buffers, so every other line of it (quantisation, staging,
softmax, masks, stores) runs on adapters without subgroup matrices (lavapipe, SwiftShader).
Pure NumPy; runs inside Pyodide too.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import flash_wgsl_mirror as mirror
from . import tiling

SHADER = mirror.TIER_SHADERS["int8"]
QWG = 64
"""The shader's ``const QWG``: invocations of its quantisation passes."""
INT8_MAX = 127

_MMA_BEGIN = "    // --- S_ij on subgroup matrices begin ---"
_MMA_END = "    // --- S_ij on subgroup matrices end ---"
_EMULATED_BLOCK = """    // --- S_ij by scalar integer arithmetic (flash_wgsl_int8.emulated_source) ---
    for (var e = t; e < BR * BC; e += BR * KS) {
      let rr = e / BC;
      let cc = e % BC;
      var acc = 0i;
      for (var w = 0u; w < D / 4u; w++) {
        let a = q8[((b * q_rows + q0 + rr) * D) / 4u + w];
        let c = k8[((b * k_rows + k0 + cc) * D) / 4u + w];
        acc += ((a << 24u) >> 24u) * ((c << 24u) >> 24u) + ((a << 16u) >> 24u) * ((c << 16u) >> 24u)
             + ((a << 8u) >> 24u) * ((c << 8u) >> 24u) + (a >> 24u) * (c >> 24u);
      }
      s_tile[e] = acc;
    }"""


def emulated_source(text: str) -> str:
    """``text`` (the int8 shader) with its subgroup-matrix block replaced by scalar int32
    products of the same packed int8 words, and the subgroup-matrix enable and diagnostic
    lines dropped: the same kernel for adapters without subgroup matrices (tests only; it is
    no faster than the portable tier). ValueError when the markers are missing."""
    begin, end = text.find(_MMA_BEGIN), text.find(_MMA_END)
    if begin < 0 or end < begin:
        raise ValueError("emulated_source: the shader lacks its subgroup-matrix block markers")
    text = text[:begin] + _EMULATED_BLOCK + text[end + len(_MMA_END):]
    drop = ("enable chromium_experimental_subgroup_matrix;",
            "diagnostic(off, chromium.subgroup_matrix_uniformity);")
    return "\n".join(line for line in text.split("\n") if line.strip() not in drop)


def _sizes(launch, plan):
    n_batch, n_q, d = launch.q.shape
    n_k = launch.k.shape[1]
    t_r, t_c = -(-n_q // plan.br), -(-n_k // plan.bc)
    return n_batch, n_q, n_k, d, t_r, t_c


def prepare(q, k, v, *, causal=False, mask=None, scale=None, plan=None):
    """Validated inputs (:class:`flash_wgsl_mirror.Launch`) and the int8 plan (default
    ``tiling.plan_int8(d, 49152)``, the H200's budget through Dawn)."""
    launch = mirror.prepare(q, k, v, causal=causal, mask=mask, scale=scale)
    d, dv = launch.q.shape[2], launch.v.shape[2]
    if plan is None:
        plan = tiling.plan_int8(d, 49152, dv=dv)
    elif not isinstance(plan, tiling.TilePlan) or plan.tier != "int8":
        raise TypeError("plan must be an int8 tiling.TilePlan (tiling.plan_int8), got {!r}".format(plan))
    elif (plan.d, plan.dv) != (d, dv):
        raise ValueError("plan was made for d={}, dv={} but the inputs have d={}, dv={}".format(
            plan.d, plan.dv, d, dv))
    return launch._replace(plan=plan, tier="int8"), plan


def dispatch_spec(q, k, v, *, causal: bool = False, mask=None, scale=None, plan=None) -> dict:
    """The four-pass dispatch spec of ``flash_fwd_int8.wgsl`` (same shape as
    :func:`flash_wgsl_mirror.dispatch_spec`'s, with ``passes`` and ``features``); decode its
    outputs with :func:`flash_wgsl_mirror.decode_outputs`."""
    launch, plan = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    n_batch, n_q, n_k, d, t_r, t_c = _sizes(launch, plan)
    dv = plan.dv
    b = mirror._binding
    bindings = [
        b(0, "uniform", "params", launch.params_bytes()),
        b(1, "read-only-storage", "q", launch.q.astype("<f4").tobytes()),
        b(2, "read-only-storage", "k", launch.k.astype("<f4").tobytes()),
        b(3, "read-only-storage", "v", launch.v.astype("<f4").tobytes()),
        b(4, "read-only-storage", "mask_bits", launch.mask_bits.tobytes()),
        b(5, "storage", "o", None, size=n_batch * n_q * dv * 4, output=True),
        b(6, "storage", "lse", None, size=n_batch * n_q * 4, output=True),
        b(7, "storage", "q8", None, size=n_batch * t_r * plan.br * d),
        b(8, "storage", "k8", None, size=n_batch * t_c * plan.bc * d),
        b(9, "storage", "q_scale", None, size=n_batch * t_r * 4),
        b(10, "storage", "k_scale", None, size=n_batch * t_c * 4),
        b(11, "storage", "k_sum", None, size=n_batch * t_c * d * 4),
        b(12, "storage", "q_shift", None, size=n_batch * n_q * 4),
    ]
    for count, axis in ((t_r, "x (query tiles)"), (t_c, "x (key blocks)"), (n_batch, "z (batch entries)")):
        if count > mirror.MAX_WORKGROUPS:
            raise ValueError("the dispatch needs {} workgroups along {}, over WebGPU's default "
                             "maxComputeWorkgroupsPerDimension of {}".format(count, axis, mirror.MAX_WORKGROUPS))
    passes = [
        {"entry": "k_sums", "workgroups": [t_c, 1, n_batch]},
        {"entry": "quantize_k", "workgroups": [t_c, 1, n_batch]},
        {"entry": "quantize_q", "workgroups": [t_r, 1, n_batch]},
        {"entry": "main", "workgroups": [t_r, 1, n_batch]},
    ]
    return {
        "shader": SHADER,
        "entry": "main",
        "constants": plan.constants(),
        "bindings": bindings,
        "workgroups": passes[-1]["workgroups"],
        "passes": passes,
        "features": list(mirror.TIER_FEATURES["int8"]),
        "meta": {"batch_shape": list(launch.batch), "n_q": n_q, "n_k": n_k, "d": d, "dv": dv,
                 "causal": launch.causal, "masked_score": float(mirror.MASKED_SCORE),
                 "plan": plan.as_dict(), "tier": "int8", "o_dtype": "float32"},
    }


def _seq_sum(x: np.ndarray, axis: int) -> np.ndarray:
    """Float32 sum along ``axis`` one element after another (as a shader loop adds), not
    NumPy's pairwise summation."""
    return np.cumsum(x.astype(np.float32), axis=axis, dtype=np.float32).take(-1, axis=axis)


def _to_int8(x: np.ndarray, s: np.float32) -> np.ndarray:
    return np.round(np.clip(x / s, -INT8_MAX, INT8_MAX)).astype(np.int8)


def _scale_of(amax: np.float32) -> np.float32:
    return np.float32(1) if amax == 0 else np.float32(amax / np.float32(INT8_MAX))


def quantize(launch, plan) -> dict:
    """The three quantisation passes in NumPy: ``q8`` (B, Tr·BR, D) and ``k8`` (B, Tc·BC, D)
    int8 (zero past Nq / Nk), ``q_scale`` (B, Tr), ``k_scale`` (B, Tc), ``k_bar`` (B, D) and
    ``q_shift`` (B, Nq) float32."""
    n_batch, n_q, n_k, d, t_r, t_c = _sizes(launch, plan)
    BR, BC = plan.br, plan.bc
    q8 = np.zeros((n_batch, t_r * BR, d), dtype=np.int8)
    k8 = np.zeros((n_batch, t_c * BC, d), dtype=np.int8)
    q_scale = np.zeros((n_batch, t_r), dtype=np.float32)
    k_scale = np.zeros((n_batch, t_c), dtype=np.float32)
    k_bar = np.zeros((n_batch, d), dtype=np.float32)
    q_shift = np.zeros((n_batch, n_q), dtype=np.float32)
    for b in range(n_batch):
        # k_sums: per block, then mean_key: over blocks, divided by Nk.
        k_sum = np.stack([_seq_sum(launch.k[b, j * BC:(j + 1) * BC], axis=0) for j in range(t_c)])  # (Tc, D)
        k_bar[b] = _seq_sum(k_sum, axis=0) / np.float32(n_k)
        for j in range(t_c):  # quantize_k
            x = launch.k[b, j * BC:(j + 1) * BC] - k_bar[b]
            k_scale[b, j] = _scale_of(np.abs(x).max())
            k8[b, j * BC:j * BC + len(x)] = _to_int8(x, k_scale[b, j])
        for i in range(t_r):  # quantize_q
            x = launch.q[b, i * BR:(i + 1) * BR]
            q_scale[b, i] = _scale_of(np.abs(x).max())
            q8[b, i * BR:i * BR + len(x)] = _to_int8(x, q_scale[b, i])
        q_shift[b] = _seq_sum(launch.q[b] * k_bar[b], axis=1) * launch.scale
    return {"q8": q8, "k8": k8, "q_scale": q_scale, "k_scale": k_scale, "k_bar": k_bar, "q_shift": q_shift}


def forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
            plan: Optional[tiling.TilePlan] = None) -> Tuple[np.ndarray, np.ndarray]:
    """O = softmax(scale · Q Kᵀ, masked) V as ``wgsl/flash_fwd_int8.wgsl`` computes it.

    Args and shapes as :func:`flash_wgsl_mirror.forward`; ``plan`` from
    :func:`tiling.plan_int8` (d a multiple of 32).

    Returns:
        o (..., Nq, dv) float32, 0 in rows with no allowed key; lse (..., Nq) float32, -inf there.
    """
    launch, plan = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan)
    return run_workgroups(launch, plan, quantize(launch, plan), _workgroup)


def run_workgroups(launch, plan, quant, workgroup) -> Tuple[np.ndarray, np.ndarray]:
    """o and lse of ``main``: ``workgroup(launch, plan, quant, b, i, o, lse)`` for every batch
    entry b and query tile i, in dispatch order, into flat float32 buffers, then decoded."""
    n_batch, n_q, n_k, d, t_r, t_c = _sizes(launch, plan)
    o = np.zeros(n_batch * n_q * plan.dv, dtype=np.float32)
    lse = np.zeros(n_batch * n_q, dtype=np.float32)
    for b in range(n_batch):
        for i in range(t_r):
            workgroup(launch, plan, quant, b, i, o, lse)
    return mirror._decode(o, lse, launch.batch + (n_q,), plan.dv)


def _workgroup(launch, plan, quant, b: int, i: int, o: np.ndarray, lse: np.ndarray) -> None:
    """One workgroup of ``main``: query tile i of batch entry b, [row, lane, dim] as in
    :func:`flash_wgsl_mirror._workgroup`."""
    BR, BC, DV, KS = plan.br, plan.bc, plan.dv, plan.ks
    CHUNK = 4 * tiling.CHUNK4
    n_q, n_k = launch.q.shape[1], launch.k.shape[1]
    q0 = i * BR
    rows = min(BR, n_q - q0)
    r = np.arange(BR)
    row_ok = r < rows
    dq = np.float32(quant["q_scale"][b, i] * launch.scale)
    o_reg = np.zeros((BR, KS, CHUNK), dtype=np.float32)
    m = np.full(BR, mirror.MASKED_SCORE, dtype=np.float32)
    l = np.zeros(BR, dtype=np.float32)
    t_c = -(-n_k // BC)
    j_end = min(t_c, -(-(q0 + rows) // BC)) if launch.causal else t_c
    q8 = quant["q8"][b, q0:q0 + BR].astype(np.int32)  # (BR, D)
    for j in range(j_end):
        k0 = j * BC
        cols = min(BC, n_k - k0)
        v_tile = np.zeros((BC, KS, CHUNK), dtype=np.float32)
        v_tile.reshape(BC, -1)[:cols, :DV] = launch.v[b, k0:k0 + cols]
        s_tile = q8 @ quant["k8"][b, k0:k0 + BC].astype(np.int32).T  # (BR, BC) int32, exact
        f = np.float32(dq * quant["k_scale"][b, j])
        for g in range(0, BC, 4):
            s = s_tile[:, g:g + 4].astype(np.float32) * f  # (BR, 4)
            live = np.zeros((BR, 4), dtype=bool)
            n_live = max(0, min(4, cols - g))
            live[:rows, :n_live] = mirror.allowed(launch, b, q0 + r[:rows, None],
                                                  k0 + g + np.arange(n_live)[None, :])
            s = np.where(live, s, mirror.MASKED_SCORE)
            m_new = np.maximum(m, s.max(axis=1))
            p = np.where(s == mirror.MASKED_SCORE, np.float32(0), np.exp(s - m_new[:, None]))
            alpha = np.exp(m - m_new)
            l = alpha * l + p.sum(axis=1, dtype=np.float32)
            m = m_new
            o_reg = alpha[:, None, None] * o_reg + np.einsum("ru,usx->rsx", p, v_tile[g:g + 4])
    safe_l = np.where(l == 0, np.float32(1), l)
    out = b * n_q + q0
    o_rows = (o_reg.reshape(BR, KS * CHUNK) / safe_l[:, None])[:, :DV]
    o.reshape(-1, DV)[out:out + rows] = o_rows[row_ok]
    shift = quant["q_shift"][b, q0:q0 + rows]
    lse[out:out + rows] = np.where(l[:rows] == 0, mirror.MASKED_SCORE, m[:rows] + np.log(safe_l[:rows]) + shift)


def error_stats(got, want) -> dict:
    """Accuracy of ``got`` against ``want`` (float64 reference), both (..., N, dv): max |Δ|,
    relative L1 = Σ|Δ| / Σ|want|, and the cosine similarity of each row (min and mean over rows
    whose reference is not all zero)."""
    g = np.asarray(got, dtype=np.float64).reshape(-1, np.shape(got)[-1])
    w = np.asarray(want, dtype=np.float64).reshape(g.shape)
    diff = np.abs(g - w)
    norms = np.linalg.norm(g, axis=1) * np.linalg.norm(w, axis=1)
    live = norms > 0
    cos = (g * w).sum(axis=1)[live] / norms[live]
    return {"max_abs_err": float(diff.max()), "rel_l1": float(diff.sum() / max(np.abs(w).sum(), 1e-300)),
            "cos_min": float(cos.min()) if cos.size else 1.0, "cos_mean": float(cos.mean()) if cos.size else 1.0}
