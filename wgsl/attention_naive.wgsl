// attention_naive.wgsl — standard attention that materialises S and P in global memory: the
// baseline FlashAttention is measured against (Dao et al. 2022, arXiv:2205.14135, Algorithm 0).
//
//   S = scale · Q Kᵀ   (written to s_buf)      P = softmax(S)   (written over S in s_buf)
//   O = P V            lse = log Σ_j exp(S_ij)
//
// One invocation per query row; no workgroup memory. Each row goes to global memory and back
// three times (S, then exp(S - m), then P), which is the N x N traffic the tiled kernel
// (flash_fwd.wgsl) never makes. Same bindings 0-6, Params and mask convention as
// flash_fwd.wgsl, so the host builds both dispatches the same way, plus the scratch s_buf.
//
// Override constants: D, DV (head dims), WG (invocations per workgroup).
// Global memory, f32 row-major: q (B, Nq, D), k (B, Nk, D), v (B, Nk, DV), o (B, Nq, DV),
// lse (B, Nq), s_buf (B, Nq, Nk). Dispatch: workgroups (ceil(Nq / WG), 1, B).

// A masked score; -inf is not portable in WGSL (see flash_fwd.wgsl, where this is explained).
const MASKED_SCORE: f32 = -1.0e30;

override D: u32;
override DV: u32;
override WG: u32;

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
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> mask_bits: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;
@group(0) @binding(7) var<storage, read_write> s_buf: array<f32>;

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
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let qi = gid.x;                          // query row
  let b = gid.z;                           // batch entry
  if (qi >= params.n_q) {
    return;
  }
  let row = (b * params.n_q + qi) * params.n_k;   // start of S[b, qi, :] in s_buf

  // S row and its max.
  var m = MASKED_SCORE;
  for (var kj = 0u; kj < params.n_k; kj++) {
    var s = MASKED_SCORE;
    if (allowed(b, qi, kj)) {
      var dot = 0.0;
      for (var x = 0u; x < D; x++) {
        dot += q[(b * params.n_q + qi) * D + x] * k[(b * params.n_k + kj) * D + x];
      }
      s = params.scale * dot;
    }
    s_buf[row + kj] = s;
    m = max(m, s);
  }

  // exp(S - m) over S, and its sum.
  var l = 0.0;
  for (var kj = 0u; kj < params.n_k; kj++) {
    let s = s_buf[row + kj];
    let p = select(exp(s - m), 0.0, s == MASKED_SCORE);
    s_buf[row + kj] = p;
    l += p;
  }

  // P = exp(S - m) / l over S. A row with no allowed key has l = 0 and keeps P = 0.
  let safe_l = select(l, 1.0, l == 0.0);
  for (var kj = 0u; kj < params.n_k; kj++) {
    s_buf[row + kj] = s_buf[row + kj] / safe_l;
  }

  // O = P V.
  for (var c = 0u; c < DV; c++) {
    var acc = 0.0;
    for (var kj = 0u; kj < params.n_k; kj++) {
      acc += s_buf[row + kj] * v[(b * params.n_k + kj) * DV + c];
    }
    o[(b * params.n_q + qi) * DV + c] = acc;
  }
  lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
}
