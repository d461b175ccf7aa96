"""Bit-exact golden model of the S-SpMM accelerator: ``Z = (A H) ⊙ M``.

Accumulation order (what the hardware does, and what this model reproduces):

- every output element ``Z[v, f]`` with ``M[v, f] = 1`` is one sequential binary32 sum that
  starts from ``+0`` and adds ``H[u, f]`` for the neighbours ``u`` of row ``v`` in ascending
  column order (equal columns in stored order), rounding to nearest even after every addition;
- masked elements and rows without neighbours are ``+0``;
- a NaN result is the canonical quiet NaN ``0x7FC00000`` (the adders' convention).

The driver sorts each row before loading the index buffer, so that tiling a job never changes
this order.

Weighted (``SSpmmConfig.weighted``, :func:`sspmm_weighted`): A has one binary32 value ``w`` per
stored entry, and each addition above adds the entry's rounded product instead of ``H[u, f]``:
``acc = round(round(w * H[u, f]) + acc)`` from ``acc = +0``, the entries in the same order
(ascending column, equal columns in stored order; a value stays with its entry), split rows'
pieces and long rows' pieces summed and merged as in the unweighted model.

Against a float64 reference the (unweighted) result lies within the usual bound of a
sequential sum, ``|Z - Z64| <= (deg - 1) * u * sum |H|`` with ``u = 2^-24`` (plus the final
rounding).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from moagcn.core.counters import work_adds  # noqa: F401 (the one definition, re-exported)
from moagcn.core.graph import degrees, row_sort_order, sort_rows

from moagcn.sim.arith.golden import CANONICAL_NAN, as_float


def normalise_mask(mask, shape) -> np.ndarray:
    """The output mask as a bool array of ``shape`` (``None``: all ones)."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    return np.asarray(mask).astype(bool, copy=False)


def _output_mask(mask, shape) -> np.ndarray:
    """:func:`normalise_mask`, and a ``ValueError`` where it is not the output's shape."""
    mask = normalise_mask(mask, shape)
    if mask.shape != shape:
        raise ValueError(f"mask has shape {mask.shape}; the output is {shape}")
    return mask


def sspmm(indptr, indices, H, mask=None, split: int = 0, pieces: int = 0,
          buffer: tuple[int, int] | None = None) -> np.ndarray:
    """Bit-exact ``Z = (A H) ⊙ M`` (float32, N x F); see the module docstring for the order.

    ``buffer = (max_edges, max_nodes)`` (an accelerator configuration's buffers): a row that no
    job of that configuration holds, with more than ``max_edges`` entries or more than
    ``max_nodes`` distinct neighbours, is summed in pieces of ``min(max_edges, max_nodes)``
    consecutive neighbours (ascending order as above; the last piece the rest), each piece as a
    row of its own (``split`` and ``pieces`` then apply to the pieces), and the pieces' sums
    are added in order, ``((q0 + q1) + q2) + ...``, as the driver merges them
    (:func:`buffer_pieces`). Rows that fit are summed whole.

    ``split`` > 0 (``SSpmmConfig.split_degree``): a row with more than ``split`` neighbours is
    summed in pieces of ``split`` consecutive neighbours (in the ascending order above; the
    last piece holds the rest), each piece from ``+0``, and the pieces' sums are added in
    order: ``((p0 + p1) + p2) + ...``. ``pieces`` > 0 (the slices, ``SSpmmConfig.slices``: a
    row's pieces go to distinct slices) caps the pieces of a row: a row of ``deg`` neighbours
    is then cut into pieces of ``max(split, ceil(deg / pieces))`` (:func:`piece_sizes`)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    H = np.ascontiguousarray(H, dtype=np.float32)
    n = indptr.size - 1
    mask = _output_mask(mask, (n, H.shape[1]))
    cols = sort_rows(indptr, indices)
    if buffer is not None:
        cut = buffer_pieces(indptr, cols, *buffer)
        if cut is not None:
            piece_ptr, _, first, count = cut
            # every element of a piece is masked and made canonical after the merge: a masked
            # piece element only ever reaches a masked output, and a NaN stays a NaN
            return merge_pieces(_sums(piece_ptr, cols, H, split, pieces), first, count, mask)
    return _masked_canonical(_sums(indptr, cols, H, split, pieces), mask)


def entry_products(indptr, indices, values, H) -> tuple[np.ndarray, np.ndarray]:
    """Each row's entries in the accumulation order (ascending column, stably) as ``(cols,
    products)``: the sorted columns and, per entry, ``round(w * H[col])`` (binary32, every
    feature; numpy rounds a float32 product to nearest even, as the lanes' multipliers do)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values, dtype=np.float32)
    if values.shape != indices.shape:
        raise ValueError(f"{values.size} edge values for {indices.size} entries")
    order = row_sort_order(indptr, indices)
    cols = indices[order]
    with np.errstate(all="ignore"):
        products = values[order][:, None] * np.asarray(H, dtype=np.float32)[cols]
    return cols, np.asarray(products, dtype=np.float32)


def sspmm_weighted(indptr, indices, values, H, mask=None, split: int = 0, pieces: int = 0,
                   buffer: tuple[int, int] | None = None) -> np.ndarray:
    """Bit-exact ``Z = (A_w H) ⊙ M`` (float32, N x F): ``values`` holds one binary32 weight per
    stored entry of ``(indptr, indices)``, in their stored order. Every unmasked element is
    ``acc = round(round(w * h) + acc)`` from ``+0`` over the row's entries in ascending column
    order (equal columns in stored order), two roundings per entry; ``split``, ``pieces`` and
    ``buffer`` cut rows into pieces exactly as :func:`sspmm` does (the cut decided on the
    columns, the values carried with their entries).

    The sum is :func:`sspmm`'s own on the entries' products: entry k's products are a
    "feature row" of their own (column k), so the same sequential kernel adds them in the
    same order."""
    indptr = np.asarray(indptr, dtype=np.int64)
    H = np.ascontiguousarray(H, dtype=np.float32)
    n = indptr.size - 1
    mask = _output_mask(mask, (n, H.shape[1]))
    cols, products = entry_products(indptr, indices, values, H)
    entries = np.arange(cols.size, dtype=np.int64)
    if buffer is not None:
        cut = buffer_pieces(indptr, cols, *buffer)
        if cut is not None:
            piece_ptr, _, first, count = cut
            return merge_pieces(_sums(piece_ptr, entries, products, split, pieces), first,
                                count, mask)
    return _masked_canonical(_sums(indptr, entries, products, split, pieces), mask)


def _sums(indptr, cols, H, split: int = 0, pieces: int = 0) -> np.ndarray:
    """Every row's sums (sorted ``cols``; rows longer than ``split`` in pieces), before the
    mask and the canonical NaN."""
    n = indptr.size - 1
    deg = np.diff(indptr)
    if split and n and deg.max() > split and pieces != 1:
        return _split_sums(indptr, cols, H, split, pieces)
    # scipy's CSR x dense kernel (csr_matvecs) computes each output row as y = +0, then
    # y += 1.0 * H[u] for the row's stored entries in order: with the columns sorted (stably)
    # that is exactly the sequential binary32 sum above (1.0 * x is exact, so a fused
    # multiply-add rounds like the plain add). tests/sim/test_sspmm_golden.py checks this
    # against a plain Python loop on subnormals, infinities, NaNs and cancellation.
    A = sp.csr_matrix((np.ones(cols.size, dtype=np.float32), cols, indptr),
                      shape=(n, H.shape[0]))
    with np.errstate(all="ignore"):
        return np.asarray(A @ H, dtype=np.float32).reshape(n, H.shape[1])


def _masked_canonical(acc: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``acc`` with masked elements +0 (never inf * 0 = NaN) and every NaN canonical."""
    np.copyto(acc, np.float32(0.0), where=~mask)
    nan = np.isnan(acc)
    if nan.any():
        acc[nan] = as_float(CANONICAL_NAN)
    return acc


def buffer_pieces(indptr, cols, max_edges: int, max_nodes: int):
    """The rows that no job of a configuration with ``max_edges`` entries and ``max_nodes``
    feature rows holds (more entries than ``max_edges``, or more distinct columns than
    ``max_nodes``), cut into pieces of ``min(max_edges, max_nodes)`` consecutive entries of
    ``cols`` (each row's columns sorted); every other row is one piece. None when every row
    fits; else ``(piece_ptr, rep, first, count)``: the pieces' row pointers into ``cols``
    (the entries keep their order, so ``cols`` is the pieced job's index array too), each
    piece's row, each row's first piece and its number of pieces."""
    indptr = np.asarray(indptr, dtype=np.int64)
    cols = np.asarray(cols)
    deg = np.diff(indptr)
    long = deg > max_edges
    for v in np.flatnonzero((deg > max_nodes) & ~long).tolist():
        # the row's columns are sorted: its distinct ones are where the value changes
        row = cols[indptr[v]:indptr[v + 1]]
        long[v] = 1 + int(np.count_nonzero(row[1:] != row[:-1])) > max_nodes
    if not long.any():
        return None
    size = min(max_edges, max_nodes)
    count = np.where(long, -(-deg // size), 1)
    rep = np.repeat(np.arange(deg.size), count)
    first = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    k = np.arange(rep.size) - first[rep]
    start = indptr[rep] + k * size
    stop = np.where(long[rep], np.minimum(start + size, indptr[rep + 1]), indptr[rep + 1])
    piece_ptr = np.concatenate([[0], np.cumsum(stop - start)]).astype(np.int64)
    return piece_ptr, rep, first, count


def merge_pieces(part: np.ndarray, first, count, mask) -> np.ndarray:
    """Each row's pieces' sums ``part[first[v] + j]`` added in order, ``((q0 + q1) + q2) +
    ...`` in binary32, then masked elements +0 and NaNs canonical."""
    acc = np.array(part[first], dtype=np.float32)
    with np.errstate(all="ignore"):
        for j in range(1, int(count.max(initial=1))):
            more = np.flatnonzero(count > j)
            acc[more] += part[first[more] + j]
    return _masked_canonical(acc, mask)


def piece_sizes(deg, split: int, pieces: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per row of degree ``deg``: the neighbours per piece and the pieces (at least 1) when rows
    longer than ``split`` are cut into pieces of ``max(split, ceil(deg / pieces))`` neighbours
    (``pieces`` 0: of ``split``), so that a row has at most ``pieces`` of them."""
    deg = np.asarray(deg, dtype=np.int64)
    size = np.full(deg.shape, split, dtype=np.int64)
    if pieces > 0:
        size = np.maximum(size, -(-deg // pieces))
    size = np.where(deg > split, size, np.maximum(deg, 1))
    return size, np.maximum(-(-deg // size), 1)


def _split_sums(indptr, cols, H, split: int, cap: int = 0) -> np.ndarray:
    """:func:`_sums` with rows cut into pieces (sorted ``cols``; :func:`piece_sizes`)."""
    n = indptr.size - 1
    deg = np.diff(indptr)
    size, pieces = piece_sizes(deg, split, cap)
    # piece rows: piece k of row v holds its neighbours k*size .. (k+1)*size - 1
    rep = np.repeat(np.arange(n), pieces)
    first = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    k = np.arange(rep.size) - np.repeat(first, pieces)
    start = indptr[rep] + k * size[rep]
    stop = np.minimum(start + size[rep], indptr[rep + 1])
    piece_ptr = np.concatenate([[0], np.cumsum(np.maximum(stop - start, 0))])
    A = sp.csr_matrix((np.ones(cols.size, dtype=np.float32), cols, piece_ptr),
                      shape=(rep.size, H.shape[0]))
    with np.errstate(all="ignore"):
        part = np.asarray(A @ H, dtype=np.float32)
        acc = part[first].copy()
        for j in range(1, int(pieces.max())):
            more = np.flatnonzero(pieces > j)
            acc[more] += part[first[more] + j]
    return acc


def float64_bound(indptr, indices, H, mask=None) -> np.ndarray:
    """Per-element bound on |Z - exact sum| for the sequential binary32 sum."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    absH = np.abs(np.asarray(H, dtype=np.float64))
    rows = np.repeat(np.arange(n), degrees(indptr))
    abs_sum = np.zeros((n, absH.shape[1]))
    np.add.at(abs_sum, rows, absH[np.asarray(indices, dtype=np.int64)])
    deg = degrees(indptr)[:, None]
    u = 2.0 ** -24
    bound = (np.maximum(deg - 1, 0) * u + u) * abs_sum * (1 + 1e-6)
    return np.where(normalise_mask(mask, bound.shape), bound, 0.0)
