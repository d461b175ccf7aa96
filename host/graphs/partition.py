"""Splitting a graph's nodes among workers: equal or weighted id ranges, RCM runs, k-way
refinement and METIS, and the quality of a split (edge cut, halo sizes).

Used by every parallel runtime and by vGNN's non-uniform splits; pymetis is imported only when
``metis`` is asked for.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.names import PARTITION_METHODS  # noqa: F401 (the vocabulary; re-exported)
from moagcn.errors import UserError
from moagcn.host.graphs.ops import CSRGraph, contiguous_ranges


def weighted_ranges(n: int, shares) -> list[tuple[int, int]]:
    """``n`` items cut into consecutive ranges of sizes proportional to ``shares`` (largest
    remainder rounding; a range may be empty only if its share rounds to nothing)."""
    w = np.asarray(shares, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or np.any(w < 0) or w.sum() <= 0:
        raise UserError(f"work shares {list(shares)} must be non-negative and not all zero")
    exact = n * w / w.sum()
    sizes = np.floor(exact).astype(np.int64)
    rest = n - int(sizes.sum())
    if rest:
        sizes[np.argsort(-(exact - sizes), kind="stable")[:rest]] += 1
    ends = np.cumsum(sizes)
    return [(int(e - s), int(e)) for s, e in zip(sizes, ends)]


def work_ranges(work, shares) -> list[tuple[int, int]]:
    """Consecutive ranges of items (with ``work`` each, in order) whose total work is as close
    as the item boundaries allow to ``shares`` of the whole (each cut at the nearest prefix
    sum)."""
    w = np.asarray(shares, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or np.any(w < 0) or w.sum() <= 0:
        raise UserError(f"work shares {list(shares)} must be non-negative and not all zero")
    prefix = np.r_[0, np.cumsum(np.asarray(work, dtype=np.float64))]
    goals = np.cumsum(w / w.sum())[:-1] * prefix[-1]
    right = np.clip(np.searchsorted(prefix, goals), 1, prefix.size - 1)
    cuts = np.where(goals - prefix[right - 1] <= prefix[right] - goals, right - 1, right)
    cuts = np.maximum.accumulate(np.r_[0, cuts, prefix.size - 1])
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]


def partition_nodes(graph: CSRGraph, parts: int, method: str = "contiguous",
                    shares=None) -> list[np.ndarray]:
    """Split the nodes into ``parts`` sets of (almost) equal size, or with ``shares`` into sets
    whose aggregation work -- ``Σ (deg(v) + 1)`` over their rows -- is proportional to the
    shares (``contiguous``, ``rcm`` and ``metis``; ``kway`` balances equal parts only).

    ``contiguous``: id ranges; ``rcm``: consecutive runs of the reverse Cuthill-McKee order, so
    that neighbours tend to share a part; ``kway``: the ``rcm`` split refined by greedy k-way
    boundary moves (:func:`refine_kway`, the refinement step of METIS without its coarsening);
    ``metis``: multilevel k-way METIS (pymetis) on the symmetrised graph without self loops
    (:func:`metis_owner`). Each set is sorted.
    """
    n = graph.n_nodes
    if shares is not None and method == "kway":
        raise UserError("--partition kway balances equal parts only; use --partition metis "
                        "(target part weights) or contiguous/rcm with a non-uniform --balance")
    work = None if shares is None else graph.degrees().astype(np.int64) + 1
    if method == "metis":
        owner = metis_owner(graph, parts, weights=work, targets=shares)
        return [np.nonzero(owner == j)[0] for j in range(parts)]
    if method == "contiguous":
        order = np.arange(n)
    elif method in ("rcm", "kway"):
        order = graph.rcm_order()
    else:
        raise UserError(f"unknown partition method {method!r}; choose one of "
                        f"{', '.join(PARTITION_METHODS)}")
    ranges = contiguous_ranges(n, parts) if shares is None else work_ranges(work[order], shares)
    sets = [np.sort(order[a:b]) for a, b in ranges]
    if method == "kway" and parts > 1:
        owner = np.empty(n, dtype=np.int64)
        for j, p in enumerate(sets):
            owner[p] = j
        owner = refine_kway(graph.symmetrized(), owner, parts)
        sets = [np.nonzero(owner == j)[0] for j in range(parts)]
    return sets


def metis_owner(graph: CSRGraph, parts: int, weights=None, targets=None) -> np.ndarray:
    """The part of every node from METIS's multilevel k-way partitioner (pymetis).

    METIS needs a symmetric graph without self loops, so it partitions ``A + Aᵀ`` with the
    diagonal removed; ``weights`` (one non-negative int per node) balance a node load other than
    the node count; ``targets`` (one fraction per part) are METIS's target part weights
    (``tpwgts``). Deterministic: METIS runs with its fixed default seed.
    """
    n = graph.n_nodes
    if parts < 1:
        raise UserError(f"cannot split {n} nodes into {parts} parts; use at least 1 part")
    if parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    try:
        import pymetis
    except ImportError:
        raise UserError("--partition metis needs pymetis (a dependency of moagcn: reinstall "
                        "with `pip install -e .`, or `make test`)") from None
    sym = graph.symmetrized().without_self_loops()
    if sym.nnz == 0:  # no edges: METIS has nothing to cut; split the ids evenly
        owner = np.empty(n, dtype=np.int64)
        ranges = contiguous_ranges(n, parts) if targets is None else \
            weighted_ranges(n, targets)
        for j, (a, b) in enumerate(ranges):
            owner[a:b] = j
        return owner
    kw = {}
    if targets is not None:
        t = np.asarray(targets, dtype=np.float64)
        kw["tpwgts"] = (t / t.sum()).tolist()
    if weights is not None:
        kw["vweights"] = np.asarray(weights, dtype=np.int64).tolist()
    adjacency = pymetis.CSRAdjacency(sym.indptr.tolist(), sym.indices.tolist())
    _, membership = pymetis.part_graph(parts, adjacency, **kw)
    return np.asarray(membership, dtype=np.int64)


def partition_quality(graph: CSRGraph, parts: list[np.ndarray]) -> dict:
    """Edge cut (stored entries between parts, both directions of an edge counted) and balance
    (largest part over the mean part) of a node partition."""
    owner = np.empty(graph.n_nodes, dtype=np.int64)
    for j, p in enumerate(parts):
        owner[p] = j
    sizes = [int(p.size) for p in parts]
    return {"edge_cut": edge_cut(graph, owner), "entries": graph.nnz,
            "cut_fraction": edge_cut(graph, owner) / max(graph.nnz, 1),
            "part_sizes": sizes, "balance": imbalance(sizes)}


def edge_cut(graph: CSRGraph, owner: np.ndarray) -> int:
    """Stored entries whose two ends lie in different parts."""
    return int(np.count_nonzero(owner[graph.row_ids()] != owner[graph.indices]))


def refine_kway(graph: CSRGraph, owner: np.ndarray, parts: int, imbalance: float = 0.03,
                passes: int = 10) -> np.ndarray:
    """Greedy k-way refinement of a partition of a symmetric graph.

    Each pass visits the boundary nodes in order of decreasing gain and moves a node to the
    neighbouring part that holds most of its neighbours when that strictly lowers the edge cut
    and keeps every part within ``(1 +- imbalance) n / parts`` nodes. Stops after ``passes``
    passes or a pass without a move; the cut never grows.
    """
    owner = np.asarray(owner, dtype=np.int64).copy()
    n = owner.size
    indptr, indices = graph.indptr, graph.indices
    size = np.bincount(owner, minlength=parts)
    hi = int(np.floor((1 + imbalance) * n / parts))
    lo = int(np.ceil((1 - imbalance) * n / parts))
    for _ in range(passes):
        rows = graph.row_ids()
        # links[v, p]: neighbours of v in part p (dense: parts is small)
        links = np.zeros((n, parts), dtype=np.int64)
        np.add.at(links, (rows, owner[indices]), 1)
        internal = links[np.arange(n), owner]
        best = links.copy()
        best[np.arange(n), owner] = -1
        target = best.argmax(axis=1)
        gain = best.max(axis=1) - internal
        moved = 0
        for v in np.argsort(-gain, kind="stable"):
            if gain[v] <= 0:
                break
            a = owner[v]
            nbrs = indices[indptr[v]:indptr[v + 1]]
            counts = np.bincount(owner[nbrs], minlength=parts)
            counts_own = counts[a]
            counts[a] = -1
            b = int(counts.argmax())
            if counts[b] - counts_own <= 0 or size[b] + 1 > hi or size[a] - 1 < lo:
                continue
            owner[v] = b
            size[a] -= 1
            size[b] += 1
            moved += 1
        if moved == 0:
            break
    return owner


def imbalance(values) -> float:
    """max / mean of per-worker loads (1.0 = perfectly balanced)."""
    v = np.asarray(list(values), dtype=np.float64)
    return float(v.max() / v.mean()) if v.size and v.mean() > 0 else 1.0
