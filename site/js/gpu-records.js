/* The recorded WebGPU benchmarks, summarised for pages that tell a learner what to expect.
 *
 * Numbers come only from bench/results/webgpu_h200.json (the WGSL shaders on an NVIDIA H200) and
 * bench/results/webgpu_attention.json (CPU adapters), copied into the built site by build.py; a
 * page never types them. Each function resolves to null when a record is missing.
 */

async function readJson(path) {
  try {
    const response = await fetch(path);
    return response.ok ? await response.json() : null;
  } catch (error) {
    return null;
  }
}

function speedup(engine, n, heads = 1) {
  const s = (engine.speedups || []).find((x) => x.n === n && (x.heads || 1) === heads);
  return s ? s.naive_over_tiled : null;
}

function tiledRow(engine, n, heads = 1) {
  return (engine.rows || []).find((r) => r.kernel === "tiled" && r.n === n && (r.heads || 1) === heads && r.valid) || null;
}

/* {adapter, recorded, speedups: {n: naive/tiled}, bigN, tflopsBig, peak, rows} or null. */
export async function h200Summary() {
  const record = await readJson("bench/results/webgpu_h200.json");
  const engine = record && (record.engines || []).find((e) => e.cpu_adapter === false && e.rows);
  if (!engine) return null;
  const big = Math.max(...engine.rows.map((r) => r.n));
  return {
    adapter: engine.adapter,
    recorded: record.recorded_at,
    peak: record.gpu_peak_fp32_tflops || null,
    speedup: (n) => speedup(engine, n),
    bigN: big,
    tflopsBig: (tiledRow(engine, big) || {}).tflops ?? null,
    rows: engine.rows,
  };
}

/* [{engine, adapter, speedup(n), speedups: [{n, naive_over_tiled}]}] for each CPU adapter of webgpu_attention.json, or null. */
export async function cpuSummary() {
  const record = await readJson("bench/results/webgpu_attention.json");
  if (!record) return null;
  return (record.engines || []).filter((e) => e.rows && e.rows.length)
      .map((e) => ({engine: e.engine, adapter: e.adapter, speedup: (n) => speedup(e, n),
                    speedups: (e.speedups || []).filter((s) => (s.heads || 1) === 1)}));
}

const fmt = (x, digits = 2) => (x === null || x === undefined ? "?" : Number(x).toPrecision(digits));

/* Fill `el` with what a learner should expect on a real GPU vs a CPU adapter. */
export async function fillExpectations(el) {
  const [gpu, cpu] = await Promise.all([h200Summary(), cpuSummary()]);
  if (!gpu) {
    el.textContent = "The H200 record (bench/results/webgpu_h200.json) is not in this build, so no GPU figures can be shown.";
    el.dataset.status = "not-recorded";
    return;
  }
  const cpus = (cpu || []).filter((c) => c.speedup(2048));
  const at = (n) => cpus.map((c) => `${fmt(c.speedup(n))}×`).join(" and ");
  el.textContent =
      `This comparison checks that the shader is right; it is not a speed test. On an ${gpu.adapter} the same ` +
      `tiled shader ran ${fmt(gpu.speedup(2048))}× faster than the naive one at N = 2048, ` +
      `${fmt(gpu.speedup(4096))}× at N = 4096 and ${fmt(gpu.speedup(gpu.bigN))}× at N = ${gpu.bigN} ` +
      `(one head, d = 64), reaching ${fmt(gpu.tflopsBig, 3)} TFLOP/s` +
      (gpu.peak ? ` (${fmt(100 * gpu.tflopsBig / gpu.peak)} % of its ${gpu.peak} TFLOP/s float32 peak)` : "") +
      `: the naive shader's N × N scores go through HBM, so its cost grows faster than the tiled one's. ` +
      (cpus.length ? `On CPU adapters (${cpus.map((c) => `${c.engine}: ${c.adapter}`).join("; ")}) there is no HBM; ` +
                     `the tiled shader still wins, by ${at(2048)} at N = 2048 and ${at(4096)} at N = 4096, ` +
                     `a factor that grows much less with N. ` : "") +
      `If your adapter above is a CPU (SwiftShader, llvmpipe/lavapipe, “Basic Render”), expect the latter.`;
  el.dataset.status = "recorded";
}
