"""Other keep-mask draws for bench/dropout_cost_h200.py (imported by its worker after
TRITON_INTERPRET is set). Each pair is the (R, C) and the transposed (C, R) form, with
``dropout_triton.keep``/``keep_t``'s signature: row keys (R,), column keys (C,), the uint32 cut."""
import triton
import triton.language as tl

from nlpcore.kernels.dropout_triton import mix


@triton.jit
def per_entry_mix(row_keys, col_keys, thresh):
    """One lowbias32 per entry, as the library drew it before: ~11 instructions per entry."""
    return mix(row_keys[:, None] + col_keys[None, :]) >= thresh.to(tl.uint32, bitcast=True)


@triton.jit
def per_entry_mix_t(row_keys, col_keys, thresh):
    return mix(row_keys[None, :] + col_keys[:, None]) >= thresh.to(tl.uint32, bitcast=True)


@triton.jit
def xor_only(row_keys, col_keys, thresh):
    """Plain tabulation, key(row) XOR key(col), no multiply: flawed (rectangles cancel), kept
    as the cheapest draw there is — one XOR, one compare — a floor for any real draw."""
    return (row_keys[:, None] ^ col_keys[None, :]) >= thresh.to(tl.uint32, bitcast=True)


@triton.jit
def xor_only_t(row_keys, col_keys, thresh):
    return (row_keys[None, :] ^ col_keys[:, None]) >= thresh.to(tl.uint32, bitcast=True)


SWAPS = {"per_entry_mix": (per_entry_mix, per_entry_mix_t), "xor_only": (xor_only, xor_only_t)}
