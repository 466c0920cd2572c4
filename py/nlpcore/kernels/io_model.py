"""The IO model: how many elements attention moves between HBM and on-chip SRAM.

FlashAttention's central claim (Dao et al. 2022, Theorem 2) is about memory traffic, not
arithmetic: with SRAM of M elements, standard attention makes Θ(Nd + N²) HBM accesses while
FlashAttention makes Θ(N²d²/M). This module makes that claim countable:

- :func:`block_sizes` — the paper's rule for tile sizes from M (Algorithm 1, line 1).
- :class:`IOCounter` — passed as ``io=`` to the kernels; counts at every tile load and store.
- :func:`standard_accesses`, :func:`flash_accesses` — closed forms equal, element for element,
  to what the counter records for the same sizes (:func:`standard_io`, :func:`flash_io` split
  them into reads and writes).
- :func:`figure2` — the paper's Figure 2 (left) setting, standard vs FlashAttention.

Counting conventions (all counts in elements; one element of Q, K, V, O, dO, dQ, dK, dV is one
number of the input dtype, one element of the row statistics m, l, lse, D one accumulator
number):

Standard attention, forward (the paper's Algorithm 0)::

    read Q, K; write S            Nq·d + Nk·d + Nq·Nk
    read S; write P               2·Nq·Nk
    read P, V; write O            Nq·Nk + Nk·dv + Nq·dv
    total                         4·Nq·Nk + (Nq + Nk)·d + (Nq + Nk)·dv

Standard attention, backward (the paper's Algorithm 3)::

    dV = Pᵀ dO    read P, dO; write dV        Nq·Nk + Nq·dv + Nk·dv
    dP = dO Vᵀ    read dO, V; write dP        Nq·dv + Nk·dv + Nq·Nk
    dS            read P, dP; write dS        3·Nq·Nk
    dQ = dS K     read dS, K; write dQ        Nq·Nk + Nk·d + Nq·d
    dK = dSᵀ Q    read dS, Q; write dK        Nq·Nk + Nq·d + Nk·d
    total                                     7·Nq·Nk + 2(Nq + Nk)·(d + dv)

FlashAttention forward, K/V outer (the paper's Algorithm 1), with Tc = ⌈Nk/Bc⌉ key tiles,
Tr = ⌈Nq/Br⌉ query tiles and T the number of (i, j) tile pairs actually visited (Tr·Tc, or
fewer under ``causal`` where a tile entirely above the diagonal is skipped)::

    initialise O, l, m in HBM                      write Nq·dv + 2·Nq
    per key tile j: read K_j, V_j                  Nk·(d + dv) in all
    per visited pair (i, j): read Q_i, O_i, l_i, m_i, write O_i, l_i, m_i
                                                   Σ over visited pairs of rows_i·(d + 2dv + 4)
    finally: read l, m; write lse                  3·Nq

Because every query tile is read once per key tile, the Q/O term is ≈ Tc·Nq·(d + 2dv) and
Tc = ⌈Nk/Bc⌉ ≈ 4·Nk·d/M: that is the Θ(N²d²/M) of Theorem 2.

FlashAttention forward, Q outer (FlashAttention-2's order; ``loop_order="q_outer"``)::

    per query tile i: read Q_i; write O_i, lse_i   Nq·(d + dv + 1) in all
    per visited pair (i, j): read K_j, V_j         Σ over visited pairs of cols_j·(d + dv)

FlashAttention backward (K/V outer, recomputation; the paper's Algorithm 4 with the
FlashAttention-2 precomputation D = rowsum(dO ∘ O))::

    D = rowsum(dO ∘ O): read dO, O; write D        2·Nq·dv + Nq
    initialise dQ in HBM                           write Nq·d
    per key tile j: read K_j, V_j; write dK_j, dV_j           2·Nk·(d + dv) in all
    per visited pair (i, j): read Q_i, dO_i, dQ_i, lse_i, D_i; write dQ_i
                                                   Σ over visited pairs of rows_i·(3d + dv + 2)
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from .. import hardware
from ._checks import positive_int

LOOP_ORDERS = ("kv_outer", "q_outer")


def block_sizes(sram_elems: int, d: int) -> Tuple[int, int]:
    """Tile sizes (Br, Bc) from SRAM size, per the paper's Algorithm 1, line 1.

    Bc = ⌈M / 4d⌉ (a K tile, a V tile, a Q tile and an O tile of d columns each share M) and
    Br = min(Bc, d) (keeps the Br×Bc score tile within M as well).

    Args:
        sram_elems: M, on-chip memory in elements (>= 1).
        d: head dimension (>= 1).
    Returns:
        (br, bc), both >= 1.
    """
    m = positive_int(sram_elems, "sram_elems")
    d = positive_int(d, "d")
    bc = -(-m // (4 * d))  # ceil(M / 4d)
    return min(bc, d), bc


class IOCounter:
    """Counts HBM traffic at each tile load and store of a kernel.

    Pass an instance as ``io=`` to ``flash_np.forward``/``backward``. Attributes:
        reads, writes: elements read from / written to HBM.
        bytes_read, bytes_written: the same in bytes (each load/store gives its element size).
        by_tensor: {tensor name: [reads, writes]} in elements, for the curious.
    """

    def __init__(self) -> None:
        self.reads = 0
        self.writes = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.by_tensor: Dict[str, list] = {}

    def load(self, tensor: str, elems: int, itemsize: int) -> None:
        """Record a read of ``elems`` elements of ``tensor`` from HBM."""
        self.reads += int(elems)
        self.bytes_read += int(elems) * int(itemsize)
        self.by_tensor.setdefault(tensor, [0, 0])[0] += int(elems)

    def store(self, tensor: str, elems: int, itemsize: int) -> None:
        """Record a write of ``elems`` elements of ``tensor`` to HBM."""
        self.writes += int(elems)
        self.bytes_written += int(elems) * int(itemsize)
        self.by_tensor.setdefault(tensor, [0, 0])[1] += int(elems)

    @property
    def accesses(self) -> int:
        """reads + writes, in elements."""
        return self.reads + self.writes

    def __repr__(self) -> str:
        return "IOCounter(reads={}, writes={})".format(self.reads, self.writes)


def _sizes(n_q, n_k, d, dv):
    n_q = positive_int(n_q, "n_q")
    n_k = positive_int(n_k, "n_k")
    d = positive_int(d, "d")
    dv = d if dv is None else positive_int(dv, "dv")
    return n_q, n_k, d, dv


def visited_tiles(n_q: int, n_k: int, br: int, bc: int, causal: bool = False):
    """The (i, j) tile pairs a tiled kernel visits, in row-major order, as a list.

    Under ``causal`` (query i may attend key j iff j <= i) a tile whose first key lies after its
    last query is entirely masked and is skipped; every other tile is visited.
    """
    t_r = -(-n_q // br)
    t_c = -(-n_k // bc)
    pairs = []
    for i in range(t_r):
        last_q = min(n_q, (i + 1) * br) - 1
        for j in range(t_c):
            if causal and j * bc > last_q:
                continue
            pairs.append((i, j))
    return pairs


def _rows(n: int, b: int, i: int) -> int:
    """Rows in tile i of a length-n axis cut into tiles of b (the last one may be ragged)."""
    return min(n, (i + 1) * b) - i * b


def standard_io(n_q: int, n_k: int, d: int, *, backward: bool = False, dv: Optional[int] = None) -> Tuple[int, int]:
    """(reads, writes) in elements of standard attention; see the module docstring."""
    n_q, n_k, d, dv = _sizes(n_q, n_k, d, dv)
    if backward:
        reads = 5 * n_q * n_k + 2 * n_q * dv + n_k * dv + n_k * d + n_q * d
        writes = 2 * n_q * n_k + n_k * dv + n_q * d + n_k * d
        return reads, writes
    reads = (n_q + n_k) * d + 2 * n_q * n_k + n_k * dv  # Q, K; S; P, V
    writes = 2 * n_q * n_k + n_q * dv  # S, P; O
    return reads, writes


def standard_accesses(n_q: int, n_k: int, d: int, *, backward: bool = False, dv: Optional[int] = None) -> int:
    """HBM accesses (reads + writes, elements) of standard attention; see the module docstring."""
    return sum(standard_io(n_q, n_k, d, backward=backward, dv=dv))


def flash_accesses(
    n_q: int,
    n_k: int,
    d: int,
    sram_elems: int,
    *,
    backward: bool = False,
    dv: Optional[int] = None,
    causal: bool = False,
    loop_order: str = "kv_outer",
) -> int:
    """HBM accesses (reads + writes, elements) of the tiled kernels in ``flash_np``.

    Blocks come from :func:`block_sizes` (sram_elems, d). Equal to ``IOCounter.accesses`` after
    ``flash_np.forward`` (or ``backward`` when ``backward=True``, which counts the backward pass
    alone) on 2-D inputs of these sizes with ``block_q, block_k = block_sizes(sram_elems, d)``.
    """
    br, bc = block_sizes(sram_elems, d)
    return sum(flash_io(n_q, n_k, d, br, bc, backward=backward, dv=dv, causal=causal, loop_order=loop_order))


def flash_accesses_for_blocks(
    n_q: int,
    n_k: int,
    d: int,
    br: int,
    bc: int,
    *,
    backward: bool = False,
    dv: Optional[int] = None,
    causal: bool = False,
    loop_order: str = "kv_outer",
) -> int:
    """:func:`flash_accesses` for explicit tile sizes (Br, Bc) instead of an SRAM size."""
    return sum(flash_io(n_q, n_k, d, br, bc, backward=backward, dv=dv, causal=causal, loop_order=loop_order))


def flash_io(
    n_q: int,
    n_k: int,
    d: int,
    br: int,
    bc: int,
    *,
    backward: bool = False,
    dv: Optional[int] = None,
    causal: bool = False,
    loop_order: str = "kv_outer",
) -> Tuple[int, int]:
    """(reads, writes) in elements of the tiled kernels for tile sizes (Br, Bc).

    Equal to ``IOCounter.reads`` and ``IOCounter.writes``; the module docstring derives each term.
    """
    n_q, n_k, d, dv = _sizes(n_q, n_k, d, dv)
    br = positive_int(br, "br")
    bc = positive_int(bc, "bc")
    if loop_order not in LOOP_ORDERS:
        raise ValueError("loop_order must be one of {}, got {!r}".format(LOOP_ORDERS, loop_order))
    pairs = visited_tiles(n_q, n_k, br, bc, causal)
    pair_rows = sum(_rows(n_q, br, i) for i, _ in pairs)  # query rows summed over visited tiles
    pair_cols = sum(_rows(n_k, bc, j) for _, j in pairs)  # key rows summed over visited tiles
    if backward:
        reads = 2 * n_q * dv + n_k * (d + dv) + pair_rows * (2 * d + dv + 2)  # dO, O; K, V; Q dO dQ lse D
        writes = n_q + n_q * d + n_k * (d + dv) + pair_rows * d  # D; dQ = 0; dK, dV; dQ
        return reads, writes
    if loop_order == "q_outer":
        return n_q * d + pair_cols * (d + dv), n_q * (dv + 1)  # Q, K, V; O, lse
    reads = n_k * (d + dv) + pair_rows * (d + dv + 2) + 2 * n_q  # K, V; Q, O, l, m; final l, m
    writes = (n_q * dv + 2 * n_q) + pair_rows * (dv + 2) + n_q  # O, l, m = init; O, l, m; lse
    return reads, writes


# The paper's Figure 2 (left): attention of GPT-2 medium on an A100 (forward + backward).
PAPER_FIGURE2 = {"standard_gb": 40.3, "flash_gb": 4.4, "standard_gflops": 66.6, "flash_gflops": 75.2}


def figure2(sram_bytes: int = hardware.A100_SRAM_BYTES, dtype_bytes: int = hardware.FP16_BYTES) -> dict:
    """HBM reads + writes for the paper's Figure 2 (left), from the closed forms above.

    Setting (Dao et al. 2022, Fig. 2 left): GPT-2 medium attention, sequence length N = 1024,
    head dimension d = 64, 16 heads, batch 64, fp16 (2 bytes), forward + backward, on an A100
    whose SRAM is 192 KB per streaming multiprocessor (M = 192 KiB / 2 bytes = 98 304 elements,
    so Bc = 384, Br = 64).

    Why our numbers differ from the paper's: the paper *measured* HBM traffic of real kernels
    with a profiler, while we count the algorithms' tile loads and stores.
    - Standard (ours ≈ 25.2 GB vs 40.3 GB): PyTorch's attention in the GPT-2 training setting also
      writes and re-reads N×N matrices for the causal mask and for dropout, which Algorithm 0/3
      do not have; our count has only S, P, dP and dS.
    - FlashAttention (ours ≈ 4.2 GB vs 4.4 GB): close. The real kernel also reads and writes the
      dropout state, keeps statistics in fp32, and uses tile sizes tuned to registers rather than
      the rule Bc = ⌈M/4d⌉, so it does a few more passes than our count assumes.
    The claim is about the ratio: both give several times less traffic for FlashAttention
    (ours ≈ 6.0×, the paper's ≈ 9.2×; the gap is the standard kernel's extra N×N passes).

    Returns a dict with standard_gb, flash_gb (10^9 bytes), the ratio, the paper's numbers and
    the setting.
    """
    n, d, heads, batch = 1024, 64, 16, 64
    sram_elems = sram_bytes // dtype_bytes
    br, bc = block_sizes(sram_elems, d)
    per_head_standard = standard_accesses(n, n, d) + standard_accesses(n, n, d, backward=True)
    per_head_flash = flash_accesses(n, n, d, sram_elems) + flash_accesses(n, n, d, sram_elems, backward=True)
    scale = heads * batch * dtype_bytes / 1e9
    standard_gb = per_head_standard * scale
    flash_gb = per_head_flash * scale
    return {
        "standard_gb": standard_gb,
        "flash_gb": flash_gb,
        "ratio": standard_gb / flash_gb,
        "paper_standard_gb": PAPER_FIGURE2["standard_gb"],
        "paper_flash_gb": PAPER_FIGURE2["flash_gb"],
        "paper_ratio": PAPER_FIGURE2["standard_gb"] / PAPER_FIGURE2["flash_gb"],
        "setting": {
            "n": n,
            "d": d,
            "heads": heads,
            "batch": batch,
            "dtype_bytes": dtype_bytes,
            "sram_bytes": sram_bytes,
            "sram_elems": sram_elems,
            "br": br,
            "bc": bc,
        },
    }


def theta_ratio(n: int, d: int, sram_elems: int) -> float:
    """N²d²/M: Theorem 2's order of FlashAttention's HBM accesses (for scaling plots)."""
    return n * n * d * d / float(sram_elems)


def format_figure2(result: Optional[dict] = None) -> str:
    """The Figure-2 reproduction as a small text table, ours beside the paper's."""
    r = figure2() if result is None else result
    s = r["setting"]
    lines = [
        "Figure 2 (left) of Dao et al. 2022: GPT-2 medium attention, N={n}, d={d}, {heads} heads, "
        "batch {batch}, fp16, forward + backward, A100 SRAM {kib} KiB (Br={br}, Bc={bc})".format(
            kib=s["sram_bytes"] // 1024, **s
        ),
        "{:<16}{:>14}{:>14}".format("", "ours (GB)", "paper (GB)"),
        "{:<16}{:>14.1f}{:>14.1f}".format("standard", r["standard_gb"], r["paper_standard_gb"]),
        "{:<16}{:>14.1f}{:>14.1f}".format("FlashAttention", r["flash_gb"], r["paper_flash_gb"]),
        "{:<16}{:>13.1f}x{:>13.1f}x".format("ratio", r["ratio"], r["paper_ratio"]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_figure2())
