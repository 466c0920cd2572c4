/* Performance page, section 7. Split-K decoding on an H200.
 *
 * Draws bench/results/split_k_h200.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {draw, logAxis} from "./charts.js";
import {$, fmt, row} from "./format.js";

const SDPA_NAMES = {sdpa: "SDPA default", sdpa_flash: "SDPA FLASH_ATTENTION", sdpa_cudnn: "SDPA cuDNN",
                    sdpa_efficient: "SDPA EFFICIENT_ATTENTION", flash_triton: "flash_triton (no split)"};
const CASE_COLORS = ["#2456c7", "#17794a", "#8a5a00", "#b3261e", "#6b3fa0", "#00838f", "#5b6475", "#c2185b"];

function showSplitK(record) {
  const cases = record.cases || [];
  if (!cases.length) throw new Error("split_k_h200.json has no cases");
  const splitNames = Object.keys(cases[0].results).filter((n) => n.startsWith("split_"));
  const labels = splitNames.map((n) => cases[0].results[n].splits);
  const caseLabel = (c) => `B ${c.batch}, ${c.n_q} ${c.n_q === 1 ? "query" : "queries"}, Nk ${c.n_k.toLocaleString("en-US")}`;
  const datasets = cases.map((c, k) => ({
    label: caseLabel(c), data: splitNames.map((n) => (c.results[n] && Number.isFinite(c.results[n].ms) ? c.results[n].ms : null)),
    borderColor: CASE_COLORS[k % CASE_COLORS.length], backgroundColor: CASE_COLORS[k % CASE_COLORS.length],
    tension: 0, pointRadius: 3}));
  draw("chart-splitk", {type: "line", data: {labels, datasets},
    options: {responsive: true, maintainAspectRatio: false, animation: false,
              scales: {x: {title: {display: true, text: "splits (parts of the KV cache)"}},
                       y: logAxis("ms per call", (v) => `${v}`)},
              plugins: {legend: {position: "bottom", labels: {boxWidth: 14}}}}});
  const body = $("splitk-body");
  body.textContent = "";
  for (const c of cases) {
    const best = c.results[c.best_split];
    const fastest = c.results[c.fastest_sdpa_backend];
    row(body, [caseLabel(c), fmt(c.results.split_1.ms), `${best.splits} → ${fmt(best.ms)}`,
               `${fmt(c.best_split_vs_unsplit)}×`, fmt(c.results.sdpa.ms),
               `${SDPA_NAMES[c.fastest_sdpa_backend] || c.fastest_sdpa_backend}: ${fmt(fastest.ms)}`,
               `${fmt(c.best_split_vs_fastest_sdpa)}×`, `${fmt(best.gb_per_s / 1000)} TB/s`]);
  }
  const env = record.env || {};
  $("splitk-notes").textContent =
      `${env.gpu || "GPU ?"} (${env.sm_count || "?"} SMs), torch ${env.torch || "?"}, triton ${env.triton || "?"}, ` +
      `recorded ${env.date_utc || "?"} with: ${env.command || "?"}; ${record.dtype || ""}, d = ${cases[0].d}, ` +
      `H = ${cases[0].heads}; ${record.timing || ""}. Checks before timing (${record.check || ""}): ` +
      `${record.all_split_checks_pass ? "all passed" : "NOT all passed"}.`;
}

export default {key: "splitk", path: "bench/results/split_k_h200.json", label: "split-K H200", section: "splitk", show: showSplitK};
