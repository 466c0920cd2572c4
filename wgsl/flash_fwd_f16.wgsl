// flash_fwd_f16.wgsl — the float16 tier of the tiled FlashAttention forward (needs `shader-f16`).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The same kernel as flash_fwd.wgsl (read that file first: its comments explain the work split,
// the register chunks, the online softmax, the sentinel and the loop budget), with its data in
// float16: q, k, v and o are `array<f16>` in global memory and the staged tiles k_tile, v_tile
// are `vec4<f16>` in workgroup memory, so a tile takes half the bytes and the plan fits twice
// the keys into the same budget. The arithmetic stays float32, as FlashAttention's float16
// kernels keep it (Dao et al. 2022, arXiv:2205.14135, section 3.1; Dao 2023, section 3.1):
// q (pre-scaled) and o are float32 registers, every score q·k, the running max m, the sum l and
// the accumulator o are float32, and a staged float16 value is widened to float32 where it is
// used. Rounding points, mirrored by nlpcore.kernels.flash_wgsl_mirror.forward(..., tier="f16"):
// the inputs are float16 (the host rounds them); o / l is computed in float32 and rounded once to
// float16 when it is stored; lse stays float32.
//
// Override constants, workgroup memory and dispatch: as flash_fwd.wgsl, with 8 bytes per vec4
// slot of k_tile and v_tile (tiling.plan(d, 2, storage_limit)). Global memory, row-major:
//   q (B, Nq, D) f16   k (B, Nk, D) f16   v (B, Nk, DV) f16   o (B, Nq, DV) f16   lse (B, Nq) f32

enable f16;

// #include flash_fwd.wgsl sentinel

// #include flash_fwd.wgsl overrides

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f16>;
@group(0) @binding(2) var<storage, read> k: array<f16>;
@group(0) @binding(3) var<storage, read> v: array<f16>;
@group(0) @binding(4) var<storage, read> mask_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f16>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> k_tile: array<vec4<f16>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f16>, BC * KS * CHUNK4>;
var<workgroup> s_part: array<f32, SPART>;

// #include flash_fwd.wgsl main

// #include flash_fwd.wgsl basics

// --- chunk helpers (float16 storage, float32 arithmetic) ---

// #include flash_fwd.wgsl present

// Four consecutive elements of a row starting at flat index `at`; only the first `n` exist,
// the rest read as 0. A row's length need not be a multiple of 4, so rows are not
// vec4-aligned in memory and are read one f32 at a time. One function per binding: a WGSL
// function cannot take a pointer to a storage buffer as a parameter.
fn load_q4(at: u32, n: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  if (n > 0u) { x.x = f32(q[at]); }
  if (n > 1u) { x.y = f32(q[at + 1u]); }
  if (n > 2u) { x.z = f32(q[at + 2u]); }
  if (n > 3u) { x.w = f32(q[at + 3u]); }
  return x;
}

fn load_k4(at: u32, n: u32) -> vec4<f16> {
  var x = vec4<f16>(0.0);
  if (n > 0u) { x.x = k[at]; }
  if (n > 1u) { x.y = k[at + 1u]; }
  if (n > 2u) { x.z = k[at + 2u]; }
  if (n > 3u) { x.w = k[at + 3u]; }
  return x;
}

fn load_v4(at: u32, n: u32) -> vec4<f16> {
  var x = vec4<f16>(0.0);
  if (n > 0u) { x.x = v[at]; }
  if (n > 1u) { x.y = v[at + 1u]; }
  if (n > 2u) { x.z = v[at + 2u]; }
  if (n > 3u) { x.w = v[at + 3u]; }
  return x;
}

// #include flash_fwd.wgsl chunk q

// Write y = o / safe_l, four elements at column `col` of output row `row`, those that exist.
fn store_o4(row: u32, col: u32, y: vec4<f32>) {
  let n = present(col, DV);
  if (n > 0u) { o[row + col] = f16(y.x); }
  if (n > 1u) { o[row + col + 1u] = f16(y.y); }
  if (n > 2u) { o[row + col + 2u] = f16(y.z); }
  if (n > 3u) { o[row + col + 3u] = f16(y.w); }
}

// #include flash_fwd.wgsl chunk o

// q·k over one lane's 64 dims, k starting at slot `at` of k_tile (constant indices into q).
fn chunk_dot(q_reg: ptr<function, Chunk>, at: u32) -> f32 {
  let a = dot((*q_reg)[0], vec4<f32>(k_tile[at])) + dot((*q_reg)[1], vec4<f32>(k_tile[at + 1u]))
        + dot((*q_reg)[2], vec4<f32>(k_tile[at + 2u])) + dot((*q_reg)[3], vec4<f32>(k_tile[at + 3u]));
  let b = dot((*q_reg)[4], vec4<f32>(k_tile[at + 4u])) + dot((*q_reg)[5], vec4<f32>(k_tile[at + 5u]))
        + dot((*q_reg)[6], vec4<f32>(k_tile[at + 6u])) + dot((*q_reg)[7], vec4<f32>(k_tile[at + 7u]));
  let c = dot((*q_reg)[8], vec4<f32>(k_tile[at + 8u])) + dot((*q_reg)[9], vec4<f32>(k_tile[at + 9u]))
        + dot((*q_reg)[10], vec4<f32>(k_tile[at + 10u])) + dot((*q_reg)[11], vec4<f32>(k_tile[at + 11u]));
  let d = dot((*q_reg)[12], vec4<f32>(k_tile[at + 12u])) + dot((*q_reg)[13], vec4<f32>(k_tile[at + 13u]))
        + dot((*q_reg)[14], vec4<f32>(k_tile[at + 14u])) + dot((*q_reg)[15], vec4<f32>(k_tile[at + 15u]));
  return (a + b) + (c + d);
}

// o = alpha · o + p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over one lane's 64 dims, where value
// row u starts at slot at + u·stride of v_tile (constant indices into o).
fn chunk_update(o_reg: ptr<function, Chunk>, alpha: f32, p: vec4<f32>, at: u32, stride: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  (*o_reg)[0] = alpha * (*o_reg)[0] + p.x * vec4<f32>(v_tile[at]) + p.y * vec4<f32>(v_tile[a1]) + p.z * vec4<f32>(v_tile[a2]) + p.w * vec4<f32>(v_tile[a3]);
  (*o_reg)[1] = alpha * (*o_reg)[1] + p.x * vec4<f32>(v_tile[at + 1u]) + p.y * vec4<f32>(v_tile[a1 + 1u]) + p.z * vec4<f32>(v_tile[a2 + 1u]) + p.w * vec4<f32>(v_tile[a3 + 1u]);
  (*o_reg)[2] = alpha * (*o_reg)[2] + p.x * vec4<f32>(v_tile[at + 2u]) + p.y * vec4<f32>(v_tile[a1 + 2u]) + p.z * vec4<f32>(v_tile[a2 + 2u]) + p.w * vec4<f32>(v_tile[a3 + 2u]);
  (*o_reg)[3] = alpha * (*o_reg)[3] + p.x * vec4<f32>(v_tile[at + 3u]) + p.y * vec4<f32>(v_tile[a1 + 3u]) + p.z * vec4<f32>(v_tile[a2 + 3u]) + p.w * vec4<f32>(v_tile[a3 + 3u]);
  (*o_reg)[4] = alpha * (*o_reg)[4] + p.x * vec4<f32>(v_tile[at + 4u]) + p.y * vec4<f32>(v_tile[a1 + 4u]) + p.z * vec4<f32>(v_tile[a2 + 4u]) + p.w * vec4<f32>(v_tile[a3 + 4u]);
  (*o_reg)[5] = alpha * (*o_reg)[5] + p.x * vec4<f32>(v_tile[at + 5u]) + p.y * vec4<f32>(v_tile[a1 + 5u]) + p.z * vec4<f32>(v_tile[a2 + 5u]) + p.w * vec4<f32>(v_tile[a3 + 5u]);
  (*o_reg)[6] = alpha * (*o_reg)[6] + p.x * vec4<f32>(v_tile[at + 6u]) + p.y * vec4<f32>(v_tile[a1 + 6u]) + p.z * vec4<f32>(v_tile[a2 + 6u]) + p.w * vec4<f32>(v_tile[a3 + 6u]);
  (*o_reg)[7] = alpha * (*o_reg)[7] + p.x * vec4<f32>(v_tile[at + 7u]) + p.y * vec4<f32>(v_tile[a1 + 7u]) + p.z * vec4<f32>(v_tile[a2 + 7u]) + p.w * vec4<f32>(v_tile[a3 + 7u]);
  (*o_reg)[8] = alpha * (*o_reg)[8] + p.x * vec4<f32>(v_tile[at + 8u]) + p.y * vec4<f32>(v_tile[a1 + 8u]) + p.z * vec4<f32>(v_tile[a2 + 8u]) + p.w * vec4<f32>(v_tile[a3 + 8u]);
  (*o_reg)[9] = alpha * (*o_reg)[9] + p.x * vec4<f32>(v_tile[at + 9u]) + p.y * vec4<f32>(v_tile[a1 + 9u]) + p.z * vec4<f32>(v_tile[a2 + 9u]) + p.w * vec4<f32>(v_tile[a3 + 9u]);
  (*o_reg)[10] = alpha * (*o_reg)[10] + p.x * vec4<f32>(v_tile[at + 10u]) + p.y * vec4<f32>(v_tile[a1 + 10u]) + p.z * vec4<f32>(v_tile[a2 + 10u]) + p.w * vec4<f32>(v_tile[a3 + 10u]);
  (*o_reg)[11] = alpha * (*o_reg)[11] + p.x * vec4<f32>(v_tile[at + 11u]) + p.y * vec4<f32>(v_tile[a1 + 11u]) + p.z * vec4<f32>(v_tile[a2 + 11u]) + p.w * vec4<f32>(v_tile[a3 + 11u]);
  (*o_reg)[12] = alpha * (*o_reg)[12] + p.x * vec4<f32>(v_tile[at + 12u]) + p.y * vec4<f32>(v_tile[a1 + 12u]) + p.z * vec4<f32>(v_tile[a2 + 12u]) + p.w * vec4<f32>(v_tile[a3 + 12u]);
  (*o_reg)[13] = alpha * (*o_reg)[13] + p.x * vec4<f32>(v_tile[at + 13u]) + p.y * vec4<f32>(v_tile[a1 + 13u]) + p.z * vec4<f32>(v_tile[a2 + 13u]) + p.w * vec4<f32>(v_tile[a3 + 13u]);
  (*o_reg)[14] = alpha * (*o_reg)[14] + p.x * vec4<f32>(v_tile[at + 14u]) + p.y * vec4<f32>(v_tile[a1 + 14u]) + p.z * vec4<f32>(v_tile[a2 + 14u]) + p.w * vec4<f32>(v_tile[a3 + 14u]);
  (*o_reg)[15] = alpha * (*o_reg)[15] + p.x * vec4<f32>(v_tile[at + 15u]) + p.y * vec4<f32>(v_tile[a1 + 15u]) + p.z * vec4<f32>(v_tile[a2 + 15u]) + p.w * vec4<f32>(v_tile[a3 + 15u]);
}


// #include flash_fwd.wgsl allowed
