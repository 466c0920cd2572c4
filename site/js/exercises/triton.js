/* The Triton exercise's page code (exercise.html?id=triton), loaded because the exercise names
 * it in extra.js_modules.
 *
 * On a step with checks that run on the learner's machine, it draws the recorded reference
 * results (the exercise's extra.results, bench/results/triton_h200.json): forward and backward
 * TFLOP/s of our Triton kernel beside PyTorch's SDPA backends on an NVIDIA H200, one bar chart
 * each (the vendored Chart.js, loaded on first use). The H200's peak comes from the build
 * (#plot-note's data-peak-tflops, stamped from nlpcore.hardware). Hooks: #results-plot,
 * #plot-note (data-state missing|ready|error), canvases #plot-fwd and #plot-bwd.
 */
import {TRITON_BACKENDS} from "../backends.js";

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

/* exercise.js announces every step it shows: {exercise, step, files}. */
document.addEventListener("exercise:step", (event) => {
  const {exercise, step, files} = event.detail;
  const path = exercise.extra.results;
  const show = Boolean(path) && step.checks.some((c) => c.runner === "local");
  $("results-plot").hidden = !show;
  if (show) drawResults(path, files);
});
