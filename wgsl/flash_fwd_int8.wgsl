// flash_fwd_int8.wgsl — the tensor-core tier: S = Q Kᵀ on int8 subgroup matrices, softmax and
// P·V in float32. Needs Dawn's `chromium-experimental-subgroup-matrix` with an i8 x i8 -> i32
// configuration of M x N x K = 16 x 16 x 32 (NVIDIA's Vulkan driver offers it through Dawn).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The portable kernel (flash_fwd.wgsl: read it first) spends half its arithmetic on scores, one
// float32 multiply-add per (query, key, dim) on the CUDA cores. Here those products go to the
// tensor cores, which WGSL reaches through subgroup matrices: a subgroup (32 invocations on
// NVIDIA) holds a 16 x 32 int8 block of Q ("left"), a 32 x 16 int8 block of Kᵀ ("right") and a
// 16 x 16 int32 result, and subgroupMatrixMultiplyAccumulate adds their product into the result
// in one instruction sequence. The softmax and P·V stay as in the portable kernel, in float32.
//
// Quantisation, after SageAttention (Zhang et al. 2024, arXiv:2410.02367, section 4): K is first
// smoothed, k_j - k̄ with k̄ the mean key of the batch entry (per channel), which removes the
// channel offsets common to all keys; subtracting k̄ lowers every score of query row i by the
// same q_i·k̄, so the softmax and o are unchanged, and lse gets q_i·k̄ back at the end. Then Q is
// quantised per block of BR query rows and (smoothed) K per block of BC keys, symmetric int8:
//   x8 = round(x / s),  s = max |x| over the block / 127      (round half to even)
// and a score is dequantised as  S = f32(Q8 K8ᵀ) · (s_q · scale · s_k),  exact in int32 (|Q8 K8ᵀ|
// <= 127² · D < 2^24, so its float32 conversion is exact too). Differences from SageAttention:
// P·V stays float32 on CUDA cores (Dawn offers no float16 subgroup matrices on this driver, and
// int8 P·V was left out); the blocks are this kernel's own tiles (BR rows, BC keys); k̄ is exact
// float32, taken in this shader's first two passes; and lse is corrected for the smoothing.
//
// Four passes over one bind group, dispatched in order (nlpcore.kernels.flash_wgsl_int8 builds
// the spec and re-enacts every pass in NumPy):
//   k_sums      workgroups (Tc, 1, B): column sums of each BC-key block of K     -> k_sum
//   quantize_k  workgroups (Tc, 1, B): k̄ from k_sum; K - k̄ to int8 per block    -> k8, k_scale
//   quantize_q  workgroups (Tr, 1, B): Q to int8 per block; shift = scale·q·k̄    -> q8, q_scale, q_shift
//   main        workgroups (Tr, 1, B): the FlashAttention loop                    -> o, lse
// (Tr = ceil(Nq / BR), Tc = ceil(Nk / BC).)
//
// main, per key tile j: stage V_j (float32) in workgroup memory; the workgroup's subgroups share
// the (BR/16)·(BC/16) 16 x 16 result blocks of S_ij, each summing D/32 products of a Q8 block
// and a K8 block read straight from the quantised buffers, and store them to s_tile; then every
// invocation runs the portable kernel's online softmax and o update (included from
// flash_fwd.wgsl, line for line), four keys at a time, as lane t % KS of row t / KS with 64 head
// dims of o in registers. Unlike the portable kernel it holds no q (the tensor cores read Q8),
// so it needs half the registers. Barriers per key tile: two. On the H200 (N = 16384, 16 heads,
// d = 64) it ran at 18.5 TFLOP/s (bench/results/webgpu_h200.json), about the portable kernel's
// speed: the float32 softmax and P·V, not the scores, bound both. An earlier version gave each
// invocation two rows of 32 dims, each staged value read serving two rows, but each row pair's
// softmax done by both of its invocations: 16.9 (bench/results/webgpu_h200_probe.json).
//
// Subgroup-matrix calls must run in subgroup-uniform control flow with subgroup-uniform
// arguments. The blocks a subgroup takes depend on its index t / subgroup_size, the same for
// all its invocations (Dawn runs full subgroups of consecutive invocations), which WGSL's
// uniformity analysis cannot see: Dawn's chromium.subgroup_matrix_uniformity check (an error by
// default) is turned off, and the loop runs over uniform "rounds".

// Override constants (tiling.plan_int8, from the adapter's limits): BR (a multiple of 16), BC
// (a multiple of 16), D (a multiple of 32), DV, KS. The workgroup has BR·KS invocations, a
// multiple of the adapter's largest subgroup.
//
// Workgroup memory:  v_tile [BC x KS·16] vec4 f32  V_j     s_tile [S_TILE >= BR x BC] i32  S_ij before scaling
// Global memory, row-major, b = workgroup_id.z:
//   q (B, Nq, D) f32   k (B, Nk, D) f32   v (B, Nk, DV) f32   o (B, Nq, DV) f32   lse (B, Nq) f32
//   q8 (B, Tr·BR, D) and k8 (B, Tc·BC, D) int8, four a word (little-endian), rows past Nq / Nk zero
//   q_scale (B, Tr), k_scale (B, Tc), k_sum (B, Tc, D), q_shift (B, Nq) f32

enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged value row per 64 head dims (the v_tile layout of flash_fwd.wgsl).
const CHUNK4: u32 = 16u;

// Invocations of the quantisation passes.
const QWG: u32 = 64u;

// Length of s_tile. Dawn's subgroupMatrixStore takes a workgroup array of constant length only
// (an override-sized one is refused: "no matching call"), so s_tile has this fixed size and the
// plan keeps BR·BC within it (tiling.S_TILE).
const S_TILE: u32 = 2048u;

// #include flash_fwd.wgsl sizes

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings
// --- int8 bindings begin ---
@group(0) @binding(7) var<storage, read_write> q8: array<i32>;
@group(0) @binding(8) var<storage, read_write> k8: array<i32>;
@group(0) @binding(9) var<storage, read_write> q_scale: array<f32>;
@group(0) @binding(10) var<storage, read_write> k_scale: array<f32>;
@group(0) @binding(11) var<storage, read_write> k_sum: array<f32>;
@group(0) @binding(12) var<storage, read_write> q_shift: array<f32>;
// --- int8 bindings end ---

var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_tile: array<i32, S_TILE>;   // BR·BC <= S_TILE used
var<workgroup> k_bar: array<f32, D>;      // quantisation passes: the mean key
var<workgroup> red: array<f32, QWG>;      // quantisation passes: partial maxima

// The entry points first, in dispatch order; the helpers they call follow them.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_size) sg_size: u32) {
  // #include flash_fwd.wgsl prologue
  let t_r = ceil_div(params.n_q, BR);
  let q_rows = t_r * BR;                   // rows of q8 per batch entry (zero-padded)
  let k_rows = ceil_div(params.n_k, BC) * BC;  // rows of k8 per batch entry (zero-padded)
  let dq = q_scale[b * t_r + i] * params.scale;

  // No q in registers (the tensor cores read Q8); o = 0, m = MASKED_SCORE, l = 0.
  var o_reg = Chunk();
  var m = MASKED_SCORE;
  var l = 0.0;

  // #include flash_fwd.wgsl key tiles
  for (var j = 0u; j < j_end; j++) {
    workgroupBarrier();                    // everyone is done with the previous V_j and S_ij
    let k0 = j * BC;
    let cols = min(BC, params.n_k - k0);

    // Stage V_j (values past the end, and head dims past DV, read as 0).
    for (var e = t; e < BC * width; e += BR * KS) {
      let c = e / width;
      let col = (e % width) * 4u;
      var nv = 0u;
      if (c < cols) {
        nv = present(col, DV);
      }
      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, nv);
    }

    // --- S_ij on subgroup matrices begin ---
    // Result block u covers rows r0 .. r0+15 and keys c0 .. c0+15 of the tile; in round k
    // subgroup sg takes block u = k·n_sg + sg, and each block sums D/32 int8 products. Dawn
    // wants subgroup-matrix calls in control flow it can prove uniform, so the loop runs over
    // rounds (a count built from overrides and the uniform subgroup_size; the plan makes the
    // blocks a multiple of the subgroups), not over blocks from sg on.
    let sg = t / sg_size;
    let n_sg = (BR * KS) / sg_size;
    let blocks_n = BC / 16u;
    let rounds = (BR / 16u) * blocks_n / n_sg;
    for (var round = 0u; round < rounds; round++) {
      let u = round * n_sg + sg;
      let r0 = (u / blocks_n) * 16u;
      let c0 = (u % blocks_n) * 16u;
      var acc = subgroup_matrix_result<i32, 16, 16>();
      for (var kk = 0u; kk < D; kk += 32u) {
        // Q8 rows q0+r0 .. +15, dims kk .. kk+31, row-major (offsets and strides count int8s).
        let qa = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&q8, (b * q_rows + q0 + r0) * D + kk, false, D);
        // K8ᵀ: dims kk .. kk+31 by keys k0+c0 .. +15; key c's dims are contiguous: column-major.
        let kb = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&k8, (b * k_rows + k0 + c0) * D + kk, true, D);
        acc = subgroupMatrixMultiplyAccumulate(qa, kb, acc);
      }
      subgroupMatrixStore(&s_tile, r0 * BC + c0, acc, false, BC);
    }
    // --- S_ij on subgroup matrices end ---
    workgroupBarrier();

    // Four keys g .. g+3 at a time: the row's scores, dequantised and masked, then the portable
    // kernel's online softmax and o update, its own lines.
    let f = dq * k_scale[b * ceil_div(params.n_k, BC) + j];
    for (var g = 0u; g < BC; g += 4u) {
      let n_live = select(0u, cols - g, g < cols);   // keys g .. g+3 that exist
      let s = scores(r * BC + g, f, row_ok, b, qi, k0 + g, n_live);
      // #include flash_fwd.wgsl online softmax
    }
  }

  // #include flash_fwd.wgsl finish
  // The smoothing lowered every score of row qi by scale·q·k̄: lse gets it back (same rounding
  // as adding it in the expression above, which left-to-right evaluation makes the same).
  if (row_ok && lane == 0u && l != 0.0) {
    lse[b * params.n_q + qi] += q_shift[b * params.n_q + qi];
  }
}

// --- quantize k begin ---
// Column sums of the BC keys of block wg.x: k_sum[b, j, :] = Σ_c k[b, k0 + c, :], in key order.
@compute @workgroup_size(QWG)
fn k_sums(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let j = wg.x;
  let b = wg.z;
  let k0 = j * BC;
  let cols = min(BC, params.n_k - k0);
  for (var dd = t; dd < D; dd += QWG) {
    var total = 0.0;
    for (var c = 0u; c < cols; c++) {
      total += k[(b * params.n_k + k0 + c) * D + dd];
    }
    k_sum[(b * ceil_div(params.n_k, BC) + j) * D + dd] = total;
  }
}

// k̄ (into k_bar), then block j of K - k̄ to int8 with its scale.
@compute @workgroup_size(QWG)
fn quantize_k(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let j = wg.x;
  let b = wg.z;
  let k0 = j * BC;
  let cols = min(BC, params.n_k - k0);
  let t_c = ceil_div(params.n_k, BC);
  mean_key(b, t);
  workgroupBarrier();

  var amax = 0.0;
  for (var e = t; e < cols * D; e += QWG) {
    amax = max(amax, abs(k[(b * params.n_k + k0) * D + e] - k_bar[e % D]));
  }
  let s = block_scale(amax, t);
  if (t == 0u) {
    k_scale[b * t_c + j] = s;
  }
  // Words of four int8s: key c, dims d0 .. d0+3 (D is a multiple of 32, so words never straddle keys).
  for (var w = t; w < cols * D / 4u; w += QWG) {
    let at = (b * params.n_k + k0) * D + 4u * w;
    let d0 = (4u * w) % D;
    let x = vec4<f32>(k[at], k[at + 1u], k[at + 2u], k[at + 3u])
          - vec4<f32>(k_bar[d0], k_bar[d0 + 1u], k_bar[d0 + 2u], k_bar[d0 + 3u]);
    k8[(b * t_c * BC + k0) * D / 4u + w] = pack_i8(x, s);
  }
}
// --- quantize k end ---

// --- quantize q begin ---
// Block i of Q to int8 with its scale, and each row's shift scale·q·k̄.
@compute @workgroup_size(QWG)
fn quantize_q(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = wg.x;
  let b = wg.z;
  let q0 = i * BR;
  let rows = min(BR, params.n_q - q0);
  let t_r = ceil_div(params.n_q, BR);
  mean_key(b, t);
  workgroupBarrier();

  var amax = 0.0;
  for (var e = t; e < rows * D; e += QWG) {
    amax = max(amax, abs(q[(b * params.n_q + q0) * D + e]));
  }
  let s = block_scale(amax, t);
  if (t == 0u) {
    q_scale[b * t_r + i] = s;
  }
  for (var w = t; w < rows * D / 4u; w += QWG) {
    let at = (b * params.n_q + q0) * D + 4u * w;
    q8[(b * t_r * BR + q0) * D / 4u + w] = pack_i8(vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]), s);
  }
  for (var r = t; r < rows; r += QWG) {
    var dot_qk = 0.0;
    for (var dd = 0u; dd < D; dd++) {
      dot_qk += q[(b * params.n_q + q0 + r) * D + dd] * k_bar[dd];
    }
    q_shift[b * params.n_q + q0 + r] = dot_qk * params.scale;
  }
}
// --- quantize q end ---


// Scores of keys kj .. kj+3 for query row qi, read from s_tile at `at` and dequantised by f;
// masked, out-of-range (n_live of the four exist) or past-the-end (ok false) ones are the sentinel.
fn scores(at: u32, f: f32, ok: bool, b: u32, qi: u32, kj: u32, n_live: u32) -> vec4<f32> {
  let s = vec4<f32>(f32(s_tile[at]), f32(s_tile[at + 1u]), f32(s_tile[at + 2u]), f32(s_tile[at + 3u])) * f;
  return masked(s, ok, b, qi, kj, n_live);
}

// #include flash_fwd_pair.wgsl masked

// #include flash_fwd.wgsl chunk update

// --- quantisation helpers begin ---
// k_bar[d] = (Σ over key blocks, in order, of k_sum[b, j, d]) / Nk.
fn mean_key(b: u32, t: u32) {
  let t_c = ceil_div(params.n_k, BC);
  for (var dd = t; dd < D; dd += QWG) {
    var total = 0.0;
    for (var j = 0u; j < t_c; j++) {
      total += k_sum[(b * t_c + j) * D + dd];
    }
    k_bar[dd] = total / f32(params.n_k);
  }
}

// The block's int8 scale max|x| / 127 from every invocation's partial max (1 for an all-zero
// block, whose values quantise to 0 whatever the scale). Contains barriers: call it from
// uniform control flow.
fn block_scale(amax: f32, t: u32) -> f32 {
  red[t] = amax;
  workgroupBarrier();
  for (var half = QWG / 2u; half > 0u; half >>= 1u) {
    if (t < half) {
      red[t] = max(red[t], red[t + half]);
    }
    workgroupBarrier();
  }
  let top = red[0];
  return select(top / 127.0, 1.0, top == 0.0);
}

// Four values to int8 (round(x / s) clamped to ±127, half to even), packed little-endian.
fn pack_i8(x: vec4<f32>, s: f32) -> i32 {
  let n = vec4<i32>(round(clamp(x / s, vec4<f32>(-127.0), vec4<f32>(127.0))));
  let u = vec4<u32>(bitcast<vec4<u32>>(n) & vec4<u32>(0xffu));
  return bitcast<i32>(u.x | (u.y << 8u) | (u.z << 16u) | (u.w << 24u));
}
// --- quantisation helpers end ---

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
