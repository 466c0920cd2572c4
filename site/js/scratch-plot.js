/* Draws a scratch cell's array value: a 1-D array as a line plot, a 2-D one as a heatmap (rows
 * down, columns across) or as one line per row. The data is what nlpcore.web.exercises.scratch
 * returns as `plot`: {shape, dtype, data (row-major, null where not finite), min, max}.
 *
 * Uses the vendored Chart.js and its matrix chart type (vendor/chartjs/, chartjs-chart-matrix),
 * loaded on first use. Non-finite entries (-inf of a masked score, NaN) are drawn grey in a
 * heatmap and left as gaps in a line, and the caption counts them.
 */
import {el} from "./dom.js";

const MAX_LINES = 16;  // rows drawn as separate lines; more are summarised by the heatmap
let loading = null;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`${src} did not load`));
    document.head.append(s);
  });
}

async function chartLibrary() {
  if (!loading) {
    loading = (async () => {
      if (!window.Chart) await loadScript(new URL("../vendor/chartjs/chart.umd.js", import.meta.url).href);
      if (!window.Chart.registry.controllers.get("matrix")) {
        await loadScript(new URL("../vendor/chartjs/chartjs-chart-matrix/chartjs-chart-matrix.min.js", import.meta.url).href);
      }
      return window.Chart;
    })();
    loading.catch(() => { loading = null; });
  }
  return loading;
}

/* The kinds of drawing a value allows: ["line"] for 1-D, ["heatmap", "line"] for 2-D. */
export function plotKinds(plot) {
  if (!plot || !Array.isArray(plot.shape)) return [];
  return plot.shape.length === 1 ? ["line"] : ["heatmap", "line"];
}

/* Viridis-like ramp (5 stops), t in [0, 1]. */
const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function colour(t) {
  const x = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((a, k) => Math.round(a + f * (STOPS[i + 1][k] - a)));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

const fmt = (v) => (v === null ? "not finite" : Number(v).toPrecision(4));

/* Draws `plot` as `kind` into `host` (replacing what was there); returns the Chart. */
export async function drawPlot(host, plot, kind) {
  const Chart = await chartLibrary();
  const [rows, cols] = plot.shape.length === 1 ? [1, plot.shape[0]] : plot.shape;
  const nonFinite = plot.data.filter((v) => v === null).length;
  const canvas = el("canvas", {role: "img", "aria-label": `${kind} of an array of shape (${plot.shape.join(", ")})`});
  const frame = el("div", {class: "scratch-plot-frame"}, canvas);
  host.replaceChildren(frame, el("p", {class: "small", "data-testid": "plot-caption",
    text: `${plot.dtype} array of shape (${plot.shape.join(", ")}); min ${fmt(plot.min)}, max ${fmt(plot.max)}` +
          (nonFinite ? `; ${nonFinite} entries not finite (${kind === "heatmap" ? "grey" : "gaps"})` : "") + "."}));
  host.dataset.kind = kind;
  const span = plot.max !== null && plot.min !== null && plot.max > plot.min ? plot.max - plot.min : 1;
  const common = {animation: false, responsive: true, maintainAspectRatio: false};
  if (kind === "heatmap") {
    const data = plot.data.map((v, i) => ({x: i % cols, y: Math.floor(i / cols), v}));
    return new Chart(canvas, {
      type: "matrix",
      data: {datasets: [{
        label: "value", data,
        backgroundColor: (ctx) => {
          const v = ctx.raw && ctx.raw.v;
          return v === null || v === undefined ? "#b8bcc4" : colour((v - plot.min) / span);
        },
        width: ({chart}) => Math.max(1, (chart.chartArea || {width: 0}).width / cols),
        height: ({chart}) => Math.max(1, (chart.chartArea || {height: 0}).height / rows),
      }]},
      options: {...common,
        plugins: {legend: {display: false},
                  tooltip: {callbacks: {title: () => "", label: (ctx) => `[${ctx.raw.y}, ${ctx.raw.x}] = ${fmt(ctx.raw.v)}`}}},
        scales: {x: {type: "linear", min: -0.5, max: cols - 0.5, offset: false, title: {display: true, text: "column"},
                     ticks: {stepSize: Math.max(1, Math.ceil(cols / 16))}, grid: {display: false}},
                 y: {type: "linear", min: -0.5, max: rows - 0.5, reverse: true, offset: false, title: {display: true, text: "row"},
                     ticks: {stepSize: Math.max(1, Math.ceil(rows / 16))}, grid: {display: false}}}},
    });
  }
  const lines = Math.min(rows, MAX_LINES);
  const datasets = [];
  for (let r = 0; r < lines; r += 1) {
    datasets.push({label: rows === 1 ? "value" : `row ${r}`, data: plot.data.slice(r * cols, (r + 1) * cols),
                   borderColor: colour(lines === 1 ? 0.3 : r / (lines - 1)), pointRadius: cols > 64 ? 0 : 2,
                   spanGaps: false});
  }
  if (rows > lines) host.querySelector("[data-testid=plot-caption]").append(` The first ${lines} of ${rows} rows are drawn.`);
  return new Chart(canvas, {
    type: "line", data: {labels: Array.from({length: cols}, (_, i) => i), datasets},
    options: {...common, plugins: {legend: {display: rows > 1 && lines <= 8}},
              scales: {x: {title: {display: true, text: "index"}}, y: {title: {display: true, text: "value"}}}},
  });
}
