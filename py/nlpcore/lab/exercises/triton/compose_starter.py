import math


def grid(batch, heads, n_q, BLOCK_M):
    """The forward's launch grid: (query blocks, batch · heads)."""
    raise NotImplementedError("grid")


def flops(batch, heads, n, d, causal, backward=False):
    """FLOPs the benchmark credits: 4·N²·d·H·B, halved when causal, ×2.5 for the backward."""
    raise NotImplementedError("flops")


def tflops(ms, batch, heads, n, d, causal, backward=False):
    """TFLOP/s of a run that took `ms` milliseconds."""
    raise NotImplementedError("tflops")
