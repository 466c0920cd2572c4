/* The performance page: draws the recorded benchmark results (bench/results/*.json) with Chart.js.
 *
 * Nothing here measures anything: the numbers come from the scripts in bench/ (see
 * bench/README.md), copied into the built site by build.py. Which result files exist is read
 * from manifest.json first, so a result not yet recorded shows "not yet recorded" instead of
 * a failed request. Chart.js is the vendored UMD build (vendor/chartjs/chart.umd.js, window.Chart);
 * without it the tables still fill in and the page says why there are no plots.
 *
 * Hooks: every section has data-status = loading | recorded | not-recorded | error;
 * [data-testid=perf-targets] lists every target with data-status = met | missed | not-measured.
 */
import {tritonBackend} from "./backends.js";

import {mountGpuBench} from "./gpu-bench.js";

const RESULTS = {
  numpy: "bench/results/numpy_attention.json",
  webgpu: "bench/results/webgpu_attention.json",
  webgpu_h200: "bench/results/webgpu_h200.json",
  io: "bench/results/io_claim.json",
  readiness: "bench/results/page_readiness.json",
  triton: "bench/results/triton_h200.json",
  iohw: "bench/results/io_h200.json",
  splitk: "bench/results/split_k_h200.json",
  ring: "bench/results/ring_2gpu.json",
};
const LABELS = {numpy: "NumPy", webgpu: "WebGPU", webgpu_h200: "WebGPU on the H200", io: "IO claim", readiness: "page readiness",
                triton: "Triton H200", iohw: "IO on an H200", splitk: "split-K H200", ring: "ring, two H200s"};
const COLORS = {naive: "#b3261e", flash: "#2456c7", flash2: "#17794a", theory: "#8a8f99",
                tiled: "#2456c7"};

const $ = (id) => document.getElementById(id);
const charts = new Map();  // canvas id -> Chart

/* ---- loading ---------------------------------------------------------------------------- */

async function listedFiles() {
  try {
    const response = await fetch("manifest.json");
    if (!response.ok) return null;
    return (await response.json()).files || null;
  } catch (error) {
    return null;  // no manifest (e.g. served from site/ directly): just try every file
  }
}

async function loadResult(path, files) {
  if (files && !(path in files)) return {missing: true};
  try {
    const response = await fetch(path);
    if (response.status === 404) return {missing: true};
    if (!response.ok) return {error: `HTTP ${response.status} for ${path}`};
    return {data: parseLenient(await response.text())};
  } catch (error) {
    return {error: `${path} could not be read: ${error.message}`};
  }
}

/* JSON, tolerating the bare Infinity / NaN that Python's json module writes for float("inf")
 * (JSON has no such tokens): they are read as null, i.e. "no number". */
function parseLenient(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    return JSON.parse(text.replace(/(?<=[\[:,]\s*)-?(?:Infinity|NaN)(?=\s*[\],}])/g, "null"));
  }
}

/* ---- formatting ------------------------------------------------------------------------- */

function fmt(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  if (typeof x !== "number") return String(x);
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1000 && a < 1e6) return String(Math.round(x));
  if (a >= 1e6 || a < 1e-3) return x.toExponential(2);
  return x.toPrecision(digits);
}

function bytes(x) {
  const units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
  for (const [unit, size] of units) if (Math.abs(x) >= size) return `${fmt(x / size)} ${unit}`;
  return `${fmt(x)} B`;
}

function mib(x) {
  return x >= 2 ** 30 ? `${fmt(x / 2 ** 30)} GiB` : `${fmt(x / 2 ** 20)} MiB`;
}

function seconds(x) {
  return x >= 1 ? `${fmt(x)} s` : `${fmt(x * 1e3)} ms`;
}

function row(tbody, cells, attrs = {}) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(attrs)) tr.dataset[key] = value;
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
  return tr;
}

function machineLine(record) {
  const m = record.machine || {};
  const v = m.versions || {};
  const versions = Object.entries(v).filter(([, x]) => x).map(([k, x]) => `${k} ${x}`).join(", ");
  const memory = m.memory_bytes ? `, ${fmt(m.memory_bytes / 2 ** 30)} GiB` : "";
  return `Recorded ${record.recorded_at || "?"} on ${m.cpu || "?"} (${m.cores || "?"} cores${memory}); ${versions}.`;
}

function setSection(id, status, note) {
  const section = $(id);
  section.dataset.status = status;
  if (note) {
    const p = document.createElement("p");
    p.className = status === "error" ? "notice error-text" : "notice";
    p.textContent = note;
    section.insertBefore(p, section.querySelector("h2").nextSibling);
  }
}

/* ---- charts ----------------------------------------------------------------------------- */

function chartAvailable() {
  return typeof window.Chart === "function";
}

function draw(canvasId, config) {
  if (!chartAvailable()) return null;
  if (charts.has(canvasId)) charts.get(canvasId).destroy();
  const chart = new window.Chart($(canvasId), config);
  charts.set(canvasId, chart);
  $(canvasId).dataset.series = String(config.data.datasets.length);
  return chart;
}

/* A log axis labelled at 1, 2 and 5 times powers of ten only (the others stay as grid lines). */
function logAxis(title, format) {
  return {type: "logarithmic", title: {display: true, text: title},
          ticks: {callback: (value) => {
            const mantissa = value / 10 ** Math.floor(Math.log10(value) + 1e-9);
            return [1, 2, 5].some((k) => Math.abs(mantissa - k) < 1e-6) ? format(value) : "";
          }}};
}

const powerOfTwoTicks = {type: "logarithmic", title: {display: true, text: "N (sequence length)"},
  afterBuildTicks: (axis) => {
    const ticks = [];
    for (let v = 2 ** Math.ceil(Math.log2(axis.min)); v <= axis.max; v *= 2) ticks.push({value: v});
    axis.ticks = ticks;
  },
  ticks: {callback: (value) => (value >= 1024 ? `${value / 1024}k` : String(value))}};

/* A log x axis with a tick at each given value (e.g. the SRAM sizes swept). */
function dataTicks(title, values, format) {
  return {type: "logarithmic", title: {display: true, text: title},
          afterBuildTicks: (axis) => { axis.ticks = values.map((value) => ({value})); },
          ticks: {callback: format, maxRotation: 0, autoSkip: false}};
}

function lineSet(label, points, color, extra = {}) {
  return {label, data: points, borderColor: color, backgroundColor: color, borderWidth: 2,
          pointRadius: 3, tension: 0, ...extra};
}

function logLogConfig(datasets, xAxis, yTitle, yFormat, tooltip) {
  return {
    type: "line",
    data: {datasets},
    options: {
      responsive: true, maintainAspectRatio: false, animation: false, parsing: true,
      scales: {x: xAxis, y: logAxis(yTitle, yFormat)},
      plugins: {legend: {position: "bottom", labels: {boxWidth: 14}},
                tooltip: {callbacks: {label: tooltip}}},
    },
  };
}

/* ---- targets ---------------------------------------------------------------------------- */

function targetsOf(key, record) {
  const t = record.targets;
  if (Array.isArray(t)) return t;
  if (t && typeof t === "object") {  // the Triton record: {name: bool}
    return Object.entries(t).map(([name, met]) => ({
      name: name.replaceAll("_", " "), met: Boolean(met), measured: met ? "yes" : "no", goal: "yes",
      limited_by: met ? "" : "see the Triton section"}));
  }
  return [];
}

function showTargets(loaded) {
  const body = $("targets-body");
  body.textContent = "";
  const misses = [];
  for (const [key, result] of Object.entries(loaded)) {
    if (!result.data) {
      row(body, [LABELS[key], result.missing ? "not yet recorded" : result.error, "", "", ""],
          {status: "not-measured"});
      misses.push({key, status: "not-measured", t: {name: "no record", measured: null, goal: "a recorded run",
        limited_by: result.missing ? `${RESULTS[key]} is not in this build` : result.error}});
      continue;
    }
    for (const t of targetsOf(key, result.data)) {
      const status = t.met === true ? "met" : (t.met === false ? "missed" : "not-measured");
      const verdict = {met: "met", missed: "MISSED", "not-measured": "not measured"}[status];
      const tr = row(body, [LABELS[key], t.name, t.goal, fmt(t.measured), verdict], {status});
      tr.className = status;
      if (status !== "met") misses.push({key, t, status});
    }
  }
  const list = $("misses-list");
  list.textContent = "";
  for (const {key, t, status} of misses) {
    const li = document.createElement("li");
    const head = document.createElement("strong");
    head.textContent = `${LABELS[key]}: ${t.name} — ${status === "missed" ? "missed" : "not measured"}`;
    li.appendChild(head);
    li.appendChild(document.createTextNode(
        ` (measured ${fmt(t.measured)}, goal ${t.goal}). ${t.limited_by ? "Limited by: " + t.limited_by : ""}`));
    list.appendChild(li);
  }
  $("misses").hidden = misses.length === 0;
}

/* ---- 1. NumPy --------------------------------------------------------------------------- */

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

/* ---- 2. WebGPU -------------------------------------------------------------------------- */

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
       (ctx) => `${ctx.dataset.label}: ${fmt(ctx.parsed.y)} ms at N = ${ctx.parsed.x}`);
  timeConfig.options.plugins.legend.labels.usePointStyle = true;
  draw("chart-webgpu-time", timeConfig);
  const guide = (label, value, color) => ({type: "line", label, data: sizes.map(() => value), borderColor: color,
                                           borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0});
  draw("chart-webgpu-speedup", {
    type: "bar",
    data: {labels: sizes.map(String),
           datasets: [...speedSets, guide("target (2×)", 2, "#17794a"), guide("parity (1×)", 1, "#8a8f99")]},
    options: {responsive: true, maintainAspectRatio: false, animation: false,
              scales: {x: {title: {display: true, text: "N"}},
                       y: {min: 0, title: {display: true, text: "naive time / tiled time"}}},
              plugins: {legend: {position: "bottom"},
                        tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${fmt(ctx.parsed.y)}×`}}}},
  });
  $("webgpu-notes").textContent = notes.join(" ") || "Every shader output matched NumPy before timing.";
  $("webgpu-machine").textContent = machineLine(record);
}

/* ---- 2b. WebGPU on the H200 -------------------------------------------------------------- */

function showWebgpuH200(record) {
  const engine = (record.engines || []).find((e) => e.rows && e.rows.length && e.cpu_adapter === false);
  if (!engine) throw new Error("webgpu_h200.json has no GPU engine with rows");
  const peak = record.gpu_peak_fp32_tflops;
  const heads = [...new Set(engine.rows.map((r) => r.heads || 1))].sort((a, b) => a - b);
  const sizes = [...new Set(engine.rows.map((r) => r.n))].sort((a, b) => a - b);
  const datasets = [];
  for (const h of heads) {
    for (const kernel of ["tiled", "naive"]) {
      const pts = engine.rows.filter((r) => (r.heads || 1) === h && r.kernel === kernel && r.valid)
          .map((r) => ({x: r.n, y: r.tflops}));
      if (pts.length) {
        datasets.push(lineSet(`${kernel}, ${h} head${h > 1 ? "s" : ""}`, pts,
                              kernel === "tiled" ? COLORS.tiled : COLORS.naive, {borderDash: h > 1 ? [6, 4] : []}));
      }
    }
  }
  draw("chart-h200-tflops", logLogConfig(datasets, powerOfTwoTicks, "TFLOP/s", (v) => fmt(v),
       (ctx) => `${ctx.dataset.label}: ${fmt(ctx.parsed.y)} TFLOP/s at N = ${ctx.parsed.x}`));
  const speed = Object.fromEntries((engine.speedups || []).map((s) => [`${s.heads || 1}/${s.n}`, s.naive_over_tiled]));
  const guide = (label, value, color) => ({type: "line", label, data: sizes.map(() => value), borderColor: color,
                                           borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0});
  draw("chart-h200-speedup", {
    type: "bar",
    data: {labels: sizes.map(String),
           datasets: [...heads.map((h, i) => ({label: `${h} head${h > 1 ? "s" : ""}`,
                                               data: sizes.map((n) => speed[`${h}/${n}`] ?? null),
                                               backgroundColor: i === 0 ? COLORS.tiled : "#17794a"})),
                      guide("parity (1×)", 1, "#8a8f99")]},
    options: {responsive: true, maintainAspectRatio: false, animation: false,
              scales: {x: {title: {display: true, text: "N"}},
                       y: {type: "logarithmic", title: {display: true, text: "naive time / tiled time (log)"}}},
              plugins: {legend: {position: "bottom"},
                        tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${fmt(ctx.parsed.y)}×`}}}},
  });
  const body = $("h200-rows");
  body.textContent = "";
  for (const h of heads) {
    for (const n of sizes) {
      const get = (k) => engine.rows.find((r) => (r.heads || 1) === h && r.n === n && r.kernel === k);
      const tiled = get("tiled");
      const naive = get("naive");
      if (!tiled) continue;
      const naiveText = !naive ? "–" : (naive.refused ? "refused: S does not fit" : fmt(naive.ms));
      row(body, [String(h), String(n), fmt(tiled.ms), naiveText,
                 speed[`${h}/${n}`] ? `${fmt(speed[`${h}/${n}`])}×` : "–", fmt(tiled.tflops),
                 peak ? `${fmt(100 * tiled.tflops / peak, 2)} %` : "–"]);
    }
  }
  const plan = record.parameters.plan || {};
  $("webgpu-h200-notes").textContent =
      `Tile plan (tiling.plan, d = ${plan.d}): ${plan.br} query rows a workgroup, ${plan.ks} invocation(s) a row, ` +
      `key tiles of ${plan.bc}, ${plan.bytes_used} of ${plan.storage_limit} bytes of workgroup memory. ` +
      (peak ? `Peak float32 rate used for the last column: ${peak} TFLOP/s (${record.gpu_peak_source}). ` : "") +
      `Every output was checked against NumPy (float64) on ${record.parameters.checked_rows_per_head} sampled rows per head ` +
      `before timing. The naive shader's S needs heads·N²·4 bytes; sizes where that passes the adapter's binding limit ` +
      `(${fmt(engine.naive_max_buffer_bytes / 2 ** 30, 2)} GiB) are refused, not timed. What limits the tiled shader: ` +
      `float32 arithmetic on CUDA cores (WebGPU has no tensor-core access), one workgroup-memory load per four ` +
      `multiply-adds, and at one head and small N too few rows to fill the GPU (bench/README.md, “WGSL on the H200”).`;
  $("webgpu-h200-machine").textContent =
      `Recorded ${record.recorded_at} on ${engine.adapter}, driver ${(engine.adapter_info || {}).description || "?"}, ` +
      `wgpu ${(engine.versions || {}).wgpu || "?"}, timing: ${engine.timing}. Command: ${record.command || "?"}`;
}

/* ---- 3. IO ------------------------------------------------------------------------------ */

function showIo(record) {
  const byN = record.by_n;
  const pts = (rows, key, xKey) => rows.map((r) => ({x: r[xKey], y: r[key], counted: r.counted_equals_closed_form}));
  const radius = (ctx) => (ctx.raw && ctx.raw.counted ? 5 : 3);
  const anchor = byN.find((r) => r.n === 1024) || byN[0];
  const scale = anchor.flash_bytes / anchor.theorem2_n2d2_over_m;
  const theory = byN.map((r) => ({x: r.n, y: r.theorem2_n2d2_over_m * scale}));
  const tip = (ctx) => `${ctx.dataset.label}: ${bytes(ctx.parsed.y)}${ctx.raw && ctx.raw.counted ? " (counted = formula)" : ""}`;
  draw("chart-io-n", logLogConfig([
    lineSet("standard (Algorithms 0 + 3)", pts(byN, "standard_bytes", "n"), COLORS.naive, {pointRadius: radius}),
    lineSet("FlashAttention (Algorithms 1 + 4)", pts(byN, "flash_bytes", "n"), COLORS.flash, {pointRadius: radius}),
    lineSet("FlashAttention-2 loop order", pts(byN, "flash2_bytes", "n"), COLORS.flash2, {pointRadius: radius}),
    lineSet("Θ(N²d²/M), scaled to flash at N = 1024", theory, COLORS.theory, {borderDash: [4, 4], pointRadius: 0}),
  ], powerOfTwoTicks, "HBM bytes (fp16)", bytes, tip));
  const byM = record.by_m;
  draw("chart-io-m", logLogConfig([
    lineSet("standard", pts(byM, "standard_bytes", "sram_elems"), COLORS.naive, {pointRadius: radius}),
    lineSet("FlashAttention", pts(byM, "flash_bytes", "sram_elems"), COLORS.flash, {pointRadius: radius}),
    lineSet("FlashAttention-2 loop order", pts(byM, "flash2_bytes", "sram_elems"), COLORS.flash2, {pointRadius: radius}),
  ], dataTicks("M (SRAM, elements)", byM.map((r) => r.sram_elems), (v) => `${Math.round(v / 1024)}Ki`),
  "HBM bytes (fp16)", bytes, tip));

  const f = record.figure2;
  const body = $("figure2-body");
  const asBaseline = (key, unit) => (f[key] === undefined ? "not in this record" : `${fmt(f[key])} ${unit}`);
  row(body, ["standard attention", `${fmt(f.standard_gb)} GB`, asBaseline("baseline_standard_gb", "GB"),
             `${fmt(f.paper_standard_gb)} GB`]);
  row(body, ["FlashAttention", `${fmt(f.flash_gb)} GB`, asBaseline("baseline_flash_gb", "GB"), `${fmt(f.paper_flash_gb)} GB`]);
  row(body, ["ratio", `${fmt(f.ratio)}×`, asBaseline("baseline_ratio", "×"), `${fmt(f.paper_ratio)}×`]);
  const s = f.setting;
  const counted = [...byN, ...byM].filter((r) => r.counted_equals_closed_form !== null);
  const equal = counted.filter((r) => r.counted_equals_closed_form).length;
  const slopes = record.slopes || {};
  $("io-notes").textContent =
      `Setting: N = ${s.n}, d = ${s.d}, ${s.heads} heads, batch ${s.batch}, fp16, forward + backward, ` +
      `SRAM ${s.sram_bytes / 1024} KiB (Br = ${s.br}, Bc = ${s.bc}). Attention alone (Algorithms 0/3) is well under ` +
      `the paper's 40.3 GB. The paper's caption names GPT-2 medium and its sizes, not the passes its baseline ran; ` +
      `the "model of the baseline" column assumes GPT-2 training's causal mask as a bias add and dropout with a ` +
      `1-byte keep-mask, counted pass by pass (io_model.baseline_passes), with FlashAttention fusing both. That it ` +
      `lands near the paper's numbers is a fit of those assumptions, not evidence of what the paper ran; a kernel ` +
      `that skips the tiles above the diagonal moves ${fmt(f.baseline_flash_skip_gb)} GB. Section 6 measures the same ` +
      `setting on an H200's counters. Counted traffic equals the closed form at ${equal} of ` +
      `${counted.length} points (large points). Fitted slopes: standard vs N ${fmt(slopes.standard_bytes_vs_n)}, ` +
      `flash vs N ${fmt(slopes.flash_bytes_vs_n)} (→ 2 as the N² term dominates), flash vs M ${fmt(slopes.flash_bytes_vs_m)} (→ −1).` +
      crossing(byM);
}

/* Where small SRAM makes tiling move *more* bytes than standard attention (each query tile is
 * re-read once per key tile, and tiny tiles mean many key tiles). */
function crossing(byM) {
  const worse = byM.filter((r) => r.flash_bytes > r.standard_bytes);
  if (!worse.length) return "";
  const largest = worse[worse.length - 1];
  return ` With SRAM of ${largest.sram_elems} elements or less (tiles ${largest.br} × ${largest.bc}), FlashAttention ` +
         "moves more bytes than standard attention: every query tile is re-read once per key tile, and small tiles " +
         "mean many key tiles — the Θ(N²d²/M) term needs M well above d².";
}

/* ---- 4. readiness ----------------------------------------------------------------------- */

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

/* ---- 5. Triton -------------------------------------------------------------------------- */

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

/* ---- 6. the IO claim on an H200 ------------------------------------------------------------ */

const IMPL_LABELS = {baseline: "PyTorch baseline (unfused)", triton: "this lab's Triton (fused)",
                     sdpa_flash: "SDPA flash", sdpa_cudnn: "SDPA cuDNN", triton_p0: "this lab's Triton, no dropout",
                     sdpa_cudnn_p0: "SDPA cuDNN, no dropout"};
const IMPL_COLORS = {baseline: "#b3261e", triton: "#2456c7", sdpa_flash: "#17794a", sdpa_cudnn: "#8a5a00"};

function modelGb(r) {
  const m = r.model_bytes || {};
  return (m.baseline_passes !== undefined ? m.baseline_passes : m.flash_sram) / 1e9;
}

function showIoHw(record) {
  const rows = record.rows || [];
  const fig = rows.filter((r) => r.setting === "figure2");
  if (!fig.length) throw new Error("io_h200.json has no Figure 2 rows");
  const body = $("iohw-figure2-body");
  const paper = record.paper_a100 || {};
  for (const r of fig) {
    const p = r.paper_a100 || (r.impl === "baseline" ? paper.baseline : null);
    row(body, [IMPL_LABELS[r.impl] || r.impl,
               Number.isFinite(r.runtime_ms) ? fmt(r.runtime_ms) : (r.error || "–"),
               Number.isFinite(r.hbm_bytes) ? fmt(r.hbm_bytes / 1e9) : "not read",
               fmt(modelGb(r)) + (r.model_bytes && r.model_bytes.flash_l2 !== undefined ?
                                  ` (M = L2: ${fmt(r.model_bytes.flash_l2 / 1e9)})` : ""),
               fmt(r.counted_gflops),
               p && ["baseline", "triton"].includes(r.impl) ? `${fmt(p.runtime_ms)} / ${fmt(p.hbm_gb)}` : ""],
        {impl: r.impl});
  }
  const by = Object.fromEntries(fig.map((r) => [r.impl, r]));
  const base = by.baseline || {}, ours = by.triton || {}, p0 = by.triton_p0 || {};
  const fm = record.figure2_model || {};
  $("iohw-summary").textContent =
      `Measured at the Figure 2 setting: ${fmt(base.hbm_bytes / ours.hbm_bytes)}× less HBM traffic and ` +
      `${fmt(base.runtime_ms / ours.runtime_ms)}× faster (the paper's A100: ` +
      `${fmt(paper.baseline.hbm_gb / paper.flash.hbm_gb)}× and ${fmt(paper.baseline.runtime_ms / paper.flash.runtime_ms)}×; ` +
      `the model: ${fmt(fm.baseline_ratio)}× less traffic). Without dropout our step takes ${fmt(p0.runtime_ms)} ms ` +
      `(${fmt(base.runtime_ms / p0.runtime_ms)}× the baseline, which keeps its dropout): drawing and applying the ` +
      `keep-mask in registers costs ${fmt(ours.runtime_ms - p0.runtime_ms)} ms of the ${fmt(ours.runtime_ms)} — ` +
      `the speed-up target is the paper's own ratio at this setting (Figure 2: ${fmt(paper.baseline.runtime_ms)} / ${fmt(paper.flash.runtime_ms)} ms); Figure 1's ` +
      `“up to 7.6×” states no setting to compare with.`;
  for (const d of [64, 128]) {
    const at = rows.filter((r) => r.d === d).sort((a, b) => a.n - b.n);
    const sets = [];
    for (const impl of ["baseline", "triton", "sdpa_flash", "sdpa_cudnn"]) {
      const pts = at.filter((r) => r.impl === impl && Number.isFinite(r.hbm_bytes)).map((r) => ({x: r.n, y: r.hbm_bytes}));
      sets.push(lineSet(`${IMPL_LABELS[impl]}, measured`, pts, IMPL_COLORS[impl]));
    }
    const tri = at.filter((r) => r.impl === "triton");
    const base_ = at.filter((r) => r.impl === "baseline");
    sets.push(lineSet("model: baseline passes", base_.map((r) => ({x: r.n, y: r.model_bytes.baseline_passes})),
                      IMPL_COLORS.baseline, {borderDash: [4, 4], pointRadius: 0}));
    sets.push(lineSet("model: flash, Theorem 2's tiles (H200 SRAM)", tri.map((r) => ({x: r.n, y: r.model_bytes.flash_sram})),
                      COLORS.theory, {borderDash: [4, 4], pointRadius: 0}));
    sets.push(lineSet("model: flash, M = the L2 cache", tri.map((r) => ({x: r.n, y: r.model_bytes.flash_l2})),
                      IMPL_COLORS.triton, {borderDash: [2, 3], pointRadius: 0}));
    draw(`chart-iohw-${d}`, logLogConfig(sets, powerOfTwoTicks, "HBM bytes per step", bytes,
                                         (ctx) => `${ctx.dataset.label}: ${bytes(ctx.parsed.y)}`));
  }
  const kbody = $("iohw-kernels-body");
  for (const k of base.kernel_list || []) {
    row(kbody, [k.name.replace(/^void /, "").slice(0, 70), fmt(k.read_bytes / 1e9), fmt(k.write_bytes / 1e9),
                fmt(k.ms_under_ncu)]);
  }
  const pbody = $("iohw-passes-body");
  for (const pass of fm.baseline_passes_gb || []) row(pbody, [`${pass.pass}: ${pass.step}`, fmt(pass.gb)]);
  const env = record.environment || {};
  const checks = record.checks || {};
  const l2 = rows.filter((r) => r.impl === "triton" && Number.isFinite(r.hbm_bytes)).map((r) => r.model_bytes.flash_l2 / r.hbm_bytes);
  const sram = rows.filter((r) => r.impl === "triton" && Number.isFinite(r.hbm_bytes)).map((r) => r.model_bytes.flash_sram / r.hbm_bytes);
  const span = (xs) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}×`;
  $("iohw-notes").textContent =
      `${env.gpu || "GPU ?"} (${env.sm_count || "?"} SMs, L2 ${env.l2_bytes ? Math.round(env.l2_bytes / 2 ** 20) + " MiB" : "?"}), ` +
      `torch ${env.torch || "?"}, triton ${env.triton || "?"}, cuDNN ${env.cudnn || "?"}, recorded ${env.date_utc || "?"}; ` +
      `command: ${env.command || "?"}. Counters: ncu --clock-control none --cache-control none, one step after warm-up. ` +
      `Before timing, the Triton kernel with dropout passed the flash-attention bar against float64 with the same ` +
      `keep-mask, and its mask equalled NumPy's bit for bit: ${checks.ok ? "yes" : "NO"}. Why the numbers differ from the ` +
      `model: the baseline moves more than its count because PyTorch's softmax backward first writes dP ∘ P to HBM ` +
      `(two more N × N reads and one more write; see the kernel table). The flash kernels skip the tiles above the diagonal, so ` +
      `they move less than the paper's Algorithm 2, and a head's K and V (at most a few MB) stay in the L2 cache while ` +
      `all of its query blocks run: the re-reads that Theorem 2 counts with the SRAM's tiles mostly hit the L2 instead of ` +
      `HBM, so measured bytes follow the model with M = the L2 (model / measured ${span(l2)} over the sweep) rather ` +
      `than the SRAM rule (${span(sram)}), which overcounts more the longer the sequence. What remains above the compulsory traffic is the fp32 dQ ` +
      `accumulator (zeroed, accumulated, converted).`;
}

/* ---- 7. Split-K decoding ------------------------------------------------------------------ */

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

/* ---- 8. Ring attention on two GPUs ---------------------------------------------------------- */

function showRing(record) {
  const body = $("ring-body");
  body.textContent = "";
  for (const r of record.times || []) {
    const cp = "context_parallel_s" in r ? (r.context_parallel_ok ? seconds(r.context_parallel_s) : "wrong output")
      : (r.context_parallel_error || "–");
    row(body, [`${r.n.toLocaleString("en-US")}${r.causal ? ", causal" : ""}`, seconds(r.ring_s), seconds(r.chunked_s),
               seconds(r.one_device_kernel_s), seconds(r.one_device_sdpa_s), cp, `${fmt(r.speedup_vs_one_device_kernel)}×`]);
  }
  const env = record.env || {};
  const l = record.longest || {};
  $("ring-notes").textContent =
      `${(env.gpus || []).join("; ")}; NCCL ${env.nccl || "?"}, torch ${env.torch || "?"}; recorded ${env.date_utc || "?"} with: ` +
      `${env.command || "?"}. Checks against fp64 and SDPA: ${record.all_checks_pass ? "all passed" : "NOT all passed"}. ` +
      (l.one_gpu_n ? `Longest causal sequence under ${bytes(l.cap_bytes)} per GPU: one GPU ${l.one_gpu_n.toLocaleString("en-US")}, ` +
        `${l.world} GPUs ${l.ring_n.toLocaleString("en-US")} tokens (${fmt(l.ratio)}×).` : "");
}

/* ---- start ------------------------------------------------------------------------------ */

const SHOW = {numpy: showNumpy, webgpu: showWebgpu, webgpu_h200: showWebgpuH200, io: showIo, readiness: showReadiness,
              triton: showTriton, iohw: showIoHw, splitk: showSplitK, ring: showRing};
const SECTION = {numpy: "numpy", webgpu: "webgpu", webgpu_h200: "webgpu-h200", io: "io", readiness: "readiness",
                 triton: "triton", iohw: "iohw", splitk: "splitk", ring: "ring"};

async function main() {
  mountGpuBench($("gpu-bench"));
  $("chart-status").textContent = chartAvailable() ? "" :
      "Plots are unavailable: the vendored Chart.js (vendor/chartjs/chart.umd.js) did not load, so only the tables are shown.";
  const files = await listedFiles();
  const loaded = {};
  await Promise.all(Object.entries(RESULTS).map(async ([key, path]) => { loaded[key] = await loadResult(path, files); }));
  showTargets(loaded);
  for (const [key, result] of Object.entries(loaded)) {
    const section = SECTION[key];
    if (result.missing) {
      setSection(section, "not-recorded", `Not yet recorded: ${RESULTS[key]} is not in this build. ` +
                 "Run the benchmark named in bench/README.md, then rebuild the site.");
      continue;
    }
    if (result.error) {
      setSection(section, "error", result.error);
      continue;
    }
    try {
      SHOW[key](result.data);
      setSection(section, "recorded");
    } catch (error) {
      console.warn(`${RESULTS[key]}: ${error.message}`);
      setSection(section, "error", `${RESULTS[key]} could not be shown: ${error.message}`);
    }
  }
}

main();
