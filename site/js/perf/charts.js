/* Chart.js configurations shared by the performance page's sections.
 *
 * Chart.js is the vendored UMD build (vendor/chartjs/chart.umd.js, window.Chart); without it
 * draw() does nothing and the sections still fill their tables.
 */
import {$} from "./format.js";

export const COLORS = {naive: "#b3261e", flash: "#2456c7", flash2: "#17794a", theory: "#8a8f99",
                       tiled: "#2456c7", guide: "#8a8f99", target: "#17794a"};
const charts = new Map();  // canvas id -> Chart

export function chartAvailable() {
  return typeof window.Chart === "function";
}

export function draw(canvasId, config) {
  if (!chartAvailable()) return null;
  if (charts.has(canvasId)) charts.get(canvasId).destroy();
  const chart = new window.Chart($(canvasId), config);
  charts.set(canvasId, chart);
  $(canvasId).dataset.series = String(config.data.datasets.length);
  return chart;
}

/* A log axis labelled at 1, 2 and 5 times powers of ten only (the others stay as grid lines). */
export function logAxis(title, format) {
  return {type: "logarithmic", title: {display: true, text: title},
          ticks: {callback: (value) => {
            const mantissa = value / 10 ** Math.floor(Math.log10(value) + 1e-9);
            return [1, 2, 5].some((k) => Math.abs(mantissa - k) < 1e-6) ? format(value) : "";
          }}};
}

export const powerOfTwoTicks = {type: "logarithmic", title: {display: true, text: "N (sequence length)"},
  afterBuildTicks: (axis) => {
    const ticks = [];
    for (let v = 2 ** Math.ceil(Math.log2(axis.min)); v <= axis.max; v *= 2) ticks.push({value: v});
    axis.ticks = ticks;
  },
  ticks: {callback: (value) => (value >= 1024 ? `${value / 1024}k` : String(value))}};

/* A log x axis with a tick at each given value (e.g. the SRAM sizes swept). */
export function dataTicks(title, values, format) {
  return {type: "logarithmic", title: {display: true, text: title},
          afterBuildTicks: (axis) => { axis.ticks = values.map((value) => ({value})); },
          ticks: {callback: format, maxRotation: 0, autoSkip: false}};
}

export function lineSet(label, points, color, extra = {}) {
  return {label, data: points, borderColor: color, backgroundColor: color, borderWidth: 2,
          pointRadius: 3, tension: 0, ...extra};
}

/* A dashed horizontal line at `value` across a bar chart's categories (a target or parity). */
export function guideLine(label, value, color, categories) {
  return {type: "line", label, data: categories.map(() => value), borderColor: color,
          borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0};
}

export function logLogConfig(datasets, xAxis, yTitle, yFormat, tooltip) {
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

/* A bar chart of speed-ups per N with guide lines; `yAxis` overrides the linear y axis. */
export function speedupConfig(categories, datasets, yAxis = {min: 0, title: {display: true, text: "naive time / tiled time"}}) {
  return {
    type: "bar",
    data: {labels: categories.map(String), datasets},
    options: {responsive: true, maintainAspectRatio: false, animation: false,
              scales: {x: {title: {display: true, text: "N"}}, y: yAxis},
              plugins: {legend: {position: "bottom"},
                        tooltip: {callbacks: {label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y.toFixed(2)}×`}}}},
  };
}
