/* Drawing the folded trace (js/viz/fold.js) into the visualizer's canvases and tables. */
import {TENSOR_ORDER} from "./fold.js";
import {rowsText} from "./describe.js";

const VECTOR_TENSORS = new Set(["l", "m", "lse", "D"]);
const COLORS = {
  bg: "#f4f6fa", grid: "#d5dbe6", text: "#1d2433", muted: "#5b6475",
  resident: "#2f6fd6", read: "rgba(47, 111, 214, 0.55)", write: "rgba(232, 123, 30, 0.7)",
  heat: [47, 111, 214], visited: "#a9c4ee", current: "#e87b1e", group: "#f2b27a", skipped: "#c9ccd3",
};

const $ = (id) => document.getElementById(id);
const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));

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

/* The HBM tensors as columns of rows, shaded by how often each row was read. */
export function drawHBM(f, p, tensors) {
  const canvas = $("hbm-canvas");
  const width = Math.min(560, canvas.parentElement.clientWidth - 24 || 560);
  const height = 360;
  const ctx = setupCanvas(canvas, width, height);
  ctx.clearRect(0, 0, width, height);
  const top = 22;
  const rowsH = height - top - 6;
  const rowH = rowsH / p.n;
  const gap = 8;
  const units = tensors.map((t) => (VECTOR_TENSORS.has(t) ? 1 : 4));
  const unitW = (width - gap * (tensors.length - 1)) / units.reduce((a, b) => a + b, 0);
  let x = 0;
  const maxLoads = Math.max(1, ...[...f.loadsPerRow.values()].map((c) => Math.max(...c)));
  tensors.forEach((t, k) => {
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
  canvas.setAttribute("aria-label", `HBM tensors ${tensors.join(", ")}; in SRAM: ${
    [...f.resident.entries()].map(([t, r]) => `${t} ${rowsText(r.rows)}`).join(", ") || "nothing"}`);
}

/* The Tr × Tc grid of score tiles: visited, skipped, the current one. */
export function drawTileMap(f, p) {
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

/* The current score tile's values as a heat map (when the trace kept them). */
export function drawTile(f) {
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

/* The HBM counters against io_model's closed form, and the SRAM meter. `atEnd`: the last step is shown. */
export function drawCounters(f, p, res, atEnd) {
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
  showMoreThanStandard(res);

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
    ` = ${fmt(total)} of M = ${fmt(p.sram)}` + (total > p.sram ? overM(f, p, total) : ".");
  const list = $("resident");
  list.replaceChildren(...[...f.resident.entries()]
    .sort(([a], [b]) => TENSOR_ORDER.indexOf(a) - TENSOR_ORDER.indexOf(b))
    .map(([t, r]) => {
      const li = document.createElement("li");
      li.textContent = `${t === "l" ? "ℓ" : t} block ${r.block} (${rowsText(r.rows)}): ${fmt(r.elems)}`;
      return li;
    }));
}

/* Why the SRAM bar may pass M: Algorithm 1 budgets only the four matrix blocks. */
function overM(f, p, total) {
  let matrices = 0;
  const names = [];
  for (const [tensor, r] of f.resident) {
    if (VECTOR_TENSORS.has(tensor)) continue;
    matrices += r.elems;
    names.push(tensor);
  }
  return ` — over M by ${fmt(total - p.sram)}, and that is expected: Algorithm 1 picks ` +
    `Bc = ⌈M/4d⌉ = ${p.bc} and Br = min(Bc, d) = ${p.br} so that the matrix blocks ` +
    `(${names.join(", ")}: ${fmt(matrices)} elements here) take at most 4·Bc·d = ${fmt(4 * p.bc * p.d)}, about M; ` +
    "it does not count the Br × Bc score tile " +
    "or the per-row m and ℓ, which a GPU kernel keeps in registers, not in shared memory.";
}

/* Tiling is no free lunch: when the tiled kernel's closed form moves more than standard
 * attention's (small M next to d^2), the page says so and why, from the trace's own numbers. */
function showMoreThanStandard(res) {
  const box = $("more-than-standard");
  const flash = res.closed_form.accesses;
  const standard = res.closed_form.standard_accesses;
  const p = res.params;
  box.hidden = !(flash > standard);
  if (box.hidden) return;
  const outer = res.params.mode === "backward" || p.loop_order !== "q_outer" ? "Q and O are" : "K and V are";
  box.textContent = `Here tiling moves more than standard attention: ${fmt(flash)} against ` +
      `${fmt(standard)} elements (${(flash / standard).toFixed(2)}×). With M = ${fmt(p.sram)} and ` +
      `d = ${p.d}, the blocks hold only Br = ${p.br}, Bc = ${p.bc} rows, so ${outer} re-read once ` +
      `per outer block; Theorem 2's N²d²/M is small next to standard attention's N² only when ` +
      `d²/M is well below 1, and here d²/M = ${(p.d * p.d / p.sram).toFixed(2)}.`;
}

/* The rows' running (m, ℓ), the rows the last step changed highlighted (and scrolled to unless playing). */
export function drawStats(f, p, playing) {
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
  if (firstUpdated && !playing) {
    const box = firstUpdated.closest(".stats-scroll");
    const top = firstUpdated.offsetTop - box.clientHeight / 3;
    box.scrollTop = Math.max(0, top);
  }
  const note = $("stats-note");
  note.hidden = p.mode !== "backward";
  note.textContent = "The backward pass carries no running (m, ℓ): it recomputes P from the saved lse and reads D = rowsum(dO∘O), so this table stays empty.";
}
