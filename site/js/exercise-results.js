/* The exercise page's results view: the checks of one grade, the learner's output of each run.
 *
 * Shows, never decides: a grade (`out`: passed, checks [{id, title, status, message, ...details}],
 * stdout/stderr/traceback, report, elapsed_ms) is drawn as one [data-testid=check] per graded
 * check (data-status pass|fail|error), a summary line, the kill-matrix report if any, and the
 * run's output streams in [data-testid=run-output]. A Predict step's wrong answer is drawn
 * withheld: which parts are wrong, or which way a number is off, without the expected value.
 */
import {el} from "./dom.js";
import {clockTime} from "./exercise-drafts.js";

const $ = (id) => document.getElementById(id);
let runs = 0;  // runs shown in this page, for the output's stamp

const DETAIL_LABELS = [
  ["expected", "expected"], ["got", "got"], ["answer", "true value"], ["tolerance", "tolerance"],
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

export function renderTable(table, caption) {
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
  return el("div", {class: "table-scroll"}, t);
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
  // A Predict check that already places the guess without the true number (Python's "got":
  // "1 (too low, by a factor of more than 10)", "expected": "within 20% of the true value").
  if (typeof result.got === "string" && /\btoo (high|low)\b/.test(result.got)) {
    return `Your number ${result.got.replace(/^\S+ \((.*)\)$/, "is $1")}` +
        (typeof result.expected === "string" ? ` (passes ${result.expected}).` : ".");
  }
  const expected = Number(result.expected);
  const got = Number(result.got);
  if (result.expected !== undefined && result.got !== undefined && isFinite(expected) && isFinite(got)) {
    return `Your number is too ${got > expected ? "high" : "low"}` +
        (result.tolerance ? ` (allowed: ${result.tolerance}).` : ".");
  }
  return "Not right yet.";
}

/* A check that was not run (before any grade, or a refused answer): no verdict, no
 * data-testid="check" (whose data-status is always pass|fail|error). */
function notRunItem(c) {
  return el("li", {class: "check", "data-check": c.id, "data-state": "not-run"},
            el("span", {class: "badge", text: "not run"}), el("strong", {text: c.title}));
}

export function renderCheck(result, withhold = false) {
  if (result.status === "not-run") return notRunItem(result);
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

/* The step's checks as "not run", before any grade of this step. */
export function clearResults(step, passedBefore) {
  const list = $("results");
  list.replaceChildren();
  list.dataset.state = "idle";
  for (const c of step.checks.filter((x) => x.runner !== "local")) list.append(notRunItem(c));
  $("results-summary").textContent = passedBefore
    ? "You passed this step before. Run the checks again any time." : "Not run yet.";
  $("results-summary").dataset.state = "idle";
  $("report").replaceChildren();
  $("output-streams").replaceChildren();
  $("run-output").dataset.state = "idle";
}

/* A run refused before grading: the summary says why, the checks stay "not run". */
export function showRefused(message) {
  $("results").dataset.state = "refused";
  $("results-summary").textContent = message;
  $("results-summary").dataset.state = "refused";
}

export function showRunning() {
  $("results").dataset.state = "running";
  $("results-summary").textContent = "Running your code…";
  $("results-summary").dataset.state = "running";
}

/* The part of a grade's round trip spent neither in Python nor running its checks in this page
 * (`page_ms`, js/check-runner.js): starting or waiting for a Python worker, and the messages. */
export const workerWait = (out, roundTripMs) => Math.max(0, roundTripMs - out.elapsed_ms - (out.page_ms || 0));

/* Why a grade took over a second, from the grade's own timings: the checks that took most of
 * it (each check's `ms`: its part in the learner's worker plus its judging), the checks run in
 * this page (WebGPU), or the wait for a Python worker. Empty under a second. */
export function slowReason(out, graded, roundTripMs) {
  if (!(roundTripMs > 1000)) return "";
  const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
  const waited = workerWait(out, roundTripMs);
  if (waited > roundTripMs / 2) {
    return ` Over a second: ${secs(waited)} of it went to starting or waiting for a Python worker.`;
  }
  if (out.page_ms > roundTripMs / 2) {
    return ` Over a second: ${secs(out.page_ms)} of it went to the checks run in this page with ` +
        "WebGPU (the first run of a shader compiles its pipelines; on a CPU adapter that takes seconds).";
  }
  const slow = graded.filter((c) => c.ms > 0).sort((a, b) => b.ms - a.ms).slice(0, 2);
  if (!slow.length) return "";
  return " Over a second: most of it went to " + slow.map((c) => `“${c.title}” (${secs(c.ms)})`).join(" and ") +
      ", which run your code on cases of their own (large sizes, or under Python's memory tracer).";
}

/* `withhold`: draw failures without expected values (a Predict step's answer); `refused`: the
 * answer was not taken (a sentence saying why); `shown`: ids of checks drawn in full anyway;
 * `viewed`: the solution was loaded or revealed first (a pass is saved as "solution viewed"). */
export function renderResults(out, roundTripMs, withhold, {refused = null, shown = [], viewed = false} = {}) {
  const list = $("results");
  list.replaceChildren();
  const graded = out.checks.filter((c) => c.status !== "local");
  // A completeness check ("is every part of the answer there?", Python marks it) is drawn in full.
  for (const c of graded) list.append(renderCheck(c, withhold && !shown.includes(c.id) && !c.completeness));
  list.dataset.withheld = withhold ? "1" : "0";
  const passed = graded.filter((c) => c.status === "pass").length;  // (none when refused)
  const summary = $("results-summary");
  summary.textContent = `${passed} of ${graded.length} checks pass. Graded in ` +
      `${out.elapsed_ms.toFixed(0)} ms in Python (${roundTripMs.toFixed(0)} ms round trip).` +
      slowReason(out, graded, roundTripMs) +
      (out.passed ? (viewed ? " Step complete — saved to your progress as \u201csolution viewed\u201d " +
                              "(you loaded or revealed the solution first), not \u201csolved\u201d."
                            : " Step complete — saved to your progress.") : "");
  summary.dataset.state = out.passed ? "passed" : "failed";
  if (refused) {
    summary.textContent = refused;
    summary.dataset.state = "refused";
  }
  summary.dataset.elapsedMs = String(out.elapsed_ms);
  summary.dataset.roundTripMs = String(Math.round(roundTripMs));
  summary.dataset.pageMs = String(Math.round(out.page_ms || 0));
  summary.dataset.workerWaitMs = String(Math.round(workerWait(out, roundTripMs)));
  list.dataset.state = "done";
  const report = $("report");
  report.replaceChildren();
  if (out.report && out.report.table && !withhold) {
    report.append(renderTable(out.report.table, out.report.title || "Your suite's kill matrix, computed live in this page"));
  }
}

/* Every graded check as "error" with one message (the run never came back). */
export function renderFailure(step, message) {
  const list = $("results");
  list.replaceChildren();
  showLostOutput("no output: Python stopped before it could send any back.");
  for (const c of step.checks.filter((x) => x.runner !== "local")) {
    list.append(renderCheck({id: c.id, title: c.title, status: "error", message}));
  }
  list.dataset.state = "error";
  $("results-summary").textContent = message;
  $("results-summary").dataset.state = "error";
}

/* ---- the learner's output ------------------------------------------------------------------ */

const STREAMS = [["stdout", "printed (stdout)"], ["stderr", "stderr (warnings, errors)"],
                 ["traceback", "traceback"], ["value", "value of the last line"]];

export function renderStreams(host, out, emptyText) {
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

export function showRunOutput(out) {
  runs += 1;
  const box = $("run-output");
  const host = $("output-streams");
  renderStreams(host, out, "Your code printed nothing.");
  host.prepend(el("p", {class: "small run-stamp", "data-testid": "run-stamp",
                         text: `Run ${runs} at ${clockTime(new Date().toISOString())}`}));
  box.dataset.state = "done";
  box.dataset.run = String(runs);
}

function showLostOutput(message) {
  runs += 1;
  const host = $("output-streams");
  host.replaceChildren(el("p", {class: "small", "data-testid": "no-output",
                                text: `Run ${runs}: ${message}`}));
  $("run-output").dataset.state = "error";
}
