/* The lab page: one attention problem, three implementations, one verdict.
 *
 *   Python (worker)  lab.prepare  -> inputs, tile plan, flash_np + mirror, dispatch spec
 *   WebGPU (gpu.js)  runSpec      -> raw bytes of o and lse from wgsl/flash_fwd.wgsl
 *   Python (worker)  lab.compare  -> max |delta| for GPU vs mirror, GPU vs flash_np, mirror vs flash_np
 *
 * Page contract: [data-testid=compare] carries data-status (running | match | mismatch | error | cancelled |
 * no-webgpu) and data-max-abs-err (GPU vs mirror; mirror vs flash_np without WebGPU);
 * [data-testid=adapter] names the adapter; [data-testid=tile-bytes] shows "<used> / 16384 bytes".
 * After every run the page dispatches `lab:compared` on document with the numbers in
 * event.detail (see `report` below), for the guided steps (js/lab-steps.js, loaded if present).
 * Inputs can be preset from the URL: lab.html?n=77&d=32&causal=1&padding=5&heads=1&seed=3&precision=float16;
 * otherwise the inputs of the last visit come back (js/lab-memory.js).
 * While a guided step's prediction is pending, js/lab-steps.js hides the results it asks about
 * ([data-veiled] on the compare box); they are computed and reported as always.
 *
 * A run shows its stage and elapsed time ([data-testid=run-progress]) and can be cancelled
 * ([data-testid=cancel]: the Python worker is terminated and restarted, the only way to stop
 * it); a size whose mirror would take too long is refused by lab.prepare before any work. Each
 * new run clears the previous tile plan first, so a refused run never shows an old plan.
 */
import {getRuntime} from "./runtime.js";
import {openGpu, runSpec} from "./gpu.js";
import {chooseTier, openTierDevice} from "./tiers.js";
import {savedForm, saveForm} from "./lab-memory.js";

const $ = (id) => document.getElementById(id);
const STAGES = ["runtime", "numpy", "nlpcore"];
const FIELDS = ["n", "d", "padding", "heads", "seed"];
const PRECISIONS = ["float32", "float16"];
const PAIR_LABELS = {
  gpu_vs_mirror: "GPU (WGSL) vs CPU mirror",
  gpu_vs_flash_np: "GPU (WGSL) vs flash_np",
  mirror_vs_flash_np: "CPU mirror vs flash_np",
};

const runtime = getRuntime();
const gpuReady = openGpu().then((gpu) => ({gpu}), (error) => ({error}));
const tierDevices = new Map();  // tier id -> Promise of its device (one each, made on first use)
let runCounter = 0;

function tierDevice(defaultGpu, tier) {
  if (!tierDevices.has(tier)) {
    tierDevices.set(tier, openTierDevice(defaultGpu.adapter, tier, defaultGpu.name));
    tierDevices.get(tier).catch(() => tierDevices.delete(tier));
  }
  return tierDevices.get(tier);
}
let lastReport = null;

/* ---- formatting ------------------------------------------------------------------------- */

function fmt(x) {
  if (x === null || x === undefined) return "—";
  if (x === 0) return "0";
  if (!Number.isFinite(x)) return String(x);
  return Math.abs(x) >= 1e-2 && Math.abs(x) < 1e4 ? x.toPrecision(4) : x.toExponential(2);
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

/* ---- runtime progress ------------------------------------------------------------------- */

runtime.onProgress(({stage, message}) => {
  const box = document.querySelector('[data-testid="runtime"]');
  box.dataset.stage = stage;
  const reached = stage === "ready" ? STAGES.length : STAGES.indexOf(stage);
  for (const li of box.querySelectorAll("li[data-stage]")) {
    const index = STAGES.indexOf(li.dataset.stage);
    li.className = index < reached ? "done" : (index === reached ? "active" : "");
  }
  if (reached >= 0) $("runtime-progress").value = reached;
  $("runtime-message").textContent = stage === "ready" ? `ready: ${message}` : message;
  if (stage === "error") $("runtime-message").classList.add("error-text");
});

/* ---- GPU facts -------------------------------------------------------------------------- */

gpuReady.then(({gpu, error}) => {
  if (error) {
    $("adapter").textContent = `none: ${error.message}`;
    $("adapter").dataset.available = "false";
    $("storage-limit").textContent = "— (no WebGPU device)";
    return;
  }
  $("adapter").textContent = gpu.name;
  $("adapter").dataset.available = "true";
  $("storage-limit").textContent =
      `${gpu.limits.maxComputeWorkgroupStorageSize} bytes (device requested with default limits)`;
});

/* ---- inputs ----------------------------------------------------------------------------- */

/* The inputs the learner last chose (js/lab-memory.js), so that a reload keeps them. */
function restoreForm() {
  const saved = savedForm();
  if (!saved) return;
  for (const field of FIELDS) {
    if (saved[field] !== null && saved[field] !== undefined) $(`in-${field}`).value = String(saved[field]);
  }
  $("in-causal").checked = Boolean(saved.causal);
  if (PRECISIONS.includes(saved.precision)) $("in-precision").value = saved.precision;
  if ([...$("in-tier").options].some((o) => o.value === saved.tier)) $("in-tier").value = saved.tier;
}

function presetFromUrl() {
  const query = new URLSearchParams(location.search);
  for (const field of FIELDS) {
    if (query.has(field)) $(`in-${field}`).value = query.get(field);
  }
  if (query.has("causal")) $("in-causal").checked = ["1", "true", "yes"].includes(query.get("causal"));
  if (PRECISIONS.includes(query.get("precision"))) $("in-precision").value = query.get("precision");
  if (query.has("tier")) $("in-tier").value = query.get("tier");
}

function readParams() {
  const params = {};
  for (const field of FIELDS) {
    const text = $(`in-${field}`).value.trim();
    params[field] = text === "" ? null : Number(text);
  }
  params.causal = $("in-causal").checked;
  params.precision = $("in-precision").value;
  params.tier = $("in-tier").value;  // "best" or a tier id; runComparison resolves it
  return params;
}

/* ---- showing results -------------------------------------------------------------------- */

function setStatus(status, maxAbsErr, verdict) {
  const box = $("compare");
  box.dataset.status = status;
  box.dataset.maxAbsErr = maxAbsErr === null || maxAbsErr === undefined ? "" : String(maxAbsErr);
  $("verdict").textContent = verdict;
  $("verdict").className = `verdict ${status}`;
}

function showError(text) {
  $("error").hidden = !text;
  $("error").textContent = text || "";
}

/* No plan on show: before a run's own plan arrives, and when the run is refused. */
function clearPlan(reason) {
  $("plan").textContent = reason;
  $("tile-bytes").textContent = "—";
  $("tile-bytes").dataset.bytes = "";
  $("dispatch").textContent = "—";
  $("tile-bar").replaceChildren();
  $("plan").dataset.state = "none";
}

function showPlan(prepared) {
  $("plan").dataset.state = "shown";
  const plan = prepared.plan;
  const heads = prepared.args.heads;
  $("plan").textContent = `Br = ${plan.br} query rows × Bc = ${plan.bc} key rows, ` +
      `${plan.ks} invocation${plan.ks > 1 ? "s" : ""} per row (64 head dims of q and o each, in registers), ` +
      `${plan.workgroup_size} invocations per workgroup`;
  $("tile-bytes").textContent = `${plan.bytes_used} / ${plan.storage_limit} bytes`;
  $("tile-bytes").dataset.bytes = String(plan.bytes_used);
  const wg = prepared.spec.workgroups;
  $("dispatch").textContent = `${wg[0]} × ${wg[1]} × ${wg[2]} workgroups ` +
      `(⌈N / Br⌉ query tiles × ${heads} head${heads === 1 ? "" : "s"})`;
  const bar = $("tile-bar");
  bar.replaceChildren();
  for (const array of plan.arrays) {
    const part = document.createElement("span");
    part.style.flexGrow = String(array.bytes);
    part.title = `${array.name}: ${array.bytes} bytes`;
    part.textContent = array.bytes / plan.storage_limit > 0.06 ? array.name : "";
    bar.appendChild(part);
  }
  const free = plan.storage_limit - plan.bytes_used;
  if (free > 0) {
    const part = document.createElement("span");
    part.className = "free";
    part.style.flexGrow = String(free);
    part.title = `unused: ${free} bytes`;
    bar.appendChild(part);
  }
}

function showPairs(pairs) {
  const body = $("results-body");
  body.replaceChildren();
  $("results").hidden = !pairs.length;
  for (const pair of pairs) {
    const row = document.createElement("tr");
    row.dataset.pair = pair.pair;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = PAIR_LABELS[pair.pair] || pair.pair;
    row.appendChild(th);
    cell(row, fmt(pair.o_max_abs), "num");
    cell(row, fmt(pair.lse_max_abs), "num");
    cell(row, `o ≤ ${fmt(pair.o_bound)}, lse ≤ ${fmt(pair.lse_bound)}`, "num").title =
        `atol ${pair.atol} + rtol ${pair.rtol} · max |reference|, for o and lse separately`;
    cell(row, pair.ok ? "agree" : `differ: ${pair.problem}`, pair.ok ? "ok" : "bad");
    body.appendChild(row);
  }
}

function showPreview(preview, times) {
  if (preview) {
    const names = Object.keys(preview).filter((k) => k !== "row");
    $("preview").textContent = `o[head 0, row ${preview.row}, :4] — ` + names.map(
        (name) => `${name}: [${preview[name].map((x) => x.toFixed(5)).join(", ")}]`).join("; ");
  }
  if (times) {
    const parts = [`flash_np ${times.flash_np_ms.toFixed(1)} ms`, `mirror ${times.mirror_ms.toFixed(1)} ms`];
    if (times.gpu_ms !== undefined) parts.push(`GPU dispatch + readback ${times.gpu_ms.toFixed(1)} ms`);
    $("timings").textContent = `Time: ${parts.join(", ")} (Python times are inside Pyodide).`;
  }
}

function report(detail) {
  lastReport = detail;
  document.dispatchEvent(new CustomEvent("lab:compared", {detail}));
  return detail;
}

/* ---- progress and cancel ---------------------------------------------------------------- */

const progress = {stage: "", started: 0, timer: null};

function showProgress(stage) {
  if (stage) progress.stage = stage;
  const seconds = ((performance.now() - progress.started) / 1000).toFixed(0);
  $("run-progress").textContent = `${progress.stage} (${seconds} s so far)`;
}

function startProgress(stage) {
  progress.started = performance.now();
  clearInterval(progress.timer);
  progress.timer = setInterval(() => showProgress(), 1000);
  showProgress(stage);
  $("run-progress").dataset.state = "running";
  $("cancel").hidden = false;
}

function stopProgress(text, state) {
  clearInterval(progress.timer);
  progress.timer = null;
  $("run-progress").textContent = text;
  $("run-progress").dataset.state = state;
  $("cancel").hidden = true;
}

/* Cancels the run under way: the worker is terminated (Python cannot be interrupted otherwise)
 * and a fresh one boots; the run's result is dropped. */
function cancelRun() {
  runCounter += 1;  // the run under way is now stale
  stopProgress("Cancelled. Python is restarting; run again when it is ready.", "cancelled");
  setStatus("cancelled", null, "cancelled");
  clearPlan("— (cancelled)");
  $("run").disabled = true;
  runtime.restart("the run was cancelled").then(() => {
    $("run").disabled = false;
    $("run-progress").textContent = "Python restarted: ready to run again.";
  }, (error) => showError(error.message));
  report({status: "cancelled", maxAbsErr: null, params: readParams(), plan: null, pairs: [],
          adapter: null, error: "cancelled"});
}

/* ---- one run ---------------------------------------------------------------------------- */

/* Runs one comparison; resolves to the `lab:compared` detail:
 * {status, maxAbsErr, params, plan, pairs, adapter, error}. */
export async function runComparison(params = readParams()) {
  const run = ++runCounter;
  const stale = () => run !== runCounter;
  $("run").disabled = true;
  setStatus("running", null, "running…");
  showError("");
  showPairs([]);
  clearPlan("— (planning this run…)");
  startProgress("Python: drawing inputs, planning the tiles, running flash_np and the CPU mirror");
  $("preview").textContent = "";
  $("timings").textContent = "";
  const detail = {status: "running", maxAbsErr: null, params, plan: null, pairs: [],
                  adapter: null, error: null};
  const fail = (message) => {
    if (stale()) return detail;
    setStatus("error", null, "error: see the message below");
    if (!detail.plan) clearPlan("— (refused: see the message below)");
    stopProgress("Stopped: see the message below.", "error");
    showError(message);
    return report({...detail, status: "error", error: message});
  };
  try {
    // The kernel tier: the best this adapter offers, or the learner's pick (js/tiers.js).
    const {gpu: defaultGpu, error: gpuError} = await gpuReady;
    let gpu = defaultGpu;
    let tierParams = {tier: "portable"};
    if (!gpuError) {
      const choice = chooseTier(defaultGpu.adapter, params.tier);
      if (choice.tier !== "portable") {
        try {
          gpu = await tierDevice(defaultGpu, choice.tier);
        } catch (error) {
          choice.why += `; its device could not be made (${error.message}), so portable float32 ran`;
          choice.tier = "portable";
        }
      }
      tierParams = {tier: choice.tier, storage: gpu.limits.maxComputeWorkgroupStorageSize,
                    subgroup_size: gpu.subgroupSize || 32};
      detail.tier = {tier: choice.tier, why: choice.why};
      $("tier-ran").textContent = `${choice.tier}: ${choice.why}`;
      $("tier-ran").dataset.tier = choice.tier;
      $("storage-limit").textContent = `${gpu.limits.maxComputeWorkgroupStorageSize} bytes (` +
          (choice.tier === "f16" || choice.tier === "int8" ? `the adapter's own, for the ${choice.tier} tier)`
                                                            : "device requested with default limits)");
    } else {
      $("tier-ran").textContent = "portable (no WebGPU here: the CPU paths run the portable kernel's mirror)";
    }
    let prepared;
    try {
      prepared = await runtime.call("lab.prepare", {...params, ...tierParams});
    } catch (error) {
      // A tier chosen for the adapter may not fit this d (its plan says why): the portable tier
      // runs instead, and the page says so. A refusal of the size itself stands.
      if (tierParams.tier === "portable" || params.tier !== "best" || /too long/.test(error.message)) {
        return fail(error.message);
      }
      const why = `${tierParams.tier} cannot run this size (${error.message.replace(/^ValueError: /, "")}), ` +
                  "so portable float32 ran";
      gpu = defaultGpu;
      tierParams = {tier: "portable"};
      detail.tier = {tier: "portable", why};
      $("tier-ran").textContent = `portable: ${why}`;
      $("tier-ran").dataset.tier = "portable";
      try {
        prepared = await runtime.call("lab.prepare", {...params, ...tierParams});
      } catch (again) {
        return fail(again.message);
      }
    }
    if (stale()) return detail;
    detail.plan = prepared.plan;
    showPlan(prepared);
    showPreview(prepared.preview, prepared.times);
    $("plan").title = `${prepared.mirror_steps} key-tile steps in the CPU mirror`;

    if (gpuError) {
      const cpu = prepared.cpu;
      showPairs([cpu]);
      const status = cpu.ok ? "no-webgpu" : "mismatch";
      stopProgress(`Done in ${((performance.now() - progress.started) / 1000).toFixed(1)} s.`, "done");
      setStatus(status, cpu.max_abs, cpu.ok
          ? `No WebGPU here (${gpuError.message}). The two CPU paths agree: max |Δ| = ${fmt(cpu.max_abs)}.`
          : `No WebGPU here, and the CPU paths differ: ${cpu.problem}.`);
      return report({...detail, status, maxAbsErr: cpu.max_abs, pairs: [cpu], error: gpuError.message});
    }
    detail.adapter = gpu.name;

    let dispatched;
    showProgress("GPU: running the WGSL shader");
    try {
      dispatched = await runSpec(gpu, prepared.spec);
    } catch (error) {
      showPairs([prepared.cpu]);
      return fail(`The GPU run failed: ${error.message}`);
    }
    if (stale()) return detail;
    let result;
    showProgress("Python: comparing the GPU's output with the mirror and flash_np");
    try {
      result = await runtime.call("lab.compare", {...params, ...tierParams, outputs: dispatched.outputs,
                                                 gpu_ms: dispatched.gpuMs});
    } catch (error) {
      return fail(error.message);
    }
    if (stale()) return detail;
    stopProgress(`Done in ${((performance.now() - progress.started) / 1000).toFixed(1)} s.`, "done");
    showPairs(result.pairs);
    showPreview(result.preview, result.times);
    const [gpuMirror, gpuNp] = result.pairs;
    setStatus(result.status, result.max_abs_err, result.status === "match"
        ? `All three agree. GPU vs mirror max |Δ| = ${fmt(gpuMirror.max_abs)}; ` +
          `GPU vs flash_np max |Δ| = ${fmt(gpuNp.max_abs)}.`
        : "Mismatch: " + result.pairs.filter((p) => !p.ok)
              .map((p) => `${PAIR_LABELS[p.pair]}: ${p.problem}`).join("; "));
    return report({...detail, status: result.status, maxAbsErr: result.max_abs_err,
                   pairs: result.pairs});
  } finally {
    if (!stale()) $("run").disabled = false;
  }
}

export function lastComparison() {
  return lastReport;
}

/* ---- start ------------------------------------------------------------------------------ */

async function loadGuidedSteps() {
  // Only import js/lab-steps.js when the build shipped it (no 404 in the console otherwise).
  try {
    const response = await fetch(new URL("../manifest.json", import.meta.url));
    const manifest = await response.json();
    if (manifest.files["js/lab-steps.js"]) {
      const steps = await import("./lab-steps.js");
      await steps.mountGuidedSteps(lastComparison);
    }
  } catch (error) {
    console.warn(`guided steps unavailable: ${error.message}`);
    delete $("compare").dataset.veiled;  // no step asks for a prediction: show the results
  }
}

restoreForm();
presetFromUrl();  // a link's inputs win over the remembered ones
for (const type of ["input", "change"]) $("lab-form").addEventListener(type, () => saveForm(readParams()));
$("lab-form").addEventListener("submit", (event) => {
  event.preventDefault();
  runComparison();
});
$("cancel").addEventListener("click", cancelRun);
loadGuidedSteps();
runtime.ready.then(() => runComparison(), (error) => {
  setStatus("error", null, "Python could not start, so nothing can be compared.");
  showError(error.message);
  report({status: "error", maxAbsErr: null, params: readParams(), plan: null, pairs: [],
          adapter: null, error: error.message});
});
