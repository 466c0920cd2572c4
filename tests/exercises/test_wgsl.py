"""The `wgsl` exercise: its shader reading (interface, workgroup bytes, tile plan) against
nlpcore.kernels.tiling, and its checks run end to end with the shaders executed natively by
wgpu-py (naga + Mesa lavapipe) in place of the page's navigator.gpu.

Each planted bug (nlpcore/lab/exercises/wgsl/planted_bugs.py) must fail exactly the checks it is planted for; the reference
solutions must pass every check (so they are valid WGSL for naga as well as for the browser's
Tint, which tests/browser/test_exercise_page_wgsl.py covers).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from nlpcore.kernels import tiling
from nlpcore import shaders
from nlpcore.lab import exercise
from nlpcore.lab.exercises.wgsl import cases, expressions, hardening, patches, planted_bugs, reader, sizing
from nlpcore.lab.verdict import conclude, grade, verify_js

from .helpers import marker

pytestmark = marker("wgsl")

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

EX = exercise("wgsl")
SCRATCH_GPU = {c.id for c in cases.SCRATCH_CASES}
HARDEN_GPU = {c.id for c in cases.HARDEN_CASES}
PYTHON_CHECKS = {"interface", "budget", "mirror"}


def text(name):
    """The lab's own shader (flash_fwd.wgsl) or the starter/solution a step shows
    ("scratch_starter.wgsl", "scratch_solution.wgsl", "harden_starter.wgsl")."""
    if name == "flash_fwd.wgsl":
        return shaders.text(name)
    step, kind = name[:-len(".wgsl")].split("_")
    return getattr(EX.step(step), kind)


def run_step(step, code, only=None):
    """Grade ``code``; run each pending GPU job through wgpu-py and verify it, as the page
    does with navigator.gpu. Returns {check id: result}."""
    from nlpcore.kernels import flash_wgpu

    out = grade(EX, step, code)
    ran = {c["id"]: {"outputs": flash_wgpu.run_spec(c["job"])} for c in out["checks"]
           if c["status"] == "pending" and (only is None or c["id"] in only)}
    if ran:           # as the page: the judge concludes (Python checks wait for the compiler)
        out = conclude(EX, step, code, out, ran)
    return {c["id"]: c for c in out["checks"] if only is None or c["id"] in only}


def failing(results):
    return {cid for cid, r in results.items() if r["status"] != "pass"}


# ---- reading shaders ---------------------------------------------------------------------

@pytest.mark.parametrize("expr, want", [("BR * D", 16 * 64), ("(BR + 2u) * 3", 54),
                                        ("4 * BC * (D + 1) / 2 % 1000", (4 * 8 * 65 // 2) % 1000),
                                        ("u32(BC) - -1", 9), ("0x10", 16)])
def test_evaluate(expr, want):
    assert expressions.evaluate(expr, {"BR": 16, "BC": 8, "D": 64}) == want


@pytest.mark.parametrize("expr", ["BR * X", "BR /", "(BR", "BR / 0", "1.5"])
def test_evaluate_rejects(expr):
    with pytest.raises(expressions.ShaderError):
        expressions.evaluate(expr, {"BR": 16})


@pytest.mark.parametrize("type_text, size", [("f32", 4), ("vec3<f32>", 12), ("vec4f", 16),
                                             ("array<vec3<f32>, 5>", 80), ("mat4x3<f32>", 64),
                                             ("array<array<f32, D>, 3>", 3 * 4 * 7),
                                             ("atomic<u32>", 4)])
def test_type_layout(type_text, size):
    assert sizing.type_layout(type_text, {"D": 7})[0] == size


@pytest.mark.parametrize("d, dv", [(64, 64), (24, 40), (16, 16), (100, 7)])
def test_layout_of_the_lab_shader_matches_tiling(d, dv):
    """Two independent counts of the same memory: parsing the shader's var<workgroup> arrays
    and tiling.bytes_needed; and the largest plan that fits equals tiling.plan's choice."""
    info = reader.parse_shader(text("flash_fwd.wgsl"))
    plan = tiling.plan(d, 4, dv=dv)
    host = plan.constants()
    lay = sizing.layout(info, host)
    assert lay.bytes_used == plan.bytes_used
    assert [(n, b) for n, b, _ in lay.arrays] == list(plan.arrays)
    assert lay.constants == plan.constants()
    assert lay.invocations == plan.workgroup_size
    # SPART not offered: it is derived from BR, BC and KS as tiling derives it.
    derived = sizing.layout(info, {n: v for n, v in host.items() if n != "SPART"})
    assert derived.constants == plan.constants()
    fit = sizing.fitting_plan(info, host)
    assert (fit.env["BR"], fit.env["BC"], fit.bytes_used) == (plan.br, plan.bc, plan.bytes_used)


def test_unused_workgroup_arrays_do_not_count():
    source = text("flash_fwd.wgsl").replace(
        "var<workgroup> s_part: array<f32, SPART>;",
        "var<workgroup> s_part: array<f32, SPART>;\nvar<workgroup> spare: array<f32, 4096>;\n"
        "fn never_called() { spare[0] = 1.0; }")
    host = tiling.plan(64, 4, br=16, bc=8).constants()
    lay = sizing.layout(reader.parse_shader(source), host)
    assert "spare" not in [n for n, _, _ in lay.arrays]
    assert lay.bytes_used == tiling.bytes_needed(16, 8, 64, 64, 4)


def test_static_use_follows_calls_from_main():
    """As WebGPU decides static use: the Scratch starter's helpers read k and v and write o, but
    main calls none of them yet, so only params and q are bound; the solution uses all six."""
    starter = reader.parse_shader(text("scratch_starter.wgsl"))
    assert [n for n in ("params", "q", "k", "v", "o", "lse", "k_tile") if starter.uses(n)] == ["params", "q"]
    solution = reader.parse_shader(text("scratch_solution.wgsl"))
    assert all(solution.uses(n) for n in ("params", "q", "k", "v", "o", "lse", "k_tile", "v_tile"))


@pytest.mark.parametrize("edit, message", [
    (("var<storage, read> k:", "var<storage, read> keys:"), "binding 2 named k, not keys"),
    (("var<storage, read_write> o:", "var<storage, read> o:"), "var<storage, read_write>"),
    (("override D: u32;", "const D: u32 = 64u;"), "override D: u32;"),
    (("override SPART: u32;", "override SPART: u32;\noverride EXTRA: u32;"), "EXTRA"),
    (("fn main(", "fn entry("), "fn main"),
])
def test_interface_errors_name_the_problem(edit, message):
    """The reader's interface errors wait for the page's compiler (which accepts these shaders:
    only a compile-only job goes to the page), then stand."""
    source = text("flash_fwd.wgsl").replace(*edit)
    first = grade(EX, "harden", source)
    by_id = {r["id"]: r for r in first["checks"]}
    assert by_id["interface"]["status"] == "waiting" and message in by_id["interface"]["message"]
    assert by_id["ragged"]["status"] == "pending" and by_id["ragged"]["job"]["meta"]["compile_only"]
    by_id = {r["id"]: r for r in _compiled(source, first)["checks"]}
    assert by_id["interface"]["status"] == "fail"
    assert message in by_id["interface"]["message"]
    assert by_id["ragged"]["status"] == "fail" and message in by_id["ragged"]["message"]


def _compiled(source: str, first: dict, step: str = "harden") -> dict:
    """The grade once the page compiled the shader and ran its jobs (their outputs empty: the
    checks that matter here fail before reading them)."""
    ran = {c["id"]: {"outputs": {}} for c in first["checks"] if c["status"] == "pending"}
    return conclude(EX, step, source, first, ran)


def test_over_budget_is_refused_with_bytes_and_a_plan_that_fits():
    results = {r["id"]: r for r in grade(EX, "harden", planted_bugs.planted_bug("over_budget"))["checks"]}
    need = tiling.bytes_needed(64, 64, 16, 16, 4)
    assert need > sizing.STORAGE_LIMIT
    fit = tiling.plan(16, 4, br=64)  # tiling's rule, keeping the learner's 64 rows
    msg = results["many-workgroups"]["message"]
    assert results["many-workgroups"]["status"] == "fail"
    assert "needs %d bytes" % need in msg and "16384" in msg
    assert "a plan that fits: BR=%d, BC=%d (%d bytes)" % (fit.br, fit.bc, fit.bytes_used) in msg
    assert results["budget"]["status"] == "fail"
    assert all(r["status"] != "pending" for r in results.values())


def test_learner_tile_plan_from_override_defaults():
    source = text("flash_fwd.wgsl").replace("override BR: u32;", "override BR: u32 = 8u;") \
                                   .replace("override BC: u32;", "override BC: u32 = BR * 2u;")
    out = grade(EX, "scratch", source)
    job = next(c["job"] for c in out["checks"] if c["id"] == "many-tiles")
    assert job["constants"]["BR"] == 8 and job["constants"]["BC"] == 16
    assert job["constants"]["KS"] == 1 and job["constants"]["SPART"] == 1
    assert job["meta"]["n_q"] % 16 == 0 and job["workgroups"][0] == job["meta"]["n_q"] // 8
    assert job["meta"]["guard"]["source"] == source and job["shader"] == "your-shader.wgsl"
    assert job["code"].count("\n") == source.count("\n") and "lab_loop_trips" in job["code"]


def test_awkward_learner_plans_are_handled_quickly():
    """Tiles whose lcm is huge are refused with a reason; tiny tiles still grade fast (the
    mirror falls back to the host's tiles beyond MAX_MIRROR_STEPS)."""
    source = text("flash_fwd.wgsl").replace("override BR: u32;", "override BR: u32 = 63u;") \
                                   .replace("override BC: u32;", "override BC: u32 = 16u;")
    checks = {c["id"]: c for c in grade(EX, "scratch", source)["checks"]}
    assert checks["large-scores"]["status"] == "fail"  # d = 16: fits the budget, but
    assert "lcm(BR, BC) = 1008" in checks["large-scores"]["message"]
    source = text("flash_fwd.wgsl").replace("override BR: u32;", "override BR: u32 = 1u;") \
                                   .replace("override BC: u32;", "override BC: u32 = 4u;")
    start = time.process_time()
    out = grade(EX, "harden", source)
    assert time.process_time() - start < 5
    assert [c["status"] for c in out["checks"]].count("pending") == len(HARDEN_GPU)


def test_key_tiles_must_be_a_multiple_of_four():
    source = text("flash_fwd.wgsl").replace("override BC: u32;", "override BC: u32 = 6u;")
    checks = {c["id"]: c for c in _compiled(source, grade(EX, "harden", source))["checks"]}
    assert checks["ragged"]["status"] == "fail" and "BC = 6 is not a multiple of 4" in checks["ragged"]["message"]


def test_export_has_wgsl_steps():
    data = EX.to_data()
    assert data["tier"] == "systems · wgsl" and data["ladder"] == ["Scratch", "Harden"]
    assert data["minutes"] == 120 and data["extra"]["js_modules"] == ["js/exercises/wgsl.js"]
    for step in data["steps"]:
        assert step["language"] == "wgsl" and "@compute" in step["starter"]
        assert "@compute" in step["solution"] and step["hints"]
    assert data["steps"][1]["solution"] == text("flash_fwd.wgsl")


def test_verify_needs_every_output():
    """o and lse, and the loop guard's record: a page that returns no record (or one of
    another size) proves nothing about the run, whatever o and lse say."""
    code = text("flash_fwd.wgsl")
    out = grade(EX, "harden", code)
    job = next(c["job"] for c in out["checks"] if c["id"] == "ragged")
    size = {b["name"]: b["size"] for b in job["bindings"]}
    result = verify_js(EX, "harden", "ragged", code, job,
                       {"o": bytes(size["o"]), "lab_loop_trips": bytes(size["lab_loop_trips"])})
    assert result["status"] == "fail" and "lse" in result["message"]
    for trips in (None, bytes(size["lab_loop_trips"] - 4)):
        outputs = {"o": bytes(size["o"]), "lse": bytes(size["lse"])}
        if trips is not None:
            outputs["lab_loop_trips"] = trips
        result = verify_js(EX, "harden", "ragged", code, job, outputs)
        assert result["status"] == "fail" and "loop guard" in result["message"], result


# ---- on a real WebGPU implementation (wgpu-py) ---------------------------------------------

@pytest.mark.parametrize("name", ["scratch_starter.wgsl", "scratch_solution.wgsl", "harden_starter.wgsl"])
def test_every_exercise_shader_compiles_with_naga(wgpu_device, name):
    """Starters included: the learner's first run must not be a compile error. (Tint, the
    browser's compiler, is checked on the starters by the browser test.)"""
    from nlpcore.kernels import flash_wgpu

    info = flash_wgpu.device().create_shader_module(code=text(name)).get_compilation_info()
    assert not [m for m in info if getattr(m, "type", "error") == "error"], info


def test_scratch_solution_passes(wgpu_device):
    results = run_step("scratch", text("scratch_solution.wgsl"))
    assert set(results) == SCRATCH_GPU | PYTHON_CHECKS
    assert not failing(results), {k: r["message"] for k, r in results.items()}
    assert "max |Δ| o =" in results["one-tile"]["message"]
    assert "tolerance" in results["one-tile"]["message"]
    assert "Nq=%d" % (cases.HOST_BR * cases.HOST_BC // np.gcd(cases.HOST_BR, cases.HOST_BC)) in results["one-tile"]["message"]


def test_harden_solution_passes(wgpu_device):
    results = run_step("harden", text("flash_fwd.wgsl"))
    assert set(results) == HARDEN_GPU | PYTHON_CHECKS
    assert not failing(results), {k: r["message"] for k, r in results.items()}


def test_scratch_starter_fails_helpfully(wgpu_device):
    """The untouched starter passes nothing (before: interface, budget and mirror passed, the
    budget as "largest use 0 of 16384 bytes"); its jobs still go to the GPU, which compiles
    the shader first, and every check then says which bindings are unused."""
    results = run_step("scratch", text("scratch_starter.wgsl"))
    assert failing(results) == SCRATCH_GPU | PYTHON_CHECKS
    for cid in SCRATCH_GPU | PYTHON_CHECKS:
        assert "never uses k, v, o, lse" in results[cid]["message"]
    # Once it writes o, an o still all zeros says so.
    source = text("scratch_starter.wgsl").replace(
        "  // TODO 4:", "  o[0] = 0.0 * lse[0] * k[0] * v[0];\n  // TODO 4:")
    results = run_step("scratch", source, only={"one-tile"})
    assert "left o all zeros" in results["one-tile"]["message"]


def test_harden_starter_fails_what_it_does_not_handle(wgpu_device):
    results = run_step("harden", text("harden_starter.wgsl"))
    untouched = {"interface", "budget", "mirror"}                 # the starter passes nothing
    assert failing(results) == (HARDEN_GPU - {"many-workgroups"}) | untouched  # whole tiles, d = 16, no mask


def test_missing_ragged_guard_fails_the_ragged_checks(wgpu_device):
    results = run_step("harden", planted_bugs.planted_bug("no_ragged_guard"))
    assert failing(results) == {"ragged", "nq-ne-nk", "causal-nq-gt-nk"}
    assert "max |Δ|" not in results["ragged"]["message"]
    assert results["ragged"]["max_abs_err"] > 1e-3


def test_division_by_l_gives_nan_in_fully_masked_rows(wgpu_device):
    results = run_step("harden", planted_bugs.planted_bug("nan_masked_rows"))
    assert failing(results) == {"masked-rows"}
    assert "NaN" in results["masked-rows"]["message"]


def test_missing_barrier_fails(wgpu_device):
    """Without the barrier after staging K_j, V_j, invocations read keys others have not
    stored yet (on lavapipe, as on any GPU that runs a workgroup in several groups of lanes)."""
    results = run_step("scratch", planted_bugs.planted_bug("missing_barrier"),
                       only={"many-tiles", "interface"})
    assert results["interface"]["status"] == "pass"
    assert results["many-tiles"]["status"] == "fail"
    assert "differs from the reference" in results["many-tiles"]["message"]


def test_jobs_bind_only_what_the_shader_uses():
    out = grade(EX, "scratch", text("scratch_solution.wgsl"))
    job = next(c["job"] for c in out["checks"] if c["id"] == "one-tile")
    assert [b["name"] for b in job["bindings"]] == ["params", "q", "k", "v", "o", "lse", "lab_loop_trips"]
    out = grade(EX, "harden", text("flash_fwd.wgsl"))
    job = next(c["job"] for c in out["checks"] if c["id"] == "many-workgroups")
    assert "mask_bits" in [b["name"] for b in job["bindings"]]
    assert job["meta"]["reference"]["shader"] == "flash_fwd.wgsl"
    assert np.prod(job["workgroups"]) >= 24


# ---- texts generated from the lab's shader -------------------------------------------------

def test_harden_starter_is_the_shader_minus_its_hardening():
    starter = text("harden_starter.wgsl")
    assert starter == hardening.BANNER + patches.patch(hardening.EDITS, "test")
    for todo in ("H1", "H2", "H3", "H4", "H5"):
        assert "TODO " + todo in starter
    for gone in ("safe_l =", "mask_bits[", "ceil_div(q0 + rows, BC)", "g + 1u < cols"):
        assert gone in text("flash_fwd.wgsl") and gone not in starter


def test_an_edit_that_no_longer_applies_is_an_error():
    with pytest.raises(ValueError, match="finds 'no such text' 0 times"):
        patches.patch([("no such text", "")], "a test edit")
    with pytest.raises(ValueError, match="2 times"):
        patches.patch([("ab", "")], "a test edit", source="ab ab")


def test_learner_jobs_are_counted_within_lavapipe_loop_limit():
    """The lavapipe guard counts a learner's shader as one that loops over its chunks, and every
    case of both steps stays within the limit with the host's plan and with tiny tiles."""
    from nlpcore.kernels import flash_wgpu

    tiny = text("flash_fwd.wgsl").replace("override BR: u32;", "override BR: u32 = 1u;") \
                                 .replace("override BC: u32;", "override BC: u32 = 4u;")
    for step, code in (("scratch", text("scratch_solution.wgsl")), ("harden", text("flash_fwd.wgsl")),
                       ("harden", tiny)):
        for check in grade(EX, step, code)["checks"]:
            if check["status"] == "pending":
                count = flash_wgpu.loop_iterations(check["job"])
                assert count is not None and 0 < count <= flash_wgpu.LAVAPIPE_LOOP_LIMIT, (step, check["id"])


def test_scratch_shows_the_shaders_own_chunk_helpers():
    # The Scratch step includes flash_fwd.wgsl's register-chunk helpers instead of a copy.
    from nlpcore.lab.exercises.wgsl import patches

    shader = text("flash_fwd.wgsl")
    block = shader[shader.index("fn present("):shader.index("// --- chunk helpers end ---")].rstrip()
    for name in ("scratch_starter.wgsl", "scratch_solution.wgsl"):
        assert block in text(name) and patches.INCLUDE not in text(name)
    with pytest.raises(ValueError, match="chunk-helpers block"):
        patches.include_helpers("no include line here")


# ---- the order of the checks, and constants by scope (no GPU needed) -------------------------

def test_an_untouched_starter_passes_no_python_check_and_still_goes_to_the_compiler():
    out = grade(EX, "scratch", text("scratch_starter.wgsl"))
    status = {c["id"]: c["status"] for c in out["checks"]}
    assert {status[c] for c in PYTHON_CHECKS} == {"fail"}
    assert {status[c] for c in SCRATCH_GPU} == {"pending"}   # the page compiles it first
    broken = text("scratch_starter.wgsl").replace("fn main(", "fn main((", 1)
    out = grade(EX, "scratch", broken)
    assert all(c["status"] == "pending" for c in out["checks"] if c["id"] in SCRATCH_GPU)
    assert any(c["job"]["meta"]["guard"]["source"] == broken for c in out["checks"]
               if c["status"] == "pending")


def test_a_shader_without_workgroup_arrays_is_not_tiled():
    solution = text("scratch_solution.wgsl")
    untiled = solution.replace("var<workgroup> k_tile:", "var<private> k_tile:").replace(
        "var<workgroup> v_tile:", "var<private> v_tile:")
    assert untiled != solution
    budget = next(c for c in grade(EX, "scratch", untiled)["checks"] if c["id"] == "budget")
    assert budget["status"] == "fail" and "workgroup memory" in budget["message"]


def test_a_function_scope_const_is_not_a_module_constant():
    """Before: the reader merged every `const` into one table, so a function's `const CHUNK4 = 1u`
    replaced the module's 16u and the tiles were measured 16 times too small."""
    solution = text("scratch_solution.wgsl")
    shadowed = solution.replace("fn main(", "fn shadow() -> u32 {\n  const CHUNK4: u32 = 1u;\n"
                                "  return CHUNK4;\n}\n\n@compute @workgroup_size(1) fn unused_main(", 1)
    info = reader.parse_shader(shadowed)
    assert info.consts["CHUNK4"] == "16u"
    host = cases._host(cases.SCRATCH_CASES[0])
    assert sizing.layout(info, host).bytes_used == sizing.layout(reader.parse_shader(solution), host).bytes_used



# ---- a shader that does not compile passes nothing (review of the graders, defect 13) ------

def test_python_checks_wait_for_the_compiler():
    """The page is the only compiler: the Python checks of a shader wait until it compiles,
    and a compile error is every check's message."""
    code = EX.step("scratch").solution.replace("fn ", "fn fn ", 1)
    out = grade(EX, "scratch", code)
    python = [c for c in out["checks"] if c.get("runner", "python") == "python"]
    assert python and all(c["status"] == "waiting" for c in python), python
    assert not out["passed"]
    ran = {c["id"]: {"error": "expected identifier, found 'fn'", "fails_all": True}
           for c in out["checks"] if c["status"] == "pending"}
    done = conclude(EX, "scratch", code, out, ran)
    assert all(c["status"] == "error" and "expected identifier" in c["message"]
               for c in done["checks"] if c["status"] != "local"), done["checks"]


def test_python_checks_wait_for_the_compiler_and_stand_alone_only_without_one():
    """A shader the page's compiler rejects (fails_all) passes nothing; a page with no compiler
    at all (no WebGPU) keeps the Python checks' own verdicts, saying they ran without compiling,
    and the step cannot pass (its GPU checks error)."""
    code = EX.step("scratch").solution
    out = grade(EX, "scratch", code)
    pending = [c["id"] for c in out["checks"] if c["status"] == "pending"]
    rejected = conclude(EX, "scratch", code, out,
                        {i: {"error": "error: expected ';'", "fails_all": True} for i in pending})
    assert not any(c["status"] == "pass" for c in rejected["checks"]), rejected["checks"]
    absent = conclude(EX, "scratch", code, out,
                      {i: {"error": "no WebGPU adapter", "fails_all": False} for i in pending})
    python = [c for c in absent["checks"] if c["id"] not in pending and c["status"] != "local"]
    assert python and all(c["status"] == "pass" and "without compiling" in c["message"] for c in python)
    assert not absent["passed"]


def test_a_shader_the_reader_cannot_read_still_goes_to_the_compiler_first():
    """Before: an override the Python reader cannot evaluate (`(16u`) failed budget, mirror and
    every GPU check with the reader's message, and no job reached the page, so the compiler
    never spoke. Now the reader's failures wait for the compiler like the passes do, and each
    GPU check sends a compile-only job (the lab's shader runs in its place): a compile error
    is every check's message; where the compiler accepts the shader, or the page has none, the
    reader's message stands."""
    code = EX.step("scratch").solution.replace("override BR: u32;", "override BR: u32 = (16u;", 1)
    assert code != EX.step("scratch").solution
    out = grade(EX, "scratch", code)
    status = {c["id"]: c["status"] for c in out["checks"]}
    assert {status[c] for c in PYTHON_CHECKS} == {"waiting"}, status
    assert {status[c] for c in SCRATCH_GPU} == {"pending"}, status
    jobs = [c["job"] for c in out["checks"] if c["status"] == "pending"]
    assert all(j["meta"]["guard"]["source"] == code and "cannot be evaluated" in j["meta"]["compile_only"]
               and j["shader"] == "flash_fwd.wgsl" for j in jobs), jobs[0]["meta"]
    pending = [c["id"] for c in out["checks"] if c["status"] == "pending"]
    rejected = conclude(EX, "scratch", code, out,
                        {i: {"error": "line 3:24 expected ')'", "fails_all": True} for i in pending})
    assert all(c["status"] == "error" and "expected ')'" in c["message"]
               for c in rejected["checks"] if c["status"] != "local"), rejected["checks"]
    accepted = conclude(EX, "scratch", code, out, {i: {"outputs": {}} for i in pending})
    done = {c["id"]: c for c in accepted["checks"]}
    for cid in ("budget", "mirror") + tuple(SCRATCH_GPU):
        assert done[cid]["status"] == "fail" and "cannot be evaluated" in done[cid]["message"], done[cid]
    assert not accepted["passed"]
    absent = conclude(EX, "scratch", code, out,
                      {i: {"error": "no WebGPU adapter", "fails_all": False} for i in pending})
    done = {c["id"]: c for c in absent["checks"]}
    assert done["budget"]["status"] == "fail" and "cannot be evaluated" in done["budget"]["message"]


def test_the_untouched_harden_starter_passes_nothing_in_python():
    out = grade(EX, "harden", EX.step("harden").starter)
    python = [c for c in out["checks"] if c.get("runner", "python") == "python"]
    assert python and all(c["status"] == "fail" and "untouched starter" in c["message"]
                          for c in python), python
