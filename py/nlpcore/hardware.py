"""Hardware figures the lab quotes, named once. Pages read them through the build
(build.py stamps ``{{hardware.<name>}}``), Python code imports them from here.

Which "SRAM" is meant matters, because the paper's M and what a kernel may use differ:

- **The paper's M.** Dao et al. 2022 (arXiv:2205.14135), Sec. 2.1 and Fig. 1, give the A100
  192 KB of on-chip SRAM per streaming multiprocessor (SM). That is the SM's L1 cache and its
  shared memory *together* (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: "192 KB
  of combined shared memory and L1 data cache"). The paper makes no HBM count of its own with
  any M; its working value in Sec. 3.2 is "M (around 100KB)". Our IO model's Figure 2 recount
  (a model under stated assumptions, :func:`nlpcore.kernels.io_model.figure2`) takes the
  192 KB as M (:data:`A100_SRAM_BYTES`) — our choice, the paper's per-SM figure (its Fig. 1
  also names 20 MB of SRAM in all).
- **What one kernel gets.** Of those 192 KB, at most 164 KB per SM can be configured as shared
  memory, and one thread block may use at most 163 KB of it (CUDA C++ Programming Guide,
  "Technical Specifications per Compute Capability", compute capability 8.0). A real kernel's
  tiles must fit :data:`A100_SMEM_PER_BLOCK_BYTES`, less than the paper's M.

Peak rates (dense, no sparsity) are the vendor's datasheet figures:

- A100 SXM4 40 GB: 108 SMs, 1.555 TB/s HBM2 (the 80 GB part: 2.039 TB/s; the paper's "1.5-2.0TB/s"
  rounds the two down, and :data:`A100_HBM_BYTES_PER_S` is its 1.5 for the 40 GB part), 312 TFLOP/s
  fp16/bf16 on tensor cores, 19.5 TFLOP/s fp32 without them (NVIDIA A100 datasheet; whitepaper
  Table 1).
- H100 SXM5 80 GB: 132 SMs, 3.35 TB/s HBM3, 989.4 TFLOP/s fp16/bf16 dense, 67 TFLOP/s fp32 (NVIDIA H100
  datasheet; H100 whitepaper Table 1); 228 KB of shared memory per SM, 227 KB per block
  (programming guide, compute capability 9.0), out of 256 KB of L1 + shared memory.
- H200 SXM 141 GB: the same GH100 chip as the H100 (so the same SMs, shared memory and
  989 TFLOP/s), with 4.8 TB/s of HBM3e (NVIDIA H200 datasheet).

Links between GPUs (:data:`LINKS`), from the same datasheets' "Interconnect" rows, which give the
total of both directions: NVLink 600 GB/s (A100 SXM4), 900 GB/s (H100 SXM5, H200 SXM); PCIe
Gen4 64 GB/s (A100), Gen5 128 GB/s (H100, H200). A ring sends one way, so :func:`link_bytes_per_s`
halves them — as Ring Attention's Table 2 does (Liu, Zaharia & Abbeel 2023, arXiv:2310.01889:
"Interconnect Bandwidth is the unidirectional bandwidth between hosts"; A100 NVLink 300 GB/s).

These are leads, not measurements: what a kernel can reach is lower (clocks, power, the exp
unit), which is why the pages quote a measured TFLOP/s as a *fraction* of the datasheet peak.
"""
from __future__ import annotations

import math
from typing import Dict, NamedTuple

FP16_BYTES = 2
"""Bytes per float16 (and bfloat16) element."""

A100_SRAM_BYTES = 192 * 1024
"""Bytes of SRAM per SM of an A100 as the paper counts it (L1 + shared memory): the paper's M."""

A100_SRAM_FP16_ELEMENTS = A100_SRAM_BYTES // FP16_BYTES
"""The paper's M in fp16 elements: 98304."""

A100_SMEM_PER_SM_BYTES = 164 * 1024
"""The most shared memory an A100 SM can be configured to have (compute capability 8.0)."""

A100_SMEM_PER_BLOCK_BYTES = 163 * 1024
"""The most shared memory one thread block may use on an A100 (compute capability 8.0)."""

A100_SMEM_FP16_ELEMENTS = A100_SMEM_PER_BLOCK_BYTES // FP16_BYTES
"""One block's shared-memory limit in fp16 elements: 83456 (the M a real kernel has)."""

A100_HBM_BYTES_PER_S = 1.5e12
"""HBM bandwidth of an A100, bytes per second: the paper's figure, rounded down, for the 40 GB part's 1.555 TB/s
(the 80 GB part has 2.039 TB/s)."""

A100_40GB_HBM_BYTES_PER_S = 1.555e12
"""HBM2 bandwidth of the A100 SXM4 40 GB, bytes per second (NVIDIA A100 datasheet)."""

A100_80GB_HBM_BYTES_PER_S = 2.039e12
"""HBM2e bandwidth of the A100 SXM4 80 GB, bytes per second (NVIDIA A100 datasheet)."""

A100_FP16_FLOPS = 312e12
"""fp16 tensor-core arithmetic of an A100, FLOP per second."""

H200_FP32_FLOPS = 67e12
"""Dense float32 arithmetic of an H200 (SXM) on its CUDA cores, FLOP per second (NVIDIA's H200
datasheet; the H100's figure): the ceiling for a WGSL shader, which has no tensor cores."""

WARP_SIZE = 32
"""Threads per warp on NVIDIA GPUs (a WebGPU subgroup on them has this size)."""


class Gpu(NamedTuple):
    """One GPU's datasheet peaks (dense fp16/bf16 tensor-core FLOP/s, HBM bytes/s) and layout."""
    name: str
    sms: int                    # streaming multiprocessors
    fp16_flops: float           # dense fp16/bf16 tensor-core FLOP per second
    fp32_flops: float           # dense fp32 FLOP per second on the CUDA cores (no tensor cores)
    hbm_bytes_per_s: float      # HBM bandwidth, bytes per second
    smem_per_sm_bytes: int      # the most shared memory an SM can have
    smem_per_block_bytes: int   # the most shared memory one block may use
    registers_per_sm: int       # 32-bit registers per SM
    max_threads_per_sm: int     # resident threads per SM (64 warps of 32)

    @property
    def ridge_flop_per_byte(self) -> float:
        """The roofline's ridge point π/β: below this intensity a kernel is memory-bound."""
        return self.fp16_flops / self.hbm_bytes_per_s


GPUS: Dict[str, Gpu] = {
    "A100": Gpu("NVIDIA A100 SXM4 40GB", 108, A100_FP16_FLOPS, 19.5e12, A100_HBM_BYTES_PER_S,
                A100_SMEM_PER_SM_BYTES, A100_SMEM_PER_BLOCK_BYTES, 65536, 2048),
    "H100": Gpu("NVIDIA H100 SXM5 80GB", 132, 989.4e12, 67e12, 3.35e12, 228 * 1024, 227 * 1024,
                65536, 2048),
    "H200": Gpu("NVIDIA H200 SXM 141GB", 132, 989.4e12, H200_FP32_FLOPS, 4.8e12, 228 * 1024, 227 * 1024,
                65536, 2048),
}
"""Datasheet peaks by short name (sources in the module docstring)."""


LINKS: Dict[str, Dict[str, float]] = {
    "A100": {"NVLink": 600e9, "PCIe": 64e9},    # NVLink 3; PCIe Gen4 x16
    "H100": {"NVLink": 900e9, "PCIe": 128e9},   # NVLink 4; PCIe Gen5 x16
    "H200": {"NVLink": 900e9, "PCIe": 128e9},   # NVLink 4; PCIe Gen5 x16
}
"""GPU-to-GPU links by GPU and kind: the datasheet's total of both directions, bytes per second."""


def link_bytes_per_s(gpu: str, link: str) -> float:
    """One direction of ``link`` ("NVLink" or "PCIe") on ``gpu``: half the datasheet's total."""
    if gpu not in LINKS:
        raise ValueError("gpu must be one of %s, got %r" % (sorted(LINKS), gpu))
    if link not in LINKS[gpu]:
        raise ValueError("link must be one of %s, got %r" % (sorted(LINKS[gpu]), link))
    return LINKS[gpu][link] / 2


def ring_min_block(gpu: str, link: str) -> int:
    """The fewest tokens c per device for which a ring step's compute hides its transfer.

    One ring step computes a c×c block of attention: 2·d·c² FLOPs for Q Kᵀ and 2·d·c² for P V,
    4·d·c² in all, in time 4·d·c²/F at F FLOP/s. Meanwhile it sends the K and V blocks it holds,
    2·c·d fp16 elements = 4·c·d bytes, in time 4·c·d/B over B bytes/s one way. Compute hides the
    transfer iff 4·d·c²/F ≥ 4·c·d/B, that is c ≥ F/B — d cancels (Liu, Zaharia & Abbeel 2023,
    arXiv:2310.01889, Sec. 3 "Arithmetic Intensity Between Hosts"; their Table 2 gives A100 +
    NVLink ≈ 1.0 K). F is the dense fp16/bf16 tensor-core peak; a kernel that runs below peak
    needs a smaller c, one that overlaps badly a larger one, so this is an estimate.
    """
    per_s = link_bytes_per_s(gpu, link)  # checks gpu and link
    return int(math.ceil(GPUS[gpu].fp16_flops / per_s))


def fraction_of_peak(tflops: float, gpu: str) -> float:
    """A measured TFLOP/s as a fraction of ``gpu``'s dense fp16/bf16 tensor-core peak."""
    if gpu not in GPUS:
        raise ValueError("gpu must be one of %s, got %r" % (sorted(GPUS), gpu))
    if isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or tflops < 0:
        raise ValueError("tflops must be a non-negative number, got %r" % (tflops,))
    return tflops * 1e12 / GPUS[gpu].fp16_flops


def as_dict() -> dict:
    """Every figure above by name, for the build to stamp into pages."""
    out = {"fp16_bytes": FP16_BYTES, "a100_sram_bytes": A100_SRAM_BYTES,
           "a100_sram_kib": A100_SRAM_BYTES // 1024,
           "a100_sram_fp16_elements": A100_SRAM_FP16_ELEMENTS,
           "a100_smem_sm_kib": A100_SMEM_PER_SM_BYTES // 1024,
           "a100_smem_block_kib": A100_SMEM_PER_BLOCK_BYTES // 1024,
           "a100_smem_fp16_elements": A100_SMEM_FP16_ELEMENTS,
           "a100_hbm_bytes_per_s": A100_HBM_BYTES_PER_S, "a100_fp16_flops": A100_FP16_FLOPS,
           "a100_hbm_tb_per_s": "%g" % (A100_HBM_BYTES_PER_S / 1e12),
           "a100_40gb_hbm_tb_per_s": "%g" % (A100_40GB_HBM_BYTES_PER_S / 1e12),
           "a100_80gb_hbm_tb_per_s": "%g" % (A100_80GB_HBM_BYTES_PER_S / 1e12),
           "a100_fp16_tflops": "%g" % (A100_FP16_FLOPS / 1e12),
           "a100_ridge_flop_per_byte": "%.0f" % (A100_FP16_FLOPS / A100_HBM_BYTES_PER_S),
           "h200_fp32_tflops": "%g" % (H200_FP32_FLOPS / 1e12), "warp_size": WARP_SIZE}
    for key in LINKS:
        for link in LINKS[key]:
            k = "%s_%s" % (key.lower(), link.lower())
            out[k + "_gb_per_s"] = "%g" % (LINKS[key][link] / 1e9)
            out[k + "_oneway_gb_per_s"] = "%g" % (link_bytes_per_s(key, link) / 1e9)
            out[k + "_min_block"] = "{:,}".format(ring_min_block(key, link))
    for key, gpu in GPUS.items():
        k = key.lower()
        out.update({k + "_name": gpu.name, k + "_sms": gpu.sms,
                    k + "_tflops": "%g" % (gpu.fp16_flops / 1e12),
                    k + "_fp32_tflops": "%g" % (gpu.fp32_flops / 1e12),
                    k + "_hbm_tb_per_s": "%g" % (gpu.hbm_bytes_per_s / 1e12),
                    k + "_ridge": "%.0f" % gpu.ridge_flop_per_byte,
                    k + "_smem_block_kib": gpu.smem_per_block_bytes // 1024,
                    k + "_regs_kib": gpu.registers_per_sm * 4 // 1024,
                    k + "_max_warps": gpu.max_threads_per_sm // WARP_SIZE})
    return out
