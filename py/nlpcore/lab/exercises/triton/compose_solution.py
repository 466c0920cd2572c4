import math


def grid(batch, heads, n_q, BLOCK_M):
    # SOLUTION BEGIN
    # """The forward's launch grid: (query blocks, batch · heads)."""  STARTER
    # raise NotImplementedError("grid")  STARTER
    return (math.ceil(n_q / BLOCK_M), batch * heads)
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
