import numpy as np


def merge(a, b):
    """a ⊕ b: two partial attention results over disjoint key sets -> the result over their union.

    a = (o_a, lse_a), b = (o_b, lse_b): o (n, dv) normalised over its own keys, lse (n,) the
    log-sum-exp of its scores (-inf for a row that saw no allowed key; its o row is 0).
    The identity is (zeros, -inf). Returns (o, lse) with the same shapes.
    """
    (o_a, lse_a), (o_b, lse_b) = a, b
    # TODO: treat each partial as the monoid state (m, l) = (lse, 1): rescale both to the
    # larger lse, add, and normalise. Rows where both lse are -inf must stay (0, -inf), no NaN.
    raise NotImplementedError("merge: combine two partials with the online-softmax monoid")


def ring_forward(n, devices, attend):
    """Ring attention over `devices` simulated devices; returns o (n, dv), lse (n,).

    Device r owns query rows shards[r] and starts with the K/V shard shards[r]. At step s it
    holds the K/V shard of device (r - s) % devices. attend(r, q_rows, k_rows) computes the
    partial (o, lse) of r's queries against the keys it holds -- the only way to see the data.
    """
    shards = np.array_split(np.arange(n), devices)   # contiguous rows per device
    # TODO: for every step and device, call attend with the shard the ring has brought,
    # fold the partial into that device's running result with merge, then assemble o and lse.
    raise NotImplementedError("ring_forward: pass the K/V shards around the ring")
