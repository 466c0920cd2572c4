/* Performance page, section 4. Page readiness of lab.html: a timeline of the loading stages.
 *
 * Draws bench/results/page_readiness.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {draw} from "./charts.js";
import {$, fmt, machineLine} from "./format.js";

const STAGE_NAMES = {runtime: "Pyodide runtime", numpy: "NumPy package", nlpcore: "nlpcore wheel"};

/* A timeline of floating bars [start, end] in ms since navigation: each loading stage lasts from
 * the moment the page reported it until the next one; then the first comparison; then the two
 * totals, red when over their targets. */
function showReadiness(record) {
  const s = record.summary;
  const stages = Object.entries(s.stage_ms || {}).sort((a, b) => a[1] - b[1]);
  const labels = [];
  const spans = [];
  const colors = [];
  stages.forEach(([name, start], i) => {
    if (name === "ready") return;
    const end = i + 1 < stages.length ? stages[i + 1][1] : s.ready_ms;
    labels.push(STAGE_NAMES[name] || name);
    spans.push([start, end]);
    colors.push("#2456c7");
  });
  labels.push("first comparison");
  spans.push([s.ready_ms, s.first_result_ms]);
  colors.push("#17794a");
  for (const [label, value, limit] of [["to ready (target ≤ 4 s)", s.ready_ms, 4000],
                                       ["to first result (target ≤ 6 s)", s.first_result_ms, 6000]]) {
    labels.push(label);
    spans.push([0, value]);
    colors.push(value > limit ? "#b3261e" : "#8a8f99");
  }
  draw("chart-readiness", {
    type: "bar",
    data: {labels, datasets: [{label: "ms since navigation (median)", data: spans, backgroundColor: colors}]},
    options: {indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
              scales: {x: {min: 0, title: {display: true, text: "ms since navigation"}}},
              plugins: {legend: {display: false},
                        tooltip: {callbacks: {label: (ctx) => {
                          const [a, b] = ctx.raw;
                          return `${fmt(a)} → ${fmt(b)} ms (${fmt(b - a)} ms)`;
                        }}}}},
  });
  $("readiness-notes").textContent =
      `Median of ${record.trials.length} fresh loads: ready ${fmt(s.ready_ms)} ms, first result ${fmt(s.first_result_ms)} ms, ` +
      `a second comparison on the warm page ${fmt(s.rerun_ms)} ms; the longest main-thread task during a comparison ` +
      `${fmt(s.longest_task_during_comparison_ms)} ms (tasks over 50 ms are reported). ${machineLine(record)}` +
      (record.machine && record.machine.load_average_start ?
        ` Load average at the start: ${record.machine.load_average_start.join(", ")} (other work shared the 2 cores).` : "");
}

export default {key: "readiness", path: "bench/results/page_readiness.json", label: "page readiness", section: "readiness", show: showReadiness};
