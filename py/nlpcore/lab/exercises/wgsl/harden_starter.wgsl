// Harden — make the Scratch kernel correct for every input the host may send.
//
//   O = softmax(scale · Q Kᵀ) V        lse = log Σ_j exp(scale · q·k_j)        (per query row)
//
// One workgroup per query tile Q_i (BR rows) keeps Q_i and its output accumulator O_i in
// workgroup memory and streams the key/value tiles K_j, V_j (BC rows each) through it
// (Dao et al. 2022, arXiv:2205.14135, Algorithm 1, in the loop order of FlashAttention-2,
// Dao 2023, arXiv:2307.08691). Each row keeps a running max m and sum l; when a new tile raises
// the max from m_old to m_new, what was accumulated is rescaled by alpha = exp(m_old - m_new)
// (Milakov & Gimelshein 2018, arXiv:1805.02867).
//
// This is the Scratch kernel. It assumes Nq is a multiple of BR and Nk a multiple of BC, and it
// ignores params.causal and the mask. Your task (TODO H1..H5 below): ragged last tiles (rows and
// keys past the end), Nq != Nk, causal masking (query i sees key j only if j <= i), a mask given
// as bits (binding 4), rows with no allowed key (o = 0 and lse = MASKED_SCORE, never NaN), any
// head dim, and many workgroups. Barriers must stay in uniform control flow.

const MASKED_SCORE: f32 = -1.0e30;  // "minus infinity" for a running max: WGSL has no portable -inf

override BR: u32;   // query rows per workgroup
override BC: u32;   // key rows per staged tile
override D: u32;    // head dim of q, k
override DV: u32;   // head dim of v, o
override WG: u32;   // invocations per workgroup; every loop strides by WG

struct Params {
  n_q: u32,
  n_k: u32,
  causal: u32,
  has_mask: u32,
  mask_batch_stride: u32,
  mask_row_stride: u32,
  scale: f32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;              // (B, Nq, D)
@group(0) @binding(2) var<storage, read> k: array<f32>;              // (B, Nk, D)
@group(0) @binding(3) var<storage, read> v: array<f32>;              // (B, Nk, DV)
// mask_bits: bit b·mask_batch_stride + query·mask_row_stride + key is set when that query may
// attend that key (little-endian within each u32); read it only when params.has_mask != 0.
@group(0) @binding(4) var<storage, read> mask_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;        // (B, Nq, DV)
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;      // (B, Nq)

// Workgroup memory: 4 · (BR·D + BC·D + BC·DV + BR·BC + BR·DV + 3·BR) bytes <= 16384.
var<workgroup> q_tile: array<f32, BR * D>;      // Q_i
var<workgroup> k_tile: array<f32, BC * D>;      // K_j
var<workgroup> v_tile: array<f32, BC * DV>;     // V_j
var<workgroup> s_tile: array<f32, BR * BC>;     // S_ij, then P~_ij in place
var<workgroup> o_tile: array<f32, BR * DV>;     // unnormalised O_i
var<workgroup> m_row: array<f32, BR>;           // running max
var<workgroup> l_row: array<f32, BR>;           // running sum of exp(s - m)
var<workgroup> alpha_row: array<f32, BR>;       // exp(m_old - m_new) of this step

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let b = wg.z;          // batch entry
  let q0 = wg.x * BR;    // first query row of this tile

  // TODO H1: the last query tile may have fewer than BR rows: read no q row past Nq (use 0),
  //          and write no o/lse row past Nq at the end.
  // Load Q_i; O_i = 0, m = MASKED_SCORE, l = 0.
  for (var e = t; e < BR * D; e += WG) {
    q_tile[e] = q[(b * params.n_q + q0) * D + e];
  }
  for (var e = t; e < BR * DV; e += WG) {
    o_tile[e] = 0.0;
  }
  for (var r = t; r < BR; r += WG) {
    m_row[r] = MASKED_SCORE;
    l_row[r] = 0.0;
  }

  // TODO H2: the last key tile may have fewer than BC keys; with params.causal != 0, tiles that
  //          start after this query tile's last row need not be visited at all.
  let t_c = params.n_k / BC;
  for (var j = 0u; j < t_c; j++) {
    workgroupBarrier();    // everyone is done with the previous K_j, V_j and P~
    let k0 = j * BC;
    for (var e = t; e < BC * D; e += WG) {
      k_tile[e] = k[(b * params.n_k + k0) * D + e];
    }
    for (var e = t; e < BC * DV; e += WG) {
      v_tile[e] = v[(b * params.n_k + k0) * DV + e];
    }
    workgroupBarrier();    // K_j and V_j are staged

    // TODO H3: keys past Nk, keys after the query (causal) and masked keys get MASKED_SCORE.
    // S_ij = scale · Q_i K_jᵀ
    for (var e = t; e < BR * BC; e += WG) {
      let r = e / BC;
      let c = e % BC;
      var dot = 0.0;
      for (var x = 0u; x < D; x++) {
        dot += q_tile[r * D + x] * k_tile[c * D + x];
      }
      s_tile[e] = params.scale * dot;
    }
    workgroupBarrier();    // S_ij is complete

    // One invocation per row: m_new, P~ = exp(S - m_new) over S, l = alpha · l + rowsum P~.
    for (var r = t; r < BR; r += WG) {
      let m_old = m_row[r];
      var m_new = m_old;
      for (var c = 0u; c < BC; c++) {
        m_new = max(m_new, s_tile[r * BC + c]);
      }
      var row_sum = 0.0;
      for (var c = 0u; c < BC; c++) {
        let p = exp(s_tile[r * BC + c] - m_new);  // TODO H4: a masked score's p must be exactly 0
        s_tile[r * BC + c] = p;
        row_sum += p;
      }
      let alpha = exp(m_old - m_new);
      alpha_row[r] = alpha;
      l_row[r] = alpha * l_row[r] + row_sum;
      m_row[r] = m_new;
    }
    workgroupBarrier();    // P~ and alpha are ready

    // O_i = diag(alpha) O_i + P~_ij V_j
    for (var e = t; e < BR * DV; e += WG) {
      let r = e / DV;
      let c = e % DV;
      var acc = 0.0;
      for (var kk = 0u; kk < BC; kk++) {
        acc += s_tile[r * BC + kk] * v_tile[kk * DV + c];
      }
      o_tile[e] = alpha_row[r] * o_tile[e] + acc;
    }
  }
  workgroupBarrier();      // O_i, l and m are final

  // TODO H5: a row with no allowed key has l = 0: write o = 0 and lse = MASKED_SCORE, no NaN.
  // O_i = diag(l)^-1 O_i, lse = m + log l
  for (var e = t; e < BR * DV; e += WG) {
    o[(b * params.n_q + q0) * DV + e] = o_tile[e] / l_row[e / DV];
  }
  for (var r = t; r < BR; r += WG) {
    lse[b * params.n_q + q0 + r] = m_row[r] + log(l_row[r]);
  }
}
