/* The performance page's table of the kernel's tiers on the H200, per engine (Dawn, wgpu-py),
 * beside PyTorch SDPA: TFLOP/s at N = 16384, 16 heads, from bench/results/webgpu_h200.json, and
 * each as a fraction of the peak that bounds it (record.tier_peaks_tflops, which
 * bench/webgpu_tiers.py takes from nlpcore.hardware). The page types no number. */

const $ = (id) => document.getElementById(id);

function fmt(x, digits = 3) {
  return x === null || x === undefined ? "–" : Number(x).toPrecision(digits);
}

function cells(tr, values) {
  for (const value of values) {
    const td = document.createElement("td");
    td.textContent = value;
    tr.appendChild(td);
  }
}

export async function showTiers() {
  const box = document.querySelector("[data-testid=h200-tiers]");
  if (!box) return;
  let record = null;
  try {
    const response = await fetch("bench/results/webgpu_h200.json");
    record = response.ok ? await response.json() : null;
  } catch (error) {
    record = null;
  }
  const peaks = record && record.tier_peaks_tflops;
  if (!peaks) {
    box.dataset.status = "missing";
    $("h200-tiers-notes").textContent = "The H200 record of the tiers is not in this build.";
    return;
  }
  const body = $("h200-tiers-rows");
  body.textContent = "";
  const rows = [];
  for (const engine of record.engines.filter((e) => e.run === "tiers")) {
    for (const r of engine.rows) {
      if (r.n === 16384 && r.heads === 16 && r.valid) rows.push({...r, engine: engine.engine, peak: peaks[r.tier]});
    }
  }
  for (const s of record.sdpa || []) {
    if (s.n === 16384 && s.heads === 16) rows.push({...s, peak: peaks.sdpa});
  }
  for (const r of rows) {
    const tr = document.createElement("tr");
    cells(tr, [r.tier, r.engine, String(r.d), r.causal ? "causal" : "none", fmt(r.tflops),
               `${fmt(100 * r.tflops / r.peak, 2)} % of ${fmt(r.peak, 4)}`]);
    body.appendChild(tr);
  }
  const offered = record.engines.filter((e) => e.run === "tiers")
      .map((e) => `${e.engine}: ` + Object.entries(e.tiers_offered).map(([t, why]) => `${t} ${why}`).join(", "));
  $("h200-tiers-notes").textContent =
      `Peaks: ${peaks.source}. Tiers per engine: ${offered.join("; ")}. ` +
      `Recorded ${record.tiers ? record.tiers.recorded_at : "?"}; bench/README.md ("The kernel's tiers on the H200").`;
  $("h200-tiers-lesson").textContent = lesson(record, peaks, rows);
  box.dataset.status = "recorded";
}

/* Why tensor cores change the roofline and what int8 costs, in the record's numbers. */
function lesson(record, peaks, rows) {
  // the tiers' own rows: a variant's (the int8 tier's staged one) carry `variant`
  const acc = (tier, inputs) => (record.accuracy || []).filter((a) => a.tier === tier && a.inputs === inputs &&
      !a.variant && a.rel_l1 !== undefined);
  const worst = (list, key, pick) => list.length ? pick(...list.map((a) => a[key])) : null;
  const i8r = acc("int8", "random");
  const i8o = acc("int8", "outlier");
  const f32o = acc("portable", "outlier");
  const sdpa = rows.filter((r) => r.engine === "pytorch-sdpa");
  const best = (list) => list.length ? Math.max(...list.map((r) => r.tflops)) : null;
  const wgsl = rows.filter((r) => r.engine !== "pytorch-sdpa");
  return `Why tensor cores change the roofline: the H200's CUDA cores do ${fmt(peaks.portable)} TFLOP/s of float32, ` +
      `its tensor cores ${fmt(peaks.sdpa, 4)} of dense bf16/fp16, ${fmt(peaks.sdpa / peaks.portable, 3)} times more, so a ` +
      `kernel whose matrix products stay on CUDA cores is bounded far below what the same memory traffic allows; here the ` +
      `best WGSL tier reached ${fmt(best(wgsl))} TFLOP/s and SDPA ${fmt(best(sdpa), 4)}. WGSL reaches the tensor cores only ` +
      `through subgroup matrices (a 16 × 32 block of Q times a 32 × 16 block of Kᵀ per subgroup), offered on this GPU for ` +
      `int8 only; with P·V still float32 the int8 tier cannot pass ${fmt(peaks.int8)} TFLOP/s. What int8 costs: on random ` +
      `inputs, relative L1 error up to ${fmt(worst(i8r, "rel_l1", Math.max), 2)} and worst per-row cosine ` +
      `${fmt(worst(i8r, "cos_min", Math.min), 5)}; on outlier-channel inputs ${fmt(worst(i8o, "rel_l1", Math.max), 2)} and ` +
      `${fmt(worst(i8o, "cos_min", Math.min), 4)} (the float32 tier on those: ${fmt(worst(f32o, "rel_l1", Math.max), 2)}).`;
}

showTiers();
