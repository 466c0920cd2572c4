/* The guided lab: numbered steps injected into lab.html's <section id="guided-steps">.
 *
 * The steps come from data/exercises.json ("lab", exported from nlpcore.lab.guided). Each ends
 * in a question; the answer is checked in Python (runtime.call("exercises.lab_check",
 * {step, answer, observed})), where `observed` is the detail of the last `lab:compared` event
 * that js/lab.js dispatches after every comparison run (js/lab.js mounts the steps with
 * mountGuidedSteps(lastComparison), handing over the comparison it already has, so this module
 * never imports lab.js back). A passed step is saved with
 * progress.js under area "lab" (with the answer), so index.html counts it.
 *
 * Hooks: [data-testid=lab-step][data-step=<id>] carries data-status todo|pass|fail;
 * inside it [data-testid=lab-answer] (input, or radio buttons), [data-testid=lab-check] and
 * [data-testid=lab-verdict].
 */
import {getRuntime} from "./runtime.js";
import {isDone, markStep} from "./progress.js";
import {renderMarkdown} from "./md.js";
import {el} from "./dom.js";

const CHECK_TIMEOUT_MS = 20000;
let observed = null;

document.addEventListener("lab:compared", (event) => {
  observed = event.detail || null;
});

function ensureStylesheet() {
  if (document.querySelector('link[href$="css/exercise.css"]')) return;
  document.head.append(el("link", {rel: "stylesheet", href: new URL("../css/exercise.css", import.meta.url).href}));
}

/* A JSON-safe copy of the comparison detail (only the fields the checks read). */
function observedPayload() {
  if (!observed) return null;
  const {status, maxAbsErr, params, plan, error, adapter} = observed;
  return JSON.parse(JSON.stringify({status, maxAbsErr, params, plan, error, adapter}));
}

function answerOf(item, stepEl) {
  if (item.answer.kind === "choice") {
    const picked = stepEl.querySelector('input[type="radio"]:checked');
    return picked ? Number(picked.value) : null;
  }
  return stepEl.querySelector('[data-testid="lab-answer"]').value.trim();
}

function renderStep(item, runtime) {
  const done = isDone("lab", item.id, null);
  const li = el("li", {class: "lab-step", "data-testid": "lab-step", "data-step": item.id,
                       "data-status": done ? "pass" : "todo"});
  li.append(el("h3", {text: `${item.number}. ${item.title}`}));
  li.append(renderMarkdown(item.do, "md"));
  li.append(el("p", {class: "question", text: item.question}));
  const form = el("form", {class: "answer-form"});
  if (item.answer.kind === "choice") {
    const box = el("div", {class: "choices", role: "radiogroup", "aria-label": item.question,
                           "data-testid": "lab-answer"});
    item.answer.choices.forEach((text, index) => {
      const id = `lab-${item.id}-${index}`;
      box.append(el("label", {for: id},
                    el("input", {type: "radio", name: `lab-${item.id}`, id, value: String(index)}),
                    ` ${text}`));
    });
    form.append(box);
  }
  const row = el("div", {class: "answer"});
  if (item.answer.kind !== "choice") {
    row.append(el("input", {type: "text", inputmode: "decimal", "data-testid": "lab-answer",
                            "aria-label": item.question, placeholder: item.answer.placeholder || "",
                            size: "16"}));
    if (item.answer.unit) row.append(el("span", {class: "small", text: item.answer.unit}));
  }
  const button = el("button", {type: "submit", "data-testid": "lab-check", text: "Check"});
  row.append(button);
  form.append(row);
  const verdict = el("p", {class: "lab-verdict", "data-testid": "lab-verdict", "aria-live": "polite",
                           text: done ? "Done earlier — saved in your progress." : ""});
  form.append(verdict);
  li.append(form);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = answerOf(item, li);
    button.disabled = true;
    verdict.textContent = "Checking…";
    verdict.dataset.status = "running";
    try {
      const out = await runtime.call("exercises.lab_check",
                                     {step: item.id, answer, observed: observedPayload()},
                                     {timeoutMs: CHECK_TIMEOUT_MS});
      verdict.textContent = out.message;
      verdict.dataset.status = out.status;
      li.dataset.status = out.status === "pass" ? "pass" : "fail";
      if (out.status === "pass") markStep("lab", item.id, null, {answer});
    } catch (error) {
      verdict.textContent = `The answer could not be checked: ${error.message}`;
      verdict.dataset.status = "error";
    } finally {
      button.disabled = false;
    }
  });
  return li;
}

/* Builds the steps; `lastComparison()` gives the latest comparison detail (or null). */
export async function mountGuidedSteps(lastComparison = () => null) {
  const section = document.getElementById("guided-steps");
  if (!section) return;
  ensureStylesheet();
  section.classList.add("panel", "guided");
  section.setAttribute("data-testid", "guided-steps");
  section.append(el("h2", {text: "Guided lab (about 60 minutes)"}));
  section.append(el("p", {class: "small", text:
      "Work through the steps in order. Each uses the comparison above, the visualizer or the IO " +
      "model, and ends in a question that this page checks (in Python, in the worker). Passed " +
      "steps are saved to your progress on the module page."}));
  let steps;
  try {
    const resp = await fetch(new URL("../data/exercises.json", import.meta.url), {cache: "no-cache"});
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    steps = (await resp.json()).lab || [];
  } catch (error) {
    section.append(el("p", {class: "notice", text:
        `The guided steps are unavailable: data/exercises.json could not be loaded (${error.message}).`}));
    return;
  }
  if (!observed) observed = lastComparison() || null;
  const runtime = getRuntime();
  const list = el("ol", {class: "lab-steps"});
  for (const item of steps) list.append(renderStep(item, runtime));
  section.append(list);
}
