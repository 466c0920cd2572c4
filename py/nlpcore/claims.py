"""Every claim the pages attribute to a source or to our own measurements, as data.

A :class:`Claim` holds the sentence a page shows (``text``: HTML, which may quote numbers as
``{{name}}`` values the build stamps), where it comes from (``source``: an arXiv id, a vendor
document, or ``"ours"``), where in that source (``locator``: section, figure, table, equation,
page; or the record and key of our measurement), the source's own words where it states the
claim (``quote``, short), and a ``status``:

- ``"proved"``: the source proves it (a theorem, a proposition, a derivation it gives);
- ``"demonstrated"``: the source shows it by measurement, on its hardware;
- ``"measured here"``: we measured it; ``record`` names the file under the repository and
  ``key`` the value in it (syntax of :func:`resolve`);
- ``"modelled here"``: our model computes it; ``function`` names it (``module:attribute``);
- ``"ours"``: a statement of this lab's own, in no source; its argument is on the page.

The five statuses are DESIGN.md's contract. Some sources neither prove nor measure what they
say (a remark, a figure cited from others, a ratio of datasheet numbers, a design choice, an
attribution): such a claim is ``"demonstrated"`` with ``basis="stated"``, and the pages show it
as "stated in the source", not as a demonstration.

build.py stamps each claim into the pages as ``{{claim.<id>}}`` (the sentence and its citation,
in a ``<span data-claim>``) and the ledger on the module page as ``{{claims.ledger}}`` (every
claim with ``ledger=True``). Nothing here imports NumPy or reads files, so it loads on
Python 3.8 in Pyodide as on CPython.
"""
from __future__ import annotations

import html
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

STATUSES = ("proved", "demonstrated", "measured here", "modelled here", "ours")
BASES = (None, "stated")  # "stated": the source says it without proving or measuring it

SOURCES = {  # source -> (how a page cites it, the anchor of its entry in the module page's Sources)
    "arXiv:2205.14135": ("Dao et al. 2022", "src-dao2022"),
    "arXiv:2307.08691": ("Dao 2023", "src-dao2023"),
    "arXiv:1805.02867": ("Milakov & Gimelshein 2018", "src-milakov2018"),
    "arXiv:2112.05682": ("Rabe & Staats 2021", "src-rabe2021"),
    "arXiv:2310.01889": ("Liu, Zaharia & Abbeel 2023", "src-ring"),
    "arXiv:2407.08608": ("Shah et al. 2024", "src-shah2024"),
    "arXiv:2410.02367": ("Zhang et al. 2024", "src-zhang2024"),
    "NVIDIA datasheets": ("NVIDIA datasheets", "src-nvidia"),
    "ours": ("this lab", None),
}


class Claim(NamedTuple):
    """One claim; see the module docstring for the fields."""
    id: str
    text: str
    source: str
    locator: str
    status: str
    quote: Optional[str] = None
    record: Optional[str] = None      # "measured here" (and optionally "modelled here"): repository path
    key: Optional[str] = None         # the values in ``record``: keys of :func:`resolve`, "; " between
    function: Optional[str] = None    # "modelled here": "nlpcore.module:attribute"
    probe: Optional[str] = None       # HTML: where to probe it in this lab (the ledger's third column)
    ledger: bool = False              # listed in the module page's claims ledger
    basis: Optional[str] = None       # "stated": the source says it, neither proves nor measures it


def _fig2_keys(field: str) -> str:
    """The baseline's and our Triton kernel's ``field`` at the Figure 2 setting of io_h200.json."""
    return "; ".join("rows[setting=figure2,impl=%s].%s" % (impl, field) for impl in ("baseline", "triton"))


# Our FlashAttention-3 forward on the H200, read through these keys by nlpcore.web.fa3_numbers, which
# computes the two measured sentences of Episode 5 from them: the ablation, and the default launch against
# cuDNN on the 12 benchmark shapes. A re-run that moves the standing to another record (e.g. the fa3 column
# of triton_h200.json: list "results", variant "fa3" either way) changes these three names only.
FA3_ABLATION = "bench/results/fa3_h200.json"
FA3_ABLATION_ROWS = ((128, 16384, False), (128, 16384, True), (128, 4096, False), (64, 16384, False), (64, 4096, True))
FA3_ABLATION_OFF = ("no_warp_spec", "no_overlap", "no_pingpong")  # the record's variants, one technique off
FA3_HANDOVER = ("named", "mbarrier")  # the record's variants: the hand-overs on named barriers, on mbarriers
FA3_STANDING = "bench/results/triton_h200.json"
FA3_STANDING_LIST = "results"
FA3_DEFAULT_LAUNCH = {False: "fa3", True: "fa3"}  # causal -> the default launch's entry in that record (flash_fa3.CHOICES per shape)
FA3_STANDING_ROWS = tuple((d, n, c) for d in (64, 128) for n in (1024, 4096, 16384) for c in (False, True))


def fa3_key(d: int, n: int, causal: bool, variant: str, rows: str = "rows") -> str:
    """The forward TFLOP/s of ``variant`` at one shape of an FA3 record (its list of shapes ``rows``)."""
    return "%s[d=%d,n=%d,causal=%s].fwd.%s.tflops" % (rows, d, n, causal, variant)


_FA3_ABLATION_KEYS = "; ".join(fa3_key(*s, v) for s in FA3_ABLATION_ROWS
                               for v in ("full",) + FA3_ABLATION_OFF + FA3_HANDOVER)
_FA3_STANDING_KEYS = "; ".join(fa3_key(*s, v, FA3_STANDING_LIST) for s in FA3_STANDING_ROWS
                               for v in (FA3_DEFAULT_LAUNCH[s[2]], "cudnn"))

# The WGSL tiers on the H200 (bench/results/webgpu_h200.json): the int8 tier's accuracy against float64
# (random and outlier-channel inputs, d = 64 and 128, through Dawn) and the speeds at N = 16384, 16 heads,
# d = 64, no mask. lessons.int8_tier_numbers reads the page's numbers through these very keys. The
# tiers' own accuracy rows have no ``variant`` field (``variant=None`` selects them: resolve compares
# str(item.get(field))); the int8 tier's staged variant adds rows with ``variant: "staged"``.
WEBGPU_H200 = "bench/results/webgpu_h200.json"
INT8_ACCURACY_KEYS = tuple(
    "accuracy[engine=dawn,tier=%s,d=%d,inputs=%s,variant=None].%s" % (tier, d, inputs, field)
    for tier, inputs, fields in (("int8", "random", ("rel_l1", "cos_min")), ("int8", "outlier", ("rel_l1", "cos_min")),
                                 ("portable", "outlier", ("rel_l1",)))
    for d in (64, 128) for field in fields)
TIER_SPEED_KEYS = {
    "portable": "engines[engine=dawn].rows[tier=portable,n=16384,heads=16,d=64,causal=False].tflops",
    "int8": "engines[engine=dawn].rows[tier=int8,n=16384,heads=16,d=64,causal=False].tflops",
    "sdpa": "sdpa[n=16384,heads=16,d=64,causal=False,tier=tensor cores (bfloat16)].tflops",
    "int8_peak": "tier_peaks_tflops.int8",
}

CLAIMS: Tuple[Claim, ...] = (
    # ---- FlashAttention (Dao et al. 2022): what it proves -----------------------------------
    Claim("fa-exact",
          'FlashAttention returns exactly <span class="tex">\\operatorname{softmax}(QK^\\top)V</span>, '
          "with <span class=\"tex\">O(N^2d)</span> FLOPs",
          "arXiv:2205.14135", "Sec. 3.1, Theorem 1; proof in Appendix C", "proved",
          quote="Algorithm 1 returns O = softmax(QK^T)V with O(N^2 d) FLOPs",
          probe="Episode 1's cell; the <a href=\"lab.html\">guided lab</a> compares NumPy, the shader's CPU "
                "mirror and your GPU within a stated tolerance (exact up to rounding: the rescaling changes "
                "how each term is rounded).",
          ledger=True),
    Claim("fa-memory",
          'It needs only <span class="tex">O(N)</span> memory beyond inputs and output',
          "arXiv:2205.14135", "Sec. 3.1, Theorem 1", "proved",
          quote="requires O(N) additional memory beyond inputs and output",
          probe='<a href="visualizer.html">Visualizer</a>: SRAM holds one block per tensor at a time, and the '
                'only extra arrays in HBM are the row statistics, of length <span class="tex">N</span>: '
                '<span class="tex">\\ell</span> and <span class="tex">m</span> in the paper (Algorithm 2), '
                "lse in FlashAttention-2 and our kernels.",
          ledger=True),
    Claim("fa-io",
          'FlashAttention makes <span class="tex">\\Theta(N^2d^2M^{-1})</span> HBM accesses, against '
          '<span class="tex">\\Theta(Nd+N^2)</span> for standard attention, for '
          '<span class="tex">d \\le M \\le Nd</span>',
          "arXiv:2205.14135", "Sec. 3.2, Theorem 2; proof in Appendix C", "proved",
          quote="Standard attention (Algorithm 0) requires Θ(Nd + N²) HBM accesses, while FlashAttention "
                "(Algorithm 1) requires Θ(N²d²M⁻¹) HBM accesses.",
          probe='<a href="visualizer.html">Visualizer</a>: the counted reads and writes end equal to '
                "<code>io_model</code>'s closed form; Episode 3's cell; the "
                '<a href="performance.html#io">IO-claim probe</a>. On a real GPU '
                '(<a href="performance.html#iohw">H200 hardware counters</a>) the fused kernel\'s bytes follow '
                'the model only when <span class="tex">M</span> is taken as the L2 cache: the re-reads the '
                "theorem counts mostly hit the L2, not HBM.",
          ledger=True),
    Claim("fa-lower-bound",
          'No exact attention algorithm can make <span class="tex">o(N^2d^2M^{-1})</span> HBM accesses '
          'for all <span class="tex">M\\in[d, Nd]</span>',
          "arXiv:2205.14135", "Sec. 3.2, Proposition 3; proof in Appendix C", "proved",
          quote="There does not exist an algorithm to compute exact attention with o(N²d²M⁻¹) HBM accesses "
                "for all M in the range [d, Nd].",
          probe="Not measured here (a lower bound cannot be measured); read the proof in the paper's Appendix C.",
          ledger=True),
    Claim("fa-typical-m",
          'For typical <span class="tex">d</span> (64–128) and <span class="tex">M</span> “around 100KB”, '
          '<span class="tex">d^2</span> is many times smaller than <span class="tex">M</span>, so FlashAttention '
          "makes many times fewer HBM accesses",
          "arXiv:2205.14135", "Sec. 3.2, a remark after Theorem 2", "demonstrated", basis="stated",
          quote="For typical values of d (64-128) and M (around 100KB), d² is many times smaller than M"),
    # ---- FlashAttention (Dao et al. 2022): what it measures ----------------------------------
    Claim("fa-a100-memory",
          "An A100 has 40–80&nbsp;GB of HBM at 1.5–2.0&nbsp;TB/s and 192&nbsp;KB of on-chip SRAM in each of "
          "its 108 streaming multiprocessors, at roughly 19&nbsp;TB/s",
          "arXiv:2205.14135", "Sec. 2.1 and Fig. 1 left, citing the microbenchmarks of Jia & Van Sandt 2021 "
          "and Jia et al. 2018", "demonstrated", basis="stated",
          quote="the A100 GPU has 40-80GB of high bandwidth memory (HBM) with bandwidth 1.5-2.0TB/s and 192KB "
                "of on-chip SRAM per each of 108 streaming multiprocessors with bandwidth estimated around 19TB/s"),
    Claim("fa-figure2",
          "Recomputing <span class=\"tex\">P</span> in the backward pass costs FLOPs but saves HBM traffic, and "
          "forward + backward run faster: GPT-2 medium attention on an A100, {{measured.paper_standard_gb}} vs "
          "{{measured.paper_flash_gb}}&nbsp;GB of HBM reads and writes, {{page.fig2_standard_ms}} vs "
          "{{page.fig2_flash_ms}}&nbsp;ms ({{measured.paper_speedup}}×)",
          "arXiv:2205.14135", "Sec. 3.2, Fig. 2 left and its table", "demonstrated",
          quote="HBM access is the primary factor affecting runtime.",
          probe="Modelled: <code>io_model.figure2()</code>, under stated assumptions (below). Measured on an "
                "{{measured.h200_gpu}} with hardware counters, same setting: {{measured.h200_baseline_gb}}&nbsp;GB "
                "against {{measured.h200_triton_gb}}&nbsp;GB ({{measured.h200_traffic_ratio}}× less) — "
                '<a href="performance.html#iohw">performance page, section 6</a>. Episode 2\'s cell prints both; '
                'the <a href="exercise.html?id=online-softmax">online-softmax exercise</a>\'s “Probe a claim” step '
                'tests the claim against that record; the <a href="exercise.html?id=backward">backward exercise</a>.',
          ledger=True),
    Claim("fa-figure1",
          "Attention runs up to 7.6× faster than PyTorch's implementation on GPT-2 (the figure states no GPU, "
          "sequence length or batch), and end-to-end training speeds up (15% on BERT-large "
          "against the MLPerf 1.1 record, 3× on GPT-2 at sequence length 1K)",
          "arXiv:2205.14135", "Fig. 1 right; abstract and Sec. 4.1", "demonstrated",
          quote="resulting in an 7.6× speedup on the attention computation",
          probe="Figure 1's setting is not stated, so it is not the target here; the paper's own ratio at "
                "Figure 2's stated setting is {{measured.paper_speedup}}×. Our measurement there on an "
                "{{measured.h200_gpu}}: {{claim.h200-speedup}}. More fused-vs-unfused measurements on the "
                '<a href="performance.html">performance page</a>; the <a href="lab.html">lab</a> has you time it '
                "on your own GPU. The <a href=\"performance.html#triton\">Triton port against PyTorch SDPA</a> "
                "compares fused kernels only: kernel quality, not the IO claim. Raw results: "
                '<span id="bench-links" data-testid="bench-links">listed when the page has loaded</span>. '
                "End-to-end training is not reproduced here.",
          ledger=True),
    # ---- our model and our measurements of Figure 2 ------------------------------------------
    Claim("model-figure2",
          "A model under stated assumptions, not the paper's count: with the causal mask added as a bias and "
          "dropout with a 1-byte keep-mask (the paper's Figure 1 shows mask and dropout kernels in PyTorch's GPT-2 "
          "attention, but Figure 2 says neither which passes its baseline ran nor how; HuggingFace's GPT-2 also "
          "scales the scores, one more N×N pass, and masks with <code>torch.where</code>), and "
          '<span class="tex">M</span> = 192&nbsp;KB, our count gives {{measured.model_baseline_gb}}&nbsp;GB for '
          "the baseline and {{measured.model_baseline_flash_gb}}&nbsp;GB for FlashAttention visiting every tile "
          "({{page.fig2_flash_skip_gb}}&nbsp;GB for a kernel that skips the tiles above the diagonal). That "
          "it lands within 10% of the paper's numbers is a fit of our assumptions, not evidence about what the "
          "paper ran",
          "ours", "io_model.figure2(); bench/results/io_claim.json figure2", "modelled here",
          function="nlpcore.kernels.io_model:figure2",
          record="bench/results/io_claim.json", key="figure2.baseline_standard_gb"),
    Claim("h200-traffic",
          "the GPU's own counters read {{measured.h200_baseline_gb}}&nbsp;GB for the baseline in plain PyTorch "
          "ops and {{measured.h200_triton_gb}}&nbsp;GB for this lab's fused Triton kernel",
          "ours", "bench/results/io_h200.json: " + _fig2_keys("hbm_bytes"), "measured here",
          record="bench/results/io_h200.json", key=_fig2_keys("hbm_bytes")),
    Claim("h200-speedup",
          "one forward + backward step with the causal mask and dropout takes {{measured.h200_baseline_ms}}&nbsp;ms "
          "in plain PyTorch ops and {{measured.h200_triton_ms}}&nbsp;ms in this lab's fused Triton kernel, "
          "{{measured.h200_speedup}}× faster — above the paper's {{measured.paper_speedup}}× at the same sizes "
          "on an A100 (Figure 2 does not state its mask or dropout)",
          "ours", "bench/results/io_h200.json: " + _fig2_keys("runtime_ms"), "measured here",
          record="bench/results/io_h200.json", key=_fig2_keys("runtime_ms")),
    # ---- the online softmax -------------------------------------------------------------------
    Claim("milakov-one-pass",
          'The normaliser <span class="tex">(m,\\ell)</span> of a safe softmax can be computed in one streaming '
          "pass instead of two, so softmax reads its input twice instead of three times (4 memory accesses per "
          "element become 3)",
          "arXiv:1805.02867", "Sec. 3, Algorithm 3 and Theorem 1", "proved",
          quote="It reduces memory accesses from 4 down to 3 per vector element",
          probe="Episode 4's derivation and cell; the <a href=\"exercise.html?id=online-softmax\">online-softmax "
                "exercise</a> checks the monoid laws.",
          ledger=True),
    Claim("fused-softmax-v",
          "Fused with <span class=\"tex\">V</span>, softmax·V needs no second pass: an accumulator is rescaled like "
          '<span class="tex">\\ell</span> as the running max grows',
          "arXiv:2205.14135", "Sec. 3.1, Algorithm 1 and Theorem 1", "proved",
          quote="Algorithm 1 returns O = softmax(QK^T)V",
          probe="Episode 4's derivation; the "
                '<a href="exercise.html?id=online-softmax">online-softmax exercise</a>.',
          ledger=True),
    Claim("monoid-any-order",
          "Attention split across thread blocks or devices and merged from partial (o, lse) equals attention "
          "over all keys, in any merge order or tree — in exact arithmetic; in floating point the order changes "
          "the rounding. Milakov &amp; Gimelshein state that their ⊕ is associative and commutative and omit the "
          "proof; Episode 4 gives one",
          "ours", "Episode 4 and “Beyond one kernel” on this page; Milakov & Gimelshein 2018, Sec. 3.1, Eq. 4",
          "ours",
          quote="The operation ⊕ is associative, which enables parallel evaluation of (3). It is also commutative "
                "[...] We omit the proofs for these two statements for brevity.",
          probe='<a href="#distributed">Beyond one kernel</a>; the <a href="exercise.html?id=ring">ring exercise</a> '
                "checks the laws and composes a ring from them; <code>tests/test_split_k.py</code> merges in random "
                "orders and trees within a rounding tolerance.",
          ledger=True),
    # ---- FlashAttention-2 (Dao 2023) -------------------------------------------------------------
    Claim("fa2-speedup",
          "FlashAttention-2 is around 2× faster than FlashAttention on the same GPU (A100 80GB SXM4), "
          "reaching up to 73% of its theoretical peak in the forward pass",
          "arXiv:2307.08691", "Sec. 1 and Sec. 4.1, Fig. 4–6", "demonstrated",
          quote="FlashAttention-2 is around 2× faster than FlashAttention",
          ledger=True,
          probe='<a href="#fa2">FlashAttention-2</a> on this page and its cell (the counts behind the '
                "speed-up); not measured here against FlashAttention 1."),
    Claim("fa2-io-order",
          "It keeps what the four episodes derived — the tiles, the online softmax, exactness — and the same "
          'order of HBM accesses, <span class="tex">\\Theta(N^2d^2M^{-1})</span>, as long as its blocks grow '
          'with <span class="tex">M</span>: our count (query-outer re-reads K and V once per query block of '
          '<span class="tex">B_r = \\Theta(M/d)</span> rows); the FlashAttention-2 paper gives no IO analysis, '
          "and fixes its blocks instead",
          "ours", "Theorem 2's count (Dao et al. 2022, Sec. 3.2) for the query-outer order; "
          "io_model.flash_accesses(loop_order=\"q_outer\")", "ours"),
    Claim("fa2-nonmatmul",
          "It leaves the output accumulator unscaled and divides by <span class=\"tex\">\\ell</span> once at the "
          "end, instead of rescaling by <span class=\"tex\">\\ell^{\\text{old}}/\\ell^{\\text{new}}</span> and "
          "dividing after every key block (it still rescales by "
          '<span class="tex">e^{m^{\\text{old}} - m^{\\text{new}}}</span>), and stores only '
          '<span class="tex">\\mathrm{lse} = m + \\log \\ell</span> for the backward pass — fewer non-matmul FLOPs',
          "arXiv:2307.08691", "Sec. 3.1.1, tweaks 1 and 2; Algorithm 1, lines 10–13", "proved",
          quote="We can instead maintain an “un-scaled” version of O(2) and keep around the statistics ℓ(2)"),
    Claim("fa2-nonmatmul-cost",
          "those matter because on an A100 each non-matmul FLOP costs about {{page.a100_nonmatmul_cost}} matmul "
          "FLOPs: {{hardware.a100_fp16_tflops}}&nbsp;TFLOP/s of fp16 matrix multiply on the tensor cores against "
          "{{hardware.a100_fp32_tflops}}&nbsp;TFLOP/s of fp32 for everything else (datasheet figures, not a "
          "measurement)",
          "arXiv:2307.08691", "Sec. 3.1", "demonstrated", basis="stated",
          quote="each non-matmul FLOP is 16× more expensive than a matmul FLOP"),
    Claim("fa2-update-count",
          'In the 2022 Algorithm 1 every key block rescales <span class="tex">O_i</span> by '
          '<span class="tex">\\ell_i e^{m_i - m_i^{\\text{new}}}</span>, scales the new '
          '<span class="tex">\\tilde P_{ij}V_j</span>, adds them and divides by '
          '<span class="tex">\\ell_i^{\\text{new}}</span> — four passes over the '
          '<span class="tex">B_r\\times d</span> tile; FlashAttention-2 multiplies by '
          '<span class="tex">e^{m^{\\text{old}} - m^{\\text{new}}}</span> and adds — two — and divides once '
          "after the last block",
          "ours", "Dao et al. 2022, Algorithm 1 line 12, against Dao 2023, Algorithm 1 lines 10 and 12, "
          "counted by lessons.output_update_ops", "modelled here",
          function="nlpcore.web.lessons:output_update_ops"),
    Claim("fa2-parallel",
          "It also parallelises over the sequence length — one thread block per block of query rows, not only "
          "per batch and head — which fills the GPU when batch × heads is small; with queries in the outer loop "
          "the row blocks are independent, so these thread blocks need not communicate (the loop swap and this "
          "parallelism were first in Phil Tillet's Triton implementation)",
          "arXiv:2307.08691", "Sec. 3.2", "demonstrated",
          quote="we now additionally parallelize over the sequence length dimension. This results in "
                "significant speedup for this regime."),
    Claim("fa2-warps",
          "Inside a thread block it splits Q across the warps and shares K and V, where FlashAttention split K "
          "and V (“split-K”) and had every warp write partial results to shared memory, synchronise and add them; "
          "each warp now owns whole rows of <span class=\"tex\">O</span>, and no warp needs to communicate with "
          "another",
          "arXiv:2307.08691", "Sec. 3.3, Fig. 3", "demonstrated",
          quote="In FlashAttention-2, we instead split Q across 4 warps while keeping K and V accessible by all "
                "warps."),
    Claim("fa2-unscaled-credit",
          "The unnormalised accumulator of <a href=\"#ep4\">Episode 4</a>, of the online-softmax exercise's "
          "Compose step and of the Triton kernel — rescale "
          '<span class="tex">O</span>, add <span class="tex">\\tilde P V</span>, divide once at the end — is the '
          "form of Rabe &amp; Staats (2021), which FlashAttention-2 adopted in place of the 2022 paper's "
          'Algorithm 1, where <span class="tex">O_i</span> is normalised after every block',
          "arXiv:2112.05682", "Sec. 3 (numerical stability); adopted in Dao 2023, Sec. 3.1.1, tweak 1", "demonstrated", basis="stated",
          quote="After processing all keys and queries, we divide v*/s* to get the final result.",
          probe='<a href="#ep4">Episode 4</a>\'s derivation; the '
                '<a href="exercise.html?id=online-softmax">online-softmax exercise</a>\'s Compose step writes it.',
          ledger=True),
    Claim("q-outer-traffic",
          "The query-outer order re-reads <span class=\"tex\">K</span> and <span class=\"tex\">V</span> once per "
          'query block (≈ <span class="tex">2N^2d/B_r</span> elements), the key/value-outer order re-reads '
          '<span class="tex">Q</span> and <span class="tex">O</span> and writes <span class="tex">O</span> back '
          'once per key block (≈ <span class="tex">3N^2d/B_c</span>), so query-outer moves more when '
          '<span class="tex">B_r</span> is below about <span class="tex">\\tfrac{2}{3} B_c</span> '
          '(<span class="tex">B_c(d+d_v)/(d+2d_v+4)</span> in our count, which also moves '
          '<span class="tex">m</span> and <span class="tex">\\ell</span>). At the paper\'s '
          '<span class="tex">M</span> and <span class="tex">d</span> = 64, Algorithm 1\'s rule gives '
          '<span class="tex">B_r</span> = {{page.qouter_64_br}}, <span class="tex">B_c</span> = '
          "{{page.qouter_64_bc}} (break-even {{page.qouter_64_break_even}}), and query-outer moves more: "
          "forward + backward, {{page.qouter_1024_q_mb}} against {{page.qouter_1024_kv_mb}}&nbsp;MB per head at "
          '<span class="tex">N</span> = 1024 and {{page.qouter_16384_q_gb}} against '
          "{{page.qouter_16384_kv_gb}}&nbsp;GB at 16384. At <span class=\"tex\">d</span> = 128 the same rule "
          'gives <span class="tex">B_r</span> = {{page.qouter_128_br}}, <span class="tex">B_c</span> = '
          "{{page.qouter_128_bc}} (break-even {{page.qouter_128_break_even}}), and query-outer already moves "
          "slightly less: {{page.qouter_128_1024_ratio}}× at <span class=\"tex\">N</span> = 1024, "
          "{{page.qouter_128_16384_ratio}}× at 16384",
          "ours", "io_model.q_outer_break_even and flash_accesses; bench/results/io_claim.json "
          "by_n[n=16384].flash2_bytes (d = 64)", "modelled here",
          function="nlpcore.kernels.io_model:q_outer_break_even",
          record="bench/results/io_claim.json", key="by_n[n=16384].flash2_bytes"),
    Claim("fa2-blocks",
          "FlashAttention-2 takes blocks of 64 or 128 query rows and key columns and keeps the score tile and "
          "the output accumulator on chip (registers and shared memory); larger blocks need more registers",
          "arXiv:2307.08691", "Sec. 3.3, “Tuning block sizes”", "demonstrated", basis="stated",
          quote="Typically we choose blocks of size {64, 128} × {64, 128}"),
    # ---- Ring Attention (Liu, Zaharia & Abbeel 2023) -----------------------------------------
    Claim("ring-overlap",
          "A ring step hides its transfer only when the step's compute takes at least as long as sending its K "
          'and V blocks: <span class="tex">4dc^2/F \\ge 4cd/B</span>, so a device needs a block of '
          '<span class="tex">c \\ge F/B</span> tokens (<span class="tex">F</span> FLOP/s, '
          '<span class="tex">B</span> bytes/s one way)',
          "arXiv:2310.01889", "Sec. 3, “Arithmetic Intensity Between Hosts”; Table 2", "proved",
          quote="To achieve an overlap between communication and computation, the following condition must hold: "
                "4dc²/F ≥ 4cd/B. This implies that the block size, denoted as c, should be greater than or equal "
                "to F/B.",
          ledger=True,
          probe='<a href="#distributed">Beyond one kernel</a> and its cell; the '
                '<a href="exercise.html?id=ring">ring exercise</a>.'),
    # ---- FlashAttention-3 (Shah et al. 2024) and our Hopper kernel ----------------------------------
    Claim("fa3-exp-throughput",
          "an H100 SXM5 multiplies matrices at 989 TFLOP/s in fp16 but evaluates special functions such as the "
          "exponential at only 3.9 TFLOP/s (16 per SM per clock × 132 SMs × 1830 MHz); at d = 128 the forward "
          "pass has 512× more matmul FLOPs than exponentials, so the exponentials can take half as many cycles "
          "as the products",
          "arXiv:2407.08608", "Sec. 3.1, “Pingpong scheduling”, and its footnote on the 3.9 TFLOPS", "demonstrated",
          basis="stated",
          quote="the H100 SXM5 GPU has 989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of special functions such as "
                "exponential",
          ledger=True,
          probe='<a href="#ep5">Episode 5</a>: Nsight Compute on the H200 reads the XU pipe (special functions '
                "such as exp2, and conversions) about as busy as the tensor pipe at d = 64 "
                "(<code>bench/results/fa3_ncu.json</code>)."),
    Claim("fa3-warp-spec",
          "FlashAttention-3 splits each thread block into a producer warpgroup, which only issues TMA loads "
          '(its query block <span class="tex">Q_i</span> once, then <span class="tex">K_j</span> and '
          '<span class="tex">V_j</span> into a circular buffer of shared-memory stages), and '
          "consumer warpgroups, which only compute, "
          "handing stages back and forth through barriers and moving registers from producer to consumers "
          "(<code>setmaxnreg</code>)",
          "arXiv:2407.08608", "Sec. 3.1, Algorithm 1", "demonstrated", basis="stated",
          quote="Wait for the (j mod s)th stage of the buffer to be consumed. Issue loads of K_j, V_j from HBM to "
                "shared memory"),
    Claim("fa3-pingpong",
          "Barriers force one warpgroup's two products (PV of one step, QKᵀ of the next) to be issued before "
          "the other's, so one warpgroup's softmax runs while the other's products occupy the tensor cores "
          "(“pingpong”); the paper measured 570 → 620–640 TFLOP/s from it (FP16, d = 128, N = 8192, H100)",
          "arXiv:2407.08608", "Sec. 3.1, “Pingpong scheduling”; Figure 1", "demonstrated",
          quote="we generally find this to improve performance (e.g., from 570 TFLOPS to 620-640 TFLOPS for FP16 "
                "forward with head dimension 128 and sequence length 8192)",
          ledger=True,
          probe='<a href="#ep5">Episode 5</a>: the same switch in our kernel on an H200 '
                "(<code>bench/results/fa3_h200.json</code>)."),
    Claim("fa3-overlap",
          'Inside one warpgroup, the products for key block j (<span class="tex">QK_j^\\top</span>) and block '
          'j−1 (<span class="tex">P_{j-1}V_{j-1}</span>) are issued together; the warpgroup waits only for '
          '<span class="tex">QK_j^\\top</span> and computes block j\'s softmax while '
          '<span class="tex">P_{j-1}V_{j-1}</span> is still on the tensor cores, at the cost of registers for '
          "a second score tile",
          "arXiv:2407.08608", "Sec. 3.2, Algorithm 2; Figure 2", "demonstrated", basis="stated",
          quote="the second WGMMA operation of iteration j (line 11) is overlapped with softmax operations from "
                "iteration j+1 (line 13)"),
    Claim("fa3-ours-ablation",
          "In our Gluon kernel on an H200 (forward TFLOP/s of one run, at the shapes of the table below), "
          "{{page.fa3_ablation}}",
          "ours", FA3_ABLATION + ": " + _FA3_ABLATION_KEYS, "measured here",
          record=FA3_ABLATION, key=_FA3_ABLATION_KEYS,
          ledger=True,
          probe='<a href="#ep5">Episode 5</a>: the ablation table and the timeline drawn from it.'),
    Claim("fa3-ours-vs-cudnn",
          "In one run on the benchmark's shapes, our FlashAttention-3 forward, launched as "
          "<code>flash_fa3.forward</code> launches it by default, is {{page.fa3_standing}}",
          "ours", FA3_STANDING + ": " + _FA3_STANDING_KEYS, "measured here",
          record=FA3_STANDING, key=_FA3_STANDING_KEYS,
          ledger=True,
          probe='<a href="#ep5">Episode 5</a>; <a href="performance.html">performance page</a>; '
                "<code>bench/FA3.md</code>."),
    # ---- WGSL on the tensor cores: the int8 tier (wgsl/flash_fwd_int8.wgsl) -----------------------
    Claim("tc-roofline",
          "An H200's tensor cores multiply bf16/fp16 matrices at {{hardware.h200_tflops}}&nbsp;TFLOP/s, "
          "{{page.tc_ratio}}× the {{hardware.h200_fp32_tflops}}&nbsp;TFLOP/s of float32 arithmetic on its CUDA "
          "cores (dense datasheet peaks, not measurements, and quoted at different clocks: "
          "{{hardware.h200_tflops}} is {{hardware.h200_sms}} SMs × 4096 FLOP per clock at 1830&nbsp;MHz, "
          "{{hardware.h200_fp32_tflops}} about {{hardware.h200_sms}} × 256 at 1980&nbsp;MHz, so per SM and clock the ratio is 16×)",
          "NVIDIA datasheets", "H200 datasheet, FP32 and BF16/FP16 Tensor Core rows (dense); nlpcore.hardware",
          "demonstrated", basis="stated"),
    Claim("sage-int8",
          "SageAttention quantises <span class=\"tex\">Q</span> and <span class=\"tex\">K</span> to INT8 per "
          "block for <span class=\"tex\">QK^\\top</span>, after smoothing <span class=\"tex\">K</span> by "
          "subtracting its mean over all tokens (every score of a query row moves by the same amount, so the "
          "softmax is unchanged, and a per-channel offset common to all keys no longer stretches the "
          "quantisation range), and "
          "computes <span class=\"tex\">\\tilde PV</span> in FP16 with an FP16 accumulator (its SAGEAttn-B "
          "kernel; SAGEAttn-T quantises per token instead, and its adaptive scheme runs SAGEAttn-vB, with "
          "<span class=\"tex\">\\tilde P</span> and <span class=\"tex\">V</span> in INT8, on the layers "
          "where that stays accurate)",
          "arXiv:2410.02367", "Sec. 4.2 (smoothing K, Eq. 6), 4.3 (per-block INT8 Q and K), 4.4 (FP16 "
          "accumulator for P̃V), 4.5 and Table 6 (the four kernels); Algorithm 1 (SAGEAttn-B); challenge C1 in "
          "Sec. 1", "demonstrated", basis="stated",
          quote="we propose to smooth the matrix K by a transform γ, which subtracts averaged K across all tokens"),
    Claim("int8-tile",
          "at <span class=\"tex\">d</span> = {{page.i8_d}} the plan gives a tile of "
          "<span class=\"tex\">B_r</span> = {{page.i8_br}} query rows by <span class=\"tex\">B_c</span> = "
          "{{page.i8_bc}} keys, so <span class=\"tex\">S_{ij}</span> is {{page.i8_blocks}} result blocks of "
          "{{page.i8_m}}×{{page.i8_n}}; the workgroup's {{page.i8_subgroups}} subgroups of "
          "{{page.i8_subgroup_size}} take {{page.i8_rounds}} blocks each, and each block sums "
          "{{page.i8_ksteps}} products of a {{page.i8_m}}×{{page.i8_k}} int8 block of "
          "<span class=\"tex\">Q_i</span> and a {{page.i8_k}}×{{page.i8_n}} int8 block of "
          "<span class=\"tex\">K_j^\\top</span> into int32",
          "ours", "tiling.plan_int8(64, 49152), the H200's workgroup storage through Dawn; "
          "wgsl/flash_fwd_int8.wgsl, “S_ij on subgroup matrices”", "modelled here",
          function="nlpcore.kernels.tiling:plan_int8"),
    Claim("int8-vs-sage",
          "Ours differs from SageAttention: <span class=\"tex\">PV</span> stays float32 on the CUDA cores "
          "(Dawn offers this GPU no float16 subgroup matrices), "
          "<span class=\"tex\">\\bar k</span> is taken in float32 by the shader's first two passes, and "
          "lse gets back the <span class=\"tex\">q_i\\cdot\\bar k</span> the smoothing removed",
          "ours", "wgsl/flash_fwd_int8.wgsl header; kernels/flash_wgsl_int8.py", "ours"),
    Claim("int8-accuracy",
          "Against float64 at <span class=\"tex\">N</span> = {{page.i8_acc_n}} (<span class=\"tex\">d</span> "
          "= 64 and 128, the worst of the two), the int8 tier's output has a relative L1 error of "
          "{{page.i8_rand_rel_l1}} and a worst per-row cosine similarity of {{page.i8_rand_cos}} on random inputs, "
          "and {{page.i8_out_rel_l1}} and {{page.i8_out_cos}} on inputs with outlier channels — "
          "{{page.i8_out_verdict}} the tier's own bar ({{page.i8_bar}}); the float32 tier's relative L1 error on "
          "the same outlier inputs is {{page.f32_out_rel_l1}}",
          "ours", WEBGPU_H200 + ": " + "; ".join(INT8_ACCURACY_KEYS), "measured here",
          record=WEBGPU_H200, key="; ".join(INT8_ACCURACY_KEYS),
          ledger=True,
          probe='<a href="#ep2-tensor">Episode 2, tensor cores from WGSL</a>; the '
                '<a href="performance.html">performance page</a>\'s tier table.'),
    Claim("int8-speed",
          "at <span class=\"tex\">N</span> = 16384, 16 heads, <span class=\"tex\">d</span> = 64, the int8 tier "
          "ran at {{page.i8_tflops}}&nbsp;TFLOP/s through Dawn, against {{page.f32_tflops}} for the float32 tier "
          "and {{page.sdpa_tflops}} for PyTorch SDPA in bf16, in one run on the same H200; by our model its float32 "
          "<span class=\"tex\">PV</span>, half the counted FLOPs, would cap it at {{page.i8_peak}}&nbsp;TFLOP/s, "
          "twice the float32 peak, even if <span class=\"tex\">QK^\\top</span> cost nothing",
          "ours", WEBGPU_H200 + ": " + "; ".join(TIER_SPEED_KEYS.values()), "measured here",
          record=WEBGPU_H200, key="; ".join(TIER_SPEED_KEYS.values())),
    Claim("ring-min-block",
          "at the dense fp16 peak, an H200 needs a block of at least {{hardware.h200_nvlink_min_block}} tokens "
          "over NVLink ({{hardware.h200_nvlink_oneway_gb_per_s}}&nbsp;GB/s one way) and "
          "{{hardware.h200_pcie_min_block}} over PCIe Gen5 ({{hardware.h200_pcie_oneway_gb_per_s}}&nbsp;GB/s); "
          "an A100 {{hardware.a100_nvlink_min_block}} over NVLink (Ring Attention's Table 2 lists 1.0K as the "
          "A100 + NVLink minimal block, and 6c ≈ 6.2K as the minimal sequence length per device)",
          "ours", "hardware.ring_min_block, from the NVIDIA datasheets' Interconnect rows", "modelled here",
          function="nlpcore.hardware:ring_min_block"),
)

BY_ID: Dict[str, Claim] = {c.id: c for c in CLAIMS}


def cite(claim: Claim) -> str:
    """The citation a page prints after a claim: the source and locator, or what backs ours."""
    if claim.status == "measured here":
        return "measured here: <code>%s</code>" % html.escape(claim.record or "")
    if claim.status == "modelled here":
        return "modelled here: <code>%s</code>" % html.escape((claim.function or "").replace(":", "."))
    name, anchor = SOURCES.get(claim.source, (claim.source, None))
    if claim.source == "ours":
        return "this lab's argument"
    ref = '<a href="index.html#%s">%s</a>' % (anchor, html.escape(name)) if anchor else html.escape(name)
    return "%s, %s" % (ref, html.escape(claim.locator))


def render(claim: Claim) -> str:
    """The claim as a page prints it: its sentence and citation in a ``<span data-claim>``."""
    quote = ' title="%s"' % html.escape(claim.quote, quote=True) if claim.quote else ""
    basis = ' data-basis="%s"' % claim.basis if claim.basis else ""
    return '<span class="claim" data-claim="%s" data-status="%s"%s%s>%s (%s)</span>' % (
        claim.id, claim.status, basis, quote, claim.text, cite(claim))


def ledger_rows() -> str:
    """The claims ledger's table rows (HTML): claim and citation, status badge, where to probe."""
    rows = []
    for claim in CLAIMS:
        if not claim.ledger:
            continue
        if claim.basis == "stated":  # the source says it, neither proves nor measures it
            badge = '<span class="badge stated">stated in the source</span>'
        else:
            badge = '<span class="badge %s">%s</span>' % (claim.status.split()[0], claim.status)
        rows.append('      <tr data-claim-row="%s"><td>%s.</td>\n          <td>%s</td>\n          <td>%s</td></tr>'
                    % (claim.id, render(claim), badge, claim.probe or ""))
    return "\n".join(rows)


def page_values() -> Dict[str, str]:
    """What build.py stamps: ``claim.<id>`` for each claim and ``claims.ledger``."""
    values = {"claim." + c.id: render(c) for c in CLAIMS}
    values["claims.ledger"] = ledger_rows()
    return values


_STEP = re.compile(r"^([A-Za-z_0-9]+)(?:\[([^\]]+)\])?$")


def resolve(data: Any, key: str) -> Any:
    """The value at ``key`` in a record: dotted names, and ``list[a=x,b=y]`` for the one item of a
    list whose fields match (numbers compared as numbers). Raises KeyError naming the step that
    is missing."""
    value = data
    for part in key.split("."):
        match = _STEP.match(part)
        if not match:
            raise KeyError("bad key step %r in %r" % (part, key))
        name, selector = match.groups()
        if not isinstance(value, dict) or name not in value:
            raise KeyError("%r has no %r" % (key, name))
        value = value[name]
        if selector:
            wanted = [tuple(s.split("=", 1)) for s in selector.split(",")]
            items = [item for item in value if isinstance(item, dict) and all(
                str(item.get(field)) == want for field, want in wanted)] if isinstance(value, list) else []
            if len(items) != 1:
                raise KeyError("%r: %d items match [%s]" % (key, len(items), selector))
            value = items[0]
    return value


def problems(claim: Claim) -> List[str]:
    """What is wrong with a claim's own fields (no files read): empty text or locator, unknown
    status or source, a measured claim without record and key, a modelled one without function."""
    out = []
    if not claim.text.strip():
        out.append("%s: no text" % claim.id)
    if not claim.locator.strip():
        out.append("%s: no locator" % claim.id)
    if claim.status not in STATUSES:
        out.append("%s: status %r is not one of %s" % (claim.id, claim.status, STATUSES))
    if claim.source not in SOURCES:
        out.append("%s: source %r is not one of %s" % (claim.id, claim.source, sorted(SOURCES)))
    if claim.status == "measured here" and not (claim.record and claim.key):
        out.append("%s: a measured claim names its record and key" % claim.id)
    if claim.status == "modelled here" and not claim.function:
        out.append("%s: a modelled claim names its function" % claim.id)
    if claim.basis not in BASES:
        out.append("%s: basis %r is not one of %s" % (claim.id, claim.basis, BASES))
    if claim.basis == "stated" and claim.status != "demonstrated":
        out.append("%s: basis 'stated' goes with status 'demonstrated'" % claim.id)
    if claim.status in ("proved", "demonstrated") and claim.source == "ours":
        out.append("%s: %s in which source?" % (claim.id, claim.status))
    if claim.quote is not None and len(claim.quote) > 300:
        out.append("%s: the quote is longer than 300 characters" % claim.id)
    return out


__all__ = ["BY_ID", "CLAIMS", "Claim", "INT8_ACCURACY_KEYS", "SOURCES", "STATUSES", "TIER_SPEED_KEYS", "WEBGPU_H200",
           "cite", "ledger_rows", "page_values", "problems", "render", "resolve"]
