"""Bit-exact golden model of the S-SpMM accelerator: ``Z = (A H) ⊙ M``.

Accumulation order (what the hardware does, and what this model reproduces):

- every output element ``Z[v, f]`` with ``M[v, f] = 1`` is one sequential binary32 sum that
  starts from ``+0`` and adds ``H[u, f]`` for the neighbours ``u`` of row ``v`` in ascending
  column order (equal columns in stored order), rounding to nearest even after every addition;
- masked elements and rows without neighbours are ``+0``;
- a NaN result is the canonical quiet NaN ``0x7FC00000`` (the adders' convention).

The driver sorts each row before loading the index buffer, so that tiling a job never changes
this order. Against a float64 reference the result lies within the usual bound of a sequential
sum, ``|Z - Z64| <= (deg - 1) * u * sum |H|`` with ``u = 2^-24`` (plus the final rounding).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from moagcn.core.counters import work_adds  # noqa: F401 (the one definition, re-exported)
from moagcn.core.graph import degrees, sort_rows

from .fp32 import CANONICAL_NAN, as_float


def normalise_mask(mask, shape) -> np.ndarray:
    """The output mask as a bool array of ``shape`` (``None``: all ones)."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    return np.asarray(mask).astype(bool, copy=False)


def sspmm(indptr, indices, H, mask=None) -> np.ndarray:
    """Bit-exact ``Z = (A H) ⊙ M`` (float32, N x F); see the module docstring for the order."""
    indptr = np.asarray(indptr, dtype=np.int64)
    H = np.ascontiguousarray(H, dtype=np.float32)
    n = indptr.size - 1
    mask = normalise_mask(mask, (n, H.shape[1]))
    cols = sort_rows(indptr, indices)
    # scipy's CSR x dense kernel (csr_matvecs) computes each output row as y = +0, then
    # y += 1.0 * H[u] for the row's stored entries in order: with the columns sorted (stably)
    # that is exactly the sequential binary32 sum above (1.0 * x is exact, so a fused
    # multiply-add rounds like the plain add). tests/sim/test_sspmm_golden.py checks this
    # against a plain Python loop on subnormals, infinities, NaNs and cancellation.
    A = sp.csr_matrix((np.ones(cols.size, dtype=np.float32), cols, indptr),
                      shape=(n, H.shape[0]))
    with np.errstate(all="ignore"):
        acc = np.asarray(A @ H, dtype=np.float32).reshape(n, H.shape[1])
    acc[~mask] = 0.0                      # masked elements are +0 (never inf * 0 = NaN)
    nan = np.isnan(acc)
    if nan.any():
        acc[nan] = as_float(CANONICAL_NAN)
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
