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
    return tiling.bytes_needed(br, bc, plan.d, plan.dv, plan.dtype_bytes) <= plan.storage_limit


@pytest.mark.parametrize("d", [1, 2, 3, 7, 16, 32, 59, 64, 80, 111, 128, 256, 512, 1020])
def test_plan_fits_and_is_the_largest_power_of_two_tile(d):
    plan = tiling.plan(d)
    assert plan.bytes_used <= LIMIT
    assert plan.bytes_used == sum(b for _, b in plan.arrays)
    assert all(b % 16 == 0 for _, b in plan.arrays)  # WebGPU counts each array rounded up to 16 B
    assert plan.br & (plan.br - 1) == 0 and plan.bc & (plan.bc - 1) == 0
    assert plan.br <= 64 and plan.bc <= 64
    # No power-of-two tile with a larger area (or the same area and a larger Br) fits.
    for br in (1, 2, 4, 8, 16, 32, 64):
        for bc in (1, 2, 4, 8, 16, 32, 64):
            if (br * bc, br) > (plan.br * plan.bc, plan.br):
                assert not _fits(br, bc, plan), (br, bc)


def test_byte_count_matches_the_layout_in_the_shader_header():
    # Header of wgsl/flash_fwd.wgsl: d = dv = 64, BR = 16, BC = 8 -> 12992 bytes.
    plan = tiling.plan(64)
    assert (plan.br, plan.bc) == (16, 8)
    assert dict(plan.arrays) == {
        "q_tile": 16 * 64 * 4,
        "k_tile": 8 * 64 * 4,
        "v_tile": 8 * 64 * 4,
        "s_tile": 16 * 8 * 4,
        "o_tile": 16 * 64 * 4,
        "m_row": 64,
        "l_row": 64,
        "alpha_row": 64,
    }
    assert plan.bytes_used == 12992
    # Rounding: d = 1020 at Br = Bc = 1 fills the budget exactly; raw sizes would undercount.
    assert tiling.plan(1020).bytes_used == LIMIT
    assert dict(tiling.plan(1020).arrays)["m_row"] == 16


def test_too_large_d_names_the_limit_the_need_and_the_largest_d():
    assert tiling.largest_d(4, LIMIT) == 1020
    with pytest.raises(ValueError) as err:
        tiling.plan(1021)
    msg = str(err.value)
    assert "16384" in msg and "maxComputeWorkgroupStorageSize" in msg
    assert str(tiling.bytes_needed(1, 1, 1021, 1021, 4)) in msg
    assert "largest d that fits is 1020" in msg
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
    with pytest.raises(ValueError, match=str(limit)):
        tiling.plan(best + 1, dtype_bytes, limit, dv=dv)


def test_separate_value_dim_and_half_precision_tiles():
    plan = tiling.plan(64, dv=16)
    assert plan.dv == 16 and dict(plan.arrays)["v_tile"] == plan.bc * 16 * 4
    half = tiling.plan(64, 2)
    assert dict(half.arrays)["q_tile"] == half.br * 64 * 2  # staged inputs in 2 bytes
    assert dict(half.arrays)["o_tile"] == half.br * 64 * 4  # accumulators stay float32
    assert half.br * half.bc >= tiling.plan(64).br * tiling.plan(64).bc


def test_fixed_block_sizes_are_kept_or_refused():
    plan = tiling.plan(64, br=4, bc=3, workgroup_size=7)
    assert (plan.br, plan.bc, plan.workgroup_size) == (4, 3, 7)
    assert tiling.plan(64, br=4).br == 4
    with pytest.raises(ValueError, match="br=64 and bc=64.*16384"):
        tiling.plan(64, br=64, bc=64)


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(d=0), ValueError, "d must be a positive integer"),
        (dict(d=1.5), TypeError, "d must be a positive integer"),
        (dict(d=64, dtype_bytes=3), ValueError, "dtype_bytes must be 2"),
        (dict(d=64, workgroup_size=257), ValueError, "maxComputeInvocationsPerWorkgroup"),
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
    assert set(plan.constants()) == overrides == {"BR", "BC", "D", "DV", "WG"}
    assert plan.constants() == {"BR": plan.br, "BC": plan.bc, "D": 80, "DV": 80, "WG": 64}
    # No default values in the shader: sizes come only from the plan.
    assert not re.search(r"^override\s+\w+\s*:\s*u32\s*=", source, flags=re.M)


def test_plan_is_frozen_plain_data():
    plan = tiling.plan(32)
    with pytest.raises(Exception):
        plan.br = 1
    data = plan.as_dict()
    assert data["bytes_used"] == plan.bytes_used and data["arrays"][0] == {"name": "q_tile", "bytes": plan.arrays[0][1]}
