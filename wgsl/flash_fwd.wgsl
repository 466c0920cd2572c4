// flash_fwd.wgsl — exact attention, tiled, with an online softmax (FlashAttention forward).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Dao et al. 2022, "FlashAttention" (arXiv:2205.14135), Algorithm 1, in the loop order and
// work split of FlashAttention-2 (Dao 2023, arXiv:2307.08691, section 3): ONE WORKGROUP PER
// QUERY TILE Q_i of BR rows, and each query row owned by KS invocations ("lanes") that keep
// the row's q, its output accumulator o and its running max m and sum l in REGISTERS. Only
// the key/value tiles K_j, V_j go through workgroup memory, where every row of the workgroup
// reads them: a K/V tile is fetched from global memory once per BR query rows instead of once
// per row, which is the point of tiling. The running max m and sum l are the online softmax
// of Milakov & Gimelshein 2018 (arXiv:1805.02867): when new keys raise a row's max from m to
// m_new, everything accumulated so far is rescaled by alpha = exp(m - m_new).
//
// Its NumPy re-enactment, loop for loop and name for name, is
// py/nlpcore/kernels/flash_wgsl_mirror.py; the tile plan comes from py/nlpcore/kernels/tiling.py.
//
// Override constants (set by the host from tiling.plan(...).constants(); no defaults here, so a
// pipeline cannot be built with sizes the plan did not check):
//   BR  query rows per workgroup               D    head dim of q, k
//   BC  keys per staged K/V tile (a multiple   DV   head dim of v, o
//       of 4: keys are taken four at a time)
//   KS  lanes per query row: lane s holds head dims [64·s, 64·s + 64) of its row's q and o,
//       so KS = ceil(max(D, DV) / 64)
//   SPART  length of s_part: BR·KS·BC when KS > 1, else 1 (unused)
// The workgroup has BR·KS invocations (<= 256, WebGPU's default); invocation t works on row
// t / KS of the tile as lane t % KS, so the lanes of a row sit side by side.
//
// Registers. A lane keeps 64 floats of q and 64 of o as CHUNK4 = 16 vec4s (`Chunk`), head
// dims past D or DV held as zeros. The helpers below touch them only at constant indices,
// written out: a GPU compiler keeps a private array in registers only when every index is
// known when it compiles, and sends it to (much slower) local memory when a loop indexes it.
// On the H200 the same shader with loops over the slots ran at half the speed (bench/README.md,
// "WGSL on the H200").
//
// Per four keys g .. g+3 of a staged tile, each row (all in registers when KS = 1):
//   s     = (q·k_g, q·k_g+1, q·k_g+2, q·k_g+3)        a vec4 of scores; masked -> sentinel
//   m_new = max(m, max(s));  p = exp(s - m_new);  alpha = exp(m - m_new)
//   l     = alpha · l + Σ p;  o = alpha · o + p.x·v_g + p.y·v_g+1 + p.z·v_g+2 + p.w·v_g+3
// With KS > 1 each lane first computes its partial q·k over its 64 dims for every key of the
// tile, and the KS partial sums of a row are added through s_part in workgroup memory.
// Barriers per key tile: two (before and after staging), three when KS > 1.
//
// Workgroup memory (var<workgroup>, 16 bytes per vec4<f32>, 4 per f32):
//
//   k_tile  [BC x KS·16] vec4  K_j, key c's head dims zero-padded to KS·64
//   v_tile  [BC x KS·16] vec4  V_j, likewise
//   s_part  [SPART]      f32   partial scores of the KS lanes of each row (KS > 1)
//
//   bytes = Σ roundUp(16, size) over the three arrays  <=  16384
//   e.g. d = dv = 64: KS = 1, BR = 128, BC = 28:  28·16·16 + 28·16·16 + 16 = 14352 bytes.
//   (the WebGPU spec rounds each workgroup variable up to 16 bytes when it checks
//   maxComputeWorkgroupStorageSize, and so does tiling.py)
//
// Global memory, f32, row-major, the batch index b = workgroup_id.z (leading axes flattened):
//   q (B, Nq, D)   k (B, Nk, D)   v (B, Nk, DV)   o (B, Nq, DV)   lse (B, Nq)
//   mask_bits: a bit per allowed (query, key) pair, bit index b·mask_batch_stride +
//     query·mask_row_stride + key, little-endian within each u32 word. mask_row_stride = 0 makes
//     it a key-padding mask: one row of bits per batch, shared by every query.
//
// Dispatch: workgroups (ceil(Nq / BR), 1, B).
//
// Loop budget. Mesa's lavapipe/llvmpipe (the CPU Vulkan driver wgpu-py runs on without a GPU)
// stops a shader invocation after 65535 loop iterations in total, counting every iteration of
// every loop plus one exit test per loop entered, and leaves wrong output without an error
// (gallivm's loop limiter). Here an invocation loops about once per four keys plus its share of
// the staging, so d = 64 stays within it up to tens of thousands of keys.
// nlpcore.kernels.flash_wgpu.loop_iterations counts a dispatch exactly as written, and
// flash_wgpu.run_spec refuses one over the limit on lavapipe. Browsers (Dawn on SwiftShader or
// a GPU) and GPU drivers have no such limit.

// --- sentinel begin: the tier shaders include the regions marked like this one ---
// A masked score. WGSL has no infinity literal, and an implementation may assume floats are
// finite (WGSL spec, "Floating Point Evaluation"), so -inf is not portable: an expression
// that makes it may give any value. The sentinel stays finite under every operation applied
// to it here: as a running max it gives alpha = exp(-1e30 - m) = 0 with no overflow, and a
// masked score's probability is set to exactly 0 by comparison, not computed from exp.
// Valid inputs keep |scale · q·k| far below 1e30 (the host checks).
const MASKED_SCORE: f32 = -1.0e30;
// --- sentinel end ---

// --- overrides begin ---
// vec4 slots of q (and of o) one lane holds in registers: 64 floats.
const CHUNK4: u32 = 16u;

// --- sizes begin ---
override BR: u32;
override BC: u32;
override D: u32;
override DV: u32;
override KS: u32;
// --- sizes end ---
override SPART: u32;
// --- overrides end ---

// --- params begin ---
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
// --- params end ---

@group(0) @binding(0) var<uniform> params: Params;
// --- bindings begin ---
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> mask_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;
// --- bindings end ---

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_part: array<f32, SPART>;

// --- main begin ---
// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // --- prologue begin ---
  // --- query tile begin ---
  let i = wg.x;                            // query tile index
  let b = wg.z;                            // batch entry
  let q0 = i * BR;                         // first query row of the tile
  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile
  // --- query tile end ---
  let r = t / KS;                          // this invocation's row within the tile
  let lane = t % KS;                       // and its 64 head dims of that row
  let row_ok = r < rows;                   // rows past the end compute but store nothing
  let qi = q0 + r;                         // the query row, when row_ok
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile
  let mine = lane * CHUNK4;                // this lane's first slot within such a row
  // --- prologue end ---

  // This lane's 64 dims of q, pre-multiplied by the scale (so scores come out scaled);
  // o = 0, m = MASKED_SCORE, l = 0.
  var q_reg = chunk_load_q((b * params.n_q + qi) * D, mine * 4u, row_ok, params.scale);
  var o_reg = Chunk();
  var m = MASKED_SCORE;
  var l = 0.0;

  // --- key tiles begin ---
  // Key tiles j = 0 .. j_end-1. With causal masking, tiles that start after this query tile's
  // last row are skipped outright (every score in them is masked): j_end is ceil((q0 + rows) /
  // BC), the exclusive bound, clamped to Tc when Nq > Nk. It depends only on the uniform params
  // and workgroup_id, so the barriers inside the loop are in uniform control flow.
  let t_c = ceil_div(params.n_k, BC);
  var j_end = t_c;
  if (params.causal != 0u) {
    j_end = min(t_c, ceil_div(q0 + rows, BC));
  }
  // --- key tiles end ---
  // --- tile start begin ---
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
  // --- tile start end ---

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

      // --- online softmax begin ---
      // Online softmax: m_new = max(m, max s), p = exp(s - m_new) (exactly 0 for the sentinel),
      // l = alpha · l + Σ p with alpha = exp(m - m_new); then o = alpha · o + Σ_u p_u · v_{g+u}.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      let p = select(exp(s - vec4<f32>(m_new)), vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE));
      let alpha = exp(m - m_new);
      l = alpha * l + (p.x + p.y) + (p.z + p.w);
      m = m_new;
      chunk_update(&o_reg, alpha, p, g * width + mine, width);
      // --- online softmax end ---
    }
  }

  // --- finish begin ---
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
  // --- finish end ---
}
// --- main end ---

// --- basics begin ---
// 64 floats of one row: a lane's share of q or of o.
alias Chunk = array<vec4<f32>, CHUNK4>;

fn ceil_div(a: u32, b: u32) -> u32 {
  return (a + b - 1u) / b;
}
// --- basics end ---

// --- chunk helpers begin: the WGSL exercise's Scratch step includes this block as it stands ---

// --- chunk io begin ---
// --- present begin ---
// How many of the four elements at column `col` of a row of `width` exist (0..4).
fn present(col: u32, width: u32) -> u32 {
  return select(min(width - col, 4u), 0u, col >= width);
}
// --- present end ---

// Four consecutive elements of a row starting at flat index `at`; only the first `n` exist,
// the rest read as 0. A row's length need not be a multiple of 4, so rows are not
// vec4-aligned in memory and are read one f32 at a time. One function per binding: a WGSL
// function cannot take a pointer to a storage buffer as a parameter.
fn load_q4(at: u32, n: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  if (n > 0u) { x.x = q[at]; }
  if (n > 1u) { x.y = q[at + 1u]; }
  if (n > 2u) { x.z = q[at + 2u]; }
  if (n > 3u) { x.w = q[at + 3u]; }
  return x;
}

fn load_k4(at: u32, n: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  if (n > 0u) { x.x = k[at]; }
  if (n > 1u) { x.y = k[at + 1u]; }
  if (n > 2u) { x.z = k[at + 2u]; }
  if (n > 3u) { x.w = k[at + 3u]; }
  return x;
}

fn load_v4(at: u32, n: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  if (n > 0u) { x.x = v[at]; }
  if (n > 1u) { x.y = v[at + 1u]; }
  if (n > 2u) { x.z = v[at + 2u]; }
  if (n > 3u) { x.w = v[at + 3u]; }
  return x;
}

// --- chunk q begin ---
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
// --- chunk q end ---

// Write y = o / safe_l, four elements at column `col` of output row `row`, those that exist.
fn store_o4(row: u32, col: u32, y: vec4<f32>) {
  let n = present(col, DV);
  if (n > 0u) { o[row + col] = y.x; }
  if (n > 1u) { o[row + col + 1u] = y.y; }
  if (n > 2u) { o[row + col + 2u] = y.z; }
  if (n > 3u) { o[row + col + 3u] = y.w; }
}

// --- chunk o begin ---
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
// --- chunk o end ---
// --- chunk io end ---

// q·k over one lane's 64 dims, k starting at slot `at` of k_tile (constant indices into q).
fn chunk_dot(q_reg: ptr<function, Chunk>, at: u32) -> f32 {
  let a = dot((*q_reg)[0], k_tile[at]) + dot((*q_reg)[1], k_tile[at + 1u])
        + dot((*q_reg)[2], k_tile[at + 2u]) + dot((*q_reg)[3], k_tile[at + 3u]);
  let b = dot((*q_reg)[4], k_tile[at + 4u]) + dot((*q_reg)[5], k_tile[at + 5u])
        + dot((*q_reg)[6], k_tile[at + 6u]) + dot((*q_reg)[7], k_tile[at + 7u]);
  let c = dot((*q_reg)[8], k_tile[at + 8u]) + dot((*q_reg)[9], k_tile[at + 9u])
        + dot((*q_reg)[10], k_tile[at + 10u]) + dot((*q_reg)[11], k_tile[at + 11u]);
  let d = dot((*q_reg)[12], k_tile[at + 12u]) + dot((*q_reg)[13], k_tile[at + 13u])
        + dot((*q_reg)[14], k_tile[at + 14u]) + dot((*q_reg)[15], k_tile[at + 15u]);
  return (a + b) + (c + d);
}

// --- chunk update begin ---
// o = alpha · o + p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over one lane's 64 dims, where value
// row u starts at slot at + u·stride of v_tile (constant indices into o).
fn chunk_update(o_reg: ptr<function, Chunk>, alpha: f32, p: vec4<f32>, at: u32, stride: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  (*o_reg)[0] = alpha * (*o_reg)[0] + p.x * v_tile[at] + p.y * v_tile[a1] + p.z * v_tile[a2] + p.w * v_tile[a3];
  (*o_reg)[1] = alpha * (*o_reg)[1] + p.x * v_tile[at + 1u] + p.y * v_tile[a1 + 1u] + p.z * v_tile[a2 + 1u] + p.w * v_tile[a3 + 1u];
  (*o_reg)[2] = alpha * (*o_reg)[2] + p.x * v_tile[at + 2u] + p.y * v_tile[a1 + 2u] + p.z * v_tile[a2 + 2u] + p.w * v_tile[a3 + 2u];
  (*o_reg)[3] = alpha * (*o_reg)[3] + p.x * v_tile[at + 3u] + p.y * v_tile[a1 + 3u] + p.z * v_tile[a2 + 3u] + p.w * v_tile[a3 + 3u];
  (*o_reg)[4] = alpha * (*o_reg)[4] + p.x * v_tile[at + 4u] + p.y * v_tile[a1 + 4u] + p.z * v_tile[a2 + 4u] + p.w * v_tile[a3 + 4u];
  (*o_reg)[5] = alpha * (*o_reg)[5] + p.x * v_tile[at + 5u] + p.y * v_tile[a1 + 5u] + p.z * v_tile[a2 + 5u] + p.w * v_tile[a3 + 5u];
  (*o_reg)[6] = alpha * (*o_reg)[6] + p.x * v_tile[at + 6u] + p.y * v_tile[a1 + 6u] + p.z * v_tile[a2 + 6u] + p.w * v_tile[a3 + 6u];
  (*o_reg)[7] = alpha * (*o_reg)[7] + p.x * v_tile[at + 7u] + p.y * v_tile[a1 + 7u] + p.z * v_tile[a2 + 7u] + p.w * v_tile[a3 + 7u];
  (*o_reg)[8] = alpha * (*o_reg)[8] + p.x * v_tile[at + 8u] + p.y * v_tile[a1 + 8u] + p.z * v_tile[a2 + 8u] + p.w * v_tile[a3 + 8u];
  (*o_reg)[9] = alpha * (*o_reg)[9] + p.x * v_tile[at + 9u] + p.y * v_tile[a1 + 9u] + p.z * v_tile[a2 + 9u] + p.w * v_tile[a3 + 9u];
  (*o_reg)[10] = alpha * (*o_reg)[10] + p.x * v_tile[at + 10u] + p.y * v_tile[a1 + 10u] + p.z * v_tile[a2 + 10u] + p.w * v_tile[a3 + 10u];
  (*o_reg)[11] = alpha * (*o_reg)[11] + p.x * v_tile[at + 11u] + p.y * v_tile[a1 + 11u] + p.z * v_tile[a2 + 11u] + p.w * v_tile[a3 + 11u];
  (*o_reg)[12] = alpha * (*o_reg)[12] + p.x * v_tile[at + 12u] + p.y * v_tile[a1 + 12u] + p.z * v_tile[a2 + 12u] + p.w * v_tile[a3 + 12u];
  (*o_reg)[13] = alpha * (*o_reg)[13] + p.x * v_tile[at + 13u] + p.y * v_tile[a1 + 13u] + p.z * v_tile[a2 + 13u] + p.w * v_tile[a3 + 13u];
  (*o_reg)[14] = alpha * (*o_reg)[14] + p.x * v_tile[at + 14u] + p.y * v_tile[a1 + 14u] + p.z * v_tile[a2 + 14u] + p.w * v_tile[a3 + 14u];
  (*o_reg)[15] = alpha * (*o_reg)[15] + p.x * v_tile[at + 15u] + p.y * v_tile[a1 + 15u] + p.z * v_tile[a2 + 15u] + p.w * v_tile[a3 + 15u];
}
// --- chunk update end ---

// --- chunk helpers end ---

// --- allowed begin ---
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
// --- allowed end ---
