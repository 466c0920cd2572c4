// The module page: progress summary, the exercises table, and the episodes' "run it" cells.
// Python runs only through runtime.js (nlpcore.web.viz.run_episode_cell); the worker is
// started on the first click so the page itself loads instantly.

import { loadProgress, resetProgress, doneSteps, onProgressChange } from "./progress.js";
import { renderMath } from "./katex-render.js";
import { el } from "./dom.js";

// Used when data/exercises.json (exported by the exercises work at build time) is absent.
const FALLBACK_EXERCISES = [
  { id: "online-softmax", title: "Online softmax as a monoid", tier: "browser",
    ladder: ["Predict", "Scratch", "Compose", "Probe a claim"], minutes: 90 },
  { id: "backward", title: "The backward pass by recomputation", tier: "browser",
    ladder: ["Harden", "Scratch"], minutes: 75 },
  { id: "triton", title: "Port the kernel to Triton", tier: "gpu",
    ladder: ["Port", "Compose"], minutes: 120 },
  { id: "wgsl", title: "The WGSL shader and its tile plan", tier: "systems · wgsl",
    ladder: ["Scratch", "Harden"], minutes: 120 },
  { id: "break-it", title: "Break it: where exactness ends", tier: "browser",
    ladder: ["Predict", "Break it"], minutes: 50 },
  { id: "ring", title: "The monoid across devices: split-K decoding and ring attention", tier: "browser",
    ladder: ["Predict", "Compose", "Balance"], minutes: 70 },
];

// Accepts the shapes data/exercises.json may reasonably take: a list, or {exercises: [...]},
// with per-exercise fields id, title, tier, ladder (list of names or of {name}), minutes/time,
// and optionally steps (list of step ids or {id}). Returns null if it cannot be understood.
function normaliseExercises(doc) {
  const list = Array.isArray(doc) ? doc : doc && Array.isArray(doc.exercises) ? doc.exercises : null;
  if (!list || list.length === 0) return null;
  const out = [];
  for (const ex of list) {
    if (!ex || typeof ex.id !== "string") return null;
    const fallback = FALLBACK_EXERCISES.find((f) => f.id === ex.id) || {};
    const names = (xs) => (Array.isArray(xs) ? xs.map((x) => (typeof x === "string" ? x : x && (x.name || x.title || x.id))).filter(Boolean) : null);
    out.push({
      id: ex.id,
      title: ex.title || fallback.title || ex.id,
      tier: ex.tier || fallback.tier || "",
      ladder: names(ex.ladder) || fallback.ladder || [],
      minutes: ex.minutes || ex.time_minutes || ex.time || fallback.minutes || null,
      summary: typeof ex.summary === "string" ? ex.summary : "",
      steps: Array.isArray(ex.steps) ? ex.steps.map((x) => (typeof x === "string" ? x : x && (x.id || x.name))).filter(Boolean) : null,
    });
  }
  return out;
}

// The build's manifest lists every file, so optional files are fetched only when present
// (a 404 would be noise in the console, and the page must not depend on one).
async function siteFiles() {
  try {
    const resp = await fetch("manifest.json", { cache: "no-cache" });
    if (!resp.ok) return {};
    const manifest = await resp.json();
    return (manifest && manifest.files) || {};
  } catch (err) {
    return {};
  }
}

function renderBenchLinks(files) {
  const box = document.getElementById("bench-links");
  const results = Object.keys(files).filter((f) => f.startsWith("bench/results/") && f.endsWith(".json")).sort();
  if (!results.length) {
    box.textContent = "no benchmark results are recorded in this build";
    return;
  }
  box.replaceChildren("recorded results ");
  results.forEach((f, k) => {
    if (k) box.append(", ");
    box.append(el("a", { href: f, text: f.slice("bench/results/".length) }));
  });
}

// The split-K sentence of "Beyond one kernel": read from the recorded H200 run
// (bench/results/split_k_h200.json), never typed into the page.
async function renderSplitK(files) {
  const box = document.getElementById("splitk-result");
  const path = "bench/results/split_k_h200.json";
  if (!box) return;
  if (!files[path]) {
    box.textContent = "(No split-K record is in this build.)";
    return;
  }
  try {
    const resp = await fetch(path, { cache: "no-cache" });
    const rec = await resp.json();
    const pick = (nq) => rec.cases.filter((c) => c.batch === 1 && c.n_q === nq).sort((a, b) => b.n_k - a.n_k)[0];
    const one = pick(1);
    const four = pick(4);
    const ms = (c, name) => c.results[name].ms;
    const splits = (c) => c.results[c.best_split].splits;
    const BACKEND = { sdpa: "its default dispatch", sdpa_flash: "FLASH_ATTENTION", sdpa_cudnn: "cuDNN", sdpa_efficient: "EFFICIENT_ATTENTION" };
    const backend = (c) => BACKEND[c.fastest_sdpa_backend] || c.fastest_sdpa_backend;
    box.replaceChildren(
      `Measured on an ${rec.env.gpu} (`, el("a", { href: path, text: "record" }),
      `, bf16, B = ${one.batch}, H = ${one.heads}, d = ${one.d}, a cache of ${one.n_k.toLocaleString("en-US")} tokens): ` +
      `with one query the unsplit kernel takes ${ms(one, "split_1").toFixed(3)} ms and ${splits(one)} splits ` +
      `${ms(one, one.best_split).toFixed(3)} ms (${one.best_split_vs_unsplit.toFixed(1)}× faster; PyTorch SDPA at its fastest, ` +
      `${backend(one)}, ${ms(one, one.fastest_sdpa_backend).toFixed(3)} ms); with four queries ` +
      `${splits(four)} splits take ${ms(four, four.best_split).toFixed(3)} ms against ${ms(four, four.fastest_sdpa_backend).toFixed(3)} ms ` +
      `for SDPA at its fastest (${backend(four)}). Every split count was checked against an fp64 reference first.`);
    box.dataset.state = "ready";
  } catch (err) {
    box.textContent = `(The split-K record could not be read: ${err.message}.)`;
    box.dataset.state = "error";
  }
}

async function loadExercises(files) {
  const builtIn = { list: FALLBACK_EXERCISES, source: "built-in list" };
  if (!files["data/exercises.json"]) return builtIn;
  try {
    const resp = await fetch("data/exercises.json", { cache: "no-cache" });
    if (!resp.ok) return builtIn;
    const doc = await resp.json();
    const parsed = normaliseExercises(doc);
    if (!parsed) return builtIn;
    // Exercises the module promises but the export does not (yet) describe keep their row.
    for (const ex of FALLBACK_EXERCISES) {
      if (!parsed.some((p) => p.id === ex.id)) parsed.push(ex);
    }
    const labSteps = doc && Array.isArray(doc.lab) ? doc.lab.map((x) => x && x.id).filter(Boolean) : null;
    return { list: parsed, source: "data/exercises.json", labSteps };
  } catch (err) {
    return builtIn;
  }
}

// Steps of one exercise: the exercise's own step ids when known, else its ladder.
function stepTotal(ex) {
  return (ex.steps && ex.steps.length) || ex.ladder.length || 1;
}

function exerciseStatus(ex) {
  const known = ex.steps && ex.steps.length ? new Set(ex.steps) : null;
  const done = doneSteps(ex.id).filter((s) => !known || known.has(s)).length;
  const total = stepTotal(ex);
  if (done === 0) return { text: "not started", state: "todo", done, total };
  if (done >= total) return { text: `done (${done}/${total} steps)`, state: "done", done, total };
  return { text: `${done}/${total} steps`, state: "started", done, total };
}

function renderExerciseRows(list) {
  const tbody = document.getElementById("exercise-rows");
  tbody.replaceChildren();
  for (const ex of list) {
    const status = exerciseStatus(ex);
    const link = el("a", { href: `exercise.html?id=${encodeURIComponent(ex.id)}`, text: ex.title });
    if (ex.summary) link.title = ex.summary;
    tbody.append(
      el("tr", { "data-exercise": ex.id },
        el("td", {}, link, el("span", { class: "ex-id", text: ` ${ex.id}` })),
        el("td", {}, el("span", { class: `tier tier-${ex.tier.split(" ")[0]}`, text: ex.tier })),
        el("td", { text: ex.ladder.join(" · ") }),
        el("td", { text: ex.minutes ? `${ex.minutes} min` : "" }),
        el("td", { class: `status status-${status.state}`, "data-testid": `exercise-status-${ex.id}`, text: status.text }),
      ),
    );
  }
}

function renderProgress(progress, exercises, labSteps) {
  const box = document.getElementById("progress");
  let stepsDone = 0;
  let stepsTotal = 0;
  let complete = 0;
  let next = null;
  for (const ex of exercises) {
    const s = exerciseStatus(ex);
    stepsDone += Math.min(s.done, s.total);
    stepsTotal += s.total;
    if (s.state === "done") complete += 1;
    else if (!next) next = ex;
  }
  const labKnown = labSteps && labSteps.length ? new Set(labSteps) : null;
  const labDone = Object.entries(progress.lab).filter(([k, r]) => r && r.done && (!labKnown || labKnown.has(k))).length;
  const labOf = labKnown ? ` of ${labKnown.size}` : "";
  box.replaceChildren(
    el("div", { class: "progress-line" },
      el("strong", { "data-testid": "progress-exercises", text: `${complete} of ${exercises.length}` }),
      ` exercises complete (${stepsDone} of ${stepsTotal} ladder steps)`),
    el("div", { class: "progress-bar", role: "progressbar", "aria-label": "ladder steps done",
                "aria-valuemin": "0", "aria-valuemax": String(stepsTotal), "aria-valuenow": String(stepsDone) },
      el("span", { style: `width:${stepsTotal ? (100 * stepsDone) / stepsTotal : 0}%` })),
    el("div", { class: "progress-line" },
      el("strong", { "data-testid": "progress-lab", text: String(labDone) }),
      `${labOf} guided-lab step${labDone === 1 && !labOf ? "" : "s"} done`),
  );
  box.dataset.state = "ready";
  box.dataset.stepsDone = String(stepsDone);
  box.dataset.labDone = String(labDone);

  const nextEl = document.getElementById("next-step");
  nextEl.replaceChildren();
  if (stepsDone === 0 && labDone === 0) {
    nextEl.append("New here? Begin with ", el("a", { href: "#ep1", text: "Episode 1" }), ", then the ",
      el("a", { href: "lab.html", text: "guided lab" }), ".");
  } else if (labDone === 0) {
    nextEl.append("Next: the ", el("a", { href: "lab.html", text: "60-minute guided lab" }), ".");
  } else if (next) {
    nextEl.append("Next: ", el("a", { href: `exercise.html?id=${encodeURIComponent(next.id)}`, text: next.title }), ".");
  } else {
    nextEl.append("Every exercise is done. Try the visualizer's backward mode, or re-run the lab on another GPU.");
  }
  const labStatus = document.getElementById("lab-status");
  labStatus.textContent = labDone ? `You have finished ${labDone}${labOf} steps of the lab.` : "Not started yet.";
}

function showNotice(text) {
  const notice = document.getElementById("progress-notice");
  if (text) {
    notice.textContent = text;
    notice.hidden = false;
  }
}

// ---- "Run it" cells -------------------------------------------------------------------

let runtimePromise = null;
function runtime() {
  if (!runtimePromise) {
    runtimePromise = import("./runtime.js").then((mod) => mod.getRuntime());
  }
  return runtimePromise;
}

function readForm(form) {
  const params = {};
  for (const input of form.querySelectorAll("input, select")) {
    if (input.type === "checkbox") params[input.name] = input.checked;
    else if (input.tagName === "SELECT") params[input.name] = input.value;
    else params[input.name] = Number(input.value);
  }
  return params;
}

function wireCell(cell) {
  const name = cell.dataset.cell;
  const form = cell.querySelector("form");
  const out = cell.querySelector(".cell-out");
  const button = form.querySelector("button");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    cell.dataset.status = "running";
    out.textContent = "Starting Python (Pyodide)…";
    try {
      const rt = await runtime();
      const off = rt.onProgress ? rt.onProgress((msg) => {
        if (cell.dataset.status === "running" && msg && msg.message) out.textContent = `Starting Python: ${msg.message}`;
      }) : null;
      await rt.ready;
      if (typeof off === "function") off();
      out.textContent = "Running…";
      const result = await rt.call("viz.run_episode_cell", { name, params: readForm(form) }, { timeoutMs: 60000 });
      out.textContent = result.lines.join("\n");
      cell.dataset.status = result.ok ? "ok" : "error";
    } catch (err) {
      out.textContent = `Could not run: ${err && err.message ? err.message : err}`;
      cell.dataset.status = "error";
    } finally {
      button.disabled = false;
    }
  });
}

// ---- start -----------------------------------------------------------------------------

async function main() {
  for (const cell of document.querySelectorAll(".cell[data-cell]")) wireCell(cell);

  const typeset = () => {
    const { error } = renderMath();
    if (error) {
      const n = document.getElementById("math-notice") || el("p", { id: "math-notice", class: "notice", role: "status" });
      n.textContent = error;
      document.querySelector(".hero").append(n);
    }
  };
  if (document.readyState === "complete") typeset();
  else window.addEventListener("load", typeset);

  const files = await siteFiles();
  renderBenchLinks(files);
  renderSplitK(files);
  const { list: exercises, labSteps } = await loadExercises(files);
  const { progress, notice } = loadProgress();
  showNotice(notice);
  renderExerciseRows(exercises);
  renderProgress(progress, exercises, labSteps);
  onProgressChange((doc) => {
    renderExerciseRows(exercises);
    renderProgress(doc, exercises, labSteps);
  });
  document.getElementById("progress-reset").addEventListener("click", () => {
    resetProgress();
    showNotice("Saved progress cleared.");
  });
}

main().catch((err) => {
  const box = document.getElementById("progress");
  box.textContent = `Progress unavailable: ${err.message}`;
  box.dataset.state = "error";
});
