"""What the gather-sum unit computes, bit for bit: ``Y[v] = (((+0 + X[u0]) + X[u1]) + ...)`` in
binary32, the row's entries in stored order."""

from __future__ import annotations

import numpy as np


def gather_sum(indptr, indices, X) -> np.ndarray:
    """``Y[v] = sum of X[u]`` over the stored entries of row ``v``, added one at a time in stored
    order to a float32 accumulator that starts at +0 (vectorised over the rows: the k-th
    entries of every row are added in step k)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    X = np.asarray(X, dtype=np.float32)
    n = indptr.size - 1
    Y = np.zeros((n, X.shape[1]), dtype=np.float32)
    deg = np.diff(indptr)
    for k in range(int(deg.max()) if n else 0):
        rows = np.flatnonzero(deg > k)
        Y[rows] = Y[rows] + X[indices[indptr[rows] + k]]
    return Y
