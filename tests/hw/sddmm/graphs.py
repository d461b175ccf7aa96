"""Held-out-style SDDMM patterns for the tests and their plain-Python reference.

The reference shares no code with the design: a loop over (entry, head, chunk) in float32
scalars, the chunk's products summed by a recursive pairwise function, from +0.
"""

from __future__ import annotations

import numpy as np

NAN_BITS = 0x7FC00000


def pairwise(values: list) -> np.float32:
    """Halves summed recursively: the left half's sum plus the right half's."""
    if len(values) == 1:
        return values[0]
    half = len(values) // 2
    return np.float32(pairwise(values[:half]) + pairwise(values[half:]))


def loop_reference(indptr, indices, Q, K, heads, lanes, mask=None) -> np.ndarray:
    """S (entries x heads) entry by entry, head by head, chunk by chunk."""
    F = Q.shape[1]
    D = F // heads
    chunks = max((D + lanes - 1) // lanes, 1)
    S = np.zeros((len(indices), heads), dtype=np.float32)
    with np.errstate(all="ignore"):
        for v in range(len(indptr) - 1):
            for e in range(indptr[v], indptr[v + 1]):
                u = indices[e]
                for h in range(heads):
                    if mask is not None and not mask[e][h]:
                        continue
                    acc = np.float32(0.0)
                    for c in range(chunks):
                        products = []
                        for k in range(lanes):
                            f = c * lanes + k
                            if f < D:
                                products.append(np.float32(Q[v, h * D + f] * K[u, h * D + f]))
                            else:
                                products.append(np.float32(0.0))
                        acc = np.float32(acc + pairwise(products))
                    S[e, h] = acc
    bits = S.view(np.uint32)
    bits[np.isnan(S)] = NAN_BITS
    return S


def awkward_pattern(n_rows: int, n_cols: int, seed: int, hub: int | None = None):
    """Isolated rows, self loops (where the column exists), duplicate entries and a hub row
    of about ``hub`` entries (default n_cols), unsorted columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for v in range(n_rows):
        if v % 7 == 3:
            rows.append([])                                         # isolated
        elif v == 1:
            rows.append(list(rng.integers(0, n_cols, hub or n_cols)))   # hub
        else:
            r = list(rng.integers(0, n_cols, int(rng.integers(1, 5))))
            if v < n_cols:
                r.append(v)                                          # self loop
            if v % 5 == 0:
                r.append(r[0])                                       # duplicate
            rows.append(r)
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    return indptr, np.array([u for r in rows for u in r], dtype=np.int64)


def power_law_pattern(n: int, avg_degree: float, seed: int, alpha: float = 1.2):
    """A power-law graph with hubs: row degrees from a Zipf-like law (a few rows with hundreds
    of entries), columns drawn with the same skew, isolated rows included."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n + 1) ** alpha
    weights = rng.permutation(weights / weights.sum())
    degrees = rng.multinomial(int(avg_degree * n), weights)
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = rng.choice(n, size=int(indptr[-1]), p=weights).astype(np.int64)
    return indptr, indices
