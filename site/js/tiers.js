/* The tiled kernel's tiers, and which of them this browser's WebGPU adapter can run.
 *
 * Best first (nlpcore.kernels.tiling.TIERS, wgsl/flash_fwd*.wgsl):
 *   int8      S = QKᵀ on int8 subgroup matrices (tensor cores): needs Dawn's experimental
 *             "chromium-experimental-subgroup-matrix" with an i8 x i8 -> i32, 16 x 16 x 32
 *             configuration, and "subgroups"
 *   f16       float16 data, float32 arithmetic: needs "shader-f16"
 *   subgroup  float32, two rows an invocation, partial scores added by subgroup shuffles: needs
 *             "subgroups" with subgroups of at least 4 invocations
 *   portable  float32 within WebGPU's defaults: every adapter
 * The page runs the best offered tier unless the learner picks another, and says which ran and
 * why. The device for a tier is requested with the tier's features and, for f16 and int8, the
 * adapter's own workgroup storage (the tier's plan is sized from it in Python, lab.prepare's
 * `storage`); the float32 tiers keep WebGPU's default limits, the budget they are planned for.
 */

export const TIERS = [
  {id: "int8", label: "int8 tensor cores (subgroup matrices)",
   features: ["subgroups", "chromium-experimental-subgroup-matrix"], adapterStorage: true},
  {id: "f16", label: "float16 data, float32 arithmetic", features: ["shader-f16"], adapterStorage: true},
  {id: "subgroup", label: "float32 with subgroup shuffles", features: ["subgroups"], adapterStorage: false},
  {id: "portable", label: "portable float32", features: [], adapterStorage: false},
];

const MIN_SUBGROUP = 4;  // a row pair of d <= 128 spans 2·KS <= 4 invocations of one subgroup

function int8Config(info) {
  return ((info && info.subgroupMatrixConfigs) || []).find((c) =>
    c.componentType === "i8" && c.resultComponentType === "i32" && c.M === 16 && c.N === 16 && c.K === 32);
}

/* [{id, label, offered, why}] for this adapter, best first. */
export function offeredTiers(adapter) {
  const info = adapter.info || {};
  return TIERS.map((tier) => {
    const missing = tier.features.filter((f) => !adapter.features.has(f));
    let why = missing.length ? `the adapter lacks ${missing.join(" and ")}` : "";
    if (!why && tier.id === "int8" && !int8Config(info)) {
      why = "the adapter has subgroup matrices but no i8 x i8 -> i32 16x16x32 configuration";
    }
    if (!why && tier.id === "subgroup" && (info.subgroupMinSize || 0) < MIN_SUBGROUP) {
      why = `its subgroups may be smaller than ${MIN_SUBGROUP} invocations (subgroupMinSize ${info.subgroupMinSize})`;
    }
    return {id: tier.id, label: tier.label, offered: !why, why: why || "offered"};
  });
}

/* The tier to run: `wanted` when offered, else the best offered one; with the reason. */
export function chooseTier(adapter, wanted = "best") {
  const tiers = offeredTiers(adapter);
  const best = tiers.find((t) => t.offered);
  if (wanted && wanted !== "best") {
    const pick = tiers.find((t) => t.id === wanted);
    if (pick && pick.offered) return {tier: pick.id, why: `you picked ${pick.label}`, tiers};
    const reason = pick ? pick.why : "no such tier";
    return {tier: best.id, why: `you picked ${wanted}, but ${reason}; running ${best.label}, the best offered`, tiers};
  }
  const skipped = tiers.slice(0, tiers.indexOf(best)).map((t) => `${t.id}: ${t.why}`);
  return {tier: best.id, tiers,
          why: `${best.label} is the best tier this adapter offers` + (skipped.length ? ` (${skipped.join("; ")})` : "")};
}

/* A device for `tierId` on `adapter`, shaped like gpu.js's openGpu() result (runSpec takes it),
 * plus `storage` and `subgroupSize`, which lab.prepare needs to size the tier's plan. `adapter`
 * is the one the page's default device came from (used only if no fresh one is given). */
export async function openTierDevice(adapter, tierId, name) {
  const tier = TIERS.find((t) => t.id === tierId);
  // An adapter makes one device only ("consumed"), and the page's default device has it: ask
  // for a fresh adapter (the same GPU) for the tier's device.
  adapter = (await navigator.gpu.requestAdapter()) || adapter;
  const requiredLimits = tier.adapterStorage
      ? {maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
         maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage}
      : {};
  const device = await adapter.requestDevice({requiredFeatures: tier.features, requiredLimits});
  const info = adapter.info || {};
  const gpu = {adapter, device, info, name, lost: null, timestamps: false, tier: tierId,
               storage: device.limits.maxComputeWorkgroupStorageSize,
               subgroupSize: info.subgroupMaxSize || 32,
               limits: {maxComputeWorkgroupStorageSize: device.limits.maxComputeWorkgroupStorageSize,
                        maxComputeInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup}};
  device.lost.then((event) => { gpu.lost = event.message || event.reason || "device lost"; });
  return gpu;
}
