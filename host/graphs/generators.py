"""Graph generators: labelled stochastic block models and R-MAT graphs with class-correlated
features (:func:`sbm`, :func:`rmat`), and power-law graphs shaped like the MixGCN paper's datasets
(its Table 2, :func:`synth_like`).

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

from moagcn.core.generators import GAMMA, rmat_edges, synth_graph
from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import CSRGraph


@dataclass(frozen=True)
class DatasetShape:
    nodes: int
    entries: int
    features: int
    classes: int
    max_degree: int


#: MixGCN Table 2 (nodes, edges, features, classes); the largest degree is an approximate public
#: figure for each dataset (the skew the generator reproduces)
SHAPES = {
    "reddit": DatasetShape(232_965, 114_615_892, 602, 41, 21_657),
    "orkut": DatasetShape(3_072_441, 117_185_083, 320, 20, 33_313),
    "twitter": DatasetShape(41_652_230, 1_468_365_182, 52, 16, 770_155),
    "friendster": DatasetShape(65_608_366, 1_806_067_135, 128, 64, 5_214),
    "papers100m": DatasetShape(111_059_956, 1_615_685_872, 128, 172, 25_000),
}


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


# -- labelled datasets: a stochastic block model and R-MAT ------------------------------------

def _class_features(labels: np.ndarray, n_classes: int, n_features: int, words_per_class: int,
                    p_topic: float, p_noise: float, rng: np.random.Generator) -> np.ndarray:
    """Sparse binary bag-of-words features: each class favours its own set of feature columns."""
    n = labels.size
    topic = np.zeros((n_classes, n_features), dtype=bool)
    for c in range(n_classes):
        words = rng.choice(n_features, size=min(words_per_class, n_features), replace=False)
        topic[c, words] = True
    prob = np.where(topic[labels], p_topic, p_noise)
    X = (rng.random((n, n_features)) < prob).astype(np.float32)
    empty = np.nonzero(X.sum(axis=1) == 0)[0]
    X[empty, rng.integers(0, n_features, size=empty.size)] = 1.0  # no all-zero rows
    return X


def _splits(labels: np.ndarray, n_classes: int, train_per_class: int, n_val: int, n_test: int,
            rng: np.random.Generator):
    """Planetoid-style split: ``train_per_class`` per class, then ``n_val`` and ``n_test``."""
    n = labels.size
    train = np.zeros(n, dtype=bool)
    for c in range(n_classes):
        members = np.nonzero(labels == c)[0]
        train[rng.choice(members, size=min(train_per_class, members.size), replace=False)] = True
    rest = rng.permutation(np.nonzero(~train)[0])
    n_val = min(n_val, rest.size // 2)
    n_test = min(n_test, rest.size - n_val)
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    val[rest[:n_val]] = True
    test[rest[n_val:n_val + n_test]] = True
    return train, val, test


def _check_positive(**values):
    for name, v in values.items():
        if v < 1:
            raise UserError(f"{name} = {v} must be at least 1")


def sbm(n_nodes: int = 2000, n_classes: int = 5, avg_degree: float = 8.0,
        homophily: float = 0.75, n_features: int = 64, words_per_class: int = 12,
        p_topic: float = 0.2, p_noise: float = 0.03, train_per_class: int = 20,
        n_val: int = 500, n_test: int = 1000, seed: int = 0) -> Dataset:
    """Stochastic block model with planted classes and class-correlated sparse binary features.

    Each node belongs to one of ``n_classes`` equal blocks (its label). An edge joins two nodes of
    the same block with probability ``p_in`` and of different blocks with ``p_out``, chosen so the
    expected degree is ``avg_degree`` and a fraction ``homophily`` of edges stays inside a block.
    Features are bag-of-words like: every class has ``words_per_class`` topic columns set with
    probability ``p_topic``, every other column with ``p_noise``; so neither the features alone nor
    the graph alone determine the label, and aggregation helps. Node ids are shuffled (no
    ordering hint). The graph is symmetric, without self loops; sampled exactly (dense per row
    block), so keep ``n_nodes`` to a few thousand.
    """
    _check_positive(n_nodes=n_nodes, n_classes=n_classes, n_features=n_features)
    if n_nodes > 20000:
        raise UserError(f"sbm: n_nodes = {n_nodes} is too large for the exact sampler; "
                        "use at most 20000 (or an .npz dataset)")
    if not 0.0 <= homophily <= 1.0:
        raise UserError(f"sbm: homophily = {homophily} must be in [0, 1]")
    rng = np.random.default_rng(seed)
    labels = np.arange(n_nodes) % n_classes
    block = n_nodes / n_classes
    p_in = min(1.0, avg_degree * homophily / max(block - 1, 1))
    p_out = min(1.0, avg_degree * (1 - homophily) / max(n_nodes - block, 1))
    src, dst = [], []
    chunk = max(1, 4_000_000 // n_nodes)
    for r0 in range(0, n_nodes, chunk):
        rows = np.arange(r0, min(n_nodes, r0 + chunk))
        same = labels[rows][:, None] == labels[None, :]
        hit = rng.random((rows.size, n_nodes)) < np.where(same, p_in, p_out)
        hit &= np.arange(n_nodes)[None, :] > rows[:, None]  # upper triangle, no self loops
        r, c = np.nonzero(hit)
        src.append(rows[r])
        dst.append(c)
    src, dst = np.concatenate(src), np.concatenate(dst)
    perm = rng.permutation(n_nodes)  # new id of old node i is pos[i]
    pos = np.empty(n_nodes, dtype=np.int64)
    pos[perm] = np.arange(n_nodes)
    src, dst = pos[src], pos[dst]
    labels = labels[perm]
    graph = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), n_nodes,
                                what="sbm")
    X = _class_features(labels, n_classes, n_features, words_per_class, p_topic, p_noise, rng)
    train, val, test = _splits(labels, n_classes, train_per_class, n_val, n_test, rng)
    return Dataset("sbm", graph, X, labels.astype(np.int64), train, val, test)


def rmat(scale: int = 11, edge_factor: int = 8, a: float = 0.57, b: float = 0.19,
         c: float = 0.19, n_classes: int = 4, n_features: int = 128, words_per_class: int = 16,
         p_topic: float = 0.15, p_noise: float = 0.03, train_per_class: int = 20,
         n_val: int = 500, n_test: int = 1000, seed: int = 0) -> Dataset:
    """R-MAT power-law graph (Chakrabarti et al.) on ``2**scale`` nodes, symmetrised.

    Each of ``edge_factor * 2**scale`` edges picks, bit by bit from the top, one of the four
    quadrants with probabilities ``a, b, c, 1 - a - b - c``; duplicates and self loops are dropped
    and ids shuffled. Labels are graph regions: the connected nodes, in reverse Cuthill-McKee
    (BFS-like) order, are cut into ``n_classes`` equal runs, so neighbours tend to share a label
    (about half the edges on the default graph, against 1/4 by chance); nodes without edges get
    random labels. Features are class-correlated as in :func:`sbm`.
    """
    _check_positive(scale=scale, edge_factor=edge_factor, n_features=n_features)
    if scale > 20:
        raise UserError(f"rmat: scale = {scale} gives {2 ** scale} nodes; use at most 20")
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise UserError(f"rmat: quadrant probabilities a={a}, b={b}, c={c} must be >= 0 and "
                        "sum to at most 1")
    if not 1 <= n_classes <= 2 ** scale:
        raise UserError(f"rmat: n_classes = {n_classes} must be in 1..2**scale")
    rng = np.random.default_rng(seed)
    n = 2 ** scale
    src, dst = rmat_edges(scale, edge_factor, a, b, c, rng)
    graph = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), n,
                                what="rmat")
    order = graph.rcm_order()
    connected = order[graph.degrees()[order] > 0]
    labels = rng.integers(0, n_classes, size=n)
    labels[connected] = np.arange(connected.size) * n_classes // max(connected.size, 1)
    X = _class_features(labels, n_classes, n_features, words_per_class, p_topic, p_noise, rng)
    train, val, test = _splits(labels, n_classes, train_per_class, n_val, n_test, rng)
    return Dataset("rmat", graph, X, labels.astype(np.int64), train, val, test)
