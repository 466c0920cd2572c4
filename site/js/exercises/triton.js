/* The Triton exercise's page code (exercise.html?id=triton), loaded because the exercise names
 * it in extra.js_modules.
 *
 * On a step with checks that run on the learner's machine, it draws the recorded reference
 * results (the exercise's extra.results, bench/results/triton_h200.json): forward and backward
 * TFLOP/s of our Triton kernel beside PyTorch's SDPA backends on an NVIDIA H200, one bar chart
 * each (the vendored Chart.js, loaded on first use). The H200's peak comes from the build
 * (#plot-note's data-peak-tflops, stamped from nlpcore.hardware). Hooks: #results-plot,
 * #plot-note (data-state missing|ready|error), canvases #plot-fwd and #plot-bwd.
 *
 * A way home: on the same steps, [data-testid=way-home] links the nlpcore wheel this build made
 * (wheels/nlpcore-<version>-py3-none-any.whl, found in the manifest, never typed) and the kernel
 * starter, and gives the two commands that install the wheel and grade a kernel on one's own GPU
 * (or, without one, in Triton's interpreter). The grading command is the exercise's
 * extra.check_command, the one the local checks list, so the two cannot drift.
 */
import {TRITON_BACKENDS} from "../backends.js";
import {el} from "../dom.js";

const $ = (id) => document.getElementById(id);
const charts = [];

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`${src} did not load`));
    document.head.append(s);
  });
}

async function drawResults(path, files) {
  const note = $("plot-note");
  if (!files[path]) {
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
    if (!window.Chart) await loadScript(new URL("../../vendor/chartjs/chart.umd.js", import.meta.url).href);
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
    while (charts.length) charts.pop().destroy();
    for (const pass of ["fwd", "bwd"]) {
      const datasets = TRITON_BACKENDS.map(({key, label, color}) => ({
        label, backgroundColor: color,
        data: rows.map((r) => {
          const v = r[pass] && r[pass][key] && r[pass][key].tflops;
          return typeof v === "number" && isFinite(v) ? v : null;
        }),
      }));
      charts.push(new window.Chart($(`plot-${pass}`), {
        type: "bar", data: {labels, datasets},
        options: {animation: false, responsive: false,
                  plugins: {title: {display: true, text: `${pass === "fwd" ? "Forward" : "Backward"} TFLOP/s`},
                            tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y.toFixed(0)} TFLOP/s` +
                                (peak > 0 ? ` (${(100 * ctx.parsed.y / peak).toFixed(0)}% of peak)` : "")}}},
                  scales: {y: {beginAtZero: true, title: {display: true, text: "TFLOP/s"}}}},
      }));
    }
  } catch (error) {
    note.textContent = `The recorded results could not be drawn: ${error.message}`;
    note.dataset.state = "error";
  }
}

function showWayHome(exercise, files) {
  let box = $("way-home");
  if (!box) {
    box = el("div", {id: "way-home", class: "way-home", "data-testid": "way-home"});
    $("local").append(box);
  }
  const wheel = Object.keys(files).find((f) => /^wheels\/nlpcore-[^/]+\.whl$/.test(f));
  const command = exercise.extra.check_command || "";
  const kernelFile = (command.match(/(\S+\.py)\b/) || [])[1] || "my_flash.py";
  const starter = (exercise.extra.panels || []).find((p) => p.download);
  if (!wheel || !command) {
    box.replaceChildren(el("p", {class: "notice", text: "This build has no nlpcore wheel to take home " +
        "(build.py writes wheels/nlpcore-<version>-py3-none-any.whl)."}));
    box.dataset.state = "missing";
    return;
  }
  const wheelName = wheel.split("/").pop();
  const install = `python -m pip install ${wheelName}`;
  const code = (text, testid) => el("pre", {}, el("code", {"data-testid": testid, text}));
  box.replaceChildren(
    el("h4", {text: "Grade your kernel on your own GPU"}),
    el("p", {class: "small"}, "Download ",
       el("a", {href: wheel, download: wheelName, "data-testid": "wheel-link", text: wheelName}),
       " (the lab's Python package, the same one this page runs)",
       starter && files[starter.download] ? el("span", {}, " and ",
         el("a", {href: starter.download, download: kernelFile, "data-testid": "kernel-link",
                  text: `the kernel starter as ${kernelFile}`})) : null,
       " into one folder. Where PyTorch and Triton are installed (a machine with an NVIDIA GPU, or a " +
       "hosted notebook with one: prefix each command with !), run there:"),
    code(install, "home-install"),
    code(command, "home-grade"),
    el("p", {class: "small"}, "Without a GPU, Triton's interpreter runs the same checks on the CPU at " +
       "small sizes: ", el("code", {"data-testid": "home-grade-cpu", text: `TRITON_INTERPRET=1 ${command} --device cpu`}), "."));
  box.dataset.state = "ready";
  box.dataset.wheel = wheel;
}

/* exercise.js announces every step it shows: {exercise, step, files}. */
document.addEventListener("exercise:step", (event) => {
  const {exercise, step, files} = event.detail;
  const local = step.checks.some((c) => c.runner === "local");
  const path = exercise.extra.results;
  $("results-plot").hidden = !(path && local);
  if (path && local) drawResults(path, files);
  if (local) showWayHome(exercise, files);
});
