"""The lab page and its Python side.

Browser tests drive the built site in headless Chromium with WebGPU on SwiftShader: the page
must reach "match" (GPU == mirror == flash_np) for ragged, causal and padded shapes, show the
adapter and the workgroup bytes, refuse a d that cannot fit 16384 bytes, fall back to the CPU
paths without WebGPU, and state a reason when Pyodide or the shader fails. The `page` fixture
(conftest.py) fails a test on any console error or any request that leaves 127.0.0.1.

CPython tests run the same `nlpcore.web.lab` functions, with the shader executed natively by
wgpu-py (lavapipe) where the browser would use navigator.gpu.
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from nlpcore import tolerances, web
from nlpcore.web import lab

# Browser shapes: (n, d, causal, padding, heads). Ragged everywhere (N is no multiple of Br or
# Bc); the last one masks every key, so every row is fully masked (o = 0, lse = -inf).
SHAPES = [
    (77, 32, False, 0, 1),
    (130, 80, True, 0, 2),
    (45, 16, True, 7, 3),
    (1, 128, False, 0, 1),
    (19, 64, False, 19, 2),
]
FINAL = ("match", "mismatch", "error", "no-webgpu")
GPU_VS_MIRROR_BAR = 1e-5  # the acceptance bar, relative to values of order 1-10


def set_inputs_and_run(page, n, d, causal, padding, heads, seed=0) -> dict:
    """Fill the form, click Run, and return the `lab:compared` event's detail."""
    return page.evaluate(
        """async ([n, d, causal, padding, heads, seed]) => {
          const set = (id, value) => { document.getElementById(id).value = String(value); };
          set('in-n', n); set('in-d', d); set('in-padding', padding); set('in-heads', heads);
          set('in-seed', seed); document.getElementById('in-causal').checked = causal;
          const done = new Promise((resolve) => document.addEventListener(
              'lab:compared', (event) => resolve(event.detail), {once: true}));
          document.getElementById('run').click();
          return await done;
        }""", [n, d, causal, padding, heads, seed])


def compare_attrs(page):
    box = page.locator('[data-testid="compare"]')
    return box.get_attribute("data-status"), box.get_attribute("data-max-abs-err")


def tile_bytes(page):
    text = page.inner_text('[data-testid="tile-bytes"]')
    match = re.fullmatch(r"(\d+) / (\d+) bytes", text.strip())
    assert match, text
    return int(match.group(1)), int(match.group(2))


# ---------------------------------------------------------------------------------------------
# Browser
# ---------------------------------------------------------------------------------------------

def test_lab_matches_for_several_shapes(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html")
    assert browser_helpers.wait_for_runtime(page) == "ready"
    # The page runs its default problem on its own once Python is ready.
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    assert "swiftshader" in page.inner_text('[data-testid="adapter"]').lower()
    # The loading indicator went through its three stages.
    assert page.locator('[data-testid="runtime"] li.done').count() == 3
    assert page.eval_on_selector("#runtime-progress", "el => el.value") == 3
    assert "NumPy 1.17.5" in page.inner_text("#runtime-message")

    for n, d, causal, padding, heads in SHAPES:
        detail = set_inputs_and_run(page, n, d, causal, padding, heads)
        shape = dict(n=n, d=d, causal=causal, padding=padding, heads=heads)
        assert detail["status"] == "match", (shape, detail)
        status, max_abs = compare_attrs(page)
        assert status == "match", shape
        assert float(max_abs) == detail["maxAbsErr"] <= GPU_VS_MIRROR_BAR, (shape, max_abs)
        pairs = {p["pair"]: p for p in detail["pairs"]}
        assert set(pairs) == {"gpu_vs_mirror", "gpu_vs_flash_np", "mirror_vs_flash_np"}
        assert all(p["ok"] for p in pairs.values()), shape
        fully_masked = heads * n if padding == n else 0
        assert pairs["gpu_vs_mirror"]["fully_masked_rows"] == fully_masked, shape
        used, limit = tile_bytes(page)
        assert limit == 16384 and 0 < used <= limit, shape
        assert used == detail["plan"]["bytes_used"]
        rows = page.locator("#results-body tr")
        assert rows.count() == 3 and "agree" in rows.nth(0).inner_text()


def test_d_that_cannot_fit_16384_bytes_is_refused_with_the_reason(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=8&d=1024")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "error"
    message = page.inner_text("#error")
    assert "16384" in message and "maxComputeWorkgroupStorageSize" in message, message
    assert message.startswith("ValueError"), message
    # The page recovers: a size that fits runs and matches.
    assert set_inputs_and_run(page, 8, 64, False, 0, 1)["status"] == "match"


def test_without_webgpu_the_cpu_paths_still_run(open_page, site_url, browser_helpers):
    page = open_page(webgpu=False)
    page.goto(site_url + "lab.html?n=50&d=32&causal=1&padding=3")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "no-webgpu"
    adapter = page.inner_text('[data-testid="adapter"]')
    assert adapter.startswith("none") and "navigator.gpu" in adapter, adapter
    status, max_abs = compare_attrs(page)
    assert float(max_abs) <= 2e-5
    assert "agree" in page.inner_text("#results-body")
    assert page.locator("#results-body tr").count() == 1
    used, limit = tile_bytes(page)
    assert used <= limit == 16384


def test_webgpu_without_an_adapter_says_so(page, site_url, browser_helpers):
    page.context.add_init_script(
        "navigator.gpu.requestAdapter = async () => null;")
    page.goto(site_url + "lab.html?n=20&d=16")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "no-webgpu"
    assert "no adapter" in page.inner_text('[data-testid="adapter"]')


def test_offsite_requests_are_blocked_and_recorded(page, site_url):
    """The guard behind every browser test's 'no request leaves 127.0.0.1' check works."""
    page.goto(site_url + "lab.html")
    outcome = page.evaluate(
        "fetch('https://example.com/x.js').then(() => 'loaded', (e) => 'blocked: ' + e.name)")
    assert outcome.startswith("blocked")
    assert page.lab_log.offsite == ["https://example.com/x.js"]
    page.lab_log.offsite.clear()
    page.lab_log.allowed.append("example.com")  # the aborted fetch logs a console error


def test_pyodide_failure_shows_a_stated_error(page, site_url, browser_helpers):
    page.context.route("**/vendor/pyodide/pyodide.asm.wasm",
                       lambda route: route.fulfill(status=404, body="gone"))
    browser_helpers.allow_console_error(page, "")  # the failed load is logged by the browser
    page.goto(site_url + "lab.html")
    assert browser_helpers.wait_for_runtime(page) == "error"
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "error"
    assert "Python could not start" in page.inner_text("#error")
    assert "error" in page.get_attribute('[data-testid="runtime"]', "data-stage")


def test_shader_compile_errors_are_reported_with_line_and_column(page, site_url, browser_helpers):
    page.context.route("**/wgsl/flash_fwd.wgsl", lambda route: route.fulfill(
        status=200, content_type="text/plain", body="@compute @workgroup_size(1)\nfn main() {\n  let x = ;\n}\n"))
    browser_helpers.allow_console_error(page, "")  # Dawn logs the compilation error itself
    page.goto(site_url + "lab.html?n=8&d=16&tier=portable")  # flash_fwd.wgsl is the portable tier's
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "error"
    message = page.inner_text("#error")
    assert "WGSL compilation failed" in message and re.search(r"flash_fwd\.wgsl:3:\d+", message), message


def test_runtime_time_limit_restarts_the_worker(page, site_url, browser_helpers):
    page.goto(site_url + "lab.html?n=4&d=16")
    assert browser_helpers.wait_for_status(page, "compare", FINAL) == "match"
    outcome = page.evaluate("""async () => {
        const {getRuntime} = await import('./js/runtime.js');
        const rt = getRuntime();
        let first;
        try { await rt.call('lab.prepare', {n: 1024, d: 64, heads: 4}, {timeoutMs: 50});
              first = 'finished'; }
        catch (error) { first = error.message; }
        const again = await rt.call('lab.limits', {});
        let bad;
        try { await rt.call('lab.nope', {}); } catch (error) { bad = error.message; }
        return {first, storage: again.storage_limit, bad};
    }""")
    assert "time limit" in outcome["first"], outcome
    assert outcome["storage"] == 16384
    assert outcome["bad"].startswith("ValueError") and "does not export" in outcome["bad"]


# ---------------------------------------------------------------------------------------------
# CPython: the door and the lab functions (the browser runs the same code in Pyodide)
# ---------------------------------------------------------------------------------------------

def test_call_reaches_only_exported_functions():
    assert web.call("lab.limits", {})["storage_limit"] == 16384
    with pytest.raises(ValueError, match="does not export 'make_inputs'"):
        web.call("lab.make_inputs", {"n": 1, "d": 1, "padding": 0, "heads": 1, "seed": 0})
    with pytest.raises(ValueError, match="no module nlpcore.web.nope"):
        web.call("nope.run")
    for bad in ("lab", "lab.__init__", "Lab.limits", "lab.limits.x", "../lab.limits"):
        with pytest.raises(ValueError, match="name"):
            web.call(bad)
    with pytest.raises(TypeError, match="name"):
        web.call(3)
    with pytest.raises(TypeError, match="payload"):
        web.call("lab.limits", [1])


def test_json_door_round_trips_bytes_and_non_finite_floats():
    value = {"b": b"\x00\x01\xff", "x": [float("inf"), -float("inf"), 1.5], "n": None}
    decoded = web.decode(web.encode(value))
    assert decoded["b"] == value["b"] and decoded["x"][:2] == [float("inf"), -float("inf")]
    assert np.isnan(web.decode(web.encode(float("nan"))))
    out = web.call_json("lab.limits", "{}")
    assert '"storage_limit":16384' in out


@pytest.mark.parametrize("kwargs, error, words", [
    ({"n": 0}, ValueError, "n: expected an integer in [1,"),
    ({"n": 2.5}, TypeError, "n: expected an integer"),
    ({"n": float("nan")}, TypeError, "n: expected an integer"),
    ({"causal": "yes"}, TypeError, "causal"),
    ({"n": 4, "padding": 5}, ValueError, "padding"),
    ({"heads": 5}, ValueError, "heads"),
    ({"n": 1025}, ValueError, "n: expected an integer in [1, 1024]"),
    ({"d": 1024}, ValueError, "16384"),
])
def test_prepare_rejects_bad_input_naming_it(kwargs, error, words):
    with pytest.raises(error) as info:
        lab.prepare(**kwargs)
    assert words in str(info.value)


def _native_gpu_available() -> bool:
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        from nlpcore.kernels import flash_wgpu

        flash_wgpu.device()
    except Exception:  # no wgpu-py or no Vulkan adapter: the CPython GPU tests cannot run
        return False
    return True


needs_native_gpu = pytest.mark.skipif(not _native_gpu_available(),
                                      reason="wgpu-py with a Vulkan adapter (lavapipe) is needed")


@needs_native_gpu
@pytest.mark.parametrize("n, d, causal, padding, heads", SHAPES)
def test_prepare_then_compare_matches_with_the_native_gpu(n, d, causal, padding, heads):
    from nlpcore.kernels import flash_wgpu

    args = dict(n=n, d=d, causal=causal, padding=padding, heads=heads, seed=1)
    prepared = web.call("lab.prepare", args)
    assert prepared["cpu"]["ok"], prepared["cpu"]
    assert prepared["plan"]["bytes_used"] <= 16384
    outputs = flash_wgpu.run_spec(lab.prepare(**args)["spec"])
    result = web.call("lab.compare", dict(args, outputs=outputs))
    assert result["status"] == "match", result["pairs"]
    assert result["max_abs_err"] <= GPU_VS_MIRROR_BAR


@needs_native_gpu
def test_compare_detects_a_wrong_gpu_result():
    """The verdict can fail: one corrupted output element makes it a mismatch."""
    from nlpcore.kernels import flash_wgpu

    args = dict(n=37, d=32, causal=True, padding=4, heads=2, seed=2)
    outputs = flash_wgpu.run_spec(lab.prepare(**args)["spec"])
    o = np.frombuffer(outputs["o"], dtype="<f4").copy()
    o[5 * 32 + 3] += 1e-3
    result = lab.compare(**args, outputs=dict(outputs, o=o.tobytes()))
    assert result["status"] == "mismatch"
    assert not result["pairs"][0]["ok"] and "o:" in result["pairs"][0]["problem"]
    assert result["pairs"][2]["ok"]  # mirror vs flash_np is untouched


def test_compare_pair_rules_for_fully_masked_rows():
    o = np.zeros((1, 2, 3), np.float32)
    lse = np.array([[-np.inf, 0.5]], np.float32)
    ok = lab.compare_pair("gpu_vs_mirror", (o, lse), (o.copy(), lse.copy()))
    assert ok["ok"] and ok["fully_masked_rows"] == 1
    finite = lse.copy()
    finite[0, 0] = -1e30  # a sentinel leaking out instead of -inf
    bad = lab.compare_pair("gpu_vs_mirror", (o, finite), (o, lse))
    assert not bad["ok"] and "no allowed key" in bad["problem"]
    nan = o.copy()
    nan[0, 1, 0] = np.nan
    assert "NaN" in lab.compare_pair("gpu_vs_mirror", (nan, lse), (o, lse))["problem"]


def test_lab_says_what_to_expect_on_a_real_gpu_from_the_records(page, site_url, lab_dist):
    # Numbers on the page come from the recorded benchmarks, not typed into the page.
    import json

    record = json.loads((lab_dist / "bench" / "results" / "webgpu_h200.json").read_text())
    engine = [e for e in record["engines"] if e.get("cpu_adapter") is False][0]
    at = {s["n"]: s["naive_over_tiled"] for s in engine["speedups"] if s.get("heads", 1) == 1}
    page.goto(site_url + "lab.html")
    page.wait_for_function("document.querySelector('[data-testid=gpu-expectations]').dataset.status !== 'loading'")
    assert page.get_attribute("[data-testid=gpu-expectations]", "data-status") == "recorded"
    text = page.inner_text("[data-testid=gpu-expectations]")
    assert engine["adapter"] in text
    assert "{:.2g}× faster than the naive one at N = 2048".format(at[2048]) in text
    assert "{:.2g}× at N = 4096".format(at[4096]) in text
    assert "CPU adapters" in text


# ---- the comparison's controls: refusals, float16, time limits, cancel (issue 16, 4.1/4.11/4.12) --

FINAL_OR_CANCELLED = ("match", "mismatch", "error", "no-webgpu", "cancelled")


def run(page, **params):
    """Fill the form (precision included), click Run, return the `lab:compared` detail."""
    return page.evaluate(
        """async (p) => {
          for (const [k, v] of Object.entries(p)) {
            const el = document.getElementById('in-' + k);
            if (el.type === 'checkbox') el.checked = v; else el.value = String(v);
          }
          const done = new Promise((resolve) => document.addEventListener(
              'lab:compared', (event) => resolve(event.detail), {once: true}));
          document.getElementById('run').click();
          return await done;
        }""", params)


def open_lab(page, site_url, helpers, query=""):
    page.goto(site_url + "lab.html" + query)
    assert helpers.wait_for_runtime(page) == "ready"
    assert helpers.wait_for_status(page, "compare", FINAL_OR_CANCELLED) in ("match", "error")


def test_a_refused_run_shows_no_old_tile_plan(page, site_url, browser_helpers):
    open_lab(page, site_url, browser_helpers)
    assert run(page, n=64, d=128, heads=1)["status"] == "match"
    assert page.get_attribute('[data-testid="tile-bytes"]', "data-bytes") != ""
    detail = run(page, n=64, d=1024, heads=1)
    assert detail["status"] == "error" and detail["plan"] is None
    assert page.inner_text('[data-testid="tile-bytes"]') == "—"
    assert page.inner_text("#dispatch") == "—"
    assert "refused" in page.inner_text("#plan")
    assert page.locator("#tile-bar span").count() == 0


def test_float16_precision_runs_all_three_and_widens_only_the_flash_np_bar(page, site_url,
                                                                          browser_helpers):
    open_lab(page, site_url, browser_helpers)
    detail = run(page, n=77, d=32, heads=2, causal=True, padding=3, precision="float16")
    assert detail["status"] == "match", detail
    assert detail["params"]["precision"] == "float16"
    pairs = {p["pair"]: p for p in detail["pairs"]}
    half = tolerances.PAGE_FLOAT16["gpu_vs_flash_np"].rtol
    assert pairs["gpu_vs_mirror"]["rtol"] == tolerances.PAGE["gpu_vs_mirror"].rtol
    assert pairs["gpu_vs_flash_np"]["rtol"] == half > tolerances.PAGE["gpu_vs_flash_np"].rtol
    # flash_np's float16 o really differs by more than the float32 bar would allow.
    assert pairs["gpu_vs_flash_np"]["o_max_abs"] > tolerances.PAGE["gpu_vs_flash_np"].atol
    float32 = run(page, n=77, d=32, heads=2, causal=True, padding=3, precision="float32")
    assert {p["pair"]: p["rtol"] for p in float32["pairs"]}["gpu_vs_flash_np"] == \
        tolerances.PAGE["gpu_vs_flash_np"].rtol


def test_a_run_that_would_take_too_long_is_refused_up_front(page, site_url, browser_helpers):
    open_lab(page, site_url, browser_helpers)
    for n, d, heads in ((1024, 448, 4), (1024, 256, 4), (1024, 136, 4)):
        started = time.time()
        detail = run(page, n=n, d=d, heads=heads, precision="float32")
        assert time.time() - started < 10
        assert detail["status"] == "error" and detail["plan"] is None
        message = page.inner_text("#error")
        assert "too long" in message and str(lab.MAX_SCORE_MACS) in message, message
    # The run the issue found (N = 1024, d = 1020, 4 heads) no longer fits the tile plan either.
    assert run(page, n=1024, d=1020, heads=4)["status"] == "error"
    assert "no tile plan fits" in page.inner_text("#error")


def test_a_long_run_shows_progress_and_can_be_cancelled(page, site_url, browser_helpers):
    browser_helpers.allow_console_error(page, "Python was restarted")
    open_lab(page, site_url, browser_helpers)
    page.evaluate("() => { for (const [k, v] of Object.entries({n: 1024, d: 64, heads: 4}))"
                  " document.getElementById('in-' + k).value = String(v);"
                  " document.getElementById('run').click(); }")
    page.wait_for_selector('[data-testid="cancel"]:visible')
    page.wait_for_function("/\\(\\d+ s so far\\)/.test(document.getElementById('run-progress').textContent)")
    assert "mirror" in page.inner_text('[data-testid="run-progress"]')
    page.click('[data-testid="cancel"]')
    assert page.get_attribute('[data-testid="compare"]', "data-status") == "cancelled"
    assert page.get_attribute('[data-testid="run-progress"]', "data-state") == "cancelled"
    page.wait_for_selector("#run:not([disabled])", timeout=120000)
    assert run(page, n=40, d=16, heads=1)["status"] == "match"
