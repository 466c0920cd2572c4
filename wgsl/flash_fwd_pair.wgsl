// flash_fwd_pair.wgsl — the float32 kernel for adapters with `subgroups`, written for reading:
// two query rows per invocation, the head dims of a row dealt to its lanes INTERLEAVED, partial
// scores added by subgroup shuffles, and flash_fwd_lean.wgsl's softmax bookkeeping. The subgroup
// tier runs flash_fwd_pair_fma.wgsl, which is this file with its two inner products written as
// fma() chains; the benchmarks also time this one (nlpcore.kernels.flash_wgsl_variants "pair").
// Read flash_fwd.wgsl first.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Why two rows, and why interleaved (issue 25). In flash_fwd.wgsl an invocation owns one row and
// 64 of its head dims, so every staged key or value slot it reads from workgroup memory feeds
// four multiply-adds of one row. Here an invocation owns TWO rows and 32 of their head dims (q
// and o: 2 x 32 floats each, the same 128 registers), so every slot it reads serves both rows:
// half the reads per multiply-add. How the LP = 2·KS lanes of a row pair split a row matters.
// The subgroup tier's first shader gave them CONTIGUOUS 32-dim halves: lane 0 read slot c, lane 1
// slot c + 8, 128 bytes further, the same bank of workgroup memory (32 banks of 4 bytes), so each
// read of the warp took two passes, as many as flash_fwd.wgsl's one-row reads (every invocation
// of a warp reading the same slot is one broadcast); it ran no faster than flash_fwd.wgsl on the
// H200. Here lane `part` owns slots part, part + LP, part + 2·LP, ... of a key or value row, so
// the LP lanes of a row pair read LP neighbouring 16-byte slots (at most 128 bytes: different
// banks, one pass) and every row pair of the warp reads the same ones; this layout ran 23-24 %
// faster than the contiguous one there (bench/results/webgpu_h200_probe_candidates.json; the bank
// conflicts are an inference, not profiled).
//
// Per four keys g .. g+3, each invocation (rows a and b, 8 slots of each of q and o):
//   s_a, s_b  partial q·k over its 32 dims, each key slot read once for both rows; then the LP
//             lanes add their partials by a butterfly of subgroupShuffleXor (a register
//             exchange: no workgroup memory, no barrier), so all LP hold the full scores
//   per row   flash_fwd_lean.wgsl's softmax: masked only in tiles that need it, o and l rescaled
//             only when the row's max moves
//   o_a, o_b  o += Σ_u p_u · v_{g+u} over its 32 dims, each value slot read once for both rows
// Requirements (checked by the plan, flash_wgsl_variants.plan): BR even, KS a power of two and
// LP = 2·KS at most the adapter's smallest subgroup (subgroupMinSize), so a row pair's lanes never
// straddle subgroups (invocations are grouped into subgroups by consecutive
// local_invocation_index, which Vulkan, Metal and D3D do for a one-dimensional workgroup; WGSL
// itself does not promise it). Its mirror: nlpcore.kernels.flash_wgsl_variants.forward(...,
// variant="pair").
//
// Override constants BR, BC, D, DV, KS (no SPART); workgroup memory k_tile and v_tile only,
// 14336 bytes at d = 64 (tiling.plan(..., tier="subgroup")); global memory and dispatch as
// flash_fwd.wgsl.

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

// --- pair main begin ---
// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl query tile
  // Invocation t owns rows ra = 2·(t / LP) and rb = ra + 1 of the tile and, of each key or value
  // row, the slots part + i·LP (i = 0 .. 7), 32 head dims; the LP = 2·KS invocations of a row
  // pair sit side by side, so in one subgroup.
  let lp = 2u * KS;
  let ra = 2u * (t / lp);
  let rb = ra + 1u;
  let part = t % lp;
  let ok_a = ra < rows;                    // rows past the end compute but store nothing
  let ok_b = rb < rows;
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile

  // 32 dims of q for each of the two rows, pre-multiplied by the scale; o = 0, m, l as usual.
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

    for (var g = 0u; g < BC; g += 4u) {
      // Partial q·k over this invocation's 32 dims, then the butterfly: after the step with mask
      // w each lane holds the sum over its group of 2w, so all LP end with the full scores.
      var s = pair_dot(&q_a, &q_b, g * width + part, width, lp);
      for (var w = 1u; w < lp; w <<= 1u) {
        s.a += subgroupShuffleXor(s.a, w);
        s.b += subgroupShuffleXor(s.b, w);
      }
      var sa = s.a;
      var sb = s.b;
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
// --- pair main end ---

// --- pair helpers begin ---
// --- pair common begin ---
// 32 floats of one row's q or o: what one invocation holds for each of its two rows; element i
// holds head dims 4·(part + i·LP) .. +3.
alias Half = array<vec4<f32>, HALF4>;

// Four scores (keys g .. g+3) of each of an invocation's two rows.
struct Pair {
  a: vec4<f32>,
  b: vec4<f32>,
}

// This lane's 32 dims of query row `row` (flat index of its first element): slots part + i·lp,
// scaled (those past D, or all when !ok, are 0).
fn pair_load_q(row: u32, part: u32, lp: u32, ok: bool, scale: f32) -> Half {
  return Half(
    q_slot(row, 4u * part, ok, scale), q_slot(row, 4u * (part + lp), ok, scale),
    q_slot(row, 4u * (part + 2u * lp), ok, scale), q_slot(row, 4u * (part + 3u * lp), ok, scale),
    q_slot(row, 4u * (part + 4u * lp), ok, scale), q_slot(row, 4u * (part + 5u * lp), ok, scale),
    q_slot(row, 4u * (part + 6u * lp), ok, scale), q_slot(row, 4u * (part + 7u * lp), ok, scale));
}

// o = alpha · o over one row's 32 dims.
fn half_scale(o: ptr<function, Half>, alpha: f32) {
  (*o)[0] *= alpha; (*o)[1] *= alpha; (*o)[2] *= alpha; (*o)[3] *= alpha;
  (*o)[4] *= alpha; (*o)[5] *= alpha; (*o)[6] *= alpha; (*o)[7] *= alpha;
}

// Row qi's 32 dims of o / l into the output (and, from the row's first lane, its lse).
fn pair_finish(o_reg: ptr<function, Half>, l: f32, m: f32, ok: bool, b: u32, qi: u32, part: u32, lp: u32) {
  if (!ok) {
    return;
  }
  let safe_l = select(l, 1.0, l == 0.0);
  let row = (b * params.n_q + qi) * DV;
  store_o4(row, 4u * part, (*o_reg)[0] / safe_l);
  store_o4(row, 4u * (part + lp), (*o_reg)[1] / safe_l);
  store_o4(row, 4u * (part + 2u * lp), (*o_reg)[2] / safe_l);
  store_o4(row, 4u * (part + 3u * lp), (*o_reg)[3] / safe_l);
  store_o4(row, 4u * (part + 4u * lp), (*o_reg)[4] / safe_l);
  store_o4(row, 4u * (part + 5u * lp), (*o_reg)[5] / safe_l);
  store_o4(row, 4u * (part + 6u * lp), (*o_reg)[6] / safe_l);
  store_o4(row, 4u * (part + 7u * lp), (*o_reg)[7] / safe_l);
  if (part == 0u) {
    lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
  }
}
// --- pair common end ---

// --- pair dot begin ---
// Partial q·k of both rows for the key whose first slot of this lane is c (slots c + i·lp).
fn key_dot2(q_a: ptr<function, Half>, q_b: ptr<function, Half>, c: u32, lp: u32) -> vec2<f32> {
  let k0 = k_tile[c]; let k1 = k_tile[c + lp]; let k2 = k_tile[c + 2u * lp]; let k3 = k_tile[c + 3u * lp];
  let k4 = k_tile[c + 4u * lp]; let k5 = k_tile[c + 5u * lp]; let k6 = k_tile[c + 6u * lp]; let k7 = k_tile[c + 7u * lp];
  let a = ((dot((*q_a)[0], k0) + dot((*q_a)[1], k1)) + (dot((*q_a)[2], k2) + dot((*q_a)[3], k3)))
        + ((dot((*q_a)[4], k4) + dot((*q_a)[5], k5)) + (dot((*q_a)[6], k6) + dot((*q_a)[7], k7)));
  let b = ((dot((*q_b)[0], k0) + dot((*q_b)[1], k1)) + (dot((*q_b)[2], k2) + dot((*q_b)[3], k3)))
        + ((dot((*q_b)[4], k4) + dot((*q_b)[5], k5)) + (dot((*q_b)[6], k6) + dot((*q_b)[7], k7)));
  return vec2<f32>(a, b);
}

// Partial scores of keys at + u·stride (u = 0..3) for both rows.
fn pair_dot(q_a: ptr<function, Half>, q_b: ptr<function, Half>, at: u32, stride: u32, lp: u32) -> Pair {
  let s0 = key_dot2(q_a, q_b, at, lp);
  let s1 = key_dot2(q_a, q_b, at + stride, lp);
  let s2 = key_dot2(q_a, q_b, at + 2u * stride, lp);
  let s3 = key_dot2(q_a, q_b, at + 3u * stride, lp);
  return Pair(vec4<f32>(s0.x, s1.x, s2.x, s3.x), vec4<f32>(s0.y, s1.y, s2.y, s3.y));
}

// o += p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 for both rows, value row u's slot i of this lane at
// at + u·stride + i·lp; each value slot read once for both rows.
fn pair_accumulate(o_a: ptr<function, Half>, o_b: ptr<function, Half>, pa: vec4<f32>, pb: vec4<f32>,
                   at: u32, stride: u32, lp: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  {
    let v0 = v_tile[at]; let v1 = v_tile[a1]; let v2 = v_tile[a2]; let v3 = v_tile[a3];
    (*o_a)[0] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[0] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[1] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[1] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 2u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[2] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[2] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 3u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[3] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[3] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 4u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[4] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[4] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 5u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[5] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[5] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 6u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[6] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[6] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
  {
    let i = 7u * lp;
    let v0 = v_tile[at + i]; let v1 = v_tile[a1 + i]; let v2 = v_tile[a2 + i]; let v3 = v_tile[a3 + i];
    (*o_a)[7] += pa.x * v0 + pa.y * v1 + pa.z * v2 + pa.w * v3;
    (*o_b)[7] += pb.x * v0 + pb.y * v1 + pb.z * v2 + pb.w * v3;
  }
}
// --- pair dot end ---
// --- pair helpers end ---

// --- masked begin: the int8 tier and the pair variants include it ---
// Scores s of keys kj .. kj+3 for query qi with the masked, absent (n_live of four exist) or
// past-the-end (ok false) ones set to the sentinel.
fn masked(s: vec4<f32>, ok: bool, b: u32, qi: u32, kj: u32, n_live: u32) -> vec4<f32> {
  let live = vec4<bool>(ok && 0u < n_live && allowed(b, qi, kj), ok && 1u < n_live && allowed(b, qi, kj + 1u),
                        ok && 2u < n_live && allowed(b, qi, kj + 2u), ok && 3u < n_live && allowed(b, qi, kj + 3u));
  return select(vec4<f32>(MASKED_SCORE), s, live);
}
// --- masked end ---

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
