/* "Time your own GPU" on the performance page: the recorded benchmark's two shaders, run on this
 * browser's WebGPU adapter, beside the H200 record.
 *
 * Python (nlpcore.web.gpubench, in the page's worker) builds the very dispatch specs that
 * bench/webgpu_attention.py times (d = 64, one head, float32, a fixed seed) and checks what the
 * GPU returns against the float64 reference; this module only dispatches and times them, with
 * js/gpu.js: one warm-up dispatch (its outputs checked), then REPEATS timed dispatches, tiled
 * and naive interleaved, GPU timestamps when the adapter offers them, else wall time. Nothing is
 * typed here: sizes come from gpubench.options(), the H200 figures from its recorded JSON.
 *
 * Hooks: [data-testid=gpu-bench] has data-status = idle | running | done | error | no-webgpu;
 * each result row is [data-testid=gpu-bench-row] with data-n, data-valid, data-speedup.
 */

import {getRuntime} from "./runtime.js";
import {createPassTimer, destroyPassTimer, GpuUnavailable, openGpu, prepareSpec, release, copyOutputs,
        timeDispatch} from "./gpu.js";
import {cpuSummary, h200Summary} from "./gpu-records.js";
import {el} from "./dom.js";
import {flopRate, milliseconds, times} from "./perf/format.js";

const REPEATS = 5;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function measure(gpu, rt, n, setStatus) {
  const built = await rt.call("gpubench.specs", {n}, {timeoutMs: 120000});
  const kernels = built.kernels;
  const prepared = {};
  const timer = createPassTimer(gpu);
  const checks = {};
  try {
    for (const [name, spec] of Object.entries(kernels)) {
      setStatus(`N = ${n}: compiling and checking the ${name} shader…`);
      prepared[name] = await prepareSpec(gpu, spec, {explicitLayout: true});  // binding data: Uint8Array
      await timeDispatch(gpu, prepared[name], timer);  // warm-up; its outputs are checked
      const collect = await copyOutputs(gpu, prepared[name]);
      checks[name] = await rt.call("gpubench.check", {n, kernel: name, outputs: await collect()});
    }
    const times = {tiled: [], naive: []};
    for (let r = 0; r < REPEATS; r++) {
      setStatus(`N = ${n}: timing, repeat ${r + 1} of ${REPEATS}…`);
      for (const name of Object.keys(times)) {
        const {gpuMs, wallMs} = await timeDispatch(gpu, prepared[name], timer);
        times[name].push(gpuMs ?? wallMs);
      }
    }
    const ratios = times.naive.map((t, i) => t / times.tiled[i]);
    return {n, flops: built.flops, checks, tiledMs: median(times.tiled), naiveMs: median(times.naive),
            speedup: median(ratios), timing: timer ? "GPU timestamps" : "wall time"};
  } finally {
    for (const p of Object.values(prepared)) release(p);
    destroyPassTimer(timer);
  }
}

function h200At(h200, n, kernel) {
  if (!h200) return null;
  return h200.rows.find((r) => r.n === n && (r.heads || 1) === 1 && r.kernel === kernel && r.valid) || null;
}

/* The expectations beside the button, from the records (never typed): the H200's speed-ups
 * and the range the CPU adapters of section 2 reached. */
async function fillExpectations() {
  const [h200, cpus] = await Promise.all([h200Summary(), cpuSummary()]);
  const gpuText = document.getElementById("gpu-bench-expect-gpu");
  const cpuText = document.getElementById("gpu-bench-expect-cpu");
  if (h200 && gpuText && h200.speedup(2048) && h200.speedup(h200.bigN)) {
    gpuText.textContent = ` (on the H200: ${times(h200.speedup(2048))} at N = 2048, ${times(h200.speedup(h200.bigN))} ` +
        `at N = ${h200.bigN})`;
  }
  const ratios = (cpus || []).flatMap((c) => c.speedups.map((s) => s.naive_over_tiled)).filter(Number.isFinite);
  const sizes = (cpus || []).flatMap((c) => c.speedups.map((s) => s.n));
  if (ratios.length && cpuText) {
    cpuText.textContent = `it also wins, but by ${times(Math.min(...ratios))} to ${times(Math.max(...ratios))} ` +
        `from N = ${Math.min(...sizes)} to ${Math.max(...sizes)} in section 2's record: a factor that grows ` +
        "little with N, since a CPU has no HBM for the naive shader's scores to cross";
  }
}

export function mountGpuBench(root) {
  fillExpectations().catch((error) => console.warn(`gpu-bench expectations: ${error.message}`));
  const status = el("p", {class: "small", role: "status"}, "Press the button to time the two shaders on this browser's GPU.");
  const sizeBox = el("span", {class: "sizes"});
  const button = el("button", {type: "button", "data-testid": "gpu-bench-run"}, "Time my GPU");
  button.title = "Builds the shaders' inputs in Python (starts Pyodide on first use), then times them here";
  const table = el("table", {class: "results", hidden: ""});
  const body = el("tbody");
  table.append(el("thead", {}, el("tr", {}, ...["N", "tiled", "naive", "naive / tiled", "tiled rate",
      "outputs", "H200: naive / tiled", "H200: tiled rate"].map((h) => el("th", {scope: "col"}, h)))), body);
  const adapterLine = el("p", {class: "small"});
  root.append(el("div", {class: "controls"}, sizeBox, button), status, adapterLine, el("div", {class: "table-scroll"}, table));
  root.dataset.status = "idle";

  // Sizes are stamped into the page from gpubench.SIZES by the build (data-sizes); Python
  // starts only on the first run, so opening the page does not download the runtime.
  for (const n of (root.dataset.sizes || "").split(",").filter(Boolean).map(Number)) {
    const box = el("input", {type: "checkbox", value: String(n), "data-testid": `gpu-bench-n-${n}`});
    box.checked = n === 1024 || n === 2048;
    sizeBox.append(el("label", {class: "check"}, box, ` N = ${n}`));
  }
  let rt = null;
  const gpuPromise = openGpu({timestamps: true});
  gpuPromise.then((gpu) => {
    adapterLine.textContent = `Your adapter: ${gpu.name}; timing with ${gpu.timestamps ? "GPU timestamps" : "wall time (no timestamp-query)"}.`;
  }, (error) => {
    root.dataset.status = "no-webgpu";
    button.disabled = true;
    status.textContent = `Cannot time your GPU: ${error instanceof GpuUnavailable ? error.message : String(error)}.`;
  });

  button.addEventListener("click", async () => {
    const sizes = [...sizeBox.querySelectorAll("input:checked")].map((b) => Number(b.value));
    if (!sizes.length) {
      status.textContent = "Choose at least one N.";
      return;
    }
    button.disabled = true;
    root.dataset.status = "running";
    body.textContent = "";
    table.hidden = false;
    try {
      const [gpu, h200] = await Promise.all([gpuPromise, h200Summary()]);
      if (rt === null) {
        status.textContent = "Starting Python (Pyodide and NumPy, once per visit)…";
        rt = getRuntime();
      }
      await rt.ready;
      for (const n of sizes) {
        const r = await measure(gpu, rt, n, (text) => { status.textContent = text; });
        const valid = r.checks.tiled.valid && r.checks.naive.valid;
        const tiledH200 = h200At(h200, n, "tiled");
        const naiveH200 = h200At(h200, n, "naive");
        const tr = el("tr", {"data-testid": "gpu-bench-row", "data-n": String(n), "data-valid": String(valid),
                             "data-speedup": String(r.speedup)},
            ...[String(n), milliseconds(r.tiledMs), milliseconds(r.naiveMs), times(r.speedup),
                flopRate(r.flops / (r.tiledMs * 1e-3)),
                valid ? "match NumPy" : `WRONG (max |Δo| ${Math.max(r.checks.tiled.max_abs_err_o, r.checks.naive.max_abs_err_o).toExponential(2)})`,
                tiledH200 && naiveH200 ? times(naiveH200.ms / tiledH200.ms) : "not recorded",
                tiledH200 ? flopRate(tiledH200.tflops * 1e12) : "not recorded"].map((c) => el("td", {}, c)));
        body.append(tr);
      }
      root.dataset.status = "done";
      status.textContent = `Done: medians of ${REPEATS} dispatches after a warm-up, tiled and naive interleaved. ` +
          (h200 ? `H200 columns: the record of ${h200.recorded} (one head), the same shaders and inputs.` :
                  "The H200 record is not in this build.");
    } catch (error) {
      root.dataset.status = "error";
      status.textContent = `The run stopped: ${error.message}`;
    } finally {
      button.disabled = false;
    }
  });
}
