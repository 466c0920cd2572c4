"""The WGSL exercise's loop guard (nlpcore/lab/exercises/wgsl/guard.py): every loop of a learner's
shader bounded, the lines unchanged, and -- run natively by wgpu-py (naga + Mesa lavapipe) --
endless shaders of several kinds stopped at their loop's budget with a message naming the loop,
while the lab's own shaders give the same outputs as without the guard and stay far within
every budget. (The browser side, Tint's uniformity analysis included, is in
tests/browser/test_exercise_page_wgsl.py.)
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from nlpcore import shaders
from nlpcore.lab import exercise
from nlpcore.lab.exercises.wgsl import cases, guard, hardening, planted_bugs
from nlpcore.lab.verdict import grade, verify_js

pytestmark = pytest.mark.ex_wgsl

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

EX = exercise("wgsl")
SOLUTIONS = {"scratch": EX.step("scratch").solution, "harden": shaders.text("flash_fwd.wgsl")}
TEXTS = dict(SOLUTIONS, scratch_starter=EX.step("scratch").starter,
             harden_starter=hardening.harden_starter(),
             **{"bug_" + name: planted_bugs.planted_bug(name) for name in planted_bugs.PLANTED_BUGS})


def is_subsequence(short: str, long: str) -> bool:
    chars = iter(long)
    return all(c in chars for c in short)


def assert_only_inserted(source: str, code: str) -> None:
    """The guard only inserts text inside lines: same line count, each line of the source is
    what is left of its instrumented line once the insertions are taken out."""
    a, b = source.split("\n"), code.split("\n")
    assert len(a) == len(b)
    for number, (before, after) in enumerate(zip(a, b), 1):
        assert is_subsequence(before, after), (number, before, after)


def guards_of(code: str):
    """{counter: (budget, trips index)} of every guard statement in instrumented code."""
    found = re.findall(r" (\(\*\w+\)|\w+) \+= 1u; if \(\1 > (\d+)u\) \{ if \(\1 == \2u \+ 1u\) "
                       r"\{ atomicAdd\(&\w+\[(\d+)\], 1u\); \} break; \}", code)
    return {c: (int(b), int(i)) for c, b, i in found}


# ---- instrumenting: text in, text out ------------------------------------------------------

LOOPS = """\
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1)
fn main() {
  var i = 0u;
  for (var a = 0u; a < 4u; a++) { o[a] = 1.0; }
  while i < 3u { i++; }
  while (i < 6u) { i++; continue; }
  loop {
    i++;
    continuing { break if i > 9u; }
  }
}
"""


def test_every_loop_form_gets_a_guard_first_in_its_body():
    g = guard.instrument(LOOPS, 10 ** 6, 1)
    assert [(l.kind, l.line) for l in g.loops] == [("for", 5), ("while", 6), ("while", 7), ("loop", 8)]
    assert_only_inserted(LOOPS, g.code)
    lines = g.code.split("\n")
    for loop in g.loops:  # the guard is the first statement: before any `continue`
        body = lines[loop.line - 1].split("{", 1)[1]
        assert body.startswith(" lab_loop_%d += 1u; if (lab_loop_%d > " % (loop.index, loop.index)), body
    # counters: function-scope vars at the top of main, never inside a loop
    assert lines[2] == "fn main() { " + " ".join("var lab_loop_%d: u32 = 0u;" % i for i in range(4))
    assert "continuing { break if i > 9u; }" in lines[9]   # `loop`'s continuing block untouched
    assert lines[0].startswith("@group(0) @binding(1) var<storage, read_write> lab_loop_trips: "
                               "array<atomic<u32>, 4>; @group(0) @binding(0)")
    assert len(guards_of(g.code)) == 4


def test_comments_are_skipped_nested_block_comments_included():
    source = """\
// for (var x = 0u; x < 1u; x++) { a line comment }
/* while (true) { /* nested: loop { */ still a comment: for { */
fn main() { /* a { in a comment */ var s = 0u;
  for (var j = 0u; /* ) { */ j < 4u; j++) // {
  { s += j; }
}
"""
    g = guard.instrument(source, 10 ** 6, 0)
    assert [(l.kind, l.line) for l in g.loops] == [("for", 4)]
    assert_only_inserted(source, g.code)
    lines = g.code.split("\n")
    assert lines[4].startswith("  { lab_loop_0 += 1u;")  # the body's brace, past the comments
    assert lines[0] == "@group(0) @binding(0) var<storage, read_write> lab_loop_trips: " \
                       "array<atomic<u32>, 1>; " + source.split("\n")[0]


def test_nested_loops_count_per_invocation_not_per_entry():
    source = "fn main() {\n  for (var j = 0u; j < 4u; j++) {\n    for (var e = 0u; e < 8u; e++) {\n" \
             "      loop { break; }\n    }\n  }\n}\n"
    g = guard.instrument(source, 10 ** 6, 0)
    assert [(l.parent, l.within) for l in g.loops] == [(None, ()), (0, (0,)), (1, (0, 1))]
    # all three counters are declared once, at the top of main, outside every loop
    assert g.code.split("\n")[0].count("var lab_loop_") == 3
    assert "var lab_loop_" not in "".join(g.code.split("\n")[1:])


HELPERS = """\
var<workgroup> tile: array<f32, 64>;
fn spin(n: u32) -> u32 {
  var i = 0u;
  while (i < n) { i++; }
  return i;
}
fn twice(n: u32,) -> u32 {
  return spin(n) + spin(
    n);
}
fn stage(t: u32) {
  for (var s = 0u; s < 4u; s++) { workgroupBarrier(); tile[t] = f32(s); workgroupBarrier(); }
}
fn unused() { loop { break; } }
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) t: u32) {
  for (var j = 0u; j < 4u; j++) {
    stage(t);
    tile[t] += f32(twice(t) + spin(3u));
  }
}
"""


def test_helpers_get_their_counters_by_pointer_one_per_call_site():
    """A helper's counters live in the entry point and come in as pointers, one per call site
    (as if the helper were inlined there): a new call does not reset them, and a counter's
    uniformity is that of its own call site."""
    g = guard.instrument(HELPERS, 10 ** 6, 0)
    assert_only_inserted(HELPERS, g.code)
    assert [(l.kind, l.line, l.function) for l in g.loops] == [
        ("while", 4, "spin"), ("for", 12, "stage"), ("loop", 14, "unused"), ("for", 17, "main")]
    lines = g.code.split("\n")
    assert lines[1] == "fn spin(n: u32, lab_loop_p0: ptr<function, u32>) -> u32 {"
    assert lines[6] == "fn twice(n: u32,lab_loop_p0: ptr<function, u32>, lab_loop_p1: ptr<function, " \
                       "u32>) -> u32 {"  # after a trailing comma, no second comma
    assert lines[7] == "  return spin(n, lab_loop_p0) + spin("   # pointers passed through
    assert lines[8] == "    n, lab_loop_p1);"
    assert "(*lab_loop_p0) += 1u; if ((*lab_loop_p0) > " in lines[3]
    # main: one counter for its loop, one for stage's, two for spin via twice, one for spin
    assert lines[15].count("var lab_loop_") == 5
    assert "stage(t, &lab_loop_2);" in lines[17]
    assert "twice(t, &lab_loop_3, &lab_loop_4) + spin(3u, &lab_loop_5)" in lines[18]
    assert "fn unused() { var lab_loop_0: u32 = 0u; loop { lab_loop_0 += 1u;" in lines[13]
    assert g.counters == 6
    # which loops sit around which, through the calls: spin's loop runs inside main's
    assert dict((l.line, l.within) for l in g.loops)[4] == (3,)


def test_names_do_not_clash_with_the_learners():
    source = "fn main() { var lab_loop_0 = 1u; loop { lab_loop_0++; if (lab_loop_0 > 2u) { break; } } }"
    g = guard.instrument(source, 10 ** 6, 0)
    assert g.name == "lab_loop2_trips" and "var lab_loop2_0: u32 = 0u;" in g.code


def test_module_declarations_follow_the_directives():
    source = "enable f16;\ndiagnostic(off, derivative_uniformity);\nfn main() { loop { break; } }\n"
    g = guard.instrument(source, 10 ** 6, 2)
    assert g.code.split("\n")[:2] == [
        "enable f16;", "diagnostic(off, derivative_uniformity); @group(0) @binding(2) var<storage, "
        "read_write> lab_loop_trips: array<atomic<u32>, 1>;"]


def test_a_shader_without_loops_is_left_alone():
    source = "fn main() { let x = 1u; }  // for while loop"
    g = guard.instrument(source, 10 ** 6, 7)
    assert g.code == source and g.loops == () and g.size == 0


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_exercise_texts_keep_their_lines(name):
    g = guard.instrument(TEXTS[name], 10 ** 6, 7)
    assert_only_inserted(TEXTS[name], g.code)
    assert len(guards_of(g.code)) == len(g.loops) >= 1


def test_budgets_follow_the_weight_of_an_iteration():
    """A loop with barriers gets fewer iterations than one over head dims; every budget is at
    least MIN_BUDGET and at most the work budget."""
    weights = guard.loop_weight(HELPERS)
    assert weights[12] > 2 * guard.BARRIER_TERMS > weights[4]
    g = guard.instrument(HELPERS, 10 ** 6, 0)
    budget = {l.line: l.budget for l in g.loops}
    assert budget[12] < budget[4] <= 10 ** 6
    assert budget[12] == 10 ** 6 // weights[12]
    assert guard.instrument(HELPERS, 1000, 0).loops[1].budget == guard.MIN_BUDGET


def test_work_budget():
    w = guard.work_budget(384, 16, 16, 64, 16, 64)
    assert w == guard.TERMS_PER_ELEMENT * 1 * 400 * 128
    assert guard.work_budget(384, 16, 16, 64, 16, 1) == 64 * w  # one invocation does all rows
    assert guard.work_budget(64, 100, 7, 64, 16, 128) == guard.TERMS_PER_ELEMENT * 80 * 164
    with pytest.raises(ValueError, match="n_k"):
        guard.work_budget(0, 16, 16, 64, 16, 64)


def test_reading_the_trips_back():
    g = guard.instrument(HELPERS, 10 ** 6, 0)
    words = lambda *n: np.array(n, dtype="<u4").tobytes()
    assert guard.trips(g, words(0, 0, 0, 0)) == (0, 0, 0, 0)
    for bad in (None, words(0, 0, 0), "text"):
        with pytest.raises(ValueError, match="lab_loop_trips"):
            guard.trips(g, bad)
    assert guard.describe_trips(g, (0, 0, 0, 0), 64) is None
    # main's loop ran away and drove spin's past its budget: main's is the one named
    text = guard.describe_trips(g, (64, 0, 0, 64), 64)
    assert text.startswith("stopped: the `for` loop on line 17 ran past %s iterations in every "
                           "invocation" % "{:,}".format(g.loops[3].budget)), text
    assert "also stopped: the `while` loop on line 4" in text
    text = guard.describe_trips(g, (5, 0, 0, 0), 64)
    assert "the `while` loop on line 4" in text and "in 5 of 64 invocations" in text


@pytest.mark.parametrize("text", [
    "", "for", "fn main() { for (;;) { ", "} } for { fn", "loop { }", "fn main( { loop {} }",
    "fn main() { for (var i = 0u; i < 3u; i++ { } }", "fn main() { while", "fn (",
    "/* unterminated fn main() { loop {} }",
    "fn f() { loop { g(); } } fn g() { while true { f(); } } fn main() { f(); }"])
def test_text_that_is_not_wgsl_is_left_to_the_compiler(text):
    """No exception: the page compiles the learner's own text first and shows its messages."""
    g = guard.instrument(text, 10 ** 6, 7)
    assert_only_inserted(text, g.code)


def test_too_many_call_paths_are_refused():
    source = "fn h() -> u32 { var i = 0u; loop { i++; break; } return i; }\n" \
             "fn main() { var s = 0u;\n" + "  s += h();\n" * (guard.MAX_COUNTERS + 1) + "}\n"
    with pytest.raises(guard.ShaderError, match="loop, call"):
        guard.instrument(source, 10 ** 6, 0)


def test_the_page_gets_the_guarded_shader_and_the_learners_own():
    code = SOLUTIONS["harden"]
    job = next(c["job"] for c in grade(EX, "harden", code)["checks"] if c["id"] == "ragged")
    meta = job["meta"]["guard"]
    assert meta["source"] == code and job["code"] != code
    assert_only_inserted(code, job["code"])
    trips = next(b for b in job["bindings"] if b["name"] == meta["name"])
    assert trips == {"binding": 7, "type": "storage", "name": "lab_loop_trips", "data": None,
                     "size": 4 * len(meta["loops"]), "output": True}
    assert [l["line"] for l in meta["loops"]] == [i + 1 for i, line in enumerate(code.split("\n"))
                                                 if re.search(r"^\s*for \(", line)]
    # a shader whose loops main never reaches binds no trips buffer (WebGPU would refuse it)
    unreached = code.replace("fn ceil_div(a: u32, b: u32) -> u32 {",
                             "fn never_called() { loop { break; } }\nfn ceil_div(a: u32, b: u32) -> u32 {")
    no_loops = re.sub(r"for \(var (\w+) = [^;]*; [^;]*; [^)]*\) \{", r"if (true) {", unreached)
    job = next(c["job"] for c in grade(EX, "harden", no_loops)["checks"] if c["id"] == "ragged")
    assert "lab_loop_trips" not in [b["name"] for b in job["bindings"]]


# ---- on a real WebGPU implementation (wgpu-py on lavapipe) ---------------------------------

def naga_accepts(code: str) -> bool:
    from nlpcore.kernels import flash_wgpu

    try:
        flash_wgpu.device().create_shader_module(code=code)
    except Exception:  # wgpu-py raises its GPUValidationError for a shader naga rejects
        return False
    return True


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_guarded_texts_compile_as_the_originals_do(wgpu_device, name):
    """naga accepts the guarded text exactly when it accepts the learner's own."""
    assert naga_accepts(TEXTS[name])
    assert naga_accepts(guard.instrument(TEXTS[name], 10 ** 6, 7).code)


def unguarded(job: dict) -> dict:
    """The job as the learner wrote it: their own text, without the trips buffer."""
    name = job["meta"]["guard"]["name"]
    return dict(job, code=job["meta"]["guard"]["source"],
                bindings=[b for b in job["bindings"] if b["name"] != name])


@pytest.mark.parametrize("step", sorted(SOLUTIONS))
def test_the_guard_changes_no_output_of_the_solutions(wgpu_device, step):
    from nlpcore.kernels import flash_wgpu

    for check in grade(EX, step, SOLUTIONS[step])["checks"]:
        if check["status"] != "pending":
            continue
        job = check["job"]
        guarded, plain = flash_wgpu.run_spec(job), flash_wgpu.run_spec(unguarded(job))
        assert guarded.pop("lab_loop_trips") == bytes(job["bindings"][-1]["size"])
        for name in ("o", "lse"):
            assert np.array_equal(np.frombuffer(guarded[name], "<f4"), np.frombuffer(plain[name], "<f4"),
                                  equal_nan=True), (step, check["id"], name)


def recording(code: str) -> str:
    """Instrumented code rewritten for measuring: no guard breaks, and each loop's word of the
    trips buffer records the highest count its counter reached (atomicMax)."""
    return re.sub(r" (\(\*\w+\)|\w+) \+= 1u; if \(\1 > (\d+)u\) \{ if \(\1 == \2u \+ 1u\) "
                  r"\{ atomicAdd\(&(\w+)\[(\d+)\], 1u\); \} break; \}",
                  r" \1 += 1u; atomicMax(&\3[\4], \1);", code)


def loop_counts(job: dict):
    from nlpcore.kernels import flash_wgpu

    raw = flash_wgpu.run_spec(dict(job, code=recording(job["code"])))["lab_loop_trips"]
    return np.frombuffer(raw, "<u4")


TINY = shaders.text("flash_fwd.wgsl").replace("override BR: u32;", "override BR: u32 = 1u;") \
                                     .replace("override BC: u32;", "override BC: u32 = 4u;")


def scalar_loops() -> str:
    """The lab's shader written as a learner might: q·k and the update of o as loops over the
    64 head dims of a lane, one float per iteration, in helpers (dynamic indices)."""
    text = SOLUTIONS["harden"]
    dot = text[text.index("fn chunk_dot("):text.index("// o = alpha · o + p.x·v_0")]
    update = text[text.index("fn chunk_update("):text.index("// --- chunk helpers end ---")]
    return text.replace(dot, """\
fn chunk_dot(q_reg: ptr<function, Chunk>, at: u32) -> f32 {
  var s = 0.0;
  for (var x = 0u; x < 4u * CHUNK4; x++) { s += (*q_reg)[x / 4u][x % 4u] * k_tile[at + x / 4u][x % 4u]; }
  return s;
}

""").replace(update, """\
fn chunk_update(o_reg: ptr<function, Chunk>, alpha: f32, p: vec4<f32>, at: u32, stride: u32) {
  for (var x = 0u; x < 4u * CHUNK4; x++) {
    let slot = x / 4u;
    let u = x % 4u;
    (*o_reg)[slot][u] = alpha * (*o_reg)[slot][u] + p.x * v_tile[at + slot][u]
        + p.y * v_tile[at + stride + slot][u] + p.z * v_tile[at + 2u * stride + slot][u]
        + p.w * v_tile[at + 3u * stride + slot][u];
  }
}

""")


@pytest.mark.parametrize("step, code, margin", [("scratch", SOLUTIONS["scratch"], 4),
                                                ("harden", SOLUTIONS["harden"], 4),
                                                ("harden", scalar_loops(), 4),
                                                ("harden", TINY, 3)],
                         ids=["scratch", "harden", "harden-scalar-loops", "harden-1x4-tiles"])
def test_the_solutions_stay_far_within_every_budget(wgpu_device, step, code, margin):
    """Each loop's highest count on every case, against its budget: a correct kernel must
    never trip. With the host's plans the margin is 4 or more (30 for the lab's shaders), also
    when q·k and o's update loop over single head dims; with 1-row, 4-key tiles, one
    invocation stages K and V alone and the staging loop comes nearest (about 3.4×)."""
    for check in grade(EX, step, code)["checks"]:
        if check["status"] != "pending":
            continue
        job = check["job"]
        budgets = [l["budget"] for l in job["meta"]["guard"]["loops"]]
        counts = loop_counts(job)
        assert counts.max() > 0
        for line, count, budget in zip((l["line"] for l in job["meta"]["guard"]["loops"]), counts, budgets):
            assert count * margin <= budget, (check["id"], "line %d" % line, int(count), budget)


def run_first_case(step: str, code: str):
    """Grade ``code`` and run its first GPU case through wgpu-py as the page does; returns the
    verdict and the seconds the dispatch took."""
    from nlpcore.kernels import flash_wgpu

    check = next(c for c in grade(EX, step, code)["checks"] if c["status"] == "pending")
    started = time.time()
    outputs = flash_wgpu.run_spec(check["job"])
    took = time.time() - started
    return verify_js(EX, step, check["id"], code, check["job"], outputs), took


def line_of(code: str, text: str) -> int:
    return code[:code.index(text)].count("\n") + 1


J_LOOP = "for (var j = 0u; j < t_c; j++) {"
ENDLESS = {  # name: (step, code, the text on the loop that runs away)
    "loop-without-break": ("scratch", SOLUTIONS["scratch"].replace(  # naga's, not Tint's
        "  let b = wg.z;", "  let b = wg.z;  loop { }", 1), "loop { }"),
    "loop-whose-exit-never-comes": ("scratch", SOLUTIONS["scratch"].replace(
        "  let b = wg.z;", "  let b = wg.z;  loop { if (params.n_q == 0u) { break; } }", 1), "loop {"),
    "for-without-increment": ("scratch", SOLUTIONS["scratch"].replace(
        J_LOOP, "for (var j = 0u; j < t_c;) {", 1), "for (var j = 0u; j < t_c;) {"),
    "u32-countdown": ("scratch", SOLUTIONS["scratch"].replace(
        J_LOOP, "for (var j = t_c - 1u; j >= 0u; j--) {", 1), "for (var j = t_c - 1u; j >= 0u; j--) {"),
    "inner-loop-next-to-barriers": ("harden", SOLUTIONS["harden"].replace(
        "for (var g = 0u; g < BC; g += 4u) {", "for (var g = 0u; g < BC; g += 0u) {", 1),
        "for (var g = 0u; g < BC; g += 0u) {"),
    "staging-loop-per-invocation": ("harden", SOLUTIONS["harden"].replace(
        "e += BR * KS) {", "e += 0u) {", 1), "for (var e = t; e < BC * width; e += 0u) {"),
    "while-in-a-helper": ("harden", SOLUTIONS["harden"].replace(
        "fn ceil_div(a: u32, b: u32) -> u32 {\n  return (a + b - 1u) / b;",
        "fn ceil_div(a: u32, b: u32) -> u32 {\n  var n = 0u;\n  while (n * b < a) { n = n * 1u; }"
        "\n  return (a + b - 1u) / b;", 1), "while (n * b < a)"),
}


@pytest.mark.parametrize("name", sorted(ENDLESS))
def test_endless_shaders_are_stopped_and_named(wgpu_device, monkeypatch, name):
    """The check fails within seconds, naming the loop that runs away by its line. The work
    budget is cut to an eighth here: Mesa's lavapipe ends any invocation after 65535 loop
    iterations in total (flash_wgpu.LAVAPIPE_LOOP_LIMIT), silently, which would otherwise end
    a light endless loop before its guard does; browsers have no such limit."""
    monkeypatch.setattr(guard, "TERMS_PER_ELEMENT", guard.TERMS_PER_ELEMENT // 8)
    step, code, runaway = ENDLESS[name]
    assert code not in SOLUTIONS.values()
    verdict, took = run_first_case(step, code)
    assert verdict["status"] == "fail", verdict
    message = verdict["message"]
    kind = re.match(r"\w+", runaway).group()
    assert "stopped: the `%s` loop on line %d ran past" % (kind, line_of(code, runaway)) in message, message
    assert "does it ever finish?" in message and verdict["got"] == "stopped by the loop guard"
    assert took < 20, took
