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

// A masked score. WGSL has no infinity literal, and an implementation may assume floats are
// finite (WGSL spec, "Floating Point Evaluation"), so -inf is not portable: an expression
// that makes it may give any value. The sentinel stays finite under every operation applied
// to it here: as a running max it gives alpha = exp(-1e30 - m) = 0 with no overflow, and a
// masked score's probability is set to exactly 0 by comparison, not computed from exp.
// Valid inputs keep |scale · q·k| far below 1e30 (the host checks).
const MASKED_SCORE: f32 = -1.0e30;

// vec4 slots of q (and of o) one lane holds in registers: 64 floats.
const CHUNK4: u32 = 16u;

override BR: u32;
override BC: u32;
override D: u32;
override DV: u32;
override KS: u32;
override SPART: u32;

struct Params {
  n_q: u32,                // query rows per batch entry
  n_k: u32,                // key rows per batch entry
  causal: u32,             // 1: query i may attend key j only if j <= i
  has_mask: u32,           // 1: consult mask_bits
  mask_batch_stride: u32,  // bits between batch entries of the mask
  mask_row_stride: u32,    // bits between query rows of the mask (0 = key padding)
  scale: f32,              // score scale, usually 1/sqrt(D)
  _pad: u32,               // uniform structs are read in 16-byte rows
}

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

// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let i = wg.x;                            // query tile index
  let b = wg.z;                            // batch entry
  let q0 = i * BR;                         // first query row of the tile
  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile
  let r = t / KS;                          // this invocation's row within the tile
  let lane = t % KS;                       // and its 64 head dims of that row
  let row_ok = r < rows;                   // rows past the end compute but store nothing
  let qi = q0 + r;                         // the query row, when row_ok
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile
  let mine = lane * CHUNK4;                // this lane's first slot within such a row

  // This lane's 64 dims of q, pre-multiplied by the scale (so scores come out scaled);
  // o = 0, m = MASKED_SCORE, l = 0.
  var q_reg = chunk_load_q((b * params.n_q + qi) * D, mine * 4u, row_ok, params.scale);
  var o_reg = Chunk();
  var m = MASKED_SCORE;
  var l = 0.0;

  // Key tiles j = 0 .. j_end-1. With causal masking, tiles that start after this query tile's
  // last row are skipped outright (every score in them is masked): j_end is ceil((q0 + rows) /
  // BC), the exclusive bound, clamped to Tc when Nq > Nk. It depends only on the uniform params
  // and workgroup_id, so the barriers inside the loop are in uniform control flow.
  let t_c = ceil_div(params.n_k, BC);
  var j_end = t_c;
  if (params.causal != 0u) {
    j_end = min(t_c, ceil_div(q0 + rows, BC));
  }
  for (var j = 0u; j < j_end; j++) {
    workgroupBarrier();                    // everyone is done with the previous K_j, V_j
    let k0 = j * BC;
    let cols = min(BC, params.n_k - k0);   // Bc, or fewer in the ragged last tile

    // Stage K_j and V_j, four elements per slot (keys past the end, and head dims past D or DV,
    // read as 0). Neighbouring invocations read neighbouring slots: coalesced.
    for (var e = t; e < BC * width; e += BR * KS) {
      let c = e / width;
      let col = (e % width) * 4u;
      var nk = 0u;
      var nv = 0u;
      if (c < cols) {
        nk = present(col, D);
        nv = present(col, DV);
      }
      k_tile[e] = load_k4((b * params.n_k + k0 + c) * D + col, nk);
      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, nv);
    }
    workgroupBarrier();

    // KS > 1: every lane's partial q·k over its 64 dims, for each key of the tile, into s_part
    // (KS is an override, so this branch, and the barrier in it, is uniform).
    if (KS > 1u) {
      for (var c = 0u; c < BC; c++) {
        s_part[t * BC + c] = chunk_dot(&q_reg, c * width + mine);
      }
      workgroupBarrier();
    }

    // Four keys g .. g+3 at a time.
    for (var g = 0u; g < BC; g += 4u) {
      var s: vec4<f32>;
      if (KS == 1u) {
        s = vec4<f32>(chunk_dot(&q_reg, g * width), chunk_dot(&q_reg, (g + 1u) * width),
                      chunk_dot(&q_reg, (g + 2u) * width), chunk_dot(&q_reg, (g + 3u) * width));
      } else {                             // the row's KS partial sums, added in lane order
        s = vec4<f32>(0.0);
        for (var p = 0u; p < KS; p++) {
          let at = (r * KS + p) * BC + g;
          s += vec4<f32>(s_part[at], s_part[at + 1u], s_part[at + 2u], s_part[at + 3u]);
        }
      }
      // Masked and out-of-range scores become the sentinel.
      let live = vec4<bool>(row_ok && g < cols && allowed(b, qi, k0 + g),
                            row_ok && g + 1u < cols && allowed(b, qi, k0 + g + 1u),
                            row_ok && g + 2u < cols && allowed(b, qi, k0 + g + 2u),
                            row_ok && g + 3u < cols && allowed(b, qi, k0 + g + 3u));
      s = select(vec4<f32>(MASKED_SCORE), s, live);

      // Online softmax: m_new = max(m, max s), p = exp(s - m_new) (exactly 0 for the sentinel),
      // l = alpha · l + Σ p with alpha = exp(m - m_new); then o = alpha · o + Σ_u p_u · v_{g+u}.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      let p = select(exp(s - vec4<f32>(m_new)), vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE));
      let alpha = exp(m - m_new);
      l = alpha * l + (p.x + p.y) + (p.z + p.w);
      m = m_new;
      chunk_update(&o_reg, alpha, p, g * width + mine, width);
    }
  }

  // o = o / l and lse = m + log l. A row with no allowed key has l = 0 and o = 0 (every p was
  // exactly 0): it gets o = 0 and lse = MASKED_SCORE, which the host decodes to -inf. Dividing
  // by safe_l = 1 there keeps 0/0 and log 0 from ever being evaluated.
  if (row_ok) {
    let safe_l = select(l, 1.0, l == 0.0);
    chunk_store_o(&o_reg, (b * params.n_q + qi) * DV, mine * 4u, safe_l);
    if (lane == 0u) {
      lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
    }
  }
}

// 64 floats of one row: a lane's share of q or of o.
alias Chunk = array<vec4<f32>, CHUNK4>;

fn ceil_div(a: u32, b: u32) -> u32 {
  return (a + b - 1u) / b;
}

// --- chunk helpers (float16 storage, float32 arithmetic) ---

// How many of the four elements at column `col` of a row of `width` exist (0..4).
fn present(col: u32, width: u32) -> u32 {
  return select(min(width - col, 4u), 0u, col >= width);
}

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

// Four elements of query row `row` (flat index of its first element) at column `col`, scaled;
// those past D, and all of them when `ok` is false, read as 0.
fn q_slot(row: u32, col: u32, ok: bool, scale: f32) -> vec4<f32> {
  return scale * load_q4(row + col, select(0u, present(col, D), ok));
}

// A lane's 64 dims of query row `row` from column `c`, scaled (constant indices into q).
fn chunk_load_q(row: u32, c: u32, ok: bool, scale: f32) -> Chunk {
  return Chunk(
    q_slot(row, c, ok, scale), q_slot(row, c + 4u, ok, scale),
    q_slot(row, c + 8u, ok, scale), q_slot(row, c + 12u, ok, scale),
    q_slot(row, c + 16u, ok, scale), q_slot(row, c + 20u, ok, scale),
    q_slot(row, c + 24u, ok, scale), q_slot(row, c + 28u, ok, scale),
    q_slot(row, c + 32u, ok, scale), q_slot(row, c + 36u, ok, scale),
    q_slot(row, c + 40u, ok, scale), q_slot(row, c + 44u, ok, scale),
    q_slot(row, c + 48u, ok, scale), q_slot(row, c + 52u, ok, scale),
    q_slot(row, c + 56u, ok, scale), q_slot(row, c + 60u, ok, scale));
}

// Write y = o / safe_l, four elements at column `col` of output row `row`, those that exist.
fn store_o4(row: u32, col: u32, y: vec4<f32>) {
  let n = present(col, DV);
  if (n > 0u) { o[row + col] = f16(y.x); }
  if (n > 1u) { o[row + col + 1u] = f16(y.y); }
  if (n > 2u) { o[row + col + 2u] = f16(y.z); }
  if (n > 3u) { o[row + col + 3u] = f16(y.w); }
}

// A lane's 64 dims of o, divided by safe_l, into output row `row` from column `col0`.
fn chunk_store_o(o_reg: ptr<function, Chunk>, row: u32, col0: u32, safe_l: f32) {
  store_o4(row, col0, (*o_reg)[0] / safe_l);
  store_o4(row, col0 + 4u, (*o_reg)[1] / safe_l);
  store_o4(row, col0 + 8u, (*o_reg)[2] / safe_l);
  store_o4(row, col0 + 12u, (*o_reg)[3] / safe_l);
  store_o4(row, col0 + 16u, (*o_reg)[4] / safe_l);
  store_o4(row, col0 + 20u, (*o_reg)[5] / safe_l);
  store_o4(row, col0 + 24u, (*o_reg)[6] / safe_l);
  store_o4(row, col0 + 28u, (*o_reg)[7] / safe_l);
  store_o4(row, col0 + 32u, (*o_reg)[8] / safe_l);
  store_o4(row, col0 + 36u, (*o_reg)[9] / safe_l);
  store_o4(row, col0 + 40u, (*o_reg)[10] / safe_l);
  store_o4(row, col0 + 44u, (*o_reg)[11] / safe_l);
  store_o4(row, col0 + 48u, (*o_reg)[12] / safe_l);
  store_o4(row, col0 + 52u, (*o_reg)[13] / safe_l);
  store_o4(row, col0 + 56u, (*o_reg)[14] / safe_l);
  store_o4(row, col0 + 60u, (*o_reg)[15] / safe_l);
}

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


// May query `qi` of batch entry `b` attend key `kj`?
fn allowed(b: u32, qi: u32, kj: u32) -> bool {
  if (params.causal != 0u && kj > qi) {
    return false;
  }
  if (params.has_mask != 0u) {
    let bit = b * params.mask_batch_stride + qi * params.mask_row_stride + kj;
    return ((mask_bits[bit / 32u] >> (bit % 32u)) & 1u) != 0u;
  }
  return true;
}
