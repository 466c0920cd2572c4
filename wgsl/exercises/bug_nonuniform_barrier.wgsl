// Planted bug for the browser test: a barrier in non-uniform control flow (it depends on the
// invocation index t). Tint (Chromium) rejects the shader at compile time; naga may accept it.
//
// flash_fwd.wgsl — exact attention, tiled, with an online softmax (FlashAttention forward).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Dao et al. 2022, "FlashAttention" (arXiv:2205.14135), Algorithm 1, in the loop order of
// FlashAttention-2 (Dao 2023, arXiv:2307.08691): ONE WORKGROUP PER QUERY TILE Q_i, which keeps
// Q_i and its output accumulator on chip and streams the key/value tiles K_j, V_j through
// workgroup memory. The running max m and sum l are the online softmax of Milakov &
// Gimelshein 2018 (arXiv:1805.02867): when a new tile raises a row's max from m_old to m_new,
// everything accumulated so far is rescaled by alpha = exp(m_old - m_new).
//
// Its NumPy re-enactment, loop for loop and name for name, is
// py/nlpcore/kernels/flash_wgsl_mirror.py; the tile plan comes from py/nlpcore/kernels/tiling.py.
//
// Override constants (set by the host from tiling.plan(...).constants(); no defaults here, so a
// pipeline cannot be built with sizes the plan did not check):
//   BR  query rows per workgroup (Br)      D   head dim of q, k
//   BC  key rows per staged tile (Bc)      DV  head dim of v, o
//   WG  invocations per workgroup; every loop below strides by WG, so it only shares out work.
//
// Workgroup memory (var<workgroup>, all f32, 4 bytes per element):
//
//   q_tile    [BR x D ]  Q_i, loaded once         ┐
//   k_tile    [BC x D ]  K_j, reloaded per j      │ staged inputs
//   v_tile    [BC x DV]  V_j, reloaded per j      ┘
//   s_tile    [BR x BC]  S_ij, then P~_ij in place
//   o_tile    [BR x DV]  unnormalised O_i
//   m_row     [BR]       running max
//   l_row     [BR]       running sum of exp(s - m)
//   alpha_row [BR]       exp(m_old - m_new) of the current step
//
//   bytes = Σ roundUp(16, 4 · elements) over the eight arrays  <=  16384
//         ≈ 4 · (BR·D + BC·D + BC·DV + BR·BC + BR·DV + 3·BR)
//   (the WebGPU spec rounds each workgroup variable up to 16 bytes when it checks
//   maxComputeWorkgroupStorageSize, and so does tiling.py)
//   e.g. d = dv = 64, BR = 16, BC = 8:  4 · (1024 + 512 + 512 + 128 + 1024 + 3·16) = 12992 bytes;
//        d = dv = 1020, BR = BC = 1:    4 · 4 · 1020 + 4 · 16 = 16384 bytes, the largest d.
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
// (gallivm's loop limiter). Each invocation here does 1/WG of a query tile's work, so its count
// grows with the N / BC key tiles; per key tile it is about
//   ceil(BC·D/WG) + ceil(BC·DV/WG)                              staging K_j, V_j
//   + ceil(BR·BC/WG) · (D/4 + D%4 + 3)                           scores, four products a step
//   + ceil(BR/WG) · (2·BC + 3) + ceil(BR·ceil(DV/4)/WG) · (BC + 2)   softmax; O, four columns a step
//   + a few,
// without counting any help from the compiler unrolling loops (Mesa does unroll short loops
// of constant trip count). With the default plan for d = dv = 64 (BR = 16, BC = 8, WG = 64)
// that is 119 per key tile: about 61,000 at N = 4096, within the limit up to N = 4,400 keys;
// d = dv = 32: up to 4,816; d = dv = 128 (BR = 8, BC = 4): up to 2,844; d = dv = 256: 1,168.
// nlpcore.kernels.flash_wgpu.loop_iterations computes this count for a dispatch, and
// flash_wgpu.run_spec refuses one over the limit on lavapipe. Browsers (Dawn on SwiftShader or
// a GPU) have no such limit.

// A masked score. WGSL has no infinity literal, and an implementation may assume floats are
// finite (WGSL spec, "Floating Point Evaluation"), so -inf is not portable: an expression
// that makes it may give any value. The sentinel stays finite under every operation applied
// to it here: as a running max it gives alpha = exp(-1e30 - m) = 0 with no overflow, and a
// masked score's probability is set to exactly 0 by comparison, not computed from exp.
// Valid inputs keep |scale · q·k| far below 1e30 (the host checks).
const MASKED_SCORE: f32 = -1.0e30;

override BR: u32;
override BC: u32;
override D: u32;
override DV: u32;
override WG: u32;

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

var<workgroup> q_tile: array<f32, BR * D>;
var<workgroup> k_tile: array<f32, BC * D>;
var<workgroup> v_tile: array<f32, BC * DV>;
var<workgroup> s_tile: array<f32, BR * BC>;
var<workgroup> o_tile: array<f32, BR * DV>;
var<workgroup> m_row: array<f32, BR>;
var<workgroup> l_row: array<f32, BR>;
var<workgroup> alpha_row: array<f32, BR>;

fn ceil_div(a: u32, b: u32) -> u32 {
  return (a + b - 1u) / b;
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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let i = wg.x;                            // query tile index
  let b = wg.z;                            // batch entry
  let q0 = i * BR;                         // first query row of the tile
  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile

  // Load Q_i (rows past the end read as 0), clear O_i, m = MASKED_SCORE, l = 0.
  for (var e = t; e < BR * D; e += WG) {
    let r = e / D;
    var x = 0.0;
    if (r < rows) {
      x = q[(b * params.n_q + q0 + r) * D + e % D];
    }
    q_tile[e] = x;
  }
  for (var e = t; e < BR * DV; e += WG) {
    o_tile[e] = 0.0;
  }
  for (var r = t; r < BR; r += WG) {
    m_row[r] = MASKED_SCORE;
    l_row[r] = 0.0;
  }

  // Key tiles j = 0 .. j_end-1. With causal masking, tiles that start after this query tile's
  // last row are skipped outright (every score in them is masked). j_end depends only on the
  // uniform params and workgroup_id, so the barriers inside the loop are in uniform control flow.
  let t_c = ceil_div(params.n_k, BC);
  var j_end = t_c;
  if (params.causal != 0u) {
    j_end = min(t_c, ceil_div(q0 + rows, BC));
  }
  for (var j = 0u; j < j_end; j++) {
    workgroupBarrier();                    // everyone is done with the previous K_j, V_j, P~
    let k0 = j * BC;
    let cols = min(BC, params.n_k - k0);   // Bc, or fewer in the ragged last tile

    // Stage K_j and V_j (rows past the end read as 0).
    for (var e = t; e < BC * D; e += WG) {
      let c = e / D;
      var x = 0.0;
      if (c < cols) {
        x = k[(b * params.n_k + k0 + c) * D + e % D];
      }
      k_tile[e] = x;
    }
    for (var e = t; e < BC * DV; e += WG) {
      let c = e / DV;
      var x = 0.0;
      if (c < cols) {
        x = v[(b * params.n_k + k0 + c) * DV + e % DV];
      }
      v_tile[e] = x;
    }
    if (t < BR) {
      workgroupBarrier();                  // only the invocations that own a row wait: not allowed
    }

    // S_ij = scale · Q_i K_jᵀ, one score per step; masked and out-of-range scores get the sentinel.
    for (var e = t; e < BR * BC; e += WG) {
      let r = e / BC;
      let c = e % BC;
      var s = MASKED_SCORE;
      if (r < rows && c < cols && allowed(b, q0 + r, k0 + c)) {
        var dot = 0.0;
        var x = 0u;
        for (; x + 4u <= D; x += 4u) {       // four products per iteration (see "Loop budget")
          let qx = r * D + x;
          let kx = c * D + x;
          dot += q_tile[qx] * k_tile[kx] + q_tile[qx + 1u] * k_tile[kx + 1u]
               + q_tile[qx + 2u] * k_tile[kx + 2u] + q_tile[qx + 3u] * k_tile[kx + 3u];
        }
        for (; x < D; x++) {                 // the last D % 4 products
          dot += q_tile[r * D + x] * k_tile[c * D + x];
        }
        s = params.scale * dot;
      }
      s_tile[e] = s;
    }
    workgroupBarrier();

    // Online softmax, one invocation per row: m_new = max(m_old, rowmax S), P~ = exp(S - m_new)
    // (written over S), l = alpha · l + rowsum P~ with alpha = exp(m_old - m_new).
    for (var r = t; r < BR; r += WG) {
      let m_old = m_row[r];
      var m_new = m_old;
      for (var c = 0u; c < BC; c++) {
        m_new = max(m_new, s_tile[r * BC + c]);
      }
      var row_sum = 0.0;
      for (var c = 0u; c < BC; c++) {
        let s = s_tile[r * BC + c];
        let p = select(exp(s - m_new), 0.0, s == MASKED_SCORE);
        s_tile[r * BC + c] = p;
        row_sum += p;
      }
      let alpha = exp(m_old - m_new);
      alpha_row[r] = alpha;
      l_row[r] = alpha * l_row[r] + row_sum;
      m_row[r] = m_new;
    }
    workgroupBarrier();

    // O_i = diag(alpha) O_i + P~_ij V_j, four output columns c .. c+3 of a row per step: they
    // share each P~ load, and one step counts once against lavapipe's loop limit. In a last
    // group that runs past DV the extra lanes read column DV - 1 again and are not stored.
    let groups = ceil_div(DV, 4u);
    for (var e = t; e < BR * groups; e += WG) {
      let r = e / groups;
      let c = (e % groups) * 4u;
      let c1 = min(c + 1u, DV - 1u);
      let c2 = min(c + 2u, DV - 1u);
      let c3 = min(c + 3u, DV - 1u);
      var acc = vec4<f32>(0.0);
      for (var kk = 0u; kk < BC; kk++) {
        let vk = kk * DV;
        acc += s_tile[r * BC + kk] * vec4<f32>(v_tile[vk + c], v_tile[vk + c1], v_tile[vk + c2], v_tile[vk + c3]);
      }
      let alpha = alpha_row[r];
      let oc = r * DV + c;
      o_tile[oc] = alpha * o_tile[oc] + acc.x;
      if (c + 1u < DV) {
        o_tile[oc + 1u] = alpha * o_tile[oc + 1u] + acc.y;
      }
      if (c + 2u < DV) {
        o_tile[oc + 2u] = alpha * o_tile[oc + 2u] + acc.z;
      }
      if (c + 3u < DV) {
        o_tile[oc + 3u] = alpha * o_tile[oc + 3u] + acc.w;
      }
    }
  }
  workgroupBarrier();

  // O_i = diag(l)^-1 O_i and lse = m + log l. A row with no allowed key has l = 0 and O_i = 0
  // (every P~ was exactly 0): it gets o = 0 and lse = MASKED_SCORE, which the host decodes to
  // -inf. Dividing by safe_l = 1 there keeps 0/0 and log 0 from ever being evaluated.
  for (var e = t; e < BR * DV; e += WG) {
    let r = e / DV;
    if (r < rows) {
      let l = l_row[r];
      let safe_l = select(l, 1.0, l == 0.0);
      o[(b * params.n_q + q0 + r) * DV + e % DV] = o_tile[e] / safe_l;
    }
  }
  for (var r = t; r < BR; r += WG) {
    if (r < rows) {
      let l = l_row[r];
      let safe_l = select(l, 1.0, l == 0.0);
      lse[b * params.n_q + q0 + r] = select(m_row[r] + log(safe_l), MASKED_SCORE, l == 0.0);
    }
  }
}
