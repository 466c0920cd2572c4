// flash_fwd_half.wgsl — a benchmark variant (bench/webgpu_tiers.py --tier-variants,
// nlpcore.kernels.flash_wgsl_variants "half"): ONE query row per 2·KS invocations, each holding
// half of the row's 64 dims per lane of flash_fwd.wgsl, so half the registers of q and o.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// The question it asks of the H200 (issue 25): is the portable kernel short of warps? In
// flash_fwd.wgsl an invocation keeps 64 floats of q and 64 of o in registers (plus the
// temporaries of four keys), which may let only a few workgroups of 128 invocations share a
// multiprocessor, too few warps to hide the latency of workgroup-memory reads (hypothesis; WGSL
// has no register counts or occupancy to read). Here an invocation keeps 32 + 32 floats, and a
// workgroup of 2·BR·KS invocations works on the same BR rows and staged tiles as flash_fwd.wgsl.
// Everything else per multiply-add is as flash_fwd.wgsl: each staged slot read serves one row,
// four multiply-adds, plus a shuffle butterfly to add the two halves of every score. So: if
// this runs faster than the portable tier, warps were short; if not, they were not.
//
// Lanes as flash_fwd_pair.wgsl: the LP = 2·KS lanes of a row own the row's vec4 slots part,
// part + LP, ... (interleaved: neighbouring lanes read neighbouring 16-byte slots), sit side by
// side in one subgroup and add their partial scores by subgroupShuffleXor; the softmax is
// flash_fwd_lean.wgsl's. Requirements (flash_wgsl_variants.plan): KS a power of two, LP at most
// the adapter's smallest subgroup, 2·BR·KS <= 256 invocations. Its mirror:
// nlpcore.kernels.flash_wgsl_variants.forward(..., variant="half").
//
// Override constants BR, BC, D, DV, KS (no SPART); workgroup memory k_tile, v_tile as
// flash_fwd_pair.wgsl (14336 bytes at d = 64); dispatch (ceil(Nq / BR), 1, B) workgroups of
// 2·BR·KS invocations.

enable subgroups;

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged key or value row per 64 head dims (flash_fwd.wgsl's layout).
const CHUNK4: u32 = 16u;

// vec4 slots of q and of o one invocation holds of its row: 32 floats.
const HALF4: u32 = 8u;

// #include flash_fwd.wgsl sizes

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd.wgsl bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;

// The entry point first; the helpers it calls follow it.
@compute @workgroup_size(2u * BR * KS)
fn main(@builtin(workgroup_id) wg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  // #include flash_fwd.wgsl query tile
  // Invocation t owns row r = t / LP of the tile and, of each key or value row, the slots
  // part + i·LP (i = 0 .. 7).
  let lp = 2u * KS;
  let r = t / lp;
  let part = t % lp;
  let row_ok = r < rows;                   // rows past the end compute but store nothing
  let qi = q0 + r;
  let width = KS * CHUNK4;                 // vec4 slots per key (or value) row of a tile

  var q_h = pair_load_q((b * params.n_q + qi) * D, part, lp, row_ok, params.scale);
  var o_h = Half();
  var m = MASKED_SCORE;
  var l = 0.0;

  // #include flash_fwd.wgsl key tiles
  for (var j = 0u; j < j_end; j++) {
    workgroupBarrier();                    // everyone is done with the previous K_j, V_j
    let k0 = j * BC;
    let cols = min(BC, params.n_k - k0);   // Bc, or fewer in the ragged last tile

    // Stage K_j and V_j as flash_fwd.wgsl does, by all 2·BR·KS invocations.
    for (var e = t; e < BC * width; e += 2u * BR * KS) {
      let c = e / width;
      let col = (e % width) * 4u;
      var nk = 0u;
      var nv = 0u;
      if (c < cols) {
        nk = present(col, D);
        nv = present(col, DV);
      }
      k_tile[e] = load_k4((b * params.n_k + k0 + c) * D + col, nk);
      v_tile[e] = load_v4((b * params.n_k + k0 + c) * DV + col, nv);
    }
    workgroupBarrier();
    // #include flash_fwd_lean.wgsl full tile

    for (var g = 0u; g < BC; g += 4u) {
      // Partial q·k over this lane's 32 dims, then the butterfly over the row's LP lanes.
      var s = half_dot(&q_h, g * width + part, width, lp);
      for (var w = 1u; w < lp; w <<= 1u) {
        s += subgroupShuffleXor(s, w);
      }
      if (!full) {
        let n_live = select(0u, cols - g, g < cols);   // keys g .. g+3 that exist
        s = masked(s, row_ok, b, qi, k0 + g, n_live);
      }
      // flash_fwd_lean.wgsl's softmax: rescale only when the row's max moves.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      if (m_new > m) {
        let alpha = exp(m - m_new);
        l = alpha * l;
        half_scale(&o_h, alpha);
        m = m_new;
      }
      var p = exp(s - vec4<f32>(m));
      if (!full) {                         // a masked score's probability is exactly 0
        p = select(p, vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE));
      }
      l = l + ((p.x + p.y) + (p.z + p.w));
      half_accumulate(&o_h, p, g * width + part, width, lp);
    }
  }

  // o = o / l and lse = m + log l; a row with no allowed key: o = 0, lse = MASKED_SCORE.
  pair_finish(&o_h, l, m, row_ok, b, qi, part, lp);
}

// Partial q·k over this lane's 32 dims for the key whose first slot of this lane is c.
fn key_dot1(q_h: ptr<function, Half>, c: u32, lp: u32) -> f32 {
  return ((dot((*q_h)[0], k_tile[c]) + dot((*q_h)[1], k_tile[c + lp]))
        + (dot((*q_h)[2], k_tile[c + 2u * lp]) + dot((*q_h)[3], k_tile[c + 3u * lp])))
       + ((dot((*q_h)[4], k_tile[c + 4u * lp]) + dot((*q_h)[5], k_tile[c + 5u * lp]))
        + (dot((*q_h)[6], k_tile[c + 6u * lp]) + dot((*q_h)[7], k_tile[c + 7u * lp])));
}

// Partial scores of keys at + u·stride (u = 0..3).
fn half_dot(q_h: ptr<function, Half>, at: u32, stride: u32, lp: u32) -> vec4<f32> {
  return vec4<f32>(key_dot1(q_h, at, lp), key_dot1(q_h, at + stride, lp),
                   key_dot1(q_h, at + 2u * stride, lp), key_dot1(q_h, at + 3u * stride, lp));
}

// o += p.x·v_0 + p.y·v_1 + p.z·v_2 + p.w·v_3 over this lane's 32 dims (slot i at + u·stride + i·lp).
fn half_accumulate(o: ptr<function, Half>, p: vec4<f32>, at: u32, stride: u32, lp: u32) {
  let a1 = at + stride;
  let a2 = a1 + stride;
  let a3 = a2 + stride;
  (*o)[0] += p.x * v_tile[at] + p.y * v_tile[a1] + p.z * v_tile[a2] + p.w * v_tile[a3];
  (*o)[1] += p.x * v_tile[at + lp] + p.y * v_tile[a1 + lp] + p.z * v_tile[a2 + lp] + p.w * v_tile[a3 + lp];
  (*o)[2] += p.x * v_tile[at + 2u * lp] + p.y * v_tile[a1 + 2u * lp] + p.z * v_tile[a2 + 2u * lp] + p.w * v_tile[a3 + 2u * lp];
  (*o)[3] += p.x * v_tile[at + 3u * lp] + p.y * v_tile[a1 + 3u * lp] + p.z * v_tile[a2 + 3u * lp] + p.w * v_tile[a3 + 3u * lp];
  (*o)[4] += p.x * v_tile[at + 4u * lp] + p.y * v_tile[a1 + 4u * lp] + p.z * v_tile[a2 + 4u * lp] + p.w * v_tile[a3 + 4u * lp];
  (*o)[5] += p.x * v_tile[at + 5u * lp] + p.y * v_tile[a1 + 5u * lp] + p.z * v_tile[a2 + 5u * lp] + p.w * v_tile[a3 + 5u * lp];
  (*o)[6] += p.x * v_tile[at + 6u * lp] + p.y * v_tile[a1 + 6u * lp] + p.z * v_tile[a2 + 6u * lp] + p.w * v_tile[a3 + 6u * lp];
  (*o)[7] += p.x * v_tile[at + 7u * lp] + p.y * v_tile[a1 + 7u * lp] + p.z * v_tile[a2 + 7u * lp] + p.w * v_tile[a3 + 7u * lp];
}

// #include flash_fwd_pair.wgsl pair helpers

// #include flash_fwd_pair.wgsl masked

// #include flash_fwd.wgsl basics

// #include flash_fwd.wgsl chunk io

// #include flash_fwd.wgsl allowed
