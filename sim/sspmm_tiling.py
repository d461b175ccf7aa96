"""Cut an S-SpMM job ``Z = (A H) ⊙ M`` into tiles that fit the accelerator's buffers.

Shared by the host runtime's :class:`moagcn.host.devices.TiledDevice` and the driver
:class:`moagcn.sim.sspmm_driver.SSpmmDriver`. Tiles split the output by rows and by feature
columns only, never a row's neighbour list: each output element is still one sequential sum
over all of its row's neighbours in ascending global column order (columns are renumbered
monotonically inside a tile), so a tiled job is bit for bit the untiled one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from moagcn.errors import UserError
from moagcn.hw.sspmm.config import SSpmmConfig

if TYPE_CHECKING:
    from moagcn.host.graph import CSRGraph


@dataclass
class Tile:
    """One square accelerator job cut out of a larger S-SpMM.

    Rows ``rows_start:rows_stop`` of the output and feature columns ``feat_start:feat_stop`` are
    computed from the node rows ``cols`` of H (ascending global ids). The job has
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

    @property
    def size(self) -> int:
        return self.indptr.size - 1

    def features(self, H: np.ndarray) -> np.ndarray:
        """The tile's feature buffer: rows ``cols`` of H, its feature chunk, zero padded."""
        Ht = np.zeros((self.size, self.feat_stop - self.feat_start), dtype=np.float32)
        Ht[:self.cols.size] = H[self.cols, self.feat_start:self.feat_stop]
        return Ht

    def mask(self, M: np.ndarray) -> np.ndarray:
        """The tile's output mask (rows beyond the output rows are 0)."""
        Mt = np.zeros((self.size, self.feat_stop - self.feat_start), dtype=bool)
        r = self.rows_stop - self.rows_start
        Mt[:r] = M[self.rows_start:self.rows_stop, self.feat_start:self.feat_stop]
        return Mt

    def job(self, H: np.ndarray, M: np.ndarray):
        """``(indptr, indices, H_tile, M_tile)`` of this tile as a square job."""
        return self.indptr, self.indices, self.features(H), self.mask(M)


def _rows_too_long(indptr: np.ndarray, indices: np.ndarray, config: SSpmmConfig) -> np.ndarray:
    """Rows that no tile can hold: more entries than ``max_edges`` or more distinct
    neighbours than ``max_nodes`` (duplicates share one feature row)."""
    deg = np.diff(indptr)
    too_long = deg > config.max_edges
    for v in np.nonzero((deg > config.max_nodes) & ~too_long)[0]:
        too_long[v] = np.unique(indices[indptr[v]:indptr[v + 1]]).size > config.max_nodes
    return np.nonzero(too_long)[0]


def plan_tiles(csr: "CSRGraph", n_features: int, config: SSpmmConfig) -> list[Tile]:
    """Cut ``Z = (A H) ⊙ M`` into jobs that fit ``config``'s buffers.

    ``csr`` is a :class:`~moagcn.host.graph.CSRGraph` (only its validated ``indptr``,
    ``indices``, ``n_rows`` and ``n_cols`` are used). A job that fits is one tile holding the
    whole job unchanged. Otherwise rows are grouped greedily into blocks whose edges fit
    ``max_edges`` and whose rows and distinct columns each fit ``max_nodes``; features go in
    chunks of ``max_feature_width``. A single row that alone exceeds a buffer is an error naming
    the row and the parameter.
    """
    indptr, indices = csr.indptr, csr.indices
    n_rows, n_cols = csr.n_rows, csr.n_cols
    blocks: list[tuple[int, int]] = []
    if n_rows <= config.max_nodes and n_cols <= config.max_nodes \
            and indices.size <= config.max_edges:
        blocks.append((0, n_rows))
    else:
        big = _rows_too_long(indptr, indices, config)
        if big.size:
            v = int(big[0])
            raise UserError(f"row {v} has {int(indptr[v + 1] - indptr[v])} neighbours but one "
                            f"accelerator job holds at most max_edges={config.max_edges} "
                            f"entries and max_nodes={config.max_nodes} distinct feature rows; "
                            "use a larger configuration (--param max_edges=..., max_nodes=...)")
        start = 0
        while start < n_rows:
            stop = start
            seen = np.zeros(n_cols, dtype=bool)
            n_seen = edges = 0
            while stop < n_rows:
                cols = indices[indptr[stop]:indptr[stop + 1]]
                new = np.unique(cols[~seen[cols]])
                if (stop - start + 1 > config.max_nodes or edges + cols.size > config.max_edges
                        or n_seen + new.size > config.max_nodes):
                    break
                seen[new] = True
                n_seen += new.size
                edges += cols.size
                stop += 1
            blocks.append((start, stop))
            start = stop
    width = config.max_feature_width
    chunks = [(f, min(n_features, f + width)) for f in range(0, n_features, width)] or [(0, 0)]
    tiles = []
    for r0, r1 in blocks:
        lo, hi = indptr[r0], indptr[r1]
        cols = np.unique(indices[lo:hi])
        if r0 == 0 and r1 == n_rows and n_rows == n_cols:
            cols = np.arange(n_cols, dtype=np.int64)  # the whole graph: no renumbering
        local = np.searchsorted(cols, indices[lo:hi])
        size = max(r1 - r0, cols.size, 1)
        tile_indptr = np.full(size + 1, hi - lo, dtype=np.int64)
        tile_indptr[:r1 - r0 + 1] = indptr[r0:r1 + 1] - lo
        for f0, f1 in chunks:
            tiles.append(Tile(r0, r1, f0, f1, cols, tile_indptr, local))
    return tiles
