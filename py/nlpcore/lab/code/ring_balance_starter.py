import numpy as np


def shards(n, devices, layout):
    """The global rows device r holds, for r in range(devices): a list of sorted int arrays."""
    if layout == "contiguous":
        return np.array_split(np.arange(n), devices)
    if layout == "striped":
        # TODO: device r holds rows r, r + devices, r + 2·devices, ...
        raise NotImplementedError("striped layout")
    if layout == "zigzag":
        # TODO: cut range(n) into 2·devices chunks (np.array_split); device r holds chunk r
        # and chunk 2·devices - 1 - r.
        raise NotImplementedError("zigzag layout")
    raise ValueError("layout must be contiguous, striped or zigzag, got %r" % (layout,))


def work(n, devices, layout):
    """Causal score elements each device computes at each ring step: int array (devices, steps).

    At step s device r holds the K/V shard of device (r - s) % devices; under the causal mask
    query i needs key j only when j <= i, and a block with no such pair is skipped.
    """
    # TODO
    raise NotImplementedError("work")


def makespan(w):
    """Time of a synchronous ring: every step lasts as long as its busiest device."""
    # TODO
    raise NotImplementedError("makespan")
