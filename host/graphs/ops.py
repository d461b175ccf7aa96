"""Graphs on the host: degree scaling, feature normalisation, node splits.

The graph type itself (:class:`~moagcn.core.graph.CSRGraph`, with self loops, RCM order and
bandwidth) lives in :mod:`moagcn.core.graph`, below every package; it is re-exported here.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.graph import (CSRGraph, check_permutation, degrees,  # noqa: F401 (re-exported)
                               inverse_permutation, sort_rows, validate_csr)
from moagcn.errors import UserError


def gcn_scaling(graph: CSRGraph) -> tuple[CSRGraph, np.ndarray]:
    """``(A + I, d^-1/2)`` for GCN: ``Â = D^-1/2 (A + I) D^-1/2`` as row scalings.

    ``d`` is the row degree of ``A + I`` (at least 1, so the scale is finite).
    """
    looped = graph.with_self_loops()
    scale = (1.0 / np.sqrt(looped.degrees().astype(np.float64))).astype(np.float32)
    return looped, scale


def mean_scaling(graph: CSRGraph) -> np.ndarray:
    """``1 / deg`` per row (0 for a row without neighbours): mean aggregation as a row scaling."""
    deg = graph.degrees().astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.where(deg > 0, 1.0 / np.maximum(deg, 1), 0.0).astype(np.float32)


def row_normalize(features) -> np.ndarray:
    """Features divided by their row sums (Kipf & Welling's preprocessing); zero rows stay 0."""
    X = np.asarray(features, dtype=np.float32)
    if X.ndim != 2:
        raise UserError(f"features must be a 2-D array (nodes x features), got shape {X.shape}")
    s = X.sum(axis=1, keepdims=True, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(s != 0, X / s, 0.0)
    return out.astype(np.float32)


def contiguous_ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """``[floor(n i / parts), floor(n (i+1) / parts))`` for each part (MixGCN Alg. 2's split)."""
    if parts < 1:
        raise UserError(f"cannot split {n} items into {parts} parts; use at least 1 part")
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]
