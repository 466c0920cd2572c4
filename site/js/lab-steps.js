/* The 60-minute lab F08.01, "FlashAttention: Exact Attention That Respects the Memory
 * Hierarchy": numbered steps injected into lab.html's <section id="guided-steps">.
 *
 * The steps come from data/exercises.json ("lab", exported from nlpcore.lab.guided). Each is
 * one move of the cycle predict -> run -> measure -> explain and ends in a question; the answer
 * is checked in Python (runtime.call("exercises.lab_check", {step, answer, observed})), where
 * `observed` is the detail of the last `lab:compared` event that js/lab.js dispatches after
 * every comparison run (js/lab.js mounts the steps with mountGuidedSteps(lastComparison), so
 * this module never imports lab.js back), plus `timing`, the learner's own timing of the tiled
 * and naive shaders (the panel inside the step that carries `timing`). A passed step is saved
 * with progress.js under area "lab" (with the answer), so index.html counts it.
 *
 * Hooks: [data-testid=lab-step][data-step=<id>] carries data-status todo|pass|fail;
 * inside it [data-testid=lab-answer] (input, or radio buttons), [data-testid=lab-check] and
 * [data-testid=lab-verdict]. The timing panel: [data-testid=lab-timing] with data-status
 * idle|running|done|error, its sizes input [data-testid=lab-timing-sizes], its button
 * [data-testid=lab-timing-run] and one row per N in [data-testid=lab-timing-rows].
 *
 * Predict first, then look: a step whose statement says `hides` keeps those results of the page
 * hidden ([data-veiled] on the compare box and the plan's values, a note in
 * [data-testid=compare-veil]) until its prediction is submitted (any well-formed answer, right or
 * wrong), or the learner asks to see them without predicting. Answers typed or picked but not
 * yet checked, and submitted predictions, survive a reload (js/lab-memory.js).
 */
import {getRuntime} from "./runtime.js";
import {isDone, markStep} from "./progress.js";
import {renderMarkdown} from "./md.js";
import {el} from "./dom.js";
import {draftOf, isPredicted, isRevealed, markPredicted, markRevealed, saveDraft} from "./lab-memory.js";
import {openGpu, prepareSpec, release, timeDispatch} from "./gpu.js";

const CHECK_TIMEOUT_MS = 20000;
const SPEC_TIMEOUT_MS = 60000;
const TIMING_REPEATS = 3;  // timed dispatches per (shader, N), after one untimed warm-up
const TIMING_MAX_SIZES = 5;
let observed = null;
let timing = null;  // {adapter, d, rows: [{n, tiled_ms, naive_ms}]}

document.addEventListener("lab:compared", (event) => {
  observed = event.detail || null;
  applyVeils();
});

/* ---- predict first: results hidden until the prediction is in ----------------------------- */

const VEIL_TARGETS = {compare: ["compare"], plan: ["plan", "tile-bytes", "dispatch", "tile-bar"]};
let hiders = [];  // the steps whose statement says `hides`, in order

function shownRunMatches(when) {
  const params = observed && observed.params;
  return Object.entries(when || {}).every(([key, value]) => params && Number(params[key]) === value);
}

function pendingHider() {
  return hiders.find((item) => !isPredicted(item.id) && !isRevealed(item.id) && !isDone("lab", item.id, null) &&
                               shownRunMatches(item.hides.when)) || null;
}

function applyVeils() {
  const pending = pendingHider();
  const hidden = new Set(pending ? pending.hides.targets.flatMap((t) => VEIL_TARGETS[t] || []) : []);
  for (const id of Object.values(VEIL_TARGETS).flat()) {
    const node = document.getElementById(id);
    if (!node) continue;
    if (hidden.has(id)) node.dataset.veiled = pending.id;
    else delete node.dataset.veiled;
  }
  const note = document.getElementById("compare-veil");
  if (!note || !pending) return;
  const reveal = el("button", {type: "button", class: "secondary", "data-testid": "compare-reveal",
                               text: "Show it without predicting"});
  reveal.addEventListener("click", () => {
    markRevealed(pending.id);
    applyVeils();
  });
  note.replaceChildren(
      el("p", {}, `This result is hidden until you submit your prediction in step ${pending.number}, ` +
         `“${pending.title}”: predict first, then look. `,
         el("a", {href: `#lab-step-${pending.id}`, text: `Go to step ${pending.number}`}), "."),
      el("p", {}, reveal));
}

function ensureStylesheet() {
  if (document.querySelector('link[href$="css/exercise.css"]')) return;
  document.head.append(el("link", {rel: "stylesheet", href: new URL("../css/exercise.css", import.meta.url).href}));
}

/* A JSON-safe copy of what the checks read: the comparison's fields and the timing. */
function observedPayload() {
  const out = {};
  if (observed) {
    const {status, maxAbsErr, params, plan, error, adapter} = observed;
    Object.assign(out, JSON.parse(JSON.stringify({status, maxAbsErr, params, plan, error, adapter})));
  }
  if (timing) out.timing = JSON.parse(JSON.stringify(timing));
  return Object.keys(out).length ? out : null;
}

function answerOf(item, stepEl) {
  if (item.answer.kind === "choice") {
    const picked = stepEl.querySelector('input[type="radio"]:checked');
    return picked ? Number(picked.value) : null;
  }
  return stepEl.querySelector('[data-testid="lab-answer"]').value.trim();
}

/* ---- the timing panel: tiled vs naive on the learner's GPU ------------------------------ */

let gpuPromise = null;
function gpuOnce() {
  if (!gpuPromise) gpuPromise = openGpu();
  return gpuPromise;
}

/* Median wall time (submit -> onSubmittedWorkDone, gpu.js's timeDispatch) of one spec, after
 * a warm-up dispatch. */
async function timeSpec(gpu, spec) {
  const ready = await prepareSpec(gpu, spec);
  try {
    await timeDispatch(gpu, ready);
    const times = [];
    for (let i = 0; i < TIMING_REPEATS; i++) times.push((await timeDispatch(gpu, ready)).wallMs);
    times.sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)];
  } finally {
    release(ready);
  }
}

function parseSizes(text) {
  const sizes = text.split(/[\s,]+/).filter(Boolean).map(Number);
  if (!sizes.length || sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 8192)) {
    throw new Error("list whole numbers from 1 to 8192, separated by commas");
  }
  if (sizes.length > TIMING_MAX_SIZES) throw new Error(`list at most ${TIMING_MAX_SIZES} sizes`);
  return [...new Set(sizes)].sort((a, b) => a - b);
}

function renderTimingPanel(defaults, runtime) {
  const box = el("div", {class: "lab-timing", "data-testid": "lab-timing", "data-status": "idle"});
  const sizes = el("input", {type: "text", value: draftOf("timing-sizes") || defaults.sizes.join(", "), size: "24",
                             "data-testid": "lab-timing-sizes", "aria-label": "sequence lengths N to time"});
  sizes.addEventListener("input", () => saveDraft("timing-sizes", sizes.value));
  const button = el("button", {type: "button", "data-testid": "lab-timing-run", text: "Time the shaders"});
  const status = el("p", {class: "small", role: "status", text:
      `One head, d = ${defaults.d}, float32; each (shader, N) is dispatched once to warm up, ` +
      `then ${TIMING_REPEATS} times; the table shows the median wall time (submit to done).`});
  const body = el("tbody", {"data-testid": "lab-timing-rows"});
  const table = el("table", {class: "results", hidden: ""},
                   el("thead", {}, el("tr", {},
                      ...["N", "tiled ms", "naive ms", "naive / tiled", "tiled GFLOP/s"].map(
                          (t) => el("th", {scope: "col", text: t})))), body);
  box.append(el("div", {class: "answer"}, el("label", {}, "N: ", sizes), button), status,
             el("div", {class: "table-scroll"}, table));
  button.addEventListener("click", async () => {
    let list;
    try {
      list = parseSizes(sizes.value);
    } catch (error) {
      status.textContent = `Cannot time: ${error.message}.`;
      box.dataset.status = "error";
      return;
    }
    button.disabled = true;
    box.dataset.status = "running";
    body.replaceChildren();
    table.hidden = false;
    const rows = [];
    try {
      const gpu = await gpuOnce();
      for (const n of list) {
        status.textContent = `timing N = ${n} on ${gpu.name}…`;
        const ms = {};
        for (const kernel of ["tiled", "naive"]) {
          const spec = await runtime.call("exercises.lab_timing_spec", {n, kernel}, {timeoutMs: SPEC_TIMEOUT_MS});
          ms[kernel] = await timeSpec(gpu, spec);
        }
        const row = {n, tiled_ms: ms.tiled, naive_ms: ms.naive};
        rows.push(row);
        const gflops = 4 * n * n * defaults.d / (ms.tiled * 1e-3) / 1e9;
        body.append(el("tr", {"data-n": String(n)},
                       el("td", {text: String(n)}), el("td", {class: "num", text: ms.tiled.toPrecision(3)}),
                       el("td", {class: "num", text: ms.naive.toPrecision(3)}),
                       el("td", {class: "num", text: (ms.naive / ms.tiled).toFixed(2)}),
                       el("td", {class: "num", text: gflops.toPrecision(3)})));
      }
      timing = {adapter: gpu.name, d: defaults.d, rows};
      status.textContent = `Timed on ${gpu.name}. Wall times include the submit; at small N that ` +
          "overhead is most of what you see.";
      box.dataset.status = "done";
    } catch (error) {
      status.textContent = `Timing failed: ${error.message}`;
      box.dataset.status = "error";
    } finally {
      button.disabled = false;
    }
  });
  return box;
}

/* ---- one step --------------------------------------------------------------------------- */

function renderStep(item, runtime) {
  const done = isDone("lab", item.id, null);
  const li = el("li", {class: "lab-step", id: `lab-step-${item.id}`, "data-testid": "lab-step", "data-step": item.id,
                       "data-status": done ? "pass" : "todo"});
  li.append(el("h3", {}, `${item.number}. `, el("span", {class: "lab-kind", text: item.kind}),
               ` ${item.title}`, el("span", {class: "small", text: ` · ${item.minutes} min`})));
  li.append(renderMarkdown(item.do, "md"));
  if (item.timing) li.append(renderTimingPanel(item.timing, runtime));
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
    row.append(el("input", {type: "text", inputmode: item.answer.kind === "integer" ? "numeric" : "decimal",
                            "data-testid": "lab-answer", "aria-label": item.question,
                            placeholder: item.answer.placeholder || "", size: "16"}));
    if (item.answer.unit) row.append(el("span", {class: "small", text: item.answer.unit}));
  }
  const button = el("button", {type: "submit", "data-testid": "lab-check", text: "Check"});
  row.append(button);
  form.append(row);
  const verdict = el("p", {class: "lab-verdict", "data-testid": "lab-verdict", "aria-live": "polite",
                           text: done ? "Done earlier — saved in your progress." : ""});
  form.append(verdict);
  li.append(form);
  restoreDraft(item, li);
  for (const type of ["input", "change"]) form.addEventListener(type, () => saveDraft(item.id, answerOf(item, li)));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // Busy, not disabled: a disabled button drops its focus to the page body (Enter on "Check"
    // would leave a keyboard user nowhere); focus stays on "Check", the verdict is announced.
    if (button.getAttribute("aria-disabled") === "true") return;
    const answer = answerOf(item, li);
    if (answer !== null && answer !== "") markPredicted(item.id);
    button.setAttribute("aria-disabled", "true");
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
      button.removeAttribute("aria-disabled");
      applyVeils();
    }
  });
  return li;
}

/* The answer typed or picked before a reload, not yet checked. */
function restoreDraft(item, stepEl) {
  const draft = draftOf(item.id);
  if (draft === undefined || draft === null) return;
  if (item.answer.kind === "choice") {
    const radio = stepEl.querySelector(`input[type="radio"][value="${Number(draft)}"]`);
    if (radio) radio.checked = true;
  } else {
    stepEl.querySelector('[data-testid="lab-answer"]').value = String(draft);
  }
}

/* Builds the steps; `lastComparison()` gives the latest comparison detail (or null). */
export async function mountGuidedSteps(lastComparison = () => null) {
  const section = document.getElementById("guided-steps");
  if (!section) return;
  ensureStylesheet();
  section.classList.add("panel", "guided");
  section.setAttribute("data-testid", "guided-steps");
  section.append(el("h2", {text: "The lab, step by step (60 minutes)"}));
  section.append(el("p", {class: "small", text:
      "Each step is one move of the cycle predict → run → measure → explain: predict before " +
      "you look, run the comparison above (or the visualizer, or an episode's cell), measure, " +
      "then explain what you saw. Every step ends in a question that this page checks in " +
      "Python, against the library or against what your own run reported. Passed steps are " +
      "saved to your progress on the module page."}));
  let steps;
  try {
    const resp = await fetch(new URL("../data/exercises.json", import.meta.url), {cache: "no-cache"});
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    steps = (await resp.json()).lab || [];
  } catch (error) {
    section.append(el("p", {class: "notice", text:
        `The guided steps are unavailable: data/exercises.json could not be loaded (${error.message}).`}));
    applyVeils();  // no step to predict in: show every result
    return;
  }
  if (!observed) observed = lastComparison() || null;
  hiders = steps.filter((item) => item.hides);
  const runtime = getRuntime();
  const list = el("ol", {class: "lab-steps"});
  for (const item of steps) list.append(renderStep(item, runtime));
  section.append(list);
  applyVeils();
}
