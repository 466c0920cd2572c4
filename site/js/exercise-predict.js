/* Predict steps on the exercise page: the first prediction is kept, the answer waits.
 *
 * The first submission of a Predict step is recorded in progress as `first` ({answer, checks:
 * {check id: status}, passed, at}); a wrong prediction's checks are drawn withheld (see
 * exercise-results.js) until the learner, after an attempt, asks for the answer (`revealed`,
 * which also counts as "solution viewed"). Once open, the box shows the first prediction beside
 * the checks' expected values. "Load solution" waits for an attempt too: it holds the answer,
 * and the page's data does not carry it: Python sends it after the first prediction (held back
 * against spoilers, not as a secret: see fetchHeldSolution).
 *
 * An answer that is not one yet is refused, not recorded: the untouched starter (before any
 * grading), and a grade that Python refused (`refused`: its completeness check failed, e.g.
 * "bytes_sent is still None: replace it with your answer"; nlpcore.lab.verdict decides, and
 * then grades no check, so the page shows every check "not run").
 */
import {el} from "./dom.js";
import {noteStep, stepRecord} from "./progress.js";
import {clockTime} from "./exercise-drafts.js";

const $ = (id) => document.getElementById(id);
const isPredict = (step) => Boolean(step) && step.kind === "Predict";

const normal = (code) => code.replace(/[ \t]+$/gm, "").trim();

/* Before grading: a refusal message when `code` is the untouched starter of a Predict step. */
export function untouchedRefusal(step, code) {
  if (!isPredict(step) || normal(code) !== normal(step.starter)) return null;
  return "Not recorded: this is the untouched starter. Write your prediction in place of the " +
      "placeholders first; your first real answer is the one kept.";
}

/* After grading: Python's refusal message when it refused the answer as incomplete (the grade's
 * `incomplete`, nlpcore.lab.verdict), or null. */
export function incompleteRefusal(step, out) {
  return isPredict(step) && out.incomplete ? out.refused : null;
}

/* True when a grade's wrong answer must be drawn without its expected values. */
export function withholding(ex, step, out) {
  if (!isPredict(step) || out.passed) return false;
  return !stepRecord(ex.id, step.id).revealed;
}

function describeAnswer(answer) {
  if (!answer || typeof answer !== "object" || !Object.keys(answer).length) return "(nothing recorded)";
  return Object.entries(answer).map(([name, value]) => `${name} = ${JSON.stringify(value)}`).join("; ");
}

export function showPredictBox(ex, step) {
  const box = $("predict-box");
  box.hidden = !isPredict(step);
  if (box.hidden) return;
  const rec = stepRecord(ex.id, step.id);
  const attempted = Boolean(rec.first);
  const open = Boolean(rec.revealed || rec.done);
  const note = $("predict-note");
  if (!attempted) {
    note.textContent = "Your first submission is recorded as your prediction. A wrong one shows " +
        "what is right and wrong; the answer is shown only when you ask, after an attempt. (It is " +
        "kept out of sight, not secret: the checks run in this page, so their answer is here too.)";
  } else if (!open) {
    note.textContent = "Your prediction is recorded. Try again, or reveal the answer (the step " +
        "then counts as \u201csolution viewed\u201d).";
  } else {
    note.textContent = rec.done && !rec.revealed ? "You predicted it." : "The answer is shown with the checks.";
  }
  $("reveal-answer").hidden = !attempted || open;
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

export function recordFirstPrediction(ex, step, out) {
  if (!isPredict(step) || stepRecord(ex.id, step.id).first) return;
  const checks = {};
  for (const c of out.checks) if (c.status !== "local") checks[c.id] = c.status;
  noteStep("exercises", ex.id, step.id,
           {first: {answer: out.record || {}, checks, passed: Boolean(out.passed), at: new Date().toISOString()}});
}

export function revealAnswer(ex, step) {
  noteStep("exercises", ex.id, step.id, {revealed: true, solution_viewed: true});
}

/* Load solution on a Predict step hands over the answer, so it waits for an attempt (and for
 * the solution itself, which Python sends only then: fetchHeldSolution). Why it waits, or "". */
export function solutionLocked(ex, step) {
  if (!isPredict(step)) return "";
  if (!stepRecord(ex.id, step.id).first) {
    return "Load solution opens after your first prediction: the solution holds the answer.";
  }
  return step.solution ? "" : "Load solution opens once Python has sent the solution.";
}

const fetching = new Map();  // "<exercise>/<step>" -> the request for its held solution

/* A Predict step's solution holds its answer, so the page's data leaves it out (`solution_held`,
 * nlpcore.lab.model) and Python hands it over ("exercises.solution") only once a first
 * prediction is recorded: none of the page's data or text responses holds it before then (nor
 * dist/src/, which the build leaves it out of). Against spoilers, not a secret: the judge needs
 * it, so it ships in the wheel and pyc/bundle.bin to this browser, where the learner's own
 * Python can read it. `then()` runs when it has arrived (into `step.solution`); a failed
 * request is tried again next time. */
export function fetchHeldSolution(runtime, ex, step, then) {
  if (!isPredict(step) || !step.solution_held || step.solution || !stepRecord(ex.id, step.id).first) return;
  const key = `${ex.id}/${step.id}`;
  if (fetching.has(key)) return;
  fetching.set(key, runtime.call("exercises.solution", {exercise: ex.id, step: step.id}).then((text) => {
    step.solution = text;
    then();
  }, () => fetching.delete(key)));
}
