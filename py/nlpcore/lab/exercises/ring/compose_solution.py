import numpy as np


def merge(a, b):
    """a ⊕ b: two partial attention results over disjoint key sets -> the result over their union.

    a = (o_a, lse_a), b = (o_b, lse_b): o (n, dv) normalised over its own keys, lse (n,) the
    log-sum-exp of its scores (-inf for a row that saw no allowed key; its o row is 0).
    The identity is (zeros, -inf). Returns (o, lse) with the same shapes.
    """
    (o_a, lse_a), (o_b, lse_b) = a, b
    # SOLUTION BEGIN
    # # TODO: treat each partial as the monoid state (m, l) = (lse, 1): rescale both to the  STARTER
    # # larger lse, add, and normalise. Rows where both lse are -inf must stay (0, -inf), no NaN.  STARTER
    # raise NotImplementedError("merge: combine two partials with the online-softmax monoid")  STARTER
    m = np.maximum(lse_a, lse_b)                  # the state (m, l) = (lse, 1) of each partial
    shift = np.where(np.isfinite(m), m, 0.0)      # both empty: shift by 0, not by -inf
    w_a = np.exp(lse_a - shift)                   # l_a · e^(m_a - m), 0 for an empty partial
    w_b = np.exp(lse_b - shift)
    l = w_a + w_b
    safe = np.where(l > 0, l, 1.0)
    o = (w_a[:, None] * o_a + w_b[:, None] * o_b) / safe[:, None]
    lse = np.where(l > 0, shift + np.log(safe), -np.inf)
    return o, lse
    # SOLUTION END


def ring_forward(n, devices, attend):
    """Ring attention over `devices` simulated devices; returns o (n, dv), lse (n,).

    Device r owns query rows shards[r] and starts with the K/V shard shards[r]. At step s it
    holds the K/V shard of device (r - s) % devices. attend(r, q_rows, k_rows) computes the
    partial (o, lse) of r's queries against the keys it holds -- the only way to see the data.
    """
    shards = np.array_split(np.arange(n), devices)   # contiguous rows per device
    # SOLUTION BEGIN
    # # TODO: for every step and device, call attend with the shard the ring has brought,  STARTER
    # # fold the partial into that device's running result with merge, then assemble o and lse.  STARTER
    # raise NotImplementedError("ring_forward: pass the K/V shards around the ring")  STARTER
    running = [None] * devices
    for step in range(devices):
        for r in range(devices):
            held = (r - step) % devices               # the K/V shard the ring has brought to r
            part = attend(r, shards[r], shards[held])
            running[r] = part if running[r] is None else merge(running[r], part)
    o = np.concatenate([res[0] for res in running])
    lse = np.concatenate([res[1] for res in running])
    return o, lse
    # SOLUTION END
