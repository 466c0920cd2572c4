// webgpu_dawn.mjs — run dispatch specs through Dawn (Chrome's WebGPU implementation, Tint
// compiler) from Node, for bench/webgpu_attention.py's "dawn" engine.
//
// Dawn comes from the npm package `webgpu` (its dist/<platform>/dawn.node); the path to that
// dawn.node file is the first argument, or $DAWN_NODE. The backend is Vulkan: on the H200 that is
// NVIDIA's driver (with the loader from .gl/, bench/README.md says how); here, without a GPU,
// point VK_DRIVER_FILES at Chromium's SwiftShader ICD (/usr/lib/chromium/vk_swiftshader_icd.json).
//
// Protocol: one JSON object per line on stdin, one JSON reply per line on stdout, in order.
//   {"cmd": "info"}                          -> adapter, features, limits, subgroupMatrixConfigs
//   {"cmd": "prepare", "id", "spec"}         -> {"ok": true} or {"error"}: shader module, pipelines
//       (one per pass), buffers and bind group, made once. The spec is the dispatch spec of
//       nlpcore.kernels.flash_wgsl_mirror (or flash_wgsl_int8) with the WGSL text in "code" and
//       each binding's "data" either null (zero-filled) or {"file": path of its bytes}.
//   {"cmd": "dispatch", "id"}                -> {"gpu_ms", "wall_ms"}: one submit of one compute
//       pass running the spec's passes in order, timed by timestamp queries at the pass's
//       beginning and end (gpu_ms null without `timestamp-query`) and by the wall clock from
//       submit to onSubmittedWorkDone.
//   {"cmd": "outputs", "id", "dir"}          -> {"files": {name: path}}: every output binding
//       read back and written to dir/<name>.bin
//   {"cmd": "release", "id"}                 -> {"ok": true}
//   {"cmd": "quit"}
// The device gets every feature of FEATURES the adapter has and the adapter's own limits for
// workgroup storage and buffer sizes (the plans decide how much of them a pipeline uses: the
// portable tiers stay within WebGPU's defaults).

import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

const FEATURES = ["timestamp-query", "shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"];
const LIMITS = ["maxComputeWorkgroupStorageSize", "maxStorageBufferBindingSize", "maxBufferSize", "maxStorageBuffersPerShaderStage",
                "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX"];

const dawnPath = process.argv[2] || process.env.DAWN_NODE;
if (!dawnPath) {
  console.error("usage: node webgpu_dawn.mjs PATH/TO/dawn.node  (or set DAWN_NODE)");
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { create, globals } = require(dawnPath);
Object.assign(globalThis, globals);  // GPUBufferUsage, GPUMapMode, ...

const gpu = create(["backend=vulkan", "enable-dawn-features=allow_unsafe_apis",
                    "disable-dawn-features=timestamp_quantization"]);
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
if (!adapter) {
  console.log(JSON.stringify({ error: "Dawn found no Vulkan adapter (is the loader installed and VK_DRIVER_FILES set?)" }));
  process.exit(1);
}
const features = FEATURES.filter((f) => adapter.features.has(f));
const requiredLimits = {};
for (const name of LIMITS) requiredLimits[name] = adapter.limits[name];
const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
let lastError = null;
device.addEventListener("uncapturederror", (e) => { lastError = e.error.message; });

function info() {
  const i = adapter.info;
  const configs = (i.subgroupMatrixConfigs || []).map((c) => ({
    componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K }));
  const limits = {};
  for (const name of LIMITS) limits[name] = device.limits[name];
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
           subgroupMinSize: i.subgroupMinSize, subgroupMaxSize: i.subgroupMaxSize,
           features, limits, subgroupMatrixConfigs: configs };
}

const prepared = new Map();

const USAGE = {
  "uniform": GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
  "read-only-storage": GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
  "storage": GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
};

async function prepare(id, spec) {
  device.pushErrorScope("validation");
  const module = device.createShaderModule({ code: spec.code });
  const compiled = await module.getCompilationInfo();
  const errors = compiled.messages.filter((m) => m.type === "error");
  if (errors.length) {
    await device.popErrorScope();
    return { error: "WGSL compile error in " + spec.shader + ": " +
             errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ") };
  }
  const layout = device.createBindGroupLayout({
    entries: spec.bindings.map((b) => ({ binding: b.binding, visibility: GPUShaderStage.COMPUTE,
                                         buffer: { type: b.type } })) });
  const pipelineLayout = device.createPipelineLayout({ bindGroupLayouts: [layout] });
  const passes = spec.passes || [{ entry: spec.entry, workgroups: spec.workgroups }];
  const pipelines = [];
  for (const p of passes) {
    pipelines.push([await device.createComputePipelineAsync({
      layout: pipelineLayout, compute: { module, entryPoint: p.entry, constants: spec.constants } }), p.workgroups]);
  }
  const buffers = {};
  const entries = [];
  for (const b of spec.bindings) {
    const buf = device.createBuffer({ size: b.size, usage: USAGE[b.type] });
    if (b.data) device.queue.writeBuffer(buf, 0, readFileSync(b.data.file));
    buffers[b.name] = buf;
    entries.push({ binding: b.binding, resource: { buffer: buf, offset: 0, size: b.size } });
  }
  const bindGroup = device.createBindGroup({ layout, entries });
  const err = await device.popErrorScope();
  if (err) return { error: "validation error preparing " + spec.shader + ": " + err.message };
  const query = features.includes("timestamp-query") ? device.createQuerySet({ type: "timestamp", count: 2 }) : null;
  const resolved = query ? device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }) : null;
  const readback = query ? device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }) : null;
  prepared.set(id, { spec, pipelines, bindGroup, buffers, query, resolved, readback });
  return { ok: true };
}

async function dispatch(id) {
  const h = prepared.get(id);
  const encoder = device.createCommandEncoder();
  const desc = h.query ? { timestampWrites: { querySet: h.query, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {};
  const pass = encoder.beginComputePass(desc);
  for (const [pipeline, groups] of h.pipelines) {
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, h.bindGroup);
    pass.dispatchWorkgroups(groups[0], groups[1], groups[2]);
  }
  pass.end();
  if (h.query) {
    encoder.resolveQuerySet(h.query, 0, 2, h.resolved, 0);
    encoder.copyBufferToBuffer(h.resolved, 0, h.readback, 0, 16);
  }
  lastError = null;
  const t0 = performance.now();
  device.queue.submit([encoder.finish()]);
  await device.queue.onSubmittedWorkDone();
  const wall = performance.now() - t0;
  if (lastError) return { error: lastError };
  let gpu = null;
  if (h.query) {
    await h.readback.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(h.readback.getMappedRange().slice(0));
    h.readback.unmap();
    gpu = Number(t[1] - t[0]) / 1e6;  // nanoseconds -> ms
  }
  return { gpu_ms: gpu, wall_ms: wall };
}

async function outputs(id, dir) {
  const h = prepared.get(id);
  const files = {};
  for (const b of h.spec.bindings.filter((b) => b.output)) {
    const staging = device.createBuffer({ size: b.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(h.buffers[b.name], 0, staging, 0, b.size);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const path = join(dir, b.name + ".bin");
    writeFileSync(path, Buffer.from(staging.getMappedRange().slice(0)));
    staging.unmap();
    staging.destroy();
    files[b.name] = path;
  }
  return { files };
}

function release(id) {
  const h = prepared.get(id);
  if (h) {
    for (const buf of Object.values(h.buffers)) buf.destroy();
    prepared.delete(id);
  }
  return { ok: true };
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const msg = JSON.parse(line);
  let reply;
  try {
    if (msg.cmd === "info") reply = info();
    else if (msg.cmd === "prepare") reply = await prepare(msg.id, msg.spec);
    else if (msg.cmd === "dispatch") reply = await dispatch(msg.id);
    else if (msg.cmd === "outputs") reply = await outputs(msg.id, msg.dir);
    else if (msg.cmd === "release") reply = release(msg.id);
    else if (msg.cmd === "quit") break;
    else reply = { error: "unknown cmd " + msg.cmd };
  } catch (e) {
    reply = { error: String(e && e.stack || e) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
device.destroy();
process.exit(0);
