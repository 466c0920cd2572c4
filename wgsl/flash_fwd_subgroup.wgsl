// flash_fwd_subgroup.wgsl — the portable float32 kernel for adapters with `subgroups`: two query
// rows per invocation, their partial scores added by subgroup shuffles.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The same algorithm, tiles and float32 arithmetic as flash_fwd.wgsl (read that file first),
// with the work inside a workgroup split differently. In flash_fwd.wgsl an invocation owns one
// row and 64 of its head dims, so every staged key or value slot it reads from workgroup memory
// feeds four multiply-adds of one row. Here an invocation owns TWO rows and 32 of their head dims
// (q and o: 2 x 32 floats each, the same 128 registers), so every slot it reads serves two rows:
// half the reads per multiply-add. The hypothesis was that those reads hold flash_fwd.wgsl to
// about 20 of the H200's 67 float32 TFLOP/s; this file runs at flash_fwd.wgsl's speed there
// through both engines (webgpu_h200.json). By inference (not profiled) its layout is why: the two
// lanes of a row pair own contiguous 32-dim halves and read slots 128 bytes apart, the same bank
// of workgroup memory, two passes a read. flash_fwd_pair.wgsl deals the slots to the lanes
// interleaved (and masks and rescales less) and ran 23-24 % faster than this file on the H200
// (webgpu_h200_probe_candidates.json); it is a candidate to replace this file, not yet the tier's
// shader (bench/README.md). The price of the split: a row's score is now split over 2·KS
// invocations (32 dims each), which sit side by side in the workgroup and so in one subgroup, and
// add their partials with subgroupShuffleXor (a register exchange, no workgroup memory, no
// barrier). Requirements, checked by the host: KS a power of two and 2·KS at most the adapter's
// smallest subgroup size (subgroupMinSize), so a row pair's invocations never straddle subgroups
// (invocations are grouped into subgroups by consecutive local_invocation_index, which Vulkan,
// Metal and D3D do for a one-dimensional workgroup; WGSL itself does not promise it).
//
// Its NumPy re-enactment: nlpcore.kernels.flash_wgsl_mirror.forward(..., tier="subgroup"), which
// adds the 32-dim partials in the butterfly's order. Override constants: BR (even), BC, D, DV, KS
// (no SPART). Workgroup memory: k_tile and v_tile only (tiling.plan(..., tier="subgroup")).

enable subgroups;

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged key or value row per 64 head dims (flash_fwd.wgsl's layout).
const CHUNK4: u32 = 16u;

// vec4 slots of q and of o one invocation holds per row: 32 floats, for each of its two rows.
const HALF4: u32 = 8u;

// #include flash_fwd.wgsl sizes

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;

// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl query tile
  // Invocation t owns rows ra = 2·(t / LP) and rb = ra + 1 of the tile and 32 of their head dims,
  // slots [8·part, 8·part + 8) of a key or value row; LP = 2·KS invocations share a row pair and
  // sit side by side, so in one subgroup.
  let lp = 2u * KS;
  let ra = 2u * (t / lp);
  let rb = ra + 1u;
  let part = t % lp;
  let ok_a = ra < rows;                    // rows past the end compute but store nothing
  let ok_b = rb < rows;
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile
  let mine = part * HALF4;                 // this invocation's first slot within such a row

  // 32 dims of q for each of the two rows, pre-multiplied by the scale; o = 0, m, l as usual.
  var q_a = half_load_q((b * params.n_q + q0 + ra) * D, mine * 4u, ok_a, params.scale);
  var q_b = half_load_q((b * params.n_q + q0 + rb) * D, mine * 4u, ok_b, params.scale);
  var o_a = Half();
  var o_b = Half();
  var m_a = MASKED_SCORE;
  var m_b = MASKED_SCORE;
  var l_a = 0.0;
  var l_b = 0.0;

  // #include flash_fwd.wgsl key tiles
  // #include flash_fwd.wgsl tile start

    // Four keys g .. g+3 at a time, for both rows.
    for (var g = 0u; g < BC; g += 4u) {
      // Partial q·k over this invocation's 32 dims, each staged key slot read once for both
      // rows; then the LP invocations of the row pair add their partials by a butterfly of
      // shuffles (after the step with mask w each holds the sum over its group of 2w), so all
      // LP end with the full scores of both rows.
      var s = pair_dot(&q_a, &q_b, g * width + mine, width);
      for (var w = 1u; w < lp; w <<= 1u) {
        s.a += subgroupShuffleXor(s.a, w);
        s.b += subgroupShuffleXor(s.b, w);
      }
      let n_live = select(0u, cols - g, g < cols);   // keys g .. g+3 that exist
      let sa = masked(s.a, ok_a, b, q0 + ra, k0 + g, n_live);
      let sb = masked(s.b, ok_b, b, q0 + rb, k0 + g, n_live);
      // Online softmax for each row, then o = alpha · o + Σ_u p_u · v_{g+u}.
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

  // o = o / l and lse = m + log l; a row with no allowed key: o = 0, lse = MASKED_SCORE.
  finish(&o_a, l_a, m_a, ok_a, b, q0 + ra, part);
  finish(&o_b, l_b, m_b, ok_b, b, q0 + rb, part);
}

// Four scores (keys g .. g+3) of each of an invocation's two rows.
struct Pair {
  a: vec4<f32>,
  b: vec4<f32>,
}

// 32 dims of query row `row` from column `c`, scaled (those past D, or all when !ok, are 0).
fn half_load_q(row: u32, c: u32, ok: bool, scale: f32) -> Half {
  return Half(
    q_slot(row, c, ok, scale), q_slot(row, c + 4u, ok, scale), q_slot(row, c + 8u, ok, scale), q_slot(row, c + 12u, ok, scale),
    q_slot(row, c + 16u, ok, scale), q_slot(row, c + 20u, ok, scale), q_slot(row, c + 24u, ok, scale), q_slot(row, c + 28u, ok, scale));
}

// Partial q·k over one invocation's 32 dims for keys at slots at + u·stride (u = 0..3), both
// rows; each staged key slot is read once and used for both rows.
fn pair_dot(q_a: ptr<function, Half>, q_b: ptr<function, Half>, at: u32, stride: u32) -> Pair {
  var s: Pair;
  {
    let c = at;
    let k0 = k_tile[c]; let k1 = k_tile[c + 1u]; let k2 = k_tile[c + 2u]; let k3 = k_tile[c + 3u];
    let k4 = k_tile[c + 4u]; let k5 = k_tile[c + 5u]; let k6 = k_tile[c + 6u]; let k7 = k_tile[c + 7u];
    s.a.x = ((dot((*q_a)[0], k0) + dot((*q_a)[1], k1)) + (dot((*q_a)[2], k2) + dot((*q_a)[3], k3)))
          + ((dot((*q_a)[4], k4) + dot((*q_a)[5], k5)) + (dot((*q_a)[6], k6) + dot((*q_a)[7], k7)));
    s.b.x = ((dot((*q_b)[0], k0) + dot((*q_b)[1], k1)) + (dot((*q_b)[2], k2) + dot((*q_b)[3], k3)))
          + ((dot((*q_b)[4], k4) + dot((*q_b)[5], k5)) + (dot((*q_b)[6], k6) + dot((*q_b)[7], k7)));
  }
  {
    let c = at + 1u * stride;
    let k0 = k_tile[c]; let k1 = k_tile[c + 1u]; let k2 = k_tile[c + 2u]; let k3 = k_tile[c + 3u];
    let k4 = k_tile[c + 4u]; let k5 = k_tile[c + 5u]; let k6 = k_tile[c + 6u]; let k7 = k_tile[c + 7u];
    s.a.y = ((dot((*q_a)[0], k0) + dot((*q_a)[1], k1)) + (dot((*q_a)[2], k2) + dot((*q_a)[3], k3)))
          + ((dot((*q_a)[4], k4) + dot((*q_a)[5], k5)) + (dot((*q_a)[6], k6) + dot((*q_a)[7], k7)));
    s.b.y = ((dot((*q_b)[0], k0) + dot((*q_b)[1], k1)) + (dot((*q_b)[2], k2) + dot((*q_b)[3], k3)))
          + ((dot((*q_b)[4], k4) + dot((*q_b)[5], k5)) + (dot((*q_b)[6], k6) + dot((*q_b)[7], k7)));
  }
  {
    let c = at + 2u * stride;
    let k0 = k_tile[c]; let k1 = k_tile[c + 1u]; let k2 = k_tile[c + 2u]; let k3 = k_tile[c + 3u];
    let k4 = k_tile[c + 4u]; let k5 = k_tile[c + 5u]; let k6 = k_tile[c + 6u]; let k7 = k_tile[c + 7u];
    s.a.z = ((dot((*q_a)[0], k0) + dot((*q_a)[1], k1)) + (dot((*q_a)[2], k2) + dot((*q_a)[3], k3)))
          + ((dot((*q_a)[4], k4) + dot((*q_a)[5], k5)) + (dot((*q_a)[6], k6) + dot((*q_a)[7], k7)));
    s.b.z = ((dot((*q_b)[0], k0) + dot((*q_b)[1], k1)) + (dot((*q_b)[2], k2) + dot((*q_b)[3], k3)))
          + ((dot((*q_b)[4], k4) + dot((*q_b)[5], k5)) + (dot((*q_b)[6], k6) + dot((*q_b)[7], k7)));
  }
  {
    let c = at + 3u * stride;
    let k0 = k_tile[c]; let k1 = k_tile[c + 1u]; let k2 = k_tile[c + 2u]; let k3 = k_tile[c + 3u];
    let k4 = k_tile[c + 4u]; let k5 = k_tile[c + 5u]; let k6 = k_tile[c + 6u]; let k7 = k_tile[c + 7u];
    s.a.w = ((dot((*q_a)[0], k0) + dot((*q_a)[1], k1)) + (dot((*q_a)[2], k2) + dot((*q_a)[3], k3)))
          + ((dot((*q_a)[4], k4) + dot((*q_a)[5], k5)) + (dot((*q_a)[6], k6) + dot((*q_a)[7], k7)));
    s.b.w = ((dot((*q_b)[0], k0) + dot((*q_b)[1], k1)) + (dot((*q_b)[2], k2) + dot((*q_b)[3], k3)))
          + ((dot((*q_b)[4], k4) + dot((*q_b)[5], k5)) + (dot((*q_b)[6], k6) + dot((*q_b)[7], k7)));
  }
  return s;
}

// 32 floats of one row's q or o: what one invocation holds for each of its two rows.
alias Half = array<vec4<f32>, HALF4>;

// --- masked begin: flash_fwd_int8.wgsl includes it ---
// Scores s of keys kj .. kj+3 for query qi with the masked, absent (n_live of four exist) or
// past-the-end (ok false) ones set to the sentinel.
fn masked(s: vec4<f32>, ok: bool, b: u32, qi: u32, kj: u32, n_live: u32) -> vec4<f32> {
  let live = vec4<bool>(ok && 0u < n_live && allowed(b, qi, kj), ok && 1u < n_live && allowed(b, qi, kj + 1u),
                        ok && 2u < n_live && allowed(b, qi, kj + 2u), ok && 3u < n_live && allowed(b, qi, kj + 3u));
  return select(vec4<f32>(MASKED_SCORE), s, live);
}
// --- masked end ---

// o = alpha · o + p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over 32 dims of two rows at once.
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

// Row qi's 32 dims of o / l into the output (and, from the row's first invocation, its lse).
fn finish(o_reg: ptr<function, Half>, l: f32, m: f32, ok: bool, b: u32, qi: u32, part: u32) {
  if (!ok) {
    return;
  }
  let safe_l = select(l, 1.0, l == 0.0);
  let row = (b * params.n_q + qi) * DV;
  let col0 = part * HALF4 * 4u;
  store_o4(row, col0 + 0u, (*o_reg)[0] / safe_l);
  store_o4(row, col0 + 4u, (*o_reg)[1] / safe_l);
  store_o4(row, col0 + 8u, (*o_reg)[2] / safe_l);
  store_o4(row, col0 + 12u, (*o_reg)[3] / safe_l);
  store_o4(row, col0 + 16u, (*o_reg)[4] / safe_l);
  store_o4(row, col0 + 20u, (*o_reg)[5] / safe_l);
  store_o4(row, col0 + 24u, (*o_reg)[6] / safe_l);
  store_o4(row, col0 + 28u, (*o_reg)[7] / safe_l);
  if (part == 0u) {
    lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
  }
}

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
