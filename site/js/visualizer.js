// The tiling visualizer: draws the trace that nlpcore.kernels.flash_np emits.
//
// Python (nlpcore.web.viz.trace, run in the Pyodide worker) runs the kernel with trace=[] and
// io=IOCounter() and returns its events, plus io_model's closed form. js/viz/fold.js folds
// those events into a picture — which blocks are in SRAM, which tiles were visited, the rows'
// (m, l), the running HBM counters — js/viz/draw.js draws it, js/viz/describe.js words each
// step, and js/player.js (shared with the ring view) steps through it. Nothing here re-computes
// the algorithm. This module reads the parameters, asks Python for the plan and the trace, and
// sets the closed form beside the H200's counters.

import { getRuntime } from "./runtime.js";
import { gb, loadH200, modelBytes } from "./measured.js";
import { createPlayer } from "./player.js";
import { fillSelect } from "./form.js";
import { foldTo, tensorsOf } from "./viz/fold.js";
import { describe } from "./viz/describe.js";
import { drawCounters, drawHBM, drawStats, drawTile, drawTileMap } from "./viz/draw.js";

const $ = (id) => document.getElementById(id);
const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));

const view = {
  result: null, // what viz.trace returned
  steps: [],
  tensors: [], // tensors that appear in the trace, drawn left to right
  player: null, // js/player.js over positions 0..steps.length (0 = before the first event)
};

function render(pos) {
  if (!view.result) return;
  const p = view.result.params;
  const f = foldTo(view.steps, pos, p);
  $("pos-step").textContent = String(pos);
  $("pos-total").textContent = String(view.steps.length);
  $("event-text").textContent = describe(pos ? view.steps[pos - 1] : null, p);
  drawHBM(f, p, view.tensors);
  drawTileMap(f, p);
  drawTile(f);
  drawCounters(f, p, view.result, pos === view.steps.length);
  drawStats(f, p, view.player.playing);
}

function makePlayer() {
  view.player = createPlayer({
    last: () => view.steps.length,
    onChange: render,
    controls: {first: $("b-start"), prev: $("b-prev"), play: $("b-play"), next: $("b-next"), end: $("b-end"),
               scrub: $("scrub"), speed: $("speed")},
    intervalMs: () => 1000 / Number($("speed").value),
    keys: true,
    live: $("event-text"),
  });
  $("speed").addEventListener("input", () => { $("speed-val").textContent = $("speed").value; });
}

// ---- parameters and Python ------------------------------------------------------------------

function setStatus(state, text) {
  const s = $("viz-status");
  s.dataset.status = state;
  s.textContent = text;
}

function readParams() {
  const form = $("viz-params");
  return {
    n: Number(form.n.value),
    d: Number(form.d.value),
    sram: Number(form.sram.value),
    causal: form.causal.checked,
    loop_order: form.order.value,
    mode: form.mode.value,
  };
}

/* With backward selected the loop-order control shows what backward runs (K/V outer) and is
 * locked; switching back to forward restores the learner's own choice. */
let forwardOrder = null;
function showBackwardOrder(mode) {
  const form = $("viz-params");
  const radios = [...form.querySelectorAll('input[name="order"]')];
  if (mode === "backward") {
    if (forwardOrder === null) forwardOrder = form.order.value;
    form.querySelector('input[name="order"][value="kv_outer"]').checked = true;
  } else if (forwardOrder !== null) {
    form.querySelector(`input[name="order"][value="${forwardOrder}"]`).checked = true;
    forwardOrder = null;
  }
  for (const r of radios) r.disabled = mode === "backward";
  $("order-note").hidden = mode !== "backward";
}

/* After a change of the parameters, the panels still show the last trace: grey them and say
 * which settings they show until "Run trace" makes a new one. */
function markStale() {
  if (!view.result) return;
  const shown = view.result.params;
  const now = readParams();
  const same = shown.n === now.n && shown.d === now.d && shown.sram === now.sram &&
      Boolean(shown.causal) === now.causal && shown.mode === now.mode &&
      (now.mode === "backward" || shown.loop_order === now.loop_order);
  $("viz-grid").dataset.stale = same ? "0" : "1";
  $("stale").hidden = same;
  $("stale").textContent = same ? "" : `The panels below still show the last trace (N = ${shown.n}, ` +
      `d = ${shown.d}, M = ${shown.sram}${shown.causal ? ", causal" : ""}, ${shown.mode}` +
      `${shown.mode === "forward" ? `, ${shown.loop_order === "q_outer" ? "Q outer" : "K/V outer"}` : ""}). ` +
      "Press Run trace to trace the new settings.";
}

async function updatePlan(rt) {
  const { n, d, sram, mode } = readParams();
  showBackwardOrder(mode);
  markStale();
  try {
    const plan = await rt.call("viz.plan", { n, d, sram }, { timeoutMs: 20000 });
    const text = `Br = min(⌈M/4d⌉, d) = ${plan.br}, Bc = ⌈M/4d⌉ = ${plan.bc} → Tr × Tc = ${plan.t_r} × ${plan.t_c} = ${plan.tiles} tiles` +
      (mode === "backward" ? " (the backward pass runs K/V outer)" : "");
    $("plan").textContent = plan.ok ? text : `${text}. ${plan.reason}.`;
    $("plan").classList.toggle("bad", !plan.ok);
    $("run").disabled = !plan.ok;
    return plan.ok;
  } catch (err) {
    $("plan").textContent = `Cannot plan: ${err.message}`;
    $("run").disabled = true;
    return false;
  }
}

async function runTrace(rt) {
  view.player.setPlaying(false);
  const params = readParams();
  setStatus("running", "Running the kernel with trace=[] …");
  $("run").disabled = true;
  try {
    const t0 = performance.now();
    const res = await rt.call("viz.trace", params, { timeoutMs: 60000 });
    view.result = res;
    view.steps = res.steps;
    view.tensors = tensorsOf(res.steps);
    $("stats-body").replaceChildren();
    const ms = Math.round(performance.now() - t0);
    setStatus("ready", `Trace ready: ${fmt(res.events)} events` +
      (res.grouped ? `, shown as ${fmt(res.steps.length)} steps (one per outer-loop iteration; counters stay exact)` : "") +
      ` — ${ms} ms. Blocks Br=${res.params.br}, Bc=${res.params.bc}.`);
    document.body.dataset.grouped = String(res.grouped);
    const url = new URL(window.location.href);
    url.searchParams.set("n", params.n);
    url.searchParams.set("d", params.d);
    url.searchParams.set("m", params.sram);
    url.searchParams.set("order", params.loop_order);
    url.searchParams.set("mode", params.mode);
    if (params.causal) url.searchParams.set("causal", "1"); else url.searchParams.delete("causal");
    history.replaceState(null, "", url);
    markStale();
    view.player.goTo(0);
  } catch (err) {
    setStatus("error", `The trace could not be computed: ${err.message}`);
  } finally {
    $("run").disabled = false;
  }
}

// ---- the closed form beside hardware counters --------------------------------------------

async function showMeasured() {
  const box = document.querySelector('[data-testid="viz-measured"]');
  const body = $("viz-measured-body");
  const note = $("viz-measured-note");
  const got = await loadH200();
  if (!got.figure2) {
    box.dataset.status = got.missing ? "not-recorded" : "error";
    note.textContent = got.missing ? "Not recorded in this build (bench/io_h200.py on a GPU writes it)." : got.error;
    return;
  }
  const labels = {baseline: "standard, PyTorch ops", triton: "tiled, fused (Triton)"};
  for (const [impl, label] of Object.entries(labels)) {
    const r = got.figure2[impl];
    const tr = document.createElement("tr");
    for (const text of [label, gb(r.hbm_bytes), gb(modelBytes(r))]) {
      const cell = document.createElement(tr.children.length ? "td" : "th");
      if (!tr.children.length) cell.scope = "row";
      cell.textContent = text;
      tr.appendChild(cell);
    }
    body.appendChild(tr);
  }
  const t = got.figure2.triton;
  note.textContent = `With M = the ${Math.round((got.record.environment.l2_bytes || 0) / 2 ** 20)} MiB L2 cache in ` +
    `place of the SRAM, the model gives ${gb(t.model_bytes.flash_l2)} GB for the fused kernel: a head's K and V stay ` +
    `in the L2 while its query blocks run, so most re-reads the SRAM's tiles would cost never reach HBM. ` +
    `Details: the performance page, section 6.`;
  box.dataset.status = "recorded";
}

async function main() {
  showMeasured().catch((err) => {
    const box = document.querySelector('[data-testid="viz-measured"]');
    box.dataset.status = "error";
    $("viz-measured-note").textContent = `The H200 record could not be shown: ${err.message}`;
  });
  makePlayer();
  const rt = getRuntime();
  rt.onProgress((ev) => {
    if ($("viz-status").dataset.status === "loading" && ev && ev.message) setStatus("loading", `Starting Python: ${ev.message}`);
  });
  try {
    await rt.ready;
  } catch (err) {
    setStatus("error", `Python (Pyodide) is unavailable, so there is no trace to draw: ${err.message}`);
    return;
  }
  const opts = await rt.call("viz.options", {}, { timeoutMs: 20000 });
  const q = new URLSearchParams(window.location.search);
  const num = (key, fallback) => (q.has(key) ? Number(q.get(key)) : fallback);
  const form = $("viz-params");
  fillSelect(form.n, opts.n, num("n", 48));
  fillSelect(form.d, opts.d, num("d", 4));
  fillSelect(form.sram, opts.sram, num("m", 128));
  form.causal.checked = q.get("causal") === "1";
  const order = q.get("order") === "q_outer" ? "q_outer" : "kv_outer";
  form.querySelector(`input[name="order"][value="${order}"]`).checked = true;
  const mode = q.get("mode") === "backward" && opts.backward_trace ? "backward" : "forward";
  form.querySelector(`input[name="mode"][value="${mode}"]`).checked = true;
  if (!opts.backward_trace) {
    const b = form.querySelector('input[name="mode"][value="backward"]');
    b.disabled = true;
    b.parentElement.title = "This build's flash_np.backward emits no trace.";
  }
  form.addEventListener("change", () => updatePlan(rt));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (await updatePlan(rt)) runTrace(rt);
  });
  if (await updatePlan(rt)) await runTrace(rt);
  else setStatus("error", "These parameters are too large to step through; pick a larger M or a smaller N.");
}

// ?view=ring shows the ring view instead (js/ring-viz.js); this module then stays idle.
if (new URLSearchParams(window.location.search).get("view") !== "ring") {
  main().catch((err) => setStatus("error", `The visualizer failed to start: ${err.message}`));
}
