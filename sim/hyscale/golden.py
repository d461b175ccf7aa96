"""Bit-exact golden model of the HyScale-GNN fused layer: ``Y = act((A X) W + b)``.

``A`` is given as a CSR whose row ``v`` lists ``v``'s in-neighbours (sources) ``u`` with edge
weights ``a_vu``; ``X`` holds one feature row per source index. What the hardware does, and this
model reproduces:

- **Edge order.** The host sorts the edges by source (a stable sort of the CSR order, so edges of
  one source keep ascending destinations, duplicates in stored order): :func:`edge_schedule`.
- **Aggregation.** ``Z[v, i]`` is one sequential binary32 sum that starts from ``+0`` and adds
  ``round(a_vu * X[u, i])`` for the in-edges of ``v`` in schedule order (ascending source),
  rounding to nearest even after every operation. Rows without in-edges are ``+0``.
- **Update.** ``Y[v, c]`` starts from ``b[c]`` and adds ``round(Z[v, i] * W[i, c])`` for
  ``i = 0, 1, ..., f_in - 1`` (two roundings per step, as the MAC's multiplier and adder).
- **Activation.** With ReLU, a result whose sign bit is set becomes ``+0`` (so ``-0`` becomes
  ``+0``; the canonical NaN, sign bit clear, stays NaN).
- Every NaN result is the canonical quiet NaN ``0x7FC00000``.

Against float64 the aggregation obeys the sequential-sum bound ``(deg - 1) u sum |a X|`` and
the update ``f_in u sum |Z W|`` (plus the roundings of the products), ``u = 2^-24``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moagcn.core.graph import row_sort_order

from moagcn.sim.arith.golden import add, as_bits, as_float, mul
from moagcn.sim.sspmm.golden import buffer_pieces

U = 2.0 ** -24


@dataclass(frozen=True)
class EdgeSchedule:
    """The edges of one job in the order the aggregate kernel processes them.

    Attributes
    ----------
    src, dst : int64 arrays
        Source (feature row) and destination (output row) of every edge, sorted by source.
    weight : float32 array
        Edge weight ``a_vu``.
    first : bool array
        The edge is the first into its destination (its accumulation starts from ``+0``).
    sources, counts : int64 arrays
        Distinct sources in order and their out-edge counts.
    nonempty : bool array (one per destination)
        The destination has at least one in-edge.
    """

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    first: np.ndarray
    sources: np.ndarray
    counts: np.ndarray
    nonempty: np.ndarray


def gcn_weights(indptr, indices, n_sources: int) -> np.ndarray:
    """GCN normalisation ``1 / sqrt(d_in(v) d_out(u))`` per stored edge (float32).

    ``d_in(v)`` counts row ``v``'s entries and ``d_out(u)`` the entries naming ``u``; the caller
    adds the self loops first when it wants them.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    d_in = np.diff(indptr)
    d_out = np.bincount(indices, minlength=n_sources)
    rows = np.repeat(np.arange(d_in.size), d_in)
    return (1.0 / np.sqrt(d_in[rows].astype(np.float64) * d_out[indices])).astype(np.float32)


def edge_schedule(indptr, indices, data) -> EdgeSchedule:
    """Sort the edges of a destination-major CSR by source (see the module docstring)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data, dtype=np.float32)
    n_dst = indptr.size - 1
    dst = np.repeat(np.arange(n_dst), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    src, dst, weight = indices[order], dst[order], data[order]
    first = np.zeros(src.size, dtype=bool)
    if src.size:
        _, first_pos = np.unique(dst, return_index=True)
        first[first_pos] = True
    sources, counts = np.unique(src, return_counts=True)
    nonempty = np.zeros(n_dst, dtype=bool)
    nonempty[dst] = True
    return EdgeSchedule(src, dst, weight, first, sources, counts, nonempty)


def aggregate(sched: EdgeSchedule, X: np.ndarray, n_dst: int) -> np.ndarray:
    """Bit-exact ``Z = A X`` in the schedule's order (float32, n_dst x f)."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    acc = np.zeros((n_dst, X.shape[1]), dtype=np.uint32)
    if sched.src.size == 0:
        return as_float(acc)
    # the k-th edge into each destination, for k = 0, 1, ...: one vectorised step per k
    order = np.argsort(sched.dst, kind="stable")
    dst_sorted = sched.dst[order]
    starts = np.searchsorted(dst_sorted, dst_sorted, side="left")
    rank = np.empty(sched.dst.size, dtype=np.int64)
    rank[order] = np.arange(dst_sorted.size) - starts
    w_bits = as_bits(sched.weight)
    x_bits = as_bits(X)
    for k in range(int(rank.max()) + 1):
        e = np.nonzero(rank == k)[0]
        prod = mul(x_bits[sched.src[e]], w_bits[e][:, None])
        acc[sched.dst[e]] = add(acc[sched.dst[e]], prod)
    return as_float(acc)


def row_pieces(indptr, indices, max_edges: int, max_sources: int):
    """The rows that no job with ``max_edges`` edges and ``max_sources`` source rows holds,
    each cut into pieces of ``min(max_edges, max_sources)`` of its edges in ascending source
    order (duplicates in stored order); every other row is one piece, its edges in the same
    order. None when every row fits; else ``(piece_ptr, order, first, count)``: the pieces' row
    pointers, the stored edges in the pieced job's order (``indices[order]``, ``data[order]``),
    each row's first piece and its number of pieces (the rule of
    :func:`~moagcn.sim.sspmm.golden.buffer_pieces`)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    deg = np.diff(indptr)
    if not ((deg > max_edges) | (deg > max_sources)).any():
        return None              # no row can be too long
    order = row_sort_order(indptr, indices)       # each row's edges by source, stably
    cut = buffer_pieces(indptr, indices[order], max_edges, max_sources)
    if cut is None:
        return None
    piece_ptr, _, first, count = cut
    return piece_ptr, order, first, count


def sum_pieces(Zp: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Each row's pieces' aggregates ``Zp[first[v] + j]`` added in order, ``((z0 + z1) + z2)
    + ...``, in binary32 with the canonical NaN."""
    Zp = np.ascontiguousarray(Zp, dtype=np.float32)
    acc = as_bits(Zp)[first].copy()
    for j in range(1, int(count.max(initial=1))):
        more = np.flatnonzero(count > j)
        acc[more] = add(acc[more], as_bits(Zp)[first[more] + j])
    return as_float(acc)


def aggregate_rows(indptr, indices, data, X, buffer: tuple[int, int] | None = None
                   ) -> np.ndarray:
    """Bit-exact ``Z = A X`` (:func:`aggregate` in :func:`edge_schedule`'s order). With
    ``buffer = (max_edges, max_sources)`` a row that no job of those buffers holds is the sum
    of its pieces' aggregates (:func:`row_pieces`, :func:`sum_pieces`), as the accelerator
    computes it; every other row is unchanged."""
    cut = None if buffer is None else row_pieces(indptr, indices, *buffer)
    return aggregate_cut(indptr, indices, data, X, cut)


def aggregate_cut(indptr, indices, data, X, cut) -> np.ndarray:
    """:func:`aggregate_rows` given :func:`row_pieces`' result ``cut`` (None: no row cut)."""
    if cut is None:
        return aggregate(edge_schedule(indptr, indices, data), X, len(indptr) - 1)
    piece_ptr, order, first, count = cut
    indices, data = np.asarray(indices)[order], np.asarray(data)[order]
    Zp = aggregate(edge_schedule(piece_ptr, indices, data), X, piece_ptr.size - 1)
    return sum_pieces(Zp, first, count)


def update(Z: np.ndarray, W: np.ndarray, b: np.ndarray | None, relu: bool) -> np.ndarray:
    """Bit-exact ``act(Z W + b)`` with the MAC order of the module docstring."""
    Z = np.ascontiguousarray(Z, dtype=np.float32)
    W = np.ascontiguousarray(W, dtype=np.float32)
    f_in, f_out = W.shape
    if Z.shape[1] != f_in:
        raise ValueError(f"Z has {Z.shape[1]} columns but W has {f_in} rows")
    bias = np.zeros(f_out, np.float32) if b is None else np.asarray(b, np.float32)
    acc = np.broadcast_to(as_bits(bias), (Z.shape[0], f_out)).copy()
    z_bits, w_bits = as_bits(Z), as_bits(W)
    for i in range(f_in):
        acc = add(acc, mul(z_bits[:, i:i + 1], w_bits[i][None, :]))
    if relu:
        acc = np.where(acc >> 31, np.uint32(0), acc)
    return as_float(acc)


def layer(indptr, indices, data, X, W, b=None, relu: bool = False,
          buffer: tuple[int, int] | None = None) -> np.ndarray:
    """Bit-exact fused layer output ``Y`` (float32, one row per CSR row). With ``buffer``, a
    row longer than those buffers is aggregated in pieces (:func:`aggregate_rows`) before the
    update, as the accelerator runs such a layer."""
    return update(aggregate_rows(indptr, indices, data, X, buffer), W, b, relu)


def float64_layer(indptr, indices, data, X, W, b=None, relu: bool = False):
    """The layer in float64 and an elementwise bound on the binary32 result's error.

    The bound combines the aggregation's sequential-sum bound, carried through ``|W|``, with the
    update's: ``|Y - Y64| <= E_agg |W| + (f_in + 1) u (|Z| |W| + |b|) + u |Y64|``.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n_dst = indptr.size - 1
    X64 = np.asarray(X, dtype=np.float64)
    W64 = np.asarray(W, dtype=np.float64)
    b64 = np.zeros(W64.shape[1]) if b is None else np.asarray(b, dtype=np.float64)
    Z64 = np.zeros((n_dst, X64.shape[1]))
    Zabs = np.zeros_like(Z64)
    deg = np.diff(indptr)
    rows = np.repeat(np.arange(n_dst), deg)
    contrib = np.asarray(data, np.float64)[:, None] * X64[np.asarray(indices, np.int64)]
    np.add.at(Z64, rows, contrib)
    np.add.at(Zabs, rows, np.abs(contrib))
    agg_err = (np.maximum(deg, 1)[:, None] + 1) * U * Zabs
    Y64 = Z64 @ W64 + b64
    bound = (agg_err @ np.abs(W64) + (W64.shape[0] + 1) * U
             * ((np.abs(Z64) + agg_err) @ np.abs(W64) + np.abs(b64)) + U * np.abs(Y64))
    if relu:
        Y64 = np.maximum(Y64, 0.0)
    return Y64, bound
