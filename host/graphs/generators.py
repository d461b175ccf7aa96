"""Synthetic power-law graphs shaped like the MixGCN paper's datasets (its Table 2).

``synth_like(name, scale, seed)`` returns the CSR of a directed graph with ``scale`` times the
dataset's nodes and stored entries (nonzeros of A; an undirected edge is two), so the same
average degree, with power-law degrees (Chung-Lu style):

- every node gets an expected degree drawn from a power law ``p(d) ~ d^-gamma`` (``gamma`` =
  2.1 by default) truncated at the dataset's largest degree (or the node count, if smaller),
  its lower end ``d_min`` found by bisection so that the mean is the dataset's;
- the rows' degrees are a multinomial draw of all entries with those weights (so they sum
  exactly to the entries), and every entry's column is drawn independently with the same
  weights: hubs are both long rows and popular columns, low-degree nodes are the majority,
  duplicates and self loops occur as in crawled graphs, and a few nodes may be isolated.

Nothing is sorted or deduplicated, so the generator runs in time and memory linear in the
entries (int32 indices when the node count allows): a full-size Reddit (233k nodes, 115M
entries) takes about a gigabyte. The largest degrees are approximate public figures of each
dataset; ``--max-degree`` and ``--gamma`` override the shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moagcn.errors import UserError


@dataclass(frozen=True)
class DatasetShape:
    nodes: int
    entries: int
    features: int
    classes: int
    max_degree: int


#: exponent of the degree law (social and citation graphs measure about 2 to 2.5)
GAMMA = 2.1

#: MixGCN Table 2 (nodes, edges, features, classes); the largest degree is an approximate public
#: figure for each dataset (the skew the generator reproduces)
SHAPES = {
    "reddit": DatasetShape(232_965, 114_615_892, 602, 41, 21_657),
    "orkut": DatasetShape(3_072_441, 117_185_083, 320, 20, 33_313),
    "twitter": DatasetShape(41_652_230, 1_468_365_182, 52, 16, 770_155),
    "friendster": DatasetShape(65_608_366, 1_806_067_135, 128, 64, 5_214),
    "papers100m": DatasetShape(111_059_956, 1_615_685_872, 128, 172, 25_000),
}


def _weights(n: int, mean: float, max_degree: float, gamma: float,
             rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """``n`` expected degrees from a power law ``p(d) ~ d^-gamma`` on ``[d_min, max_degree]``
    whose mean is ``mean``; returns them and ``d_min`` (found by bisection)."""
    top = max(min(max_degree, float(n)), mean)
    a = gamma - 1.0

    def truncated_mean(d_min):
        r = d_min / top
        if abs(a - 1.0) < 1e-9:
            return d_min * np.log(1 / r) / (1 - r)
        return d_min * a / (a - 1) * (1 - r ** (a - 1)) / (1 - r ** a)

    lo, hi = 1e-6, top
    for _ in range(100):
        mid = (lo + hi) / 2
        if truncated_mean(mid) < mean:
            lo = mid
        else:
            hi = mid
    d_min = (lo + hi) / 2
    u = rng.random(n)
    r = d_min / top
    w = d_min * (1 - u * (1 - r ** a)) ** (-1 / a)     # inverse CDF of the truncated law
    return w, d_min


def synth_graph(n: int, m: int, max_degree: float, seed: int = 0, gamma: float = GAMMA):
    """(indptr int64, indices int32/int64, d_min) of the generator described above."""
    if n < 1 or m < 0:
        raise UserError(f"a synthetic graph needs at least one node and no negative entry "
                        f"count (got {n} nodes, {m} entries)")
    if gamma <= 1.0:
        raise UserError(f"--gamma {gamma} must be > 1 (a power law's exponent)")
    rng = np.random.default_rng(seed)
    w, d_min = _weights(n, m / n, max_degree, gamma, rng)
    p = w / w.sum()
    deg = rng.multinomial(m, p).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    itype = np.int32 if n < 2 ** 31 else np.int64
    indices = np.empty(m, dtype=itype)
    block = 1 << 22
    for lo in range(0, m, block):                     # bounded temporaries
        hi = min(m, lo + block)
        indices[lo:hi] = np.minimum(np.searchsorted(cdf, rng.random(hi - lo), side="right"),
                                    n - 1)
    return indptr, indices, d_min


def synth_like(name: str, scale: float = 1.0, seed: int = 0, max_degree: float | None = None,
               gamma: float = GAMMA):
    """(indptr, indices, info) of a graph shaped like dataset ``name`` at ``scale``."""
    key = name.lower()
    if key not in SHAPES:
        raise UserError(f"unknown dataset shape {name!r}; choose one of {', '.join(SHAPES)}")
    if not 0 < scale <= 1.0:
        raise UserError(f"--scale {scale} must be in (0, 1]")
    shape = SHAPES[key]
    n = max(2, int(round(shape.nodes * scale)))
    m = int(round(shape.entries * scale))
    top = max_degree if max_degree is not None else shape.max_degree
    indptr, indices, d_min = synth_graph(n, m, top, seed, gamma)
    deg = np.diff(indptr)
    info = {"like": key, "scale": scale, "seed": seed, "nodes": n, "entries": m,
            "gamma": gamma, "d_min": d_min, "max_degree": int(deg.max()) if n else 0,
            "mean_degree": float(m / n), "target_max_degree": float(min(top, n)),
            "isolated_rows": int(np.count_nonzero(deg == 0)),
            "features": shape.features, "classes": shape.classes}
    return indptr, indices, info
