"""Exercise ``online-softmax``: predict HBM traffic, build the (m, l) monoid, tile attention,
probe Theorem 2 with the IO model.

Sources: Milakov & Gimelshein 2018 (arXiv:1805.02867) for the online normaliser; Dao et al.
2022 (arXiv:2205.14135) Algorithm 0/1, Theorem 2 and Figure 2; Rabe & Staats 2021
(arXiv:2112.05682) for attention computed in chunks with the same rescaling.
"""
from __future__ import annotations

from nlpcore import hardware
from nlpcore.lab.model import Check, Exercise, Folder, LIBRARY_KERNELS, Step
from . import predict_checks as pre
from . import scratch_checks as scr
from . import compose_checks as com
from . import probe_checks as prb

HERE = Folder(__file__)  # this exercise's folder: statements, starters, solutions


# ------------------------------------------------------------------------------------------

def build() -> Exercise:
    pre.measured_flash()
    predict = Step(
        id="predict", kind="Predict", title="Predict the HBM traffic", minutes=15,
        statement=HERE.statement("predict", N=pre.PREDICT_N, d=pre.PREDICT_D, M=pre.PREDICT_M,
                                 sram_kib=hardware.A100_SRAM_BYTES // 1024),
        starter=HERE.starter("predict"), solution=HERE.solution("predict"),
        hints=(
            "Standard: count each matrix once per read and once per write. $S$ is written, read, "
            "then $P$ is written, read: that is already $4N^2$.",
            "Flash: $K$ and $V$ are read once. The outer loop runs over "
            "$T_c = \\lceil N / B_c \\rceil$ key tiles, and each iteration reads all of $Q$ and "
            "reads and writes all of $O$.",
            "$B_c = \\lceil %d / %d \\rceil = %d$, so $T_c = \\lceil %d / %d \\rceil = %d$."
            % (pre.PREDICT_M, 4 * pre.PREDICT_D, pre.PREDICT_BC, pre.PREDICT_N, pre.PREDICT_BC,
               -(-pre.PREDICT_N // pre.PREDICT_BC)),
        ),
        required=("standard", "flash"), record=("standard", "flash"),
        refuse=pre.PREDICT_REFUSES,
        checks=(
            Check("recorded", "prediction recorded", collect=pre.collect_prediction,
                  judge=pre.check_recorded),
            Check("standard", "standard attention within 20% of the count",
                  collect=pre.collect_prediction, judge=pre.check_standard),
            Check("flash", "FlashAttention within 20% of IOCounter",
                  collect=pre.collect_prediction, judge=pre.check_flash),
        ))
    scratch = Step(
        id="scratch", kind="Scratch", title="The online-softmax monoid", minutes=25,
        statement=HERE.statement("scratch"),
        starter=HERE.starter("scratch"), solution=HERE.solution("scratch"),
        hints=(
            "`m = x.max(axis=-1)`, then `l = exp(x - m[..., None]).sum(axis=-1)`.",
            "Where `m` is $-\\infty$ no element has been seen: subtract 0 instead, "
            "`np.where(np.isfinite(m), m, 0)`, so `exp(-inf - 0) = 0`.",
            "`online_softmax`: start from the identity, fold `from_block(x[..., s:s+B])` for "
            "`s in range(0, N, B)`, then return `exp(x - m) / l` (0 where `l == 0`).",
        ),
        required=("from_block", "combine", "online_softmax"),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("from-block", "from_block reduces a block to (m, l)",
                  collect=scr.collect_from_block, judge=scr.judge_from_block),
            Check("identity", "identity law: (-inf, 0) is neutral",
                  collect=scr.collect_identity, judge=scr.judge_identity),
            Check("associative", "associativity (and commutativity)",
                  collect=scr.collect_assoc, judge=scr.judge_assoc),
            Check("pieces", "combining pieces = reducing the whole",
                  collect=scr.collect_pieces, judge=scr.judge_pieces),
            Check("softmax", "online_softmax streams the blocks and matches softmax "
                  "(ragged, overflow, masked)",
                  collect=scr.collect_online_softmax, judge=scr.judge_online_softmax),
        ))
    compose = Step(
        id="compose", kind="Compose", title="Compose the tiled forward", minutes=30,
        statement=HERE.statement("compose", **com.tiled_values()),
        starter=HERE.starter("compose"), solution=HERE.solution("compose"),
        hints=(
            "`m_new = np.maximum(m, s.max(axis=1))`; `alpha = np.exp(m - m_new)` rescales both "
            "`l` and `acc` (broadcast `alpha[:, None]` for `acc`).",
            "Causal: `s = np.where(cols <= rows, s, -np.inf)` with `rows = np.arange(q0, q1)[:, None]`"
            " and `cols = np.arange(k0, k1)[None, :]`.",
            "Causal is top-left aligned: row i sees keys 0..i whatever Nk is, so with Nq > Nk "
            "the rows past Nk see every key. Key tile 0 holds key 0, which every row may "
            "attend, so each row's m is finite after the first tile; tiles that start after "
            "the tile's last row (k0 > q1 - 1) can be skipped.",
            "Scores of several hundred overflow exp: always subtract the running max before "
            "exponentiating, and rescale l and acc by exp(m - m_new) when it grows.",
        ),
        required=("attention",),
        refuse=LIBRARY_KERNELS,
        checks=(
            Check("ragged", "o on ragged sizes, dv ≠ d, blocks > N",
                  collect=com.collect_compose, judge=com.judge_compose("ragged", "o")),
            Check("causal", "o with the causal mask, Nq = Nk, Nq < Nk and Nq > Nk",
                  collect=com.collect_compose, judge=com.judge_compose("causal", "o")),
            Check("large", "large logits (scores in the hundreds)",
                  collect=com.collect_compose, judge=com.judge_compose("large", "o")),
            Check("lse", "lse (log-sum-exp) on every case",
                  collect=com.collect_compose, judge=com.judge_compose("lse", "lse")),
            Check("tiled", "memory stays at tile size (no Nq×Nk array)",
                  collect=com.collect_tiled, judge=com.judge_tiled),
        ))
    probe = Step(
        id="probe", kind="Probe a claim", title="Θ(N²d²/M) and Figure 2, modelled and measured", minutes=25,
        statement=HERE.statement("probe"),
        starter=HERE.starter("probe"), solution=HERE.solution("probe"),
        hints=(
            "`io_model.flash_accesses(n, n, 64, %d)` is the forward count for one head." % pre.A100_M,
            "`np.polyfit(np.log(xs), np.log(ys), 1)[0]` is the slope.",
            "`fig = io_model.figure2(); fig['standard_gb'] / fig['flash_gb']`.",
            "`h200['baseline']['hbm_gb'] / h200['triton']['hbm_gb']` is the measured traffic ratio.",
        ),
        required=("probe",),
        checks=(
            Check("slopes", "exponents in N, M, d match the IO model",
                  collect=prb.collect_probe, judge=prb.check_slopes),
            Check("figure2", "Figure 2 ratios from the IO model (attention alone, as the baseline)",
                  collect=prb.collect_probe, judge=prb.check_figure2),
            Check("h200", "Figure 2 measured on an H200: traffic ratio and speed-up",
                  collect=prb.collect_probe, judge=prb.check_h200),
            Check("measures", "probe measures the model and measurements it is given",
                  collect=prb.collect_probe, judge=prb.check_measures),
        ))
    return Exercise(
        id="online-softmax", title="Online softmax, tiled attention and the IO model",
        tier="browser", minutes=90,
        summary=("Predict the HBM traffic, build the (m, ℓ) monoid from scratch, compose the "
                 "tiled forward from it, then probe Theorem 2 with the IO model."),
        steps=(predict, scratch, compose, probe),
        sources=("Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
                 "arXiv:1805.02867",
                 "Dao et al. 2022, FlashAttention, arXiv:2205.14135 (Algorithms 0–1, Theorem 2, "
                 "Figure 2)",
                 "Rabe & Staats 2021, Self-attention does not need O(n²) memory, "
                 "arXiv:2112.05682"))

