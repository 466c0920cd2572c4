/* Performance page, section 5. The Triton port on an H200 against SDPA's backends (TFLOP/s).
 *
 * Draws bench/results/triton_h200.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {tritonBackend} from "../backends.js";
import {draw} from "./charts.js";
import {$} from "./format.js";
import {NCU_METRICS, NCU_RECORD as NCU, ncuLabel} from "../fa3-ncu.js";
import {loadResult} from "./records.js";

// The counters quoted, in order: [metric, name, after each number, after the pair].
const COUNTERS = [
  [NCU_METRICS.tensor, "tensor pipe active", "%", " of cycles"],
  [NCU_METRICS.xu, "XU pipe (exp2, conversions)", "%", " of its peak issue rate"],
  [NCU_METRICS.issue, "warps issuing", "%", " of cycles"],
  [NCU_METRICS.barrier, "warps stalled at a barrier", "", " per issued instruction"],
];

/* Where the FlashAttention-3 forward trails cuDNN in this run, and what limits it there: the profile
 * of that shape (fa3_ncu.json) when one was taken, else "not profiled". Fills #triton-fa3-limits. */
async function showFa3Limits(record) {
  const box = $("triton-fa3-limits");
  const shape = (r) => `d = ${r.d}, N = ${r.n}${r.causal ? ", causal" : ""}`;
  const below = record.results.filter((r) => r.fwd.fa3 && r.fwd.cudnn && r.fwd.fa3.tflops < r.fwd.cudnn.tflops);
  if (!below.length) {
    box.textContent = "The FlashAttention-3 forward is at or above cuDNN at every shape of this run.";
    box.dataset.state = "ready";
    return;
  }
  const ncu = await loadResult(NCU, null);
  const parts = below.map((r) => {
    const ratio = `${(r.fwd.fa3.tflops / r.fwd.cudnn.tflops).toFixed(2)}× cuDNN`;
    if (!ncu.data) return `${shape(r)}: ${ratio} (the profile ${NCU} could not be read: ${ncu.error || "not in this build"})`;
    const ours = ncu.data.kernels.find((k) => k.label === `fa3 ${ncuLabel(r)}`);
    const theirs = ncu.data.kernels.find((k) => k.label === `cudnn ${ncuLabel(r)}`);
    if (!ours || !theirs) return `${shape(r)}: ${ratio} (not profiled)`;
    const value = (k, metric) => k[metric].value.toFixed(metric.endsWith(".ratio") ? 2 : 0);
    return `${shape(r)}: ${ratio}; Nsight Compute on one launch each (${NCU}), ours against cuDNN's: ` +
      COUNTERS.map(([metric, name, pct, unit]) => `${name} ${value(ours, metric)}${pct} against ` +
        `${value(theirs, metric)}${pct}${unit}`).join(", ");
  });
  box.textContent = `Where the FlashAttention-3 forward trails cuDNN in this run, and what Nsight Compute reads ` +
    `there: ${parts.join("; ")} (bench/FA3.md, "What limits the rest"; its "Targets" say how far ratios at ` +
    "N = 1024 move between runs).";
  box.dataset.state = "ready";
}

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
  if (backends.includes("fa3")) {
    showFa3Limits(record).catch((error) => {
      $("triton-fa3-limits").textContent = `The FlashAttention-3 profile could not be shown: ${error.message}`;
      $("triton-fa3-limits").dataset.state = "error";
    });
  }
}

export default {key: "triton", path: "bench/results/triton_h200.json", label: "Triton H200", section: "triton", show: showTriton};
