// flash_fwd_lean_fma.wgsl — flash_fwd_lean.wgsl with its multiply-adds written as fma() chains
// (a benchmark variant beside the portable tier: bench/webgpu_tiers.py --tier-variants,
// nlpcore.kernels.flash_wgsl_variants "lean-fma"). No features: it runs on any adapter.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// lean's tiles, loop and softmax (its regions, included below) with flash_fwd_pair_fma.wgsl's
// question asked of the portable kernel: does writing each product as an fma() into a running
// sum (q·k: two chains of 32 a score instead of 16 dot() and their adds; o: o = fma(p_u, v_u, o)
// instead of a multiply, three multiply-adds and an add per slot) lift a kernel that reads
// every staged slot once per row? Its mirror is lean's (flash_wgsl_variants.forward(...,
// variant="lean-fma")), within the shader bar: an fma() rounds once where a·b + c rounds twice.
//
// Override constants, workgroup memory (14352 bytes at d = 64), global memory and dispatch:
// flash_fwd.wgsl's (tiling.plan).

// #include flash_fwd.wgsl sentinel

// #include flash_fwd.wgsl overrides

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_part: array<f32, SPART>;

// #include flash_fwd_lean.wgsl lean main

// #include flash_fwd_lean.wgsl lean scale

// #include flash_fwd_pair_fma.wgsl fma chains

// q·k over one lane's 64 dims, k starting at slot `at` of k_tile: two chains of 32 fma(), slots
// 0..7 and 8..15 (constant indices into q).
fn chunk_dot(q_reg: ptr<function, Chunk>, at: u32) -> f32 {
  var a = fma4((*q_reg)[0], k_tile[at], 0.0);
  var b = fma4((*q_reg)[8], k_tile[at + 8u], 0.0);
  a = fma4((*q_reg)[1], k_tile[at + 1u], a); b = fma4((*q_reg)[9], k_tile[at + 9u], b);
  a = fma4((*q_reg)[2], k_tile[at + 2u], a); b = fma4((*q_reg)[10], k_tile[at + 10u], b);
  a = fma4((*q_reg)[3], k_tile[at + 3u], a); b = fma4((*q_reg)[11], k_tile[at + 11u], b);
  a = fma4((*q_reg)[4], k_tile[at + 4u], a); b = fma4((*q_reg)[12], k_tile[at + 12u], b);
  a = fma4((*q_reg)[5], k_tile[at + 5u], a); b = fma4((*q_reg)[13], k_tile[at + 13u], b);
  a = fma4((*q_reg)[6], k_tile[at + 6u], a); b = fma4((*q_reg)[14], k_tile[at + 14u], b);
  a = fma4((*q_reg)[7], k_tile[at + 7u], a); b = fma4((*q_reg)[15], k_tile[at + 15u], b);
  return a + b;
}

// o = fma(p_u, v_u, o) for u = 0..3 over one lane's 64 dims, value row u at slot at + u·stride
// of v_tile: lean's chunk_accumulate as fma() chains.
fn chunk_accumulate(o_reg: ptr<function, Chunk>, p: vec4<f32>, at: u32, stride: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  (*o_reg)[0] = fma_slot((*o_reg)[0], p, v_tile[at], v_tile[a1], v_tile[a2], v_tile[a3]);
  (*o_reg)[1] = fma_slot((*o_reg)[1], p, v_tile[at + 1u], v_tile[a1 + 1u], v_tile[a2 + 1u], v_tile[a3 + 1u]);
  (*o_reg)[2] = fma_slot((*o_reg)[2], p, v_tile[at + 2u], v_tile[a1 + 2u], v_tile[a2 + 2u], v_tile[a3 + 2u]);
  (*o_reg)[3] = fma_slot((*o_reg)[3], p, v_tile[at + 3u], v_tile[a1 + 3u], v_tile[a2 + 3u], v_tile[a3 + 3u]);
  (*o_reg)[4] = fma_slot((*o_reg)[4], p, v_tile[at + 4u], v_tile[a1 + 4u], v_tile[a2 + 4u], v_tile[a3 + 4u]);
  (*o_reg)[5] = fma_slot((*o_reg)[5], p, v_tile[at + 5u], v_tile[a1 + 5u], v_tile[a2 + 5u], v_tile[a3 + 5u]);
  (*o_reg)[6] = fma_slot((*o_reg)[6], p, v_tile[at + 6u], v_tile[a1 + 6u], v_tile[a2 + 6u], v_tile[a3 + 6u]);
  (*o_reg)[7] = fma_slot((*o_reg)[7], p, v_tile[at + 7u], v_tile[a1 + 7u], v_tile[a2 + 7u], v_tile[a3 + 7u]);
  (*o_reg)[8] = fma_slot((*o_reg)[8], p, v_tile[at + 8u], v_tile[a1 + 8u], v_tile[a2 + 8u], v_tile[a3 + 8u]);
  (*o_reg)[9] = fma_slot((*o_reg)[9], p, v_tile[at + 9u], v_tile[a1 + 9u], v_tile[a2 + 9u], v_tile[a3 + 9u]);
  (*o_reg)[10] = fma_slot((*o_reg)[10], p, v_tile[at + 10u], v_tile[a1 + 10u], v_tile[a2 + 10u], v_tile[a3 + 10u]);
  (*o_reg)[11] = fma_slot((*o_reg)[11], p, v_tile[at + 11u], v_tile[a1 + 11u], v_tile[a2 + 11u], v_tile[a3 + 11u]);
  (*o_reg)[12] = fma_slot((*o_reg)[12], p, v_tile[at + 12u], v_tile[a1 + 12u], v_tile[a2 + 12u], v_tile[a3 + 12u]);
  (*o_reg)[13] = fma_slot((*o_reg)[13], p, v_tile[at + 13u], v_tile[a1 + 13u], v_tile[a2 + 13u], v_tile[a3 + 13u]);
  (*o_reg)[14] = fma_slot((*o_reg)[14], p, v_tile[at + 14u], v_tile[a1 + 14u], v_tile[a2 + 14u], v_tile[a3 + 14u]);
  (*o_reg)[15] = fma_slot((*o_reg)[15], p, v_tile[at + 15u], v_tile[a1 + 15u], v_tile[a2 + 15u], v_tile[a3 + 15u]);
}

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
