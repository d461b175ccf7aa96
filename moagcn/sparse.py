"""The CSR format every part of moagcn shares, and its validation.

A graph (or a sparse adjacency) is ``indptr`` (N + 1 non-decreasing integers starting at 0) and
``indices`` (``indptr[-1]`` column ids in ``[0, n_cols)``). Row ``v`` lists the neighbours that
are summed into output row ``v``; an entry stored twice counts twice. Errors name the array, the
position and the fix.
"""

from __future__ import annotations

import numpy as np

from .errors import UserError


def validate_csr(indptr, indices, n_cols: int | None = None, what: str = "graph",
                 columns: bool = True):
    """Check a CSR structure and return ``(indptr, indices)`` as int64 arrays.

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
    return indptr, indices


def degrees(indptr) -> np.ndarray:
    """Stored entries per row."""
    return np.diff(np.asarray(indptr, dtype=np.int64))


def sort_rows(indptr, indices) -> np.ndarray:
    """``indices`` with each row sorted ascending (stable: equal ids keep their order)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    order = np.lexsort((indices, rows))  # by row, then by column; lexsort is stable
    return indices[order]
