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
 * verdict. A runner that finds the code itself unusable (a shader that does not compile) throws
 * an Error with `failsAll = true`: every graded check of the run then fails as "error" with that
 * message, the checks Python passed without compiling included. A "webgpu" runner is built in: it runs a dispatch spec with js/gpu.js and returns
 * {name: bytes} of the output bindings. An exercise can name extra ES modules to import first
 * (exercise.extra.js_modules, paths relative to the site root), which may register their own
 * runners or a CodeMirror mode named by exercise.extra.language (default "python").
 *
 * Page contract: [data-testid=run-checks], [data-testid=load-solution] (it asks first:
 * [data-testid=confirm-replace-yes]), one [data-testid=check] per graded check with data-status
 * pass|fail|error. "local" checks (Triton, GPU) are listed separately with their commands,
 * outside data-testid=check.
 *
 * The learner's workspace: what their code printed while graded ([data-testid=run-output],
 * from grade's stdout/stderr/traceback) shows beside the checks, per run; a scratch cell
 * (exercises.scratch) runs code against the editor's definitions without grading; drafts are
 * saved per step as the learner types (and before the page or step changes); "Load solution"
 * and "Reset to starter" ask first and keep the draft, restorable with one click, also after a
 * reload. Predict steps withhold the answer: a wrong prediction shows which parts are wrong
 * (and which way a number is off) until the learner asks for the answer after an attempt; the
 * first prediction is kept in progress and shown beside the truth afterwards.
 */
import {getRuntime} from "./runtime.js";
import {loadProgress, markStep, noteStep, stepRecord, isDone, onProgressChange} from "./progress.js";
import {renderMath} from "./katex-render.js";
import {renderMarkdown} from "./md.js";
import {createEditor} from "./editor.js";
import {el} from "./dom.js";
import {TRITON_BACKENDS} from "./backends.js";

export const TIME_LIMIT_MS = 10000;
const DRAFTS_KEY = "fa-lab-drafts-v1";
// Drafts set aside when the editor was replaced (by the solution or the starter):
// {<exercise>/<step>: {code, at, by: "solution" | "starter"}}.
const KEPT_KEY = "fa-lab-kept-drafts-v1";
const DRAFT_SAVE_DELAY_MS = 300;

/* What a newer Python or NumPy than the page's would allow: [version, what]. The page shows the
 * rows newer than the versions the worker reports, so the list is true to the running Python. */
const PYTHON_NEWER = [
  ["3.9", "dict merges with |, str.removeprefix/removesuffix, list[int] and dict[str, int] outside annotations"],
  ["3.10", "match statements, X | Y type unions at runtime, zip(..., strict=True)"],
  ["3.11", "except* and ExceptionGroup, tomllib"],
  ["3.12", "type X = ... aliases, f-strings reusing their own quotes"],
];
const NUMPY_NEWER = [
  ["1.20", "numpy.lib.stride_tricks.sliding_window_view, numpy.typing, where= in np.mean/np.std"],
  ["1.22", "np.quantile/np.percentile(method=...)"],
  ["2.0", "np.concat, np.permute_dims, np.pow, np.trapezoid (the NumPy 2 names)"],
];

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

function readStore(name) {
  try {
    const doc = JSON.parse(localStorage.getItem(name) || "{}");
    return doc && typeof doc === "object" && !Array.isArray(doc) ? doc : {};
  } catch (error) {
    return {};
  }
}

/* Sets (or with value undefined, removes) one entry; false when storage is unavailable. */
function writeStore(name, key, value) {
  try {
    const all = readStore(name);
    if (value === undefined) delete all[key];
    else all[key] = value;
    localStorage.setItem(name, JSON.stringify(all));
    return true;
  } catch (error) {
    return false;
  }
}

const drafts = () => readStore(DRAFTS_KEY);
const saveDraft = (key, code) => writeStore(DRAFTS_KEY, key, code);

/* ---- page state ---------------------------------------------------------------------------- */

const state = {ex: null, step: null, editor: null, scratch: null, hintsShown: 0, running: false,
               files: {}, settingText: false, pendingSave: null, lastOut: null, runs: 0,
               confirmAction: null};
const runtime = getRuntime();

function draftKey() {
  return `${state.ex.id}/${state.step.id}`;
}

/* ---- drafts: saved per step as the learner types ------------------------------------------- */

function clockTime(iso) {
  return new Date(iso).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

function showDraftState(text, stateName) {
  const line = $("draft-state");
  line.textContent = text;
  line.dataset.state = stateName;
}

/* Saves what is pending now (before the step or the page changes, and after a pause in typing);
 * the key is the step the text was typed in, not the step shown when the timer fires. */
function flushDraft() {
  const pending = state.pendingSave;
  if (!pending) return;
  clearTimeout(pending.timer);
  state.pendingSave = null;
  const ok = saveDraft(pending.key, pending.editor.getValue());
  if (pending.editor === state.editor) {
    if (ok) showDraftState(`Draft saved in this browser at ${clockTime(new Date().toISOString())}.`, "saved");
    else showDraftState("This browser does not let the page save drafts: copy your code before you leave.", "unsaved");
  }
}

function scheduleSave(editor, key) {
  if (state.settingText) return;
  if (state.pendingSave && state.pendingSave.key !== key) flushDraft();
  if (state.pendingSave) clearTimeout(state.pendingSave.timer);
  state.pendingSave = {key, editor, timer: setTimeout(flushDraft, DRAFT_SAVE_DELAY_MS)};
  if (editor === state.editor) showDraftState("Saving your draft…", "pending");
}

function setEditorText(editor, text) {
  state.settingText = true;
  try {
    editor.setValue(text);
  } finally {
    state.settingText = false;
  }
}

/* ---- replacing the editor's code: ask first, keep the draft -------------------------------- */

function keptDraft() {
  const kept = readStore(KEPT_KEY)[draftKey()];
  return kept && typeof kept.code === "string" ? kept : null;
}

function showKeptDraft() {
  const kept = keptDraft();
  $("kept-draft").hidden = !kept;
  if (kept) {
    $("kept-draft-text").textContent = `Your draft from ${clockTime(kept.at)} was set aside when the ` +
        `${kept.by === "solution" ? "solution" : "starter"} was loaded.`;
  }
}

function askToReplace(by) {
  const text = by === "solution"
    ? "Replace your code with the reference solution? Your draft is kept: one click restores it. " +
      "A step passed after this shows as \u201csolution viewed\u201d, not \u201csolved\u201d."
    : "Replace your code with the starter? Your draft is kept: one click restores it.";
  $("confirm-replace-text").textContent = text;
  $("confirm-replace-yes").textContent = by === "solution" ? "Load the solution" : "Reset to starter";
  $("confirm-replace").hidden = false;
  $("confirm-replace").dataset.by = by;
  state.confirmAction = by;
  $("confirm-replace-yes").focus();
}

function closeConfirm() {
  $("confirm-replace").hidden = true;
  state.confirmAction = null;
}

function replaceEditor(by) {
  if (by !== "solution" && by !== "starter") return;
  closeConfirm();
  flushDraft();
  const step = state.step;
  const text = by === "solution" ? step.solution : step.starter;
  const current = state.editor.getValue();
  if (current !== text && current !== step.starter && current !== step.solution) {
    writeStore(KEPT_KEY, draftKey(), {code: current, at: new Date().toISOString(), by});
  }
  setEditorText(state.editor, text);
  saveDraft(draftKey(), text);
  // Viewed before the step was passed: it counts as "solution viewed" (a step solved first stays solved).
  if (by === "solution" && !isDone("exercises", state.ex.id, step.id)) {
    noteStep("exercises", state.ex.id, step.id, {solution_viewed: true});
  }
  showKeptDraft();
  showDraftState(by === "solution" ? "The solution is in the editor." : "The starter is in the editor.", "saved");
}

function restoreDraft() {
  const kept = keptDraft();
  if (!kept) return;
  flushDraft();
  setEditorText(state.editor, kept.code);
  saveDraft(draftKey(), kept.code);
  writeStore(KEPT_KEY, draftKey(), undefined);
  showKeptDraft();
  showDraftState("Your draft is back in the editor.", "saved");
  state.editor.focus();
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
    const viewed = Boolean(stepRecord(state.ex.id, step.id).solution_viewed);
    const mark = done ? (viewed ? "✓ done, solution viewed" : "✓ solved")
      : (viewed ? `solution viewed · ${step.minutes} min` : `${step.minutes} min`);
    const button = el("button", {
      type: "button", class: "ladder-step" + (step.id === state.step.id ? " current" : ""),
      "data-testid": "step-tab", "data-step": step.id, "data-done": done ? "1" : "0",
      "data-solution-viewed": viewed ? "1" : "0",
      "aria-current": step.id === state.step.id ? "step" : null,
    }, el("span", {class: "n", text: String(index + 1)}),
       el("span", {class: "kind", text: step.kind}),
       el("span", {class: "title", text: step.title}),
       el("span", {class: "mark", "data-testid": "step-mark", text: mark}));
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
  flushDraft();
  closeConfirm();
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
  setEditorText(state.editor, saved !== undefined ? saved : step.starter);
  state.editor.refresh();
  showDraftState(saved !== undefined && saved !== step.starter
    ? "Your saved draft for this step is in the editor." : "", "idle");
  showKeptDraft();
  const python = (step.language || "python") === "python";
  $("scratch").hidden = !python;
  if (python && state.scratch) {
    const scratchSaved = drafts()[`${draftKey()}#scratch`];
    setEditorText(state.scratch, scratchSaved !== undefined ? scratchSaved : "");
    state.scratch.refresh();
  }
  $("scratch-output").replaceChildren();
  $("scratch-output").dataset.state = "idle";
  const predict = step.kind === "Predict";
  $("run-checks").textContent = predict ? "Submit prediction" : "Run checks";
  updateLoadSolution();
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
  state.lastOut = null;
  showPredictBox();
  $("output-streams").replaceChildren();
  $("run-output").dataset.state = "idle";
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

/* A wrong prediction's feedback without the answer: which parts are right and wrong (a check's
 * `parts` detail, {part: "right" | "wrong"}) or which way a number is off. */
function withheldFeedback(result) {
  if (result.parts && typeof result.parts === "object") {
    const names = (verdict) => Object.keys(result.parts).filter((k) => result.parts[k] === verdict);
    const right = names("right");
    const wrong = names("wrong");
    return `Right: ${right.length ? right.join(", ") : "none"}. Wrong: ${wrong.length ? wrong.join(", ") : "none"}.`;
  }
  const expected = Number(result.expected);
  const got = Number(result.got);
  if (result.expected !== undefined && result.got !== undefined && isFinite(expected) && isFinite(got)) {
    return `Your number is too ${got > expected ? "high" : "low"}` +
        (result.tolerance ? ` (allowed: ${result.tolerance}).` : ".");
  }
  return "Not right yet.";
}

function renderCheck(result, withhold = false) {
  const li = el("li", {class: `check status-${result.status}`, "data-testid": "check",
                       "data-status": result.status, "data-check": result.id},
                el("span", {class: "badge", text: result.status}),
                el("strong", {text: result.title}));
  if (withhold && result.status === "fail") {
    li.dataset.withheld = "1";
    li.append(el("div", {class: "message", "data-testid": "withheld", text: withheldFeedback(result)}));
    return li;
  }
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

/* Predict steps withhold the answer of a wrong prediction until the learner asks for it. */
function withholding(out) {
  if (state.step.kind !== "Predict" || out.passed) return false;
  return !stepRecord(state.ex.id, state.step.id).revealed;
}

function renderResults(out, roundTripMs) {
  const list = $("results");
  list.replaceChildren();
  const graded = out.checks.filter((c) => c.status !== "local");
  const withhold = withholding(out);
  for (const c of graded) list.append(renderCheck(c, withhold));
  list.dataset.withheld = withhold ? "1" : "0";
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
  if (out.report && out.report.table && !withhold) {
    report.append(renderTable(out.report.table, out.report.title || "Your suite's kill matrix, computed live in this page"));
  }
  showPredictBox();
}

/* ---- Predict steps: first prediction, answer on request ------------------------------------ */

function describeAnswer(answer) {
  if (!answer || typeof answer !== "object" || !Object.keys(answer).length) return "(nothing recorded)";
  return Object.entries(answer).map(([name, value]) => `${name} = ${JSON.stringify(value)}`).join("; ");
}

function showPredictBox() {
  const box = $("predict-box");
  const predict = state.step && state.step.kind === "Predict";
  box.hidden = !predict;
  if (!predict) return;
  const rec = stepRecord(state.ex.id, state.step.id);
  const attempted = Boolean(rec.first);
  const open = Boolean(rec.revealed || rec.done);
  const note = $("predict-note");
  if (!attempted) {
    note.textContent = "Your first submission is recorded as your prediction. A wrong one shows " +
        "what is right and wrong; the answer is shown only when you ask, after an attempt.";
  } else if (!open) {
    note.textContent = "Your prediction is recorded. Try again, or reveal the answer (the step " +
        "then counts as \u201csolution viewed\u201d).";
  } else {
    note.textContent = rec.done && !rec.revealed ? "You predicted it." : "The answer is shown with the checks.";
  }
  const reveal = $("reveal-answer");
  reveal.hidden = !attempted || open;
  const first = $("first-prediction");
  first.hidden = !(attempted && open);
  first.replaceChildren();
  if (attempted && open) {
    const verdicts = Object.entries(rec.first.checks || {}).map(([id, status]) => `${id}: ${status}`).join(", ");
    first.append(el("p", {}, el("strong", {text: "Your first prediction"}),
                    ` (${clockTime(rec.first.at)}): ${describeAnswer(rec.first.answer)}`),
                 el("p", {class: "small", text: `Its checks: ${verdicts || "none ran"}. The truth is ` +
                          "in each check's \u201cexpected\u201d above."}));
  }
}

function recordFirstPrediction(out) {
  if (state.step.kind !== "Predict" || stepRecord(state.ex.id, state.step.id).first) return;
  const checks = {};
  for (const c of out.checks) if (c.status !== "local") checks[c.id] = c.status;
  noteStep("exercises", state.ex.id, state.step.id,
           {first: {answer: out.record || {}, checks, passed: Boolean(out.passed), at: new Date().toISOString()}});
}

function revealAnswer() {
  noteStep("exercises", state.ex.id, state.step.id, {revealed: true, solution_viewed: true});
  if (state.lastOut) renderResults(state.lastOut.out, state.lastOut.roundTripMs);
  showPredictBox();
  updateLoadSolution();
}

/* Load solution on a Predict step hands over the answer, so it waits for an attempt too. */
function updateLoadSolution() {
  const button = $("load-solution");
  const locked = state.step.kind === "Predict" && !stepRecord(state.ex.id, state.step.id).first;
  button.disabled = locked;
  button.title = locked ? "Submit a prediction first: the solution holds the answer." : "";
}

/* ---- the learner's output ------------------------------------------------------------------ */

const STREAMS = [["stdout", "printed (stdout)"], ["stderr", "stderr (warnings, errors)"],
                 ["traceback", "traceback"], ["value", "value of the last line"]];

function renderStreams(host, out, emptyText) {
  host.replaceChildren();
  let any = false;
  for (const [key, label] of STREAMS) {
    const text = out[key];
    if (typeof text !== "string" || text === "") continue;
    any = true;
    host.append(el("h4", {text: label}),
                el("pre", {class: `stream stream-${key}`, "data-testid": key, text}));
  }
  if (!any) host.append(el("p", {class: "small", "data-testid": "no-output", text: emptyText}));
}

function showRunOutput(out) {
  state.runs += 1;
  const box = $("run-output");
  const host = $("output-streams");
  renderStreams(host, out, "Your code printed nothing.");
  host.prepend(el("p", {class: "small run-stamp", "data-testid": "run-stamp",
                         text: `Run ${state.runs} at ${clockTime(new Date().toISOString())}`}));
  box.dataset.state = "done";
  box.dataset.run = String(state.runs);
}

function showLostOutput(message) {
  state.runs += 1;
  const host = $("output-streams");
  host.replaceChildren(el("p", {class: "small", "data-testid": "no-output",
                                text: `Run ${state.runs}: ${message}`}));
  $("run-output").dataset.state = "error";
}

/* ---- the scratch cell ---------------------------------------------------------------------- */

async function runScratch() {
  if (state.scratchRunning) return;
  state.scratchRunning = true;
  $("run-scratch").disabled = true;
  flushDraft();
  const output = $("scratch-output");
  output.dataset.state = "running";
  output.replaceChildren(el("p", {class: "small", text: "Running…"}));
  try {
    const out = await runtime.call("exercises.scratch", {
      exercise: state.ex.id, step: state.step.id,
      definitions: state.editor.getValue(), code: state.scratch.getValue(),
    }, {timeoutMs: TIME_LIMIT_MS});
    renderStreams(output, out, "Nothing printed, and the last line is not an expression with a value.");
    output.dataset.state = out.traceback ? "error" : "done";
  } catch (error) {
    const limited = /time limit/.test(error.message);
    output.replaceChildren(el("p", {class: "notice", text: limited
      ? `Stopped after ${TIME_LIMIT_MS / 1000} s (an infinite loop?). Python was restarted.`
      : `The scratch cell could not run: ${error.message}`}));
    output.dataset.state = "error";
    if (limited) watchRuntime();
  } finally {
    state.scratchRunning = false;
    $("run-scratch").disabled = $("runtime-status").dataset.state !== "ready";
  }
}

/* ---- which Python ------------------------------------------------------------------------- */

function newer(version, than) {
  const a = String(version).split(".").map(Number);
  const b = String(than).split(".").map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const x = a[i] || 0;
    const y = b[i] || 0;
    if (x !== y) return x > y;
  }
  return false;
}

function showRuntimeNote(info) {
  const note = $("runtime-note");
  if (!info) return;
  const py = PYTHON_NEWER.filter(([v]) => newer(v, info.python));
  const np = NUMPY_NEWER.filter(([v]) => newer(v, info.numpy));
  const missing = py.map(([v, what]) => el("li", {text: `${what} (Python ${v})`}))
    .concat(np.map(([v, what]) => el("li", {text: `${what} (NumPy ${v})`})));
  note.replaceChildren(`Your code runs on Python ${info.python} with NumPy ${info.numpy} ` +
                       `(Pyodide ${info.pyodide}), not the Python on your machine.`);
  if (missing.length) {
    note.append(" ", el("details", {class: "rules-out"},
                        el("summary", {text: `What that rules out (${missing.length} newer features)`}),
                        el("ul", {}, ...missing)));
  }
  note.dataset.state = "ready";
  note.dataset.python = info.python;
  note.dataset.numpy = info.numpy;
}

function renderFailure(message) {
  const list = $("results");
  list.replaceChildren();
  showLostOutput("no output: Python stopped before it could send any back.");
  for (const c of state.step.checks.filter((x) => x.runner !== "local")) {
    list.append(renderCheck({id: c.id, title: c.title, status: "error", message}));
  }
  list.dataset.state = "error";
  $("results-summary").textContent = message;
  $("results-summary").dataset.state = "error";
}

async function finishPending(out, code) {
  let unusable = null;  // a runner's failsAll error: the code cannot be used by any check
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
      if (error.failsAll && !unusable) unusable = error.message;
    }
  }
  if (unusable) {
    out.checks = out.checks.map((c) => (c.status === "local" ? c : {
      id: c.id, title: c.title, runner: c.runner, status: "error",
      message: c.status === "error" ? c.message : `not graded: ${unusable}`}));
  }
  const graded = out.checks.filter((c) => c.status !== "local");
  out.passed = graded.length > 0 && graded.every((c) => c.status === "pass");
  return out;
}

async function runChecks() {
  if (state.running) return;
  state.running = true;
  $("run-checks").disabled = true;
  flushDraft();
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
    recordFirstPrediction(out);
    const roundTripMs = performance.now() - started;
    state.lastOut = {out, roundTripMs};
    renderResults(out, roundTripMs);
    showRunOutput(out);
    updateLoadSolution();
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
    const peak = Number(note.dataset.peakTflops);  // stamped from nlpcore.hardware by the build
    note.textContent = `${env.gpu || env.gpu_name || "GPU"} · torch ${env.torch || "?"} · triton ` +
        `${env.triton || "?"} · ${doc.dtype || "bf16"}, ${doc.tokens_per_batch || 16384} tokens per ` +
        `batch. Command: ${doc.command || env.command || "bench/triton_h200.py"}. ` +
        "Look for: ours vs SDPA flash (target ≥ 1×) and vs cuDNN; causal skips the tiles above the " +
        "diagonal (about half the FLOPs), but its time reaches half only at long N." +
        (peak > 0 ? ` Hover a bar for its fraction of the H200's ${peak} TFLOP/s dense bf16 peak.` : "");
    note.dataset.state = "ready";
    const labels = rows.map((r) => `d=${r.d} N=${r.n}${r.causal ? " causal" : ""}`);
    for (const pass of ["fwd", "bwd"]) {
      const datasets = TRITON_BACKENDS.map(({key, label, color}) => ({
        label, backgroundColor: color,
        data: rows.map((r) => {
          const v = r[pass] && r[pass][key] && r[pass][key].tflops;
          return typeof v === "number" && isFinite(v) ? v : null;
        }),
      }));
      new window.Chart($(`plot-${pass}`), {
        type: "bar", data: {labels, datasets},
        options: {animation: false, responsive: false,
                  plugins: {title: {display: true, text: `${pass === "fwd" ? "Forward" : "Backward"} TFLOP/s`},
                            tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y.toFixed(0)} TFLOP/s` +
                                (peak > 0 ? ` (${(100 * ctx.parsed.y / peak).toFixed(0)}% of peak)` : "")}}},
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
    $("run-scratch").disabled = Boolean(state.scratchRunning);
    showRuntimeNote(runtime.info);
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
  state.scratch = createEditor($("scratch-host"), {label: "scratch cell", mode: "python"});
  selectStep(params.get("step"), false);
  onProgressChange(() => {
    renderLadder();
    showPredictBox();
  });

  $("run-checks").addEventListener("click", runChecks);
  $("run-scratch").addEventListener("click", runScratch);
  $("next-hint").addEventListener("click", nextHint);
  $("load-solution").addEventListener("click", () => askToReplace("solution"));
  $("reset-code").addEventListener("click", () => askToReplace("starter"));
  $("confirm-replace-yes").addEventListener("click", () => replaceEditor(state.confirmAction));
  $("confirm-replace-no").addEventListener("click", closeConfirm);
  $("restore-draft").addEventListener("click", restoreDraft);
  $("reveal-answer").addEventListener("click", revealAnswer);
  state.editor.onChange(() => scheduleSave(state.editor, draftKey()));
  state.scratch.onChange(() => scheduleSave(state.scratch, `${draftKey()}#scratch`));
  window.addEventListener("pagehide", flushDraft);
  document.addEventListener("visibilitychange", flushDraft);
  runtime.onProgress((ev) => {
    if ($("runtime-status").dataset.state === "loading" && ev && ev.message) {
      $("runtime-status").textContent = `Starting Python: ${ev.message}`;
    }
  });
  watchRuntime();
}

main().catch((error) => notice("ex-notice", `The exercise page failed to start: ${error.message}`));
