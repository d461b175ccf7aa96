"""Graph structures for benches, experiments and tests: the one set of generators.

Each returns a CSR (``indptr``, ``indices``) from a seed, numpy only, so every layer can use them
(the labelled datasets built on them, with features and splits, are
:mod:`moagcn.host.graphs.generators`):

- :func:`synth_graph`: power-law degrees (Chung-Lu style, a truncated law of exponent
  ``gamma``), hubs both long rows and popular columns, duplicates and self loops as in crawled
  graphs: the MixGCN paper's dataset stand-ins;
- :func:`rmat_edges`: the R-MAT recursive quadrant model (Chakrabarti et al.);
- :func:`pareto_graph`: Pareto row lengths, uniform columns (the S-SpMM bench's jobs);
- :func:`power_law_graph`: Pareto in-degrees and a skewed choice of sources, so that a few nodes
  feed many others (the HyScale benches' graphs).
"""

from __future__ import annotations

import numpy as np

from moagcn.errors import UserError

#: exponent of the degree law (social and citation graphs measure about 2 to 2.5)
GAMMA = 2.1


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


def rmat_edges(scale: int, edge_factor: int, a: float, b: float, c: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of ``edge_factor * 2**scale`` R-MAT edges on ``2**scale`` nodes, each
    picking, bit by bit from the top, one of the four quadrants with probabilities ``a, b, c,
    1 - a - b - c``; self loops dropped and ids shuffled (draws from ``rng``)."""
    n = 2 ** scale
    m = edge_factor * n
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    cum = np.cumsum([a, b, c])
    for level in range(scale):
        u = rng.random(m)
        q = np.searchsorted(cum, u, side="right")  # 0: a, 1: b, 2: c, 3: d
        bit = 1 << (scale - 1 - level)
        src += np.where(q >= 2, bit, 0)
        dst += np.where(q % 2 == 1, bit, 0)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    pos = rng.permutation(n)  # new id of old node i
    return pos[src], pos[dst]


def pareto_graph(n: int, avg_degree: float, seed: int):
    """CSR of a graph whose degrees follow a Pareto law scaled to ``avg_degree``."""
    rng = np.random.default_rng(seed)
    raw = rng.pareto(1.5, n) + 1.0
    deg = np.maximum(np.round(raw / raw.mean() * avg_degree), 0).astype(np.int64)
    deg = np.minimum(deg, n)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, n, int(indptr[-1]))
    return indptr, indices


def power_law_graph(n: int, seed: int, avg: float = 6.0):
    """(indptr, indices): a directed graph (row v lists its in-neighbours) with Pareto in-degrees
    and a skewed choice of sources, so that a few nodes feed many others."""
    rng = np.random.default_rng(seed)
    deg = np.minimum((rng.pareto(1.2, n) * avg / 2).astype(int) + 1, n - 1)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    popularity = 1.0 / np.arange(1, n + 1) ** 0.8
    indices = rng.choice(n, size=int(indptr[-1]), p=popularity / popularity.sum())
    return indptr, indices
