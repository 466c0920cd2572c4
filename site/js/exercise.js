/* One exercise page: exercise.html?id=<id>[&step=<step id>] -- the page's wiring.
 *
 * The exercise (statement, starter, solution, hints, checks) comes from data/exercises.json,
 * which build.py exports from nlpcore.lab (Python is the one source of truth). This module
 * shows an exercise and its steps and connects the parts, each in its own module:
 *   js/check-runner.js     one grade in the Pyodide worker (time limit, checks run in the page)
 *   js/exercise-results.js the checks and the learner's output of each run
 *   js/exercise-drafts.js  drafts saved per step as the learner types; drafts set aside
 *   js/exercise-predict.js Predict steps: the first prediction kept, the answer on request
 *   js/python-version.js   which Python runs the code, and what that rules out
 *   js/work-file.js        all progress and drafts exported and imported as one file
 *   js/exercise-todo.js    Next TODO (Alt+T): what is left to write, Predict placeholders too
 *   js/exercise-panels.js  the exercise list, a step's code panels, its local-only checks
 *   js/exercises/<id>.js   an exercise's own page code, named by the exercise in
 *                          extra.js_modules (paths relative to the site root) and imported
 *                          before the editor exists: it may register check runners, a CodeMirror
 *                          mode named by extra.language (default "python"), or listen to the
 *                          page's events: "exercise:step" ({exercise, step, files}, each step
 *                          shown) and "exercise:graded" ({exercise, step, code, result}).
 *
 * Page contract: [data-testid=run-checks], [data-testid=load-solution] (it asks first:
 * [data-testid=confirm-replace-yes]), one [data-testid=check] per graded check with data-status
 * pass|fail|error. "local" checks (Triton, GPU) are listed separately with their commands,
 * outside data-testid=check.
 *
 * Run checks asked for before Python is ready (Ctrl+Enter while it starts or warms up; the
 * button is disabled until then) is said in the results' summary and runs once, when ready.
 *
 * The learner's workspace: what their code printed while graded shows beside the checks, per
 * run; a scratch cell (exercises.scratch) runs code against the editor's definitions without
 * grading; "Load solution" and "Reset to starter" ask first and keep the draft, restorable with
 * one click, also after a reload.
 */
import {getRuntime} from "./runtime.js";
import {loadProgress, markStep, noteStep, stepRecord, isDone, onProgressChange} from "./progress.js";
import {renderMath} from "./katex-render.js";
import {renderMarkdown} from "./md.js";
import {createEditor} from "./editor.js";
import {el} from "./dom.js";
import {TIME_LIMIT_MS, grade, overran, warmUp} from "./check-runner.js";
import {DraftSaver, clockTime, dropKeptDraft, keepDraft, keptDraft, savedDraft} from "./exercise-drafts.js";
import {clearResults, renderFailure, renderResults, showRefused, showRunOutput, showRunning}
  from "./exercise-results.js";
import {fetchHeldSolution, incompleteRefusal, recordFirstPrediction, revealAnswer, showPredictBox,
        solutionLocked, untouchedRefusal, withholding} from "./exercise-predict.js";
import {codeProblem, describeProblem, showRuntimeNote} from "./python-version.js";
import {mountWorkFile} from "./work-file.js";
import {ScratchCell} from "./exercise-scratch.js";
import {hideRerun, offerReruns, showAfterPass, showRerun} from "./exercise-after.js";
import {listenForKeys, showKeyMode} from "./exercise-keys.js";
import {nextTodo as jumpToTodo} from "./exercise-todo.js";
import {renderExerciseList, renderPanels, showLocalChecks} from "./exercise-panels.js";

const $ = (id) => document.getElementById(id);

const state = {ex: null, step: null, editor: null, scratch: null, hintsShown: 0, running: false, queued: false,
               files: {}, lastOut: null, confirmAction: null,
               confirmOpener: null, otherTab: null, otherTabOpener: null};
const runtime = getRuntime();

const draftKey = () => `${state.ex.id}/${state.step.id}`;

function notice(id, text) {
  const box = $(id);
  box.hidden = !text;
  box.textContent = text || "";
}

function showDraftState(text, stateName) {
  const line = $("draft-state");
  line.textContent = text;
  line.dataset.state = stateName;
  $("other-tab-reopen").hidden = stateName !== "conflict";
}

const saver = new DraftSaver({
  onState: (editor, text, stateName) => { if (editor === state.editor) showDraftState(text, stateName); },
  onConflict: (entry) => askAboutOtherTab(entry),
});

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

/* ---- replacing the editor's code: ask first, keep the draft -------------------------------- */

function showKeptDraft() {
  const kept = keptDraft(draftKey());
  $("kept-draft").hidden = !kept;
  if (kept) {
    const why = {solution: "the solution was loaded", starter: "the starter was loaded",
                 "other-tab": "you took another tab's version", import: "a work file was imported"};
    $("kept-draft-text").textContent = `Your draft from ${clockTime(kept.at)} was set aside when ` +
        `${why[kept.by] || why.starter}.`;
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
  state.confirmOpener = document.activeElement;
  $("confirm-replace-yes").focus();
}

/* Closes the question; `refocus` puts focus back where it was when the question opened. */
function closeConfirm(refocus = false) {
  if ($("confirm-replace").hidden) return;
  $("confirm-replace").hidden = true;
  state.confirmAction = null;
  const opener = state.confirmOpener;
  state.confirmOpener = null;
  if (refocus && opener && opener.isConnected && !opener.disabled) opener.focus();
}

function replaceEditor(by) {
  if (by !== "solution" && by !== "starter") return;
  closeConfirm();
  saver.flush();
  const step = state.step;
  const text = by === "solution" ? step.solution : step.starter;
  const current = state.editor.getValue();
  if (current !== text && current !== step.starter && current !== step.solution) {
    keepDraft(draftKey(), current, by);
  }
  saver.setText(state.editor, text);
  saver.write(draftKey(), state.editor, text);
  // Viewed before the step was passed: it counts as "solution viewed" (a step solved first stays solved).
  if (by === "solution" && !isDone("exercises", state.ex.id, step.id)) {
    noteStep("exercises", state.ex.id, step.id, {solution_viewed: true});
  }
  showKeptDraft();
  showDraftState(by === "solution" ? "The solution is in the editor." : "The starter is in the editor.", "saved");
  state.editor.focus();  // the question's button is gone: focus goes to the code just replaced
}

function restoreDraft() {
  const kept = keptDraft(draftKey());
  if (!kept) return;
  saver.flush();
  saver.setText(state.editor, kept.code);
  saver.write(draftKey(), state.editor, kept.code);
  dropKeptDraft(draftKey());
  showKeptDraft();
  showDraftState("Your draft is back in the editor.", "saved");
  state.editor.focus();
}

/* ---- another tab changed this step's draft: the learner chooses ---------------------------- */

function askAboutOtherTab(entry) {
  if (entry.editor !== state.editor && entry.editor !== state.scratch) return;
  state.otherTab = entry.key;
  const which = entry.key.endsWith("#scratch") ? "scratch cell" : "code";
  $("other-tab-text").textContent = `Another tab changed this step's ${which} at ` +
      `${clockTime(new Date().toISOString())}. Nothing is saved here until you choose: keep this ` +
      "tab's version (the other tab is told), or take the other tab's (yours is kept: Restore my draft). " +
      "Esc closes this question for now and changes nothing; \u201cChoose which to keep\u201d asks again.";
  $("other-tab").hidden = false;
  state.otherTabOpener = document.activeElement;
  $("other-tab-theirs").focus();
}

function closeOtherTab(refocus = false) {
  if ($("other-tab").hidden) return;
  $("other-tab").hidden = true;
  const opener = state.otherTabOpener;
  state.otherTabOpener = null;
  if (!refocus) return;
  if (opener && opener.isConnected && !opener.hidden && !opener.closest("[hidden]")) opener.focus();
  else state.editor.focus();
}

function resolveOtherTab(mine) {
  const key = state.otherTab;
  if (mine) saver.keepMine(key);
  else saver.takeTheirs(key);
  showKeptDraft();
  closeOtherTab(true);
}

/* ---- the exercise and its steps ------------------------------------------------------------ */

function stepMark(step) {
  const done = isDone("exercises", state.ex.id, step.id);
  const viewed = Boolean(stepRecord(state.ex.id, step.id).solution_viewed);
  const text = done ? (viewed ? "✓ done, solution viewed" : "✓ solved")
    : (viewed ? `solution viewed · ${step.minutes} min` : `${step.minutes} min`);
  return {done, viewed, text};
}

/* The step tabs: built once, then updated in place, so a tab keeps keyboard focus and a click
 * never lands on a tab that is being replaced. */
function renderLadder() {
  const nav = $("ladder");
  if (nav.dataset.exercise !== state.ex.id) {
    nav.dataset.exercise = state.ex.id;
    nav.replaceChildren(...state.ex.steps.map((step, index) => {
      const button = el("button", {type: "button", class: "ladder-step", "data-testid": "step-tab",
                                   "data-step": step.id},
                        el("span", {class: "n", text: String(index + 1)}),
                        el("span", {class: "kind", text: step.kind}),
                        el("span", {class: "title", text: step.title}),
                        el("span", {class: "mark", "data-testid": "step-mark"}));
      button.addEventListener("click", () => selectStep(step.id, true));
      return button;
    }));
  }
  for (const button of nav.querySelectorAll("[data-testid=step-tab]")) {
    const step = state.ex.steps.find((s) => s.id === button.dataset.step);
    const {done, viewed, text} = stepMark(step);
    const current = step.id === state.step.id;
    button.classList.toggle("current", current);
    button.dataset.done = done ? "1" : "0";
    button.dataset.solutionViewed = viewed ? "1" : "0";
    if (current) button.setAttribute("aria-current", "step");
    else button.removeAttribute("aria-current");
    button.querySelector(".mark").textContent = text;
  }
}

function selectStep(stepId, pushUrl) {
  saver.flush();
  closeConfirm();
  const step = state.ex.steps.find((s) => s.id === stepId) || state.ex.steps[0];
  state.step = step;
  state.hintsShown = 0;
  state.queued = false;  // a run asked for on another step is not this step's
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
  renderPanels((state.ex.extra.panels || []).filter((p) => !p.steps || p.steps.includes(step.id)), state.files);
  const saved = savedDraft(draftKey());
  closeOtherTab();
  saver.shows(draftKey(), state.editor, saved);
  saver.setText(state.editor, saved !== undefined ? saved : step.starter);
  state.editor.refresh();
  showDraftState(saved !== undefined && saved !== step.starter
    ? "Your saved draft for this step is in the editor." : "", "idle");
  showKeptDraft();
  const python = (step.language || "python") === "python";
  $("scratch").hidden = !python;
  if (python && state.scratch) {
    const scratchSaved = savedDraft(`${draftKey()}#scratch`);
    saver.shows(`${draftKey()}#scratch`, state.scratch, scratchSaved);
    saver.setText(state.scratch, scratchSaved !== undefined ? scratchSaved : "");
    state.scratch.refresh();
  }
  scratchCell.reset();  // another step's cell starts from a fresh namespace
  $("run-checks").textContent = step.kind === "Predict" ? "Submit prediction" : "Run checks";
  updateLoadSolution();
  $("hints").replaceChildren();
  $("next-hint").disabled = step.hints.length === 0;
  $("next-hint").textContent = `Show a hint (${step.hints.length} left)`;
  clearResults(step, isDone("exercises", state.ex.id, step.id));
  showCodeProblem(null);
  hideRerun();
  showAfterPass(step, isDone("exercises", state.ex.id, step.id), () => state.editor.getValue());
  state.lastOut = null;
  showPredictBox(state.ex, step);
  showLocalChecks(step);
  document.dispatchEvent(new CustomEvent("exercise:step",
      {detail: {exercise: state.ex, step, files: state.files}}));
}

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

const nextTodo = () => jumpToTodo(state.editor, state.step, $("todo-state"));  // js/exercise-todo.js

function updateLoadSolution() {
  const why = solutionLocked(state.ex, state.step);  // a Predict step's, before a prediction
  $("load-solution").disabled = Boolean(why);
  // Said beside the button, not only in a title: a disabled button takes no focus or hover.
  $("load-solution").title = $("load-solution-why").textContent = why;
  $("load-solution-why").hidden = !why;
  fetchHeldSolution(runtime, state.ex, state.step, updateLoadSolution);
}

function onRevealAnswer() {
  revealAnswer(state.ex, state.step);
  if (state.lastOut) {
    const {out, roundTripMs, refused} = state.lastOut;
    renderResults(out, roundTripMs, withholding(state.ex, state.step, out), {refused});
  }
  showPredictBox(state.ex, state.step);
  updateLoadSolution();
}

/* The line that stops the learner's code from loading, marked in the editor and named (with
 * the page's Python version when a newer Python would take it); nothing when it loads. */
function showCodeProblem(out) {
  state.editor.clearMarks();
  const box = $("code-problem");
  const problem = out && (state.step.language || "python") === "python" ? codeProblem(out) : null;
  box.hidden = !problem;
  if (!problem) return;
  const line = state.editor.markLine(problem.line, "py-error-line");
  box.dataset.line = String(line);
  box.dataset.newer = problem.newer ? problem.newer.version : "";
  $("code-problem-text").textContent = describeProblem(problem, runtime.info && runtime.info.python);
  $("code-problem-go").textContent = `Go to line ${line}`;
}

const scratchCell = new ScratchCell(runtime);

/* One failing check again, shown alone with its inputs (js/exercise-after.js). */
async function rerunCheck(checkId, button) {
  if (state.running) return;
  state.running = true;
  button.disabled = true;
  const {ex, step} = state;
  const started = performance.now();
  try {
    const seed = state.lastOut ? state.lastOut.out.seed : undefined;  // the same inputs as the grade
    const out = await grade(runtime, {exercise: ex.id, step: step.id, code: state.editor.getValue(), only: [checkId], seed});
    if (out.checks.length) showRerun(out.checks[0], performance.now() - started, out.seed, out.checks.length);
  } catch (error) {
    showRerun({id: checkId, title: checkId, status: "error", message: `could not run: ${error.message}`},
              performance.now() - started);
    if (overran(error)) watchRuntime();
  } finally {
    state.running = false;
    button.disabled = false;
    // Disabling the focused button dropped focus to the page body: give it back.
    if (document.activeElement === document.body || document.activeElement === null) button.focus();
  }
}

function runScratch() {
  if ($("run-scratch").disabled || $("scratch").hidden) return;
  saver.flush();
  scratchCell.run({exercise: state.ex.id, step: state.step.id, definitions: state.editor.getValue(),
                   code: state.scratch.getValue()}, {onRestart: watchRuntime});
}

/* ---- running: the checks and the scratch cell ---------------------------------------------- */

async function runChecks() {
  if (state.running) return;
  if ($("run-checks").disabled) {  // Python is still starting (or warming up): said, run once ready
    if ($("runtime-status").dataset.state === "error") return;  // that line says checks cannot run
    state.queued = true;
    $("results-summary").textContent = "Python is still starting \u2014 your checks will run when it is ready.";
    $("results-summary").dataset.state = "queued";
    return;
  }
  state.running = true;
  $("run-checks").disabled = true;
  saver.flush();
  const {ex, step} = state;
  const code = state.editor.getValue();
  saver.write(draftKey(), state.editor, code);
  const untouched = untouchedRefusal(step, code);
  if (untouched) {
    showRefused(untouched);
    state.running = false;
    $("run-checks").disabled = false;
    return;
  }
  showRunning();
  const started = performance.now();
  try {
    const out = await grade(runtime, {exercise: ex.id, step: step.id, code});
    const refused = incompleteRefusal(step, out);
    if (!refused) recordFirstPrediction(ex, step, out);
    const roundTripMs = performance.now() - started;
    state.lastOut = {out, roundTripMs, refused};
    showCodeProblem(out);
    hideRerun();
    renderResults(out, roundTripMs, withholding(ex, step, out), {refused,
                  viewed: Boolean(stepRecord(ex.id, step.id).solution_viewed)});
    offerReruns(rerunCheck);
    showPredictBox(ex, step);
    showRunOutput(out);
    updateLoadSolution();
    document.dispatchEvent(new CustomEvent("exercise:graded",
        {detail: {exercise: ex.id, step: step.id, code, result: out}}));
    if (out.passed) {
      const extra = out.record && Object.keys(out.record).length ? {answer: out.record} : null;
      markStep("exercises", ex.id, step.id, extra);
    }
    showAfterPass(step, isDone("exercises", ex.id, step.id), () => state.editor.getValue());
  } catch (error) {
    renderFailure(step, overran(error)
      ? `Stopped: your code ran longer than the time limit of ${TIME_LIMIT_MS / 1000} s ` +
        "(an infinite loop?). Python was restarted; fix the code and run the checks again."
      : `The checks could not run: ${error.message}`);
    if (overran(error)) watchRuntime();
  } finally {
    state.running = false;
    $("run-checks").disabled = false;
  }
}

function watchRuntime() {
  const status = $("runtime-status");
  status.dataset.state = "loading";
  status.textContent = "Starting Python…";
  $("run-checks").disabled = true;
  // Ready means the learner's worker ran a warm-up collect (check-runner.js: first-use costs paid).
  runtime.ready.then(() => warmUp(runtime, state.ex.id, state.step)).then(() => {
    status.dataset.state = "ready";
    status.textContent = "Python is ready.";
    $("run-checks").disabled = state.running;
    $("run-scratch").disabled = scratchCell.running;
    showRuntimeNote($("runtime-note"), runtime.info);
    if (state.queued) {  // asked for before Python was ready: one run, now
      state.queued = false;
      runChecks();
    }
  }, (error) => {
    state.queued = false;
    status.dataset.state = "error";
    status.textContent = `Python (Pyodide) is unavailable, so checks cannot run here: ${error.message}`;
  });
}

/* ---- start --------------------------------------------------------------------------------- */

/* The exercise's own page modules (js/exercises/<id>.js), before the editor exists. */
async function loadPageModules(ex) {
  for (const module of ex.extra.js_modules || []) {
    if (!state.files[module]) {
      notice("ex-notice", `This build lacks ${module}, which this exercise's page needs.`);
      continue;
    }
    try {
      await import(new URL(`../${module}`, import.meta.url));
    } catch (error) {
      notice("ex-notice", `This exercise's page code (${module}) could not be loaded: ${error.message}.`);
    }
  }
}

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

  await loadPageModules(ex);
  const language = ex.extra.language || "python";
  if (language !== "python") {
    $("editor-label").textContent = `Your ${language.toUpperCase()} code — checked by Python ` +
        `(Pyodide) in this page and, for the GPU checks, run through WebGPU; each run has a time ` +
        `limit of ${TIME_LIMIT_MS / 1000} s`;
  }
  const runKeys = {"Ctrl-Enter": runChecks, "Cmd-Enter": runChecks, "Alt-T": nextTodo};
  state.editor = createEditor($("editor-host"), {
    label: "your code", inputId: "editor-input", describedBy: "editor-label", mode: language, keys: runKeys,
    onKeyMode: (mode) => showKeyMode($("editor-keys"), mode, "Ctrl+Enter (⌘+Enter) runs the checks"),
  });
  if (state.editor.fallback) notice("editor-notice", state.editor.fallback);
  state.scratch = createEditor($("scratch-host"), {
    label: "scratch cell", inputId: "scratch-input", mode: "python", keys: {...runKeys, "Shift-Enter": runScratch},
    onKeyMode: (mode) => showKeyMode($("scratch-keys"), mode, "Shift+Enter runs the cell"),
  });
  listenForKeys({run: runChecks, dialogs: [
    {box: $("confirm-replace"), close: () => closeConfirm(true)},
    {box: $("other-tab"), close: () => closeOtherTab(true)},  // decide later: nothing saved until then
  ]});
  selectStep(params.get("step"), false);
  onProgressChange(() => {
    renderLadder();
    showPredictBox(state.ex, state.step);
  });

  $("run-checks").addEventListener("click", runChecks);
  $("run-scratch").addEventListener("click", runScratch);
  $("reset-scratch").addEventListener("click", () => scratchCell.reset());
  $("next-hint").addEventListener("click", nextHint);
  $("next-todo").addEventListener("click", nextTodo);
  $("load-solution").addEventListener("click", () => askToReplace("solution"));
  $("reset-code").addEventListener("click", () => askToReplace("starter"));
  $("confirm-replace-yes").addEventListener("click", () => replaceEditor(state.confirmAction));
  $("confirm-replace-no").addEventListener("click", () => closeConfirm(true));
  $("restore-draft").addEventListener("click", restoreDraft);
  $("code-problem-go").addEventListener("click", () => state.editor.jumpTo(Number($("code-problem").dataset.line)));
  $("other-tab-mine").addEventListener("click", () => resolveOtherTab(true));
  $("other-tab-theirs").addEventListener("click", () => resolveOtherTab(false));
  $("other-tab-reopen").addEventListener("click", () => {
    $("other-tab").hidden = false;
    state.otherTabOpener = $("other-tab-reopen");
    $("other-tab-theirs").focus();
  });
  saver.watchOtherTabs();
  mountWorkFile({before: () => saver.flush(), after: () => selectStep(state.step.id, false)});
  $("reveal-answer").addEventListener("click", onRevealAnswer);
  state.editor.onChange(() => saver.schedule(state.editor, draftKey()));
  state.scratch.onChange(() => saver.schedule(state.scratch, `${draftKey()}#scratch`));
  window.addEventListener("pagehide", () => saver.flush());
  document.addEventListener("visibilitychange", () => saver.flush());
  runtime.onProgress((ev) => {
    if ($("runtime-status").dataset.state === "loading" && ev && ev.message) {
      $("runtime-status").textContent = `Starting Python: ${ev.message}`;
    }
  });
  watchRuntime();
}

main().catch((error) => notice("ex-notice", `The exercise page failed to start: ${error.message}`));
