// attention_naive.wgsl — standard attention that materialises S and P in global memory: the
// baseline FlashAttention is measured against (Dao et al. 2022, arXiv:2205.14135, Algorithm 0).
//
//   S = scale · Q Kᵀ   (written to s_buf)      P = softmax(S)   (written over S in s_buf)
//   O = P V            lse = log Σ_j exp(S_ij)
//
// Three entry points, dispatched in this order over the same bindings (the dispatch spec's
// "passes" list; WebGPU orders storage writes of one dispatch before reads of the next):
//
//   scores   one invocation per (query, key):  S_ij = scale · q_i·k_j, or the sentinel if masked
//   softmax  one workgroup per query row:      m = max_j S_ij, P_ij = exp(S_ij - m) / l, lse
//   pv       one invocation per (query, column c of V):  O_ic = Σ_j P_ij V_jc
//
// The whole N x N score matrix goes to global memory and back three times (S, then exp(S - m),
// then P), which is the traffic the tiled kernel (flash_fwd.wgsl) never makes.
//
// Why three passes and not one invocation per row doing all of it: Mesa's lavapipe/llvmpipe
// stops a shader invocation after 65535 loop iterations in total (gallivm's loop limiter),
// silently, leaving wrong output. A row-per-invocation kernel loops about (2·d + 3)·N times,
// over the limit from N ≈ 490 at d = 64. Here the longest loop any invocation runs is
// max(d, 3·ceil(N / WG) + 2·WG, N) + a few iterations (the pv pass's N for large N): safe
// on lavapipe up to N ≈ 65000 keys for d, WG <= 256.
//
// Same bindings 0-6, Params and mask convention as flash_fwd.wgsl, so the host builds both
// dispatches the same way, plus the scratch s_buf.
//
// Override constants: D, DV (head dims), WG (invocations per workgroup, any of 1..256).
// Global memory, f32 row-major: q (B, Nq, D), k (B, Nk, D), v (B, Nk, DV), o (B, Nq, DV),
// lse (B, Nq), s_buf (B, Nq, Nk).
// Dispatches: scores (ceil(Nk / WG), Nq, B), softmax (Nq, 1, B), pv (ceil(DV / WG), Nq, B).

// A masked score; -inf is not portable in WGSL (see flash_fwd.wgsl, where this is explained).
const MASKED_SCORE: f32 = -1.0e30;

override D: u32;
override DV: u32;
override WG: u32;

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings
@group(0) @binding(7) var<storage, read_write> s_buf: array<f32>;

// The softmax pass's per-invocation partial max / sum, and the row's total of each.
var<workgroup> partial: array<f32, WG>;
var<workgroup> row_max: f32;
var<workgroup> row_sum: f32;

// #include flash_fwd.wgsl allowed

// S[b, qi, kj] = scale · q_i·k_j, or MASKED_SCORE where the pair is masked.
@compute @workgroup_size(WG)
fn scores(@builtin(global_invocation_id) gid: vec3<u32>) {
  let kj = gid.x;                          // key
  let qi = gid.y;                          // query row
  let b = gid.z;                           // batch entry
  if (kj >= params.n_k || qi >= params.n_q) {
    return;
  }
  var s = MASKED_SCORE;
  if (allowed(b, qi, kj)) {
    var dot = 0.0;
    for (var x = 0u; x < D; x++) {
      dot += q[(b * params.n_q + qi) * D + x] * k[(b * params.n_k + kj) * D + x];
    }
    s = params.scale * dot;
  }
  s_buf[(b * params.n_q + qi) * params.n_k + kj] = s;
}

// Row qi of S becomes P = exp(S - m) / l in place; lse = m + log l. The row's WG invocations
// each take every WG-th key; invocation 0 combines their partial max and sum.
@compute @workgroup_size(WG)
fn softmax(@builtin(workgroup_id) wg: vec3<u32>,
           @builtin(local_invocation_index) t: u32) {
  let qi = wg.x;                           // query row (the dispatch has exactly Nq workgroups)
  let b = wg.z;                            // batch entry
  let row = (b * params.n_q + qi) * params.n_k;   // start of S[b, qi, :] in s_buf

  // m = max_j S_ij.
  var m = MASKED_SCORE;
  for (var kj = t; kj < params.n_k; kj += WG) {
    m = max(m, s_buf[row + kj]);
  }
  partial[t] = m;
  workgroupBarrier();
  if (t == 0u) {
    var total = MASKED_SCORE;
    for (var u = 0u; u < WG; u++) {
      total = max(total, partial[u]);
    }
    row_max = total;
  }
  workgroupBarrier();
  m = row_max;

  // exp(S - m) over S (exactly 0 for a masked score), and l = its sum.
  var l = 0.0;
  for (var kj = t; kj < params.n_k; kj += WG) {
    let s = s_buf[row + kj];
    let p = select(exp(s - m), 0.0, s == MASKED_SCORE);
    s_buf[row + kj] = p;
    l += p;
  }
  partial[t] = l;
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var u = 0u; u < WG; u++) {
      total += partial[u];
    }
    row_sum = total;
  }
  workgroupBarrier();
  l = row_sum;

  // P = exp(S - m) / l. A row with no allowed key has l = 0, keeps P = 0 and gets
  // lse = MASKED_SCORE (the host decodes it to -inf); safe_l = 1 keeps 0/0 and log 0 away.
  let safe_l = select(l, 1.0, l == 0.0);
  for (var kj = t; kj < params.n_k; kj += WG) {
    s_buf[row + kj] = s_buf[row + kj] / safe_l;
  }
  if (t == 0u) {
    lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
  }
}

// O[b, qi, c] = Σ_j P[b, qi, j] · V[b, j, c].
@compute @workgroup_size(WG)
fn pv(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;                           // column of V and O
  let qi = gid.y;                          // query row
  let b = gid.z;                           // batch entry
  if (c >= DV || qi >= params.n_q) {
    return;
  }
  let row = (b * params.n_q + qi) * params.n_k;
  var acc = 0.0;
  for (var kj = 0u; kj < params.n_k; kj++) {
    acc += s_buf[row + kj] * v[(b * params.n_k + kj) * DV + c];
  }
  o[(b * params.n_q + qi) * DV + c] = acc;
}
