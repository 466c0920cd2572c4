/* One exercise page: exercise.html?id=<id>[&step=<step id>].
 *
 * The exercise (statement, starter, solution, hints, checks) comes from data/exercises.json,
 * which build.py exports from nlpcore.lab (Python is the one source of truth). Grading runs in
 * the Pyodide worker: runtime.call("exercises.grade", {exercise, step, code}) with a time
 * limit; an infinite loop makes runtime.js terminate the worker and start a fresh one, and the
 * page reports it on every check and keeps working.
 *
 * Check protocol (for checks that run partly in the page, e.g. on the GPU): grade returns such a
 * check with status "pending", its `runner` name and a `job` (plain data, e.g. a dispatch spec).
 * The page hands the job to the runner registered under that name -- registerCheckRunner(name,
 * async (job) => outputs) -- and sends the outputs back through "exercises.verify" for the
 * verdict. A "webgpu" runner is built in: it runs a dispatch spec with js/gpu.js and returns
 * {name: bytes} of the output bindings. An exercise can name extra ES modules to import first
 * (exercise.extra.js_modules, paths relative to the site root), which may register their own
 * runners or a CodeMirror mode named by exercise.extra.language (default "python").
 *
 * Page contract: [data-testid=run-checks], [data-testid=load-solution], one
 * [data-testid=check] per graded check with data-status pass|fail|error. "local" checks (Triton,
 * GPU) are listed separately with their commands, outside data-testid=check.
 */
import {getRuntime} from "./runtime.js";
import {loadProgress, markStep, isDone, onProgressChange} from "./progress.js";
import {renderMath} from "./katex-render.js";
import {renderMarkdown} from "./md.js";
import {createEditor} from "./editor.js";
import {el} from "./dom.js";

export const TIME_LIMIT_MS = 10000;
const DRAFTS_KEY = "fa-lab-drafts-v1";

const $ = (id) => document.getElementById(id);
const runners = new Map();

/* Registers `run(job) -> Promise<outputs>` for checks whose runner is `name`. */
export function registerCheckRunner(name, run) {
  if (typeof name !== "string" || !name || typeof run !== "function") {
    throw new TypeError("registerCheckRunner(name: string, run: async (job) => outputs)");
  }
  runners.set(name, run);
}

let gpuPromise = null;
registerCheckRunner("webgpu", async (job) => {
  const gpuModule = await import("./gpu.js");
  if (!gpuPromise) gpuPromise = gpuModule.openGpu();
  let gpu;
  try {
    gpu = await gpuPromise;
  } catch (error) {
    gpuPromise = null;
    throw error;
  }
  const {outputs} = await gpuModule.runSpec(gpu, job);
  return outputs;
});

function notice(id, text) {
  const box = $(id);
  box.hidden = !text;
  box.textContent = text || "";
}

/* ---- data ---------------------------------------------------------------------------------- */

async function siteFiles() {
  try {
    const resp = await fetch("manifest.json", {cache: "no-cache"});
    if (!resp.ok) return {};
    return (await resp.json()).files || {};
  } catch (error) {
    return {};
  }
}

async function loadData(files) {
  if (!files["data/exercises.json"]) {
    throw new Error("this build has no data/exercises.json (build.py exports it from nlpcore.lab)");
  }
  const resp = await fetch("data/exercises.json", {cache: "no-cache"});
  if (!resp.ok) throw new Error(`data/exercises.json could not be loaded (HTTP ${resp.status})`);
  return resp.json();
}

function drafts() {
  try {
    return JSON.parse(localStorage.getItem(DRAFTS_KEY) || "{}") || {};
  } catch (error) {
    return {};
  }
}

function saveDraft(key, code) {
  try {
    const all = drafts();
    all[key] = code;
    localStorage.setItem(DRAFTS_KEY, JSON.stringify(all));
  } catch (error) {
    /* storage unavailable: drafts live only in the editor */
  }
}

/* ---- page state ---------------------------------------------------------------------------- */

const state = {ex: null, step: null, editor: null, hintsShown: 0, running: false, files: {}};
const runtime = getRuntime();

function draftKey() {
  return `${state.ex.id}/${state.step.id}`;
}

function renderExerciseList(all, current) {
  const nav = $("exercise-list");
  nav.replaceChildren();
  for (const ex of all) {
    const a = el("a", {href: `exercise.html?id=${encodeURIComponent(ex.id)}`, text: ex.title});
    if (current && ex.id === current.id) a.setAttribute("aria-current", "page");
    nav.append(a);
  }
}

function renderLadder() {
  const nav = $("ladder");
  nav.replaceChildren();
  state.ex.steps.forEach((step, index) => {
    const done = isDone("exercises", state.ex.id, step.id);
    const button = el("button", {
      type: "button", class: "ladder-step" + (step.id === state.step.id ? " current" : ""),
      "data-testid": "step-tab", "data-step": step.id, "data-done": done ? "1" : "0",
      "aria-current": step.id === state.step.id ? "step" : null,
    }, el("span", {class: "n", text: String(index + 1)}),
       el("span", {class: "kind", text: step.kind}),
       el("span", {class: "title", text: step.title}),
       el("span", {class: "mark", text: done ? "✓ done" : `${step.minutes} min`}));
    button.addEventListener("click", () => selectStep(step.id, true));
    nav.append(button);
  });
}

function renderPanels(panels) {
  const host = $("panels");
  host.replaceChildren();
  for (const panel of panels || []) {
    const details = el("details", {class: "code-panel", open: ""},
                       el("summary", {text: panel.title}));
    if (panel.code) {
      details.append(el("pre", {class: "code"}, el("code", {text: panel.code})));
      if (panel.download && state.files[panel.download]) {
        details.append(el("p", {class: "small"},
                          el("a", {href: panel.download, download: "", text: "Download this file"})));
      }
    } else {
      details.append(el("p", {class: "notice", text: `Not available: ${panel.missing || "missing"}.`}));
    }
    host.append(details);
  }
}

function showLocalChecks(step) {
  const local = step.checks.filter((c) => c.runner === "local");
  $("local").hidden = local.length === 0;
  const list = $("local-checks");
  list.replaceChildren();
  for (const c of local) {
    list.append(el("li", {class: "local-check", "data-local-check": c.id},
                   el("strong", {text: c.title}), " — not run here: ", c.explain, ".",
                   el("pre", {}, el("code", {text: c.command}))));
  }
}

function selectStep(stepId, pushUrl) {
  const step = state.ex.steps.find((s) => s.id === stepId) || state.ex.steps[0];
  state.step = step;
  state.hintsShown = 0;
  if (pushUrl) {
    const url = new URL(window.location.href);
    url.searchParams.set("step", step.id);
    history.replaceState(null, "", url);
  }
  renderLadder();
  $("step").hidden = false;
  $("step-title").textContent = `${step.kind} · ${step.title}`;
  const statement = $("statement");
  statement.replaceChildren(renderMarkdown(step.statement, "md statement"));
  const math = renderMath(statement);
  if (math.error) notice("editor-notice", math.error);
  renderPanels((state.ex.extra.panels || []).filter((p) => !p.steps || p.steps.includes(step.id)));
  const saved = drafts()[draftKey()];
  state.editor.setValue(saved !== undefined ? saved : step.starter);
  state.editor.refresh();
  $("hints").replaceChildren();
  $("next-hint").disabled = step.hints.length === 0;
  $("next-hint").textContent = `Show a hint (${step.hints.length} left)`;
  clearResults(step);
  showLocalChecks(step);
  $("results-plot").hidden = !(state.ex.extra.results && step.checks.some((c) => c.runner === "local"));
  if (!$("results-plot").hidden) drawResults(state.ex.extra.results);
}

function clearResults(step) {
  const list = $("results");
  list.replaceChildren();
  list.dataset.state = "idle";
  for (const c of step.checks.filter((x) => x.runner !== "local")) {
    list.append(el("li", {class: "check", "data-check": c.id},
                   el("span", {class: "badge", text: "not run"}), el("strong", {text: c.title})));
  }
  $("results-summary").textContent = isDone("exercises", state.ex.id, step.id)
    ? "You passed this step before. Run the checks again any time." : "Not run yet.";
  $("results-summary").dataset.state = "idle";
  $("report").replaceChildren();
}

/* ---- hints --------------------------------------------------------------------------------- */

function nextHint() {
  const hints = state.step.hints;
  if (state.hintsShown >= hints.length) return;
  const li = el("li", {"data-testid": "hint"});
  li.append(renderMarkdown(hints[state.hintsShown], "md hint"));
  $("hints").append(li);
  renderMath(li);
  state.hintsShown += 1;
  const left = hints.length - state.hintsShown;
  $("next-hint").textContent = left ? `Show another hint (${left} left)` : "No more hints";
  $("next-hint").disabled = left === 0;
}

/* ---- results ------------------------------------------------------------------------------- */

const DETAIL_LABELS = [
  ["expected", "expected"], ["got", "got"], ["tolerance", "tolerance"],
  ["max_abs_err", "max |Δ|"], ["where", "at index"], ["shapes", "input shapes"],
];

function formatValue(key, value) {
  if (key === "shapes" && value && typeof value === "object") {
    return Object.entries(value).map(([name, shape]) => `${name} (${shape.join(", ")})`).join(", ");
  }
  if (key === "max_abs_err" && typeof value === "number") return value.toPrecision(3);
  if (Array.isArray(value)) return `[${value.join(", ")}]`;
  return String(value);
}

function renderTable(table, caption) {
  const t = el("table", {class: "matrix"});
  if (caption) t.append(el("caption", {text: caption}));
  const head = el("tr");
  for (const col of table.columns) head.append(el("th", {scope: "col", text: col.replace(/^test_/, "test_\u200b")}));
  t.append(el("thead", {}, head));
  const body = el("tbody");
  for (const row of table.rows) {
    const tr = el("tr");
    row.forEach((cell, i) => {
      if (i === 0) tr.append(el("th", {scope: "row", text: cell}));
      else tr.append(el("td", {class: `cell-${String(cell).split(":")[0].toLowerCase()}`, text: cell}));
    });
    body.append(tr);
  }
  t.append(body);
  return t;
}

function renderCheck(result) {
  const li = el("li", {class: `check status-${result.status}`, "data-testid": "check",
                       "data-status": result.status, "data-check": result.id},
                el("span", {class: "badge", text: result.status}),
                el("strong", {text: result.title}));
  if (result.message) li.append(el("div", {class: "message", text: result.message}));
  const rows = DETAIL_LABELS.filter(([key]) => result[key] !== undefined && result[key] !== null);
  if (rows.length) {
    const dl = el("dl", {class: "details"});
    for (const [key, label] of rows) {
      dl.append(el("dt", {text: label}), el("dd", {text: formatValue(key, result[key])}));
    }
    li.append(dl);
  }
  if (result.table) li.append(renderTable(result.table, "live kill matrix (weak suite)"));
  return li;
}

function renderResults(out, roundTripMs) {
  const list = $("results");
  list.replaceChildren();
  const graded = out.checks.filter((c) => c.status !== "local");
  for (const c of graded) list.append(renderCheck(c));
  const passed = graded.filter((c) => c.status === "pass").length;
  const summary = $("results-summary");
  summary.textContent = `${passed} of ${graded.length} checks pass. Graded in ` +
      `${out.elapsed_ms.toFixed(0)} ms in Python (${roundTripMs.toFixed(0)} ms round trip).` +
      (out.passed ? " Step complete — saved to your progress." : "");
  summary.dataset.state = out.passed ? "passed" : "failed";
  summary.dataset.elapsedMs = String(out.elapsed_ms);
  summary.dataset.roundTripMs = String(Math.round(roundTripMs));
  list.dataset.state = "done";
  const report = $("report");
  report.replaceChildren();
  if (out.report && out.report.table) {
    report.append(renderTable(out.report.table, out.report.title || "Your suite's kill matrix, computed live in this page"));
  }
}

function renderFailure(message) {
  const list = $("results");
  list.replaceChildren();
  for (const c of state.step.checks.filter((x) => x.runner !== "local")) {
    list.append(renderCheck({id: c.id, title: c.title, status: "error", message}));
  }
  list.dataset.state = "error";
  $("results-summary").textContent = message;
  $("results-summary").dataset.state = "error";
}

async function finishPending(out, code) {
  for (let i = 0; i < out.checks.length; i += 1) {
    const c = out.checks[i];
    if (c.status !== "pending") continue;
    const run = runners.get(c.runner);
    if (!run) {
      out.checks[i] = {...c, status: "error", job: undefined,
                       message: `this page has no runner for "${c.runner}" checks`};
      continue;
    }
    try {
      const outputs = await run(c.job);
      out.checks[i] = await runtime.call("exercises.verify", {
        exercise: state.ex.id, step: state.step.id, check: c.id, code, job: c.job, outputs,
      }, {timeoutMs: TIME_LIMIT_MS});
    } catch (error) {
      out.checks[i] = {...c, status: "error", job: undefined,
                       message: `could not run on ${c.runner}: ${error.message}`};
    }
  }
  const graded = out.checks.filter((c) => c.status !== "local");
  out.passed = graded.length > 0 && graded.every((c) => c.status === "pass");
  return out;
}

async function runChecks() {
  if (state.running) return;
  state.running = true;
  $("run-checks").disabled = true;
  const code = state.editor.getValue();
  saveDraft(draftKey(), code);
  $("results").dataset.state = "running";
  $("results-summary").textContent = "Running your code…";
  $("results-summary").dataset.state = "running";
  const started = performance.now();
  try {
    let out = await runtime.call("exercises.grade", {exercise: state.ex.id, step: state.step.id, code},
                                 {timeoutMs: TIME_LIMIT_MS});
    if (out.checks.some((c) => c.status === "pending")) out = await finishPending(out, code);
    renderResults(out, performance.now() - started);
    // For modules named in exercise.extra.js_modules (e.g. js/wgsl-exercise.js's side panel).
    document.dispatchEvent(new CustomEvent("exercise:graded",
        {detail: {exercise: state.ex.id, step: state.step.id, code, result: out}}));
    if (out.passed) {
      const extra = out.record && Object.keys(out.record).length ? {answer: out.record} : null;
      markStep("exercises", state.ex.id, state.step.id, extra);
    }
  } catch (error) {
    const limited = /time limit/.test(error.message);
    renderFailure(limited
      ? `Stopped: your code ran longer than the time limit of ${TIME_LIMIT_MS / 1000} s ` +
        "(an infinite loop?). Python was restarted; fix the code and run the checks again."
      : `The checks could not run: ${error.message}`);
    if (limited) watchRuntime();
  } finally {
    state.running = false;
    $("run-checks").disabled = false;
  }
}

/* ---- Triton results plot ------------------------------------------------------------------- */

const IMPLS = [["triton", "ours (Triton)", "#2456c7"], ["flash", "SDPA flash", "#8a5a00"],
               ["cudnn", "SDPA cuDNN", "#17794a"], ["efficient", "SDPA efficient", "#9aa7c4"]];

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`${src} did not load`));
    document.head.append(s);
  });
}

async function drawResults(path) {
  const note = $("plot-note");
  if (!state.files[path]) {
    note.textContent = `No recorded results in this build (${path} is missing): run the ` +
        "benchmark on a GPU to produce them.";
    note.dataset.state = "missing";
    return;
  }
  try {
    const resp = await fetch(path, {cache: "no-cache"});
    if (!resp.ok) throw new Error(`HTTP ${resp.status} for ${path}`);
    // Python's json.dump writes Infinity/NaN for missing timings; JSON has no such tokens.
    const text = (await resp.text()).replace(/([:\[,]\s*)-?(Infinity|NaN)(?=\s*[,\]}])/g, "$1null");
    const doc = JSON.parse(text);
    if (!window.Chart) await loadScript("vendor/chartjs/chart.umd.js");
    const rows = doc.results || [];
    const env = doc.env || {};
    note.textContent = `${env.gpu || env.gpu_name || "GPU"} · torch ${env.torch || "?"} · triton ` +
        `${env.triton || "?"} · ${doc.dtype || "bf16"}, ${doc.tokens_per_batch || 16384} tokens per ` +
        `batch. Command: ${doc.command || env.command || "bench/triton_h200.py"}. ` +
        "Look for: ours vs SDPA flash (target ≥ 1×) and vs cuDNN; causal ≈ half the time.";
    note.dataset.state = "ready";
    const labels = rows.map((r) => `d=${r.d} N=${r.n}${r.causal ? " causal" : ""}`);
    for (const pass of ["fwd", "bwd"]) {
      const datasets = IMPLS.map(([key, label, color]) => ({
        label, backgroundColor: color,
        data: rows.map((r) => {
          const v = r[pass] && r[pass][key] && r[pass][key].tflops;
          return typeof v === "number" && isFinite(v) ? v : null;
        }),
      }));
      new window.Chart($(`plot-${pass}`), {
        type: "bar", data: {labels, datasets},
        options: {animation: false, responsive: false,
                  plugins: {title: {display: true, text: `${pass === "fwd" ? "Forward" : "Backward"} TFLOP/s`}},
                  scales: {y: {beginAtZero: true, title: {display: true, text: "TFLOP/s"}}}},
      });
    }
  } catch (error) {
    note.textContent = `The recorded results could not be drawn: ${error.message}`;
    note.dataset.state = "error";
  }
}

/* ---- runtime status ------------------------------------------------------------------------ */

function watchRuntime() {
  const status = $("runtime-status");
  status.dataset.state = "loading";
  status.textContent = "Starting Python…";
  $("run-checks").disabled = true;
  // Ready means the graders are imported too (one warm-up call), so a run costs only grading.
  runtime.ready.then(() => runtime.call("exercises.catalog", {}, {timeoutMs: 60000})).then(() => {
    status.dataset.state = "ready";
    status.textContent = "Python is ready.";
    $("run-checks").disabled = state.running;
  }, (error) => {
    status.dataset.state = "error";
    status.textContent = `Python (Pyodide) is unavailable, so checks cannot run here: ${error.message}`;
  });
}

/* ---- start --------------------------------------------------------------------------------- */

async function main() {
  const params = new URLSearchParams(window.location.search);
  const id = params.get("id") || "online-softmax";
  $("time-limit").textContent = String(TIME_LIMIT_MS / 1000);
  const {notice: progressNotice} = loadProgress();
  state.files = await siteFiles();
  let data;
  try {
    data = await loadData(state.files);
  } catch (error) {
    $("ex-summary").textContent = "";
    notice("ex-notice", `The exercises cannot be shown: ${error.message}.`);
    return;
  }
  const all = data.exercises || [];
  renderExerciseList(all, null);
  const ex = all.find((e) => e.id === id);
  if (!ex) {
    $("ex-title").textContent = "No such exercise";
    $("ex-summary").textContent = "";
    notice("ex-notice", `There is no exercise "${id}" in this build. Available: ` +
           `${all.map((e) => e.id).join(", ")}.`);
    return;
  }
  state.ex = ex;
  renderExerciseList(all, ex);
  document.title = `${ex.title} — FlashAttention lab`;
  $("ex-title").textContent = ex.title;
  $("ex-summary").textContent = ex.summary;
  $("ex-meta").textContent = `${ex.tier} · ${ex.ladder.join(" · ")} · ${ex.minutes} min`;
  if (progressNotice) notice("ex-notice", progressNotice);
  for (const source of ex.sources) $("source-list").append(el("li", {text: source}));
  $("sources").hidden = ex.sources.length === 0;

  // Extra modules first: they may register check runners or a CodeMirror mode (e.g. "wgsl").
  for (const module of ex.extra.js_modules || []) {
    if (!state.files[module]) {
      notice("ex-notice", `This build lacks ${module}, which this exercise needs for some checks.`);
      continue;
    }
    try {
      await import(new URL(`../${module}`, import.meta.url));
    } catch (error) {
      notice("ex-notice", `A check runner (${module}) could not be loaded: ${error.message}.`);
    }
  }
  const language = ex.extra.language || "python";
  if (language !== "python") {
    $("editor-label").textContent = `Your ${language.toUpperCase()} code — checked by Python ` +
        `(Pyodide) in this page and, for the GPU checks, run through WebGPU; each run has a time ` +
        `limit of ${TIME_LIMIT_MS / 1000} s`;
  }
  state.editor = createEditor($("editor-host"), {label: "your code", mode: language});
  if (state.editor.fallback) notice("editor-notice", state.editor.fallback);
  selectStep(params.get("step"), false);
  onProgressChange(() => renderLadder());

  $("run-checks").addEventListener("click", runChecks);
  $("next-hint").addEventListener("click", nextHint);
  $("load-solution").addEventListener("click", () => {
    state.editor.setValue(state.step.solution);
    saveDraft(draftKey(), state.step.solution);
  });
  $("reset-code").addEventListener("click", () => {
    state.editor.setValue(state.step.starter);
    saveDraft(draftKey(), state.step.starter);
  });
  let saveTimer = null;
  state.editor.onChange(() => {
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => saveDraft(draftKey(), state.editor.getValue()), 400);
  });
  runtime.onProgress((ev) => {
    if ($("runtime-status").dataset.state === "loading" && ev && ev.message) {
      $("runtime-status").textContent = `Starting Python: ${ev.message}`;
    }
  });
  watchRuntime();
}

main().catch((error) => notice("ex-notice", `The exercise page failed to start: ${error.message}`));
