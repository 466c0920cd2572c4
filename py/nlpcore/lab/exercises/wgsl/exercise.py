"""Exercise ``wgsl`` (systems tier: Scratch · Harden): tiled exact attention as a WebGPU compute
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
- ``planted_bugs.py`` -- one-edit patches of the lab's shader, for the tests.

The host sets the overrides ``D``, ``DV`` and ``WG`` per case; ``BR`` and ``BC`` come from the
shader's own ``override`` defaults when it gives them (that is the learner's tile plan) and from
:func:`nlpcore.kernels.tiling.plan` otherwise. Workgroup bytes are counted as the WebGPU spec
counts them against ``maxComputeWorkgroupStorageSize``: each ``var<workgroup>`` that the shader
uses, rounded up to 16 bytes, summed.

Shader texts: the starters and the Scratch solution are in this folder; the Harden solution is
the lab's own ``wgsl/flash_fwd.wgsl`` (read through :mod:`nlpcore.shaders`). All of them ship
inside the wheel, so CPython and Pyodide read the same files.

Sources: Dao et al. 2022 (arXiv:2205.14135) Algorithm 1; Dao 2023 FlashAttention-2
(arXiv:2307.08691) loop order; Milakov & Gimelshein 2018 (arXiv:1805.02867) online softmax;
the WebGPU spec's ``maxComputeWorkgroupStorageSize`` (default 16384 bytes).
"""
from __future__ import annotations

from nlpcore import shaders
from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.lab.framework import Exercise, Folder, Step

from .cases import HARDEN_CASES, SCRATCH_CASES
from .checks import gpu_check, python_checks

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions


SCRATCH_HINTS = (
    "Stage a tile the way Q_i is loaded: `for (var e = t; e < BC * D; e += WG) { k_tile[e] = "
    "k[(b * params.n_k + k0) * D + e]; }` — every invocation takes every WG-th element.",
    "Score element e of S_ij is row r = e / BC, column c = e % BC: "
    "`dot(Q_i[r], K_j[c]) = Σ_x q_tile[r * D + x] * k_tile[c * D + x]`.",
    "Barriers: after staging K_j, V_j (others read them); after S (the row pass reads a whole "
    "row); after the row pass (O reads P~ and alpha); at the top of the loop (the next staging "
    "overwrites tiles others may still read); once after the loop (the final write reads l).",
    "Rescale before you add: `o_tile[e] = alpha_row[r] * o_tile[e] + Σ_kk s_tile[r * BC + kk] * "
    "v_tile[kk * DV + c]`. Without the max subtraction the large-scores case overflows exp.",
)

HARDEN_HINTS = (
    "Keep `rows = min(BR, n_q - q0)` and `cols = min(BC, n_k - k0)`; load 0 past the end and "
    "give scores with `r >= rows || c >= cols` the sentinel MASKED_SCORE.",
    "Set a masked probability to 0 by comparison, `select(exp(s - m_new), 0.0, s == MASKED_SCORE)`"
    ": exp(-1e30 - m) is 0 anyway unless the whole row so far is masked (m = -1e30, s - m = 0).",
    "Causal: the last key tile with any allowed key is ceil((q0 + rows) / BC); it depends only on "
    "workgroup_id and params, so every invocation runs the same number of iterations.",
    "Mask bit index: `b * params.mask_batch_stride + qi * params.mask_row_stride + kj`, word "
    "`bit / 32u`, bit `bit % 32u`.",
    "Rows with l = 0: divide by `select(l, 1.0, l == 0.0)` and write lse = MASKED_SCORE there.",
)


def build() -> Exercise:
    scratch = Step(
        id="scratch", kind="Scratch", title="A tiled attention shader, whole tiles", minutes=60,
        statement=HERE.statement("scratch"), language="wgsl",
        starter=HERE.starter("scratch", "wgsl"),
        solution=HERE.solution("scratch", "wgsl"),
        checks=python_checks(SCRATCH_CASES) + tuple(gpu_check(c) for c in SCRATCH_CASES),
        hints=SCRATCH_HINTS,
    )
    harden = Step(
        id="harden", kind="Harden", title="Ragged, causal, masked, empty rows, many workgroups",
        minutes=60, statement=HERE.statement("harden"), language="wgsl",
        starter=HERE.starter("harden", "wgsl"),
        solution=shaders.text(mirror.FLASH_SHADER),
        checks=python_checks(HARDEN_CASES) + tuple(gpu_check(c) for c in HARDEN_CASES),
        hints=HARDEN_HINTS,
    )
    return Exercise(
        id="wgsl", title="WGSL tiled attention", tier="systems", minutes=120,
        summary=("Write FlashAttention's forward pass as a WebGPU compute shader sized to the "
                 "16384-byte workgroup memory, run it on this page's GPU against the CPU mirror, "
                 "then harden it: ragged tiles, Nq ≠ Nk, causal, masks, empty rows."),
        steps=(scratch, harden),
        sources=(
            "Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithm 1)",
            "Dao 2023, FlashAttention-2, arXiv:2307.08691 (one workgroup per query tile)",
            "Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
            "arXiv:1805.02867",
            "WebGPU spec, limits: maxComputeWorkgroupStorageSize (16384 bytes by default)",
        ),
        extra={"js_modules": ["js/wgsl-exercise.js"], "language": "wgsl"},
    )
