"""The IO counter equals the closed forms exactly; the Figure 2 reproduction lands near the paper."""

from __future__ import annotations

import numpy as np
import pytest

from nlpcore.kernels import flash_np, io_model
from nlpcore.kernels.io_model import IOCounter, block_sizes, flash_accesses, standard_accesses


@pytest.mark.parametrize("m,d,expected", [(256, 8, (8, 8)), (64, 8, (2, 2)), (98304, 64, (64, 384)), (1000, 3, (3, 84)), (1, 1, (1, 1))])
def test_block_sizes_follow_algorithm_1(m, d, expected):
    assert block_sizes(m, d) == expected


def test_block_sizes_reject_nonpositive():
    with pytest.raises(ValueError, match="sram_elems must be a positive integer"):
        block_sizes(0, 4)
    with pytest.raises(ValueError, match="d must be a positive integer"):
        block_sizes(16, 0)


GRID = [(n_q, n_k, d, m) for n_q, n_k in [(1, 1), (16, 16), (33, 50), (64, 17)] for d in (1, 4, 16) for m in (16, 100, 512, 4096)]


@pytest.mark.parametrize("n_q,n_k,d,m", GRID)
@pytest.mark.parametrize("causal", [False, True])
def test_counted_io_equals_closed_form(n_q, n_k, d, m, causal):
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((n_q, d)), rng.standard_normal((n_k, d)), rng.standard_normal((n_k, d))
    br, bc = block_sizes(m, d)
    for order in ("kv_outer", "q_outer"):
        io = IOCounter()
        o, lse = flash_np.forward(q, k, v, causal=causal, block_q=br, block_k=bc, io=io, loop_order=order)
        assert io.accesses == flash_accesses(n_q, n_k, d, m, causal=causal, loop_order=order), order
        assert (io.reads, io.writes) == io_model.flash_io(n_q, n_k, d, br, bc, causal=causal, loop_order=order)
    io = IOCounter()
    flash_np.backward(q, k, v, o, lse, o, causal=causal, block_q=br, block_k=bc, io=io)
    assert io.accesses == flash_accesses(n_q, n_k, d, m, backward=True, causal=causal)
    assert (io.reads, io.writes) == io_model.flash_io(n_q, n_k, d, br, bc, backward=True, causal=causal)


@pytest.mark.parametrize("backward", [False, True])
def test_standard_reads_and_writes_add_up_to_the_algorithm_0_and_3_counts(backward):
    reads, writes = io_model.standard_io(100, 70, 16, backward=backward, dv=8)
    n2 = 100 * 70
    assert reads + writes == standard_accesses(100, 70, 16, backward=backward, dv=8)
    # forward writes S and P (2 N²) and reads them back (2 N²); backward reads 5 N², writes 2 N²
    assert (reads // n2, writes // n2) == ((5, 2) if backward else (2, 2))


def test_counter_counts_every_head_and_bytes():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 20, 8)).astype(np.float16)
    io = IOCounter()
    flash_np.forward(q, q, q, block_q=8, block_k=8, io=io)
    per_head = io_model.flash_accesses_for_blocks(20, 20, 8, 8, 8)
    assert io.accesses == 6 * per_head
    # matrices at 2 bytes, statistics (m, l, lse) at 4 bytes
    stats = sum(sum(io.by_tensor[t]) for t in ("m", "l", "lse"))
    assert io.bytes_read + io.bytes_written == 2 * (io.accesses - stats) + 4 * stats


def test_flash_beats_standard_and_scales_as_n2_d2_over_m():
    d, m = 64, 100_000
    small, big = flash_accesses(8192, 8192, d, m), flash_accesses(16384, 16384, d, m)
    assert flash_accesses(4096, 4096, d, m) < standard_accesses(4096, 4096, d)
    assert 3.5 < big / small < 4.5  # N² term dominates: doubling N quadruples the traffic
    # halving M (roughly) doubles the number of key tiles and so the Q/O traffic
    assert 1.6 < flash_accesses(16384, 16384, d, m // 2) / big < 2.1


def test_figure2_lands_near_the_paper():
    r = io_model.figure2()
    assert abs(r["flash_gb"] - 4.4) / 4.4 < 0.1
    assert 20 < r["standard_gb"] < 45  # Algorithm 0/3 traffic; the measured 40.3 adds mask/dropout passes
    assert r["ratio"] > 5
    text = io_model.format_figure2(r)
    assert "40.3" in text and "4.4" in text


def test_figure2_as_the_papers_baseline_lands_within_ten_percent():
    r = io_model.figure2()
    assert abs(r["baseline_standard_gb"] / 40.3 - 1) <= 0.10, r["baseline_standard_gb"]
    assert abs(r["baseline_flash_gb"] / 4.4 - 1) <= 0.10, r["baseline_flash_gb"]
    assert r["baseline_flash_skip_gb"] < r["baseline_flash_gb"]  # skipping tiles above the diagonal
    # the passes are named, each counted once, and add up to the total
    passes = r["baseline_passes_gb"]
    assert len({(p["pass"], p["step"]) for p in passes}) == len(passes)
    assert abs(sum(p["gb"] for p in passes) - r["baseline_standard_gb"]) < 1e-9
    steps = " ".join(p["step"] for p in passes)
    assert "causal bias" in steps and "dropout" in steps and "keep" in steps


def test_baseline_passes_add_seven_nxn_passes_to_algorithm_0_and_3():
    n, d = 1000, 48
    extra = io_model.baseline_bytes(n, n, d, dtype_bytes=2) - 2 * (
        standard_accesses(n, n, d) + standard_accesses(n, n, d, backward=True))
    # in fp16 entries of N×N: forward +2 (bias add) +2 (dropout reads P, writes P̃) +0.5 (the
    # 1-byte keep-mask); backward +2 (dropout's backward reads dP̃, writes dP) +0.5 (reads the
    # mask); and the scale passes on Q and dQ, 4·N·d
    assert extra == 2 * (2 + 2 + 0.5 + 2 + 0.5) * n * n + 2 * 4 * n * d
    with pytest.raises(ValueError, match="dtype_bytes"):
        io_model.baseline_bytes(n, n, d, dtype_bytes=0)
