"""Attention kernels: the naive oracle, the online-softmax monoid, tiled FlashAttention and its
IO model, and the monoid across blocks and devices (split-K decoding, ring attention).
Dependency rule: ``reference`` and ``online_softmax`` import nothing else from this package
except ``_checks``; ``flash_np`` builds on ``online_softmax`` and ``io_model``; ``split_k``
builds on ``flash_np`` and ``online_softmax``, and ``ring`` on ``split_k``; nothing here
imports torch, triton or wgpu at module level (the browser has none of them)."""
