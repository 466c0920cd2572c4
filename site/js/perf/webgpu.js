/* Performance page, section 2. WebGPU on CPU adapters: the tiled shader against the naive one.
 *
 * Draws bench/results/webgpu_attention.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {COLORS, draw, guideLine, powerOfTwoTicks, lineSet, logLogConfig, speedupConfig} from "./charts.js";
import {$, fmt, milliseconds, seconds, machineLine} from "./format.js";

function showWebgpu(record) {
  const datasets = [];
  const notes = [];
  const sizes = record.parameters.sizes;
  const speedSets = [];
  for (const engine of record.engines) {
    if (engine.error) {
      notes.push(`${engine.engine}: not measured — ${engine.error}.`);
      continue;
    }
    const dash = engine.engine === "chromium" ? [] : [6, 4];
    for (const kernel of ["tiled", "naive"]) {
      const rows = engine.rows.filter((r) => r.kernel === kernel);
      const good = rows.filter((r) => r.valid).map((r) => ({x: r.n, y: r.ms}));
      const bad = rows.filter((r) => !r.valid).map((r) => ({x: r.n, y: r.ms}));
      const color = kernel === "tiled" ? COLORS.tiled : COLORS.naive;
      if (good.length) datasets.push(lineSet(`${kernel}, ${engine.engine}`, good, color, {borderDash: dash}));
      if (bad.length) {
        datasets.push(lineSet(`${kernel}, ${engine.engine}: WRONG output`, bad, color,
                              {showLine: false, pointStyle: "crossRot", pointRadius: 8, borderWidth: 2}));
        notes.push(`${engine.engine}: ${kernel} shader returned wrong results at N = ${
            rows.filter((r) => !r.valid).map((r) => r.n).join(", ")} (max |Δo| up to ${
            fmt(Math.max(...rows.filter((r) => !r.valid).map((r) => r.max_abs_err_o)))}); not counted as a speed-up.`);
      }
    }
    const probe = engine.loop_probe;
    if (probe && probe.capped) {
      notes.push(`${engine.engine}: a probe shader that loops 50 000 + 50 000 + 300×300 times wrote ${
          probe.got.join(", ")} instead of ${probe.expected.join(", ")}: this driver stops each invocation after about ${
          probe.total_iterations_executed} loop iterations in total, which cuts long per-invocation loops short.`);
    }
    const bySize = Object.fromEntries((engine.speedups || []).map((s) => [s.n, s.naive_over_tiled]));
    speedSets.push({label: `${engine.engine} (${engine.adapter}, ${engine.timing})`,
                    data: sizes.map((n) => bySize[n] ?? null),
                    backgroundColor: engine.engine === "chromium" ? "#2456c7" : "#8a5a00"});
  }
  const timeConfig = logLogConfig(datasets, powerOfTwoTicks, "time per dispatch", (v) => seconds(v / 1e3),
       (ctx) => `${ctx.dataset.label}: ${milliseconds(ctx.parsed.y)} at N = ${ctx.parsed.x}`);
  timeConfig.options.plugins.legend.labels.usePointStyle = true;
  draw("chart-webgpu-time", timeConfig);
  draw("chart-webgpu-speedup", speedupConfig(sizes, [...speedSets, guideLine("target (2×)", 2, COLORS.target, sizes),
                                                   guideLine("parity (1×)", 1, COLORS.guide, sizes)]));
  $("webgpu-notes").textContent = notes.join(" ") || "Every shader output matched NumPy before timing.";
  $("webgpu-machine").textContent = machineLine(record);
}

export default {key: "webgpu", path: "bench/results/webgpu_attention.json", label: "WebGPU", section: "webgpu", show: showWebgpu};
