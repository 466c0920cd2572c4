"""Hardware figures the lab quotes, named once. Pages read them through the build
(build.py stamps ``{{hardware.<name>}}``), Python code imports them from here.

The A100 figures are those of Dao et al. 2022 (arXiv:2205.14135), Sec. 2.1 and Fig. 1: on-chip
SRAM of 192 KB per streaming multiprocessor, HBM bandwidth 1.5 TB/s (the 40 GB part), and
312 TFLOP/s of fp16 tensor-core arithmetic.
"""
from __future__ import annotations

FP16_BYTES = 2
"""Bytes per float16 (and bfloat16) element."""

A100_SRAM_BYTES = 192 * 1024
"""Bytes of SRAM per streaming multiprocessor of an A100 (the paper's M in bytes)."""

A100_SRAM_FP16_ELEMENTS = A100_SRAM_BYTES // FP16_BYTES
"""The paper's M in fp16 elements: 98304."""

A100_HBM_BYTES_PER_S = 1.5e12
"""HBM bandwidth of an A100, bytes per second."""

A100_FP16_FLOPS = 312e12
"""fp16 tensor-core arithmetic of an A100, FLOP per second."""

H200_FP32_FLOPS = 67e12
"""Dense float32 arithmetic of an H200 (SXM) on its CUDA cores, FLOP per second (NVIDIA's H200
datasheet; the H100's figure): the ceiling for a WGSL shader, which has no tensor cores."""


def as_dict() -> dict:
    """Every figure above by name, for the build to stamp into pages."""
    return {"fp16_bytes": FP16_BYTES, "a100_sram_bytes": A100_SRAM_BYTES,
            "a100_sram_kib": A100_SRAM_BYTES // 1024,
            "a100_sram_fp16_elements": A100_SRAM_FP16_ELEMENTS,
            "a100_hbm_bytes_per_s": A100_HBM_BYTES_PER_S, "a100_fp16_flops": A100_FP16_FLOPS,
            "a100_hbm_tb_per_s": "%g" % (A100_HBM_BYTES_PER_S / 1e12),
            "a100_fp16_tflops": "%g" % (A100_FP16_FLOPS / 1e12),
            "a100_ridge_flop_per_byte": "%.0f" % (A100_FP16_FLOPS / A100_HBM_BYTES_PER_S),
            "h200_fp32_tflops": "%g" % (H200_FP32_FLOPS / 1e12)}
