"""nlpcore.claims: every claim a page attributes to a source or to our measurements is data, with a
locator; measured claims name a record and key that exist; modelled ones a function; the module
page's claim sentences and its ledger are stamped from it (issue 24). Also the numbers the new
prose quotes (FlashAttention-2's loop orders, the ring's minimum block, the corrected targets)
against the records and the papers' own figures."""
from __future__ import annotations

import importlib
import json
import pathlib
import re
import subprocess

import pytest

from labtools import build
from nlpcore import claims, hardware
from nlpcore.kernels import io_model
from nlpcore.web import lessons, viz

ROOT = pathlib.Path(__file__).resolve().parents[1]
INDEX = ROOT / "site" / "index.html"

# A locator of a source in running text: these belong in nlpcore.claims, stamped as {{claim.<id>}}.
LOCATOR = re.compile(r"\b(Theorem \d|Proposition \d|Lemma \d|Fig(?:ure|\.)\s*\d|Sec(?:tion|\.)\s*\d|§\s*\d|"
                     r"Table \d|Appendix [A-Z]|Eq(?:uation|\.)\s*\d)")
# Names of a setting, not claims: "the paper's Figure 2 setting", "this module's Figure 2 recount".
SETTING_NAMES = re.compile(r"Figure 2 (setting|recount)")


def _page_text(html: str) -> str:
    """Visible text of a page's source, without scripts, tags and {{stamps}}."""
    html = re.sub(r"<script.*?</script>", " ", html, flags=re.S)
    html = re.sub(r"\{\{[\w.-]+\}\}", " ", html)
    return re.sub(r"<[^>]+>", " ", html)


# ---- the data ---------------------------------------------------------------------------------

def test_every_claim_is_well_formed():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids)), "duplicate claim ids"
    problems = [p for c in claims.CLAIMS for p in claims.problems(c)]
    assert not problems, problems
    assert {c.status for c in claims.CLAIMS} == set(claims.STATUSES)  # every status is used


@pytest.mark.parametrize("bad, what", [
    (claims.Claim("x", "a claim", "arXiv:2205.14135", "  ", "proved"), "no locator"),
    (claims.Claim("x", "a claim", "ours", "bench/results/io_h200.json", "measured here"), "record and key"),
    (claims.Claim("x", "a claim", "ours", "a model", "modelled here"), "names its function"),
    (claims.Claim("x", "a claim", "arXiv:2205.14135", "Sec. 1", "true"), "status"),
    (claims.Claim("x", "a claim", "ours", "Sec. 1", "proved"), "in which source"),
])
def test_a_bad_claim_is_reported(bad, what):
    assert any(what in p for p in claims.problems(bad)), claims.problems(bad)


@pytest.mark.parametrize("claim", [c for c in claims.CLAIMS if c.record], ids=lambda c: c.id)
def test_a_claims_record_and_key_exist(claim):
    path = ROOT / claim.record
    assert path.is_file(), "%s names %s, which does not exist" % (claim.id, claim.record)
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in claim.key.split("; "):
        value = claims.resolve(data, key)
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (claim.id, key, value)
        assert key in claim.locator or claim.status != "measured here", (claim.id, "locator names the key")


def test_resolve_names_what_is_missing():
    data = {"rows": [{"impl": "a", "n": 1, "x": 2.0}, {"impl": "b", "n": 1, "x": 3.0}]}
    assert claims.resolve(data, "rows[impl=b,n=1].x") == 3.0
    with pytest.raises(KeyError, match="0 items"):
        claims.resolve(data, "rows[impl=c].x")
    with pytest.raises(KeyError, match="'y'"):
        claims.resolve(data, "rows[impl=a].y")


@pytest.mark.parametrize("claim", [c for c in claims.CLAIMS if c.function], ids=lambda c: c.id)
def test_a_modelled_claim_names_a_function(claim):
    module, attribute = claim.function.split(":")
    assert callable(getattr(importlib.import_module(module), attribute)), claim.function


def test_claims_load_on_python38():
    py38 = ROOT / ".venv38" / "bin" / "python"
    if not py38.exists():
        pytest.skip("no .venv38 (scripts/setup.sh makes it)")
    out = subprocess.run([str(py38), "-c", "import nlpcore.claims as c; print(len(c.page_values()))"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(claims.CLAIMS) + 1


# ---- the pages -----------------------------------------------------------------------------------

def test_the_module_pages_claim_sentences_come_from_the_module():
    source = INDEX.read_text(encoding="utf-8")
    stamped = set(re.findall(r"\{\{claim\.([\w-]+)\}\}", source))
    assert stamped <= set(claims.BY_ID), stamped - set(claims.BY_ID)
    assert "{{claims.ledger}}" in source
    text = SETTING_NAMES.sub(" ", _page_text(source))
    loose = [re.sub(r"\s+", " ", text[max(0, m.start() - 60):m.end() + 20]) for m in LOCATOR.finditer(text)]
    assert not loose, "cite through nlpcore.claims ({{claim.<id>}}), not in page text: %s" % loose
    # every claim is shown somewhere: stamped in prose, in the ledger, or inside another claim
    shown = stamped | {c.id for c in claims.CLAIMS if c.ledger}
    shown |= {i for c in claims.CLAIMS for i in re.findall(r"\{\{claim\.([\w-]+)\}\}", c.text + (c.probe or ""))}
    assert shown == set(claims.BY_ID), set(claims.BY_ID) - shown


@pytest.fixture(scope="module")
def stamped_index(tmp_path_factory):
    out = tmp_path_factory.mktemp("stamp")
    (out / "index.html").write_text(INDEX.read_text(encoding="utf-8"), encoding="utf-8")
    build.stamp_pages(out, build.run_exporter()["values"])
    return (out / "index.html").read_text(encoding="utf-8")


def test_the_built_page_carries_every_claim_with_its_status(stamped_index):
    assert "{{" not in stamped_index
    spans = re.findall(r'data-claim="([\w-]+)" data-status="([\w ]+)"', stamped_index)
    assert spans and all(claims.BY_ID[i].status == s for i, s in spans)
    ledger = stamped_index[stamped_index.index('data-testid="claims-ledger"'):]
    rows = re.findall(r'data-claim-row="([\w-]+)"', ledger)
    assert rows == [c.id for c in claims.CLAIMS if c.ledger]
    for c in claims.CLAIMS:
        if c.ledger and c.status in ("proved", "demonstrated"):
            assert c.locator.replace("'", "&#x27;") in ledger, c.id  # the locator is printed


def test_a_stamp_that_never_resolves_stops_the_build(tmp_path):
    (tmp_path / "a.html").write_text(build.HEADER_MARK + "{{x}}", encoding="utf-8")
    with pytest.raises(build.BuildError, match="still unstamped"):
        build.stamp_pages(tmp_path, {"x": "{{x}}"})


# ---- the numbers the new prose quotes ---------------------------------------------------------------

def test_query_outer_traffic_is_the_recorded_one():
    """The FlashAttention-2 section's numbers equal what bench/io_claim.py recorded."""
    record = json.loads((ROOT / "bench" / "results" / "io_claim.json").read_text())
    numbers = viz.page_numbers()
    for n in lessons.QOUTER_NS:
        row = claims.resolve(record, "by_n[n=%d]" % n)
        assert row["sram_elems"] == numbers["qouter_m"] and row["d"] == numbers["qouter_d"]
        assert numbers["qouter_%d_q_mb" % n] == "%.2f" % (row["flash2_bytes"] / 1e6)
        assert numbers["qouter_%d_kv_mb" % n] == "%.2f" % (row["flash_bytes"] / 1e6)
        assert row["flash2_bytes"] > row["flash_bytes"]  # Q outer moves more with Algorithm 1's blocks
    # ... and less with square blocks
    t = lessons.loop_order_bytes(4096, 64, hardware.A100_SRAM_FP16_ELEMENTS)
    assert t["q_outer_square"] < t["kv_outer"] < t["q_outer"]


def test_output_update_counts():
    ops = lessons.output_update_ops(br=64, d=64, tiles=11)
    assert ops == {"fa1": 4 * 64 * 64 * 11, "fa2": 2 * 64 * 64 * 11 + 64 * 64}


def test_ring_minimum_block_matches_ring_attentions_table_2():
    # Table 2 of arXiv:2310.01889: A100, NVLink 300 GB/s one way -> minimal block 1.0 (x1e3)
    assert hardware.link_bytes_per_s("A100", "NVLink") == 300e9
    assert round(hardware.ring_min_block("A100", "NVLink") / 1e3, 1) == 1.0
    for gpu in hardware.LINKS:
        assert hardware.ring_min_block(gpu, "PCIe") > hardware.ring_min_block(gpu, "NVLink")
    with pytest.raises(ValueError, match="link must be one of"):
        hardware.ring_min_block("H200", "Ethernet")


@pytest.mark.parametrize("link", ["NVLink", "PCIe"])
def test_the_ring_cell_flips_at_the_minimum_block(link):
    c = hardware.ring_min_block("H200", link)
    below = viz.run_episode_cell("ring", {"gpu": "H200", "link": link, "c": c - 1, "d": 128})["values"]
    at = viz.run_episode_cell("ring", {"gpu": "H200", "link": link, "c": c, "d": 128})["values"]
    assert not below["hidden"] and at["hidden"] and at["min_block"] == c


def test_the_fa2_cell_runs_and_its_counts_agree():
    values = viz.run_episode_cell("fa2", {"n": 4096, "d": 64, "bh": 16, "gpu": "A100"})["values"]
    assert values["blocks"] == {"fa1": 16, "fa2": 16 * 64}
    assert values["traffic"]["kv_outer"] == 2 * io_model.flash_accesses(4096, 4096, 64, hardware.A100_SRAM_FP16_ELEMENTS)
    with pytest.raises(ValueError, match="gpu must be one of"):
        viz.run_episode_cell("fa2", {"gpu": "V100"})


def test_the_small_m_qualifier_is_the_guided_labs_answer():
    from nlpcore.lab import guided
    assert lessons.smallest_winning_m(lessons.SMALL_M_N, lessons.SMALL_M_D) == guided.smallest_winning_m()
    assert (lessons.SMALL_M_N, lessons.SMALL_M_D) == (guided.SMALL_M_N, guided.SMALL_M_D)


def test_the_speedup_target_is_figure_2s_own_ratio():
    record = json.loads((ROOT / "bench" / "results" / "io_h200.json").read_text())
    target = next(t for t in record["targets"] if "speed-up" in t["name"])
    paper = io_model.PAPER_FIGURE2
    assert target["goal"].startswith(">= %.1fx" % (paper["standard_ms"] / paper["flash_ms"]))
    assert target["met"] == (target["measured"] >= paper["standard_ms"] / paper["flash_ms"])


def test_the_compose_estimate_is_the_solutions():
    from nlpcore.lab.exercises.triton import compose_solution as sol
    from nlpcore.lab.exercises.triton import exercise
    a100 = hardware.GPUS["A100"]
    want = sol.expected_speedup(64, 16, 1024, 64, 2, a100.fp16_flops, a100.hbm_bytes_per_s)
    assert exercise._figure2_estimate()["fig2_estimate"] == "%.2f" % want


def test_tritons_d128_backward_gap_is_the_tables():
    text = (ROOT / "bench" / "TRITON.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| 128 |")]
    rows = [r for r in rows if len(r) == 15]  # the generated results table (d, N, causal, 6 fwd, 6 bwd)
    ratios = [float(r[14]) for r in rows]  # bwd ×cuDNN
    assert len(ratios) == 6, rows
    assert "%.2f–%.2f× cuDNN's backward at d = 128" % (min(ratios), max(ratios)) in text
    assert "sequence length is not in it" not in text


# ---- the review's corrections (review-claims.md): numbers that the corrected sentences quote ----------

def _lcm(a: int, b: int) -> int:
    import math
    return a * b // math.gcd(a, b)


@pytest.mark.parametrize("d", [64, 128])
def test_the_query_outer_break_even_is_where_the_counts_cross(d):
    """io_model.q_outer_break_even is where the closed forms' two forward orders cross: 5 % below it
    query-outer moves more, 5 % above it less (N a multiple of both blocks, so no ragged tiles)."""
    _, bc = io_model.block_sizes(hardware.A100_SRAM_FP16_ELEMENTS, d)
    star = io_model.q_outer_break_even(d, bc)
    assert abs(star / bc - 2 * d / (3 * d + 4.0)) < 1e-12  # ≈ ⅔·Bc with dv = d
    for br, more in ((int(star * 0.95), True), (int(star * 1.05) + 1, False)):
        n = _lcm(br, bc)
        n *= -(-8192 // n)
        q = io_model.flash_accesses_for_blocks(n, n, d, br, bc, loop_order="q_outer")
        kv = io_model.flash_accesses_for_blocks(n, n, d, br, bc)
        assert (q > kv) == more, (d, br, bc, n, q, kv)


def test_algorithm_1s_blocks_fall_on_both_sides_of_the_break_even():
    """The corrected q-outer-traffic claim: at the paper's M, d = 64 is on the "more" side and d = 128
    on the "less" side (review row 30: 0.94× at N = 1024)."""
    numbers = viz.page_numbers()
    m = hardware.A100_SRAM_FP16_ELEMENTS
    assert (numbers["qouter_64_br"], numbers["qouter_64_bc"]) == io_model.block_sizes(m, 64) == (64, 384)
    assert (numbers["qouter_128_br"], numbers["qouter_128_bc"]) == io_model.block_sizes(m, 128) == (128, 192)
    assert numbers["qouter_64_break_even"] == "%.0f" % io_model.q_outer_break_even(64, 384) == "251"
    assert numbers["qouter_128_break_even"] == "%.0f" % io_model.q_outer_break_even(128, 192) == "127"
    for n in lessons.QOUTER_NS:
        assert float(numbers["qouter_64_%d_ratio" % n]) > 1 > float(numbers["qouter_128_%d_ratio" % n])
    assert numbers["qouter_128_1024_ratio"] == "0.94"
    text = claims.BY_ID["q-outer-traffic"].text
    for key in ("qouter_64_br", "qouter_64_bc", "qouter_128_br", "qouter_128_bc", "qouter_128_1024_ratio"):
        assert "{{page.%s}}" % key in text


def test_the_fa2_cells_square_block_row_says_it_cannot_be_a_kernel():
    """At the paper's M, d = 64, square blocks are 384×384: their fp32 scores overflow an SM's registers."""
    text = "\n".join(lessons.cell_fa2({"n": 4096, "d": 64, "gpu": "A100"})["lines"])
    assert 384 * 384 * 4 > hardware.GPUS["A100"].registers_per_sm * 4
    assert "a bound, not a kernel" in text and "stay in registers" not in text
    assert "break-even of %.1f (moves more)" % io_model.q_outer_break_even(64, 384) in text
    assert "(moves less)" in "\n".join(lessons.cell_fa2({"n": 1024, "d": 128, "gpu": "A100"})["lines"])


def test_a_non_matmul_flop_costs_what_fa2_states():
    """FA2 Sec. 3.1: "each non-matmul FLOP is 16× more expensive" = 312 / 19.5 TFLOP/s (datasheet)."""
    assert viz.page_numbers()["a100_nonmatmul_cost"] == "16"
    assert "16×" in claims.BY_ID["fa2-nonmatmul-cost"].quote


def test_statuses_fit_what_the_source_does():
    """A remark, a cited figure, a datasheet ratio, a design choice or an attribution is marked
    basis="stated" (status "demonstrated", one of DESIGN.md's five) and shown as "stated in the
    source"; the unnormalised accumulator is credited to Rabe & Staats."""
    assert claims.STATUSES == ("proved", "demonstrated", "measured here", "modelled here", "ours")
    for cid in ("fa-typical-m", "fa-a100-memory", "fa2-nonmatmul-cost", "fa2-blocks", "fa2-unscaled-credit"):
        assert (claims.BY_ID[cid].status, claims.BY_ID[cid].basis) == ("demonstrated", "stated"), cid
        assert 'data-basis="stated"' in claims.render(claims.BY_ID[cid])
    assert "stated in the source" in claims.ledger_rows()
    bad = claims.BY_ID["fa-typical-m"]._replace(status="proved")
    assert any("basis 'stated'" in p for p in claims.problems(bad))
    assert claims.BY_ID["fa2-unscaled-credit"].source == "arXiv:2112.05682"
    assert "Jia" in claims.BY_ID["fa-a100-memory"].locator


def test_the_io_h200_note_quotes_the_models_distance_to_the_paper():
    """bench/IO_H200.md: our baseline model against the paper's 40.3 GB, as figure2() computes it."""
    import math
    fig = io_model.figure2()
    pct = 100.0 * (fig["baseline_standard_gb"] / fig["paper_standard_gb"] - 1)
    text = (ROOT / "bench" / "IO_H200.md").read_text(encoding="utf-8")
    assert "(+%.1f %%)" % pct in text
    assert "within %.1f %% of it" % (math.ceil(pct * 10) / 10) in text
    assert "_size_class" not in text and "_size_class" not in (ROOT / "bench" / "TRITON.md").read_text()


# ---- Episode 2's tensor cores from WGSL: the int8 tier (issue 25, point 5) ---------------------------

def test_the_int8_section_quotes_the_recorded_accuracy_and_speeds():
    """The stamped numbers equal bench/results/webgpu_h200.json, read here without the claim keys:
    the worst of d = 64 and 128 through Dawn (the tier's rows, not its staged variant's), and the
    tier rows at N = 16384, 16 heads, d = 64."""
    record = json.loads((ROOT / claims.WEBGPU_H200).read_text(encoding="utf-8"))
    page = lessons.int8_tier_numbers()
    acc = [a for a in record["accuracy"] if a["engine"] == "dawn" and "variant" not in a]  # the tiers' own rows
    int8 = {inputs: [a for a in acc if a["tier"] == "int8" and a["inputs"] == inputs] for inputs in ("random", "outlier")}
    assert {a["d"] for a in int8["random"]} == {64, 128} == {a["d"] for a in int8["outlier"]}
    assert page["i8_rand_rel_l1"] == "%.3f" % max(a["rel_l1"] for a in int8["random"])
    assert page["i8_rand_cos"] == "%.4f" % min(a["cos_min"] for a in int8["random"])
    assert page["i8_out_rel_l1"] == "%.3f" % max(a["rel_l1"] for a in int8["outlier"])
    assert page["i8_out_cos"] == "%.3f" % min(a["cos_min"] for a in int8["outlier"])
    portable = [a["rel_l1"] for a in acc if a["tier"] == "portable" and a["inputs"] == "outlier"]
    assert page["f32_out_rel_l1"] == "%.1e" % max(portable)
    # the verdict follows the record's own validity flags (outlier inputs fail the int8 bar there)
    failed = not all(a["valid"] for a in int8["outlier"])
    assert page["i8_out_verdict"] == ("which fails" if failed else "within")
    assert failed == (min(a["cos_min"] for a in int8["outlier"]) < 0.99)
    assert page["i8_acc_n"] == "{:,}".format(int8["random"][0]["n"])
    dawn = next(e for e in record["engines"] if e["engine"] == "dawn")
    speed = {r["tier"]: r["tflops"] for r in dawn["rows"] if not r.get("skipped")
             and (r["n"], r["heads"], r["d"], r["causal"]) == (16384, 16, 64, False)}
    assert page["i8_tflops"] == "%.1f" % speed["int8"] and page["f32_tflops"] == "%.1f" % speed["portable"]
    sdpa = [s["tflops"] for s in record["sdpa"] if (s["n"], s["heads"], s["d"], s["causal"], s["tier"])
            == (16384, 16, 64, False, "tensor cores (bfloat16)")]
    assert page["sdpa_tflops"] == "%.0f" % sdpa[0]
    # the int8 tier's ceiling: P·V (half of 4·N²·d) stays on the float32 CUDA cores
    assert float(page["i8_peak"]) == 2 * hardware.H200_FP32_FLOPS / 1e12


def test_the_int8_tile_is_the_shaders_mapping():
    """The tile the page describes is tiling.plan_int8's at d = 64 on Dawn's H200 budget, cut the way
    the shader's “S_ij on subgroup matrices” loop cuts it: result blocks of MMA_M×MMA_N covering
    Br×Bc, shared evenly by the workgroup's subgroups, each summing d / MMA_K products."""
    from nlpcore.kernels import tiling
    page = lessons.int8_tier_numbers()
    plan = tiling.plan_int8(page["i8_d"], 49152)
    assert (page["i8_br"], page["i8_bc"]) == (plan.br, plan.bc)
    assert page["i8_blocks"] * page["i8_m"] * page["i8_n"] == plan.br * plan.bc
    assert page["i8_rounds"] * page["i8_subgroups"] == page["i8_blocks"]
    assert page["i8_subgroups"] * page["i8_subgroup_size"] == plan.workgroup_size
    assert page["i8_ksteps"] * page["i8_k"] == page["i8_d"]
    assert page["i8_levels"] == len(range(-127, 128))  # symmetric int8: round(clamp(x / s, ±127))
    shader = (ROOT / "wgsl" / "flash_fwd_int8.wgsl").read_text(encoding="utf-8")
    assert "subgroup_matrix_left<i8, %d, %d>" % (page["i8_k"], page["i8_m"]) in shader
    assert "subgroup_matrix_right<i8, %d, %d>" % (page["i8_n"], page["i8_k"]) in shader
    assert "subgroup_matrix_result<i32, %d, %d>" % (page["i8_n"], page["i8_m"]) in shader
    assert page["tc_ratio"] == "%.1f" % (hardware.GPUS["H200"].fp16_flops / hardware.H200_FP32_FLOPS)


def test_the_int8_section_says_not_recorded_without_the_record(monkeypatch):
    from nlpcore import measured
    monkeypatch.setattr(measured, "record", lambda name=None: None)
    page = lessons.int8_tier_numbers()
    assert page["i8_out_rel_l1"] == page["i8_tflops"] == "not recorded"
    assert page["i8_br"] > 0  # the tile comes from code, recorded or not


def test_the_int8_claims_cite_what_they_should():
    """SageAttention is cited for its method, with the paper's section; ours for the differences
    (float32 P·V, float32 k̄, lse corrected); the measured claims name webgpu_h200.json."""
    sage = claims.BY_ID["sage-int8"]
    assert (sage.source, sage.status, sage.basis) == ("arXiv:2410.02367", "demonstrated", "stated")
    assert "Sec. 4" in sage.locator and claims.SOURCES[sage.source][1] == "src-zhang2024"
    assert 'id="src-zhang2024"' in INDEX.read_text(encoding="utf-8")
    ours = claims.BY_ID["int8-vs-sage"].text
    assert "float32" in ours and "lse" in ours and "\\bar k" in ours
    for cid in ("int8-accuracy", "int8-speed"):
        assert (claims.BY_ID[cid].status, claims.BY_ID[cid].record) == ("measured here", claims.WEBGPU_H200)
    assert claims.BY_ID["int8-tile"].function == "nlpcore.kernels.tiling:plan_int8"
