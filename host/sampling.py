"""Neighbour sampling without replacement, deterministic per (seed, layer, edge).

Every stored entry (edge slot) ``e`` of a CSR graph gets, for layer ``l``, a 64-bit key
``splitmix64(e + base(seed, l))``; a row with more than ``k`` entries keeps the ``k`` entries of
smallest key (ties, which need equal 32-bit key prefixes, go to the earlier slot). So a node's
sample at a layer depends only on the seed, the layer and its own row, never on which other rows
are sampled with it, in what order, or by which process: the sample of one partition's rows
equals the same rows of the whole graph's sample, and an ego-network sampler that visits a node
in many batches draws the same neighbours every time. Duplicate entries are separate slots (a
repeated edge can be drawn twice, as its multiplicity says); self loops are ordinary entries.

:class:`LayerSampler` is DEAL's shared sampler (Sec. 3.2): it builds the per-row state of a row
range once (slot positions, row of every slot, and per fanout the capped rows and their slots)
and reuses it for every layer, drawing only fresh keys. :func:`sample_rows` samples arbitrary
rows from scratch (what an ego-network sampler does per batch).
"""

from __future__ import annotations

import numpy as np

from moagcn.errors import UserError

from .graph import CSRGraph

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """Steele et al.'s SplitMix64 finaliser, element-wise on uint64 (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def slot_keys(seed: int, layer: int, slots: np.ndarray) -> np.ndarray:
    """The uint64 sampling keys of edge ``slots`` (global positions in ``indices``)."""
    base = splitmix64(np.array([(int(seed) & 0xFFFFFFFF) << 20 | (int(layer) & 0xFFFFF)],
                               dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        return splitmix64(np.asarray(slots, dtype=np.uint64) + base)


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


def _select(row_of: np.ndarray, slots: np.ndarray, k: int, seed: int, layer: int) -> np.ndarray:
    """Boolean keep-mask over the slots of capped rows (``row_of`` ascending by row, every row
    listed here having more than ``k`` slots): the ``k`` smallest keys of each row."""
    keys = slot_keys(seed, layer, slots)
    combined = (row_of.astype(np.uint64) << np.uint64(32)) | (keys >> np.uint64(32))
    order = np.argsort(combined, kind="stable")
    srow = row_of[order]
    # rank of each sorted slot within its row: position minus the row's first position
    first = np.r_[0, np.nonzero(srow[1:] != srow[:-1])[0] + 1]
    start = np.repeat(first, np.diff(np.r_[first, srow.size]))
    keep_sorted = (np.arange(srow.size) - start) < k
    keep = np.zeros(slots.size, dtype=bool)
    keep[order[keep_sorted]] = True
    return keep


class LayerSampler:
    """The shared per-row sampling state of rows ``[lo, hi)`` of ``graph`` (DEAL Sec. 3.2).

    Built once; :meth:`sample` draws a layer's 1-hop graph of those rows (global column ids,
    ``hi - lo`` rows, ``graph.n_cols`` columns) from it. :attr:`states_built` counts how many
    times per-row state was built (once per row range, plus once per distinct fanout).
    """

    def __init__(self, graph: CSRGraph, lo: int = 0, hi: int | None = None, seed: int = 0):
        hi = graph.n_rows if hi is None else hi
        if not 0 <= lo <= hi <= graph.n_rows:
            raise UserError(f"LayerSampler: rows [{lo}, {hi}) are not inside the graph's "
                            f"{graph.n_rows} rows")
        self.graph, self.lo, self.hi, self.seed = graph, lo, hi, int(seed)
        self.first = int(graph.indptr[lo])
        self.deg = np.diff(graph.indptr[lo:hi + 1]).astype(np.int64)
        self.indices = graph.indices[graph.indptr[lo]:graph.indptr[hi]]
        self.row_of = np.repeat(np.arange(hi - lo, dtype=np.int64), self.deg)
        self._capped: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.states_built = 1

    def _state(self, k: int):
        if k not in self._capped:
            capped = self.deg > k
            slots = np.nonzero(capped[self.row_of])[0]
            self._capped[k] = (slots, self.row_of[slots], np.where(capped, k, self.deg))
            self.states_built += 1
        return self._capped[k]

    def sample(self, k: int | None, layer: int) -> CSRGraph:
        """Layer ``layer``'s sampled rows: at most ``k`` neighbours each (None: all)."""
        n_cols = self.graph.n_cols
        if k is None:
            indptr = np.r_[0, np.cumsum(self.deg)].astype(np.int64)
            return CSRGraph(indptr, self.indices, n_cols=n_cols, what="sampled graph")
        slots, rows, new_deg = self._state(k)
        keep = np.ones(self.indices.size, dtype=bool)
        if slots.size:
            keep[slots] = _select(rows, slots + self.first, k, self.seed, layer)
        indptr = np.r_[0, np.cumsum(new_deg)].astype(np.int64)
        return CSRGraph(indptr, self.indices[keep], n_cols=n_cols, what="sampled graph")


def sample_rows(graph: CSRGraph, rows: np.ndarray, k: int | None, layer: int,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of the sampled neighbours of ``rows`` (any order, repeats allowed),
    drawn from scratch: the same neighbours :class:`LayerSampler` draws for those rows."""
    rows = np.asarray(rows, dtype=np.int64)
    deg = (graph.indptr[rows + 1] - graph.indptr[rows]).astype(np.int64)
    n = int(deg.sum())
    row_of = np.repeat(np.arange(rows.size, dtype=np.int64), deg)
    offs = np.r_[0, np.cumsum(deg)[:-1]] if rows.size else np.zeros(0, dtype=np.int64)
    slots = (np.repeat(graph.indptr[rows].astype(np.int64) - offs, deg)
             + np.arange(n, dtype=np.int64))
    if k is None:
        return np.r_[0, np.cumsum(deg)].astype(np.int64), graph.indices[slots]
    capped = deg > k
    keep = np.ones(n, dtype=bool)
    cs = np.nonzero(capped[row_of])[0]
    if cs.size:
        keep[cs] = _select(row_of[cs], slots[cs], k, seed, layer)
    new_deg = np.where(capped, k, deg)
    return np.r_[0, np.cumsum(new_deg)].astype(np.int64), graph.indices[slots[keep]]


def sample_graph(graph: CSRGraph, k: int | None, layer: int, seed: int = 0) -> CSRGraph:
    """The whole graph's layer-``layer`` sample (square, like ``graph``)."""
    return LayerSampler(graph, seed=seed).sample(k, layer)
