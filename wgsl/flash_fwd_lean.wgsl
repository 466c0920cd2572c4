// flash_fwd_lean.wgsl — a benchmark variant of the portable kernel (bench/webgpu_tiers.py
// --tier-variants, nlpcore.kernels.flash_wgsl_variants "lean"): the same tiles, registers,
// loop order and float32 arithmetic as flash_fwd.wgsl (read that file first), less softmax
// bookkeeping per four keys.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The question it asks of the H200 (issue 25): does the per-key bookkeeping of the online
// softmax, rather than the multiply-adds, bound the portable kernel? flash_fwd.wgsl, for every
// four keys of every row, masks the scores (four calls of allowed(), a select), computes
// alpha = exp(m - m_new) and rescales all 64 registers of o by it, and selects the masked
// probabilities away. FlashAttention-2 (Dao 2023, arXiv:2307.08691, section 3.1) instead
// rescales once per key tile and masks only the tiles that need it. Here, with no more
// registers than flash_fwd.wgsl:
//   - a tile needs no masking when it holds BC keys, no mask is bound, and (causal) its last key
//     is at most the query tile's first row: `full`, the same for the whole workgroup, so the
//     branch is uniform; such tiles skip allowed(), the sentinel and the select;
//   - o and l are rescaled only when a row's running max moves (m_new > m). Otherwise alpha
//     would be exp(0) = 1 and the rescale would change nothing, so the results are those of
//     flash_fwd.wgsl's formulas; for random inputs the max of a row moves about ln N times
//     in N keys, so almost every group of four keys skips the 64 multiplies and the exp.
// Its mirror is nlpcore.kernels.flash_wgsl_variants.forward(..., variant="lean").
//
// Override constants, workgroup memory (k_tile, v_tile, s_part: 14352 bytes at d = 64), global
// memory and dispatch: exactly flash_fwd.wgsl's (tiling.plan), so it runs on any adapter.

// #include flash_fwd.wgsl sentinel

// #include flash_fwd.wgsl overrides

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_part: array<f32, SPART>;

// --- lean main begin ---
// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl prologue

  var q_reg = chunk_load_q((b * params.n_q + qi) * D, mine * 4u, row_ok, params.scale);
  var o_reg = Chunk();
  var m = MASKED_SCORE;
  var l = 0.0;

  // #include flash_fwd.wgsl key tiles
  // #include flash_fwd.wgsl tile start

    // --- full tile begin ---
    // Does any score of this tile need the sentinel? Not when the tile holds BC keys, no mask is
    // bound and, with causal masking, its last key k0 + BC - 1 is at most the query tile's first
    // row q0. Rows past the end need nothing either: their q is 0, their scores 0, and they store
    // nothing. Uniform: it depends on params, the tile and workgroup_id only.
    let full = params.has_mask == 0u && cols == BC && (params.causal == 0u || k0 + BC <= q0 + 1u);
    // --- full tile end ---

    // KS > 1: every lane's partial q·k over its 64 dims, as flash_fwd.wgsl does.
    if (KS > 1u) {
      for (var c = 0u; c < BC; c++) {
        s_part[t * BC + c] = chunk_dot(&q_reg, c * width + mine);
      }
      workgroupBarrier();
    }

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
      if (!full) {                         // masked and out-of-range scores become the sentinel
        let live = vec4<bool>(row_ok && g < cols && allowed(b, qi, k0 + g),
                              row_ok && g + 1u < cols && allowed(b, qi, k0 + g + 1u),
                              row_ok && g + 2u < cols && allowed(b, qi, k0 + g + 2u),
                              row_ok && g + 3u < cols && allowed(b, qi, k0 + g + 3u));
        s = select(vec4<f32>(MASKED_SCORE), s, live);
      }

      // --- lean softmax begin ---
      // The row's max moved: rescale l and o by alpha = exp(m - m_new) (0 the first time, when m
      // is the sentinel). Otherwise alpha would be 1 and nothing is done.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      if (m_new > m) {
        let alpha = exp(m - m_new);
        l = alpha * l;
        chunk_scale(&o_reg, alpha);
        m = m_new;
      }
      var p = exp(s - vec4<f32>(m));
      if (!full) {                         // a masked score's probability is exactly 0
        p = select(p, vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE));
      }
      l = l + ((p.x + p.y) + (p.z + p.w));
      // --- lean softmax end ---
      chunk_accumulate(&o_reg, p, g * width + mine, width);
    }
  }

  // #include flash_fwd.wgsl finish
}
// --- lean main end ---

// --- lean helpers begin ---
// --- lean scale begin ---
// o = alpha · o over one lane's 64 dims (constant indices into o).
fn chunk_scale(o_reg: ptr<function, Chunk>, alpha: f32) {
  (*o_reg)[0] *= alpha; (*o_reg)[1] *= alpha; (*o_reg)[2] *= alpha; (*o_reg)[3] *= alpha;
  (*o_reg)[4] *= alpha; (*o_reg)[5] *= alpha; (*o_reg)[6] *= alpha; (*o_reg)[7] *= alpha;
  (*o_reg)[8] *= alpha; (*o_reg)[9] *= alpha; (*o_reg)[10] *= alpha; (*o_reg)[11] *= alpha;
  (*o_reg)[12] *= alpha; (*o_reg)[13] *= alpha; (*o_reg)[14] *= alpha; (*o_reg)[15] *= alpha;
}
// --- lean scale end ---

// o = o + p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over one lane's 64 dims, value row u at slot
// at + u·stride of v_tile: flash_fwd.wgsl's chunk_update without the alpha.
fn chunk_accumulate(o_reg: ptr<function, Chunk>, p: vec4<f32>, at: u32, stride: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  (*o_reg)[0] += p.x * v_tile[at] + p.y * v_tile[a1] + p.z * v_tile[a2] + p.w * v_tile[a3];
  (*o_reg)[1] += p.x * v_tile[at + 1u] + p.y * v_tile[a1 + 1u] + p.z * v_tile[a2 + 1u] + p.w * v_tile[a3 + 1u];
  (*o_reg)[2] += p.x * v_tile[at + 2u] + p.y * v_tile[a1 + 2u] + p.z * v_tile[a2 + 2u] + p.w * v_tile[a3 + 2u];
  (*o_reg)[3] += p.x * v_tile[at + 3u] + p.y * v_tile[a1 + 3u] + p.z * v_tile[a2 + 3u] + p.w * v_tile[a3 + 3u];
  (*o_reg)[4] += p.x * v_tile[at + 4u] + p.y * v_tile[a1 + 4u] + p.z * v_tile[a2 + 4u] + p.w * v_tile[a3 + 4u];
  (*o_reg)[5] += p.x * v_tile[at + 5u] + p.y * v_tile[a1 + 5u] + p.z * v_tile[a2 + 5u] + p.w * v_tile[a3 + 5u];
  (*o_reg)[6] += p.x * v_tile[at + 6u] + p.y * v_tile[a1 + 6u] + p.z * v_tile[a2 + 6u] + p.w * v_tile[a3 + 6u];
  (*o_reg)[7] += p.x * v_tile[at + 7u] + p.y * v_tile[a1 + 7u] + p.z * v_tile[a2 + 7u] + p.w * v_tile[a3 + 7u];
  (*o_reg)[8] += p.x * v_tile[at + 8u] + p.y * v_tile[a1 + 8u] + p.z * v_tile[a2 + 8u] + p.w * v_tile[a3 + 8u];
  (*o_reg)[9] += p.x * v_tile[at + 9u] + p.y * v_tile[a1 + 9u] + p.z * v_tile[a2 + 9u] + p.w * v_tile[a3 + 9u];
  (*o_reg)[10] += p.x * v_tile[at + 10u] + p.y * v_tile[a1 + 10u] + p.z * v_tile[a2 + 10u] + p.w * v_tile[a3 + 10u];
  (*o_reg)[11] += p.x * v_tile[at + 11u] + p.y * v_tile[a1 + 11u] + p.z * v_tile[a2 + 11u] + p.w * v_tile[a3 + 11u];
  (*o_reg)[12] += p.x * v_tile[at + 12u] + p.y * v_tile[a1 + 12u] + p.z * v_tile[a2 + 12u] + p.w * v_tile[a3 + 12u];
  (*o_reg)[13] += p.x * v_tile[at + 13u] + p.y * v_tile[a1 + 13u] + p.z * v_tile[a2 + 13u] + p.w * v_tile[a3 + 13u];
  (*o_reg)[14] += p.x * v_tile[at + 14u] + p.y * v_tile[a1 + 14u] + p.z * v_tile[a2 + 14u] + p.w * v_tile[a3 + 14u];
  (*o_reg)[15] += p.x * v_tile[at + 15u] + p.y * v_tile[a1 + 15u] + p.z * v_tile[a2 + 15u] + p.w * v_tile[a3 + 15u];
}
// --- lean helpers end ---

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk helpers

// #include flash_fwd.wgsl allowed
