// The visualizer's ring view (visualizer.html?view=ring): draws the trace of ring attention.
//
// Python (nlpcore.web.ringviz.trace, in the Pyodide worker) runs nlpcore.kernels.ring.forward
// with trace=[] and returns one entry per ring step: per device the K/V shard it holds, the work
// it computes, its idle time, its running (m, l), the bytes it has sent, and the step's sends;
// plus ring.work's summary for every layout. This module only draws those numbers: it never
// computes a shard, a schedule or a merge itself.

import { getRuntime } from "./runtime.js";
import { createPlayer } from "./player.js";
import { fillSelect } from "./form.js";

const $ = (id) => document.getElementById(id);
const fmt = (x) => Number(x).toLocaleString("en-US");
const num = (x, digits = 3) => (x === null || x === undefined ? "−∞" : Number(x).toFixed(digits));
const COLORS = {
  text: "#1d2433", muted: "#5b6475", line: "#d5dbe6", device: "#f4f6fa", q: "#2f6fd6",
  kv: "#e87b1e", idle: "#c9ccd3", work: "#2f6fd6", arrow: "#e87b1e", current: "#1d2433",
};
const SHARD_HUES = [210, 25, 140, 280, 0, 55, 185, 320];

const view = { result: null, player: null }; // player: js/player.js over ring steps 0..P-1

function setStatus(state, text) {
  const s = $("ring-status");
  s.dataset.status = state;
  s.textContent = text;
}

function shardColor(t, alpha = 1) {
  return `hsla(${SHARD_HUES[t % SHARD_HUES.length]}, 65%, 48%, ${alpha})`;
}

function rowsText(rows) {
  return rows.length <= 10 ? rows.join(", ") : `${rows.slice(0, 4).join(", ")}, …, ${rows[rows.length - 1]} (${rows.length})`;
}

// ---- drawing -------------------------------------------------------------------------------

function drawRing(res, step) {
  const canvas = $("ring-canvas");
  const ctx = canvas.getContext("2d");
  const { width: W, height: H } = canvas;
  ctx.clearRect(0, 0, W, H);
  const p = res.params.devices;
  const cx = W / 2;
  const cy = H / 2;
  const boxW = 118;
  const boxH = 62;
  const radius = Math.min(W / 2 - boxW / 2, H / 2 - boxH / 2) - 10;
  const at = (r) => {
    const a = -Math.PI / 2 + (2 * Math.PI * r) / p;
    return [cx + radius * Math.cos(a), cy + radius * Math.sin(a)];
  };
  // The sends of this step: arrows from each device to the next, labelled with their bytes.
  for (const s of step.sends) {
    const [x0, y0] = at(s.from);
    const [x1, y1] = at(s.to);
    const mx = (x0 + x1) / 2;
    const my = (y0 + y1) / 2;
    const bend = 0.18;
    const qx = mx + (cy - my) * bend;
    const qy = my + (mx - cx) * bend;
    ctx.strokeStyle = shardColor(s.kv_shard, 0.85);
    ctx.lineWidth = 2.5;
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.quadraticCurveTo(qx, qy, x1, y1);
    ctx.stroke();
    const out = Math.hypot(qx - cx, qy - cy) || 1;  // the label sits outside the ring
    ctx.fillStyle = COLORS.text;
    ctx.font = "12px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.fillText(`K/V ${s.kv_shard}: ${fmt(s.bytes)} B`, qx + ((qx - cx) / out) * 26, qy + ((qy - cy) / out) * 16 + 4);
  }
  // Arrowheads where each send meets the receiving device's box (drawn after the boxes below).
  const heads = step.sends.map((s) => {
    const [x0, y0] = at(s.from);
    const [x1, y1] = at(s.to);
    const mx = (x0 + x1) / 2;
    const my = (y0 + y1) / 2;
    const qx = mx + (cy - my) * 0.18;
    const qy = my + (mx - cx) * 0.18;
    const ang = Math.atan2(y1 - qy, x1 - qx);
    const reach = Math.min(boxW / 2 / Math.max(1e-6, Math.abs(Math.cos(ang))),
      boxH / 2 / Math.max(1e-6, Math.abs(Math.sin(ang)))) + 3;
    return { shard: s.kv_shard, ang, x: x1 - Math.cos(ang) * reach, y: y1 - Math.sin(ang) * reach };
  });
  // The devices: own query rows, and the K/V shard held now.
  for (const d of step.devices) {
    const [x, y] = at(d.device);
    ctx.fillStyle = COLORS.device;
    ctx.strokeStyle = d.work > 0 ? COLORS.current : COLORS.line;
    ctx.lineWidth = d.work > 0 ? 2 : 1;
    ctx.fillRect(x - boxW / 2, y - boxH / 2, boxW, boxH);
    ctx.strokeRect(x - boxW / 2, y - boxH / 2, boxW, boxH);
    ctx.textAlign = "left";
    ctx.font = "bold 13px system-ui, sans-serif";
    ctx.fillStyle = COLORS.text;
    ctx.fillText(`device ${d.device}`, x - boxW / 2 + 6, y - boxH / 2 + 15);
    ctx.font = "12px system-ui, sans-serif";
    ctx.fillStyle = shardColor(d.device);
    ctx.fillText(`Q shard ${d.device}`, x - boxW / 2 + 6, y - boxH / 2 + 31);
    ctx.fillStyle = shardColor(d.kv_shard);
    ctx.fillText(`holds K/V ${d.kv_shard}`, x - boxW / 2 + 6, y - boxH / 2 + 46);
    ctx.fillStyle = d.work > 0 ? COLORS.text : COLORS.muted;
    ctx.fillText(d.work > 0 ? `computes ${fmt(d.work)}` : "waits (all masked)", x - boxW / 2 + 6, y - boxH / 2 + 59);
  }
  for (const h of heads) {
    ctx.fillStyle = shardColor(h.shard, 0.95);
    ctx.beginPath();
    ctx.moveTo(h.x, h.y);
    ctx.lineTo(h.x - 11 * Math.cos(h.ang - 0.4), h.y - 11 * Math.sin(h.ang - 0.4));
    ctx.lineTo(h.x - 11 * Math.cos(h.ang + 0.4), h.y - 11 * Math.sin(h.ang + 0.4));
    ctx.closePath();
    ctx.fill();
  }
}

function drawWork(res, pos) {
  const canvas = $("ring-work-canvas");
  const ctx = canvas.getContext("2d");
  const { width: W, height: H } = canvas;
  ctx.clearRect(0, 0, W, H);
  const work = res.summary.work;
  const idle = res.summary.idle;
  const p = work.length;
  const left = 70;
  const top = 18;
  const cellW = (W - left - 8) / p;
  const cellH = (H - top - 8) / p;
  const peak = Math.max(1, ...work.map((row, r) => Math.max(...row.map((w, s) => w + idle[r][s]))));
  ctx.font = "12px system-ui, sans-serif";
  ctx.fillStyle = COLORS.muted;
  ctx.textAlign = "center";
  for (let s = 0; s < p; s++) ctx.fillText(`step ${s}`, left + (s + 0.5) * cellW, 12);
  ctx.textAlign = "right";
  for (let r = 0; r < p; r++) {
    const y = top + r * cellH;
    ctx.fillStyle = COLORS.muted;
    ctx.fillText(`device ${r}`, left - 6, y + cellH / 2 + 4);
    for (let s = 0; s < p; s++) {
      const x = left + s * cellW;
      const full = cellW - 6;
      const w = (work[r][s] / peak) * full;
      const i = (idle[r][s] / peak) * full;
      ctx.fillStyle = COLORS.work;
      ctx.fillRect(x + 3, y + cellH * 0.2, w, cellH * 0.6);
      ctx.fillStyle = COLORS.idle;
      ctx.fillRect(x + 3 + w, y + cellH * 0.2, i, cellH * 0.6);
    }
  }
  ctx.strokeStyle = COLORS.current;
  ctx.lineWidth = 2;
  ctx.strokeRect(left + pos * cellW + 1, top - 2, cellW - 2, p * cellH + 2);
}

function renderTables(res, step) {
  const body = $("ring-device-body");
  body.replaceChildren(...step.devices.map((d) => {
    const tr = document.createElement("tr");
    if (d.work === 0) tr.className = "waiting";
    const cells = [
      String(d.device), rowsText(res.q_rows[d.device]), `device ${d.kv_shard}: ${rowsText(d.kv_rows)}`,
      fmt(d.work), fmt(d.idle), fmt(d.sent),
      d.m.map((x) => num(x)).join(" "), d.l.map((x) => num(x)).join(" "),
    ];
    cells.forEach((text, k) => {
      const td = document.createElement("td");
      td.textContent = text;
      if (k === 1 || k === 2 || k >= 6) td.className = "rows";
      tr.append(td);
    });
    return tr;
  }));
  const compare = $("ring-compare-body");
  compare.replaceChildren(...Object.entries(res.layouts).map(([name, s]) => {
    const tr = document.createElement("tr");
    tr.dataset.layout = name;
    if (name === res.params.layout) tr.className = "hot";
    for (const text of [name, `${s.over_ideal.toFixed(3)}×`, `${(100 * s.idle_share).toFixed(1)}%`]) {
      const td = document.createElement(text === name ? "th" : "td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
}

function render(pos) {
  const res = view.result;
  if (!res) return;
  const step = res.steps[pos];
  const p = res.params.devices;
  $("ring-pos").textContent = String(pos);
  $("ring-total").textContent = String(p - 1);
  drawRing(res, step);
  drawWork(res, pos);
  renderTables(res, step);
  const busy = step.devices.filter((d) => d.work > 0).length;
  const sent = step.sends.reduce((a, s) => a + s.bytes, 0);
  $("ring-event").textContent = `Step ${pos}: device r holds the K/V shard of device (r − ${pos}) mod ${p}; ` +
    (busy === p ? `all ${p} devices compute. ` : `${busy} of ${p} devices compute, the rest wait. `) +
    (step.sends.length ? `Then every device passes its shard on: ${fmt(sent)} bytes in flight.` :
      "Last step: nothing is sent; every device now has its exact output.");
  const s = res.summary;
  const summary = $("ring-summary");
  summary.dataset.idleShare = String(s.idle_share);
  summary.textContent = `${res.params.layout}${res.params.causal ? ", causal" : ""}: the ring takes ` +
    `${fmt(s.makespan)} score-element times (each step as long as its busiest device) against an ideal ` +
    `${fmt(Math.round(s.ideal))}; devices are idle ${(100 * s.idle_share).toFixed(1)}% of the time. ` +
    `${fmt(res.bytes_total)} bytes travel in all.`;
  const exact = $("ring-exact");
  exact.dataset.maxAbsErr = String(res.max_abs_err);
  exact.textContent = `The ring's output against reference attention: max |Δ| = ${res.max_abs_err.toExponential(2)} (float32).`;

}

function readParams() {
  const form = $("ring-params");
  return {
    n: Number(form.n.value),
    devices: Number(form.devices.value),
    layout: form.querySelector('input[name="layout"]:checked').value,
    causal: form.causal.checked,
  };
}

async function run(rt) {
  view.player.setPlaying(false);
  const params = readParams();
  setStatus("running", "Running ring.forward with trace=[] …");
  $("ring-run").disabled = true;
  try {
    const res = await rt.call("ringviz.trace", params, { timeoutMs: 60000 });
    view.result = res;
    setStatus("ready", `Trace ready: ${res.params.devices} devices, ${res.params.n} rows, ` +
      `${res.params.layout} layout${res.params.causal ? ", causal" : ""}.`);
    const url = new URL(window.location.href);
    url.searchParams.set("view", "ring");
    for (const key of ["n", "devices", "layout"]) url.searchParams.set(key, String(params[key]));
    url.searchParams.set("causal", params.causal ? "1" : "0");
    history.replaceState(null, "", url);
    view.player.goTo(0);
  } catch (err) {
    setStatus("error", `The ring could not be traced: ${err.message}`);
  } finally {
    $("ring-run").disabled = false;
  }
}

async function main() {
  $("tiles-view").hidden = true;
  $("ring-view").hidden = false;
  document.querySelector("h1").textContent = "Step through the ring";
  document.title = "Ring visualizer — FlashAttention lab";
  $("view-ring").setAttribute("aria-current", "page");
  view.player = createPlayer({
    last: () => (view.result ? view.result.params.devices - 1 : 0),
    onChange: render,
    controls: {first: $("ring-first"), prev: $("ring-prev"), play: $("ring-play"), next: $("ring-next"),
               end: $("ring-last")},
    intervalMs: () => 900,
    keys: true,
    live: $("ring-event"),
  });
  const rt = getRuntime();
  rt.onProgress((ev) => {
    if ($("ring-status").dataset.status === "loading" && ev && ev.message) setStatus("loading", `Starting Python: ${ev.message}`);
  });
  try {
    await rt.ready;
  } catch (err) {
    setStatus("error", `Python (Pyodide) is unavailable, so there is no trace to draw: ${err.message}`);
    return;
  }
  const opts = await rt.call("ringviz.options", {}, { timeoutMs: 20000 });
  const q = new URLSearchParams(window.location.search);
  const form = $("ring-params");
  fillSelect(form.n, opts.n, Number(q.get("n") || opts.defaults.n));
  fillSelect(form.devices, opts.devices, Number(q.get("devices") || opts.defaults.devices));
  const layout = opts.layouts.includes(q.get("layout")) ? q.get("layout") : opts.defaults.layout;
  form.querySelector(`input[name="layout"][value="${layout}"]`).checked = true;
  form.causal.checked = q.has("causal") ? q.get("causal") === "1" : opts.defaults.causal;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(rt);
  });
  await run(rt);
}

if (new URLSearchParams(window.location.search).get("view") === "ring") {
  main().catch((err) => setStatus("error", `The ring view failed to start: ${err.message}`));
} else {
  const tab = document.getElementById("view-tiles");
  if (tab) tab.setAttribute("aria-current", "page");
}
