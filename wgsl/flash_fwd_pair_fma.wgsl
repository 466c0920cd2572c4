// flash_fwd_pair_fma.wgsl — the subgroup tier's shader (nlpcore.kernels.tiling.TIERS): the float32
// kernel for adapters with `subgroups`, flash_fwd_pair.wgsl with its multiply-adds written as
// fma() chains. Read flash_fwd_pair.wgsl first (and flash_fwd.wgsl before it): the tiles, lanes,
// butterfly, softmax and stores are its regions, included below; only the two inner products
// differ. The benchmarks time both (nlpcore.kernels.flash_wgsl_variants "pair", "pair-fma").
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Why fma() (issue 25): once workgroup-memory reads are halved (pair), is the kernel bound by
// how many instructions it issues? A GPU multiprocessor issues one warp
// instruction a cycle per scheduler, so an fp32 kernel reaches the float32 peak only if nearly
// every instruction it issues is a fused multiply-add. flash_fwd_pair.wgsl writes
//   q·k  as dot(q_i, k_i) summed over 8 slots: each dot() of two vec4 is a multiply and three
//        fused multiply-adds, then 7 adds join the 8 dots: 39 instructions for 32 multiply-adds;
//   o    as o += p.x·v0 + p.y·v1 + p.z·v2 + p.w·v3 per slot: a multiply, three fused
//        multiply-adds and the add into o, 5 instructions for 4 (if the compiler contracts
//        a·b + c at all; WGSL lets it, nothing makes it).
// Here every product is an explicit fma() into a running sum: q·k is one chain of 32 fma()
// per score (eight independent chains an invocation: four keys of two rows), and o takes
// o = fma(p_u, v_u, o) four times per slot: 32 and 4 instructions for 32 and 4 multiply-adds
// (instruction counts as written; what the driver's compiler emits was not read).
// On the H200 this file ran 10-11 % faster than flash_fwd_pair.wgsl through both engines
// (bench/results/webgpu_h200_probe_fma.json), so the answer there is yes, in part.
// Rounding: each fma() rounds once where a·b + c rounds twice; its mirror is pair's
// (nlpcore.kernels.flash_wgsl_mirror.lean_workgroup, which flash_wgsl_mirror.forward(...,
// tier="subgroup") runs), within the shader bar.
//
// Override constants, workgroup memory (14336 bytes at d = 64) and requirements: pair's.

enable subgroups;

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged key or value row per 64 head dims (flash_fwd.wgsl's layout).
const CHUNK4: u32 = 16u;

// vec4 slots of q and of o one invocation holds per row: 32 floats, for each of its two rows.
const HALF4: u32 = 8u;

// #include flash_fwd.wgsl sizes

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;

// #include flash_fwd_pair.wgsl pair main

// #include flash_fwd_pair.wgsl pair common

// --- fma dot begin ---
// --- fma chains begin ---
// s + q·k over one vec4 slot, as four fused multiply-adds in a chain.
fn fma4(q: vec4<f32>, k: vec4<f32>, s: f32) -> f32 {
  return fma(q.w, k.w, fma(q.z, k.z, fma(q.y, k.y, fma(q.x, k.x, s))));
}

// o + p.x·v0 + p.y·v1 + p.z·v2 + p.w·v3 over one vec4 slot, as four fused multiply-adds in a chain.
fn fma_slot(o: vec4<f32>, p: vec4<f32>, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>) -> vec4<f32> {
  return fma(vec4<f32>(p.w), v3, fma(vec4<f32>(p.z), v2, fma(vec4<f32>(p.y), v1, fma(vec4<f32>(p.x), v0, o))));
}
// --- fma chains end ---

// Partial q·k of both rows for the key whose first slot of this lane is c (slots c + i·lp):
// one chain of 32 fma() per row, each key slot read once for both (constant indices into q).
fn key_dot2(q_a: ptr<function, Half>, q_b: ptr<function, Half>, c: u32, lp: u32) -> vec2<f32> {
  let k0 = k_tile[c]; let k1 = k_tile[c + lp]; let k2 = k_tile[c + 2u * lp]; let k3 = k_tile[c + 3u * lp];
  let k4 = k_tile[c + 4u * lp]; let k5 = k_tile[c + 5u * lp];
  let k6 = k_tile[c + 6u * lp]; let k7 = k_tile[c + 7u * lp];
  var a = fma4((*q_a)[0], k0, 0.0);
  var b = fma4((*q_b)[0], k0, 0.0);
  a = fma4((*q_a)[1], k1, a); b = fma4((*q_b)[1], k1, b);
  a = fma4((*q_a)[2], k2, a); b = fma4((*q_b)[2], k2, b);
  a = fma4((*q_a)[3], k3, a); b = fma4((*q_b)[3], k3, b);
  a = fma4((*q_a)[4], k4, a); b = fma4((*q_b)[4], k4, b);
  a = fma4((*q_a)[5], k5, a); b = fma4((*q_b)[5], k5, b);
  a = fma4((*q_a)[6], k6, a); b = fma4((*q_b)[6], k6, b);
  a = fma4((*q_a)[7], k7, a); b = fma4((*q_b)[7], k7, b);
  return vec2<f32>(a, b);
}

// Partial scores of keys at + u·stride (u = 0..3) for both rows.
fn pair_dot(q_a: ptr<function, Half>, q_b: ptr<function, Half>, at: u32, stride: u32, lp: u32) -> Pair {
  let s0 = key_dot2(q_a, q_b, at, lp);
  let s1 = key_dot2(q_a, q_b, at + stride, lp);
  let s2 = key_dot2(q_a, q_b, at + 2u * stride, lp);
  let s3 = key_dot2(q_a, q_b, at + 3u * stride, lp);
  return Pair(vec4<f32>(s0.x, s1.x, s2.x, s3.x), vec4<f32>(s0.y, s1.y, s2.y, s3.y));
}

// o = fma(p_u, v_u, o) for u = 0..3 and both rows, value row u's slot i of this lane at
// at + u·stride + i·lp; each value slot read once for both rows (constant indices into o).
fn pair_accumulate(o_a: ptr<function, Half>, o_b: ptr<function, Half>, pa: vec4<f32>, pb: vec4<f32>,
                   at: u32, stride: u32, lp: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  {
    let v0 = v_tile[at]; let v1 = v_tile[a1]; let v2 = v_tile[a2]; let v3 = v_tile[a3];
    (*o_a)[0] = fma_slot((*o_a)[0], pa, v0, v1, v2, v3);
    (*o_b)[0] = fma_slot((*o_b)[0], pb, v0, v1, v2, v3);
  }
  {
    let i = lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[1] = fma_slot((*o_a)[1], pa, v0, v1, v2, v3);
    (*o_b)[1] = fma_slot((*o_b)[1], pb, v0, v1, v2, v3);
  }
  {
    let i = 2u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[2] = fma_slot((*o_a)[2], pa, v0, v1, v2, v3);
    (*o_b)[2] = fma_slot((*o_b)[2], pb, v0, v1, v2, v3);
  }
  {
    let i = 3u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[3] = fma_slot((*o_a)[3], pa, v0, v1, v2, v3);
    (*o_b)[3] = fma_slot((*o_b)[3], pb, v0, v1, v2, v3);
  }
  {
    let i = 4u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[4] = fma_slot((*o_a)[4], pa, v0, v1, v2, v3);
    (*o_b)[4] = fma_slot((*o_b)[4], pb, v0, v1, v2, v3);
  }
  {
    let i = 5u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[5] = fma_slot((*o_a)[5], pa, v0, v1, v2, v3);
    (*o_b)[5] = fma_slot((*o_b)[5], pb, v0, v1, v2, v3);
  }
  {
    let i = 6u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[6] = fma_slot((*o_a)[6], pa, v0, v1, v2, v3);
    (*o_b)[6] = fma_slot((*o_b)[6], pb, v0, v1, v2, v3);
  }
  {
    let i = 7u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[7] = fma_slot((*o_a)[7], pa, v0, v1, v2, v3);
    (*o_b)[7] = fma_slot((*o_b)[7], pb, v0, v1, v2, v3);
  }
}
// --- fma dot end ---

// #include flash_fwd_pair.wgsl masked

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
