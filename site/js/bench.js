/* WebGPU benchmark harness for bench/page_bench.py: times one dispatch spec at a time.
 *
 * Built on js/gpu.js (the same runner as the lab's pages, same dispatch specs built in Python by
 * flash_wgsl_mirror.dispatch_spec), with what timing needs and a one-shot run does not: the
 * pipeline, buffers and bind group are made once per spec (gpu.js's prepareSpec), and every
 * timed dispatch is a single compute pass bracketed by GPU timestamp queries (when the adapter
 * offers "timestamp-query"). The device keeps WebGPU's default limits
 * (maxComputeWorkgroupStorageSize = 16384), as the lab's pages do.
 *
 * The driver (Playwright) calls, through page.evaluate:
 *   await window.labBench.ready                   -> {adapter, timestamps}  (rejects with a reason)
 *   const id = await window.labBench.prepare(spec) // binding data as base64 strings
 *   await window.labBench.dispatch(id)            -> {gpuMs (null without timestamps), wallMs}
 *   await window.labBench.outputs(id)             -> {name: base64 bytes} for output bindings
 *   window.labBench.release(id)
 */

import {base64ToBytes, bytesToBase64} from "./dom.js";
import {copyOutputs, createPassTimer, destroyPassTimer, openGpu, prepareSpec, release as releaseSpec,
        timeDispatch} from "./gpu.js";

const $ = (id) => document.getElementById(id);

function setStatus(status, text) {
  $("status").dataset.status = status;
  $("status").textContent = text;
}

const opened = openGpu({timestamps: true});
const prepared = new Map();
let nextId = 1;

async function prepare(spec) {
  const gpu = await opened;
  // Binding data arrives as base64 (page.evaluate carries JSON). Every binding is in the layout
  // (an "auto" one holds only those an entry point uses).
  const bindings = spec.bindings.map((b) => ({...b, data: b.data ? base64ToBytes(b.data) : null}));
  const ready = await prepareSpec(gpu, {...spec, bindings}, {explicitLayout: true});
  const id = nextId++;
  prepared.set(id, {spec, ready, timer: createPassTimer(gpu)});
  return id;
}

async function dispatch(id) {
  const gpu = await opened;
  const p = prepared.get(id);
  if (!p) throw new Error(`no prepared spec ${id}`);
  const {gpuMs, wallMs} = await timeDispatch(gpu, p.ready, p.timer);
  const row = document.createElement("tr");
  for (const text of [p.spec.shader, p.spec.meta ? p.spec.meta.n_q : "?", (gpuMs ?? wallMs).toFixed(2),
                      gpuMs === null ? "wall" : "timestamp-query"]) {
    const td = document.createElement("td");
    td.textContent = String(text);
    row.appendChild(td);
  }
  $("log").appendChild(row);
  return {gpuMs, wallMs};
}

async function outputs(id) {
  const gpu = await opened;
  const p = prepared.get(id);
  const collect = await copyOutputs(gpu, p.ready);
  const out = {};
  for (const [name, bytes] of Object.entries(await collect())) out[name] = bytesToBase64(bytes);
  return out;
}

function release(id) {
  const p = prepared.get(id);
  if (!p) return;
  releaseSpec(p.ready);
  destroyPassTimer(p.timer);
  prepared.delete(id);
}

const ready = opened.then((gpu) => {
  $("adapter").textContent = gpu.name;
  $("timestamps").textContent = gpu.timestamps ? "yes (timestamp-query)" : "no: wall time to onSubmittedWorkDone";
  setStatus("ready", "ready: waiting for bench/webgpu_attention.py --engines chromium");
  return {adapter: gpu.name, timestamps: gpu.timestamps};
}, (error) => {
  $("adapter").textContent = `none: ${error.message}`;
  setStatus("no-webgpu", `unavailable: ${error.message}`);
  throw error;
});
ready.catch(() => {});  // the reason is on the page; the driver reads it from ready itself

window.labBench = {ready, prepare, dispatch, outputs, release};
