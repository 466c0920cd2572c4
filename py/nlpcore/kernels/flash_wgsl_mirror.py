"""A NumPy float32 re-enactment of ``wgsl/flash_fwd.wgsl``, and the dispatch spec that runs it.

The shader computes exact attention with FlashAttention's tiling (Dao et al. 2022,
arXiv:2205.14135; loop order and work split of FlashAttention-2, Dao 2023, arXiv:2307.08691):
one workgroup per query tile of Br rows, each row owned by KS invocations that keep its slice
of q, its output accumulator and its running max m and sum l in registers, while the key/value
tiles K_j, V_j stream through ``var<workgroup>`` memory (the online softmax of Milakov &
Gimelshein 2018, arXiv:1805.02867). :func:`forward` below does the same steps in the same order
with the same names, in float32, so the GPU and this mirror agree to float32 rounding (with
``tier="f16"``, of ``wgsl/flash_fwd_f16.wgsl``, which differs only in the width of the stored
data; the subgroup tier's ``wgsl/flash_fwd_pair_fma.wgsl`` splits rows and bookkeeps the softmax
differently, and :func:`lean_workgroup` re-enacts it, as it does the benchmark variants of
:mod:`nlpcore.kernels.flash_wgsl_variants`). Where
the shader's invocations each hold a row slice in registers, the mirror holds all of them in
one array indexed [row, lane, ...] and does a whole tile in one NumPy statement; the barriers
sit between those statements in both.

The same module builds the *dispatch spec* (plain data: shader file, override constants,
buffers as little-endian bytes, workgroup counts) that the page's ``gpu.js`` and CPython's
:mod:`nlpcore.kernels.flash_wgpu` both execute, and decodes the output bytes they hand back.
It is pure NumPy, so it runs inside Pyodide too.

Masked scores. WGSL has no infinity literal and lets an implementation assume floats are
finite, so the shader marks a masked score with the finite sentinel :data:`MASKED_SCORE`
(-1e30) instead of -inf, sets its probability to exactly 0 by comparison, and writes
``lse = MASKED_SCORE`` for a row with no allowed key. The mirror does the same, and
:func:`decode_outputs` turns that sentinel back into -inf.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np

from . import tiling
from ._checks import attention_inputs

MASKED_SCORE = np.float32(-1.0e30)
"""The shader's ``const MASKED_SCORE``: a masked score (and the lse of a fully masked row)."""

SCORE_LIMIT = 1.0e29
"""Inputs must keep |scale · q·k| below this, a tenth of |MASKED_SCORE|, so a real score is
never mistaken for (or overflows near) the sentinel."""

FLASH_SHADER = "flash_fwd.wgsl"
NAIVE_SHADER = "attention_naive.wgsl"
TIER_SHADERS = {"portable": FLASH_SHADER, "subgroup": "flash_fwd_pair_fma.wgsl", "f16": "flash_fwd_f16.wgsl",
                "int8": "flash_fwd_int8.wgsl"}
"""The shader of each tier of the tiled kernel (nlpcore.kernels.tiling.TIERS). The portable,
subgroup and f16 tiers share this module's layout (bindings, override constants, dispatch) and
mirror (:func:`forward`); the int8 tier's are in :mod:`nlpcore.kernels.flash_wgsl_int8`."""
SUBGROUP_VARIANT = "pair-fma"
"""The subgroup tier's shader under its name among nlpcore.kernels.flash_wgsl_variants (which the
benchmarks time beside the tiers): two rows an invocation, lanes interleaved, fma() chains. It
became the tier's shader after the H200 ran it 36-37 % faster than the tier's first shader (two
rows an invocation, lanes holding contiguous halves; bench/results/webgpu_h200_probe_fma.json)."""
TIER_FEATURES = {"portable": [], "subgroup": ["subgroups"], "f16": ["shader-f16"],
                 "int8": ["subgroups", "chromium-experimental-subgroup-matrix"]}
"""WebGPU features (standard names) a device needs for each tier."""
SHADERS = (FLASH_SHADER, NAIVE_SHADER) + tuple(TIER_SHADERS[t] for t in ("subgroup", "f16", "int8"))

MAX_BUFFER_BYTES = 134217728
"""WebGPU's default ``maxStorageBufferBindingSize`` (128 MiB)."""

MAX_WORKGROUPS = 65535
"""WebGPU's default ``maxComputeWorkgroupsPerDimension``."""

NAIVE_WORKGROUP_SIZE = 64
"""Invocations per workgroup of ``attention_naive.wgsl`` (its ``override WG``), whatever the
tiled shader's plan."""

PARAMS_BYTES = 32
"""Size of the shaders' ``struct Params``: six u32, one f32 and one u32 of padding."""


class Launch(NamedTuple):
    """Everything one dispatch needs, already in the shader's memory layout.

    q (B, Nq, d), k (B, Nk, d), v (B, Nk, dv): contiguous float32, leading axes flattened to B.
    mask_bits: uint32 words, bit ``b·mask_batch_stride + qi·mask_row_stride + kj`` set when
    query qi of batch entry b may attend key kj (at least one word, even when unused).
    """

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask_bits: np.ndarray
    causal: bool
    has_mask: bool
    mask_batch_stride: int
    mask_row_stride: int
    scale: np.float32
    plan: tiling.TilePlan
    batch: Tuple[int, ...]
    tier: str = "portable"

    def params_bytes(self) -> bytes:
        """``struct Params`` as the shaders read it (little-endian)."""
        n_q = self.q.shape[1]
        n_k = self.k.shape[1]
        words = np.array(
            [n_q, n_k, int(self.causal), int(self.has_mask), self.mask_batch_stride, self.mask_row_stride],
            dtype="<u4",
        )
        return words.tobytes() + np.array([self.scale], dtype="<f4").tobytes() + bytes(4)


def _pack_bits(allowed: np.ndarray) -> np.ndarray:
    """Booleans, flattened in C order, to little-endian u32 words (bit n of the stream is bit
    n % 32 of word n // 32)."""
    packed = np.packbits(allowed.ravel(), bitorder="little")  # uint8, 8 bits per byte
    packed = np.concatenate([packed, np.zeros((-len(packed)) % 4, dtype=np.uint8)])  # whole words
    return packed.view("<u4")


def prepare(q, k, v, *, causal: bool = False, mask=None, scale=None, plan=None, tier: str = "portable") -> Launch:
    """Validate inputs and lay them out as the shader reads them (``tier`` "portable",
    "subgroup" or "f16"; the f16 tier's q, k, v are rounded to float16 here, as the host does).

    Raises ValueError/TypeError naming the argument for bad shapes, dtypes, non-finite values,
    a plan made for other head dims, or buffers over WebGPU's default limits.
    """
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError("causal must be True or False, got {!r}".format(causal))
    x = attention_inputs(q, k, v, causal=False, mask=mask, scale=scale)
    n_q, d = x.q.shape[-2:]
    n_k, dv = x.v.shape[-2:]
    n_batch = int(np.prod(x.batch, dtype=np.int64)) if x.batch else 1

    if tier not in ("portable", "subgroup", "f16"):
        raise ValueError("tier must be 'portable', 'subgroup' or 'f16' here (the int8 tier is "
                         "nlpcore.kernels.flash_wgsl_int8), got {!r}".format(tier))
    width = 2 if tier == "f16" else 4
    if plan is None:
        plan = tiling.plan_for(tier, d, dv=dv)
    elif not isinstance(plan, tiling.TilePlan):
        raise TypeError("plan must be a nlpcore.kernels.tiling.TilePlan or None, got {!r}".format(plan))
    elif (plan.d, plan.dv, plan.dtype_bytes, plan.tier) != (d, dv, width, tier):
        raise ValueError(
            "plan was made for d={}, dv={}, dtype_bytes={}, tier={!r} but the inputs need d={}, dv={}, "
            "dtype_bytes={}, tier={!r}: call {}".format(
                plan.d, plan.dv, plan.dtype_bytes, plan.tier, d, dv, width, tier,
                "tiling.plan({}, 4, dv={})".format(d, dv) if tier == "portable"
                else "tiling.plan_for({!r}, {}, dv={})".format(tier, d, dv)
            )
        )

    arrays = []
    for name, a in (("q", x.q), ("k", x.k), ("v", x.v)):
        with np.errstate(over="ignore"):
            a32 = np.ascontiguousarray(a, dtype=np.float32).reshape((n_batch,) + a.shape[-2:])
            if tier == "f16":  # the data the f16 shader reads, exactly
                a32 = a32.astype(np.float16).astype(np.float32)
        if not np.isfinite(a32).all():
            raise ValueError("{} must be finite in {} (no inf, NaN or |x| > {})".format(
                name, "float16" if tier == "f16" else "float32", "65504" if tier == "f16" else "3.4e38"))
        arrays.append(a32)
    q32, k32, v32 = arrays
    scale32 = np.float32(x.scale)
    bound = abs(float(scale32)) * d * float(np.abs(q32).max()) * float(np.abs(k32).max())
    if bound >= SCORE_LIMIT:
        raise ValueError(
            "scale · q·k may reach {:.3g}; the shader needs |scores| < {:.0e} to keep them apart "
            "from the masked-score sentinel {:.0e}: scale q or k down".format(
                bound, SCORE_LIMIT, float(MASKED_SCORE)
            )
        )

    has_mask = x.allowed is not None
    batch_stride = row_stride = 0
    if has_mask:
        key_padding = np.asarray(mask).shape[-2] == 1
        if key_padding:  # (..., 1, Nk): one row of bits per batch entry, shared by every query
            bits, row_stride, batch_stride = x.allowed[..., 0, :], 0, n_k
        else:  # a full (..., Nq, Nk) mask
            bits, row_stride, batch_stride = x.allowed, n_k, n_q * n_k
        mask_bits = _pack_bits(np.ascontiguousarray(bits).reshape(n_batch, -1))
    else:
        mask_bits = np.zeros(1, dtype="<u4")

    sizes = {"q": q32.nbytes, "k": k32.nbytes, "v": v32.nbytes, "mask": mask_bits.nbytes,
             "o": n_batch * n_q * dv * 4}  # float32 sizes bound the f16 tier's too
    for name, size in sizes.items():
        if size > MAX_BUFFER_BYTES:
            raise ValueError(
                "buffer {} would take {} bytes, over WebGPU's default maxStorageBufferBindingSize "
                "of {} bytes: use fewer rows or batch entries".format(name, size, MAX_BUFFER_BYTES)
            )
    return Launch(q32, k32, v32, mask_bits, bool(causal), has_mask, batch_stride, row_stride,
                  scale32, plan, tuple(x.batch), tier)


def dispatch_spec(q, k, v, *, causal: bool = False, mask=None, scale=None, plan=None,
                  shader: str = FLASH_SHADER, max_buffer_bytes: int = MAX_BUFFER_BYTES,
                  tier: str = "portable") -> dict:
    """The dispatch spec (plain data) that runs ``shader`` on these inputs.

    Args:
        q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv), causal, mask, scale: as in
            :func:`forward`.
        plan: the tile plan (default ``tiling.plan(d, 4, dv=dv)``); the naive shader does not
            tile and ignores it.
        shader: ``"flash_fwd.wgsl"`` or ``"attention_naive.wgsl"`` (the baseline, which also
            gets a scratch (B, Nq, Nk) binding ``s`` for the scores it materialises).
        max_buffer_bytes: the largest storage binding the naive shader's ``s`` may take
            (WebGPU's default 128 MiB; a benchmark on a device created with a larger
            ``maxStorageBufferBindingSize`` may pass that).
        tier: the tiled kernel's tier, ``"portable"`` (``shader`` decides), ``"subgroup"`` or
            ``"f16"`` (their own shaders; the spec's ``features`` names what the device needs).

    Returns:
        ``{"shader", "entry", "constants", "bindings", "workgroups", "meta"}``: bindings are
        ``{"binding", "type", "data" (bytes or None = zero-filled), "size", "name", "output"}``.
        The naive shader's spec also has ``"passes"``: ``[{"entry", "workgroups"}, ...]``,
        dispatches to run in order over the same bindings (scores, softmax, pv); a runner
        given ``passes`` runs those and not the top-level ``entry``/``workgroups`` (which
        repeat the first pass's, for display). The flash spec is a single dispatch.
        outputs ``o`` and ``lse`` are to be read back as bytes and passed to
        :func:`decode_outputs`; ``meta`` carries shapes and the plan for display.
    """
    if shader not in (FLASH_SHADER, NAIVE_SHADER):
        raise ValueError("shader must be one of {}, got {!r}".format([FLASH_SHADER, NAIVE_SHADER], shader))
    if tier != "portable":
        shader = TIER_SHADERS.get(tier, shader)
    launch = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan, tier=tier)
    n_batch, n_q, d = launch.q.shape
    n_k, dv = launch.v.shape[1:]
    plan = launch.plan
    data = "<f2" if tier == "f16" else "<f4"  # element type of q, k, v and o in the shader

    bindings = [
        _binding(0, "uniform", "params", launch.params_bytes()),
        _binding(1, "read-only-storage", "q", _words(launch.q.astype(data).tobytes())),
        _binding(2, "read-only-storage", "k", _words(launch.k.astype(data).tobytes())),
        _binding(3, "read-only-storage", "v", _words(launch.v.astype(data).tobytes())),
        _binding(4, "read-only-storage", "mask_bits", launch.mask_bits.tobytes()),
        _binding(5, "storage", "o", None, size=-(-n_batch * n_q * dv * np.dtype(data).itemsize // 4) * 4,
                 output=True),
        _binding(6, "storage", "lse", None, size=n_batch * n_q * 4, output=True),
    ]
    passes = None
    if shader != NAIVE_SHADER:
        constants = plan.constants()
        workgroups = [-(-n_q // plan.br), 1, n_batch]
        counts = (("x (query tiles)", workgroups[0]), ("z (batch entries)", n_batch))
    else:
        constants = {"D": d, "DV": dv, "WG": NAIVE_WORKGROUP_SIZE}
        s_bytes = n_batch * n_q * n_k * 4
        if s_bytes > max_buffer_bytes:
            raise ValueError(
                "the naive shader's score buffer s would take {} bytes, over the "
                "maxStorageBufferBindingSize of {} bytes".format(s_bytes, max_buffer_bytes)
            )
        bindings.append(_binding(7, "storage", "s", None, size=s_bytes))
        wg = NAIVE_WORKGROUP_SIZE
        passes = [
            {"entry": "scores", "workgroups": [-(-n_k // wg), n_q, n_batch]},
            {"entry": "softmax", "workgroups": [n_q, 1, n_batch]},
            {"entry": "pv", "workgroups": [-(-dv // wg), n_q, n_batch]},
        ]
        workgroups = passes[0]["workgroups"]
        counts = (("x (key blocks)", workgroups[0]), ("y and x (query rows)", n_q),
                  ("z (batch entries)", n_batch))
    for axis, count in counts:
        if count > MAX_WORKGROUPS:
            raise ValueError(
                "the dispatch needs {} workgroups along {}, over WebGPU's default "
                "maxComputeWorkgroupsPerDimension of {}".format(count, axis, MAX_WORKGROUPS)
            )
    spec = {
        "shader": shader,
        "entry": "main" if passes is None else passes[0]["entry"],
        "constants": constants,
        "bindings": bindings,
        "workgroups": workgroups,
        "meta": {
            "batch_shape": list(launch.batch),
            "n_q": n_q,
            "n_k": n_k,
            "d": d,
            "dv": dv,
            "causal": launch.causal,
            "masked_score": float(MASKED_SCORE),
            "plan": plan.as_dict(),
            "tier": tier,
            "o_dtype": "float16" if tier == "f16" else "float32",
        },
        "features": list(TIER_FEATURES[tier]),
    }
    if passes is not None:
        spec["passes"] = passes
    return spec


def _words(data: bytes) -> bytes:
    """``data`` zero-padded to whole 4-byte words (WebGPU buffer sizes; an odd number of float16
    elements would not be one)."""
    return data + bytes(-len(data) % 4)


def _binding(index: int, kind: str, name: str, data: Optional[bytes], *, size: Optional[int] = None,
             output: bool = False) -> dict:
    return {"binding": index, "type": kind, "data": data,
            "size": len(data) if data is not None else size, "name": name, "output": output}


def decode_outputs(spec: dict, outputs: Dict[str, object]) -> Tuple[np.ndarray, np.ndarray]:
    """Turn the bytes read back from ``o`` and ``lse`` into arrays.

    Args:
        spec: the dict :func:`dispatch_spec` returned.
        outputs: ``{"o": bytes, "lse": bytes}`` (any bytes-like object or a float32 array).

    Returns:
        o (..., Nq, dv) float32 (float16 for the f16 tier); lse (..., Nq) float32 with the
        sentinel decoded to -inf.
    """
    meta = spec["meta"]
    shape = tuple(meta["batch_shape"]) + (meta["n_q"],)
    sizes = {b["name"]: b["size"] for b in spec["bindings"]}
    arrays = {}
    for name in ("o", "lse"):
        if name not in outputs:
            raise ValueError("outputs must contain {!r} (got {})".format(name, sorted(outputs)))
        raw = outputs[name]
        if isinstance(raw, np.ndarray):
            flat = raw.astype("<f4", copy=False).ravel()
        else:
            try:
                flat = np.frombuffer(raw, dtype="<f4")
            except (TypeError, ValueError):
                raise TypeError(
                    "outputs[{!r}] must be bytes-like or a float32 array, got {}".format(name, type(raw).__name__)
                ) from None
        if flat.size * 4 != sizes[name]:
            raise ValueError(
                "outputs[{!r}] has {} bytes, expected {}".format(name, flat.size * 4, sizes[name])
            )
        arrays[name] = flat
    o_dtype = np.dtype(meta.get("o_dtype", "float32"))
    if o_dtype == np.float16:  # two elements a word, the last word perhaps half padding
        count = int(np.prod(shape, dtype=np.int64)) * meta["dv"]
        arrays["o"] = arrays["o"].view("<f2")[:count]
    return _decode(arrays["o"], arrays["lse"], shape, meta["dv"], o_dtype)


def _decode(o_buf: np.ndarray, lse_buf: np.ndarray, shape: Tuple[int, ...], dv: int, o_dtype=np.float32):
    o = o_buf.astype(o_dtype).reshape(shape + (dv,))  # (..., Nq, dv)
    lse = lse_buf.astype(np.float32).reshape(shape)  # (..., Nq)
    lse = np.where(lse == MASKED_SCORE, np.float32(-np.inf), lse)
    return o, lse


def forward(q, k, v, *, causal: bool = False, mask=None, scale=None,
            plan: Optional[tiling.TilePlan] = None, tier: str = "portable") -> Tuple[np.ndarray, np.ndarray]:
    """O = softmax(scale · Q Kᵀ, masked) V, computed as ``wgsl/flash_fwd.wgsl`` computes it
    (or, with ``tier``, its subgroup or float16 variant: :data:`TIER_SHADERS`).

    Args:
        q: (..., Nq, d) queries; k: (..., Nk, d) keys; v: (..., Nk, dv) values. Any float dtype;
            everything runs in float32, as the shader does. Leading axes broadcast.
        causal: query i may attend key j only when j <= i (top-left aligned).
        mask: boolean, broadcastable to (..., Nq, Nk), True = may attend; (..., 1, Nk) is a key
            padding mask. Any such mask is supported (the shader reads it as packed bits).
        scale: score scale, default 1/sqrt(d).
        plan: tile plan, default ``tiling.plan_for(tier, d, dv=dv)``.
        tier: "portable" (float32), "subgroup" (float32, flash_fwd_pair_fma.wgsl: two rows an
            invocation, each row's score added from 32-dim interleaved partials in the shuffle
            butterfly's order, o and l rescaled only when a row's max moves) or "f16" (q, k, v
            rounded to float16, float32 arithmetic, o rounded to float16 once, as
            flash_fwd_f16.wgsl stores it).

    Returns:
        o: (..., Nq, dv) float32 (float16 for the f16 tier), 0 in rows with no allowed key.
        lse: (..., Nq) float32 log-sum-exp of the scaled scores, -inf in rows with no allowed key.
    """
    launch = prepare(q, k, v, causal=causal, mask=mask, scale=scale, plan=plan, tier=tier)
    n_batch, n_q, _ = launch.q.shape
    dv = launch.v.shape[2]
    o = np.zeros(n_batch * n_q * dv, dtype=np.float32)  # the shader's output buffers, flat
    lse = np.zeros(n_batch * n_q, dtype=np.float32)
    t_r = -(-n_q // launch.plan.br)
    for b in range(n_batch):  # workgroup_id.z
        for i in range(t_r):  # workgroup_id.x
            if tier == "subgroup":  # flash_fwd_pair_fma.wgsl: two rows, interleaved lanes, butterfly
                lean_workgroup(launch, "interleaved", "butterfly", b, i, o, lse)
            else:
                _workgroup(launch, b, i, o, lse)
    return _decode(o, lse, launch.batch + (n_q,), dv, np.float16 if tier == "f16" else np.float32)


def _workgroup(launch: Launch, b: int, i: int, o: np.ndarray, lse: np.ndarray) -> None:
    """One workgroup of ``flash_fwd.wgsl``'s ``main`` (or flash_fwd_f16.wgsl's): query tile i of
    batch entry b.

    The shader's invocation t owns row r = t // KS as lane t % KS, with 64 head dims of the
    row's q and o (CHUNK4 vec4 slots) in registers; here one array holds what all invocations of
    the workgroup hold, indexed [row, lane, dim]."""
    p = launch.plan
    BR, BC, D, DV, KS = p.br, p.bc, p.d, p.dv, p.ks
    CHUNK = 4 * tiling.CHUNK4  # head dims per lane
    n_q, n_k = launch.q.shape[1], launch.k.shape[1]
    q0 = i * BR  # first query row of the tile
    rows = min(BR, n_q - q0)  # Br, or fewer in the ragged last tile
    r = np.arange(BR)  # each invocation's row within the tile
    row_ok = r < rows  # rows past the end compute but store nothing

    # Each lane's 64 dims of q, pre-multiplied by the scale; o = 0, m = MASKED_SCORE, l = 0.
    q_reg = np.zeros((BR, KS * CHUNK), dtype=np.float32)
    q_reg[:rows, :D] = launch.q[b, q0:q0 + rows]
    q_reg = (launch.scale * q_reg).reshape(BR, KS, CHUNK)  # (BR, KS, 64)
    o_reg = np.zeros((BR, KS, CHUNK), dtype=np.float32)  # (BR, KS, 64)
    m = np.full(BR, MASKED_SCORE, dtype=np.float32)
    l = np.zeros(BR, dtype=np.float32)

    # Key tiles j = 0 .. j_end-1; with causal masking, tiles after the tile's last row are skipped.
    t_c = -(-n_k // BC)
    j_end = t_c
    if launch.causal:
        j_end = min(t_c, -(-(q0 + rows) // BC))
    for j in range(j_end):
        k0 = j * BC
        cols = min(BC, n_k - k0)  # Bc, or fewer in the ragged last tile

        # Stage K_j and V_j, zero-padded to KS·64 dims a key.
        k_tile = np.zeros((BC, KS, CHUNK), dtype=np.float32)
        k_tile.reshape(BC, -1)[:cols, :D] = launch.k[b, k0:k0 + cols]
        v_tile = np.zeros((BC, KS, CHUNK), dtype=np.float32)
        v_tile.reshape(BC, -1)[:cols, :DV] = launch.v[b, k0:k0 + cols]

        # KS > 1: every lane's partial q·k over its 64 dims, for each key of the tile.
        if KS > 1:
            s_part = np.einsum("rsx,csx->rsc", q_reg, k_tile)  # (BR, KS, BC)

        # Four keys g .. g+3 at a time.
        for g in range(0, BC, 4):
            if KS == 1:
                s = np.matmul(q_reg[:, 0], k_tile[g:g + 4, 0].T)  # (BR, 4)
            else:  # the row's KS partial sums, added in lane order
                s = np.zeros((BR, 4), dtype=np.float32)
                for lane in range(KS):
                    s += s_part[:, lane, g:g + 4]
            # Masked and out-of-range scores become the sentinel.
            live = np.zeros((BR, 4), dtype=bool)  # row_ok && g + u < cols && allowed(...)
            n_live = max(0, min(4, cols - g))
            live[:rows, :n_live] = allowed(launch, b, q0 + r[:rows, None], k0 + g + np.arange(n_live)[None, :])
            s = np.where(live, s, MASKED_SCORE)

            # Online softmax, then o = alpha · o + Σ_u p_u · v_{g+u}.
            m_new = np.maximum(m, s.max(axis=1))  # (BR,)
            p = np.where(s == MASKED_SCORE, np.float32(0), np.exp(s - m_new[:, None]))  # (BR, 4)
            alpha = np.exp(m - m_new)  # (BR,)
            l = alpha * l + p.sum(axis=1, dtype=np.float32)
            m = m_new
            o_reg = alpha[:, None, None] * o_reg + np.einsum("ru,usx->rsx", p, v_tile[g:g + 4])

    # o = o / l and lse = m + log l; a row with no allowed key keeps o = 0 and gets
    # lse = MASKED_SCORE (dividing by safe_l = 1 there, as the shader does).
    safe_l = np.where(l == 0, np.float32(1), l)
    out = b * n_q + q0
    o_rows = (o_reg.reshape(BR, KS * CHUNK) / safe_l[:, None])[:, :DV]
    o.reshape(-1, DV)[out:out + rows] = o_rows[row_ok]
    lse[out:out + rows] = np.where(l == 0, MASKED_SCORE, m + np.log(safe_l))[row_ok]


def lane_partials(q_reg: np.ndarray, keys: np.ndarray, lanes: str, ks: int) -> np.ndarray:
    """Each lane's partial q·k: (Br, lanes, u) for q_reg (Br, KS·64) and keys (u, KS·64).

    ``"contiguous"``: lane s of a row holds head dims [64·s, 64·s + 64) (KS lanes).
    ``"interleaved"``: the 2·KS lanes of a row (or row pair) deal its vec4 slots round robin,
    lane s holding slots s, s + 2·KS, s + 4·KS, ... (flash_fwd_pair.wgsl's interleaving)."""
    br = q_reg.shape[0]
    if lanes == "contiguous":
        return np.einsum("rlx,ulx->rlu", q_reg.reshape(br, ks, -1), keys.reshape(len(keys), ks, -1))
    count = 2 * ks
    per = tiling.CHUNK4 * ks // count  # slots of a row each lane holds (8)
    return np.einsum("rilx,uilx->rlu", q_reg.reshape(br, per, count, 4), keys.reshape(len(keys), per, count, 4))


def lean_workgroup(launch: Launch, lanes: str, adds: str, b: int, i: int, o: np.ndarray, lse: np.ndarray) -> None:
    """One workgroup of the ``main`` of a kernel with flash_fwd_lean.wgsl's bookkeeping (the
    subgroup tier's flash_fwd_pair_fma.wgsl and the benchmark variants of
    :mod:`nlpcore.kernels.flash_wgsl_variants`): query tile i of batch entry b, every
    invocation's registers in one array indexed [row, dim] (a row's lanes side by side).
    ``lanes`` ("contiguous" or "interleaved", :func:`lane_partials`) and ``adds`` ("lane order"
    through ``s_part``, or "butterfly" by subgroup shuffles) say how a row's score is split and
    summed."""
    p = launch.plan
    BR, BC, D, DV, KS = p.br, p.bc, p.d, p.dv, p.ks
    width = 4 * tiling.CHUNK4 * KS  # head dims a row keeps in registers, zero-padded past D, DV
    n_q, n_k = launch.q.shape[1], launch.k.shape[1]
    q0 = i * BR  # first query row of the tile
    rows = min(BR, n_q - q0)  # Br, or fewer in the ragged last tile
    r = np.arange(BR)
    row_ok = r < rows  # rows past the end compute (with q = 0) but store nothing

    q_reg = np.zeros((BR, width), dtype=np.float32)
    q_reg[:rows, :D] = launch.q[b, q0:q0 + rows]
    q_reg = launch.scale * q_reg  # (BR, width), pre-scaled
    o_reg = np.zeros((BR, width), dtype=np.float32)
    m = np.full(BR, MASKED_SCORE, dtype=np.float32)
    l = np.zeros(BR, dtype=np.float32)

    t_c = -(-n_k // BC)
    j_end = min(t_c, -(-(q0 + rows) // BC)) if launch.causal else t_c
    for j in range(j_end):
        k0 = j * BC
        cols = min(BC, n_k - k0)
        k_tile = np.zeros((BC, width), dtype=np.float32)  # staged as float32 whatever the data
        k_tile[:cols, :D] = launch.k[b, k0:k0 + cols]
        v_tile = np.zeros((BC, width), dtype=np.float32)
        v_tile[:cols, :DV] = launch.v[b, k0:k0 + cols]
        # full: no score of this tile needs the sentinel (uniform over the workgroup)
        full = not launch.has_mask and cols == BC and (not launch.causal or k0 + BC <= q0 + 1)

        for g in range(0, BC, 4):
            part = lane_partials(q_reg, k_tile[g:g + 4], lanes, KS)  # (BR, lanes, 4)
            if adds == "lane order":  # s_part's partial sums, added in lane order
                s = part[:, 0]
                for lane in range(1, part.shape[1]):
                    s = s + part[:, lane]
            else:  # the butterfly: after the step with mask w, lane x holds part[x] + part[x ^ w]
                count = part.shape[1]
                w = 1
                while w < count:
                    part = part + part[:, np.arange(count) ^ w]
                    w *= 2
                s = part[:, 0]  # every lane holds the same sums (addition commutes)
            if not full:
                live = np.zeros((BR, 4), dtype=bool)
                n_live = max(0, min(4, cols - g))
                live[:rows, :n_live] = allowed(launch, b, q0 + r[:rows, None],
                                                      k0 + g + np.arange(n_live)[None, :])
                s = np.where(live, s, MASKED_SCORE)

            # the lean softmax: rescale l and o only in the rows whose max moved
            m_new = np.maximum(m, s.max(axis=1))  # (BR,)
            moved = m_new > m
            alpha = np.exp(np.where(moved, m - m_new, np.float32(0)))
            l = np.where(moved, alpha * l, l)
            o_reg = np.where(moved[:, None], alpha[:, None] * o_reg, o_reg)
            m = m_new
            pr = np.exp(s - m[:, None])  # (BR, 4)
            if not full:
                pr = np.where(s == MASKED_SCORE, np.float32(0), pr)
            l = l + ((pr[:, 0] + pr[:, 1]) + (pr[:, 2] + pr[:, 3]))
            o_reg = o_reg + np.matmul(pr, v_tile[g:g + 4])  # (BR, width)

    # o = o / l and lse = m + log l; a row with no allowed key: o = 0, lse = MASKED_SCORE.
    safe_l = np.where(l == 0, np.float32(1), l)
    out = b * n_q + q0
    o.reshape(-1, DV)[out:out + rows] = (o_reg / safe_l[:, None])[:, :DV][row_ok]
    lse[out:out + rows] = np.where(l == 0, MASKED_SCORE, m + np.log(safe_l))[row_ok]


def allowed(launch: Launch, b: int, qi: np.ndarray, kj: np.ndarray) -> np.ndarray:
    """The shader's ``allowed(b, qi, kj)``, for arrays of query and key indices (broadcast)."""
    ok = np.ones(np.broadcast(qi, kj).shape, dtype=bool)
    if launch.causal:
        ok &= kj <= qi
    if launch.has_mask:
        bit = b * launch.mask_batch_stride + qi * launch.mask_row_stride + kj
        ok &= ((launch.mask_bits[bit // 32] >> (bit % 32).astype(np.uint32)) & 1) != 0
    return ok
