/* WebGPU: run any *dispatch spec* that Python builds (nlpcore.kernels.flash_wgsl_mirror.dispatch_spec).
 *
 *   {"shader": "flash_fwd.wgsl", "entry": "main", "constants": {BR: 16, ...},
 *    "bindings": [{"binding": 0, "type": "uniform"|"read-only-storage"|"storage",
 *                  "data": Uint8Array|null, "size": bytes, "name": "o", "output": bool}, ...],
 *    "workgroups": [x, y, z],
 *    "passes": [{"entry": "scores", "workgroups": [x, y, z]}, ...]}   (optional)
 *
 * With "passes", those dispatches run in order in one compute pass over the same bind group
 * (WebGPU orders one dispatch's storage writes before the next one's reads), and the top-level
 * entry/workgroups are not used; the bind group layout is then built from the bindings' types,
 * since an "auto" layout would hold only the bindings each entry point uses.
 *
 * This module knows nothing about attention: sizes reach the shader only as the spec's
 * `override` constants, computed once in Python (nlpcore.kernels.tiling). The device is requested
 * with DEFAULT limits, so workgroup memory is capped at maxComputeWorkgroupStorageSize = 16384
 * bytes (WebGPU spec, "Limits") - the budget the tile plan was made for.
 *
 *   const gpu = await openGpu();            // throws GpuUnavailable with a stated reason
 *   const {outputs, gpuMs} = await runSpec(gpu, spec);   // outputs: {name: Uint8Array}
 *
 * The pieces runSpec is made of, for a caller that dispatches one spec many times (js/bench.js,
 * js/gpu-bench.js):
 *   openGpu({timestamps: true})             // also asks for "timestamp-query" when offered
 *   const prepared = await prepareSpec(gpu, spec, {explicitLayout})
 *   encodeSpec(encoder, prepared, passDescriptor);  const collect = await copyOutputs(gpu, prepared)
 *   const timer = createPassTimer(gpu);  const {gpuMs, wallMs} = await timeDispatch(gpu, prepared, timer)
 *   release(prepared);  destroyPassTimer(timer)
 */

export class GpuUnavailable extends Error {
  constructor(reason) {
    super(reason);
    this.name = "GpuUnavailable";
  }
}

const SHADER_NAME = /^[A-Za-z0-9_-]+\.wgsl$/;
const BUFFER_USAGE = {
  "uniform": () => GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
  "read-only-storage": () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
  "storage": () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
};
const shaderCache = new Map();  // url -> Promise<string>

/* A readable adapter name, e.g. "google swiftshader (SwiftShader Device (Subzero))". */
function adapterName(info) {
  if (!info) return "unknown adapter";
  const parts = [info.vendor, info.architecture].filter(Boolean);
  const detail = info.description || info.device;
  if (detail) parts.push(parts.length ? `(${detail})` : detail);
  return parts.join(" ") || "unknown adapter";
}

/* Adapter + device with default limits, or GpuUnavailable saying why not. With
 * `timestamps`, the device also has the "timestamp-query" feature when the adapter offers it
 * (gpu.timestamps says whether it does). */
export async function openGpu({timestamps = false} = {}) {
  if (!("gpu" in navigator) || !navigator.gpu) {
    throw new GpuUnavailable(
        "this browser does not expose WebGPU (navigator.gpu is missing): use a recent Chrome, " +
        "Edge or Firefox, served over http://localhost or https");
  }
  let adapter;
  try {
    adapter = await navigator.gpu.requestAdapter();
  } catch (error) {
    throw new GpuUnavailable(`requesting a WebGPU adapter failed: ${error.message}`);
  }
  if (!adapter) {
    throw new GpuUnavailable("WebGPU is present but no adapter is available " +
                             "(GPU blocklisted or disabled in this browser)");
  }
  let info = adapter.info;
  if (!info && typeof adapter.requestAdapterInfo === "function") {
    info = await adapter.requestAdapterInfo();
  }
  const withTimestamps = timestamps && adapter.features.has("timestamp-query");
  let device;
  try {
    // default limits on purpose
    device = await adapter.requestDevice({requiredFeatures: withTimestamps ? ["timestamp-query"] : []});
  } catch (error) {
    throw new GpuUnavailable(`requesting a WebGPU device failed: ${error.message}`);
  }
  const gpu = {adapter, device, info, name: adapterName(info), lost: null, timestamps: withTimestamps,
               limits: {maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize,
                        maxComputeInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup}};
  device.lost.then((event) => { gpu.lost = event.message || event.reason || "device lost"; });
  return gpu;
}

async function shaderSource(shader) {
  if (!SHADER_NAME.test(shader)) throw new Error(`spec.shader: expected a file name like flash_fwd.wgsl, got ${shader}`);
  const url = new URL(`../wgsl/${shader}`, import.meta.url).href;
  if (!shaderCache.has(url)) {
    shaderCache.set(url, fetch(url).then((response) => {
      if (!response.ok) throw new Error(`could not fetch wgsl/${shader} (HTTP ${response.status})`);
      return response.text();
    }, (error) => { throw new Error(`could not fetch wgsl/${shader} (${error.message})`); }));
    shaderCache.get(url).catch(() => shaderCache.delete(url));
  }
  return shaderCache.get(url);
}

/* The shader module, or an Error listing every compilation error as "file:line:col message".
 * A spec may carry its WGSL inline as `code` (an exercise's shader); `shader` then only names it. */
async function compile(device, spec) {
  const shader = spec.shader;
  const code = typeof spec.code === "string" ? spec.code : await shaderSource(shader);
  const module = device.createShaderModule({label: shader, code});
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === "error");
  if (errors.length) {
    const lines = errors.map((m) => `${shader}:${m.lineNum}:${m.linePos} ${m.message}`);
    throw new Error(`WGSL compilation failed:\n${lines.join("\n")}`);
  }
  return module;
}

function checkSpec(spec) {
  if (!spec || typeof spec !== "object") throw new Error("spec: expected a dispatch spec object");
  if (!Array.isArray(spec.bindings) || !spec.bindings.length) throw new Error("spec.bindings: expected a non-empty list");
  if (!Array.isArray(spec.workgroups) || spec.workgroups.length !== 3 ||
      !spec.workgroups.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new Error("spec.workgroups: expected [x, y, z] non-negative integers");
  }
  if (spec.passes !== undefined) {
    if (!Array.isArray(spec.passes) || !spec.passes.length) throw new Error("spec.passes: expected a non-empty list");
    spec.passes.forEach((p, i) => {
      if (!p || typeof p.entry !== "string" || !Array.isArray(p.workgroups) || p.workgroups.length !== 3 ||
          !p.workgroups.every((n) => Number.isInteger(n) && n >= 0)) {
        throw new Error(`spec.passes[${i}]: expected {entry: string, workgroups: [x, y, z] non-negative integers}`);
      }
    });
  }
  for (const b of spec.bindings) {
    if (!(b.type in BUFFER_USAGE)) throw new Error(`spec.bindings[${b.binding}].type: unknown ${b.type}`);
    if (!Number.isInteger(b.size) || b.size < 0) throw new Error(`spec.bindings[${b.binding}].size: expected bytes >= 0`);
    if (b.data && b.data.byteLength > b.size) {
      throw new Error(`spec.bindings[${b.binding}].data: ${b.data.byteLength} bytes, more than its size ${b.size}`);
    }
  }
}

/* Compute pipelines per device, by shader (file or inline code), entry and constants: building
 * one compiles the shader for the adapter, which on a CPU adapter (SwiftShader) takes seconds,
 * while a dispatch of a small case takes milliseconds. */
const pipelineCache = new WeakMap();  // GPUDevice -> Map(key -> GPUComputePipeline)
const MAX_PIPELINES = 16;

function pipelineKey(spec, entry, layoutTypes) {
  const constants = Object.entries(spec.constants || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([spec.shader, typeof spec.code === "string" ? spec.code : null,
                         entry, constants, layoutTypes]);
}

/* The explicit layout of a multi-pass spec: every binding, visible to compute, of its type. */
function explicitLayout(device, spec) {
  const bindGroupLayout = device.createBindGroupLayout({
    entries: spec.bindings.map((b) => ({binding: b.binding, visibility: GPUShaderStage.COMPUTE,
                                        buffer: {type: b.type}})),
  });
  return {bindGroupLayout,
          pipelineLayout: device.createPipelineLayout({bindGroupLayouts: [bindGroupLayout]})};
}

/* Buffers are 16-byte multiples and never empty (a zero-size binding is invalid). */
const paddedSize = (size) => Math.max(16, Math.ceil(size / 16) * 16);

/* The compute pipelines of a spec (one per pass), from the per-device cache. With
 * `explicitLayout` (or several passes) the bind group layout holds every binding of the spec;
 * otherwise it is the "auto" layout of the single entry point. */
async function pipelinesFor(device, spec, passes, explicit) {
  if (!pipelineCache.has(device)) pipelineCache.set(device, new Map());
  const pipelines = pipelineCache.get(device);
  const layoutTypes = explicit ? spec.bindings.map((b) => [b.binding, b.type]) : "auto";
  const keys = passes.map((p) => pipelineKey(spec, p.entry, layoutTypes));
  const module = keys.every((k) => pipelines.has(k)) ? null : await compile(device, spec);
  const layout = explicit ? explicitLayout(device, spec) : null;
  const passPipelines = [];
  for (let i = 0; i < passes.length; i += 1) {
    let pipeline = pipelines.get(keys[i]);
    if (!pipeline) {
      try {
        pipeline = await device.createComputePipelineAsync({
          layout: explicit ? layout.pipelineLayout : "auto",
          compute: {module, entryPoint: passes[i].entry, constants: spec.constants || {}},
        });
      } catch (error) {
        throw new Error(`creating the compute pipeline failed: ${error.message}`);
      }
      if (pipelines.size >= MAX_PIPELINES) pipelines.clear();
      pipelines.set(keys[i], pipeline);
    }
    passPipelines.push(pipeline);
  }
  return {passPipelines, bindGroupLayout: explicit ? layout.bindGroupLayout : passPipelines[0].getBindGroupLayout(0)};
}

/* Everything a spec needs on the device, made once: pipelines, buffers (inputs written), the
 * bind group. Resolves to a *prepared spec* for encodeSpec / readOutputs / release; errors are
 * thrown as Errors that name the WebGPU validation or out-of-memory problem.
 *   options.explicitLayout: bind every binding even if an entry point does not use it. */
export async function prepareSpec(gpu, spec, {explicitLayout = false} = {}) {
  checkSpec(spec);
  if (gpu.lost) throw new Error(`the WebGPU device was lost: ${gpu.lost}`);
  const {device} = gpu;
  const multiPass = Array.isArray(spec.passes);
  const passes = multiPass ? spec.passes : [{entry: spec.entry || "main", workgroups: spec.workgroups}];
  device.pushErrorScope("validation");
  device.pushErrorScope("out-of-memory");
  const prepared = {spec, passes, pipelines: [], buffers: [], bindGroup: null};
  let failure = null;
  try {
    const {passPipelines, bindGroupLayout} = await pipelinesFor(device, spec, passes, multiPass || explicitLayout);
    prepared.pipelines = passPipelines;
    const entries = [];
    for (const b of spec.bindings) {
      const size = paddedSize(b.size);
      const buffer = device.createBuffer({label: b.name, size, usage: BUFFER_USAGE[b.type]()});
      prepared.buffers.push({binding: b, buffer, size});
      if (b.data && b.data.byteLength) {
        const data = new Uint8Array(Math.ceil(b.data.byteLength / 4) * 4);
        data.set(b.data);
        device.queue.writeBuffer(buffer, 0, data);
      }
      entries.push({binding: b.binding, resource: {buffer, size}});
    }
    prepared.bindGroup = device.createBindGroup({layout: bindGroupLayout, entries});
  } catch (error) {
    failure = error;
  }
  const oom = await device.popErrorScope();
  const invalid = await device.popErrorScope();
  const problem = invalid || oom;
  if (failure || problem) {
    release(prepared);
    throw failure || new Error(`WebGPU ${invalid ? "validation" : "out-of-memory"} error: ${problem.message}`);
  }
  return prepared;
}

/* Records the spec's passes, in order, into one compute pass of `encoder`. */
export function encodeSpec(encoder, prepared, passDescriptor = {}) {
  const pass = encoder.beginComputePass(passDescriptor);
  prepared.passes.forEach((p, i) => {
    pass.setPipeline(prepared.pipelines[i]);
    pass.setBindGroup(0, prepared.bindGroup);
    pass.dispatchWorkgroups(...p.workgroups);
  });
  pass.end();
}

/* Adds copies of the output bindings to `encoder` (or, without one, submits its own copy) and
 * returns `collect`, an async function to call once the work is submitted: it maps the copies
 * and resolves to {name: Uint8Array} (each binding's spec size). */
export async function copyOutputs(gpu, prepared, encoder = null) {
  const {device} = gpu;
  const own = encoder === null;
  const commands = own ? device.createCommandEncoder() : encoder;
  const readbacks = [];
  for (const r of prepared.buffers) {
    if (!r.binding.output) continue;
    const staging = device.createBuffer({label: `${r.binding.name} readback`, size: r.size,
                                         usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    commands.copyBufferToBuffer(r.buffer, 0, staging, 0, r.size);
    readbacks.push({binding: r.binding, staging});
  }
  if (own) device.queue.submit([commands.finish()]);
  return async () => {
    const outputs = {};
    try {
      for (const r of readbacks) {
        await r.staging.mapAsync(GPUMapMode.READ);
        outputs[r.binding.name] = new Uint8Array(r.staging.getMappedRange().slice(0, r.binding.size));
        r.staging.unmap();
      }
    } finally {
      for (const r of readbacks) r.staging.destroy();
    }
    return outputs;
  };
}

/* A pair of GPU timestamps around one compute pass, with the buffers that read them back; null
 * when the device has no "timestamp-query" (then timeDispatch reports wall time only). */
export function createPassTimer(gpu) {
  if (!gpu.timestamps) return null;
  const {device} = gpu;
  return {
    set: device.createQuerySet({type: "timestamp", count: 2}),
    resolve: device.createBuffer({size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC}),
    read: device.createBuffer({size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST}),
  };
}

export function destroyPassTimer(timer) {
  if (!timer) return;
  timer.set.destroy();
  timer.resolve.destroy();
  timer.read.destroy();
}

/* One dispatch of a prepared spec in one compute pass: resolves to {gpuMs, wallMs}, gpuMs from
 * the timestamps written at the beginning and end of the pass (null without a timer), wallMs
 * from submit to the queue's completion. */
export async function timeDispatch(gpu, prepared, timer = null) {
  const {device} = gpu;
  const encoder = device.createCommandEncoder();
  encodeSpec(encoder, prepared, timer ? {timestampWrites: {
    querySet: timer.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1}} : {});
  if (timer) {
    encoder.resolveQuerySet(timer.set, 0, 2, timer.resolve, 0);
    encoder.copyBufferToBuffer(timer.resolve, 0, timer.read, 0, 16);
  }
  const started = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  const wallMs = performance.now() - started;
  let gpuMs = null;
  if (timer) {
    await timer.read.mapAsync(GPUMapMode.READ);
    const [begin, end] = new BigUint64Array(timer.read.getMappedRange().slice(0));
    timer.read.unmap();
    gpuMs = Number(end - begin) / 1e6;  // timestamps are nanoseconds
  }
  return {gpuMs, wallMs};
}

/* Frees the buffers of a prepared spec (pipelines stay cached). */
export function release(prepared) {
  for (const {buffer} of prepared.buffers) buffer.destroy();
  prepared.buffers = [];
}

/* Runs the spec once; resolves to {outputs: {name: Uint8Array}, gpuMs}. */
export async function runSpec(gpu, spec) {
  const prepared = await prepareSpec(gpu, spec);
  const {device} = gpu;
  device.pushErrorScope("validation");
  device.pushErrorScope("out-of-memory");
  let result = null;
  let failure = null;
  try {
    const encoder = device.createCommandEncoder();
    encodeSpec(encoder, prepared);
    const collect = await copyOutputs(gpu, prepared, encoder);
    const started = performance.now();
    device.queue.submit([encoder.finish()]);
    const outputs = await collect();
    result = {outputs, gpuMs: performance.now() - started};
  } catch (error) {
    failure = error;
  }
  const oom = await device.popErrorScope();
  const invalid = await device.popErrorScope();
  release(prepared);
  const problem = invalid || oom;
  if (problem) throw new Error(`WebGPU ${invalid ? "validation" : "out-of-memory"} error: ${problem.message}`);
  if (failure) throw failure;
  return result;
}
