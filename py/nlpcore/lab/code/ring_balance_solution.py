import numpy as np


def shards(n, devices, layout):
    """The global rows device r holds, for r in range(devices): a list of sorted int arrays."""
    if layout == "contiguous":
        return np.array_split(np.arange(n), devices)
    if layout == "striped":
        return [np.arange(r, n, devices) for r in range(devices)]
    if layout == "zigzag":
        chunks = np.array_split(np.arange(n), 2 * devices)
        return [np.concatenate([chunks[r], chunks[2 * devices - 1 - r]]) for r in range(devices)]
    raise ValueError("layout must be contiguous, striped or zigzag, got %r" % (layout,))


def work(n, devices, layout):
    """Causal score elements each device computes at each ring step: int array (devices, steps).

    At step s device r holds the K/V shard of device (r - s) % devices; under the causal mask
    query i needs key j only when j <= i, and a block with no such pair is skipped.
    """
    rows = shards(n, devices, layout)
    w = np.zeros((devices, devices), dtype=np.int64)
    for r in range(devices):
        for s in range(devices):
            keys = rows[(r - s) % devices]
            w[r, s] = int((keys[None, :] <= rows[r][:, None]).sum())   # pairs with j <= i
    return w


def makespan(w):
    """Time of a synchronous ring: every step lasts as long as its busiest device."""
    return int(np.asarray(w).max(axis=0).sum())
