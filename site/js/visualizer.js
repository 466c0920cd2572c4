// The tiling visualizer: draws the trace that nlpcore.kernels.flash_np emits.
//
// Python (nlpcore.web.viz.trace, run in the Pyodide worker) runs the kernel with trace=[] and
// io=IOCounter() and returns its events, plus io_model's closed form. This module only *folds*
// those events into a picture — which blocks are in SRAM, which tiles were visited, the rows'
// (m, l), the running HBM counters — and never re-computes the algorithm. Event schema: see
// py/nlpcore/kernels/trace.py; grouped steps (one per outer-loop iteration, for big traces):
// see py/nlpcore/web/viz.py (_group_steps).

import { getRuntime } from "./runtime.js";
import { gb, loadH200, modelBytes } from "./measured.js";

const VECTOR_TENSORS = new Set(["l", "m", "lse", "D"]);
const TENSOR_ORDER = ["Q", "K", "V", "O", "dO", "dQ", "dK", "dV", "l", "m", "lse", "D"];
const COLORS = {
  bg: "#f4f6fa", grid: "#d5dbe6", text: "#1d2433", muted: "#5b6475",
  resident: "#2f6fd6", read: "rgba(47, 111, 214, 0.55)", write: "rgba(232, 123, 30, 0.7)",
  heat: [47, 111, 214], visited: "#a9c4ee", current: "#e87b1e", group: "#f2b27a", skipped: "#c9ccd3",
};

const $ = (id) => document.getElementById(id);
const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));

const view = {
  result: null, // what viz.trace returned
  steps: [],
  pos: 0, // number of steps applied (0 = before the first event)
  tensors: [], // tensors that appear in the trace, drawn left to right
  playing: false,
  timer: null,
};

// ---- folding the trace -----------------------------------------------------------------

function emptyFold(p) {
  return {
    reads: 0, writes: 0,
    resident: new Map(), // tensor -> {block, rows, elems}
    visited: new Uint8Array(p.t_r * p.t_c), // 0 none, 1 visited, 2 skipped
    current: null, // last tile or skip event
    groupTiles: [], // tiles of the current grouped step
    m: new Array(p.n).fill(undefined),
    l: new Array(p.n).fill(undefined),
    updated: null, // [r0, r1) rows whose state the last step changed
    loadsPerRow: new Map(), // tensor -> Uint32Array(n): loads covering each row
    move: null, // the load/store event of the last step
    last: null, // the last step itself
    ended: false,
  };
}

function applyEvent(f, ev, p) {
  f.move = null;
  f.updated = null;
  switch (ev.op) {
    case "load":
    case "store": {
      f.reads = ev.reads;
      f.writes = ev.writes;
      f.move = ev;
      if (ev.op === "load") {
        let counts = f.loadsPerRow.get(ev.tensor);
        if (!counts) f.loadsPerRow.set(ev.tensor, (counts = new Uint32Array(p.n)));
        for (let r = ev.rows[0]; r < ev.rows[1]; r++) counts[r] += 1;
      }
      // A block moved in is in SRAM; a block stored that was not loaded was produced there.
      if (ev.block !== null && ev.block !== undefined) {
        const held = f.resident.get(ev.tensor);
        if (ev.op === "load" || !held || held.block !== ev.block) {
          f.resident.set(ev.tensor, { block: ev.block, rows: ev.rows, elems: ev.elems });
        }
      }
      break;
    }
    case "tile":
      f.visited[ev.i * p.t_c + ev.j] = 1;
      f.current = ev;
      break;
    case "skip":
      f.visited[ev.i * p.t_c + ev.j] = 2;
      f.current = ev;
      break;
    case "state":
      for (let r = ev.rows[0]; r < ev.rows[1]; r++) {
        f.m[r] = ev.m[r - ev.rows[0]];
        f.l[r] = ev.l[r - ev.rows[0]];
      }
      f.updated = ev.rows;
      break;
    case "end":
      f.reads = ev.reads;
      f.writes = ev.writes;
      f.resident.clear();
      f.current = null;
      f.ended = true;
      break;
    default:
      break;
  }
}

function applyGroup(f, g, p) {
  f.move = null;
  for (const [tensor, spans] of Object.entries(g.loads || {})) {
    let counts = f.loadsPerRow.get(tensor);
    if (!counts) f.loadsPerRow.set(tensor, (counts = new Uint32Array(p.n)));
    for (const [r0, r1] of spans) for (let r = r0; r < r1; r++) counts[r] += 1;
  }
  f.reads = g.reads;
  f.writes = g.writes;
  for (const [i, j] of g.tiles) f.visited[i * p.t_c + j] = 1;
  for (const [i, j] of g.skips) f.visited[i * p.t_c + j] = 2;
  f.groupTiles = g.tiles;
  if (g.tiles.length) {
    const [i, j] = g.tiles[g.tiles.length - 1];
    f.current = { op: "tile", i, j };
  }
  f.resident = new Map(g.resident.filter((r) => r.block !== null).map((r) => [r.tensor, r]));
  let lo = Infinity;
  let hi = -Infinity;
  for (const ev of g.states) {
    applyEvent(f, ev, p);
    lo = Math.min(lo, ev.rows[0]);
    hi = Math.max(hi, ev.rows[1]);
  }
  f.updated = g.states.length ? [lo, hi] : null;
  if (g.end) {
    f.resident.clear();
    f.current = null;
    f.ended = true;
  }
}

function foldTo(pos) {
  const p = view.result.params;
  const f = emptyFold(p);
  for (let k = 0; k < pos; k++) {
    const step = view.steps[k];
    f.groupTiles = [];
    if (step.op === "group") applyGroup(f, step, p);
    else applyEvent(f, step, p);
    f.last = step;
  }
  return f;
}

// ---- describing a step -------------------------------------------------------------------

function rowsText(rows) {
  return rows[1] - rows[0] === 1 ? `row ${rows[0]}` : `rows ${rows[0]}–${rows[1] - 1}`;
}

function describe(step, p) {
  if (!step) return `Ready: ${p.mode} pass, N=${p.n}, d=${p.d}, M=${p.sram} → Br=${p.br}, Bc=${p.bc}. Press → or ▶ to start.`;
  if (step.op === "group") {
    const axis = step.axis === "j" ? "key/value block j" : "query block i";
    const moved = Object.entries(step.moved)
      .map(([t, [r, w]]) => `${t} ${r ? `read ${fmt(r)}` : ""}${r && w ? ", " : ""}${w ? `written ${fmt(w)}` : ""}`)
      .join("; ");
    const head = step.outer === null ? (step.end ? "Epilogue" : "Prologue") : `Outer iteration ${axis} = ${step.outer}`;
    const tiles = step.tiles.length || step.skips.length ? `: ${step.tiles.length} tiles computed, ${step.skips.length} skipped` : "";
    return `${head}${tiles}. Elements moved — ${moved || "none"}. (Large trace: one step per outer iteration.)`;
  }
  switch (step.op) {
    case "begin":
      return `Begin the ${step.pass} pass: N=${step.n_q}, d=${step.d}, Br=${step.br}, Bc=${step.bc}, ` +
        `Tr=${step.t_r}, Tc=${step.t_c}, ${step.loop_order === "kv_outer" ? "K/V outer (Algorithm 1)" : "Q outer (FlashAttention-2)"}` +
        `${step.causal ? ", causal" : ""}.`;
    case "load":
      return `Load ${step.tensor}${step.block === null ? " (whole tensor)" : ` block ${step.block}`} (${rowsText(step.rows)}) from HBM into SRAM: ${fmt(step.elems)} elements read.`;
    case "store":
      return `Store ${step.tensor}${step.block === null ? " (whole tensor)" : ` block ${step.block}`} (${rowsText(step.rows)}) to HBM: ${fmt(step.elems)} elements written.`;
    case "tile":
      return `Compute tile S(${step.i}, ${step.j}) = scale · Q${step.i} K${step.j}ᵀ on chip: query ${rowsText(step.rows)} × key columns ${step.cols[0]}–${step.cols[1] - 1}. It never goes to HBM.`;
    case "skip":
      return `Skip tile (${step.i}, ${step.j}): every entry is masked (${step.reason || "mask"}), so nothing is loaded or computed.`;
    case "state":
      return `Fold the tile into the running (m, ℓ) of ${rowsText(step.rows)} with the online-softmax combine.`;
    case "end":
      return `End of the ${p.mode} pass: ${fmt(step.reads)} elements read and ${fmt(step.writes)} written in all.`;
    default:
      return step.op;
  }
}

// ---- drawing -------------------------------------------------------------------------------

function setupCanvas(canvas, cssWidth, cssHeight) {
  const ratio = window.devicePixelRatio || 1;
  canvas.style.width = `${cssWidth}px`;
  canvas.style.height = `${cssHeight}px`;
  canvas.width = Math.round(cssWidth * ratio);
  canvas.height = Math.round(cssHeight * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}

function drawHBM(f, p) {
  const canvas = $("hbm-canvas");
  const width = Math.min(560, canvas.parentElement.clientWidth - 24 || 560);
  const height = 360;
  const ctx = setupCanvas(canvas, width, height);
  ctx.clearRect(0, 0, width, height);
  const top = 22;
  const rowsH = height - top - 6;
  const rowH = rowsH / p.n;
  const gap = 8;
  const units = view.tensors.map((t) => (VECTOR_TENSORS.has(t) ? 1 : 4));
  const unitW = (width - gap * (view.tensors.length - 1)) / units.reduce((a, b) => a + b, 0);
  let x = 0;
  const maxLoads = Math.max(1, ...[...f.loadsPerRow.values()].map((c) => Math.max(...c)));
  view.tensors.forEach((t, k) => {
    const w = units[k] * unitW;
    ctx.fillStyle = COLORS.bg;
    ctx.fillRect(x, top, w, rowsH);
    const counts = f.loadsPerRow.get(t);
    if (counts) {
      // Shade rows by how often they were read: K/V-outer re-reads Q and O once per key block.
      for (let r = 0; r < p.n; r++) {
        if (!counts[r]) continue;
        const a = 0.08 + 0.32 * (counts[r] / maxLoads);
        ctx.fillStyle = `rgba(${COLORS.heat.join(",")}, ${a})`;
        ctx.fillRect(x, top + r * rowH, w, Math.max(rowH, 0.5));
      }
    }
    if (rowH >= 4) {
      ctx.strokeStyle = COLORS.grid;
      ctx.lineWidth = 0.5;
      for (let r = 1; r < p.n; r++) {
        ctx.beginPath();
        ctx.moveTo(x, top + r * rowH);
        ctx.lineTo(x + w, top + r * rowH);
        ctx.stroke();
      }
    }
    if (f.move && f.move.tensor === t) {
      ctx.fillStyle = f.move.op === "load" ? COLORS.read : COLORS.write;
      ctx.fillRect(x, top + f.move.rows[0] * rowH, w, (f.move.rows[1] - f.move.rows[0]) * rowH);
    }
    const held = f.resident.get(t);
    if (held) {
      ctx.strokeStyle = COLORS.resident;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(x + 1.25, top + held.rows[0] * rowH + 1.25, w - 2.5, Math.max((held.rows[1] - held.rows[0]) * rowH - 2.5, 1));
    }
    ctx.strokeStyle = COLORS.muted;
    ctx.lineWidth = 1;
    ctx.strokeRect(x + 0.5, top + 0.5, w - 1, rowsH - 1);
    ctx.fillStyle = COLORS.text;
    ctx.font = "600 13px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.fillText(t === "l" ? "ℓ" : t, x + w / 2, 15);
    x += w + gap;
  });
  canvas.setAttribute("aria-label", `HBM tensors ${view.tensors.join(", ")}; in SRAM: ${
    [...f.resident.entries()].map(([t, r]) => `${t} ${rowsText(r.rows)}`).join(", ") || "nothing"}`);
}

function drawTileMap(f, p) {
  const canvas = $("tile-map");
  const size = 280;
  const cell = Math.max(1, Math.floor(size / Math.max(p.t_r, p.t_c)));
  const w = cell * p.t_c;
  const h = cell * p.t_r;
  const ctx = setupCanvas(canvas, w + 2, h + 2);
  ctx.clearRect(0, 0, w + 2, h + 2);
  const inGroup = new Set(f.groupTiles.map(([i, j]) => i * p.t_c + j));
  for (let i = 0; i < p.t_r; i++) {
    for (let j = 0; j < p.t_c; j++) {
      const k = i * p.t_c + j;
      const state = f.visited[k];
      ctx.fillStyle = state === 1 ? (inGroup.has(k) ? COLORS.group : COLORS.visited) : state === 2 ? COLORS.skipped : "#ffffff";
      ctx.fillRect(1 + j * cell, 1 + i * cell, cell, cell);
      if (state === 2 && cell >= 8) {
        ctx.strokeStyle = "#9aa0ab";
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.moveTo(1 + j * cell, 1 + (i + 1) * cell);
        ctx.lineTo(1 + (j + 1) * cell, 1 + i * cell);
        ctx.stroke();
      }
    }
  }
  if (cell >= 5) {
    ctx.strokeStyle = COLORS.grid;
    ctx.lineWidth = 0.5;
    for (let i = 0; i <= p.t_r; i++) { ctx.beginPath(); ctx.moveTo(1, 1 + i * cell); ctx.lineTo(1 + w, 1 + i * cell); ctx.stroke(); }
    for (let j = 0; j <= p.t_c; j++) { ctx.beginPath(); ctx.moveTo(1 + j * cell, 1); ctx.lineTo(1 + j * cell, 1 + h); ctx.stroke(); }
  }
  ctx.strokeStyle = COLORS.muted;
  ctx.lineWidth = 1;
  ctx.strokeRect(0.5, 0.5, w + 1, h + 1);
  if (f.current) {
    ctx.strokeStyle = COLORS.current;
    ctx.lineWidth = Math.max(2, Math.min(4, cell / 4));
    ctx.strokeRect(1 + f.current.j * cell, 1 + f.current.i * cell, cell, cell);
  }
  let visited = 0;
  let skipped = 0;
  for (const s of f.visited) {
    if (s === 1) visited += 1;
    else if (s === 2) skipped += 1;
  }
  $("n-visited").textContent = String(visited);
  $("n-skipped").textContent = String(skipped);
  canvas.setAttribute("aria-label", `${p.t_r} by ${p.t_c} score tiles: ${visited} computed, ${skipped} skipped` +
    (f.current ? `; current tile (${f.current.i}, ${f.current.j})` : ""));
}

function drawTile(f) {
  const canvas = $("tile-canvas");
  const caption = $("tile-caption");
  const tile = f.current;
  const scores = tile && tile.s;
  if (!scores) {
    const ctx = setupCanvas(canvas, 300, 40);
    ctx.clearRect(0, 0, 300, 40);
    caption.textContent = !tile ? "No tile on chip at this step."
      : tile.op === "skip" ? `Tile (${tile.i}, ${tile.j}) is skipped: it is never computed.`
      : `Tile (${tile.i}, ${tile.j}): its scores are not recorded (the trace keeps them only for tiles of at most 1024 entries, and grouped steps omit them).`;
    return;
  }
  const rows = scores.length;
  const cols = scores[0].length;
  const cell = Math.max(3, Math.min(36, Math.floor(280 / Math.max(rows, cols))));
  const ctx = setupCanvas(canvas, cols * cell + 2, rows * cell + 2);
  let big = 1e-12;
  for (const row of scores) for (const v of row) if (v !== null) big = Math.max(big, Math.abs(v));
  ctx.font = `${Math.max(8, Math.min(11, cell / 3.2))}px ui-monospace, monospace`;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = scores[r][c];
      const x = 1 + c * cell;
      const y = 1 + r * cell;
      if (v === null) {
        ctx.fillStyle = COLORS.skipped;
        ctx.fillRect(x, y, cell, cell);
        continue;
      }
      const t = v / big; // -1..1
      const shade = Math.round(255 * (1 - Math.abs(t) * 0.75));
      ctx.fillStyle = t >= 0 ? `rgb(255, ${shade}, ${shade})` : `rgb(${shade}, ${shade}, 255)`;
      ctx.fillRect(x, y, cell, cell);
      if (cell >= 30) {
        ctx.fillStyle = COLORS.text;
        ctx.fillText(v.toFixed(1), x + cell / 2, y + cell / 2);
      }
    }
  }
  ctx.strokeStyle = COLORS.muted;
  ctx.strokeRect(0.5, 0.5, cols * cell + 1, rows * cell + 1);
  caption.textContent = `S(${tile.i}, ${tile.j}): query ${rowsText(tile.rows)} × keys ${tile.cols[0]}–${tile.cols[1] - 1}` +
    ` (red positive, blue negative, grey masked).`;
}

function drawCounters(f, p) {
  const res = view.result;
  const closed = res.closed_form.accesses;
  const accesses = f.reads + f.writes;
  $("c-reads").textContent = fmt(f.reads);
  $("c-writes").textContent = fmt(f.writes);
  $("c-accesses").textContent = fmt(accesses);
  $("c-closed").textContent = fmt(closed);
  $("c-closed-reads").textContent = fmt(res.closed_form.reads);
  $("c-closed-writes").textContent = fmt(res.closed_form.writes);
  $("c-standard").textContent = fmt(res.closed_form.standard_accesses);
  const check = $("c-check");
  const atEnd = view.pos === view.steps.length;
  check.dataset.equal = String(atEnd && accesses === closed &&
    f.reads === res.closed_form.reads && f.writes === res.closed_form.writes);
  check.dataset.atEnd = String(atEnd);
  if (!atEnd) {
    check.textContent = `${(100 * accesses / closed).toFixed(1)}% of the closed form so far; it must land exactly on it at the last step.`;
    check.className = "check pending";
  } else if (accesses === closed) {
    check.textContent = `✓ Counted reads + writes equal the closed form: ${res.closed_form.formula}.`;
    check.className = "check ok";
  } else {
    check.textContent = `✗ Counted ${fmt(accesses)} but the closed form says ${fmt(closed)}.`;
    check.className = "check bad";
  }
  $("meter-hbm").firstElementChild.style.width = `${Math.min(100, (100 * accesses) / closed)}%`;

  // SRAM: the blocks now held, plus the score tile while one is being worked on.
  let held = 0;
  for (const r of f.resident.values()) held += r.elems;
  const tileElems = f.current && f.current.op === "tile" && !f.ended ? p.br * p.bc : 0;
  const total = held + tileElems;
  const scale = Math.max(p.sram, total);
  const meter = $("meter-sram");
  meter.querySelector(".blocks").style.width = `${(100 * held) / scale}%`;
  meter.querySelector(".stile").style.width = `${(100 * tileElems) / scale}%`;
  meter.classList.toggle("over", total > p.sram);
  meter.setAttribute("aria-valuemax", String(p.sram));
  meter.setAttribute("aria-valuenow", String(total));
  $("sram-text").textContent = `${fmt(held)} elements of blocks` +
    (tileElems ? ` + ${fmt(tileElems)} of the score tile (Br×Bc)` : "") +
    ` = ${fmt(total)} of M = ${fmt(p.sram)}` +
    (total > p.sram ? " — over M: the paper's rule sizes only the Q, K, V, O blocks to fit; the score tile and statistics live in registers on a GPU." : ".");
  const list = $("resident");
  list.replaceChildren(...[...f.resident.entries()]
    .sort(([a], [b]) => TENSOR_ORDER.indexOf(a) - TENSOR_ORDER.indexOf(b))
    .map(([t, r]) => {
      const li = document.createElement("li");
      li.textContent = `${t === "l" ? "ℓ" : t} block ${r.block} (${rowsText(r.rows)}): ${fmt(r.elems)}`;
      return li;
    }));
}

function drawStats(f, p) {
  const body = $("stats-body");
  if (body.childElementCount !== p.n) {
    const rows = [];
    for (let r = 0; r < p.n; r++) {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = String(r);
      tr.append(th, document.createElement("td"), document.createElement("td"));
      rows.push(tr);
    }
    body.replaceChildren(...rows);
  }
  const num = (x) => (x === undefined ? "" : x === null ? "−∞" : Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : x.toFixed(3));
  let firstUpdated = null;
  for (let r = 0; r < p.n; r++) {
    const tr = body.children[r];
    tr.children[1].textContent = num(f.m[r]);
    tr.children[2].textContent = num(f.l[r]);
    const hot = f.updated && r >= f.updated[0] && r < f.updated[1];
    tr.classList.toggle("hot", Boolean(hot));
    if (hot && firstUpdated === null) firstUpdated = tr;
  }
  if (firstUpdated && !view.playing) {
    const box = firstUpdated.closest(".stats-scroll");
    const top = firstUpdated.offsetTop - box.clientHeight / 3;
    box.scrollTop = Math.max(0, top);
  }
  const note = $("stats-note");
  note.hidden = p.mode !== "backward";
  note.textContent = "The backward pass carries no running (m, ℓ): it recomputes P from the saved lse and reads D = rowsum(dO∘O), so this table stays empty.";
}

function render() {
  if (!view.result) return;
  const p = view.result.params;
  const f = foldTo(view.pos);
  $("pos-step").textContent = String(view.pos);
  $("pos-total").textContent = String(view.steps.length);
  $("scrub").value = String(view.pos);
  $("event-text").textContent = describe(view.pos ? view.steps[view.pos - 1] : null, p);
  drawHBM(f, p);
  drawTileMap(f, p);
  drawTile(f);
  drawCounters(f, p);
  drawStats(f, p);
  $("b-prev").disabled = view.pos === 0;
  $("b-start").disabled = view.pos === 0;
  $("b-next").disabled = view.pos === view.steps.length;
  $("b-end").disabled = view.pos === view.steps.length;
  $("b-play").disabled = view.steps.length === 0;
  $("scrub").disabled = view.steps.length === 0;
}

// ---- controls -----------------------------------------------------------------------------

function goTo(pos) {
  view.pos = Math.max(0, Math.min(view.steps.length, pos));
  if (view.pos === view.steps.length) setPlaying(false);
  render();
}

function setPlaying(on) {
  view.playing = on && view.steps.length > 0;
  clearInterval(view.timer);
  view.timer = null;
  const button = $("b-play");
  button.textContent = view.playing ? "Pause" : "Play";
  button.setAttribute("aria-label", view.playing ? "Pause" : "Play");
  button.setAttribute("aria-pressed", String(view.playing));
  $("event-text").setAttribute("aria-live", view.playing ? "off" : "polite");
  if (view.playing) {
    if (view.pos === view.steps.length) view.pos = 0;
    const perSecond = Number($("speed").value);
    view.timer = setInterval(() => goTo(view.pos + 1), 1000 / perSecond);
  }
}

function wireControls() {
  $("b-start").addEventListener("click", () => { setPlaying(false); goTo(0); });
  $("b-prev").addEventListener("click", () => { setPlaying(false); goTo(view.pos - 1); });
  $("b-next").addEventListener("click", () => { setPlaying(false); goTo(view.pos + 1); });
  $("b-end").addEventListener("click", () => { setPlaying(false); goTo(view.steps.length); });
  $("b-play").addEventListener("click", () => setPlaying(!view.playing));
  $("speed").addEventListener("input", () => {
    $("speed-val").textContent = $("speed").value;
    if (view.playing) setPlaying(true);
  });
  $("scrub").addEventListener("input", () => { setPlaying(false); goTo(Number($("scrub").value)); });
  document.addEventListener("keydown", (ev) => {
    const tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (!view.result) return;
    if (ev.key === "ArrowRight") { setPlaying(false); goTo(view.pos + 1); }
    else if (ev.key === "ArrowLeft") { setPlaying(false); goTo(view.pos - 1); }
    else if (ev.key === "Home") { setPlaying(false); goTo(0); }
    else if (ev.key === "End") { setPlaying(false); goTo(view.steps.length); }
    else if (ev.key === " " || ev.code === "Space") {
      if (tag === "BUTTON") return; // the focused button handles its own activation
      setPlaying(!view.playing);
    } else return;
    ev.preventDefault();
  });
}

// ---- parameters and Python ------------------------------------------------------------------

function setStatus(state, text) {
  const s = $("viz-status");
  s.dataset.status = state;
  s.textContent = text;
}

function readParams() {
  const form = $("viz-params");
  return {
    n: Number(form.n.value),
    d: Number(form.d.value),
    sram: Number(form.sram.value),
    causal: form.causal.checked,
    loop_order: form.order.value,
    mode: form.mode.value,
  };
}

function fillSelect(select, values, wanted) {
  select.replaceChildren(...values.map((v) => {
    const o = document.createElement("option");
    o.value = String(v);
    o.textContent = String(v);
    return o;
  }));
  const pick = values.includes(wanted) ? wanted : values[0];
  select.value = String(pick);
}

function tensorsOf(steps) {
  const seen = new Set();
  for (const s of steps) {
    if (s.op === "load" || s.op === "store") seen.add(s.tensor);
    if (s.op === "group") {
      for (const t of Object.keys(s.moved)) seen.add(t);
    }
  }
  return TENSOR_ORDER.filter((t) => seen.has(t));
}

async function updatePlan(rt) {
  const { n, d, sram, mode } = readParams();
  const form = $("viz-params");
  for (const r of form.querySelectorAll('input[name="order"]')) r.disabled = mode === "backward";
  try {
    const plan = await rt.call("viz.plan", { n, d, sram }, { timeoutMs: 20000 });
    const text = `Br = min(⌈M/4d⌉, d) = ${plan.br}, Bc = ⌈M/4d⌉ = ${plan.bc} → Tr × Tc = ${plan.t_r} × ${plan.t_c} = ${plan.tiles} tiles` +
      (mode === "backward" ? " (the backward pass runs K/V outer)" : "");
    $("plan").textContent = plan.ok ? text : `${text}. ${plan.reason}.`;
    $("plan").classList.toggle("bad", !plan.ok);
    $("run").disabled = !plan.ok;
    return plan.ok;
  } catch (err) {
    $("plan").textContent = `Cannot plan: ${err.message}`;
    $("run").disabled = true;
    return false;
  }
}

async function runTrace(rt) {
  setPlaying(false);
  const params = readParams();
  setStatus("running", "Running the kernel with trace=[] …");
  $("run").disabled = true;
  try {
    const t0 = performance.now();
    const res = await rt.call("viz.trace", params, { timeoutMs: 60000 });
    view.result = res;
    view.steps = res.steps;
    view.tensors = tensorsOf(res.steps);
    view.pos = 0;
    $("scrub").max = String(res.steps.length);
    $("stats-body").replaceChildren();
    const ms = Math.round(performance.now() - t0);
    setStatus("ready", `Trace ready: ${fmt(res.events)} events` +
      (res.grouped ? `, shown as ${fmt(res.steps.length)} steps (one per outer-loop iteration; counters stay exact)` : "") +
      ` — ${ms} ms. Blocks Br=${res.params.br}, Bc=${res.params.bc}.`);
    document.body.dataset.grouped = String(res.grouped);
    const url = new URL(window.location.href);
    url.searchParams.set("n", params.n);
    url.searchParams.set("d", params.d);
    url.searchParams.set("m", params.sram);
    url.searchParams.set("order", params.loop_order);
    url.searchParams.set("mode", params.mode);
    if (params.causal) url.searchParams.set("causal", "1"); else url.searchParams.delete("causal");
    history.replaceState(null, "", url);
    render();
  } catch (err) {
    setStatus("error", `The trace could not be computed: ${err.message}`);
  } finally {
    $("run").disabled = false;
  }
}

// ---- the closed form beside hardware counters --------------------------------------------

async function showMeasured() {
  const box = document.querySelector('[data-testid="viz-measured"]');
  const body = $("viz-measured-body");
  const note = $("viz-measured-note");
  const got = await loadH200();
  if (!got.figure2) {
    box.dataset.status = got.missing ? "not-recorded" : "error";
    note.textContent = got.missing ? "Not recorded in this build (bench/io_h200.py on a GPU writes it)." : got.error;
    return;
  }
  const labels = {baseline: "standard, PyTorch ops", triton: "tiled, fused (Triton)"};
  for (const [impl, label] of Object.entries(labels)) {
    const r = got.figure2[impl];
    const tr = document.createElement("tr");
    for (const text of [label, gb(r.hbm_bytes), gb(modelBytes(r))]) {
      const cell = document.createElement(tr.children.length ? "td" : "th");
      if (!tr.children.length) cell.scope = "row";
      cell.textContent = text;
      tr.appendChild(cell);
    }
    body.appendChild(tr);
  }
  const t = got.figure2.triton;
  note.textContent = `With M = the ${Math.round((got.record.environment.l2_bytes || 0) / 2 ** 20)} MiB L2 cache in ` +
    `place of the SRAM, the model gives ${gb(t.model_bytes.flash_l2)} GB for the fused kernel: a head's K and V stay ` +
    `in the L2 while its query blocks run, so most re-reads the SRAM's tiles would cost never reach HBM. ` +
    `Details: the performance page, section 6.`;
  box.dataset.status = "recorded";
}

async function main() {
  showMeasured().catch((err) => {
    const box = document.querySelector('[data-testid="viz-measured"]');
    box.dataset.status = "error";
    $("viz-measured-note").textContent = `The H200 record could not be shown: ${err.message}`;
  });
  wireControls();
  const rt = getRuntime();
  rt.onProgress((ev) => {
    if ($("viz-status").dataset.status === "loading" && ev && ev.message) setStatus("loading", `Starting Python: ${ev.message}`);
  });
  try {
    await rt.ready;
  } catch (err) {
    setStatus("error", `Python (Pyodide) is unavailable, so there is no trace to draw: ${err.message}`);
    return;
  }
  const opts = await rt.call("viz.options", {}, { timeoutMs: 20000 });
  const q = new URLSearchParams(window.location.search);
  const num = (key, fallback) => (q.has(key) ? Number(q.get(key)) : fallback);
  const form = $("viz-params");
  fillSelect(form.n, opts.n, num("n", 48));
  fillSelect(form.d, opts.d, num("d", 4));
  fillSelect(form.sram, opts.sram, num("m", 128));
  form.causal.checked = q.get("causal") === "1";
  const order = q.get("order") === "q_outer" ? "q_outer" : "kv_outer";
  form.querySelector(`input[name="order"][value="${order}"]`).checked = true;
  const mode = q.get("mode") === "backward" && opts.backward_trace ? "backward" : "forward";
  form.querySelector(`input[name="mode"][value="${mode}"]`).checked = true;
  if (!opts.backward_trace) {
    const b = form.querySelector('input[name="mode"][value="backward"]');
    b.disabled = true;
    b.parentElement.title = "This build's flash_np.backward emits no trace.";
  }
  form.addEventListener("change", () => updatePlan(rt));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (await updatePlan(rt)) runTrace(rt);
  });
  if (await updatePlan(rt)) await runTrace(rt);
  else setStatus("error", "These parameters are too large to step through; pick a larger M or a smaller N.");
}

// ?view=ring shows the ring view instead (js/ring-viz.js); this module then stays idle.
if (new URLSearchParams(window.location.search).get("view") !== "ring") {
  main().catch((err) => setStatus("error", `The visualizer failed to start: ${err.message}`));
}
