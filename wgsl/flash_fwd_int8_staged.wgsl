// flash_fwd_int8_staged.wgsl — a variant of the int8 tier (flash_fwd_int8.wgsl, the tier's
// default: S on subgroup matrices, softmax and P·V in float32): S = Q Kᵀ and P·V both on int8
// subgroup matrices, the softmax in float32 once per key tile, and each key tile's K8 and V8
// staged once in workgroup memory, from which the matrices load (a bench variant:
// bench/webgpu_tiers.py's INT8_STAGED; tiling.plan_int8_staged sizes it). Needs Dawn's `chromium-experimental-subgroup-matrix`
// with an i8 x i8 -> i32 configuration of M x N x K = 16 x 16 x 32 (NVIDIA's Vulkan driver
// offers it through Dawn).
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The portable kernel (flash_fwd.wgsl: read it first) does every multiply-add of both products
// on the CUDA cores in float32. Here both products go to the tensor cores, which WGSL reaches
// through subgroup matrices: a subgroup (32 invocations on NVIDIA) holds a 16 x 32 int8 block
// ("left"), a 32 x 16 int8 block ("right") and a 16 x 16 int32 result, and
// subgroupMatrixMultiplyAccumulate adds their product into the result. What stays on the CUDA
// cores is the softmax, once per score, and one rescale of o per key tile.
//
// Quantisation. Q and K after SageAttention (Zhang et al. 2024, arXiv:2410.02367, section 4): K
// is first smoothed, k_j - k̄ with k̄ the mean key of the batch entry (per channel); that lowers
// every score of query row i by the same q_i·k̄, so the softmax and o are unchanged, and lse gets
// q_i·k̄ back at the end. Then Q per block of BR rows and (smoothed) K per block of BC keys,
// symmetric int8:  x8 = round(x / s),  s = max |x| over the block / 127  (round half to even).
// A score is dequantised as  S = f32(Q8 K8ᵀ) · (s_q · scale · s_k), exact in int32 (|Q8 K8ᵀ| <=
// 127² · D < 2^24, so its float32 conversion is exact too).
// V per block of BC keys and per channel (head dim): v8 = round(v / s_v[c]), s_v[c] = max |v[:, c]|
// over the block / 127. P relative to the tile's own row max m_tile: p = exp(s - m_tile) lies
// in [0, 1], and p8 = round(127 · p) needs no scale of its own; taking p against m_tile rather
// than the running max m_new keeps the int8 steps fine in tiles whose scores are all below the
// row's max so far (against m_new, rel. L1 vs float64 grew from 0.032 to 0.043 between N = 4096
// and 16384 on random inputs; against m_tile it stays 0.018: NumPy mirror, d = 64). The tile's
// P·V is then PV8 = P8 V8 (int32, exact) and, with alpha = exp(m - m_new), beta = exp(m_tile - m_new),
//   o <- alpha · o + beta · f32(PV8) · s_v          l <- alpha · l + beta · Σ p8
// so o and l both carry the factor 127 of p8, which cancels in o / l; lse = m + log l - log 127.
// l sums the quantised p8, the weights o was accumulated with, so o / l stays a weighted mean of
// the (quantised) values. Differences from SageAttention: P and V are int8 here (SageAttention's
// SAGEAttn-B keeps P̃V in FP16; Dawn offers no float16 subgroup matrices on this driver; its
// SAGEAttn-vB quantises P̃ and V to INT8 too), V is scaled per channel and block, the blocks are
// this kernel's own tiles, k̄ is exact float32 taken in this shader's first two passes, and lse
// is corrected for the smoothing.
//
// Why staged. An earlier version of this shader (branch t-wgsl3, commit a3ee2cc) loaded every
// K8 and V8 block of every 16 x 16 product straight from the storage buffers, so each of the
// workgroup's subgroups read the whole key tile from global memory; on the H200 each of its two
// matrix blocks took about as long as the rest of the main pass (bench/README.md). Here the
// workgroup copies the tile's K8 and V8 words into k_tile and v_tile once (consecutive
// invocations, consecutive 4-byte words), one barrier, and the matrices load from there.
//
// Five passes over one bind group, dispatched in order (nlpcore.kernels.flash_wgsl_int8pv builds
// the spec and re-enacts every pass in NumPy):
//   k_sums      workgroups (Tc, 1, B): column sums of each BC-key block of K     -> k_sum
//   quantize_k  workgroups (Tc, 1, B): k̄ from k_sum; K - k̄ to int8 per block    -> k8, k_scale
//   quantize_v  workgroups (Tc, 1, B): V to int8 per block and channel          -> v8, v_scale
//   quantize_q  workgroups (Tr, 1, B): Q to int8 per block; shift = scale·q·k̄    -> q8, q_scale, q_shift
//   main        workgroups (Tr, 1, B): the FlashAttention loop                    -> o, lse
// (Tr = ceil(Nq / BR), Tc = ceil(Nk / BC).)
//
// main, per key tile j, four barriers:
//   0. stage: the workgroup copies K8 and V8 of keys k0 .. k0+BC-1 into k_tile and v_tile. barrier
//   1. S_ij: the workgroup's subgroups share the (BR/16)·(BC/16) 16 x 16 result blocks, each
//      summing D/32 products of a Q8 block (from q8) and a K8 block (from k_tile), and
//      store them to s_tile (int32).                                               barrier
//   2. softmax, one invocation per query row (each of a row's KS lanes does the row; lane 0
//      writes it): the row max over the tile on the int32 scores (the dequantisation factor is
//      positive, so it keeps the order), m_new, alpha, beta, p = exp(s - m_tile) for the BC
//      keys, their int8 p8 into p_tile and Σ p8 into l.                            barrier
//   3. PV_ij: the (BR/16)·(DV/16) result blocks of P8 V8, each summing BC/32 products of a P8
//      block from p_tile and a V8 block from v_tile, into pv_tile.                 barrier
//   4. o = alpha · o + beta · f32(PV8) · s_v, each invocation its row's 64 head dims in registers.
// Step 1 of the next tile writes s_tile, read in step 2 before two barriers; step 3 writes
// pv_tile, read in step 4 of the tile before, behind two barriers; step 0 of the next tile
// writes k_tile and v_tile, last read in steps 1 and 3 of this one, behind barrier 3.
// A tile that no mask can touch (no mask, and under a causal mask wholly below the diagonal)
// skips the per-key mask tests.
//
// Subgroup-matrix calls must run in subgroup-uniform control flow with subgroup-uniform
// arguments. The blocks a subgroup takes depend on its index t / SG, the same for
// all its invocations (Dawn runs full subgroups of consecutive invocations), which WGSL's
// uniformity analysis cannot see: Dawn's chromium.subgroup_matrix_uniformity check (an error by
// default) is turned off, and the loops run over uniform "rounds".

// Override constants (tiling.plan_int8, from the adapter's limits): BR (a multiple of 16), BC
// (a multiple of 32), D (a multiple of 32), DV (a multiple of 16), KS. The workgroup has BR·KS
// invocations, a multiple of the adapter's largest subgroup.
//
// Workgroup memory (main):  s_tile [S_TILE = BR·BC] i32  S_ij before scaling, column-major
//                           p_tile [P_WORDS = BR·P_STRIDE/4] i32  P8, four int8 a word, row-major,
//                                  P_STRIDE = BC + 16 int8 a row
//                           pv_tile [PV_TILE = BR·DV] i32  PV_ij before scaling, column-major
//                           k_tile [K_WORDS = BC·(D + PAD)/4] i32  K8 of the tile, key-major
//                           v_tile [V_WORDS = BC·(DV + PAD)/4] i32  V8 of the tile, key-major
//
// Banks. Workgroup memory has 32 banks of 4 bytes; the 32 invocations of a subgroup, one query
// row each, must not hit one bank with different addresses, or their accesses are served one
// after the other. A row-major score tile of 64 keys puts every row's key g in one bank (a
// 32-way conflict on each read of the softmax; the first version of this kernel, laid out so,
// ran at 6.8 TFLOP/s, probe of 2026-12-02): S_ij and PV_ij are therefore stored column-major
// (the subgroup matrices store either way), so that invocation r reads word g·BR + r, a
// different bank for each row. P8 must be row-major for the left operand (or the four int8 of
// a word would belong to four rows): its rows are padded to P_STRIDE = BC + 16 int8 (the
// matrices load rows 16-byte aligned), and row r takes its key groups from (r / 8 mod 4)·4 on,
// so the words the 32 rows write at once fall in 32 banks. The rows of k_tile and v_tile are
// padded by PAD = 16 int8 likewise (rows 16-byte aligned; consecutive keys start four banks
// apart rather than in the same bank, D and DV being multiples of 16).
// Global memory, row-major, b = workgroup_id.z:
//   q (B, Nq, D) f32   k (B, Nk, D) f32   v (B, Nk, DV) f32   o (B, Nq, DV) f32   lse (B, Nq) f32
//   q8 (B, Tr·BR, D), k8 (B, Tc·BC, D) and v8 (B, Tc·BC, DV) int8, four a word (little-endian),
//   rows past Nq / Nk zero;  q_scale (B, Tr), k_scale (B, Tc), v_scale (B, Tc, DV),
//   k_sum (B, Tc, D), q_shift (B, Nq) f32

enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);

// #include flash_fwd.wgsl sentinel

// vec4 slots of a row's 64 head dims one lane holds (flash_fwd.wgsl's Chunk).
const CHUNK4: u32 = 16u;

// Invocations of the quantisation passes.
const QWG: u32 = 64u;

// Int8 levels of p: p8 = round(P_LEVELS · p) for p in [0, 1]; log P_LEVELS comes off lse.
const P_LEVELS: f32 = 127.0;
const LOG_P_LEVELS: f32 = 4.8441871;

// --- tile arrays begin ---
// Lengths of the workgroup arrays the subgroup matrices read and write. Dawn takes those only
// with a constant length (an override-sized array is refused: "no matching call"), so the host
// writes these five lines from the plan (flash_wgsl_int8pv.source); the values here are the plan
// for d = 64 on the H200 (BR = 64, BC = 64, D = DV = 64).
const S_TILE: u32 = 4096u;
const P_WORDS: u32 = 1280u;
const PV_TILE: u32 = 4096u;
const K_WORDS: u32 = 1280u;
const V_WORDS: u32 = 1280u;
// --- tile arrays end ---

// int8 a row of p_tile, k_tile and v_tile is padded by (see "Banks"; tiling.INT8_STAGED_PAD).
const P_PAD: u32 = 16u;

// #include flash_fwd.wgsl sizes
// The subgroup size the plan was made for (tiling.plan_int8's subgroup_size; 32 on NVIDIA). The
// matrix blocks are dealt to BR·KS / SG subgroups: with SG an override rather than the
// subgroup_size built-in, their loops have trip counts the driver knows when it compiles, so it
// can unroll them and issue the loads of several blocks before the first product. (With the
// built-in, the first conflict-free version ran at 10.7 TFLOP/s, probe of 2026-12-02.) Dawn runs
// this workgroup in subgroups of exactly that size on such an adapter; were they another size,
// blocks would be skipped or done twice and the float64 checks would fail.
override SG: u32;

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings
// #include flash_fwd_int8.wgsl int8 bindings
@group(0) @binding(13) var<storage, read_write> v8: array<i32>;
@group(0) @binding(14) var<storage, read_write> v_scale: array<f32>;

var<workgroup> s_tile: array<i32, S_TILE>;    // S_ij, BR x BC, column-major
var<workgroup> p_tile: array<i32, P_WORDS>;   // P8, BR x BC int8, row-major
var<workgroup> pv_tile: array<i32, PV_TILE>;  // PV_ij, BR x DV, column-major
var<workgroup> k_tile: array<i32, K_WORDS>;   // K8 of the key tile, BC x D int8, key-major, rows padded
var<workgroup> v_tile: array<i32, V_WORDS>;   // V8 of the key tile, BC x DV int8, key-major, rows padded
var<workgroup> k_bar: array<f32, D>;          // quantisation passes: the mean key
var<workgroup> v_step: array<f32, DV>;        // quantize_v: the block's per-channel scales
var<workgroup> red: array<f32, QWG>;          // quantisation passes: partial maxima

// The entry points first, main then the passes in dispatch order; the helpers they call follow.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl prologue
  let t_r = ceil_div(params.n_q, BR);
  let q_rows = t_r * BR;                   // rows of q8 per batch entry (zero-padded)
  let k_rows = ceil_div(params.n_k, BC) * BC;  // rows of k8 and v8 per batch entry (zero-padded)
  let dq = q_scale[b * t_r + i] * params.scale;
  let sg = t / SG;                         // this invocation's subgroup
  let n_sg = (BR * KS) / SG;
  let p_stride = BC + P_PAD;               // int8 a row of p_tile
  let k_stride = D + P_PAD;                // int8 a key of k_tile
  let v_stride = DV + P_PAD;               // int8 a key of v_tile

  // No q in registers (the tensor cores read Q8); o = 0, m = MASKED_SCORE, l = 0.
  var o_reg = Chunk();
  var m = MASKED_SCORE;
  var l = 0.0;

  // #include flash_fwd.wgsl key tiles
  for (var j = 0u; j < j_end; j++) {
    let k0 = j * BC;
    let cols = min(BC, params.n_k - k0);   // Bc, or fewer in the ragged last tile

    // --- stage K8 and V8 begin ---
    // The tile's BC keys of k8 and v8 (zero past Nk: the buffers are padded to whole tiles),
    // word by word, consecutive invocations on consecutive words, into rows padded by P_PAD.
    let k_at = (b * k_rows + k0) * (D / 4u);
    for (var w = t; w < BC * (D / 4u); w += BR * KS) {
      k_tile[(w / (D / 4u)) * (k_stride / 4u) + w % (D / 4u)] = k8[k_at + w];
    }
    let v_at = (b * k_rows + k0) * (DV / 4u);
    for (var w = t; w < BC * (DV / 4u); w += BR * KS) {
      v_tile[(w / (DV / 4u)) * (v_stride / 4u) + w % (DV / 4u)] = v8[v_at + w];
    }
    // --- stage K8 and V8 end ---
    workgroupBarrier();

    // --- S_ij on subgroup matrices begin ---
    // Result block u covers rows r0 .. r0+15 and keys c0 .. c0+15 of the tile; in round k
    // subgroup sg takes block u = k·n_sg + sg, and each block sums D/32 int8 products. Dawn
    // wants subgroup-matrix calls in control flow it can prove uniform, so the loop runs over
    // rounds (a count built from overrides; the plan makes the blocks a multiple of the
    // subgroups), not over blocks from sg on.
    let s_blocks_n = BC / 16u;
    let s_rounds = (BR / 16u) * s_blocks_n / n_sg;
    for (var round = 0u; round < s_rounds; round++) {
      let u = round * n_sg + sg;
      let r0 = (u / s_blocks_n) * 16u;
      let c0 = (u % s_blocks_n) * 16u;
      var acc = subgroup_matrix_result<i32, 16, 16>();
      for (var kk = 0u; kk < D; kk += 32u) {
        // Q8 rows q0+r0 .. +15, dims kk .. kk+31, row-major (offsets and strides count int8s).
        let qa = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&q8, (b * q_rows + q0 + r0) * D + kk, false, D);
        // K8ᵀ: dims kk .. kk+31 by keys c0 .. c0+15 of k_tile; a key's dims are contiguous:
        // column-major, a column every k_stride int8.
        let kb = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&k_tile, c0 * k_stride + kk, true, k_stride);
        acc = subgroupMatrixMultiplyAccumulate(qa, kb, acc);
      }
      subgroupMatrixStore(&s_tile, c0 * BR + r0, acc, true, BR);   // column-major: see "Banks"
    }
    // --- S_ij on subgroup matrices end ---
    workgroupBarrier();

    // --- tile softmax begin ---
    // Row r's scores, dequantised by f, masked; the tile's row max m_tile first (on the int32
    // scores: f > 0 keeps their order, and f32(top) · f is the largest dequantised score
    // exactly), then p = exp(s - m_tile) in [0, 1], p8 = round(127 · p) into p_tile (lane 0),
    // and l = alpha · l + beta · Σ p8.
    let f = dq * k_scale[b * ceil_div(params.n_k, BC) + j];
    let open = params.has_mask == 0u && (params.causal == 0u || k0 + BC <= q0 + 1u);  // no key masked
    let rot = ((r / 8u) % 4u) * 4u;         // this row's first key group (see "Banks")
    var top = -2147483647i;
    for (var g0 = 0u; g0 < BC; g0 += 4u) {
      let g = (g0 + rot) % BC;
      let live = keys_live(open, row_ok, b, qi, k0, g, cols);
      let s = vec4<i32>(s_tile[g * BR + r], s_tile[(g + 1u) * BR + r], s_tile[(g + 2u) * BR + r], s_tile[(g + 3u) * BR + r]);
      let x = select(vec4<i32>(-2147483647i), s, live);
      top = max(top, max(max(x.x, x.y), max(x.z, x.w)));
    }
    let m_tile = select(MASKED_SCORE, f32(top) * f, top != -2147483647i);
    let m_new = max(m, m_tile);
    let alpha = exp(m - m_new);            // rescales what o and l hold so far
    let beta = exp(m_tile - m_new);        // rescales this tile's p, taken relative to m_tile
    var p_sum = 0u;
    for (var g0 = 0u; g0 < BC; g0 += 4u) {
      let g = (g0 + rot) % BC;
      let live = keys_live(open, row_ok, b, qi, k0, g, cols);
      let s = vec4<f32>(f32(s_tile[g * BR + r]), f32(s_tile[(g + 1u) * BR + r]),
                        f32(s_tile[(g + 2u) * BR + r]), f32(s_tile[(g + 3u) * BR + r])) * f;
      let p = select(vec4<f32>(0.0), exp(s - vec4<f32>(m_tile)), live);
      let p8 = vec4<u32>(min(round(p * P_LEVELS), vec4<f32>(P_LEVELS)));
      p_sum += (p8.x + p8.y) + (p8.z + p8.w);
      if (lane == 0u) {
        p_tile[(r * p_stride + g) / 4u] = bitcast<i32>(p8.x | (p8.y << 8u) | (p8.z << 16u) | (p8.w << 24u));
      }
    }
    l = alpha * l + beta * f32(p_sum);
    m = m_new;
    // --- tile softmax end ---
    workgroupBarrier();

    // --- PV_ij on subgroup matrices begin ---
    // Result block u covers rows r0 .. r0+15 and head dims c0 .. c0+15 of PV_ij, summing BC/32
    // products of a P8 block (rows r0.., keys kk .. kk+31, from p_tile) and a V8 block (keys
    // kk .. kk+31, dims c0 .. c0+15, from v_tile: row-major, a row every v_stride int8).
    let v_blocks_n = DV / 16u;
    let v_rounds = (BR / 16u) * v_blocks_n / n_sg;
    for (var round = 0u; round < v_rounds; round++) {
      let u = round * n_sg + sg;
      let r0 = (u / v_blocks_n) * 16u;
      let c0 = (u % v_blocks_n) * 16u;
      var acc = subgroup_matrix_result<i32, 16, 16>();
      for (var kk = 0u; kk < BC; kk += 32u) {
        let pa = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&p_tile, r0 * p_stride + kk, false, p_stride);
        let vb = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&v_tile, kk * v_stride + c0, false, v_stride);
        acc = subgroupMatrixMultiplyAccumulate(pa, vb, acc);
      }
      subgroupMatrixStore(&pv_tile, c0 * BR + r0, acc, true, BR);  // column-major
    }
    // --- PV_ij on subgroup matrices end ---
    workgroupBarrier();

    // o = alpha · o + beta · f32(PV8) · s_v over this lane's 64 head dims.
    chunk_rescale_add(&o_reg, alpha, beta, r, mine * 4u, (b * ceil_div(params.n_k, BC) + j) * DV);
  }

  // #include flash_fwd.wgsl finish
  // The smoothing lowered every score of row qi by scale·q·k̄, and l carries the factor 127 of p8:
  // lse gets the first back and loses the second.
  if (row_ok && lane == 0u && l != 0.0) {
    lse[b * params.n_q + qi] += q_shift[b * params.n_q + qi] - LOG_P_LEVELS;
  }
}

// #include flash_fwd_int8.wgsl quantize k

// Block j of V to int8, each head dim (channel) with its own scale max |v[:, c]| / 127.
@compute @workgroup_size(QWG)
fn quantize_v(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let j = wg.x;
  let b = wg.z;
  let k0 = j * BC;
  let cols = min(BC, params.n_k - k0);
  let t_c = ceil_div(params.n_k, BC);
  for (var dd = t; dd < DV; dd += QWG) {
    var amax = 0.0;
    for (var c = 0u; c < cols; c++) {
      amax = max(amax, abs(v[(b * params.n_k + k0 + c) * DV + dd]));
    }
    let s = select(amax / 127.0, 1.0, amax == 0.0);
    v_step[dd] = s;
    v_scale[(b * t_c + j) * DV + dd] = s;
  }
  workgroupBarrier();
  // Words of four int8s: key c, dims d0 .. d0+3 (DV is a multiple of 16).
  for (var w = t; w < cols * DV / 4u; w += QWG) {
    let at = (b * params.n_k + k0) * DV + 4u * w;
    let d0 = (4u * w) % DV;
    let x = vec4<f32>(v[at], v[at + 1u], v[at + 2u], v[at + 3u])
          / vec4<f32>(v_step[d0], v_step[d0 + 1u], v_step[d0 + 2u], v_step[d0 + 3u]);
    v8[(b * t_c * BC + k0) * DV / 4u + w] = pack_i8(x, 1.0);   // x / 1 is x: one rounding, as per channel
  }
}

// #include flash_fwd_int8.wgsl quantize q

// Which of keys k0+g .. k0+g+3 row qi may use: those that exist (g+u < cols) and, unless the
// tile is `open` (no key of it masked for any row), that the masks allow; none for rows past
// the end (ok false).
fn keys_live(open: bool, ok: bool, b: u32, qi: u32, k0: u32, g: u32, cols: u32) -> vec4<bool> {
  let exist = vec4<u32>(g, g + 1u, g + 2u, g + 3u) < vec4<u32>(cols);
  if (open) {
    return exist & vec4<bool>(ok);
  }
  return exist & vec4<bool>(ok && allowed(b, qi, k0 + g), ok && allowed(b, qi, k0 + g + 1u),
                            ok && allowed(b, qi, k0 + g + 2u), ok && allowed(b, qi, k0 + g + 3u));
}

// PV_ij of row `at` at head dims col .. col+3 (pv_tile is column-major), dequantised by the four
// channel scales at flat index `vs` of v_scale (those past DV are 0).
fn pv4(at: u32, col: u32, vs: u32) -> vec4<f32> {
  if (col >= DV) {
    return vec4<f32>(0.0);
  }
  return vec4<f32>(f32(pv_tile[col * BR + at]), f32(pv_tile[(col + 1u) * BR + at]),
                   f32(pv_tile[(col + 2u) * BR + at]), f32(pv_tile[(col + 3u) * BR + at]))
       * vec4<f32>(v_scale[vs + col], v_scale[vs + col + 1u], v_scale[vs + col + 2u], v_scale[vs + col + 3u]);
}

// o = alpha · o + beta · f32(PV8) · s_v over one lane's 64 head dims from column c of row `at`
// of PV_ij, with v_scale's row of this block at `vs` (constant indices into o).
fn chunk_rescale_add(o_reg: ptr<function, Chunk>, alpha: f32, beta: f32, at: u32, c: u32, vs: u32) {
  (*o_reg)[0] = alpha * (*o_reg)[0] + beta * pv4(at, c, vs);
  (*o_reg)[1] = alpha * (*o_reg)[1] + beta * pv4(at, c + 4u, vs);
  (*o_reg)[2] = alpha * (*o_reg)[2] + beta * pv4(at, c + 8u, vs);
  (*o_reg)[3] = alpha * (*o_reg)[3] + beta * pv4(at, c + 12u, vs);
  (*o_reg)[4] = alpha * (*o_reg)[4] + beta * pv4(at, c + 16u, vs);
  (*o_reg)[5] = alpha * (*o_reg)[5] + beta * pv4(at, c + 20u, vs);
  (*o_reg)[6] = alpha * (*o_reg)[6] + beta * pv4(at, c + 24u, vs);
  (*o_reg)[7] = alpha * (*o_reg)[7] + beta * pv4(at, c + 28u, vs);
  (*o_reg)[8] = alpha * (*o_reg)[8] + beta * pv4(at, c + 32u, vs);
  (*o_reg)[9] = alpha * (*o_reg)[9] + beta * pv4(at, c + 36u, vs);
  (*o_reg)[10] = alpha * (*o_reg)[10] + beta * pv4(at, c + 40u, vs);
  (*o_reg)[11] = alpha * (*o_reg)[11] + beta * pv4(at, c + 44u, vs);
  (*o_reg)[12] = alpha * (*o_reg)[12] + beta * pv4(at, c + 48u, vs);
  (*o_reg)[13] = alpha * (*o_reg)[13] + beta * pv4(at, c + 52u, vs);
  (*o_reg)[14] = alpha * (*o_reg)[14] + beta * pv4(at, c + 56u, vs);
  (*o_reg)[15] = alpha * (*o_reg)[15] + beta * pv4(at, c + 60u, vs);
}

// #include flash_fwd_int8.wgsl quantisation helpers

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
