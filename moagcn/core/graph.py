"""The graph type every layer of moagcn shares: a validated CSR structure.

A graph (or a sparse adjacency) is ``indptr`` (N + 1 non-decreasing integers starting at 0) and
``indices`` (``indptr[-1]`` column ids in ``[0, n_cols)``). Row ``v`` lists the neighbours that
are summed into output row ``v`` (``Z = A H``); an entry stored twice counts twice. Edge weights
never reach the S-SpMM accelerator: degree normalisation is a scaling of rows before and after
the sparse product (see ``docs/runtime.md``), so a graph here carries structure only. Errors name
the array, the position and the fix.

Node permutations follow scipy's convention: ``perm[k]`` is the old id of the node placed at
position ``k``; :func:`inverse_permutation` gives ``pos[old_id]``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from moagcn.errors import UserError


def validate_csr(indptr, indices, n_cols: int | None = None, what: str = "graph",
                 columns: bool = True):
    """Check a CSR structure and return ``(indptr, indices)`` as new read-only int64 arrays
    (read-only so that what is computed from them, tile plans and long-row pieces, can be
    remembered for them: :class:`~moagcn.core.memo.ArrayMemo`).

    ``n_cols`` defaults to the row count (a square adjacency). ``columns=False`` checks the
    arrays and row pointers only, for a caller that learns the column count later.
    """
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.size < 1:
        raise UserError(f"{what}: indptr must be a 1-D array of N + 1 row pointers, "
                        f"got shape {indptr.shape}")
    if indices.ndim != 1:
        raise UserError(f"{what}: indices must be a 1-D array, got shape {indices.shape}")
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise UserError(f"{what}: {name} has dtype {arr.dtype}; expected integers")
    indptr = indptr.astype(np.int64)
    indices = indices.astype(np.int64)
    n_rows = indptr.size - 1
    n_cols = n_rows if n_cols is None else n_cols
    if indptr[0] != 0:
        raise UserError(f"{what}: indptr[0] = {indptr[0]}; a CSR row pointer array starts at 0")
    if indptr.min() < 0:
        v = int(np.argmax(indptr < 0))
        raise UserError(f"{what}: indptr[{v}] = {indptr[v]} is negative; row pointers are "
                        "offsets into indices (0..len(indices))")
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        v = int(np.argmax(steps < 0))
        raise UserError(f"{what}: indptr is not non-decreasing: indptr[{v}] = {indptr[v]} > "
                        f"indptr[{v + 1}] = {indptr[v + 1]}")
    if indptr[-1] != indices.size:
        raise UserError(f"{what}: indptr[-1] = {indptr[-1]} but indices has {indices.size} "
                        "entries; they must match")
    if columns and indices.size:
        bad = np.nonzero((indices < 0) | (indices >= n_cols))[0]
        if bad.size:
            k = int(bad[0])
            raise UserError(f"{what}: indices[{k}] = {indices[k]} is out of range for "
                            f"{n_cols} nodes (valid: 0..{n_cols - 1})")
    indptr.flags.writeable = indices.flags.writeable = False
    return indptr, indices


def degrees(indptr) -> np.ndarray:
    """Stored entries per row."""
    return np.diff(np.asarray(indptr, dtype=np.int64))


def permute_rows(indptr, indices, order) -> tuple[np.ndarray, np.ndarray]:
    """The CSR whose row ``i`` is row ``order[i]`` of ``(indptr, indices)`` (each row's
    entries in their stored order)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    deg = np.diff(indptr)[order]
    new_ptr = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(deg, out=new_ptr[1:])
    # entry j of the new CSR: its row's old start plus its place in the row
    starts = np.repeat(indptr[order] - new_ptr[:-1], deg)
    gather = starts + np.arange(int(new_ptr[-1]), dtype=np.int64)
    indices = np.asarray(indices)
    if indices.size == 0 and indices.dtype.kind not in "iu":
        indices = indices.astype(np.int64)          # an empty list comes in as floats
    return new_ptr, indices[gather]


def row_sort_order(indptr, indices) -> np.ndarray:
    """The permutation of the entries that sorts each row's ids ascending, stably (equal ids
    of a row in stored order): ``indices[order]`` has sorted rows, and the entries' other
    arrays (edge weights) follow with ``[order]``."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    if _rows_sorted(indptr, indices):
        return np.arange(indices.size, dtype=np.int64)
    return _sort_order(indptr, indices)


def _rows_sorted(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Whether every row's ids are ascending already (every descent at a row start)."""
    descents = np.flatnonzero(np.diff(indices) < 0) + 1
    if descents.size == 0:
        return True
    starts = np.zeros(indices.size + 1, dtype=bool)
    starts[indptr] = True
    return bool(starts[descents].all())


def _sort_order(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """:func:`row_sort_order` of rows not all sorted."""
    span = int(indices.max(initial=-1)) + 1
    if span > 4 * indices.size + 4096:
        # few entries among many ids: a comparison sort of (row, id) keys, not a count per id
        rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
        return np.argsort(rows * span + indices, kind="stable")
    # a counting sort: to columns and back (scipy's CSR <-> CSC conversions move each entry
    # once, in stored order, and never sum duplicates), the positions riding along as values
    a = sp.csr_matrix((np.arange(indices.size, dtype=np.int64), indices, indptr),
                      shape=(indptr.size - 1, max(span, 1)))
    return a.tocsc().tocsr().data


def sort_rows(indptr, indices) -> np.ndarray:
    """``indices`` with each row sorted ascending (stable: equal ids keep their order)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    if _rows_sorted(indptr, indices):
        return indices.copy()
    return indices[_sort_order(indptr, indices)]


class CSRGraph:
    """A validated binary sparse matrix in CSR form (usually a square adjacency).

    Parameters
    ----------
    indptr, indices : array-like of int
        Row pointers (``n_rows + 1``, non-decreasing, starting at 0) and column ids.
    n_cols : int, optional
        Number of columns; defaults to the number of rows (a graph on ``n_rows`` nodes).
    what : str
        Name used in error messages (e.g. the file the graph came from).

    Members
    -------
    indptr, indices : numpy.ndarray (int64, read-only)
    n_rows, n_cols, nnz : int

    Raises
    ------
    UserError
        For bad shapes, non-monotonic row pointers or out-of-range column ids, with the position.
    """

    __slots__ = ("indptr", "indices", "n_rows", "n_cols", "_cache")

    def __init__(self, indptr, indices, n_cols: int | None = None, what: str = "graph"):
        n_rows = np.asarray(indptr).size - 1
        if n_cols is not None and n_cols < 0:
            raise UserError(f"{what}: n_cols = {n_cols} must be >= 0")
        indptr, indices = validate_csr(indptr, indices, n_cols=n_cols, what=what)
        self.indptr = indptr
        self.indices = indices
        self.n_rows = int(n_rows)
        self.n_cols = int(n_rows if n_cols is None else n_cols)
        self._cache: dict = {}

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_edges(cls, src, dst, n_nodes: int, n_cols: int | None = None, *,
                   dedupe: bool = True, what: str = "graph") -> "CSRGraph":
        """Graph with an entry ``(src[k], dst[k])`` per edge; row = ``src``, column = ``dst``.

        ``dedupe`` drops repeated edges (the accelerator would otherwise add a neighbour twice).
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise UserError(f"{what}: {src.size} source ids but {dst.size} destination ids; "
                            "give one of each per edge")
        n_cols = n_nodes if n_cols is None else n_cols
        if src.size and (src.min() < 0 or src.max() >= n_nodes):
            k = int(np.argmax((src < 0) | (src >= n_nodes)))
            raise UserError(f"{what}: source id src[{k}] = {src[k]} is out of range for "
                            f"{n_nodes} nodes")
        order = np.lexsort((dst, src))
        src, dst = src[order], dst[order]
        if dedupe and src.size:
            keep = np.ones(src.size, dtype=bool)
            keep[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
            src, dst = src[keep], dst[keep]
        indptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n_nodes), out=indptr[1:])
        return cls(indptr, dst, n_cols=n_cols, what=what)

    @classmethod
    def from_scipy(cls, mat, what: str = "graph") -> "CSRGraph":
        """Structure of a scipy sparse matrix (explicit zeros are dropped, values ignored)."""
        m = sp.csr_matrix(mat)
        m.eliminate_zeros()
        m.sort_indices()
        return cls(m.indptr, m.indices, n_cols=m.shape[1], what=what)

    # -- basic properties ------------------------------------------------------------------------

    @property
    def nnz(self) -> int:
        """Stored entries (edges, self loops included)."""
        return int(self.indices.size)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_cols)

    @property
    def n_nodes(self) -> int:
        """Node count of a square graph (an error for a rectangular block)."""
        if self.n_rows != self.n_cols:
            raise UserError(f"a {self.n_rows} x {self.n_cols} block is not a graph on one node "
                            "set; this operation needs a square adjacency")
        return self.n_rows

    def degrees(self) -> np.ndarray:
        """Entries per row (out-degree; equal to in-degree for a symmetric graph)."""
        return degrees(self.indptr)

    def row_ids(self) -> np.ndarray:
        """The row of every stored entry (``nnz`` ints, the COO row array)."""
        if "rows" not in self._cache:
            self._cache["rows"] = np.repeat(np.arange(self.n_rows, dtype=np.int64),
                                            self.degrees())
        return self._cache["rows"]

    def neighbours(self, v: int) -> np.ndarray:
        """Column ids of row ``v``."""
        return self.indices[self.indptr[v]:self.indptr[v + 1]]

    def to_scipy(self, dtype=np.float32) -> sp.csr_matrix:
        """The matrix with ones at the stored positions (duplicates summed)."""
        data = np.ones(self.nnz, dtype=dtype)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=self.shape)

    def sorted(self) -> "CSRGraph":
        """The same graph with every row's column ids ascending (the accelerator's order)."""
        return CSRGraph(self.indptr, sort_rows(self.indptr, self.indices), n_cols=self.n_cols)

    def __eq__(self, other) -> bool:
        if not isinstance(other, CSRGraph) or self.shape != other.shape:
            return False
        return (np.array_equal(self.indptr, other.indptr)
                and np.array_equal(sort_rows(self.indptr, self.indices),
                                   sort_rows(other.indptr, other.indices)))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"CSRGraph({self.n_rows} x {self.n_cols}, nnz={self.nnz})"

    # -- derived graphs --------------------------------------------------------------------------

    def transpose(self) -> "CSRGraph":
        """Aᵀ (cached): the adjacency of the backward aggregation."""
        if "T" not in self._cache:
            t = CSRGraph.from_edges(self.indices, self.row_ids(), self.n_cols, self.n_rows,
                                    dedupe=False)
            t._cache["T"] = self
            self._cache["T"] = t
        return self._cache["T"]

    def is_symmetric(self) -> bool:
        """True if the structure equals its transpose."""
        return self.n_rows == self.n_cols and self == self.transpose()

    def symmetrized(self) -> "CSRGraph":
        """A + Aᵀ structure (duplicates merged)."""
        src = np.concatenate([self.row_ids(), self.indices])
        dst = np.concatenate([self.indices, self.row_ids()])
        return CSRGraph.from_edges(src, dst, self.n_nodes)

    def has_self_loops(self) -> np.ndarray:
        """Per node: whether its row lists itself."""
        n = self.n_nodes
        out = np.zeros(n, dtype=bool)
        out[self.row_ids()[self.row_ids() == self.indices]] = True
        return out

    def with_self_loops(self) -> "CSRGraph":
        """A + I on the structure: a self loop added to every node that lacks one.

        Nodes that already have a loop keep exactly one copy, so every diagonal entry is 1.
        """
        rows = self.row_ids()
        loop = rows == self.indices
        keep = ~loop
        if loop.any():  # the first stored loop of each node stays, repeated loops go
            first = np.nonzero(loop)[0]
            first = first[np.unique(rows[first], return_index=True)[1]]
            keep[first] = True
        missing = np.nonzero(~self.has_self_loops())[0]
        src = np.concatenate([rows[keep], missing])
        dst = np.concatenate([self.indices[keep], missing])
        return CSRGraph.from_edges(src, dst, self.n_nodes, dedupe=False)

    def without_self_loops(self) -> "CSRGraph":
        """The graph with every diagonal entry removed."""
        keep = self.row_ids() != self.indices
        return CSRGraph.from_edges(self.row_ids()[keep], self.indices[keep], self.n_nodes,
                                   dedupe=False)

    def permute(self, perm) -> "CSRGraph":
        """Relabel nodes: new node ``k`` is old node ``perm[k]`` (rows and columns)."""
        perm = check_permutation(perm, self.n_nodes)
        pos = inverse_permutation(perm)
        return CSRGraph.from_edges(pos[self.row_ids()], pos[self.indices], self.n_nodes,
                                   dedupe=False)

    def row_entries(self, rows) -> np.ndarray:
        """Positions in ``indices`` of the entries of ``rows``, row by row in stored order (the
        entries a :meth:`block` of those rows keeps, in its order)."""
        rows = np.asarray(rows, dtype=np.int64)
        return _row_gather(self.indptr, rows, self.degrees()[rows])

    def block(self, rows, cols) -> "CSRGraph":
        """The submatrix ``A[rows][:, cols]`` with columns renumbered to positions in ``cols``.

        ``cols`` must list every column the chosen rows use; keeping it ascending keeps each
        row's accumulation order (ascending global column id) unchanged.
        """
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        local = np.full(self.n_cols, -1, dtype=np.int64)
        local[cols] = np.arange(cols.size)
        deg = self.degrees()[rows]
        indptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        take = _row_gather(self.indptr, rows, deg)
        idx = local[self.indices[take]]
        if idx.size and idx.min() < 0:
            k = int(np.argmax(idx < 0))
            raise UserError(f"block: column {self.indices[take][k]} is used by the chosen rows "
                            "but missing from cols; pass every neighbour column")
        return CSRGraph(indptr, idx, n_cols=cols.size)

    # -- ordering --------------------------------------------------------------------------------

    def bandwidth(self, perm=None) -> int:
        """Graph bandwidth ``b = max over edges (u, v) of |p_u - p_v|`` (MixGCN Sec. 3.2.2).

        ``perm`` is a processing order (``perm[k]`` = node at position ``k``); default: identity.
        Self loops do not count; a graph without edges has bandwidth 0.
        """
        rows, cols = self.row_ids(), self.indices
        if perm is not None:
            pos = inverse_permutation(check_permutation(perm, self.n_nodes))
            rows, cols = pos[rows], pos[cols]
        return int(np.abs(rows - cols).max()) if rows.size else 0

    def rcm_order(self) -> np.ndarray:
        """Reverse Cuthill-McKee order (scipy) of the symmetrised structure: a small bandwidth."""
        sym = self if self.is_symmetric() else self.symmetrized()
        return np.asarray(reverse_cuthill_mckee(sym.to_scipy(), symmetric_mode=True),
                          dtype=np.int64)


def _row_gather(indptr: np.ndarray, rows: np.ndarray, deg: np.ndarray) -> np.ndarray:
    """Positions in ``indices`` of the entries of ``rows`` (in row order)."""
    if not deg.sum():
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(indptr[rows], deg)
    offsets = np.arange(int(deg.sum())) - np.repeat(np.cumsum(deg) - deg, deg)
    return starts + offsets


def check_permutation(perm, n: int, what: str = "permutation") -> np.ndarray:
    """``perm`` as int64 after checking it is a permutation of ``0..n-1``."""
    perm = np.asarray(perm)
    if perm.shape != (n,) or (perm.size and not np.issubdtype(perm.dtype, np.integer)):
        raise UserError(f"{what}: expected {n} integer node ids, got shape {perm.shape} "
                        f"dtype {perm.dtype}")
    perm = perm.astype(np.int64)
    seen = np.zeros(n, dtype=np.int64)
    if n and (perm.min() < 0 or perm.max() >= n):
        raise UserError(f"{what}: ids must be in 0..{n - 1}, found {perm.min()}..{perm.max()}")
    np.add.at(seen, perm, 1)
    if n and seen.max() > 1:
        raise UserError(f"{what}: node {int(np.argmax(seen > 1))} appears twice; each node "
                        "must appear exactly once")
    return perm


def inverse_permutation(perm) -> np.ndarray:
    """``pos`` with ``pos[perm[k]] = k`` (the position of every old node id)."""
    perm = np.asarray(perm, dtype=np.int64)
    pos = np.empty_like(perm)
    pos[perm] = np.arange(perm.size, dtype=np.int64)
    return pos
