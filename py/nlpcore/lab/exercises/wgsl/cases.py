"""The inputs of the ladder and what the learner's shader must return on them: the CPU
mirror of ``wgsl/flash_fwd.wgsl`` under the learner's tile plan (and the float64 reference)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

from nlpcore.kernels import flash_wgsl_mirror as mirror
from nlpcore.kernels import reference, tiling
from nlpcore.lab.model import CheckFailed

from .sizing import STORAGE_LIMIT, Layout

HOST_BR = 64  # query rows per workgroup unless the shader's BR default says otherwise
HOST_BC = 16  # keys per staged K/V tile unless the shader's BC default says otherwise
# The host's plan for this exercise: smaller than the lab's default (tiling.plan: 128 rows, 28
# keys for d = 64), so that lcm(BR, BC) = 64 keeps Scratch's whole-tile sizes small.


@dataclass(frozen=True)
class Case:
    """One input of the ladder. ``n`` sizes of 0 mean "whole tiles": Nq = Nk = tiles · lcm(BR, BC)
    of the learner's plan (the Scratch step's square sizes that are multiples of the tile)."""
    id: str
    title: str
    batch: int
    n_q: int
    n_k: int
    d: int
    dv: int
    causal: bool = False
    mask: Optional[str] = None     # None, "padding" (key padding), "rows" (fully masked rows)
    spread: float = 1.0            # q and k scale: large values stress the running max
    tiles: int = 0                 # whole-tile case: this many lcm(BR, BC) blocks
    seed: int = 0

    def sizes(self, br: int, bc: int) -> Tuple[int, int]:
        if self.tiles:
            lcm = br * bc // math.gcd(br, bc)
            if lcm > MAX_WHOLE_TILE:
                raise CheckFailed(
                    "not run: with BR=%d and BC=%d the smallest size made of whole tiles is "
                    "lcm(BR, BC) = %d rows, more than this step's cases use (%d); choose tiles "
                    "whose sizes divide each other, e.g. powers of two" % (br, bc, lcm, MAX_WHOLE_TILE),
                    expected="lcm(BR, BC) <= %d" % MAX_WHOLE_TILE, got="lcm = %d" % lcm)
            return self.tiles * lcm, self.tiles * lcm
        return self.n_q, self.n_k

    def inputs(self, br: int, bc: int):
        """q (B, Nq, d), k (B, Nk, d), v (B, Nk, dv) float32 and the mask (or None)."""
        n_q, n_k = self.sizes(br, bc)
        r = np.random.RandomState(1000 + self.seed)
        q = (self.spread * r.standard_normal((self.batch, n_q, self.d))).astype(np.float32)
        k = (self.spread * r.standard_normal((self.batch, n_k, self.d))).astype(np.float32)
        v = r.standard_normal((self.batch, n_k, self.dv)).astype(np.float32)
        mask = None
        if self.mask == "padding":  # (B, 1, Nk): batch entry b pads its last 7 + 11·b keys
            mask = np.ones((self.batch, 1, n_k), dtype=bool)
            for b in range(self.batch):
                mask[b, 0, n_k - 7 - 11 * b:] = False
        elif self.mask == "rows":   # (B, Nq, Nk): random, with rows 3 and Nq-2 fully masked
            mask = r.random_sample((self.batch, n_q, n_k)) < 0.6
            mask[:, 3, :] = False
            mask[:, n_q - 2, :] = False
        return q, k, v, mask

    def describe(self, br: int, bc: int) -> str:
        n_q, n_k = self.sizes(br, bc)
        text = "B=%d, Nq=%d, Nk=%d, d=%d, dv=%d" % (self.batch, n_q, n_k, self.d, self.dv)
        if self.causal:
            text += ", causal"
        if self.mask == "padding":
            text += ", key padding"
        elif self.mask == "rows":
            text += ", mask with fully masked rows"
        if self.spread != 1.0:
            text += ", |q|,|k| ~ %g" % self.spread
        return text


SCRATCH_CASES = (
    Case("one-tile", "One tile: Nq = Nk = lcm(BR, BC), d = 64", 1, 0, 0, 64, 64, tiles=1, seed=1),
    Case("many-tiles", "Many tiles and a batch of 2: d = 32", 2, 0, 0, 32, 32, tiles=4, seed=2),
    Case("large-scores", "Large scores: the running max must rescale", 1, 0, 0, 16, 16,
         spread=6.0, tiles=3, seed=3),
)

HARDEN_CASES = (
    Case("ragged", "Ragged N: 77 is no multiple of any tile", 1, 77, 77, 32, 32, seed=11),
    Case("nq-ne-nk", "Nq ≠ Nk (50 queries, 123 keys)", 1, 50, 123, 32, 32, seed=12),
    Case("causal", "Causal, ragged, batch of 2", 2, 70, 70, 32, 32, causal=True, seed=13),
    Case("key-padding", "Key padding mask (whole tiles)", 2, 64, 64, 32, 32, mask="padding",
         seed=14),
    Case("masked-rows", "Fully masked rows: o = 0, lse = -inf, no NaN", 1, 64, 64, 32, 32,
         mask="rows", seed=15),
    Case("odd-d", "d = 23 and dv = 38 (not multiples of 4)", 1, 64, 64, 23, 38, seed=16),
    Case("many-workgroups", "Many workgroups: B = 4, N = 384", 4, 384, 384, 16, 16, seed=17),
    Case("causal-nq-gt-nk", "Causal with more queries than keys (100 queries, 37 keys)", 1, 100,
         37, 16, 16, causal=True, seed=18),
)

MAX_WHOLE_TILE = 256    # rows: the Scratch cases are 1-4 tiles of lcm(BR, BC) rows
MAX_MIRROR_STEPS = 4096  # steps of four keys the mirror takes with the learner's plan before it
                         # uses the host's (tiny tiles would take minutes in Pyodide; the result
                         # differs by float32 rounding only, far inside the tolerance)

TIMING_CASES = ("many-tiles", "many-workgroups")  # the page also times the reference shader here


def host_plan(d: int, dv: int) -> tiling.TilePlan:
    """The host's tile plan for a case: tiling.plan with Br = HOST_BR, Bc = HOST_BC (KS from d
    and dv, SPART from all three)."""
    return tiling.plan(d, 4, dv=dv, br=HOST_BR, bc=HOST_BC)


def _host(case: Case) -> Dict[str, int]:
    """The override values the host offers for a case (a shader's own BR/BC defaults win)."""
    return dict(host_plan(case.d, case.dv).constants())


_reference_cache: Dict[tuple, tuple] = {}


def reference64(case: Case, br: int, bc: int):
    """(o, lse) of nlpcore.kernels.reference in float64 on the case's inputs (cached)."""
    key = (case, br, bc)
    if key not in _reference_cache:
        q, k, v, mask, _, _ = expected(case, br, bc)
        if len(_reference_cache) > 32:
            _reference_cache.clear()
        _reference_cache[key] = reference.forward(q.astype(np.float64), k.astype(np.float64),
                                                  v.astype(np.float64), causal=case.causal,
                                                  mask=mask)
    return _reference_cache[key]


def _tile_plan(case: Case, lay: Layout) -> tiling.TilePlan:
    """The learner's plan as a TilePlan for the mirror (arrays as the learner declared them)."""
    br, bc, ks = lay.env["BR"], lay.env["BC"], lay.env["KS"]
    return tiling.TilePlan(d=case.d, dv=case.dv, dtype_bytes=4, br=br, bc=bc, ks=ks,
                           workgroup_size=lay.invocations,
                           spart=lay.env.get("SPART", tiling.spart_elements(br, bc, ks)),
                           storage_limit=STORAGE_LIMIT,
                           arrays=tuple((n, b) for n, b, _ in lay.arrays),
                           bytes_used=lay.bytes_used)


_expected_cache: Dict[tuple, tuple] = {}


def expected(case: Case, br: int, bc: int):
    """(q, k, v, mask, o, lse) with o, lse from the CPU mirror of wgsl/flash_fwd.wgsl under the
    learner's block sizes (the host's when those need over MAX_MIRROR_STEPS steps of four keys,
    or make no plan tiling accepts); cached, since grade() and every verify() need them. (The
    float64 reference of the same inputs is :func:`reference64`.)"""
    key = (case, br, bc)
    if key not in _expected_cache:
        q, k, v, mask = case.inputs(br, bc)
        steps = q.shape[0] * -(-q.shape[1] // br) * -(-k.shape[1] // bc) * -(-bc // tiling.KEY_STEP)
        plan = host_plan(case.d, case.dv)
        if steps <= MAX_MIRROR_STEPS:
            try:
                plan = tiling.plan(case.d, 4, storage_limit=1 << 30, dv=case.dv, br=br, bc=bc)
            except ValueError:  # e.g. more than 256 invocations: the GPU check refuses it anyway
                pass
        o, lse = mirror.forward(q, k, v, causal=case.causal, mask=mask, plan=plan)
        if len(_expected_cache) > 32:
            _expected_cache.clear()
        _expected_cache[key] = (q, k, v, mask, o, lse)
    return _expected_cache[key]
