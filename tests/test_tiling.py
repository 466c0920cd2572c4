"""The tile plan: every plan fits the 16384-byte workgroup budget as WebGPU counts it, the
choice rule picks the largest tile that fits, impossible requests fail with a message that
names the limit, and the plan's constants are exactly the shader's ``override`` declarations."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import given, settings, strategies as st

from nlpcore.kernels import tiling

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 16384


def _fits(br, bc, plan):
    return tiling.bytes_needed(br, bc, plan.d, plan.dv, plan.dtype_bytes, plan.ks) <= plan.storage_limit


@pytest.mark.parametrize("d", [1, 2, 3, 7, 16, 32, 59, 64, 65, 80, 111, 128, 256, 300, 448])
def test_plan_fits_and_takes_the_largest_key_tile(d):
    plan = tiling.plan(d)
    assert plan.bytes_used <= LIMIT
    assert plan.bytes_used == sum(b for _, b in plan.arrays)
    assert all(b % 16 == 0 for _, b in plan.arrays)  # WebGPU counts each array rounded up to 16 B
    assert plan.workgroup_size == plan.br * plan.ks <= 256
    # The fewest lanes whose registers (CHUNK4 vec4 slots each) hold a row of q and of o.
    assert plan.ks == -(-d // (4 * tiling.CHUNK4))  # the fewest 64-dim register chunks a row
    assert plan.bc % 4 == 0  # the shader takes keys four at a time
    # No larger key tile fits with these rows.
    if plan.bc + 4 <= tiling.MAX_BLOCK:
        assert not _fits(plan.br, plan.bc + 4, plan)
    assert plan.spart == (plan.br * plan.ks * plan.bc if plan.ks > 1 else 1)


def test_byte_count_matches_the_layout_in_the_shader_header():
    # Header of wgsl/flash_fwd.wgsl: d = dv = 64: KS = 1, BR = 128, BC = 28 -> 14352 bytes.
    plan = tiling.plan(64)
    assert (plan.br, plan.bc, plan.ks, plan.workgroup_size) == (128, 28, 1, 128)
    assert dict(plan.arrays) == {"k_tile": 28 * 16 * 16, "v_tile": 28 * 16 * 16, "s_part": 16}
    assert plan.bytes_used == 14352
    header = (ROOT / "wgsl" / "flash_fwd.wgsl").read_text(encoding="utf-8")
    assert "BR = 128, BC = 28:  28·16·16 + 28·16·16 + 16 = 14352 bytes" in header
    # Rounding: the unused one-element s_part counts 16 bytes; raw sizes would undercount.
    assert dict(tiling.plan(64).arrays)["s_part"] == 16
    # d = 128 needs two lanes a row, whose partial scores go through s_part; fewer rows.
    wide = tiling.plan(128)
    assert (wide.ks, wide.br) == (2, 64) and dict(wide.arrays)["s_part"] == 4 * wide.br * 2 * wide.bc


def test_too_large_d_names_the_limit_the_need_and_the_largest_d():
    best = tiling.largest_d(4, LIMIT)
    assert best == 448  # seven 64-dim lanes a row; one 16-byte row of K and V per key past that
    tiling.plan(best)
    with pytest.raises(ValueError) as err:
        tiling.plan(best + 1)
    msg = str(err.value)
    assert "16384" in msg and "maxComputeWorkgroupStorageSize" in msg
    assert "largest d that fits is {}".format(best) in msg
    with pytest.raises(ValueError, match="largest d that fits is"):
        tiling.plan(4096)


@settings(max_examples=40, deadline=None)
@given(limit=st.integers(min_value=64, max_value=65536), dv=st.one_of(st.none(), st.integers(1, 300)),
       dtype_bytes=st.sampled_from([2, 4]))
def test_largest_d_is_the_boundary(limit, dv, dtype_bytes):
    best = tiling.largest_d(dtype_bytes, limit, dv)
    if best >= 1:
        plan = tiling.plan(best, dtype_bytes, limit, dv=dv)
        assert plan.bytes_used <= limit
    # Past it, either the workgroup memory or the 256 invocations (KS lanes a row) run out.
    with pytest.raises(ValueError, match="{}|maxComputeInvocationsPerWorkgroup of 256".format(limit)):
        tiling.plan(best + 1, dtype_bytes, limit, dv=dv)


def test_separate_value_dim_and_half_precision_tiles():
    plan = tiling.plan(16, dv=64)
    assert plan.dv == 64 and plan.ks == 1 and dict(plan.arrays)["v_tile"] == plan.bc * 16 * 16
    assert tiling.plan(64, dv=65).ks == 2  # the wider of d and dv sets the lanes
    half = tiling.plan(64, 2)
    assert dict(half.arrays)["k_tile"] == half.bc * 16 * 8  # staged inputs in 2 bytes a dim
    assert half.bc >= tiling.plan(64).bc


def test_fixed_block_sizes_are_kept_or_refused():
    plan = tiling.plan(64, br=3, bc=4, ks=2)
    assert (plan.br, plan.bc, plan.ks, plan.workgroup_size) == (3, 4, 2, 6)
    with pytest.raises(ValueError, match="bc must be a multiple of 4"):
        tiling.plan(64, bc=6)
    assert tiling.plan(64, br=4).br == 4
    with pytest.raises(ValueError, match="br=256 and bc=32.*16384"):
        tiling.plan(64, br=256, bc=32)
    with pytest.raises(ValueError, match="ks=1 lanes cannot hold a row of d=128"):
        tiling.plan(128, ks=1)
    with pytest.raises(ValueError, match="512 invocations per workgroup"):
        tiling.plan(64, br=128, ks=4)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(d=0), ValueError, "d must be a positive integer"),
        (dict(d=1.5), TypeError, "d must be a positive integer"),
        (dict(d=64, dtype_bytes=3), ValueError, "dtype_bytes must be 2"),
        (dict(d=64, br=257), ValueError, "maxComputeInvocationsPerWorkgroup"),
        (dict(d=64, bc=0), ValueError, "bc must be"),
        (dict(d=64, ks=0), ValueError, "ks must be"),
        (dict(d=64, dv=0), ValueError, "dv must be"),
        (dict(d=64, br=0), ValueError, "br must be"),
        (dict(d=64, storage_limit=-1), ValueError, "storage_limit must be"),
    ],
)
def test_bad_arguments(kwargs, error, text):
    with pytest.raises(error, match=text):
        tiling.plan(**kwargs)


def test_constants_are_exactly_the_shader_overrides():
    source = (ROOT / "wgsl" / "flash_fwd.wgsl").read_text(encoding="utf-8")
    overrides = set(re.findall(r"^override\s+(\w+)\s*:\s*u32\s*;", source, flags=re.M))
    plan = tiling.plan(80)
    assert set(plan.constants()) == overrides == {"BR", "BC", "D", "DV", "KS", "SPART"}
    assert plan.constants() == {"BR": plan.br, "BC": plan.bc, "D": 80, "DV": 80, "KS": 2, "SPART": plan.spart}
    # No override has a default: sizes come only from the plan.
    assert not re.search(r"^override\s+\w+\s*:\s*u32\s*=", source, flags=re.M)
    # The register chunk is the same number in the shader and the plan.
    assert re.search(r"const CHUNK4: u32 = {}u;".format(tiling.CHUNK4), source)


def test_plan_is_frozen_plain_data():
    plan = tiling.plan(32)
    with pytest.raises(Exception):
        plan.br = 1
    data = plan.as_dict()
    assert data["bytes_used"] == plan.bytes_used and data["arrays"][0] == {"name": "k_tile", "bytes": plan.arrays[0][1]}
