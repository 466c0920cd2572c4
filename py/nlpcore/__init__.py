"""nlpcore — FlashAttention taught by running it.

The package is a small library of exact attention kernels, each written as a lesson:

- ``nlpcore.kernels.reference``      naive attention that materialises S and P (the oracle)
- ``nlpcore.kernels.online_softmax`` the (m, l) monoid behind streaming softmax
- ``nlpcore.kernels.flash_np``       tiled exact attention in NumPy, forward and backward
- ``nlpcore.kernels.io_model``       HBM traffic: block sizes, an IO counter, closed forms

It runs unchanged on CPython 3.11+/NumPy 2 and inside Pyodide 0.17 (Python 3.8, NumPy 1.17),
so nothing here may use syntax or NumPy API newer than those.
"""

__version__ = "0.1.0"
