"""nlpcore.measured reads the H200 record the same way in CPython and in the built wheel."""

from __future__ import annotations

import json
import zipfile

import pytest

from nlpcore import measured
from nlpcore.kernels import io_model

RECORD = measured.REPOSITORY / measured.IO_H200


@pytest.mark.skipif(not RECORD.exists(), reason="no bench/results/io_h200.json in this checkout")
def test_figure2_rows_carry_measurement_and_model():
    fig = measured.figure2_h200()
    assert {"baseline", "triton", "sdpa_flash", "sdpa_cudnn"} <= set(fig)
    rec = json.loads(RECORD.read_text())
    base = next(r for r in rec["rows"] if r["setting"] == "figure2" and r["impl"] == "baseline")
    assert fig["baseline"]["hbm_gb"] == base["hbm_bytes"] / 1e9
    assert fig["baseline"]["runtime_ms"] == base["runtime_ms"]
    # the model column is io_model's count for the same step, recomputed here
    assert abs(fig["baseline"]["model_gb"] - io_model.figure2()["baseline_standard_gb"]) < 1e-9
    flash = sum(io_model.flash_accesses(1024, 1024, 64, 228 * 1024 // 2, backward=b, causal=True)
                for b in (False, True)) * 2 * 1024 / 1e9
    assert abs(fig["triton"]["model_gb"] - flash) < 1e-9
    values = measured.as_dict()
    assert values["h200_recorded"] == "yes"
    assert values["h200_traffic_ratio"] == "%.1f" % (fig["baseline"]["hbm_gb"] / fig["triton"]["hbm_gb"])
    sweep = measured.sweep_h200()
    assert {(r["n"], r["d"]) for r in sweep} >= {(512, 64), (16384, 128)}


def test_without_a_record_everything_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(measured, "PACKAGED", tmp_path / "a")
    monkeypatch.setattr(measured, "REPOSITORY", tmp_path / "b")
    assert measured.record() is None and measured.figure2_h200() is None and measured.sweep_h200() == []
    values = measured.as_dict()
    assert values["h200_recorded"] == "no" and values["h200_speedup"] == "not recorded"
    assert values["model_baseline_gb"] == "%.1f" % io_model.figure2()["baseline_standard_gb"]


def test_the_wheel_carries_the_record(tmp_path):
    labtools = pytest.importorskip("labtools.build")
    if not RECORD.exists():
        pytest.skip("no bench/results/io_h200.json to carry")
    wheel = labtools.build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        assert z.read("nlpcore/_results/io_h200.json") == RECORD.read_bytes()
