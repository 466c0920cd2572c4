"""Exercise ``wgsl`` (systems · wgsl tier: Scratch · Harden): tiled exact attention as a WebGPU compute
shader, written by the learner, run on the page's GPU and checked against the CPU mirror.

The learner's code is a WGSL shader (``Step.language = "wgsl"``), so Python never runs it; the
page runs it through ``navigator.gpu`` and Python compares what came back with
:mod:`nlpcore.kernels.flash_wgsl_mirror`, the NumPy re-enactment of ``wgsl/flash_fwd.wgsl``.
The modules beside this one hold one idea each:

- ``expressions.py`` -- integer WGSL expressions (override defaults, array sizes);
- ``reader.py`` -- a shader's overrides, consts, bindings and workgroup arrays;
- ``interface.py`` -- the bindings and overrides every learner shader keeps;
- ``sizing.py`` -- WGSL type sizes, workgroup bytes, the refusal and a plan that fits;
- ``cases.py`` -- the inputs and the expected outputs (the mirror under the learner's plan);
- ``checks.py`` -- the Python-only checks and the two-halved GPU checks;
- ``guard.py`` -- every loop of the learner's shader bounded before the page runs it, so that a
  shader that never finishes stops within seconds and names its loop;
- ``patches.py`` -- texts made from the lab's shader by find -> replace edits, checked to apply;
- ``hardening.py`` -- the Harden starter: the lab's shader minus its hardening (TODO H1-H5);
- ``planted_bugs.py`` -- one-edit patches of the lab's shader, for the tests.

The design is the lab's shader's (``wgsl/flash_fwd.wgsl``): one workgroup per query tile, each
query row's q and o in the registers of the invocations that own it (touched at constant
indices only), K/V tiles in workgroup memory, keys four at a time. The host sets the overrides
the shader declares: ``D`` and ``DV`` per case; ``BR``, ``BC`` and ``KS`` from the shader's own
``override`` defaults when it gives them (that is the learner's tile plan) and from the host's
plan (:func:`.cases.host_plan`; KS = ceil(max(d, dv) / 64)) otherwise; ``SPART`` made from those
by :func:`nlpcore.kernels.tiling.spart_elements`. Workgroup bytes are counted as the WebGPU spec
counts them against ``maxComputeWorkgroupStorageSize``: each ``var<workgroup>`` that the entry
point uses, rounded up to 16 bytes, summed.

Shader texts: the Scratch solution (its starter folded in as marked regions) is in this folder;
the Harden solution is the lab's own ``wgsl/flash_fwd.wgsl`` (read through
:mod:`nlpcore.shaders`) and its starter is generated from it (``hardening.py``). All of them
ship inside the wheel, so CPython and Pyodide read the same files.

Sources: Dao et al. 2022 (arXiv:2205.14135) Algorithm 1; Dao 2023 FlashAttention-2
(arXiv:2307.08691) loop order; Milakov & Gimelshein 2018 (arXiv:1805.02867) online softmax;
the WebGPU spec's ``maxComputeWorkgroupStorageSize`` (default 16384 bytes).
"""
from __future__ import annotations

import math

from nlpcore import shaders
from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import tiling
from nlpcore.lab.model import Exercise, Folder, Step

from .cases import HARDEN_CASES, HOST_BC, HOST_BR, SCRATCH_CASES, _host
from .checks import gpu_check, python_checks
from .hardening import harden_starter
from .patches import include_helpers
from .reader import parse_shader
from .sizing import STORAGE_LIMIT, layout

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions


SCRATCH_HINTS = (
    "Stage a tile with every invocation taking every BR-th slot: `for (var e = t; e < BC * "
    "CHUNK4; e += BR) { let c = e / CHUNK4; let col = (e % CHUNK4) * 4u; k_tile[e] = "
    "load_k4((b * params.n_k + k0 + c) * D + col, present(col, D)); ... }`, and v_tile likewise "
    "with DV.",
    "Two barriers per key tile: one before the staging (others may still read the previous "
    "K_j, V_j) and one after it (others read what you stored). Both sit in the j loop, whose "
    "bound depends only on params: uniform control flow, as Tint requires.",
    "Four scores at once: `let s = vec4<f32>(chunk_dot(&q_reg, g * CHUNK4), chunk_dot(&q_reg, "
    "(g + 1u) * CHUNK4), ...)`; then `p = exp(s - vec4<f32>(m_new))`. Without subtracting the "
    "max the large-scores case overflows exp.",
    "Rescale before you add: `chunk_update(&o_reg, alpha, p, g * CHUNK4, CHUNK4)` computes "
    "o = alpha · o + Σ_u p_u · v_{g+u}; at the end `chunk_store_o(&o_reg, (b * params.n_q + qi) "
    "* DV, 0u, l)` divides by l.",
)

HARDEN_HINTS = (
    "H1: `rows = min(BR, params.n_q - q0)`, `cols = min(BC, params.n_k - k0)` and "
    "`t_c = ceil_div(params.n_k, BC)`; the staging already reads zeros for keys c >= cols. Give "
    "a score the sentinel when `!row_ok` or `g + u >= cols`; rows past the end store nothing.",
    "H2: causal is `kj > qi` -> not allowed. The last key tile with any allowed key: "
    "j_end = ceil((q0 + rows) / BC) is the exclusive bound, clamped to Tc (with Nq ≠ Nk, more "
    "queries than keys, it passes the last key tile). It depends only on workgroup_id and "
    "params, so every invocation runs the same iterations and reaches the same barriers.",
    "H3: mask bit index `b * params.mask_batch_stride + qi * params.mask_row_stride + kj`, word "
    "`bit / 32u`, bit `bit % 32u`.",
    "H4: set a masked probability to 0 by comparison, `select(exp(s - vec4<f32>(m_new)), "
    "vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE))`: exp(-1e30 - m) is 0 anyway unless the whole "
    "row so far is masked (m = -1e30, s - m = 0). At the end divide by `safe_l = select(l, 1.0, "
    "l == 0.0)` and write lse = MASKED_SCORE where l = 0.",
    "H5: `present(col, width)` is how many of the four elements from column col exist: "
    "min(width - col, 4) while col < width, else 0.",
)


def _statement_values() -> dict:
    """Numbers the statements quote, computed (never typed): the host's plan and the workgroup
    bytes the Scratch solution needs under it, and the lab's default plan for d = 64."""
    one_tile = SCRATCH_CASES[0]
    scratch_solution = include_helpers(HERE.solution("scratch", "wgsl"))
    lay = layout(parse_shader(scratch_solution), _host(one_tile))
    tiles = dict((n, b) for n, b, _ in lay.arrays)
    lab = tiling.plan(64, 4)
    counts = sorted({c.tiles for c in SCRATCH_CASES})
    return {
        "limit": STORAGE_LIMIT, "invocations": tiling.WEBGPU_DEFAULT_INVOCATIONS,
        "br": HOST_BR, "bc": HOST_BC,
        "tile_bytes": tiles["k_tile"], "bytes_used": lay.bytes_used,
        "whole_tile": HOST_BR * HOST_BC // math.gcd(HOST_BR, HOST_BC),
        "tile_counts": ", ".join(str(n) for n in counts[:-1]) + " and %d" % counts[-1],
        "lab_br": lab.br, "lab_bc": lab.bc, "lab_bytes": lab.bytes_used,
    }


def build() -> Exercise:
    values = _statement_values()
    scratch = Step(
        id="scratch", kind="Scratch", title="A tiled attention shader, whole tiles", minutes=60,
        statement=HERE.statement("scratch", **values), language="wgsl",
        starter=include_helpers(HERE.starter("scratch", "wgsl")),
        solution=include_helpers(HERE.solution("scratch", "wgsl")),
        checks=python_checks(SCRATCH_CASES) + tuple(gpu_check(c) for c in SCRATCH_CASES),
        hints=SCRATCH_HINTS,
    )
    harden = Step(
        id="harden", kind="Harden", title="Ragged, causal, masked, empty rows, many workgroups",
        minutes=60, statement=HERE.statement("harden", **values), language="wgsl",
        starter=harden_starter(),
        solution=shaders.text(mirror.FLASH_SHADER),
        checks=python_checks(HARDEN_CASES) + tuple(gpu_check(c) for c in HARDEN_CASES),
        hints=HARDEN_HINTS,
    )
    return Exercise(
        id="wgsl", title="WGSL tiled attention", tier="systems · wgsl", minutes=120,
        summary=("Write FlashAttention's forward pass as a WebGPU compute shader sized to the "
                 "{}-byte workgroup memory, run it on this page's GPU against the CPU mirror, "
                 "then harden it: ragged tiles, Nq ≠ Nk, causal, masks, empty rows."
                 .format(STORAGE_LIMIT)),
        steps=(scratch, harden),
        sources=(
            "Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithm 1)",
            "Dao 2023, FlashAttention-2, arXiv:2307.08691 (one workgroup per query tile)",
            "Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
            "arXiv:1805.02867",
            "WebGPU spec, limits: maxComputeWorkgroupStorageSize (16384 bytes by default)",
        ),
        extra={"js_modules": ["js/exercises/wgsl.js"], "language": "wgsl"},
    )
