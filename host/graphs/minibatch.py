"""Mini-batches: a GraphSAGE neighbour sampler that builds a batch's blocks top-down from its
targets (the DGL "block" / PyG ``NeighborLoader`` layout), and the checks of its inputs.

A model of ``L`` layers gets ``L`` blocks, ``blocks[l]`` for layer ``l`` with **layer 0 the input
layer** (the one reading the features) and layer ``L - 1`` the one producing the batch's outputs:

- layer ``L - 1``'s targets are the batch; every layer's targets are the rows of its block;
- a block's sources ``src`` are its targets and their sampled neighbours (global ids, sorted,
  unique), and they are the next layer down's targets; ``blocks[0].src`` are the
  :attr:`MiniBatch.input_nodes` whose features are loaded;
- the block's local CSR has one row per target (in target order; each row's sampled neighbours
  in stored order) and columns that are positions in ``src``; ``dst_pos`` is where each target
  sits in ``src`` (``src[dst_pos] == targets``), for the self term and the next layer's rows.

**Fanouts** ``fanouts[l]`` is the fanout of layer ``l``, first layer (input) first: the order of
:func:`~moagcn.host.graphs.sampling.parse_fanout`, of DEAL and of DGL's ``NeighborSampler``; PyG's
``num_neighbors`` lists the hops from the targets first, so PyG ``[25, 10]`` is ``[10, 25]``
here. ``None`` keeps every neighbour.

Neighbours come from :func:`~moagcn.host.graphs.sampling.sample_rows` (without replacement,
``O(k)`` per row, deterministic per seed, layer and node). A *salt* (an int or a tuple of ints: an
epoch, ``(epoch, iteration)``) is folded into the seed so that each epoch or iteration draws
afresh, reproducibly; without a salt the draw is exactly the one DEAL and the ego-network
inference of :mod:`moagcn.host.deal.ego` make with that seed. Within one draw a node met twice
(as the target of two layers) draws independently per layer, as in GraphSAGE.

HyScale-GNN's training input (:mod:`moagcn.host.hyscale.minibatch`) loads and prefetches these
batches; DEAL's ego-network baseline samples with the same sampler.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from numbers import Integral
from typing import Sequence

import numpy as np

from moagcn.errors import UserError
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.sampling import sample_rows, splitmix64

# -- inputs ---------------------------------------------------------------------------------------


def whole_number(value, what: str, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise UserError(f"{what} = {value!r} is not a whole number; {fix}")
    return int(value)


def check_fanouts(fanouts) -> list[int | None]:
    """``fanouts`` as a list of positive ints or None (all neighbours), first layer first."""
    if isinstance(fanouts, str):
        raise UserError(f"fanouts = {fanouts!r} is text; parse it with "
                        "moagcn.host.graphs.sampling.parse_fanout(text, layers) first")
    try:
        out = list(fanouts)
    except TypeError:
        raise UserError(f"fanouts = {fanouts!r} is not a list; give one fanout per layer, "
                        "input layer first, e.g. [10, 25]") from None
    if not out:
        raise UserError("fanouts is empty; give one fanout per layer, input layer first, "
                        "e.g. [10, 25] (None for all neighbours)")
    for layer, k in enumerate(out):
        if k is None:
            continue
        k = whole_number(k, f"fanouts[{layer}]", "use a positive whole number or None (all)")
        if k < 1:
            raise UserError(f"fanouts[{layer}] = {k}: at least 1 neighbour must be sampled per "
                            "node; use a positive number or None (all neighbours)")
        out[layer] = k
    return out


def salted_seed(seed: int, salt=None) -> int:
    """The 32-bit sampling seed of ``seed`` with ``salt`` (None, an int or a tuple of ints)
    folded in by SplitMix64; ``salt=None`` gives ``seed`` itself (the unsalted DEAL draw)."""
    if salt is None:
        return int(seed)
    parts = salt if isinstance(salt, tuple) else (salt,)
    h = splitmix64(np.array([int(seed) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    for p in parts:
        p = whole_number(p, "salt", "use an int (an epoch) or a tuple of ints (epoch, iteration)")
        h = splitmix64(h ^ np.uint64(p & 0xFFFFFFFFFFFFFFFF))
    return int(h[0] & np.uint64(0xFFFFFFFF))


def _check_targets(targets, n: int) -> np.ndarray:
    t = np.asarray(targets)
    if t.ndim != 1 or t.size == 0:
        raise UserError(f"mini-batch targets have shape {t.shape}; give a non-empty 1-D array "
                        "of node ids")
    if not np.issubdtype(t.dtype, np.integer):
        raise UserError(f"mini-batch targets have dtype {t.dtype}; give integer node ids")
    t = t.astype(np.int64, copy=False)
    bad = np.nonzero((t < 0) | (t >= n))[0]
    if bad.size:
        raise UserError(f"mini-batch target {t[bad[0]]} is not a node of the graph "
                        f"(valid: 0..{n - 1})")
    if np.unique(t).size != t.size:
        raise UserError("mini-batch targets repeat a node; give each target once (batches() "
                        "does)")
    return t


def training_ids(mask, what: str = "train_mask", labels=None) -> np.ndarray:
    """The node ids a boolean mask selects (the training set), checked: a mask must be given,
    select some node, and (given ``labels``) only labelled ones."""
    if mask is None:
        raise UserError(f"{what} is missing; pass a boolean mask of the nodes to train on "
                        "(e.g. dataset.train_mask)")
    m = np.asarray(mask)
    if m.ndim != 1 or not (m.dtype == bool or np.isin(m, (0, 1)).all()):
        raise UserError(f"{what} has shape {m.shape} dtype {m.dtype}; give a 1-D boolean mask "
                        "with one entry per node")
    ids = np.nonzero(m.astype(bool))[0].astype(np.int64)
    if ids.size == 0:
        raise UserError(f"{what} selects no node; mark at least one labelled node to train on")
    if labels is not None:
        y = np.asarray(labels)
        if y.shape != m.shape:
            raise UserError(f"labels have shape {y.shape} but {what} has {m.shape}; give one "
                            "label per node")
        unl = ids[y[ids] < 0]
        if unl.size:
            raise UserError(f"{what} selects node {unl[0]}, which has no label (-1); remove it "
                            "from the mask")
    return ids


def batches(train_ids, batch_size: int, seed: int = 0, epoch: int = 0) -> list[np.ndarray]:
    """``train_ids`` shuffled (reproducibly per ``(seed, epoch)``) and cut into batches of
    ``batch_size``; the last, partial batch is kept."""
    ids = np.asarray(train_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise UserError(f"train_ids have shape {ids.shape} dtype {ids.dtype}; give a non-empty "
                        "1-D array of node ids (e.g. training_ids(dataset.train_mask))")
    if np.unique(ids).size != ids.size:
        raise UserError("train_ids repeat a node; give each training node once")
    bs = whole_number(batch_size, "batch_size", f"use 1..{ids.size}")
    if not 1 <= bs <= ids.size:
        raise UserError(f"batch_size = {bs} does not fit a training set of {ids.size} nodes; "
                        f"use 1..{ids.size}")
    seed = whole_number(seed, "seed", "use a whole number >= 0")
    epoch = whole_number(epoch, "epoch", "use a whole number >= 0")
    if seed < 0 or epoch < 0:
        raise UserError(f"seed = {seed}, epoch = {epoch}: both must be >= 0")
    order = ids[np.random.default_rng([seed, epoch]).permutation(ids.size)].astype(np.int64)
    return [order[i:i + bs] for i in range(0, ids.size, bs)]


# -- the sampler ----------------------------------------------------------------------------------


@dataclass(eq=False)
class Block:
    """One layer's message-flow graph: ``graph`` has a row per target and columns that are
    positions in ``src`` (the sorted, unique global ids of the sources, the targets included);
    ``src[dst_pos]`` are the targets."""

    graph: CSRGraph
    src: np.ndarray
    dst_pos: np.ndarray

    @property
    def targets(self) -> np.ndarray:
        return self.src[self.dst_pos]

    @property
    def n_dst(self) -> int:
        return int(self.dst_pos.size)

    @property
    def n_src(self) -> int:
        return int(self.src.size)

    def global_rows(self, n_nodes: int) -> CSRGraph:
        """The sampled rows with global column ids (``n_nodes`` columns)."""
        return CSRGraph(self.graph.indptr, self.src[self.graph.indices], n_cols=n_nodes,
                        what="sampled rows")


@dataclass(eq=False)
class MiniBatch:
    """A sampled mini-batch: ``targets`` (global ids, the batch, in batch order) and
    ``blocks[l]`` for layer ``l`` (0 = input layer); ``seed`` is the salted sampling seed."""

    targets: np.ndarray
    blocks: list
    seed: int

    @property
    def input_nodes(self) -> np.ndarray:
        """The nodes whose features layer 0 reads (``blocks[0].src``)."""
        return self.blocks[0].src

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def edges(self) -> int:
        return sum(b.graph.nnz for b in self.blocks)


class NeighborSampler:
    """GraphSAGE neighbour sampling of mini-batches from ``graph`` (square; rows = targets).

    ``fanouts[l]``: neighbours per node at layer ``l`` (input layer first; None: all).
    :meth:`sample` is thread-safe (it only reads the graph).
    """

    def __init__(self, graph: CSRGraph, fanouts, seed: int = 0):
        if not isinstance(graph, CSRGraph):
            raise UserError(f"NeighborSampler needs a CSRGraph, got {type(graph).__name__}")
        if graph.n_rows != graph.n_cols:
            raise UserError(f"NeighborSampler: the graph is {graph.n_rows} x {graph.n_cols}; "
                            "sources become the next layer's targets, so it must be square")
        self.graph = graph
        self.fanouts = check_fanouts(fanouts)
        self.seed = whole_number(seed, "seed", "use a whole number")

    @property
    def n_layers(self) -> int:
        return len(self.fanouts)

    def seed_for(self, salt=None) -> int:
        """The sampling seed a draw with ``salt`` uses (``seed`` itself without a salt)."""
        return salted_seed(self.seed, salt)

    def sample(self, targets, salt=None) -> MiniBatch:
        """The mini-batch of ``targets`` (distinct node ids); ``salt`` (an epoch, or ``(epoch,
        iteration)``) changes the draw reproducibly."""
        g = self.graph
        tgt = _check_targets(targets, g.n_rows)
        seed = self.seed_for(salt)
        blocks = [None] * self.n_layers
        rows_of = tgt
        for layer in reversed(range(self.n_layers)):
            indptr, idx = sample_rows(g, rows_of, self.fanouts[layer], layer, seed)
            src = np.union1d(idx, rows_of)
            local = CSRGraph(indptr, np.searchsorted(src, idx), n_cols=src.size,
                             what=f"block {layer}")
            blocks[layer] = Block(local, src, np.searchsorted(src, rows_of))
            rows_of = src
        return MiniBatch(tgt, blocks, seed)

    def sample_many(self, batches: Sequence, threads: int = 1, salt=None) -> list[MiniBatch]:
        """:meth:`sample` of each batch, in order, on ``threads`` threads (numpy drops the GIL in
        its larger operations). Batch ``i`` is drawn with salt ``(salt, i)`` (``(*salt, i)`` for
        a tuple), or unsalted when ``salt`` is None, exactly as :class:`Prefetcher` draws it."""
        threads = whole_number(threads, "threads", "use 1 or more")
        if threads < 1:
            raise UserError(f"threads = {threads}; use 1 or more sampling threads")
        batches = list(batches)
        salts = [batch_salt(salt, i) for i in range(len(batches))]
        if threads == 1 or len(batches) < 2:
            return [self.sample(b, s) for b, s in zip(batches, salts)]
        with ThreadPoolExecutor(threads, thread_name_prefix="moagcn-sample") as pool:
            return list(pool.map(self.sample, batches, salts))


def batch_salt(salt, i: int):
    """The salt of batch ``i`` of a run salted ``salt`` (None stays None)."""
    if salt is None:
        return None
    return (*salt, i) if isinstance(salt, tuple) else (salt, i)
