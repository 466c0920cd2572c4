import math


def grid(batch, heads, n_q, BLOCK_M):
    # SOLUTION BEGIN
    # """The forward's launch grid: (query blocks, batch · heads)."""  STARTER
    # raise NotImplementedError("grid")  STARTER
    return (math.ceil(n_q / BLOCK_M), batch * heads)
    # SOLUTION END


def smem_bytes(BLOCK_M, BLOCK_N, d, dtype_bytes, stages):
    # SOLUTION BEGIN
    # """Shared memory of one program: its Q tile, and `stages` buffered copies of a K and a V tile."""  STARTER
    # raise NotImplementedError("smem_bytes")  STARTER
    return (BLOCK_M * d + stages * 2 * BLOCK_N * d) * dtype_bytes
    # SOLUTION END


def largest_block_n(smem_limit, BLOCK_M, d, dtype_bytes, stages):
    # SOLUTION BEGIN
    # """The largest power of two BLOCK_N (16 to 256) whose program fits smem_limit bytes; 0 if none."""  STARTER
    # raise NotImplementedError("largest_block_n")  STARTER
    best = 0
    block_n = 16
    while block_n <= 256:
        if smem_bytes(BLOCK_M, block_n, d, dtype_bytes, stages) <= smem_limit:
            best = block_n
        block_n *= 2
    return best
    # SOLUTION END


def flops(batch, heads, n, d, causal, backward=False):
    # SOLUTION BEGIN
    # """FLOPs the benchmark credits: 4·N²·d·H·B, halved when causal, ×2.5 for the backward."""  STARTER
    # raise NotImplementedError("flops")  STARTER
    f = 4.0 * n * n * d * heads * batch
    if causal:
        f /= 2
    if backward:
        f *= 2.5
    return f
    # SOLUTION END


def tflops(ms, batch, heads, n, d, causal, backward=False):
    # SOLUTION BEGIN
    # """TFLOP/s of a run that took `ms` milliseconds."""  STARTER
    # raise NotImplementedError("tflops")  STARTER
    return flops(batch, heads, n, d, causal, backward) / (ms * 1e-3) / 1e12
    # SOLUTION END


def expected_speedup(batch, heads, n, d, dtype_bytes, peak_flops, hbm_bytes_per_s):
    # SOLUTION BEGIN
    # """Roofline estimate of unfused / fused forward time (non-causal): each time is  STARTER
    # max(FLOPs / peak, HBM bytes / bandwidth); unfused moves 4·N² + 4·N·d elements per head  STARTER
    # (S and P written and read back, Q, K, V read, O written), fused only the 4·N·d."""  STARTER
    # raise NotImplementedError("expected_speedup")  STARTER
    work = flops(batch, heads, n, d, False)
    unfused_bytes = (4.0 * n * n + 4.0 * n * d) * dtype_bytes * batch * heads
    fused_bytes = 4.0 * n * d * dtype_bytes * batch * heads
    t_unfused = max(work / peak_flops, unfused_bytes / hbm_bytes_per_s)
    t_fused = max(work / peak_flops, fused_bytes / hbm_bytes_per_s)
    return t_unfused / t_fused
    # SOLUTION END
