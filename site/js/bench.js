/* WebGPU benchmark harness for bench/page_bench.py: times one dispatch spec at a time.
 *
 * Same dispatch specs as js/gpu.js runs (built in Python by flash_wgsl_mirror.dispatch_spec),
 * but with what timing needs and a one-shot runner does not: the pipeline, buffers and bind
 * group are made once per spec, and every timed dispatch is a single compute pass bracketed by
 * GPU timestamp queries (when the adapter offers "timestamp-query"). The device otherwise keeps
 * WebGPU's default limits (maxComputeWorkgroupStorageSize = 16384), as the lab's pages do.
 *
 * The driver (Playwright) calls, through page.evaluate:
 *   await window.labBench.ready                   -> {adapter, timestamps}  (rejects with a reason)
 *   const id = await window.labBench.prepare(spec) // binding data as base64 strings
 *   await window.labBench.dispatch(id)            -> {gpuMs (null without timestamps), wallMs}
 *   await window.labBench.outputs(id)             -> {name: base64 bytes} for output bindings
 *   window.labBench.release(id)
 */

const USAGE = {
  "uniform": () => GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
  "read-only-storage": () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
  "storage": () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
};
const SHADER_NAME = /^[A-Za-z0-9_-]+\.wgsl$/;
const $ = (id) => document.getElementById(id);

function setStatus(status, text) {
  $("status").dataset.status = status;
  $("status").textContent = text;
}

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function toBase64(bytes) {
  let raw = "";
  const chunk = 0x8000;  // String.fromCharCode takes a bounded number of arguments
  for (let i = 0; i < bytes.length; i += chunk) raw += String.fromCharCode(...bytes.subarray(i, i + chunk));
  return btoa(raw);
}

/* Buffers are 16-byte multiples and never empty, as in js/gpu.js. */
const padded = (size) => Math.max(16, Math.ceil(size / 16) * 16);

async function open() {
  if (!navigator.gpu) throw new Error("this browser does not expose WebGPU (navigator.gpu is missing)");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("WebGPU is present but no adapter is available");
  const timestamps = adapter.features.has("timestamp-query");
  const device = await adapter.requestDevice({requiredFeatures: timestamps ? ["timestamp-query"] : []});
  const info = adapter.info || {};
  const name = [info.vendor, info.architecture].filter(Boolean).join(" ") +
               (info.description || info.device ? ` (${info.description || info.device})` : "");
  return {device, timestamps, adapter: name.trim() || "unknown adapter"};
}

const opened = open();
const prepared = new Map();
let nextId = 1;

async function prepare(spec) {
  const {device, timestamps} = await opened;
  if (!SHADER_NAME.test(spec.shader)) throw new Error(`spec.shader: expected a .wgsl file name, got ${spec.shader}`);
  const response = await fetch(`wgsl/${spec.shader}`);
  if (!response.ok) throw new Error(`could not fetch wgsl/${spec.shader} (HTTP ${response.status})`);
  const module = device.createShaderModule({label: spec.shader, code: await response.text()});
  device.pushErrorScope("validation");
  // One pipeline per pass (a spec with "passes" runs them in order over one bind group), all
  // with an explicit layout holding every binding: an "auto" one holds only those an entry uses.
  const bindGroupLayout = device.createBindGroupLayout({entries: spec.bindings.map((b) => (
    {binding: b.binding, visibility: GPUShaderStage.COMPUTE, buffer: {type: b.type}}))});
  const layout = device.createPipelineLayout({bindGroupLayouts: [bindGroupLayout]});
  const passes = spec.passes || [{entry: spec.entry || "main", workgroups: spec.workgroups}];
  const pipelines = [];
  for (const p of passes) {
    pipelines.push({workgroups: p.workgroups, pipeline: await device.createComputePipelineAsync({
      layout, compute: {module, entryPoint: p.entry, constants: spec.constants || {}}})});
  }
  const buffers = {};
  const entries = [];
  for (const b of spec.bindings) {
    const buffer = device.createBuffer({label: b.name, size: padded(b.size), usage: USAGE[b.type]()});
    if (b.data) {
      const bytes = fromBase64(b.data);
      const data = new Uint8Array(Math.ceil(bytes.length / 4) * 4);
      data.set(bytes);
      device.queue.writeBuffer(buffer, 0, data);
    }
    buffers[b.name] = {buffer, binding: b};
    entries.push({binding: b.binding, resource: {buffer, size: padded(b.size)}});
  }
  const bindGroup = device.createBindGroup({layout: bindGroupLayout, entries});
  const problem = await device.popErrorScope();
  if (problem) throw new Error(`WebGPU validation error: ${problem.message}`);
  let query = null;
  if (timestamps) {
    query = {
      set: device.createQuerySet({type: "timestamp", count: 2}),
      resolve: device.createBuffer({size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC}),
      read: device.createBuffer({size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST}),
    };
  }
  const id = nextId++;
  prepared.set(id, {spec, pipelines, bindGroup, buffers, query});
  return id;
}

async function dispatch(id) {
  const {device} = await opened;
  const p = prepared.get(id);
  if (!p) throw new Error(`no prepared spec ${id}`);
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass(p.query ? {timestampWrites: {
    querySet: p.query.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1}} : {});
  for (const stage of p.pipelines) {
    pass.setPipeline(stage.pipeline);
    pass.setBindGroup(0, p.bindGroup);
    pass.dispatchWorkgroups(...stage.workgroups);
  }
  pass.end();
  if (p.query) {
    encoder.resolveQuerySet(p.query.set, 0, 2, p.query.resolve, 0);
    encoder.copyBufferToBuffer(p.query.resolve, 0, p.query.read, 0, 16);
  }
  const started = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  const wallMs = performance.now() - started;
  let gpuMs = null;
  if (p.query) {
    await p.query.read.mapAsync(GPUMapMode.READ);
    const [begin, end] = new BigUint64Array(p.query.read.getMappedRange().slice(0));
    p.query.read.unmap();
    gpuMs = Number(end - begin) / 1e6;  // timestamps are nanoseconds
  }
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
  const {device} = await opened;
  const p = prepared.get(id);
  const out = {};
  for (const {buffer, binding} of Object.values(p.buffers)) {
    if (!binding.output) continue;
    const staging = device.createBuffer({size: padded(binding.size), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, padded(binding.size));
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    out[binding.name] = toBase64(new Uint8Array(staging.getMappedRange().slice(0, binding.size)));
    staging.unmap();
    staging.destroy();
  }
  return out;
}

function release(id) {
  const p = prepared.get(id);
  if (!p) return;
  for (const {buffer} of Object.values(p.buffers)) buffer.destroy();
  if (p.query) {
    p.query.set.destroy();
    p.query.resolve.destroy();
    p.query.read.destroy();
  }
  prepared.delete(id);
}

const ready = opened.then(({adapter, timestamps}) => {
  $("adapter").textContent = adapter;
  $("timestamps").textContent = timestamps ? "yes (timestamp-query)" : "no: wall time to onSubmittedWorkDone";
  setStatus("ready", "ready: waiting for bench/page_bench.py");
  return {adapter, timestamps};
}, (error) => {
  $("adapter").textContent = `none: ${error.message}`;
  setStatus("no-webgpu", `unavailable: ${error.message}`);
  throw error;
});
ready.catch(() => {});  // the reason is on the page; the driver reads it from ready itself

window.labBench = {ready, prepare, dispatch, outputs, release};
