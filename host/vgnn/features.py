"""What the performance model sees of a graph and a device (vGNN Sec. 4.2): graph statistics,
device parameters, *cost terms* (graph sizes divided by device rates, e.g. ``nnz * F / (lanes *
clock)``: the additions at peak rate, in seconds) and the regression features built from them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph

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


#: row lengths k of the short-row statistics: ``short{k} = sum over rows with 1 <= deg < k of
#: (k - deg)``, the extra neighbours' time a row would cost if a non-empty row took at least k
SHORT_ROWS = (2, 4, 8, 16)


#: the graph statistics of one run (stored with every training sample)
GRAPH_FEATURES = ("nodes", "cols", "edges", "deg_mean", "deg_std", "deg_max", "isolated",
                  "width", *(f"short{k}" for k in SHORT_ROWS), "keep", "heads")


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


def graph_features(graph: CSRGraph, width: int, keep: float = 1.0, heads: int = 1
                   ) -> np.ndarray:
    """:data:`GRAPH_FEATURES` of aggregating ``graph`` at ``width`` features: nodes (rows),
    columns (the feature rows it reads), stored entries, the mean, standard deviation
    (population) and largest row degree, rows without neighbours, the width, the short-row
    statistics (:data:`SHORT_ROWS`), ``keep``, the fraction of output elements an output
    mask keeps (1: no mask; a dropout mask of rate p keeps 1 - p), and ``heads``. For the
    per-entry products (:data:`ENTRY_OPS`) ``width`` is one head's columns and ``keep`` the
    SDDMM's kept fraction of (entry, head) pairs."""
    if int(width) < 1:
        raise UserError(f"feature width {width}: an aggregation needs at least one column")
    if int(heads) < 1:
        raise UserError(f"heads {heads}: a per-entry product needs at least one head")
    keep = check_keep(keep, "the output mask's kept fraction")
    deg = graph.degrees().astype(np.float64)
    if deg.size == 0:
        return np.array([0, graph.n_cols, 0, 0, 0, 0, 0, width, *([0] * len(SHORT_ROWS)), keep,
                         heads], dtype=np.float64)
    busy = deg[deg > 0]
    short = [np.maximum(k - busy, 0).sum() for k in SHORT_ROWS]
    return np.array([graph.n_rows, graph.n_cols, graph.nnz, deg.mean(), deg.std(), deg.max(),
                     np.count_nonzero(deg == 0), width, *short, keep, heads], dtype=np.float64)


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


# -- the per-entry products of attention (GAT) ---------------------------------------------------

#: what a performance model can predict: the binary aggregation (``sum``), the weighted one
#: (``weighted``: ``Σ_k values[k, h] X[u, h]`` per head, GAT's ``Σ_u α_vu h_u``) and the SDDMM
#: (``sddmm``: ``<Q[v, h], K[u, h]>`` per entry and head, GAT's scores and the gradient of its
#: attention weights)
OPS = ("sum", "weighted", "sddmm")
#: the per-entry products: a model fitted with them predicts a GAT's training step
ENTRY_OPS = ("weighted", "sddmm")

#: the SDDMM engine's parameters (:func:`scores_device_features`), in the order of its vector
SCORES_FEATURES = ("lanes", "clock_mhz", "capability", "max_rows", "max_cols", "max_edges",
                   "max_heads", "latency")

#: the SDDMM's cost terms (:func:`scores_cost_terms`)
SCORES_TERMS = ("t_chunks", "t_entries", "t_q_rows", "t_k_rows", "t_load", "t_parts",
                "t_fixed")


def scores_device_features(dev: AcceleratorChoice) -> dict[str, float]:
    """:data:`SCORES_FEATURES` of the device that runs the SDDMM: the ``sddmm`` design's lanes
    (multipliers into one adder tree), clock, peak multiply-adds per second, buffers (Q rows, K
    rows, entries per part; heads per job) and its accumulating adder's latency (pairs
    interleaved per chunk); the CPU as ``threads`` lanes without buffers."""
    cap = dev.capability()
    feats = dict.fromkeys(SCORES_FEATURES, 0.0)
    if dev.is_cpu:
        import torch
        lanes = float(torch.get_num_threads())
        feats.update(lanes=lanes, clock_mhz=cap / lanes / 1e6, capability=cap, latency=1.0)
        return feats
    spec, config = get_spec(dev.design), dev.config()
    feats.update(lanes=float(spec.lanes(config)), clock_mhz=float(spec.clock_mhz(config)),
                 capability=cap)
    for name in ("max_rows", "max_cols", "max_edges", "max_heads"):
        feats[name] = float(getattr(config, name, 0) or 0)
    feats["latency"] = float(getattr(config, "add_latency", 1) or 1)
    return feats


def _scores_sizes(G: np.ndarray, D: np.ndarray) -> dict:
    g = {k: G[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    d = {k: D[:, i] for i, k in enumerate(SCORES_FEATURES)}
    N, C, E, w, H, keep = (g["nodes"], g["cols"], g["edges"], g["width"], g["heads"],
                           g["keep"])
    chunks = np.ceil(w / d["lanes"])               # chunks of P columns per (entry, head)

    def per(size, limit):
        return np.where(limit > 0, np.ceil(size / np.where(limit > 0, limit, 1)), 1.0)

    parts = np.maximum.reduce([per(E, d["max_edges"]), per(N, d["max_rows"]),
                               per(C, d["max_cols"])])
    jobs = per(H, d["max_heads"])
    spread = np.maximum(parts * C, 1.0)
    return dict(g=g, d=d, N=N, C=C, E=E, H=H, keep=keep, chunks=chunks, parts=parts,
                jobs=jobs, distinct=spread * -np.expm1(-E / spread))


def scores_cost_terms(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """:data:`SCORES_TERMS` (seconds) of SDDMMs with graph features ``G`` (``width``: one
    head's ``D`` columns, ``keep``: the kept (entry, head) pairs) on SDDMM engines ``D`` (rows
    of :data:`SCORES_FEATURES`), with ``f`` the clock, ``c = ceil(D / lanes)`` chunks per pair:
    ``t_chunks = nnz H keep c / f`` (one chunk per cycle into the tree), ``t_entries = jobs nnz
    / f`` (the entry stream, once per job of at most ``max_heads`` heads), ``t_q_rows = N H c /
    f`` and ``t_k_rows = R H c / f`` (the Q rows and each part's distinct K rows, ``R`` as in
    :func:`cost_terms`' gather), ``t_load = max(jobs nnz, N H c, R H c) / f`` (the three load
    streams run side by side: the longest one counts), ``t_parts = jobs parts latency / f``
    (every part's pipeline fill and drain; parts: entries, Q rows or K rows over the buffers)
    and ``t_fixed = 1 / f``."""
    z = _scores_sizes(G, D)
    f = z["d"]["clock_mhz"] * 1e6
    H, c = z["H"], z["chunks"]
    entries, q_rows, k_rows = z["jobs"] * z["E"], z["N"] * H * c, z["distinct"] * H * c
    return np.stack([z["E"] * H * z["keep"] * c, entries, q_rows, k_rows,
                     np.maximum.reduce([entries, q_rows, k_rows]),
                     z["jobs"] * z["parts"] * z["d"]["latency"],
                     np.ones_like(f)], axis=1) / f[:, None]


#: names of the SDDMM regressors' feature vector (:func:`scores_regression_features`)
SCORES_FEATURE_NAMES = ("log_nodes", "log_cols", "log_edges", "deg_mean", "deg_cv",
                        "log_deg_max", "log_width", "log_heads", "pad_ratio", "keep",
                        *(f"log_{k}" for k in SCORES_FEATURES),
                        *(f"share_{k}" for k in SCORES_TERMS), "log_cost")


def scores_regression_features(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The SDDMM regressors' input (:data:`SCORES_FEATURE_NAMES`), built as
    :func:`regression_features` is for the aggregations."""
    z = _scores_sizes(G, D)
    g = z["g"]
    T = scores_cost_terms(G, D)
    total = T.sum(axis=1)
    mean = g["deg_mean"]
    cols = [np.log1p(g["nodes"]), np.log1p(g["cols"]), np.log1p(g["edges"]), mean,
            g["deg_std"] / np.where(mean > 0, mean, 1), np.log1p(g["deg_max"]),
            np.log(g["width"]), np.log(z["H"]), z["chunks"] * z["d"]["lanes"] / g["width"],
            g["keep"]]
    cols += [np.log1p(D[:, i]) for i in range(D.shape[1])]
    cols += [T[:, j] / total for j in range(T.shape[1])]
    cols.append(np.log(total))
    return np.stack(cols, axis=1)


def weighted_cost_terms(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The weighted aggregation's cost terms: :func:`cost_terms` of one head (``width``: one
    head's columns) times ``heads`` -- an accelerator runs one weighted job per head
    (``AcceleratorDevice._spmm_weighted``), each reading its values with the index beats."""
    heads = G[:, GRAPH_FEATURES.index("heads")]
    return cost_terms(G, D) * heads[:, None]


def weighted_regression_features(G: np.ndarray, D: np.ndarray) -> np.ndarray:
    """:func:`regression_features` of one head plus ``log(heads)``, with the cost terms' sum
    of :func:`weighted_cost_terms`."""
    heads = G[:, GRAPH_FEATURES.index("heads")]
    X = regression_features(G, D)
    X[:, -1] += np.log(heads)
    return np.concatenate([X, np.log(heads)[:, None]], axis=1)


def op_functions(op: str):
    """``(cost_terms, regression_features, device feature names)`` of ``op`` (:data:`OPS`)."""
    if op == "sum":
        return cost_terms, regression_features, DEVICE_FEATURES
    if op == "weighted":
        return weighted_cost_terms, weighted_regression_features, DEVICE_FEATURES
    if op == "sddmm":
        return scores_cost_terms, scores_regression_features, SCORES_FEATURES
    raise UserError(f"operation {op!r}: choose one of {', '.join(OPS)}")


def check_ops(ops: Sequence[str]) -> list[str]:
    """``ops`` as a list that starts with ``sum``, or a UserError."""
    out = list(dict.fromkeys(str(o).strip() for o in ops))
    for op in out:
        if op not in OPS:
            raise UserError(f"--ops {','.join(map(str, ops))}: {op!r} is not an operation; "
                            f"choose from {', '.join(OPS)}, e.g. sum,weighted,sddmm")
    if "sum" not in out:
        raise UserError(f"--ops {','.join(map(str, ops))}: include sum (the aggregation every "
                        "model predicts), e.g. sum or sum,weighted,sddmm")
    return ["sum"] + [o for o in out if o != "sum"]
