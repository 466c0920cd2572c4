/* Folding the kernel's trace into a picture: which blocks are in SRAM, which score tiles were
 * visited or skipped, the rows' running (m, ℓ), the running HBM counters, the loads per row.
 *
 * The events come from nlpcore.kernels.flash_np (schema: py/nlpcore/kernels/trace.py); grouped
 * steps (one per outer-loop iteration, for big traces) from py/nlpcore/web/viz.py
 * (_group_steps). This module only replays them; it never re-computes the algorithm.
 */

export const TENSOR_ORDER = ["Q", "K", "V", "O", "dO", "dQ", "dK", "dV", "l", "m", "lse", "D"];

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

/* The picture after the first `pos` steps of `steps` (params `p` from viz.trace). */
export function foldTo(steps, pos, p) {
  const f = emptyFold(p);
  for (let k = 0; k < pos; k++) {
    const step = steps[k];
    f.groupTiles = [];
    if (step.op === "group") applyGroup(f, step, p);
    else applyEvent(f, step, p);
    f.last = step;
  }
  return f;
}

/* The tensors a trace moves, in TENSOR_ORDER (drawn left to right). */
export function tensorsOf(steps) {
  const seen = new Set();
  for (const s of steps) {
    if (s.op === "load" || s.op === "store") seen.add(s.tensor);
    if (s.op === "group") {
      for (const t of Object.keys(s.moved)) seen.add(t);
    }
  }
  return TENSOR_ORDER.filter((t) => seen.has(t));
}
