"""The Harden starter: the lab's shader ``wgsl/flash_fwd.wgsl`` (the Harden solution) with its
hardening taken out and TODO H1-H5 in its place, made by find -> replace edits
(:mod:`.patches`), so that the starter always is the solution minus exactly these parts:

- H1 ragged tiles: ``rows`` and ``cols`` (fewer rows or keys in the last tile), the number of
  key tiles ceil(Nk / BC), and the guards that give rows and keys past the end no share;
- H2 causal masking: ``allowed`` ignores params.causal, and no key tile is skipped (the loop's
  bound ``j_end``, which must stay uniform);
- H3 the mask bits (binding 4);
- H4 fully masked rows: a masked probability set to exactly 0 by comparison, and ``safe_l`` /
  the lse sentinel at the end;
- H5 head dims that are not multiples of 4 (``present``).

What stays is the design: rows in registers (KS lanes a row), K/V tiles in workgroup memory,
four keys a step, two barriers per key tile. The starter compiles (Tint and naga) and passes
the cases made of whole tiles with no mask and head dims that are multiples of 4.
"""
from __future__ import annotations

from .patches import patch

BANNER = """\
// Harden — the lab's shader with its hardening taken out. It is correct only when Nq and Nk
// are multiples of BR and BC, with no causal mask, no mask and head dims that are multiples
// of 4. Make it correct for every input the host may send: TODO H1-H5 below mark where.
// Barriers must stay in uniform control flow (every invocation of a workgroup reaches each).
//
"""

EDITS = (
    # H5: a row whose width is not a multiple of 4 ends inside a vec4 slot.
    ("  return select(min(width - col, 4u), 0u, col >= width);\n",
     "  return select(4u, 0u, col >= width);  // TODO H5: a width that is not a multiple of 4\n"),
    # H2 and H3: causal and the mask bits.
    ("""  if (params.causal != 0u && kj > qi) {
    return false;
  }
  if (params.has_mask != 0u) {
    let bit = b * params.mask_batch_stride + qi * params.mask_row_stride + kj;
    return ((mask_bits[bit / 32u] >> (bit % 32u)) & 1u) != 0u;
  }
  return true;
""", """  // TODO H2: params.causal != 0: query qi may attend key kj only if kj <= qi.
  // TODO H3: params.has_mask != 0: the bit of mask_bits that says so (see the header).
  return true;
"""),
    # H1: rows of a ragged last query tile.
    ("  let rows = min(BR, params.n_q - q0);     // Br, or fewer in the ragged last tile\n",
     "  let rows = BR;                           // TODO H1: fewer in a ragged last tile\n"),
    # H1 and H2: the number of key tiles, and causal's skipped tiles.
    ("""  // Key tiles j = 0 .. j_end-1. With causal masking, tiles that start after this query tile's
  // last row are skipped outright (every score in them is masked): j_end is ceil((q0 + rows) /
  // BC), the exclusive bound, clamped to Tc when Nq > Nk. It depends only on the uniform params
  // and workgroup_id, so the barriers inside the loop are in uniform control flow.
  let t_c = ceil_div(params.n_k, BC);
  var j_end = t_c;
  if (params.causal != 0u) {
    j_end = min(t_c, ceil_div(q0 + rows, BC));
  }
""", """  // Key tiles j = 0 .. j_end-1.
  // TODO H1: a ragged last key tile (Nk not a multiple of BC) is a tile too.
  // TODO H2: with causal masking, skip the key tiles in which every score is masked; the
  //          bound must stay uniform (the same for every invocation of the workgroup).
  let t_c = params.n_k / BC;
  let j_end = t_c;
"""),
    # H1: keys of a ragged last key tile.
    ("    let cols = min(BC, params.n_k - k0);   // Bc, or fewer in the ragged last tile\n",
     "    let cols = BC;                         // TODO H1: fewer in a ragged last tile\n"),
    # H1: rows and keys past the end get the sentinel.
    ("""      // Masked and out-of-range scores become the sentinel.
      let live = vec4<bool>(row_ok && g < cols && allowed(b, qi, k0 + g),
                            row_ok && g + 1u < cols && allowed(b, qi, k0 + g + 1u),
                            row_ok && g + 2u < cols && allowed(b, qi, k0 + g + 2u),
                            row_ok && g + 3u < cols && allowed(b, qi, k0 + g + 3u));
""", """      // Masked scores become the sentinel.
      // TODO H1: so do the scores of rows and keys past the end.
      let live = vec4<bool>(allowed(b, qi, k0 + g), allowed(b, qi, k0 + g + 1u),
                            allowed(b, qi, k0 + g + 2u), allowed(b, qi, k0 + g + 3u));
"""),
    # H4: a masked probability is exactly 0.
    ("""      // Online softmax: m_new = max(m, max s), p = exp(s - m_new) (exactly 0 for the sentinel),
      // l = alpha · l + Σ p with alpha = exp(m - m_new); then o = alpha · o + Σ_u p_u · v_{g+u}.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      let p = select(exp(s - vec4<f32>(m_new)), vec4<f32>(0.0), s == vec4<f32>(MASKED_SCORE));
""", """      // Online softmax: m_new = max(m, max s), p = exp(s - m_new),
      // l = alpha · l + Σ p with alpha = exp(m - m_new); then o = alpha · o + Σ_u p_u · v_{g+u}.
      // TODO H4: while every score of a row so far is masked, m_new = MASKED_SCORE and
      //          exp(s - m_new) = 1 for a masked s: a masked key must get p = 0.
      let m_new = max(m, max(max(s.x, s.y), max(s.z, s.w)));
      let p = exp(s - vec4<f32>(m_new));
"""),
    # H4: rows with no allowed key.
    ("""  // o = o / l and lse = m + log l. A row with no allowed key has l = 0 and o = 0 (every p was
  // exactly 0): it gets o = 0 and lse = MASKED_SCORE, which the host decodes to -inf. Dividing
  // by safe_l = 1 there keeps 0/0 and log 0 from ever being evaluated.
  if (row_ok) {
    let safe_l = select(l, 1.0, l == 0.0);
    chunk_store_o(&o_reg, (b * params.n_q + qi) * DV, mine * 4u, safe_l);
    if (lane == 0u) {
      lse[b * params.n_q + qi] = select(m + log(safe_l), MASKED_SCORE, l == 0.0);
    }
  }
""", """  // o = o / l and lse = m + log l.
  // TODO H4: a row with no allowed key has l = 0: it must get o = 0 and lse = MASKED_SCORE
  //          (the host decodes it to -inf), and 0/0 or log 0 must never be evaluated.
  if (row_ok) {
    chunk_store_o(&o_reg, (b * params.n_q + qi) * DV, mine * 4u, l);
    if (lane == 0u) {
      lse[b * params.n_q + qi] = m + log(l);
    }
  }
"""),
)


def harden_starter() -> str:
    """The Harden step's starter: the lab's shader with :data:`EDITS` applied."""
    return BANNER + patch(EDITS, "the Harden starter")
