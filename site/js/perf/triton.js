/* Performance page, section 5. The Triton port on an H200 against SDPA's backends (TFLOP/s).
 *
 * Draws bench/results/triton_h200.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {tritonBackend} from "../backends.js";
import {draw} from "./charts.js";
import {$} from "./format.js";

function showTriton(record) {
  const results = record.results || [];
  if (!results.length) throw new Error("triton_h200.json has no results list");
  const labels = results.map((r) => `d ${r.d}, N ${r.n}${r.causal ? ", causal" : ""}`);
  const backends = Object.keys(results[0].fwd || {});
  const sets = (pass) => backends.filter((b) => pass === "fwd" || !tritonBackend(b).forwardOnly).map((b) => ({
    label: tritonBackend(b).label,
    data: results.map((r) => (r[pass] && r[pass][b] && Number.isFinite(r[pass][b].tflops) ? r[pass][b].tflops : null)),
    backgroundColor: tritonBackend(b).color}));
  // The dense bf16 peak of the recorded GPU (nlpcore.hardware, stamped into the section by the build).
  const peak = Number($("triton").dataset.peakTflops);
  const ofPeak = (tflops) => (peak > 0 ? ` (${(100 * tflops / peak).toFixed(0)}% of the ${peak} TFLOP/s peak)` : "");
  const config = (pass) => ({type: "bar", data: {labels, datasets: sets(pass)},
    options: {responsive: true, maintainAspectRatio: false, animation: false,
              scales: {y: {title: {display: true, text: "TFLOP/s"}}, x: {ticks: {autoSkip: false, maxRotation: 60}}},
              plugins: {legend: {position: "bottom"},
                        tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y.toFixed(0)} TFLOP/s${ofPeak(ctx.parsed.y)}`}}}}});
  draw("chart-triton-fwd", config("fwd"));
  draw("chart-triton-bwd", config("bwd"));
  const env = record.env || {};
  $("triton-notes").textContent =
      `${env.gpu || "GPU ?"}, driver ${env.driver || "?"}, torch ${env.torch || "?"}, triton ${env.triton || "?"}, ` +
      `recorded ${env.date_utc || "?"}; ${record.dtype || ""}, ${record.flops ? "FLOPs = " + record.flops : ""}; ` +
      `${record.timing || ""}. Correctness checks before timing: ${record.all_checks_pass ? "all passed" : "NOT all passed"}.` +
      backends.map((b) => {
        const best = Math.max(...results.map((r) => (r.fwd && r.fwd[b] && Number.isFinite(r.fwd[b].tflops) ? r.fwd[b].tflops : 0)));
        return ` Best forward, ${tritonBackend(b).label}: ${best.toFixed(0)} TFLOP/s${ofPeak(best)}.`;
      }).join("") +
      (backends.includes("fa3") ? " FlashAttention-3 is a forward kernel (Episode 5 on the module page, " +
        "bench/FA3.md); the backward chart leaves it out." : "");
}

export default {key: "triton", path: "bench/results/triton_h200.json", label: "Triton H200", section: "triton", show: showTriton};
