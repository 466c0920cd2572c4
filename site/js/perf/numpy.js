/* Performance page, section 1. NumPy: flash_np against naive attention (time and peak memory).
 *
 * Draws bench/results/numpy_attention.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {COLORS, draw, powerOfTwoTicks, lineSet, logLogConfig} from "./charts.js";
import {$, fmt, bytes, mib, seconds, row, machineLine} from "./format.js";

function numpySlopes(record, shape) {
  const out = {};
  for (const e of record.exponents || []) {
    if (e.shape === shape) out[`${e.kernel} ${e.pass}`] = e;
  }
  return out;
}

/* "1" -> "one head", "1x8" -> "(B, H) = (1, 8)". */
function shapeLabel(shape) {
  return shape === "1" ? "one head" : `(B, H) = (${shape.split("x").join(", ")})`;
}

function drawNumpy(record, shape) {
  const cases = record.cases.filter((c) => c.shape === shape && !c.skipped);
  const slopes = numpySlopes(record, shape);
  const sets = (field, slopeKey, tailKey) => {
    const datasets = [];
    for (const kernel of ["naive", "flash"]) {
      for (const pass of ["forward", "backward"]) {
        const points = cases.filter((c) => c.kernel === kernel && c.pass === pass)
            .sort((a, b) => a.n - b.n).map((c) => ({x: c.n, y: c[field]}));
        if (!points.length) continue;
        const e = slopes[`${kernel} ${pass}`];
        const has = (key) => e && key && e[key] !== null && e[key] !== undefined;
        let slope = has(slopeKey) ? `, slope ${e[slopeKey].toFixed(2)}` : "";
        if (has(tailKey)) slope += ` (${e[tailKey].toFixed(2)} for N ≥ 4k)`;
        datasets.push(lineSet(`${kernel} ${pass}${slope}`, points, COLORS[kernel],
                              {borderDash: pass === "backward" ? [6, 4] : [],
                               pointStyle: pass === "backward" ? "rect" : "circle"}));
      }
    }
    return datasets;
  };
  draw("chart-numpy-time", logLogConfig(sets("time_s", "time_slope"), powerOfTwoTicks, "seconds",
       (v) => seconds(v), (ctx) => `${ctx.dataset.label.split(",")[0]}: ${seconds(ctx.parsed.y)} at N = ${ctx.parsed.x}`));
  draw("chart-numpy-memory", logLogConfig(sets("peak_bytes", "memory_slope", "memory_slope_n_ge_4096"), powerOfTwoTicks,
       "peak extra memory (bytes)", (v) => bytes(v), (ctx) => `${ctx.dataset.label.split(",")[0]}: ${mib(ctx.parsed.y)} at N = ${ctx.parsed.x}`));
}

function showNumpy(record) {
  const select = $("numpy-shape");
  const meaning = (record.parameters || {}).shape_meaning || {};
  for (const shape of record.parameters.shapes) {
    const option = document.createElement("option");
    option.value = shape;
    option.textContent = meaning[shape] || shapeLabel(shape);
    select.appendChild(option);
  }
  select.addEventListener("change", () => drawNumpy(record, select.value));
  drawNumpy(record, select.value);

  const body = $("numpy-ratios");
  const byKey = new Map();
  for (const r of record.ratios) {
    const key = `${r.shape} ${r.n}`;
    if (!byKey.has(key)) byKey.set(key, {shape: r.shape, n: r.n});
    byKey.get(key)[r.pass] = r;
  }
  for (const {shape, n, forward, backward} of byKey.values()) {
    const time = (r) => (r ? `${fmt(r.time_flash_over_naive)}×` : "—");
    const memory = (r) => (r ? `${fmt(r.memory_naive_over_flash)}×` : "—");
    row(body, [shapeLabel(shape), String(n), time(forward), time(backward), memory(forward), memory(backward)]);
  }
  const skipped = record.cases.filter((c) => c.skipped && c.pass === "forward");
  const p = record.parameters;
  const notes = [`Tiles Br × Bc = ${p.block_q} × ${p.block_k}; ${p.memory}.`];
  for (const c of skipped) notes.push(`Naive skipped for ${shapeLabel(c.shape)}, N = ${c.n}: ${c.skipped}.`);
  if (record.block_sweep && record.block_sweep.length) {
    notes.push("Tile sweep at N = 4096, one head: " + record.block_sweep.map(
        (b) => `${b.block_q}×${b.block_k}: fwd ${seconds(b.forward_s)}, bwd ${seconds(b.backward_s)}`).join("; ") + ".");
  }
  for (const e of record.exponents || []) {
    const f = e.memory_linear_fit;
    if (e.kernel === "flash" && e.shape === record.parameters.shapes[0] && f) {
      notes.push(`Flash ${e.pass} peak memory ≈ ${mib(f.fixed_bytes)} that does not grow with N (tiles) + ` +
                 `${fmt(f.nd_arrays_per_row)} float32 (N, d) arrays (the O(N·d) state and outputs); the line misses ` +
                 `the measurements by at most ${fmt(100 * f.max_relative_residual, 2)} %.`);
    }
  }
  const cpu = (pass) => record.ratios.filter((r) => r.pass === pass && r.n >= 4096 && r.cpu_time_flash_over_naive)
      .map((r) => r.cpu_time_flash_over_naive);
  if (cpu("forward").length) {
    const range = (xs) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}×`;
    notes.push(`Process CPU-time ratios flash / naive at N ≥ 4096 (less sensitive to other work on the machine): ` +
               `forward ${range(cpu("forward"))}, backward ${range(cpu("backward"))}.`);
  }
  if (record.checks && record.checks.length) {
    const worst = Math.max(...record.checks.map((c) => Math.max(c.max_abs_err_o, c.max_abs_err_grads)));
    notes.push(`Validated before timing: flash vs naive max |Δ| ≤ ${fmt(worst)} over outputs and gradients.`);
  }
  $("numpy-notes").textContent = notes.join(" ");
  $("numpy-machine").textContent = machineLine(record) +
      ` BLAS threads: ${Object.values(record.machine.threads || {})[0] || "default"}. Total run ${fmt(record.total_seconds)} s.`;
}

export default {key: "numpy", path: "bench/results/numpy_attention.json", label: "NumPy", section: "numpy", show: showNumpy};
