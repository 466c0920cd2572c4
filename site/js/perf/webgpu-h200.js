/* Performance page, section 2b. The same WGSL on an NVIDIA H200 (wgpu on Vulkan).
 *
 * Draws bench/results/webgpu_h200.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {COLORS, draw, guideLine, powerOfTwoTicks, lineSet, logLogConfig, speedupConfig} from "./charts.js";
import {$, fmt, bytes, row} from "./format.js";

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
  const perHead = heads.map((h, i) => ({label: `${h} head${h > 1 ? "s" : ""}`,
                                       data: sizes.map((n) => speed[`${h}/${n}`] ?? null),
                                       backgroundColor: i === 0 ? COLORS.tiled : COLORS.target}));
  draw("chart-h200-speedup", speedupConfig(sizes, [...perHead, guideLine("parity (1×)", 1, COLORS.guide, sizes)],
                                           {type: "logarithmic", title: {display: true, text: "naive time / tiled time (log)"}}));
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

export default {key: "webgpu_h200", path: "bench/results/webgpu_h200.json", label: "WebGPU on the H200", section: "webgpu-h200", show: showWebgpuH200};
