import math


def grid(batch, heads, n_q, BLOCK_M):
    return (math.ceil(n_q / BLOCK_M), batch * heads)


def flops(batch, heads, n, d, causal, backward=False):
    f = 4.0 * n * n * d * heads * batch
    if causal:
        f /= 2
    if backward:
        f *= 2.5
    return f


def tflops(ms, batch, heads, n, d, causal, backward=False):
    return flops(batch, heads, n, d, causal, backward) / (ms * 1e-3) / 1e12
