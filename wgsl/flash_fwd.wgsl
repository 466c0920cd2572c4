// flash_fwd.wgsl — exact attention, tiled, with an online softmax (FlashAttention forward).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Dao et al. 2022, "FlashAttention" (arXiv:2205.14135), Algorithm 1, in the loop order and
// work split of FlashAttention-2 (Dao 2023, arXiv:2307.08691, section 3): ONE WORKGROUP PER
// QUERY TILE Q_i of BR rows, and each query row owned by KS invocations that keep the row's
// slice of q, its output accumulator o and its running max m and sum l in REGISTERS. Only the
// key/value tiles K_j, V_j go through workgroup memory, where every row of the workgroup reads
// them: a K/V tile is fetched from global memory once per BR query rows instead of once per
// row, which is the whole point of tiling. The running max m and sum l are the online softmax
// of Milakov & Gimelshein 2018 (arXiv:1805.02867): when a new tile raises a row's max from
// m_old to m_new, everything accumulated so far is rescaled by alpha = exp(m_old - m_new).
//
// Its NumPy re-enactment, loop for loop and name for name, is
// py/nlpcore/kernels/flash_wgsl_mirror.py; the tile plan comes from py/nlpcore/kernels/tiling.py.
//
// Override constants (set by the host from tiling.plan(...).constants(); no defaults here, so a
// pipeline cannot be built with sizes the plan did not check):
//   BR  query rows per workgroup               D    head dim of q, k
//   BC  keys per staged K/V tile (<= MAX_BC)   DV   head dim of v, o
//   KS  invocations per query row: lane s of a row owns vec4 slots [s·DL4, (s+1)·DL4) of its q
//       and [s·DVL4, (s+1)·DVL4) of its o, at most CHUNK4 each (the register arrays' size)
//   SPART  length of s_part: BR·KS·BC when KS > 1, else 1 (unused)
// The workgroup has BR·KS invocations (<= 256, WebGPU's default); invocation t works on row
// t / KS of the tile as lane t % KS, so the lanes of a row sit side by side in one subgroup.
//
// Per key tile an invocation does, in registers:
//   s[c]  = q_slice · k_slice(c)            partial scores over its slice of the head dims
//           (KS > 1: the KS partial sums of a row are added through s_part in workgroup memory)
//   m_new = max(m, max_c s[c]);  p[c] = exp(s[c] - m_new);  alpha = exp(m - m_new)
//   l     = alpha · l + Σ_c p[c];  o_slice = alpha · o_slice + Σ_c p[c] · v_slice(c)
// Scores never leave the invocation (KS = 1), and two barriers per key tile fence the staging.
//
// Workgroup memory (var<workgroup>, 4 bytes per f32, 16 per vec4<f32>):
//
//   k_tile  [BC x KS·DL4 ] vec4  K_j, key c's head dims zero-padded to KS·DL4 vec4 slots
//   v_tile  [BC x KS·DVL4] vec4  V_j, likewise
//   s_part  [SPART]        f32   partial scores of the KS lanes of each row (KS > 1)
//
//   bytes = Σ roundUp(16, size) over the three arrays  <=  16384
//   e.g. d = dv = 64: KS = 1, DL4 = DVL4 = 16, BR = 64, BC = 28:
//        28·16·16 + 28·16·16 + 16 = 14352 bytes.
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
// (gallivm's loop limiter). Per key an invocation loops about 2·(DL4/4 + 2) + 3 times (the
// score and the O update go four vec4 slots a step), so d = 64 stays within it up to about
// 4,000 keys. nlpcore.kernels.flash_wgpu.loop_iterations counts a dispatch exactly as written,
// and flash_wgpu.run_spec refuses one over the limit on lavapipe. Browsers (Dawn on
// SwiftShader or a GPU) and GPU drivers have no such limit.

// A masked score. WGSL has no infinity literal, and an implementation may assume floats are
// finite (WGSL spec, "Floating Point Evaluation"), so -inf is not portable: an expression
// that makes it may give any value. The sentinel stays finite under every operation applied
// to it here: as a running max it gives alpha = exp(-1e30 - m) = 0 with no overflow, and a
// masked score's probability is set to exactly 0 by comparison, not computed from exp.
// Valid inputs keep |scale · q·k| far below 1e30 (the host checks).
const MASKED_SCORE: f32 = -1.0e30;

// Register budget of one invocation: CHUNK4 vec4 slots of q and of o (64 floats each), and one
// score per key of a tile. tiling.py picks KS so that a lane's slice fits CHUNK4.
const CHUNK4: u32 = 16u;
const MAX_BC: u32 = 32u;

override BR: u32;
override BC: u32;
override D: u32;
override DV: u32;
override KS: u32;
override SPART: u32;

override D4: u32 = (D + 3u) / 4u;        // vec4 slots of a q/k row
override DV4: u32 = (DV + 3u) / 4u;      // vec4 slots of a v/o row
override DL4: u32 = (D4 + KS - 1u) / KS;   // q/k slots per lane
override DVL4: u32 = (DV4 + KS - 1u) / KS; // v/o slots per lane

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
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> mask_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> k_tile: array<vec4<f32>, BC * KS * DL4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * DVL4>;
var<workgroup> s_part: array<f32, SPART>;

fn ceil_div(a: u32, b: u32) -> u32 {
  return (a + b - 1u) / b;
}

// Four consecutive elements of a row starting at flat index `at`; only the first `n` exist
// (n = 0..4), the rest read as 0. A row's length need not be a multiple of 4, so rows are not
// vec4-aligned in memory and are read one f32 at a time.
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

// How many of the four elements at column `col` of a row of `width` exist.
fn present(col: u32, width: u32) -> u32 {
  return select(min(width - col, 4u), 0u, col >= width);
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

@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let i = wg.x;                            // query tile index
  let b = wg.z;                            // batch entry
  let q0 = i * BR;                         // first query row of the tile
  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile
  let r = t / KS;                          // this invocation's row within the tile
  let lane = t % KS;                       // and its slice of that row
  let row_ok = r < rows;                   // rows past the end compute but store nothing
  let qi = q0 + r;                         // the query row, when row_ok
  let kw = KS * DL4;                       // vec4 slots per key row in k_tile
  let vw = KS * DVL4;                      // vec4 slots per value row in v_tile

  // This lane's slice of q, pre-multiplied by the scale (scores come out scaled); o = 0,
  // m = MASKED_SCORE, l = 0. Registers: CHUNK4 slots declared, DL4 / DVL4 of them used.
  var q_reg: array<vec4<f32>, CHUNK4>;
  var o_reg: array<vec4<f32>, CHUNK4>;
  var s_reg: array<f32, MAX_BC>;
  for (var x = 0u; x < DL4; x++) {
    let col = (lane * DL4 + x) * 4u;
    var n = 0u;
    if (row_ok) {
      n = present(col, D);
    }
    q_reg[x] = params.scale * load_q4((b * params.n_q + qi) * D + col, n);
  }
  for (var x = 0u; x < DVL4; x++) {
    o_reg[x] = vec4<f32>(0.0);
  }
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
    for (var e = t; e < BC * kw; e += BR * KS) {
      let c = e / kw;
      let col = (e % kw) * 4u;
      var n = 0u;
      if (c < cols) {
        n = present(col, D);
      }
      k_tile[e] = load_k4((b * params.n_k + k0 + c) * D + col, n);
    }
    for (var e = t; e < BC * vw; e += BR * KS) {
      let c = e / vw;
      let col = (e % vw) * 4u;
      var n = 0u;
      if (c < cols) {
        n = present(col, DV);
      }
      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, n);
    }
    workgroupBarrier();

    // Partial scores over this lane's slice, four vec4 slots (16 products) a step.
    for (var c = 0u; c < BC; c++) {
      let kx = c * kw + lane * DL4;
      var acc = 0.0;
      var x = 0u;
      for (; x + 4u <= DL4; x += 4u) {
        acc += dot(q_reg[x], k_tile[kx + x]) + dot(q_reg[x + 1u], k_tile[kx + x + 1u])
             + dot(q_reg[x + 2u], k_tile[kx + x + 2u]) + dot(q_reg[x + 3u], k_tile[kx + x + 3u]);
      }
      for (; x < DL4; x++) {
        acc += dot(q_reg[x], k_tile[kx + x]);
      }
      s_reg[c] = acc;
    }

    // KS > 1: add the row's KS partial sums, in lane order, through workgroup memory (every
    // lane of the row gets the same full score). KS is an override, so this branch is uniform.
    if (KS > 1u) {
      for (var c = 0u; c < BC; c++) {
        s_part[t * BC + c] = s_reg[c];
      }
      workgroupBarrier();
      for (var c = 0u; c < BC; c++) {
        var s = 0.0;
        for (var p = 0u; p < KS; p++) {
          s += s_part[(r * KS + p) * BC + c];
        }
        s_reg[c] = s;
      }
    }

    // Online softmax in registers: masked and out-of-range scores become the sentinel, then
    // m_new = max(m, rowmax S), p = exp(S - m_new) (exactly 0 for the sentinel),
    // l = alpha · l + rowsum p with alpha = exp(m - m_new).
    var m_new = m;
    for (var c = 0u; c < BC; c++) {
      var s = MASKED_SCORE;
      if (row_ok && c < cols && allowed(b, qi, k0 + c)) {
        s = s_reg[c];
      }
      s_reg[c] = s;
      m_new = max(m_new, s);
    }
    var row_sum = 0.0;
    for (var c = 0u; c < BC; c++) {
      let s = s_reg[c];
      let p = select(exp(s - m_new), 0.0, s == MASKED_SCORE);
      s_reg[c] = p;
      row_sum += p;
    }
    let alpha = exp(m - m_new);
    l = alpha * l + row_sum;
    m = m_new;

    // o = alpha · o + Σ_c p[c] · V_j[c], over this lane's slice, four vec4 slots a step.
    for (var x = 0u; x < DVL4; x++) {
      o_reg[x] = alpha * o_reg[x];
    }
    for (var c = 0u; c < BC; c++) {
      let p = s_reg[c];
      let vx = c * vw + lane * DVL4;
      var x = 0u;
      for (; x + 4u <= DVL4; x += 4u) {
        o_reg[x] += p * v_tile[vx + x];
        o_reg[x + 1u] += p * v_tile[vx + x + 1u];
        o_reg[x + 2u] += p * v_tile[vx + x + 2u];
        o_reg[x + 3u] += p * v_tile[vx + x + 3u];
      }
      for (; x < DVL4; x++) {
        o_reg[x] += p * v_tile[vx + x];
      }
    }
  }

  // o = o / l and lse = m + log l. A row with no allowed key has l = 0 and o = 0 (every p was
  // exactly 0): it gets o = 0 and lse = MASKED_SCORE, which the host decodes to -inf. Dividing
  // by safe_l = 1 there keeps 0/0 and log 0 from ever being evaluated.
  if (row_ok) {
    let safe_l = select(l, 1.0, l == 0.0);
    let out = (b * params.n_q + qi) * DV;
    for (var x = 0u; x < DVL4; x++) {
      let col = (lane * DVL4 + x) * 4u;
      let n = present(col, DV);
      let y = o_reg[x] / safe_l;
      if (n > 0u) { o[out + col] = y.x; }
      if (n > 1u) { o[out + col + 1u] = y.y; }
      if (n > 2u) { o[out + col + 2u] = y.z; }
      if (n > 3u) { o[out + col + 3u] = y.w; }
    }
    if (lane == 0u) {
      lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
    }
  }
}
