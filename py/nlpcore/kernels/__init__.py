"""Attention kernels: the naive oracle, the online-softmax monoid, tiled FlashAttention and its
IO model. Dependency rule: ``reference`` and ``online_softmax`` import nothing else from this
package except ``_checks``; ``flash_np`` builds on ``online_softmax`` and ``io_model``; nothing
here imports torch, triton or wgpu at module level (the browser has none of them)."""
