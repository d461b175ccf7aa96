"""Cut a sparse job ``Z = (A H) ⊙ M`` into tiles that fit an accelerator's buffers.

Written once for every design: a spec states its buffer limits as :class:`TileLimits` and the
generic driver tiles each job exactly once. Tiles split the output by rows and by feature
columns only, never a row's neighbour list: each output element is still one sum over all of its
row's neighbours in ascending global column order (columns are renumbered monotonically inside a
tile), so a tiled job is bit for bit the untiled one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from moagcn.errors import UserError

from moagcn.core.memo import ArrayMemo


@dataclass(frozen=True)
class TileLimits:
    """The largest job a configuration holds, and the parameter behind each limit.

    ``square``: the design takes square jobs (as many feature rows as output rows; S-SpMM);
    otherwise a tile has ``rows`` output rows and ``len(cols)`` feature rows (HyScale).
    """

    max_rows: int
    max_cols: int
    max_edges: int
    max_width: int
    square: bool = True
    rows_param: str = "max_nodes"
    cols_param: str = "max_nodes"
    edges_param: str = "max_edges"


@dataclass
class Tile:
    """One accelerator job cut out of a larger one.

    Rows ``rows_start:rows_stop`` of the output and feature columns ``feat_start:feat_stop`` are
    computed from the node rows ``cols`` of H (ascending global ids). A square tile has
    ``size = max(rows, len(cols))`` nodes: rows beyond the output rows are empty, feature rows
    beyond ``cols`` are zero.
    """

    rows_start: int
    rows_stop: int
    feat_start: int
    feat_stop: int
    cols: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    square: bool = True

    @property
    def size(self) -> int:
        """Rows of the tile's job (output rows, padded when square)."""
        return self.indptr.size - 1

    @property
    def n_feature_rows(self) -> int:
        """Feature rows of the tile's job."""
        return self.size if self.square else self.cols.size

    @property
    def width(self) -> int:
        return self.feat_stop - self.feat_start

    def features(self, H: np.ndarray) -> np.ndarray:
        """The tile's feature buffer: rows ``cols`` of H, its feature chunk, zero padded."""
        Ht = np.zeros((self.n_feature_rows, self.width), dtype=np.float32)
        Ht[:self.cols.size] = H[self.cols, self.feat_start:self.feat_stop]
        return Ht

    def mask(self, M: np.ndarray) -> np.ndarray:
        """The tile's output mask (rows beyond the output rows are 0)."""
        Mt = np.zeros((self.size, self.width), dtype=bool)
        r = self.rows_stop - self.rows_start
        Mt[:r] = M[self.rows_start:self.rows_stop, self.feat_start:self.feat_stop]
        return Mt

    def place(self, Z: np.ndarray, Zt: np.ndarray) -> None:
        """Write the tile's result ``Zt`` into its place in the full output ``Z``."""
        Z[self.rows_start:self.rows_stop, self.feat_start:self.feat_stop] = \
            Zt[:self.rows_stop - self.rows_start]


def _rows_too_long(indptr: np.ndarray, indices: np.ndarray, limits: TileLimits) -> np.ndarray:
    """Rows that no tile can hold: more entries than ``max_edges`` or more distinct
    neighbours than ``max_cols`` (duplicates share one feature row)."""
    deg = np.diff(indptr)
    too_long = deg > limits.max_edges
    for v in np.nonzero((deg > limits.max_cols) & ~too_long)[0]:
        too_long[v] = np.unique(indices[indptr[v]:indptr[v + 1]]).size > limits.max_cols
    return np.nonzero(too_long)[0]


def previous_occurrence(indices: np.ndarray) -> np.ndarray:
    """Per entry, the position of the previous entry with the same column id (-1 if none).

    The entries' positions grouped by column in order of appearance are a stable sort by
    column; scipy's CSR-to-CSC conversion of the entries as one row is that sort by counting,
    linear in the entries (five times faster than numpy's stable argsort at 2M entries).
    """
    prev = np.empty(indices.size, dtype=np.int64)
    if indices.size == 0:
        return prev
    span = int(indices.max()) + 1
    if span > 4 * indices.size + 4096:
        # few entries among many column ids: a comparison sort, not one counter per id
        order = np.argsort(indices, kind="stable")
        prev.fill(-1)
        same = indices[order[1:]] == indices[order[:-1]]
        prev[order[1:][same]] = order[:-1][same]
        return prev
    # (scipy's conversion moves each entry once, in stored order, and never sums duplicates;
    # the test against a loop would see it change)
    by_col = sp.csr_matrix((np.arange(indices.size, dtype=np.int64), indices,
                            np.array([0, indices.size])), shape=(1, span)).tocsc()
    order, starts = by_col.data, by_col.indptr
    before = np.empty_like(order)
    before[0] = -1
    before[1:] = order[:-1]
    before[starts[:-1][np.diff(starts) > 0]] = -1          # each column's first entry
    prev[order] = before
    return prev


def _row_blocks(indptr: np.ndarray, indices: np.ndarray, n_rows: int,
                limits: TileLimits) -> list[tuple[int, int]]:
    """Greedy row blocks: each as long as its rows, entries and distinct columns fit.

    The distinct columns of entries ``lo..hi`` are the entries whose previous occurrence lies
    before ``lo``, so each block is found with one cumulative sum over its candidate entries
    (linear in the entries overall), not a row-by-row loop.
    """
    prev = previous_occurrence(indices)
    blocks = []
    start = 0
    window = 1024                 # entries scanned first; doubled while the block may go on
    while start < n_rows:
        lo = int(indptr[start])
        cap = min(n_rows, start + limits.max_rows,
                  int(np.searchsorted(indptr, lo + limits.max_edges, side="right")) - 1)
        while True:
            # the rows whose entries lie within the window (all up to cap when it covers them)
            last = min(cap, int(np.searchsorted(indptr, lo + window, side="right")) - 1)
            ends = indptr[start + 1:last + 1] - lo     # entries of blocks start..s, s > start
            fresh = np.concatenate([[0], np.cumsum(prev[lo:lo + int(ends[-1])] < lo)]) \
                if ends.size else np.zeros(1, dtype=np.int64)
            fits = int(np.count_nonzero(fresh[ends] <= limits.max_cols)) if ends.size else 0
            if fits < ends.size or last >= cap:
                break             # the block ends inside the window, or cannot grow further
            window *= 2
        stop = start + max(fits, 1)       # a row alone always fits (checked before)
        blocks.append((start, stop))
        window = max(1024, 2 * int(indptr[stop] - lo))
        start = stop
    return blocks


#: plans of read-only graphs: training aggregates the same adjacency every step
_PLANS = ArrayMemo()


def plan_tiles(indptr: np.ndarray, indices: np.ndarray, n_rows: int, n_cols: int,
               n_features: int, limits: TileLimits) -> list[Tile]:
    """:func:`plan_tiles_uncached`, remembered for read-only graphs (tiles are never mutated)."""
    return list(_PLANS.get((indptr, indices), (n_rows, n_cols, n_features, limits), lambda: tuple(
        plan_tiles_uncached(indptr, indices, n_rows, n_cols, n_features, limits))))


def plan_tiles_uncached(indptr: np.ndarray, indices: np.ndarray, n_rows: int, n_cols: int,
                        n_features: int, limits: TileLimits) -> list[Tile]:
    """Cut ``Z = (A H) ⊙ M`` (A: ``n_rows x n_cols``, validated) into jobs within ``limits``.

    A job that fits is one tile holding the whole job unchanged. Otherwise rows are grouped
    greedily into blocks whose edges fit ``max_edges``, rows fit ``max_rows`` and distinct
    columns fit ``max_cols``; features go in chunks of ``max_width``. A single row that alone
    exceeds a buffer is an error naming the row and the parameter (the S-SpMM spec cuts such
    rows into pieces before tiling, :meth:`~moagcn.core.spec.AcceleratorSpec.expand`).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    blocks: list[tuple[int, int]] = []
    fits_whole = (n_rows <= limits.max_rows and indices.size <= limits.max_edges
                  and (n_cols <= limits.max_cols
                       or (not limits.square and np.unique(indices).size <= limits.max_cols)))
    if fits_whole:
        blocks.append((0, n_rows))
    else:
        big = _rows_too_long(indptr, indices, limits)
        if big.size:
            v = int(big[0])
            raise UserError(
                f"row {v} has {int(indptr[v + 1] - indptr[v])} neighbours but one accelerator "
                f"job holds at most {limits.edges_param}={limits.max_edges} entries and "
                f"{limits.cols_param}={limits.max_cols} distinct feature rows; use a larger "
                f"configuration (--param {limits.edges_param}=..., {limits.cols_param}=...)")
        blocks = _row_blocks(indptr, indices, n_rows, limits)
    width = limits.max_width
    chunks = [(f, min(n_features, f + width)) for f in range(0, n_features, width)] or [(0, 0)]
    tiles = []
    for r0, r1 in blocks:
        lo, hi = indptr[r0], indptr[r1]
        whole = r0 == 0 and r1 == n_rows and (n_rows == n_cols or not limits.square) \
            and n_cols <= limits.max_cols
        # the whole graph: no renumbering
        if whole:
            cols, local = np.arange(n_cols, dtype=np.int64), indices[lo:hi]
        else:
            # the block's distinct columns ascending, and each entry's rank among them
            cols, local = np.unique(indices[lo:hi], return_inverse=True)
            local = local.astype(np.int64, copy=False)
        size = max(r1 - r0, cols.size, 1) if limits.square else r1 - r0
        tile_indptr = np.full(size + 1, hi - lo, dtype=np.int64)
        tile_indptr[:r1 - r0 + 1] = indptr[r0:r1 + 1] - lo
        for f0, f1 in chunks:
            tiles.append(Tile(r0, r1, f0, f1, cols, tile_indptr, local, limits.square))
    return tiles
