// flash_fwd_pair_wg.wgsl — flash_fwd_pair.wgsl for adapters WITHOUT subgroups (a benchmark
// variant beside the portable tier: bench/webgpu_tiers.py --tier-variants,
// nlpcore.kernels.flash_wgsl_variants "pair-wg"). Needs no optional feature and stays within
// WebGPU's default 16384 bytes of workgroup memory.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The question it asks of the H200 (issue 25): if two rows an invocation (flash_fwd_pair.wgsl:
// each staged slot read once for two rows, interleaved lanes) is faster, does the portable tier
// keep that gain when the partial scores of a row pair are added through workgroup memory
// instead of subgroup shuffles? WebGPU's portable subset has no way for invocations to read
// each other's registers, so the LP = 2·KS lanes of a row pair exchange partials as
// flash_fwd.wgsl's KS > 1 path does: per key tile, every lane writes its partial q·k of both
// rows for all BC keys to s_part, one barrier, then each lane adds the LP partials of its row
// pair in lane order and runs flash_fwd_pair.wgsl's softmax and P·V. The price: s_part holds
// 2·BR·KS·BC floats, so at d = 64 with BR = 128 a key tile has BC = 8 keys (tiles 4096 bytes,
// s_part 8192: 12288 bytes), and three barriers per tile instead of two.
//
// s_part layout, vec4 of four keys' partials: s_part[((g / 4)·2 + row)·BR·KS + lane·BR/2 + pair]
// for row pair `pair` (0 .. BR/2-1), its lane `lane` (0 .. LP-1), `row` 0 (a) or 1 (b), keys
// g .. g+3. For one lane and row, consecutive row pairs use consecutive vec4s, so a warp's read
// of one lane's partials touches 16 neighbouring slots (two passes through the banks), not 16
// slots 128 bytes apart (sixteen).
//
// Override constants BR (even), BC, D, DV, KS, SPART (= BR·KS·BC / 2 vec4, from
// flash_wgsl_variants.plan); global memory and dispatch as flash_fwd.wgsl. Its mirror:
// nlpcore.kernels.flash_wgsl_variants.forward(..., variant="pair-wg").

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged key or value row per 64 head dims (flash_fwd.wgsl's layout).
const CHUNK4: u32 = 16u;

// vec4 slots of q and of o one invocation holds per row: 32 floats, for each of its two rows.
const HALF4: u32 = 8u;

// #include flash_fwd.wgsl sizes
override SPART: u32;

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> s_part: array<vec4<f32>, SPART>;

// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl query tile
  // Invocation t = pair·LP + part owns rows ra = 2·pair and rb = ra + 1 and, of each key or
  // value row, the slots part + i·LP (i = 0 .. 7), as in flash_fwd_pair.wgsl.
  let lp = 2u * KS;
  let pair = t / lp;
  let ra = 2u * pair;
  let rb = ra + 1u;
  let part = t % lp;
  let ok_a = ra < rows;                    // rows past the end compute but store nothing
  let ok_b = rb < rows;
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile
  let lanes = BR * KS;                     // invocations of the workgroup
  let pairs = BR / 2u;

  var q_a = pair_load_q((b * params.n_q + q0 + ra) * D, part, lp, ok_a, params.scale);
  var q_b = pair_load_q((b * params.n_q + q0 + rb) * D, part, lp, ok_b, params.scale);
  var o_a = Half();
  var o_b = Half();
  var m_a = MASKED_SCORE;
  var m_b = MASKED_SCORE;
  var l_a = 0.0;
  var l_b = 0.0;

  // #include flash_fwd.wgsl key tiles
  // #include flash_fwd.wgsl tile start
    // #include flash_fwd_lean.wgsl full tile

    // This lane's partial q·k of both rows for every key of the tile, into s_part.
    for (var g = 0u; g < BC; g += 4u) {
      let s = pair_dot(&q_a, &q_b, g * width + part, width, lp);
      s_part[(g / 2u) * lanes + part * pairs + pair] = s.a;          // (g / 4)·2 + 0
      s_part[(g / 2u + 1u) * lanes + part * pairs + pair] = s.b;     // (g / 4)·2 + 1
    }
    workgroupBarrier();

    for (var g = 0u; g < BC; g += 4u) {
      // The LP partials of the row pair, added in lane order.
      var sa = vec4<f32>(0.0);
      var sb = vec4<f32>(0.0);
      for (var x = 0u; x < lp; x++) {
        sa += s_part[(g / 2u) * lanes + x * pairs + pair];
        sb += s_part[(g / 2u + 1u) * lanes + x * pairs + pair];
      }
      if (!full) {
        let n_live = select(0u, cols - g, g < cols);   // keys g .. g+3 that exist
        sa = masked(sa, ok_a, b, q0 + ra, k0 + g, n_live);
        sb = masked(sb, ok_b, b, q0 + rb, k0 + g, n_live);
      }
      // flash_fwd_lean.wgsl's softmax for each row: rescale only when the row's max moves.
      let mn_a = max(m_a, max(max(sa.x, sa.y), max(sa.z, sa.w)));
      if (mn_a > m_a) {
        let alpha = exp(m_a - mn_a);
        l_a = alpha * l_a;
        half_scale(&o_a, alpha);
        m_a = mn_a;
      }
      let mn_b = max(m_b, max(max(sb.x, sb.y), max(sb.z, sb.w)));
      if (mn_b > m_b) {
        let alpha = exp(m_b - mn_b);
        l_b = alpha * l_b;
        half_scale(&o_b, alpha);
        m_b = mn_b;
      }
      var pa = exp(sa - vec4<f32>(m_a));
      var pb = exp(sb - vec4<f32>(m_b));
      if (!full) {                         // a masked score's probability is exactly 0
        pa = select(pa, vec4<f32>(0.0), sa == vec4<f32>(MASKED_SCORE));
        pb = select(pb, vec4<f32>(0.0), sb == vec4<f32>(MASKED_SCORE));
      }
      l_a = l_a + ((pa.x + pa.y) + (pa.z + pa.w));
      l_b = l_b + ((pb.x + pb.y) + (pb.z + pb.w));
      pair_accumulate(&o_a, &o_b, pa, pb, g * width + part, width, lp);
    }
  }

  // o = o / l and lse = m + log l; a row with no allowed key: o = 0, lse = MASKED_SCORE.
  pair_finish(&o_a, l_a, m_a, ok_a, b, q0 + ra, part, lp);
  pair_finish(&o_b, l_b, m_b, ok_b, b, q0 + rb, part, lp);
}

// #include flash_fwd_pair.wgsl pair helpers

// #include flash_fwd_pair.wgsl masked

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
