import numpy as np


def shards(n, devices, layout):
    """The global rows device r holds, for r in range(devices): a list of sorted int arrays."""
    if layout == "contiguous":
        return np.array_split(np.arange(n), devices)
    if layout == "striped":
        # SOLUTION BEGIN
        # # TODO: device r holds rows r, r + devices, r + 2·devices, ...  STARTER
        # raise NotImplementedError("striped layout")  STARTER
        return [np.arange(r, n, devices) for r in range(devices)]
        # SOLUTION END
    if layout == "zigzag":
        # SOLUTION BEGIN
        # # TODO: cut range(n) into 2·devices chunks (np.array_split); device r holds chunk r  STARTER
        # # and chunk 2·devices - 1 - r.  STARTER
        # raise NotImplementedError("zigzag layout")  STARTER
        chunks = np.array_split(np.arange(n), 2 * devices)
        return [np.concatenate([chunks[r], chunks[2 * devices - 1 - r]]) for r in range(devices)]
        # SOLUTION END
    raise ValueError("layout must be contiguous, striped or zigzag, got %r" % (layout,))


def work(n, devices, layout):
    """Causal score elements each device computes at each ring step: int array (devices, steps).

    At step s device r holds the K/V shard of device (r - s) % devices; under the causal mask
    query i needs key j only when j <= i, and a block with no such pair is skipped.
    """
    # SOLUTION BEGIN
    # raise NotImplementedError("work")  STARTER
    rows = shards(n, devices, layout)
    w = np.zeros((devices, devices), dtype=np.int64)
    for r in range(devices):
        for s in range(devices):
            keys = rows[(r - s) % devices]
            w[r, s] = int((keys[None, :] <= rows[r][:, None]).sum())   # pairs with j <= i
    return w
    # SOLUTION END


def makespan(w):
    """Time of a synchronous ring: every step lasts as long as its busiest device."""
    # SOLUTION BEGIN
    # raise NotImplementedError("makespan")  STARTER
    return int(np.asarray(w).max(axis=0).sum())
    # SOLUTION END
