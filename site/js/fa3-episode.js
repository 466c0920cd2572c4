/* Episode 5 (FlashAttention-3 on Hopper): the ablation table, the timeline figure, the standing
 * against cuDNN and the Nsight Compute sentence, all drawn from the H200 records that build.py
 * copies into the site — bench/results/fa3_h200.json (the ablations), triton_h200.json (the
 * default variant against cuDNN, one run), fa3_h200_variants.json (the candidates each shape's
 * variant was chosen from) and fa3_ncu.json (hardware counters). Nothing here is typed from a
 * result; the only constants are the published rates named below and the kernel's warpgroup
 * height. The figure's lanes are a schematic (labelled so on the page): their period is
 * measured, the lengths inside it modelled from the two published rates. */

import { el } from "./dom.js";
import { NCU_METRICS, NCU_RECORD, ncuLabel, ncuShape } from "./fa3-ncu.js";

const RECORDS = {
  ablation: "bench/results/fa3_h200.json",
  standing: "bench/results/triton_h200.json",
  variants: "bench/results/fa3_h200_variants.json",
  recheck: "bench/results/fa3_recheck_h200.json",
  ncu: NCU_RECORD,
};
// FlashAttention-3's special-function rate (claim fa3-exp-throughput): 16 exponentials per SM
// per clock at 1830 MHz, the H100 SXM5's clock in the paper's footnote (same SMs as the H200).
const EXP_PER_SM_PER_S = 16 * 1830e6;
const WG_ROWS = 64; // query rows per consumer warpgroup (wgmma's M); a work item has one per consumer
// [record key, table heading, figure label]
const VARIANTS = [
  ["none", "none of the three (FlashAttention-2's loop on wgmma + TMA)", "none (FA2's loop)"],
  ["no_warp_spec", "no warp specialisation (overlap on)", "no warp spec."],
  ["no_overlap", "no intra-warpgroup overlap", "no overlap"],
  ["no_pingpong", "no ping-pong", "no ping-pong"],
  ["full", "all three", "all three"],
  ["mbarrier", "all three, mbarriers", "mbarrier hand-overs"],
  ["named", "all three, named barriers", "named hand-overs"],
  ["cudnn", "cuDNN (SDPA)", "cuDNN"],
];
const SVG = "http://www.w3.org/2000/svg";

async function readJson(path) {
  const resp = await fetch(path, { cache: "no-cache" });
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const tf = (row, name) => row.fwd[name] && row.fwd[name].tflops;
const causalText = (row) => (row.causal ? "yes" : "no");

function ablationTable(rec) {
  const head = el("tr", {}, el("th", { text: "d" }), el("th", { text: "N" }), el("th", { text: "causal" }),
    ...VARIANTS.map(([name, label]) => el("th", { text: label, "data-variant": name })));
  const body = rec.rows.map((row) => {
    const best = Math.max(...VARIANTS.filter(([n]) => n !== "cudnn").map(([n]) => tf(row, n) || 0));
    return el("tr", {}, el("td", { text: String(row.d) }), el("td", { text: String(row.n) }),
      el("td", { text: causalText(row) }),
      ...VARIANTS.map(([name]) => {
        const v = tf(row, name);
        const text = v ? v.toFixed(0) : "–";
        return el("td", {}, v === best ? el("strong", { text }) : text);
      }));
  });
  const table = el("table", { class: "peaks fa3-table", "data-testid": "fa3-ablation-table" },
    el("caption", { text: `Forward TFLOP/s on an ${rec.env.gpu}, bf16, one run (${rec.env.date_utc}); every ` +
      "variant of ours passed the float64 check first (cuDNN's column is timed, not checked). Best of ours in " +
      "bold. Source: " + RECORDS.ablation }),
    el("thead", {}, head), el("tbody", {}, ...body));
  return el("div", { class: "table-scroll" }, table);  // js/scroll-box.js makes it keyboard-scrollable
}

// The full kernel's work item at a row, as the record names it: the row's variant or the record's variant
// table (consumers, block_n), or, in older records, the autotuned (BLOCK_N, STAGES) with two consumers.
function tileOf(rec, row) {
  if (row.variant) return { m: WG_ROWS * row.variant.consumers, n: row.variant.block_n };
  const mask = row.causal ? "True" : "False";
  const choice = Object.entries(rec.choices || {}).find(([k]) => k.startsWith(`d=${row.d} causal=${mask} `));
  if (choice) return { m: WG_ROWS * choice[1].consumers, n: choice[1].block_n };
  const key = `(${row.d}, 'torch.bfloat16', ${mask}, True, True, True, ${Math.floor(Math.log2(row.n)) + 1})`;
  const tuned = (rec.tuned || {})[key];
  if (tuned) return { m: 2 * WG_ROWS, n: tuned["config (BLOCK_N, STAGES)"][0] };
  throw new Error(`the record names no tile for d = ${row.d}, N = ${row.n}`);
}

// Per SM, microseconds per key tile of a work item, for one row of the record.
function perTile(row, tile, name, sms) {
  const tiles = row.batch * row.heads * Math.ceil(row.n / tile.m) * Math.ceil(row.n / tile.n);
  return (row.fwd[name].ms * 1e3 * sms) / tiles;
}

function timeline(rec, peakTflops, sms) {
  const row = rec.rows.find((r) => r.d === 128 && r.n === 16384 && !r.causal);
  const tile = tileOf(rec, row);
  const gemm = ((4 * tile.m * tile.n * row.d) / ((peakTflops * 1e12) / sms)) * 1e6; // QKᵀ and PV at peak
  const exps = ((tile.m * tile.n) / EXP_PER_SM_PER_S) * 1e6; // one exponential per score
  const bars = VARIANTS.filter(([name]) => row.fwd[name]).map(([name, , label]) => ({ name, label,
    us: perTile(row, tile, name, sms) }));
  document.getElementById("fa3-timeline-what").textContent = `One ${tile.m}×${tile.n} key tile per SM (the ` +
    `record's tile), d = ${row.d}, N = ${row.n}, ${rec.dtype}, on the ${rec.env.gpu}`;
  const W = 720, left = 150, right = 60, barH = 18, gap = 8;
  const longest = Math.max(...bars.map((b) => b.us));
  const x = (us) => left + ((W - left - right) * us) / longest;
  const lanesTop = bars.length * (barH + gap) + 40;
  const lane = 20;
  const H = lanesTop + 4 * (lane + 6) + 50;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img",
    "aria-label": "Time per key tile for each ablation, and the full kernel's warps over three tiles" });
  const defs = svg("defs");
  const pat = svg("pattern", { id: "fa3-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" });
  pat.append(svg("rect", { width: 6, height: 6, fill: "#f4c28a" }), svg("line", { x1: 0, y1: 0, x2: 0, y2: 6,
    stroke: "#b8651b", "stroke-width": 2 }));
  defs.append(pat);
  root.append(defs);
  bars.forEach((b, k) => {
    const y = 10 + k * (barH + gap);
    root.append(svg("text", { x: left - 8, y: y + barH - 5, "text-anchor": "end", "font-size": 12 }, b.label));
    root.append(svg("rect", { x: left, y, width: x(b.us) - left, height: barH, fill: "#dde6f3", stroke: "#7b8fb0" }));
    root.append(svg("rect", { x: left, y, width: x(gemm) - left, height: barH, fill: "#2f4f86" }));
    root.append(svg("rect", { x: x(gemm), y, width: x(Math.min(gemm + exps, b.us)) - x(gemm), height: barH,
      fill: "url(#fa3-hatch)" }));
    root.append(svg("text", { x: x(b.us) + 4, y: y + barH - 5, "font-size": 12 }, `${b.us.toFixed(2)} µs`));
  });
  const full = bars.find((b) => b.name === "full").us;
  root.append(svg("text", { x: left, y: lanesTop - 12, "font-size": 12, "font-weight": 700 },
    `Schematic: the full kernel's warps over three tiles (period ${full.toFixed(2)} µs, measured)`));
  const xs = (us) => left + ((W - left - right) * us) / (3 * full);
  const lanes = [["producer warp", []], ["consumer warpgroup 0", []], ["consumer warpgroup 1", []], ["tensor cores", []]];
  for (let j = 0; j < 3; j++) {
    const t0 = j * full;
    lanes[0][1].push([t0, t0 + full * 0.04, "#7a7a7a", `copy K,V ${j + 2}`]);
    lanes[1][1].push([t0, t0 + gemm / 2, "#2f4f86", "QKᵀ+PV"], [t0 + gemm / 2, t0 + gemm / 2 + exps / 2, "url(#fa3-hatch)", "exp"],
      [t0 + gemm / 2 + exps / 2, t0 + full, "#dde6f3", "softmax rest, wait"]);
    lanes[2][1].push([t0, t0 + gemm / 2, "#dde6f3", ""], [t0 + gemm / 2, t0 + gemm, "#2f4f86", "QKᵀ+PV"],
      [t0 + gemm, t0 + gemm + exps / 2, "url(#fa3-hatch)", "exp"], [t0 + gemm + exps / 2, t0 + full, "#dde6f3", ""]);
    lanes[3][1].push([t0, t0 + gemm, "#2f4f86", "busy"], [t0 + gemm, t0 + full, "#ffffff", "idle"]);
  }
  lanes.forEach(([name, segs], k) => {
    const y = lanesTop + k * (lane + 6);
    root.append(svg("text", { x: left - 8, y: y + lane - 6, "text-anchor": "end", "font-size": 12 }, name));
    for (const [a, b, fill, label] of segs) {
      root.append(svg("rect", { x: xs(a), y, width: Math.max(1, xs(b) - xs(a)), height: lane, fill, stroke: "#7b8fb0" }));
      if (label && xs(b) - xs(a) > 7 * label.length) {
        root.append(svg("text", { x: xs(a) + 3, y: y + lane - 6, "font-size": 10,
          fill: fill === "#2f4f86" ? "#ffffff" : "#222222" }, label));
      }
    }
  });
  root.append(svg("text", { x: left, y: H - 24, "font-size": 11, fill: "#555555" },
    `dark: QKᵀ and PV at the ${peakTflops} TFLOP/s dense peak, ${gemm.toFixed(2)} µs per tile;`));
  root.append(svg("text", { x: left, y: H - 8, "font-size": 11, fill: "#555555" },
    `hatched: ${tile.m}×${tile.n} exponentials at 16 per SM per clock, ${exps.toFixed(2)} µs; light: the rest of the measured time`));
  return root;
}

// The shape furthest behind cuDNN in the benchmark run, next to what the sweep read there minutes before
// (the candidates of the same shape, and the one chosen), and the re-measure where one exists.
function worstShape(bench, sweep, recheck) {
  const ratio = (row) => tf(row, "fa3") / tf(row, "cudnn");
  const worst = bench.results.reduce((a, b) => (ratio(b) < ratio(a) ? b : a));
  const prev = sweep.rows.find((r) => r.d === worst.d && r.n === worst.n && r.causal === worst.causal);
  const ratios = Object.entries(prev.fwd).filter(([n, r]) => n !== "cudnn" && r.tflops)
    .map(([, r]) => r.tflops / prev.fwd.cudnn.tflops);
  const others = bench.results.filter((r) => r !== worst);
  const portable = others.every((r) => tf(r, "triton") > tf(r, "flash")) && tf(worst, "triton") < tf(worst, "flash")
    ? `; in the same run our portable Triton kernel, ahead of PyTorch's flash kernel at every other shape, fell ` +
      `behind it there (${tf(worst, "triton").toFixed(0)} against ${tf(worst, "flash").toFixed(0)} TFLOP/s)`
    : "";
  const again = recheck && recheck.rows.find((r) => r.d === worst.d && r.n === worst.n && r.causal === worst.causal);
  const remeasured = again
    ? ` Measured again later (${recheck.env.date_utc}, ${recheck.rounds} alternating rounds with the clock warmed, ` +
      `${RECORDS.recheck}) it read ${again.fa3_vs_cudnn.toFixed(2)}× (our portable kernel ` +
      `${again.tflops.triton.toFixed(0)} TFLOP/s).`
    : "";
  const chosen = fastest(prev)[1].tflops / prev.fwd.cudnn.tflops;
  return `The furthest behind is ${shapeText(worst)} at ${ratio(worst).toFixed(2)}×; in the sweep minutes ` +
    `earlier (${sweep.env.date_utc}) its ${ratios.length} candidates read ${Math.min(...ratios).toFixed(2)}–` +
    `${Math.max(...ratios).toFixed(2)}× cuDNN and the chosen one ${chosen.toFixed(2)}×${portable}.${remeasured}`;
}

function standing(rec) {
  // The fa3 column of the benchmark record: flash_fa3.choose's variant per shape, against cuDNN.
  const rows = rec.results;
  const ratio = (row) => tf(row, "fa3") / tf(row, "cudnn");
  const parts = [];
  for (const d of [64, 128]) {
    for (const causal of [false, true]) {
      const sel = rows.filter((r) => r.d === d && r.causal === causal).sort((a, b) => a.n - b.n);
      parts.push(`d = ${d}${causal ? ", causal" : ""}: ` + sel.map((r) => `${ratio(r).toFixed(2)}×`).join(", "));
    }
  }
  const met = rows.filter((r) => ratio(r) >= 1).length;
  const top = rows.find((r) => r.d === 128 && r.n === 16384 && !r.causal);
  const ns = [...new Set(rows.map((r) => r.n))].sort((a, b) => a - b).join(", ");
  return `Against cuDNN in one run (${rec.env.gpu}, ${rec.env.date_utc}), at N = ${ns}: ${parts.join("; ")} ` +
    `— at or above cuDNN on ${met} of ${rows.length} shapes. At d = 128, N = 16384 our forward runs at ` +
    `${tf(top, "fa3").toFixed(0)} TFLOP/s (cuDNN ${tf(top, "cudnn").toFixed(0)}).`;
}

// A candidate's name in bench/fa3_h200_variants.py, in words.
const PARTS = [["2wg", "two warpgroups"], ["3wg", "three warpgroups"], ["_nopp", "no ping-pong"],
  ["_item", "one program per item"], ["_bal", "longest first"], ["_snake", "snake order"], ["_kvf", "fused K/V barriers"],
  ["_n64", "64-key tiles"], ["_s3", "3-slot ring"], ["_q2", "two Q buffers"], ["_x", "cross-item overlap"],
  ["_nb", "named barriers"]];
// Variant fields the kernel no longer has (bench/fa3_h200_variants.py's WITHDRAWN, with the reason):
// a recorded candidate that uses one is never the chosen one, as in the Python rule.
const WITHDRAWN = ["cross"];
const describe = (name) => PARTS.filter(([p]) => name.includes(p)).map(([, words]) => words).join(", ");
const shapeText = (r) => `d = ${r.d}, N = ${r.n}${r.causal ? ", causal" : ""}`;

// The sweep the per-shape variants were chosen from: for each shape, the fastest candidate that
// passed the float64 check, against the previous default and cuDNN (same run).
// A sweep row's chosen candidate, [name, entry]: the fastest that passed its check and uses no withdrawn field.
function fastest(row) {
  const ok = Object.entries(row.fwd).filter(([n, r]) => n !== "cudnn" && r.check && r.check.ok &&
    !WITHDRAWN.some((field) => r.variant && field in r.variant));
  return ok.reduce((a, b) => (b[1].ms < a[1].ms ? b : a));
}

function variantsTable(rec) {
  const x = (r, row) => `${(r.tflops / tf(row, "cudnn")).toFixed(2)}×`;
  const rows = rec.rows.filter((r) => !r.error).map((r) => {
    const [name, best] = fastest(r);
    return el("tr", {}, el("td", { text: shapeText(r) }), el("td", { text: x(r.fwd[r.old_default], r) }),
      el("td", { text: describe(name) }), el("td", { text: x(best, r) }));
  });
  const n = rec.rows.reduce((acc, r) => acc + Object.keys(r.fwd || {}).length - 1, 0);
  const head = el("tr", {}, ...["shape", "previous launch, × cuDNN", "chosen variant", "chosen, × cuDNN"].map((t) => el("th", { text: t })));
  const table = el("table", { class: "peaks fa3-table", "data-testid": "fa3-variants-table" },
    el("caption", { text: `The variant for each shape, chosen from ${n} checked candidates timed beside cuDNN in ` +
      `one run on an ${rec.env.gpu} (${rec.env.date_utc}); forward speed as a multiple of cuDNN's. ` +
      "The benchmark run below measures each chosen variant again, minutes later; where the two differ, " +
      `that is the spread between runs (bench/FA3.md). Source: ${RECORDS.variants}` }),
    el("thead", {}, head), el("tbody", {}, ...rows));
  return el("div", { class: "table-scroll" }, table);
}

// One clause per profiled shape: our kernel against cuDNN's, from the same ncu run, with the launch
// the sweep chose there (the profile ran flash_fa3.choose's variant).
function ncuSentence(rec, sweep, sms) {
  const { tensor: TENSOR, xu: XU, issue: ISSUE, barrier: BAR, time: TIME } = NCU_METRICS;
  const v = (kern, metric) => kern[metric].value;
  const pct = (kern, metric) => `${v(kern, metric).toFixed(0)}%`;
  const launch = (kern) => (kern.grid.replace(/[()\s]/g, "").split(",").reduce((a, b) => a * Number(b), 1) <= sms
    ? "one program per SM" : "one program per work item") + `, grid ${kern.grid}`;
  const clauses = rec.kernels.filter((k) => k.label.startsWith("fa3 ")).map((ours) => {
    const s = ncuShape(ours.label);
    const theirs = rec.kernels.find((k) => k.label === `cudnn ${ncuLabel(s)}`);
    const row = sweep.rows.find((r) => r.d === s.d && r.n === s.n && r.causal === s.causal);
    const variant = row ? ` (${describe(fastest(row)[0])}; ${launch(ours)}; cuDNN ${launch(theirs)})` : "";
    return `at ${shapeText(s)} ours${variant} takes ${(v(ours, TIME) / 1e3).toFixed(0)} µs and cuDNN ` +
      `${(v(theirs, TIME) / 1e3).toFixed(0)} µs; the XU pipe (special functions such as exp2, and conversions) ` +
      `issues at ${pct(ours, XU)} of its peak rate and the tensor pipe is active ${pct(ours, TENSOR)} of cycles ` +
      `(cuDNN: ${pct(theirs, XU)} and ${pct(theirs, TENSOR)}), but our warps issue in ${pct(ours, ISSUE)} of ` +
      `cycles (cuDNN's in ${pct(theirs, ISSUE)}) and ${(v(ours, BAR) / v(theirs, BAR)).toFixed(1)}× as many of ` +
      "them are stalled at a barrier per issued instruction";
  });
  return clauses.join("; ") + `. The profile does not say which barrier (${RECORDS.ncu}).`;
}

async function main() {
  const box = document.getElementById("fa3-ablation");
  if (!box) return;
  const peak = Number(box.dataset.peakTflops);
  const sms = Number(box.dataset.sms);
  const jobs = [
    [RECORDS.ablation, (rec) => {
      box.replaceChildren(ablationTable(rec));
      document.getElementById("fa3-timeline").replaceChildren(timeline(rec, peak, sms));
    }, [box, document.getElementById("fa3-timeline")]],
    [RECORDS.standing, async (rec) => {
      const sweep = await readJson(RECORDS.variants);
      const recheck = await readJson(RECORDS.recheck).catch(() => null);
      document.getElementById("fa3-standing").textContent = `${standing(rec)} ${worstShape(rec, sweep, recheck)}`;
    }, [document.getElementById("fa3-standing")]],
    [RECORDS.variants, (rec) => { document.getElementById("fa3-variants").replaceChildren(variantsTable(rec)); },
      [document.getElementById("fa3-variants")]],
    [RECORDS.ncu, async (rec) => {
      document.getElementById("fa3-ncu").textContent = ncuSentence(rec, await readJson(RECORDS.variants), sms);
    },
      [document.getElementById("fa3-ncu")]],
  ];
  await Promise.all(jobs.map(async ([path, draw, targets]) => {
    try {
      await draw(await readJson(path));
      targets.forEach((t) => { t.dataset.state = "ready"; });
    } catch (err) {
      targets.forEach((t) => {
        t.textContent = `(The H200 record ${path} could not be read: ${err.message}.)`;
        t.dataset.state = "error";
      });
    }
  }));
}

main();
