"""The hardware figures and the numbers the module page quotes in prose: one place each, and
true to the IO model they summarise (issue 15: which M, the d = 128 caveat, the constant ≈ 12)."""
from __future__ import annotations

import pathlib
import re

import pytest

from nlpcore import hardware
from nlpcore.kernels import io_model
from nlpcore.web import viz

ROOT = pathlib.Path(__file__).resolve().parents[1]
INDEX = (ROOT / "site" / "index.html").read_text(encoding="utf-8")


def test_which_m_is_which():
    # The paper's M (L1 + shared memory) is more than one block may use as shared memory.
    assert hardware.A100_SRAM_BYTES == 192 * 1024
    assert hardware.A100_SMEM_PER_BLOCK_BYTES < hardware.A100_SMEM_PER_SM_BYTES < hardware.A100_SRAM_BYTES
    assert hardware.A100_SRAM_FP16_ELEMENTS == hardware.A100_SRAM_BYTES // hardware.FP16_BYTES
    assert io_model.figure2()["setting"]["sram_bytes"] == hardware.A100_SRAM_BYTES


def test_peaks_and_ridges():
    a100, h100, h200 = (hardware.GPUS[k] for k in ("A100", "H100", "H200"))
    assert a100.fp16_flops == hardware.A100_FP16_FLOPS and a100.sms == 108
    assert h100.fp16_flops == h200.fp16_flops and h100.sms == h200.sms == 132  # one chip
    assert h200.hbm_bytes_per_s > h100.hbm_bytes_per_s > a100.hbm_bytes_per_s
    assert h200.fp32_flops == hardware.H200_FP32_FLOPS
    for gpu in (a100, h100, h200):
        assert gpu.ridge_flop_per_byte == pytest.approx(gpu.fp16_flops / gpu.hbm_bytes_per_s)
        assert gpu.smem_per_block_bytes <= gpu.smem_per_sm_bytes


def test_fraction_of_peak():
    assert hardware.fraction_of_peak(312, "A100") == pytest.approx(1.0)
    assert hardware.fraction_of_peak(0, "H200") == 0
    for bad in (True, -1, "5"):
        with pytest.raises(ValueError, match="tflops"):
            hardware.fraction_of_peak(bad, "H200")
    with pytest.raises(ValueError, match="gpu must be one of"):
        hardware.fraction_of_peak(1.0, "V100")


def test_the_d128_caveat_and_the_constant_twelve():
    numbers = viz.page_numbers()
    assert numbers["caveat_m"] == 3 * numbers["caveat_d"] ** 2  # M = 3d²: no win expected
    assert 0.9 <= float(numbers["caveat_ratio"]) <= 1.1
    assert float(numbers["paper64_ratio"]) > 5 > float(numbers["paper128_ratio"])
    # The tiled count over N²d²/M tends to 12 as N grows (Tc ≈ 4Nd/M passes of ≈ 3Nd).
    d, m = 64, 16384
    ratios = [io_model.flash_accesses(n, n, d, m) / io_model.theta_ratio(n, d, m)
              for n in (1 << 12, 1 << 14, 1 << 16)]
    assert ratios[0] > ratios[1] > ratios[2] and abs(ratios[-1] - 12) < 0.5


def test_every_stamped_name_exists_and_prose_numbers_are_stamped():
    values = set(hardware.as_dict()) | {"page." + k for k in viz.page_numbers()}
    for name in re.findall(r"\{\{(hardware|page)\.(\w+)\}\}", INDEX):
        key = name[1] if name[0] == "hardware" else "page." + name[1]
        assert key in values, name
    # The figures issue 15 found typed by hand are stamped now.
    for typed in ("40.3&nbsp;GB", "4.4&nbsp;GB", "M \\approx 100", "989", "4.8&nbsp;TB"):
        assert typed not in INDEX, typed


def test_the_a100s_hbm_as_the_datasheet_and_the_paper_give_it():
    # the paper's "1.5-2.0TB/s" rounds the 40 GB part's 1.555 and the 80 GB part's 2.039 TB/s down
    assert int(hardware.A100_40GB_HBM_BYTES_PER_S / 1e11) / 10 == hardware.A100_HBM_BYTES_PER_S / 1e12 == 1.5
    assert int(hardware.A100_80GB_HBM_BYTES_PER_S / 1e11) / 10 == 2.0
    assert hardware.GPUS["A100"].name.endswith("40GB")
