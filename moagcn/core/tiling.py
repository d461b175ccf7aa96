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

from moagcn.errors import UserError


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


def plan_tiles(indptr: np.ndarray, indices: np.ndarray, n_rows: int, n_cols: int,
               n_features: int, limits: TileLimits) -> list[Tile]:
    """Cut ``Z = (A H) ⊙ M`` (A: ``n_rows x n_cols``, validated) into jobs within ``limits``.

    A job that fits is one tile holding the whole job unchanged. Otherwise rows are grouped
    greedily into blocks whose edges fit ``max_edges``, rows fit ``max_rows`` and distinct
    columns fit ``max_cols``; features go in chunks of ``max_width``. A single row that alone
    exceeds a buffer is an error naming the row and the parameter.
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
        max_rows = limits.max_rows
        start = 0
        while start < n_rows:
            stop = start
            seen = np.zeros(n_cols, dtype=bool)
            n_seen = edges = 0
            while stop < n_rows:
                cols = indices[indptr[stop]:indptr[stop + 1]]
                new = np.unique(cols[~seen[cols]])
                if (stop - start + 1 > max_rows or edges + cols.size > limits.max_edges
                        or n_seen + new.size > limits.max_cols):
                    break
                seen[new] = True
                n_seen += new.size
                edges += cols.size
                stop += 1
            blocks.append((start, stop))
            start = stop
    width = limits.max_width
    chunks = [(f, min(n_features, f + width)) for f in range(0, n_features, width)] or [(0, 0)]
    tiles = []
    for r0, r1 in blocks:
        lo, hi = indptr[r0], indptr[r1]
        whole = r0 == 0 and r1 == n_rows and (n_rows == n_cols or not limits.square) \
            and n_cols <= limits.max_cols
        # the whole graph: no renumbering
        cols = np.arange(n_cols, dtype=np.int64) if whole else np.unique(indices[lo:hi])
        local = np.searchsorted(cols, indices[lo:hi])
        size = max(r1 - r0, cols.size, 1) if limits.square else r1 - r0
        tile_indptr = np.full(size + 1, hi - lo, dtype=np.int64)
        tile_indptr[:r1 - r0 + 1] = indptr[r0:r1 + 1] - lo
        for f0, f1 in chunks:
            tiles.append(Tile(r0, r1, f0, f1, cols, tile_indptr, local, limits.square))
    return tiles
