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
// invocation runs the portable kernel's online softmax and o update, four keys at a time, for
// TWO query rows and 32 of their head dims (o in registers: 2 x 32 floats), so each staged value
// read from workgroup memory serves two rows (the portable kernel: one). Barriers per key tile:
// two. Measured on the H200 (bench/results/webgpu_h200.json): this tier is no faster than the
// portable one; the float32 P·V, the 16-key tiles and the quantisation passes remain.
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

// A masked score (flash_fwd.wgsl explains the finite sentinel).
const MASKED_SCORE: f32 = -1.0e30;

// vec4 slots of a staged value row per 64 head dims (the v_tile layout of flash_fwd.wgsl).
const CHUNK4: u32 = 16u;

// vec4 slots of o one invocation holds per row: 32 floats, for each of its two rows.
const HALF4: u32 = 8u;

// Invocations of the quantisation passes.
const QWG: u32 = 64u;

// Length of s_tile. Dawn's subgroupMatrixStore takes a workgroup array of constant length only
// (an override-sized one is refused: "no matching call"), so s_tile has this fixed size and the
// plan keeps BR·BC within it (tiling.S_TILE).
const S_TILE: u32 = 2048u;

override BR: u32;
override BC: u32;
override D: u32;
override DV: u32;
override KS: u32;

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
@group(0) @binding(7) var<storage, read_write> q8: array<i32>;
@group(0) @binding(8) var<storage, read_write> k8: array<i32>;
@group(0) @binding(9) var<storage, read_write> q_scale: array<f32>;
@group(0) @binding(10) var<storage, read_write> k_scale: array<f32>;
@group(0) @binding(11) var<storage, read_write> k_sum: array<f32>;
@group(0) @binding(12) var<storage, read_write> q_shift: array<f32>;

var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_tile: array<i32, S_TILE>;   // BR·BC <= S_TILE used
var<workgroup> k_bar: array<f32, D>;      // quantisation passes: the mean key
var<workgroup> red: array<f32, QWG>;      // quantisation passes: partial maxima

// The entry points first, in dispatch order; the helpers they call follow them.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_size) sg_size: u32) {
  let i = wg.x;                            // query tile index
  let b = wg.z;                            // batch entry
  let q0 = i * BR;                         // first query row of the tile
  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile
  // Invocation t owns rows ra = 2·(t / LP) and rb = ra + 1 of the tile, and 32 of their head
  // dims, slots [8·half, 8·half + 8) of a value row (LP = 2·KS invocations share a row pair).
  let lp = 2u * KS;
  let ra = 2u * (t / lp);
  let rb = ra + 1u;
  let half = t % lp;
  let ok_a = ra < rows;                    // rows past the end compute but store nothing
  let ok_b = rb < rows;
  let width = KS * CHUNK4;                 // vec4 slots per value row of v_tile
  let mine = half * HALF4;                 // this invocation's first slot within such a row
  let t_r = ceil_div(params.n_q, BR);
  let t_c = ceil_div(params.n_k, BC);
  let q_rows = t_r * BR;                   // rows of q8 per batch entry (zero-padded)
  let k_rows = t_c * BC;                   // rows of k8 per batch entry (zero-padded)
  let dq = q_scale[b * t_r + i] * params.scale;

  var o_a = Half();
  var o_b = Half();
  var m_a = MASKED_SCORE;
  var m_b = MASKED_SCORE;
  var l_a = 0.0;
  var l_b = 0.0;

  var j_end = t_c;
  if (params.causal != 0u) {
    j_end = min(t_c, ceil_div(q0 + rows, BC));
  }
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

    // Four keys g .. g+3 at a time for both rows: the portable kernel's online softmax, with the
    // scores dequantised; each staged value slot is read once and used for both rows.
    let f = dq * k_scale[b * t_c + j];
    for (var g = 0u; g < BC; g += 4u) {
      let n_live = select(0u, cols - g, g < cols);   // keys g .. g+3 that exist
      let sa = scores(ra * BC + g, f, ok_a, b, q0 + ra, k0 + g, n_live);
      let sb = scores(rb * BC + g, f, ok_b, b, q0 + rb, k0 + g, n_live);
      let mn_a = max(m_a, max(max(sa.x, sa.y), max(sa.z, sa.w)));
      let mn_b = max(m_b, max(max(sb.x, sb.y), max(sb.z, sb.w)));
      let pa = select(exp(sa - vec4<f32>(mn_a)), vec4<f32>(0.0), sa == vec4<f32>(MASKED_SCORE));
      let pb = select(exp(sb - vec4<f32>(mn_b)), vec4<f32>(0.0), sb == vec4<f32>(MASKED_SCORE));
      let alpha_a = exp(m_a - mn_a);
      let alpha_b = exp(m_b - mn_b);
      l_a = alpha_a * l_a + (pa.x + pa.y) + (pa.z + pa.w);
      l_b = alpha_b * l_b + (pb.x + pb.y) + (pb.z + pb.w);
      m_a = mn_a;
      m_b = mn_b;
      pair_update(&o_a, &o_b, alpha_a, alpha_b, pa, pb, g * width + mine, width);
    }
  }

  // o = o / l; lse = m + log l + scale·q·k̄ (the smoothing's shift added back). A row with no
  // allowed key gets o = 0 and lse = MASKED_SCORE.
  finish(&o_a, l_a, m_a, ok_a, b, q0 + ra, half);
  finish(&o_b, l_b, m_b, ok_b, b, q0 + rb, half);
}

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

// 32 floats of one row's o: what one invocation holds for each of its two rows.
alias Half = array<vec4<f32>, HALF4>;

// Scores of keys kj .. kj+3 for query row qi, read from s_tile at `at` and dequantised by f;
// masked, out-of-range (n_live of the four exist) or past-the-end (ok false) ones are the sentinel.
fn scores(at: u32, f: f32, ok: bool, b: u32, qi: u32, kj: u32, n_live: u32) -> vec4<f32> {
  let s = vec4<f32>(f32(s_tile[at]), f32(s_tile[at + 1u]), f32(s_tile[at + 2u]), f32(s_tile[at + 3u])) * f;
  let live = vec4<bool>(ok && 0u < n_live && allowed(b, qi, kj), ok && 1u < n_live && allowed(b, qi, kj + 1u),
                        ok && 2u < n_live && allowed(b, qi, kj + 2u), ok && 3u < n_live && allowed(b, qi, kj + 3u));
  return select(vec4<f32>(MASKED_SCORE), s, live);
}

// o = alpha · o + p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over 32 dims of two rows at once, value
// row u at slot at + u·stride of v_tile: each staged slot is read once for both rows.
fn pair_update(o_a: ptr<function, Half>, o_b: ptr<function, Half>, alpha_a: f32, alpha_b: f32,
               pa: vec4<f32>, pb: vec4<f32>, at: u32, stride: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  {
    let v0 = v_tile[at]; let v1 = v_tile[a1]; let v2 = v_tile[a2]; let v3 = v_tile[a3];
    (*o_a)[0] = alpha_a * (*o_a)[0] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[0] = alpha_b * (*o_b)[0] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 1u]; let v1 = v_tile[a1 + 1u]; let v2 = v_tile[a2 + 1u]; let v3 = v_tile[a3 + 1u];
    (*o_a)[1] = alpha_a * (*o_a)[1] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[1] = alpha_b * (*o_b)[1] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 2u]; let v1 = v_tile[a1 + 2u]; let v2 = v_tile[a2 + 2u]; let v3 = v_tile[a3 + 2u];
    (*o_a)[2] = alpha_a * (*o_a)[2] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[2] = alpha_b * (*o_b)[2] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 3u]; let v1 = v_tile[a1 + 3u]; let v2 = v_tile[a2 + 3u]; let v3 = v_tile[a3 + 3u];
    (*o_a)[3] = alpha_a * (*o_a)[3] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[3] = alpha_b * (*o_b)[3] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 4u]; let v1 = v_tile[a1 + 4u]; let v2 = v_tile[a2 + 4u]; let v3 = v_tile[a3 + 4u];
    (*o_a)[4] = alpha_a * (*o_a)[4] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[4] = alpha_b * (*o_b)[4] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 5u]; let v1 = v_tile[a1 + 5u]; let v2 = v_tile[a2 + 5u]; let v3 = v_tile[a3 + 5u];
    (*o_a)[5] = alpha_a * (*o_a)[5] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[5] = alpha_b * (*o_b)[5] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 6u]; let v1 = v_tile[a1 + 6u]; let v2 = v_tile[a2 + 6u]; let v3 = v_tile[a3 + 6u];
    (*o_a)[6] = alpha_a * (*o_a)[6] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[6] = alpha_b * (*o_b)[6] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let v0 = v_tile[at + 7u]; let v1 = v_tile[a1 + 7u]; let v2 = v_tile[a2 + 7u]; let v3 = v_tile[a3 + 7u];
    (*o_a)[7] = alpha_a * (*o_a)[7] + pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[7] = alpha_b * (*o_b)[7] + pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
}

// Row qi's 32 dims of o / l into the output (and, from the first invocation of the row, its lse).
fn finish(o_reg: ptr<function, Half>, l: f32, m: f32, ok: bool, b: u32, qi: u32, half: u32) {
  if (!ok) {
    return;
  }
  let safe_l = select(l, 1.0, l == 0.0);
  let row = (b * params.n_q + qi) * DV;
  let col0 = half * HALF4 * 4u;
  store_o4(row, col0 + 0u, (*o_reg)[0] / safe_l);
  store_o4(row, col0 + 4u, (*o_reg)[1] / safe_l);
  store_o4(row, col0 + 8u, (*o_reg)[2] / safe_l);
  store_o4(row, col0 + 12u, (*o_reg)[3] / safe_l);
  store_o4(row, col0 + 16u, (*o_reg)[4] / safe_l);
  store_o4(row, col0 + 20u, (*o_reg)[5] / safe_l);
  store_o4(row, col0 + 24u, (*o_reg)[6] / safe_l);
  store_o4(row, col0 + 28u, (*o_reg)[7] / safe_l);
  if (half == 0u) {
    lse[b * params.n_q + qi] = select(m + log(safe_l) + q_shift[b * params.n_q + qi], MASKED_SCORE, l == 0.0);
  }
}

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

// 64 floats of one row: a lane's share of q or of o.
alias Chunk = array<vec4<f32>, CHUNK4>;

fn ceil_div(a: u32, b: u32) -> u32 {
  return (a + b - 1u) / b;
}

// --- chunk helpers (as in flash_fwd.wgsl) ---

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
  if (n > 0u) { o[row + col] = y.x; }
  if (n > 1u) { o[row + col + 1u] = y.y; }
  if (n > 2u) { o[row + col + 2u] = y.z; }
  if (n > 3u) { o[row + col + 3u] = y.w; }
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
