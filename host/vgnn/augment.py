"""The performance model's training data (vGNN Sec. 4.3's augmentation): induced sub-graphs of a
dataset at several node ratios and seeds, the worker blocks of a METIS split of each (rows with
the columns they use, as partition parallelism hands them to a device), and one aggregation of
each at several feature widths on every device (:func:`aggregation_time`: cycles / clock on an
accelerator, the median wall time on the CPU).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from moagcn.core.names import PERF_RATIOS, PERF_SEEDS
from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.core.generators import synth_graph
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.partition import metis_owner
from moagcn.host.vgnn.features import check_keep

#: timed repeats of one CPU aggregation (the median counts)
CPU_REPEATS = 15


#: the synthetic held-out graph :func:`load_graph` knows by this name
POWERLAW = "powerlaw"


def output_mask(n_rows: int, width: int, keep: float, seed: int = 0) -> np.ndarray | None:
    """A seeded Bernoulli output mask keeping a ``keep`` fraction of the ``n_rows x width``
    elements (as a dropout mask of rate ``1 - keep`` does); ``None`` for ``keep`` 1."""
    keep = check_keep(keep, "the output mask's kept fraction")
    if keep >= 1:
        return None
    rng = np.random.default_rng([seed, n_rows, int(width), int(round(keep * 1e6))])
    return rng.random((n_rows, int(width))) < keep


def aggregation_time(device, graph: CSRGraph, width: int, repeats: int = CPU_REPEATS,
                     keep: float = 1.0) -> float:
    """Seconds one aggregation ``Z = (A H) ⊙ M`` (``H``: ``width`` columns; ``M``: a seeded
    random output mask keeping a ``keep`` fraction of Z, :func:`output_mask`, none for 1) takes
    on ``device`` (a :class:`~moagcn.core.device.SparseDevice`).

    An accelerator (``model`` or ``rtl``) counts cycles, so one call gives
    ``cycles_total / clock``; the CPU is timed: one warm-up call (it builds torch's CSR
    tensor), then the median wall time of ``repeats`` calls.
    """
    H = np.ones((graph.n_cols, int(width)), dtype=np.float32)
    M = output_mask(graph.n_rows, width, keep)
    return device_time(device, lambda: device.sspmm(graph, H, M), repeats)


def device_time(device, run, repeats: int = CPU_REPEATS) -> float:
    """Seconds the call ``run()`` takes on ``device``: an accelerator's cycles at its clock
    (one call; an :class:`~moagcn.host.devices.pair.AttentionDevice` adds its two designs',
    each at its own clock), the CPU's median wall time of ``repeats`` calls after a warm-up
    call (it builds torch's cached tensors). The device's counters are zero after."""
    if device.kind == "cpu":
        run()
        walls = []
        for _ in range(repeats):
            device.reset()
            run()
            walls.append(device.counters.wall_s)
        device.reset()
        return float(statistics.median(walls))
    device.reset()
    run()
    if hasattr(device, "accelerator_s"):
        t = float(device.accelerator_s())
    else:
        c = device.counters
        if not c.clock_mhz:
            raise UserError(f"device {device.name} reports no clock; its time cannot be "
                            "computed")
        t = c.cycles_total / (c.clock_mhz * 1e6)
    device.reset()
    return t


def pair_mask(n_entries: int, heads: int, keep: float, seed: int = 0) -> np.ndarray | None:
    """A seeded Bernoulli mask over ``n_entries x heads`` (entry, head) pairs keeping a
    ``keep`` fraction (attention dropout's mask on the SDDMM of the gradient); ``None`` for 1."""
    keep = check_keep(keep, "the SDDMM mask's kept fraction")
    if keep >= 1:
        return None
    rng = np.random.default_rng([seed, n_entries, int(heads), int(round(keep * 1e6))])
    return rng.random((n_entries, int(heads))) < keep


def entry_op_time(device, graph: CSRGraph, op: str, width: int, heads: int = 1,
                  keep: float = 1.0, repeats: int = CPU_REPEATS) -> float:
    """Seconds one per-entry product of GAT takes on ``device`` (a sparse device running
    both, e.g. :func:`~moagcn.host.devices.pair.attention_device`'s pair): ``weighted``, the
    aggregation ``Σ_k values[k, h] X[u, h]`` of ``heads`` heads of ``width`` columns (no
    output mask: GAT's has none); ``sddmm``, ``<Q[v, h], K[u, h]>`` for every entry and head
    (``width`` columns per head) under a seeded mask keeping a ``keep`` fraction of the
    pairs (:func:`pair_mask`). Accelerators: cycles at each design's clock; the CPU: the
    median wall time of ``repeats`` calls after a warm-up."""
    import torch  # lazy: the perf model's fitting needs torch only to time these products

    w, h = int(width), int(heads)
    if op == "weighted":
        values = torch.ones((graph.nnz, h), dtype=torch.float32)
        X = torch.ones((graph.n_cols, h, w), dtype=torch.float32)
        return device_time(device, lambda: device.spmm_weighted(graph, values, X), repeats)
    if op == "sddmm":
        Q = torch.ones((graph.n_rows, h, w), dtype=torch.float32)
        K = torch.ones((graph.n_cols, h, w), dtype=torch.float32)
        mask = pair_mask(graph.nnz, h, keep)
        mask = None if mask is None else torch.from_numpy(mask)
        return device_time(device, lambda: device.sddmm(graph, Q, K, mask=mask), repeats)
    raise UserError(f"operation {op!r}: the per-entry products are weighted and sddmm")


def induced_subgraph(graph: CSRGraph, nodes) -> CSRGraph:
    """The sub-graph on ``nodes`` (ascending ids), renumbered ``0..len(nodes)-1``: the entries
    whose row and column are both kept, in their original order."""
    nodes = np.asarray(nodes, dtype=np.int64)
    local = np.full(graph.n_nodes, -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    rows = local[graph.row_ids()]
    cols = local[graph.indices]
    keep = (rows >= 0) & (cols >= 0)
    counts = np.bincount(rows[keep], minlength=nodes.size)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return CSRGraph(indptr, cols[keep], n_cols=nodes.size, what="sub-graph")


@dataclass(frozen=True)
class SubGraph:
    """One sampled sub-graph: ``ratio`` of the nodes, draw number ``seed`` of that ratio."""

    name: str
    ratio: float
    seed: int
    graph: CSRGraph
    #: the sampled sub-graph a worker block was cut from (its own name for a sub-graph); the
    #: fit's held-out split keeps a sub-graph and its blocks together
    group: str = ""


def worker_block(graph: CSRGraph, rows) -> CSRGraph:
    """The aggregation a partition-parallel worker owning ``rows`` hands its device: those
    rows, and as columns the rows themselves plus every neighbour they use (its halo), in
    ascending id order -- what :class:`~moagcn.host.supergcn.partition.PartitionRuntime` builds."""
    rows = np.asarray(rows, dtype=np.int64)
    used = np.unique(graph.block(rows, np.arange(graph.n_cols)).indices)
    if graph.n_cols != graph.n_rows:      # not square: the rows are not columns
        return graph.block(rows, used)
    return graph.block(rows, np.union1d(rows, used))


def _worker_blocks(sub: SubGraph, rng: np.random.Generator) -> list[SubGraph]:
    """Cut ``sub`` into 2-4 parts by METIS with random target shares of the work (as ``--balance``
    asks) and return each part's :func:`worker_block`."""
    g = sub.graph
    if g.n_nodes < 8 or g.nnz == 0:
        return []
    k = int(rng.integers(2, 5))
    shares = rng.dirichlet(np.full(k, 2.0))
    shares = np.maximum(shares, 0.05)
    owner = metis_owner(g, k, weights=g.degrees().astype(np.int64) + 1,
                        targets=shares / shares.sum())
    out = []
    for j in range(k):
        rows = np.nonzero(owner == j)[0]
        if rows.size:
            out.append(SubGraph(f"{sub.name}/p{j}of{k}", sub.ratio, sub.seed,
                                worker_block(g, rows), group=sub.name))
    return out


def sample_subgraphs(graph: CSRGraph, ratios: Sequence[float] = PERF_RATIOS,
                     seeds: int = PERF_SEEDS, seed: int = 0,
                     name: str = "graph", blocks: bool = True) -> list[SubGraph]:
    """Data augmentation: for every ratio, ``seeds`` induced sub-graphs on ``round(ratio * N)``
    nodes drawn uniformly without replacement (ratio 1.0: the graph itself, once), and with
    ``blocks`` the worker blocks of a random 2-4-way METIS split of each (:func:`_worker_blocks`:
    rectangular, the rows a partition worker owns by the columns it reads, so the model sees
    halos as the runtime makes them).

    Each draw has its own ``numpy`` generator seeded from ``(seed, ratio index, draw)``, so a
    sub-graph does not change when other ratios are added.
    """
    check_ratios(ratios)
    if seeds < 1:
        raise UserError(f"--seeds {seeds}: draw at least one sub-graph per ratio")
    n = graph.n_nodes
    out = []
    for i, ratio in enumerate(ratios):
        k = max(2, int(round(ratio * n)))
        draws = 1 if k >= n else seeds
        for s in range(draws):
            rng = np.random.default_rng([seed, i, s])
            if k >= n:
                sub = SubGraph(f"{name}@1.0", 1.0, 0, graph, group=f"{name}@1.0")
            else:
                nodes = np.sort(rng.choice(n, size=k, replace=False))
                label = f"{name}@{ratio:g}#{s}"
                sub = SubGraph(label, float(ratio), s, induced_subgraph(graph, nodes),
                               group=label)
            out.append(sub)
            if blocks:
                out.extend(_worker_blocks(sub, rng))
    return out


def check_ratios(ratios: Sequence[float]) -> None:
    """Raise UserError unless ``ratios`` is a non-empty list of node ratios in (0, 1]."""
    if not len(ratios):
        raise UserError("--ratios is empty: give node ratios in (0, 1], e.g. 0.1,0.5,1.0")
    for r in ratios:
        if not 0 < r <= 1:
            raise UserError(f"--ratios: {r} is not a node ratio; use numbers in (0, 1]")


def check_keeps(keeps: Sequence[float]) -> list[float]:
    """``keeps`` as distinct floats in (0, 1], or a UserError."""
    out = [check_keep(k, "--keeps") for k in keeps]
    if not out or len(set(out)) != len(out):
        raise UserError(f"--keeps {','.join(map(str, keeps))}: give distinct kept fractions in "
                        "(0, 1], e.g. 1,0.5 (1: no mask)")
    return out


def check_widths(widths: Sequence[int]) -> None:
    """Raise UserError unless ``widths`` is a non-empty list of feature widths >= 1."""
    if not len(widths):
        raise UserError("--width-list is empty: give feature widths, e.g. 16,32,64,100,128")
    for w in widths:
        if int(w) < 1:
            raise UserError(f"--width-list: {w} is not a feature width; use integers >= 1")


def load_graph(name: str, seed: int = 0, undirected: bool = False) -> CSRGraph:
    """A graph by name: any :func:`~moagcn.host.graphs.datasets.load_dataset` name or path, or
    ``powerlaw``: a synthetic directed power-law graph (Chung-Lu, exponent 2.1, 3,000 nodes,
    12,000 entries: Cora's mean degree, largest degree 200) from ``seed``."""
    if name == POWERLAW:
        indptr, indices, _ = synth_graph(3000, 12000, max_degree=200, seed=seed)
        return CSRGraph(indptr, indices, what="power-law graph")
    return load_dataset(name, seed=seed, undirected=undirected).graph
