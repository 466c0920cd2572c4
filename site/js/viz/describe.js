/* One sentence per trace step, for the visualizer's event line (and screen readers). */

const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));

export function rowsText(rows) {
  return rows[1] - rows[0] === 1 ? `row ${rows[0]}` : `rows ${rows[0]}–${rows[1] - 1}`;
}

export function describe(step, p) {
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
