"""A learned performance model of the sparse devices (vGNN Sec. 4.2-4.3, Table 7).

vGNN partitions a graph over heterogeneous GPUs in proportion to what a regression model
predicts each GPU needs for its share. This module builds the same kind of model for the
sparse devices of moagcn (torch on the CPU, and any accelerator design on its cycle model or
RTL): it predicts the time of one aggregation ``Z = A H`` of a graph at a feature width on a
device.

The pipeline (docs/perfmodel.md has the measured numbers):

1. **Devices** (:func:`~moagcn.host.devices.select.parse_devices`): ``"sspmm:lanes=32,sspmm:lanes=8:clock_mhz=150,cpu"``;
   each :class:`AcceleratorChoice` has a stable :attr:`~AcceleratorChoice.key`, a
   :meth:`~AcceleratorChoice.capability` (peak adds per second) and builds its
   :class:`~moagcn.core.device.SparseDevice` (:meth:`~AcceleratorChoice.make`).
2. **Augmentation** (:func:`sample_subgraphs`): induced sub-graphs of one dataset at several
   node ratios and seeds, and the worker blocks of a METIS split of each (rows with the columns
   they use, as partition parallelism hands them to a device), each aggregated at several
   feature widths on every device
   (:func:`aggregation_time`: cycles / clock on an accelerator, the median wall time on the CPU).
3. **Features** (:func:`graph_features`, :func:`device_features`, :func:`cost_terms`): graph
   statistics, device parameters and *cost terms*, graph sizes divided by device rates (e.g.
   ``nnz * F / (lanes * clock)``: the additions at peak rate, in seconds).
4. **Regression** (:func:`fit`): a per-device non-negative least-squares sum of the cost terms
   (relative error; the *baseline*) times ``exp(r(x))``, where ``r`` is one of several
   scikit-learn regressors fitted on the log residual. Every regressor is scored on a held-out
   split of the sub-graphs (MSE, MAE, MAPE, time per prediction) and the lowest MAPE wins.
   The baseline makes the model extrapolate in graph size (trees cannot); the regressor
   corrects what a sum of terms misses (hub rows, tiling, lane padding). ``baseline=False``
   fits the regressors on ``log(time)`` directly, the plain vGNN recipe, for comparison.
5. **Persistence** (:class:`PerfModel`): JSON holding the device specs, the training samples
   and the chosen regressor's name and hyper-parameters; loading refits (all regressors are
   seeded, so the loaded model predicts exactly what the saved one did). No pickle.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import synth_graph
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.partition import metis_owner

#: node ratios of the sampled sub-graphs (1.0: the whole graph, sampled once)
DEFAULT_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: feature widths of the sampled runs; 100 is a multiple of no lane count (8, 16, 32)
DEFAULT_WIDTHS = (16, 32, 64, 100, 128)
#: sub-graphs drawn per ratio
DEFAULT_SEEDS = 3
#: fraction of the sub-graphs held out to score the regressors
DEFAULT_TEST_FRACTION = 0.25
#: timed repeats of one CPU aggregation (the median counts)
CPU_REPEATS = 15
#: kept fractions of the output masks the runs are timed with by default (1: no mask; 0.5: a
#: dropout of 0.5, or a ReLU mask, as training's aggregations carry)
DEFAULT_KEEPS = (1.0, 0.5)
#: the synthetic held-out graph :func:`load_graph` knows by this name
POWERLAW = "powerlaw"

FORMAT = "moagcn-perfmodel"
FORMAT_VERSION = 3


# -- devices -------------------------------------------------------------------------------------

#: device parameters of the features, and the configuration fields each is read from (the
#: first one a design's configuration has); 0 where a design has none
_CONFIG_FIELDS: dict[str, tuple[str, ...]] = {
    "words_per_cycle": ("load_width", "mem_words_per_cycle"),
    "granule": ("group_lanes",),
    "latency": ("adder_latency", "add_latency"),
    "buffer_nodes": ("max_nodes", "max_destinations"),
    "buffer_edges": ("max_edges",),
    "buffer_width": ("max_feature_width",),
    "dense_units": ("macs",),
    "mem_gb_per_s": ("hbm_gb_per_s", "ddr_gbps"),
}

#: the device features, in the order of the feature vector
DEVICE_FEATURES = ("lanes", "clock_mhz", "capability", "output_words", *_CONFIG_FIELDS)


def device_features(dev: AcceleratorChoice) -> dict[str, float]:
    """The device's parameters as features (:data:`DEVICE_FEATURES`).

    ``lanes`` and ``clock_mhz`` come from the design's spec, ``output_words`` is the width of
    its output beats, the rest from the configuration fields :data:`_CONFIG_FIELDS` names
    (``mem_gb_per_s``: an HBM or DDR figure, else the load streams' ``words_per_cycle`` x 4
    bytes x clock). The CPU is described as ``threads`` lanes at ``capability / threads``,
    one word per lane and cycle, with no buffers.
    """
    cap = dev.capability()
    if dev.is_cpu:
        import torch
        lanes = float(torch.get_num_threads())
        feats = dict.fromkeys(DEVICE_FEATURES, 0.0)
        feats.update(lanes=lanes, clock_mhz=cap / lanes / 1e6, capability=cap,
                     output_words=lanes, words_per_cycle=lanes, granule=1.0, latency=1.0)
        feats["mem_gb_per_s"] = 4 * cap / 1e9
        return feats
    spec, config = get_spec(dev.design), dev.config()
    feats = {"lanes": float(spec.lanes(config)), "clock_mhz": float(spec.clock_mhz(config)),
             "capability": cap, "output_words": float(spec.output_words(config))}
    for name, fields in _CONFIG_FIELDS.items():
        feats[name] = next((float(getattr(config, f)) for f in fields
                            if float(getattr(config, f, 0) or 0) > 0), 0.0)
    feats["granule"] = feats["granule"] or 1.0
    feats["latency"] = feats["latency"] or 1.0
    feats["words_per_cycle"] = feats["words_per_cycle"] or feats["lanes"]
    if not feats["mem_gb_per_s"]:
        feats["mem_gb_per_s"] = feats["words_per_cycle"] * 4 * feats["clock_mhz"] / 1e3
    return feats


# -- timing --------------------------------------------------------------------------------------

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
    if device.kind == "cpu":
        device.sspmm(graph, H, M)
        walls = []
        for _ in range(repeats):
            device.reset()
            device.sspmm(graph, H, M)
            walls.append(device.counters.wall_s)
        device.reset()
        return float(statistics.median(walls))
    device.reset()
    device.sspmm(graph, H, M)
    c = device.counters
    device.reset()
    if not c.clock_mhz:
        raise UserError(f"device {device.name} reports no clock; its time cannot be computed")
    return c.cycles_total / (c.clock_mhz * 1e6)


# -- graphs and sampling -------------------------------------------------------------------------

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


def sample_subgraphs(graph: CSRGraph, ratios: Sequence[float] = DEFAULT_RATIOS,
                     seeds: int = DEFAULT_SEEDS, seed: int = 0,
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
        raise UserError("--widths is empty: give feature widths, e.g. 16,32,64,100,128")
    for w in widths:
        if int(w) < 1:
            raise UserError(f"--widths: {w} is not a feature width; use integers >= 1")


def load_graph(name: str, seed: int = 0, undirected: bool = False) -> CSRGraph:
    """A graph by name: any :func:`~moagcn.host.graphs.datasets.load_dataset` name or path, or
    ``powerlaw``: a synthetic directed power-law graph (Chung-Lu, exponent 2.1, 3,000 nodes,
    12,000 entries: Cora's mean degree, largest degree 200) from ``seed``."""
    if name == POWERLAW:
        indptr, indices, _ = synth_graph(3000, 12000, max_degree=200, seed=seed)
        return CSRGraph(indptr, indices, what="power-law graph")
    return load_dataset(name, seed=seed, undirected=undirected).graph


# -- features ------------------------------------------------------------------------------------

#: row lengths k of the short-row statistics: ``short{k} = sum over rows with 1 <= deg < k of
#: (k - deg)``, the extra neighbours' time a row would cost if a non-empty row took at least k
SHORT_ROWS = (2, 4, 8, 16)
#: the graph statistics of one run (stored with every training sample)
GRAPH_FEATURES = ("nodes", "cols", "edges", "deg_mean", "deg_std", "deg_max", "isolated",
                  "width", *(f"short{k}" for k in SHORT_ROWS), "keep")
#: cost terms: graph sizes over device rates, in seconds (see :func:`cost_terms`)
COST_TERMS = ("t_adds", "t_feature_load", "t_index_load", "t_rows", "t_output", "t_hub",
              "t_gather", "t_dense", "t_tiles", "t_mask", "t_fixed")


def check_keep(keep: float, what: str = "--keep") -> float:
    """``keep`` as a float in (0, 1] (the fraction of output elements an output mask keeps; 1:
    no mask), or a UserError naming ``what``."""
    try:
        k = float(keep)
    except (TypeError, ValueError):
        raise UserError(f"{what} {keep!r}: give the kept fraction of the output, a number in "
                        "(0, 1] (1: no mask)") from None
    if not 0 < k <= 1:
        raise UserError(f"{what} {keep!r}: give the kept fraction of the output, a number in "
                        "(0, 1] (1: no mask)")
    return k


def graph_features(graph: CSRGraph, width: int, keep: float = 1.0) -> np.ndarray:
    """:data:`GRAPH_FEATURES` of aggregating ``graph`` at ``width`` features: nodes (rows),
    columns (the feature rows it reads), stored entries, the mean, standard deviation
    (population) and largest row degree, rows without neighbours, the width, the short-row
    statistics (:data:`SHORT_ROWS`) and ``keep``, the fraction of output elements an output
    mask keeps (1: no mask; a dropout mask of rate p keeps 1 - p)."""
    if int(width) < 1:
        raise UserError(f"feature width {width}: an aggregation needs at least one column")
    keep = check_keep(keep, "the output mask's kept fraction")
    deg = graph.degrees().astype(np.float64)
    if deg.size == 0:
        return np.array([0, graph.n_cols, 0, 0, 0, 0, 0, width, *([0] * len(SHORT_ROWS)), keep],
                        dtype=np.float64)
    busy = deg[deg > 0]
    short = [np.maximum(k - busy, 0).sum() for k in SHORT_ROWS]
    return np.array([graph.n_rows, graph.n_cols, graph.nnz, deg.mean(), deg.std(), deg.max(),
                     np.count_nonzero(deg == 0), width, *short, keep], dtype=np.float64)


def expected_groups(width, keep, granule) -> np.ndarray:
    """``E[ceil(X / granule)]`` for ``X ~ Binomial(width, keep)``: the lane groups (jobs) a row
    needs when an output mask keeps each of its ``width`` elements with probability ``keep``
    (``ceil(width / granule)`` without a mask). Element-wise over arrays of the three."""
    from scipy.stats import binom
    F, k, g = np.broadcast_arrays(np.asarray(width, dtype=np.float64),
                                  np.asarray(keep, dtype=np.float64),
                                  np.asarray(granule, dtype=np.float64))
    out = np.ceil(F / g)
    cache: dict = {}
    for i in np.flatnonzero(k < 1):
        key = (F[i], k[i], g[i])
        if key not in cache:
            # E[ceil(X/g)] = sum_{j >= 0} P(X > j g)
            cache[key] = float(binom.sf(np.arange(int(np.ceil(F[i] / g[i]))) * g[i],
                                        int(F[i]), k[i]).sum())
        out[i] = cache[key]
    return out


def cost_terms(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """:data:`COST_TERMS` (seconds) of runs with graph features ``G`` (rows of
    :data:`GRAPH_FEATURES`) on devices ``D`` (rows of :data:`DEVICE_FEATURES`).

    With ``f`` the clock, ``F`` the width, ``k`` the kept fraction of the output (an output
    mask) and ``F'`` the expected kept width rounded up to the lane group
    (:func:`expected_groups` lane groups):
    ``t_adds = nnz F' / (lanes f)`` (a masked element costs no addition), ``t_feature_load = C F / (words_per_cycle f)`` (``C`` the
    columns: the feature rows read),
    ``t_index_load = (N + nnz) / (words_per_cycle f)``, ``t_rows = N / f``,
    ``t_output = N k F / (output_words f)``, ``t_hub = deg_max latency / f`` (a hub row's
    accumulation chain), ``t_gather = R B / (words_per_cycle f)`` (fetching each row tile's
    distinct source rows, padded to the buffer width: ``B = ceil(F / buffer_width)
    buffer_width``, ``R = r C (1 - exp(-nnz / (r C)))`` over ``r`` row tiles, the expected
    distinct columns of a tile's random entries), ``t_dense = N sum_k w_k^2 / (dense_units f)``
    (a design that aggregates through its dense unit, HyScale's W = I update, on width tiles
    ``w_k`` of at most ``buffer_width``) and ``t_tiles = tiles / f`` with ``tiles`` = width
    tiles x row tiles, ``ceil(F / buffer_width) max(ceil(N / buffer_nodes),
    ceil(nnz / buffer_edges))``; ``t_mask = N / f`` with a mask (``k < 1``; one mask row per
    beat), else 0; ``t_fixed = 1 / f``, a per-call constant (pipeline fill, the host's call
    overhead).
    """
    g = {k: G[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    d = {k: D[:, i] for i, k in enumerate(DEVICE_FEATURES)}
    f = d["clock_mhz"] * 1e6
    N, C, E, F, keep = g["nodes"], g["cols"], g["edges"], g["width"], g["keep"]
    padded = expected_groups(F, keep, d["granule"]) * d["granule"]

    def per(size, limit):         # ceil(size / limit); one part without a buffer
        return np.where(limit > 0, np.ceil(size / np.where(limit > 0, limit, 1)), 1.0)

    bw = d["buffer_width"]
    width_tiles = per(F, bw)
    row_tiles = np.maximum(per(N, d["buffer_nodes"]), per(E, d["buffer_edges"]))
    # width tiles of a buffer_width-wide buffer: full ones and the rest
    full = np.where(bw > 0, np.floor(F / np.where(bw > 0, bw, 1)), 0.0)
    rest = F - full * bw
    squares = full * bw * bw + rest * rest
    dense = np.where(d["dense_units"] > 0,
                     N * squares / np.where(d["dense_units"] > 0, d["dense_units"], 1), 0.0)
    spread = np.maximum(row_tiles * C, 1.0)
    distinct = spread * -np.expm1(-E / spread)
    row_words = np.where(bw > 0, width_tiles * bw, F)
    return np.stack([E * padded / d["lanes"], C * F / d["words_per_cycle"],
                     (N + E) / d["words_per_cycle"], N, N * keep * F / d["output_words"],
                     g["deg_max"] * d["latency"], distinct * row_words / d["words_per_cycle"],
                     dense, width_tiles * row_tiles, np.where(keep < 1, N, 0.0),
                     np.ones_like(N)], axis=1) / f[:, None]


#: names of the regressors' feature vector (:func:`regression_features`)
FEATURE_NAMES = ("log_nodes", "log_cols", "cols_per_row", "log_edges", "deg_mean", "deg_cv",
                 "log_deg_max", "isolated_frac", "log_width", "pad_ratio",
                 *(f"short{k}_per_entry" for k in SHORT_ROWS), "keep",
                 *(f"log_{k}" for k in DEVICE_FEATURES),
                 *(f"share_{k}" for k in COST_TERMS), "log_cost")


def regression_features(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The regressors' input (:data:`FEATURE_NAMES`): scale-free graph statistics, the logs of
    the sizes and the device parameters, each cost term's share of their sum, and the log of
    the sum."""
    g = {k: G[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    d = {k: D[:, i] for i, k in enumerate(DEVICE_FEATURES)}
    T = cost_terms(G, D)
    total = T.sum(axis=1)
    mean = g["deg_mean"]
    nodes = np.maximum(g["nodes"], 1)
    padded = np.ceil(g["width"] / d["granule"]) * d["granule"]
    cols = [np.log1p(g["nodes"]), np.log1p(g["cols"]), g["cols"] / nodes,
            np.log1p(g["edges"]), mean,
            g["deg_std"] / np.where(mean > 0, mean, 1), np.log1p(g["deg_max"]),
            g["isolated"] / nodes, np.log(g["width"]), padded / g["width"]]
    edges = np.maximum(g["edges"], 1)
    cols += [g[f"short{k}"] / edges for k in SHORT_ROWS]
    cols.append(g["keep"])
    cols += [np.log1p(D[:, i]) for i in range(D.shape[1])]
    cols += [T[:, j] / total for j in range(T.shape[1])]
    cols.append(np.log(total))
    return np.stack(cols, axis=1)


# -- regressors ----------------------------------------------------------------------------------

def _pipeline(est):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    return make_pipeline(StandardScaler(), est)


def _linear(**kw):
    from sklearn.linear_model import LinearRegression
    return _pipeline(LinearRegression(**kw))


def _ridge(**kw):
    from sklearn.linear_model import Ridge
    return _pipeline(Ridge(**kw))


def _lasso(**kw):
    from sklearn.linear_model import Lasso
    return _pipeline(Lasso(**kw))


def _tree(**kw):
    from sklearn.tree import DecisionTreeRegressor
    return DecisionTreeRegressor(**kw)


def _forest(**kw):
    from sklearn.ensemble import RandomForestRegressor
    return RandomForestRegressor(**kw)


def _boosting(**kw):
    from sklearn.ensemble import GradientBoostingRegressor
    return GradientBoostingRegressor(**kw)


def _knn(**kw):
    from sklearn.neighbors import KNeighborsRegressor
    return _pipeline(KNeighborsRegressor(**kw))


def _svr(**kw):
    from sklearn.svm import SVR
    return _pipeline(SVR(**kw))


def _adaboost(**kw):
    from sklearn.ensemble import AdaBoostRegressor
    return AdaBoostRegressor(**kw)


def _bagging(**kw):
    from sklearn.ensemble import BaggingRegressor
    return BaggingRegressor(**kw)


class _Zero:
    """The baseline alone: a regressor that predicts no correction."""

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.zeros(len(X))


#: name -> (factory, hyper-parameters): vGNN's eight (linear, ridge, lasso, decision tree, SVR,
#: AdaBoost, bagging, random forest), gradient boosting, k nearest neighbours, and the cost-term
#: baseline alone. Every random one is seeded, so a refit on the same samples is exact.
REGRESSORS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
    "cost_terms": (lambda: _Zero(), {}),
    "linear": (_linear, {}),
    "ridge": (_ridge, {"alpha": 1.0}),
    "lasso": (_lasso, {"alpha": 1e-3, "max_iter": 50_000}),
    "decision_tree": (_tree, {"min_samples_leaf": 2, "random_state": 0}),
    "svr": (_svr, {"C": 1.0, "epsilon": 0.01}),
    "adaboost": (_adaboost, {"n_estimators": 100, "random_state": 0}),
    "bagging": (_bagging, {"n_estimators": 50, "random_state": 0, "n_jobs": 1}),
    "random_forest": (_forest, {"n_estimators": 100, "min_samples_leaf": 1, "random_state": 0,
                                "n_jobs": 1}),
    "gradient_boosting": (_boosting, {"n_estimators": 200, "max_depth": 3,
                                      "learning_rate": 0.05, "random_state": 0}),
    "knn": (_knn, {"n_neighbors": 5, "weights": "distance"}),
}


def make_regressor(name: str, params: Mapping[str, Any] | None = None):
    """A new, unfitted regressor of :data:`REGRESSORS` (``params``: its hyper-parameters)."""
    if name not in REGRESSORS:
        raise UserError(f"unknown regressor {name!r}; choose from {', '.join(REGRESSORS)}")
    factory, defaults = REGRESSORS[name]
    try:
        return factory(**dict(defaults if params is None else params))
    except ImportError:
        raise UserError("the performance model needs scikit-learn; install it with "
                        "`pip install scikit-learn`") from None


# -- the baseline: a fitted sum of cost terms ----------------------------------------------------

def fit_baseline(T: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients ``c`` minimising the relative error ``sum((T c - y) / y)^2``
    (one device's runs: ``T`` its cost terms, ``y`` its times).

    Columns are scaled to unit norm first (the terms span orders of magnitude); a column that is
    zero on this device keeps coefficient 0.
    """
    from scipy.optimize import nnls
    A = T / y[:, None]
    norms = np.linalg.norm(A, axis=0)
    used = norms > 0
    coef = np.zeros(T.shape[1])
    if used.any():
        sol, _ = nnls(A[:, used] / norms[used], np.ones(len(y)), maxiter=50 * T.shape[1])
        coef[used] = sol / norms[used]
    return coef


# -- metrics -------------------------------------------------------------------------------------

@dataclass
class Score:
    """One regressor's accuracy and cost on held-out runs (times in seconds)."""

    regressor: str
    mse: float
    mae: float
    mape: float
    #: microseconds per predicted run (one batch over the held-out runs)
    us_per_prediction: float

    def as_dict(self) -> dict:
        return {"regressor": self.regressor, "mse_s2": self.mse, "mae_s": self.mae,
                "mape": self.mape, "us_per_prediction": self.us_per_prediction}


def mape(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean absolute percentage error as a fraction (0.05 = 5 %)."""
    return float(np.mean(np.abs(pred - true) / true))


# -- the model -----------------------------------------------------------------------------------

@dataclass
class Samples:
    """Training runs: graph features (rows of :data:`GRAPH_FEATURES`), the device key, the
    measured seconds and the sub-graph each run came from."""

    graph: np.ndarray
    device: list[str]
    time_s: np.ndarray
    group: list[str]

    def as_dict(self) -> dict:
        return {"columns": list(GRAPH_FEATURES), "graph": self.graph.tolist(),
                "device": list(self.device), "time_s": self.time_s.tolist(),
                "group": list(self.group)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Samples":
        if list(d["columns"]) != list(GRAPH_FEATURES):
            raise UserError(f"performance model samples have columns {d['columns']}; this "
                            f"moagcn expects {list(GRAPH_FEATURES)}: fit the model again")
        return cls(np.asarray(d["graph"], dtype=np.float64).reshape(-1, len(GRAPH_FEATURES)),
                   [str(k) for k in d["device"]], np.asarray(d["time_s"], dtype=np.float64),
                   [str(g) for g in d["group"]])


class _Fitted:
    """Baseline coefficients per device and one regressor on the log residual."""

    def __init__(self, name: str, params: Mapping[str, Any], use_baseline: bool,
                 device_rows: Mapping[str, np.ndarray]):
        self.name, self.params, self.use_baseline = name, dict(params), use_baseline
        self.device_rows = device_rows
        self.coef: dict[str, np.ndarray] = {}
        self.regressor = None

    def _design(self, G: np.ndarray, keys: Sequence[str]):
        D = np.stack([self.device_rows[k] for k in keys])
        return regression_features(G, D), cost_terms(G, D)

    def _base(self, T: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        if not self.use_baseline:
            return np.ones(len(keys))
        C = np.stack([self.coef[k] for k in keys])
        return np.maximum((T * C).sum(axis=1), 1e-15)

    def fit(self, G: np.ndarray, keys: Sequence[str], y: np.ndarray) -> "_Fitted":
        X, T = self._design(G, keys)
        if self.use_baseline:
            keys_arr = np.asarray(keys)
            for k in dict.fromkeys(keys):
                sel = keys_arr == k
                self.coef[k] = fit_baseline(T[sel], y[sel])
        resid = np.log(y) - np.log(self._base(T, keys))
        self.regressor = make_regressor(self.name, self.params).fit(X, resid)
        return self

    def predict(self, G: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        X, T = self._design(G, keys)
        return self._base(T, keys) * np.exp(self.regressor.predict(X))


@dataclass
class FitReport:
    """What :func:`fit` measured: the scores of every regressor on the held-out split (the
    chosen one first in :attr:`chosen`), and the split's size."""

    scores: list[Score]
    chosen: str
    train_runs: int
    test_runs: int
    sampling_s: float = 0.0
    fitting_s: float = 0.0

    def as_dict(self) -> dict:
        return {"chosen": self.chosen, "train_runs": self.train_runs,
                "test_runs": self.test_runs, "sampling_s": self.sampling_s,
                "fitting_s": self.fitting_s, "scores": [s.as_dict() for s in self.scores]}


class PerfModel:
    """Predicts the seconds of one aggregation on the devices it was fitted for.

    Build one with :func:`fit`, or :meth:`load` a saved one. The model is defined by its JSON
    state (devices, samples, regressor name and hyper-parameters); construction refits from it.

    Members
    -------
    devices : dict
        Device key -> :class:`AcceleratorChoice`.
    regressor : str
        The chosen regressor's name (a key of :data:`REGRESSORS`).
    report : FitReport or None
        The held-out scores of the fit that produced the model.
    """

    def __init__(self, state: Mapping[str, Any]):
        if state.get("format") != FORMAT:
            raise UserError("not a moagcn performance model (no 'format': "
                            f"'{FORMAT}'); fit one with `moagcn perfmodel fit`")
        if state.get("version") != FORMAT_VERSION:
            raise UserError(f"performance model version {state.get('version')} is not "
                            f"{FORMAT_VERSION}; fit it again with this moagcn")
        self.state = dict(state)
        self.devices = {d["key"]: AcceleratorChoice.from_describe(d) for d in state["devices"]}
        self._device_rows = {d["key"]: np.array([float(d["features"][k])
                                                 for k in DEVICE_FEATURES])
                             for d in state["devices"]}
        self.samples = Samples.from_dict(state["samples"])
        self.regressor = state["regressor"]["name"]
        self.baseline = bool(state.get("baseline", True))
        rep = state.get("report")
        self.report = None if rep is None else FitReport(
            [Score(s["regressor"], s["mse_s2"], s["mae_s"], s["mape"], s["us_per_prediction"])
             for s in rep["scores"]], rep["chosen"], rep["train_runs"], rep["test_runs"],
            rep.get("sampling_s", 0.0), rep.get("fitting_s", 0.0))
        s = self.samples
        self._fitted = _Fitted(self.regressor, state["regressor"]["params"], self.baseline,
                               self._device_rows).fit(s.graph, s.device, s.time_s)

    # -- persistence ---------------------------------------------------------------------------

    def save(self, path) -> Path:
        """Write the model as JSON (indented, final newline)."""
        p = Path(path)
        try:
            p.write_text(json.dumps(self.state, indent=1) + "\n")
        except OSError as exc:
            raise UserError(f"cannot write the performance model {path}: "
                            f"{exc.strerror or exc}") from None
        return p

    @classmethod
    def load(cls, path, devices: Iterable[AcceleratorChoice] | None = None) -> "PerfModel":
        """Read a model saved by :meth:`save`; with ``devices``, check it covers them."""
        p = Path(path)
        if not p.exists():
            raise UserError(f"--model {path}: no such file (write one with `moagcn perfmodel "
                            "fit ... --out M.json`)")
        try:
            state = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"--model {path}: not a readable JSON performance model "
                            f"({exc})") from None
        try:
            model = cls(state)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, UserError):
                raise UserError(f"--model {path}: {exc}") from None
            raise UserError(f"--model {path}: a performance model without the expected "
                            f"fields ({exc!r}); fit it again") from None
        if devices is not None:
            model.require(devices, str(path))
        return model

    def require(self, devices: Iterable[AcceleratorChoice], where: str = "the performance model"
                ) -> None:
        """Raise UserError naming the first of ``devices`` the model was not fitted for."""
        for dev in devices:
            if dev.key not in self.devices:
                wanted = ",".join([*self.devices, dev.key])
                fitted_on = str(self.state.get("dataset", "D"))
                if "+" in fitted_on:      # several graphs (labels): name them with commas
                    fitted_on = "D[,D...]"
                raise UserError(
                    f"{where} was fitted for {', '.join(self.devices)}; it has no device "
                    f"{dev.key!r}. Fit a model that includes it: moagcn perfmodel fit "
                    f"--devices {wanted} --dataset {fitted_on} "
                    "--out M.json")

    # -- prediction ----------------------------------------------------------------------------

    def _key(self, device: AcceleratorChoice | str) -> str:
        key = device.key if isinstance(device, AcceleratorChoice) else str(device)
        if key not in self.devices:
            dev = device if isinstance(device, AcceleratorChoice) else AcceleratorChoice("model", key, text=key)
            self.require([dev])
        return key

    def predict(self, graph: CSRGraph, width: int, device: AcceleratorChoice | str,
                keep: float = 1.0) -> float:
        """Predicted seconds of one aggregation of ``graph`` at ``width`` features on
        ``device`` (a spec or its key), under an output mask keeping a ``keep`` fraction of the
        result (1: no mask)."""
        key = self._key(device)
        return float(self._fitted.predict(graph_features(graph, width, keep)[None, :],
                                          [key])[0])

    def predict_features(self, G: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        """Predicted seconds of many runs at once: rows of :data:`GRAPH_FEATURES` and device
        keys."""
        keys = [self._key(k) for k in keys]
        return self._fitted.predict(np.asarray(G, dtype=np.float64), keys)

    def describe(self) -> str:
        """One line: the regressor, the devices, the samples."""
        return (f"{self.regressor} on {len(self.samples.time_s)} runs of "
                f"{self.state.get('dataset', '?')} sub-graphs; devices: "
                f"{', '.join(self.devices)}")


# -- collecting runs and fitting -----------------------------------------------------------------

def collect(subgraphs: Sequence[SubGraph], widths: Sequence[int], devices: Sequence[AcceleratorChoice],
            device_kind: str = "model", progress: bool = False,
            keeps: Sequence[float] = DEFAULT_KEEPS) -> Samples:
    """Time every (sub-graph, width, kept fraction, device) run (``keeps``: the output masks'
    kept fractions, 1 for none); a progress bar over the runs with ``progress``."""
    from tqdm import tqdm
    check_widths(widths)
    keeps = check_keeps(keeps)
    made = [(d.key, d.on(device_kind).make()) for d in devices]
    G, keys, times, groups = [], [], [], []
    bar = tqdm(total=len(subgraphs) * len(widths) * len(keeps) * len(made),
               desc="perfmodel runs", unit="run", disable=not progress, file=sys.stderr)
    with bar:
        for sub, width, keep in ((s, w, k) for s in subgraphs for w in widths for k in keeps):
            feats = graph_features(sub.graph, int(width), keep)
            for key, dev in made:
                t = aggregation_time(dev, sub.graph, int(width), keep=keep)
                bar.update(1)
                if not t > 0:
                    continue        # nothing ran: no time to learn from (or its log)
                G.append(feats)
                keys.append(key)
                times.append(t)
                groups.append(sub.group or sub.name)
    return Samples(np.array(G, dtype=np.float64).reshape(-1, len(GRAPH_FEATURES)), keys,
                   np.array(times, dtype=np.float64), groups)


def _split(groups: Sequence[str], test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask: a seeded random ``test_fraction`` of the sub-graphs, all their runs."""
    names = np.array(sorted(set(groups)))
    if len(names) < 2:
        raise UserError("fitting needs at least two sub-graphs (one to fit, one to score); "
                        "give more --ratios or --seeds")
    rng = np.random.default_rng([seed, 7919])
    k = min(len(names) - 1, max(1, int(round(test_fraction * len(names)))))
    test_names = set(rng.choice(names, size=k, replace=False).tolist())
    return np.array([g in test_names for g in groups])


def score_regressors(samples: Samples, device_rows: Mapping[str, np.ndarray],
                     test: np.ndarray, regressors: Sequence[str], use_baseline: bool
                     ) -> list[Score]:
    """Fit each regressor on the runs outside ``test`` and score it on those inside."""
    G, y, keys = samples.graph, samples.time_s, np.asarray(samples.device)
    scores = []
    for name in regressors:
        m = _Fitted(name, REGRESSORS[name][1], use_baseline, device_rows)
        m.fit(G[~test], list(keys[~test]), y[~test])
        t0 = time.perf_counter()
        pred = m.predict(G[test], list(keys[test]))
        per = (time.perf_counter() - t0) / max(int(test.sum()), 1)
        err = pred - y[test]
        scores.append(Score(name, float(np.mean(err ** 2)), float(np.mean(np.abs(err))),
                            mape(pred, y[test]), per * 1e6))
    return scores


def fit(dataset: str | CSRGraph | Mapping[str, CSRGraph], devices: Sequence[AcceleratorChoice], *,
        ratios: Sequence[float] = DEFAULT_RATIOS, widths: Sequence[int] = DEFAULT_WIDTHS,
        seeds: int = DEFAULT_SEEDS, seed: int = 0, device_kind: str = "model",
        test_fraction: float = DEFAULT_TEST_FRACTION, regressors: Sequence[str] | None = None,
        baseline: bool = True, blocks: bool = True, progress: bool = False,
        name: str | None = None, keeps: Sequence[float] = DEFAULT_KEEPS) -> PerfModel:
    """Sample sub-graphs of ``dataset``, time them on ``devices``, score the regressors on a
    held-out ``test_fraction`` of the sub-graphs, and return the model with the lowest MAPE
    (refitted on every run; its :attr:`PerfModel.report` holds the scores).

    ``dataset``: a name for :func:`load_graph` (several, comma-separated, are all sampled: a
    model fitted on more than one graph family generalises to other graphs), a graph
    (``name`` labels it) or a mapping of labels to graphs.
    ``device_kind``: ``model`` (cycle model) or ``rtl`` for the accelerators.
    ``baseline=False``: the regressors fit ``log(time)`` without the cost-term sum.
    ``blocks=False``: square sub-graphs only (see :func:`sample_subgraphs`).
    ``keeps``: the kept fractions of the output masks every run is also timed with (1: no
    mask; add a dropout's ``1 - p`` to predict masked training aggregations).
    """
    if not devices:
        raise UserError("--devices: give at least one device, e.g. sspmm:lanes=32,cpu")
    if not 0 < test_fraction < 1:
        raise UserError(f"--test-fraction {test_fraction}: use a fraction in (0, 1)")
    names = list(regressors) if regressors is not None else list(REGRESSORS)
    if not baseline and "cost_terms" in names:
        names.remove("cost_terms")     # without the baseline it would predict 1 s
    for r in names:
        make_regressor(r)         # unknown names fail before any run
    if isinstance(dataset, CSRGraph):
        graphs = {name or "graph": dataset}
    elif isinstance(dataset, Mapping):
        graphs = dict(dataset)
    else:
        datasets = [d.strip() for d in str(dataset).split(",") if d.strip()]
        if not datasets or len(set(datasets)) != len(datasets):
            raise UserError(f"--dataset {dataset!r}: give one dataset or several distinct ones "
                            "separated by commas, e.g. cora or rmat,powerlaw")
        graphs = {d: load_graph(d, seed=seed) for d in datasets}
    label = name or "+".join(graphs)
    t0 = time.perf_counter()
    subs = [sub for glabel, graph in graphs.items()
            for sub in sample_subgraphs(graph, ratios, seeds, seed, name=glabel, blocks=blocks)]
    samples = collect(subs, widths, devices, device_kind, progress, keeps)
    sampling_s = time.perf_counter() - t0
    rows = {d.key: device_features(d) for d in devices}
    device_rows = {k: np.array([v[f] for f in DEVICE_FEATURES]) for k, v in rows.items()}
    t0 = time.perf_counter()
    test = _split(samples.group, test_fraction, seed)
    scores = score_regressors(samples, device_rows, test, names, baseline)
    best = min(scores, key=lambda s: s.mape)
    report = FitReport(scores, best.regressor, int((~test).sum()), int(test.sum()), sampling_s,
                       time.perf_counter() - t0)
    state = {
        "format": FORMAT, "version": FORMAT_VERSION, "dataset": label,
        "device_kind": device_kind, "baseline": baseline,
        "devices": [{**d.describe(), "capability": rows[d.key]["capability"],
                     "features": rows[d.key]} for d in devices],
        "sampling": {"ratios": [float(r) for r in ratios], "widths": [int(w) for w in widths],
                     "seeds": int(seeds), "seed": int(seed), "test_fraction": test_fraction,
                     "blocks": bool(blocks), "keeps": [float(k) for k in check_keeps(keeps)]},
        "regressor": {"name": best.regressor, "params": REGRESSORS[best.regressor][1]},
        "report": report.as_dict(),
        "samples": samples.as_dict(),
    }
    return PerfModel(state)


# -- held-out graphs -----------------------------------------------------------------------------

@dataclass
class HeldOut:
    """Predicted against measured seconds on graphs the model never saw."""

    rows: list[dict] = field(default_factory=list)

    def mape(self, graph: str | None = None, device: str | None = None) -> float:
        """MAPE (fraction) over the rows of one graph / device, or all."""
        sel = [r for r in self.rows if (graph is None or r["graph"] == graph)
               and (device is None or r["device"] == device)]
        return mape(np.array([r["predicted_s"] for r in sel]),
                    np.array([r["measured_s"] for r in sel]))

    @property
    def graphs(self) -> list[str]:
        return list(dict.fromkeys(r["graph"] for r in self.rows))


def held_out(model: PerfModel, graphs: Mapping[str, CSRGraph], widths: Sequence[int],
             device_kind: str = "model", devices: Sequence[AcceleratorChoice] | None = None,
             progress: bool = False, keeps: Sequence[float] = DEFAULT_KEEPS) -> HeldOut:
    """Measure ``graphs`` at ``widths`` (and output masks keeping ``keeps``) on the model's
    devices (or ``devices``) and set the predictions beside the measurements."""
    from tqdm import tqdm
    check_widths(widths)
    keeps = check_keeps(keeps)
    devs = list(devices) if devices is not None else list(model.devices.values())
    model.require(devs)
    made = [(d.key, d.on(device_kind).make()) for d in devs]
    out = HeldOut()
    steps = [(n, g, int(w), k) for n, g in graphs.items() for w in widths for k in keeps]
    for name, graph, width, keep in tqdm(steps, desc="held-out runs", unit="graph",
                                         disable=not progress, file=sys.stderr):
        feats = graph_features(graph, width, keep)
        keys = [k for k, _ in made]
        pred = model.predict_features(np.tile(feats, (len(keys), 1)), keys)
        for (key, dev), p in zip(made, pred):
            out.rows.append({"graph": name, "width": width, "keep": keep, "device": key,
                             "predicted_s": float(p),
                             "measured_s": aggregation_time(dev, graph, width, keep=keep)})
    return out
