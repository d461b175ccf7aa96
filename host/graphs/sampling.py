"""Neighbour sampling without replacement, deterministic per (seed, layer, node).

Node ``v`` with ``d`` stored entries (edge slots) keeps, at layer ``l`` with fanout ``k < d``,
the slots ``π(0), ..., π(k - 1)`` of a keyed pseudo-random permutation ``π`` of ``[0, d)``: a
four-round Feistel network on the smallest even number of bits covering ``d``, cycle-walked
back into ``[0, d)`` (Black and Rogaway's construction), keyed by ``(seed, l, v)`` through
SplitMix64. Sampling a row costs ``O(k)``, however large its degree, and the sample depends only
on the seed, the layer and the node: one partition's rows sample exactly as the same rows of the
whole graph, and an ego-network sampler that meets a node in many batches draws the same
neighbours each time. Duplicate entries are separate slots (a repeated edge can be drawn as
often as it is stored); self loops are ordinary entries. A row keeps its slots in stored order.

:class:`LayerSampler` is DEAL's shared sampler (Sec. 3.2): it builds the per-row state of a row
range once (degrees, which rows are capped, the Feistel widths, the output layout) and reuses it
for every layer, drawing only the new layer's keys. :func:`sample_rows` samples arbitrary rows
from scratch (what an ego-network sampler does per batch).
"""

from __future__ import annotations

import numpy as np

from moagcn.errors import UserError

from moagcn.host.graphs.ops import CSRGraph

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Steele et al.'s SplitMix64 finaliser, element-wise on uint64 (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def node_keys(seed: int, layer: int, nodes: np.ndarray) -> np.ndarray:
    """The uint64 permutation keys of ``nodes`` at ``layer``."""
    base = splitmix64(np.array([(int(seed) & 0xFFFFFFFF) << 20 | (int(layer) & 0xFFFFF)],
                               dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        return splitmix64(np.asarray(nodes, dtype=np.uint64) * _M2 ^ base)


_ROUNDS = 4


def permute_positions(i: np.ndarray, n: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``π_key(i)`` for each element: a pseudo-random permutation of ``[0, n)`` (per element
    ``n``, ``key``), by a cycle-walking Feistel network. ``i < n`` everywhere."""
    n = np.asarray(n, dtype=np.int64)
    bits = np.maximum(1, np.ceil(np.log2(np.maximum(n, 2))).astype(np.int64))
    half = ((bits + 1) // 2).astype(np.uint64)
    mask = (np.uint64(1) << half) - np.uint64(1)
    x = np.asarray(i, dtype=np.uint64).copy()
    key = np.asarray(key, dtype=np.uint64)
    todo = np.arange(x.size)
    nn = n.astype(np.uint64)
    while todo.size:
        h, m, k = half[todo], mask[todo], key[todo]
        v = x[todo]
        left, right = v >> h, v & m
        for rnd in range(_ROUNDS):
            with np.errstate(over="ignore"):
                f = splitmix64(k + (right << np.uint64(3)) + np.uint64(rnd)) & m
            left, right = right, left ^ f
        x[todo] = (left << h) | right
        out = x[todo] >= nn[todo]
        todo = todo[out]          # cycle walking: apply π again until back inside [0, n)
    return x.astype(np.int64)


def _capped_slots(indptr_rows: np.ndarray, deg: np.ndarray, nodes: np.ndarray, k: int,
                  seed: int, layer: int) -> np.ndarray:
    """Global slots of the ``k`` sampled entries of each row (rows with ``deg > k``), row by
    row, each row's slots in stored order."""
    rep = np.repeat(np.arange(deg.size), k)
    i = np.tile(np.arange(k, dtype=np.int64), deg.size)
    pos = permute_positions(i, deg[rep], node_keys(seed, layer, nodes)[rep])
    pos = np.sort(pos.reshape(deg.size, k), axis=1).reshape(-1)
    return indptr_rows[rep] + pos


def parse_fanout(text: str | None, layers: int) -> list[int | None]:
    """``all`` (or None) -> every neighbour at every layer; ``K`` -> K at every layer;
    ``K1,K2,...`` -> one per layer, first layer (the one reading the input features) first."""
    if text is None or str(text).strip().lower() in ("all", ""):
        return [None] * layers
    parts = [p.strip() for p in str(text).split(",")]
    out: list[int | None] = []
    for p in parts:
        if p.lower() == "all":
            out.append(None)
            continue
        try:
            k = int(p)
        except ValueError:
            raise UserError(f"--fanout {text!r}: {p!r} is not a whole number or 'all'; give "
                            "e.g. --fanout 10,10") from None
        if k < 1:
            raise UserError(f"--fanout {text!r}: {k} neighbours cannot be sampled; use at least 1 "
                            "or 'all'")
        out.append(k)
    if len(out) == 1:
        return out * layers
    if len(out) != layers:
        raise UserError(f"--fanout {text!r} gives {len(out)} fanouts but the model has {layers} "
                        f"layers; give one value for all layers or exactly {layers}")
    return out


class LayerSampler:
    """The shared per-row sampling state of rows ``[lo, hi)`` of ``graph`` (DEAL Sec. 3.2).

    Built once; :meth:`sample` draws a layer's 1-hop graph of those rows (global column ids,
    ``hi - lo`` rows, ``graph.n_cols`` columns) from it. :attr:`states_built` counts how many
    times per-row state was built (once for the range, plus once per distinct fanout).
    """

    def __init__(self, graph: CSRGraph, lo: int = 0, hi: int | None = None, seed: int = 0):
        hi = graph.n_rows if hi is None else hi
        if not 0 <= lo <= hi <= graph.n_rows:
            raise UserError(f"LayerSampler: rows [{lo}, {hi}) are not inside the graph's "
                            f"{graph.n_rows} rows")
        self.graph, self.lo, self.hi, self.seed = graph, lo, hi, int(seed)
        self.starts = graph.indptr[lo:hi].astype(np.int64)
        self.deg = np.diff(graph.indptr[lo:hi + 1]).astype(np.int64)
        self._layout: dict[int, tuple] = {}
        self.states_built = 1

    def _state(self, k: int):
        """Per fanout: the capped rows, the output row pointers, and where the uncapped rows'
        slots and the capped rows' samples go in the output."""
        if k not in self._layout:
            capped = self.deg > k
            new_deg = np.where(capped, k, self.deg)
            indptr = np.r_[0, np.cumsum(new_deg)].astype(np.int64)
            rows = np.nonzero(capped)[0]
            free = np.nonzero(~capped)[0]
            fd = self.deg[free]
            # uncapped rows: all their slots, at their output positions
            rep = np.repeat(np.arange(free.size), fd)
            within = np.arange(int(fd.sum()), dtype=np.int64) - np.repeat(
                np.r_[0, np.cumsum(fd)[:-1]] if free.size else np.zeros(0, np.int64), fd)
            free_src = self.starts[free][rep] + within
            free_dst = indptr[free][rep] + within
            cap_dst = (indptr[rows][:, None] + np.arange(k)).reshape(-1)
            self._layout[k] = (indptr, rows, free_src, free_dst, cap_dst)
            self.states_built += 1
        return self._layout[k]

    def sample(self, k: int | None, layer: int) -> CSRGraph:
        """Layer ``layer``'s sampled rows: at most ``k`` neighbours each (None: all)."""
        g = self.graph
        if k is None:
            indptr = np.r_[0, np.cumsum(self.deg)].astype(np.int64)
            return CSRGraph(indptr, g.indices[g.indptr[self.lo]:g.indptr[self.hi]],
                            n_cols=g.n_cols, what="sampled graph")
        indptr, rows, free_src, free_dst, cap_dst = self._state(k)
        out = np.empty(int(indptr[-1]), dtype=g.indices.dtype)
        out[free_dst] = g.indices[free_src]
        if rows.size:
            slots = _capped_slots(self.starts[rows], self.deg[rows], rows + self.lo, k,
                                  self.seed, layer)
            out[cap_dst] = g.indices[slots]
        return CSRGraph(indptr, out, n_cols=g.n_cols, what="sampled graph")


def sample_rows(graph: CSRGraph, rows: np.ndarray, k: int | None, layer: int,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of the sampled neighbours of ``rows`` (any order, repeats allowed),
    drawn from scratch: the same neighbours :class:`LayerSampler` draws for those rows."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = graph.indptr[rows].astype(np.int64)
    deg = (graph.indptr[rows + 1] - starts).astype(np.int64)
    new_deg = deg if k is None else np.minimum(deg, k)
    indptr = np.r_[0, np.cumsum(new_deg)].astype(np.int64)
    out = np.empty(int(indptr[-1]), dtype=graph.indices.dtype)
    free = np.arange(rows.size) if k is None else np.nonzero(deg <= k)[0]
    fd = deg[free]
    rep = np.repeat(np.arange(free.size), fd)
    within = np.arange(int(fd.sum()), dtype=np.int64) - np.repeat(
        np.r_[0, np.cumsum(fd)[:-1]] if free.size else np.zeros(0, np.int64), fd)
    out[indptr[free][rep] + within] = graph.indices[starts[free][rep] + within]
    if k is not None:
        capped = np.nonzero(deg > k)[0]
        if capped.size:
            slots = _capped_slots(starts[capped], deg[capped], rows[capped], k, seed, layer)
            out[(indptr[capped][:, None] + np.arange(k)).reshape(-1)] = graph.indices[slots]
    return indptr, out


def sample_graph(graph: CSRGraph, k: int | None, layer: int, seed: int = 0) -> CSRGraph:
    """The whole graph's layer-``layer`` sample (square, like ``graph``)."""
    return LayerSampler(graph, seed=seed).sample(k, layer)
