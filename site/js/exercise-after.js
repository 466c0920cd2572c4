/* After a grade, two ways to learn more on the exercise page.
 *
 * - Passed: "Compare with the reference" draws the learner's code beside the step's reference
 *   solution (js/exercise-diff.js), on request -- the reference is not shown before the step is
 *   passed (a step passed with the solution loaded compares with itself).
 * - Failed: each failing check gets "Rerun this check alone": that check alone runs again, in
 *   both Python workers (the grade's `only`, js/check-runner.js), with the seed of the grade it
 *   repeats, and is shown in a panel with its inputs -- the input shapes and the seed -- beside
 *   expected, got and the tolerance, so one failure can be studied without the others.
 */
import {el} from "./dom.js";
import {renderSideBySide} from "./exercise-diff.js";

const $ = (id) => document.getElementById(id);

/* Shows (passed) or hides the comparison with the reference for `step`; getCode() reads the editor. */
export function showAfterPass(step, passed, getCode) {
  const box = $("after-pass");
  box.hidden = !passed || !(step.solution || step.solution_held);  // a Predict step's arrives later
  $("diff-host").replaceChildren();
  $("compare-reference").setAttribute("aria-expanded", "false");
  $("compare-reference").onclick = () => {
    const open = $("compare-reference").getAttribute("aria-expanded") === "true";
    $("compare-reference").setAttribute("aria-expanded", String(!open));
    if (open) {
      $("diff-host").replaceChildren();
      return;
    }
    if (!step.solution) {  // held back until the first prediction (js/exercise-predict.js)
      $("diff-host").replaceChildren(el("p", {class: "small", text: "The reference solution has not " +
                                                 "arrived from Python yet: try again in a moment."}));
      return;
    }
    const {node, differ} = renderSideBySide(getCode(), step.solution);
    $("diff-host").replaceChildren(el("p", {class: "small", "data-testid": "diff-summary",
      text: differ ? `${differ} line${differ === 1 ? "" : "s"} differ (marked); the rest are the same.`
                   : "Your code is the reference solution, line for line."}), node);
  };
}

const INPUT_KEYS = [["shapes", "input shapes"], ["expected", "expected"], ["got", "got"],
                    ["tolerance", "tolerance"], ["max_abs_err", "max |Δ|"], ["where", "at index"]];

function inputsOf(check, gradeSeed) {
  const rows = [];
  for (const [key, label] of INPUT_KEYS) {
    const value = check[key];
    if (value === undefined || value === null) continue;
    rows.push([label, key === "shapes" && typeof value === "object"
      ? Object.entries(value).map(([name, shape]) => `${name} (${shape.join(", ")})`).join(", ")
      : Array.isArray(value) ? `[${value.join(", ")}]` : String(value)]);
  }
  const seed = /\bseed(?:ed with|[ =:]+)\s*(\d+)/i.exec(check.message || "");
  if (seed || gradeSeed !== undefined) rows.unshift(["seed", seed ? seed[1] : String(gradeSeed)]);
  return rows;
}

/* Draws one check's rerun in the panel. */
export function showRerun(check, elapsedMs, seed, ran = 1) {
  const panel = $("rerun");
  panel.hidden = false;
  panel.dataset.check = check.id;
  panel.dataset.status = check.status;
  panel.dataset.ran = String(ran);  // how many checks the rerun's grade ran (1: this one alone)
  const dl = el("dl", {class: "details", "data-testid": "rerun-inputs"});
  for (const [label, value] of inputsOf(check, seed)) dl.append(el("dt", {text: label}), el("dd", {text: value}));
  panel.replaceChildren(
    el("h4", {}, "Rerun: ", el("strong", {text: check.title})),
    el("p", {}, el("span", {class: `badge status-${check.status}`, text: check.status}), " ",
       check.message || ""),
    dl,
    el("p", {class: "small", text: `Ran alone in ${elapsedMs.toFixed(0)} ms` +
             (seed !== undefined && seed !== null ? ` with the grade's inputs (seed ${seed})` : "") +
             "; the step's other checks did not run."}));
}

/* Adds "Rerun this check alone" to every failing check drawn in #results. */
export function offerReruns(onRerun) {
  for (const li of document.querySelectorAll("#results [data-testid=check]")) {
    if (li.dataset.status === "pass" || li.dataset.withheld === "1") continue;
    const button = el("button", {type: "button", class: "secondary rerun", "data-testid": "rerun-check",
                                 text: "Rerun this check alone"});
    button.addEventListener("click", () => onRerun(li.dataset.check, button));
    li.append(button);
  }
}

export function hideRerun() {
  $("rerun").hidden = true;
  $("rerun").replaceChildren();
}
