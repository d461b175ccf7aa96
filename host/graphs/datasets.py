"""Datasets: a built-in stochastic block model, an R-MAT power-law graph, and .npz files.

:func:`load_dataset` also reads PyG Data objects saved as .pt (see :mod:`moagcn.host.graphs.formats`).

The .npz format (the one of ``../shared/datasets/cora.npz``): ``indptr``, ``indices`` (binary
CSR, usually symmetric, no self loops), ``features`` (float32, N x F, raw), ``labels`` (int64,
-1 for unlabelled), ``train_mask``, ``val_mask``, ``test_mask`` (bool, N). :func:`save_npz`
writes it, :func:`load_npz` reads it from any path.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moagcn.errors import UserError

from moagcn.host.graphs.ops import CSRGraph, check_permutation

NPZ_KEYS = ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")

#: names :func:`load_dataset` accepts besides a path: generated graphs, then bundled files
BUILTIN = ("sbm", "rmat", "cora", "citeseer")
#: the public Planetoid datasets shipped in moagcn/data (see its README.md)
BUNDLED = ("cora", "citeseer")


def bundled_path(name: str) -> Path:
    """The .npz of a bundled dataset (``cora``, ``citeseer``) inside the installed package."""
    from importlib.resources import files
    if name not in BUNDLED:
        raise UserError(f"{name!r} is not a bundled dataset; choose one of {', '.join(BUNDLED)}")
    return Path(str(files("moagcn") / "data" / f"{name}.npz"))


@dataclass(eq=False)
class Dataset:
    """A node-classification dataset.

    Members
    -------
    name : str
    graph : CSRGraph
        Square adjacency (no self loops needed; models add them).
    features : numpy.ndarray
        float32, N x F.
    labels : numpy.ndarray
        int64, N; -1 marks an unlabelled node (never in a split mask).
    train_mask, val_mask, test_mask : numpy.ndarray
        bool, N.
    """

    name: str
    graph: CSRGraph
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray

    def __post_init__(self):
        self.validate()

    @property
    def n_nodes(self) -> int:
        return self.graph.n_nodes

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def n_classes(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    def validate(self) -> None:
        """Check shapes, dtypes and that split masks only hold labelled nodes."""
        what = self.name
        n = self.graph.n_nodes
        X = np.asarray(self.features)
        if X.ndim != 2 or X.shape[0] != n:
            raise UserError(f"{what}: features have shape {X.shape}; expected ({n}, F) for "
                            f"a graph of {n} nodes")
        if not np.issubdtype(X.dtype, np.floating):
            raise UserError(f"{what}: features have dtype {X.dtype}; expected floats")
        if not np.isfinite(X).all():
            r, c = np.argwhere(~np.isfinite(X))[0]
            raise UserError(f"{what}: features[{r}, {c}] = {X[r, c]} is not finite")
        self.features = X.astype(np.float32, copy=False)
        y = np.asarray(self.labels)
        if y.shape != (n,) or (y.size and not np.issubdtype(y.dtype, np.integer)):
            raise UserError(f"{what}: labels have shape {y.shape} dtype {y.dtype}; expected "
                            f"{n} integers (-1 for unlabelled)")
        if y.size and y.min() < -1:
            raise UserError(f"{what}: labels[{int(np.argmin(y))}] = {y.min()}; use -1 for "
                            "unlabelled nodes and 0..C-1 for classes")
        self.labels = y.astype(np.int64, copy=False)
        for key in ("train_mask", "val_mask", "test_mask"):
            m = np.asarray(getattr(self, key))
            if m.shape != (n,):
                raise UserError(f"{what}: {key} has shape {m.shape}; expected ({n},)")
            if m.dtype != bool:
                if not np.isin(m, (0, 1)).all():
                    raise UserError(f"{what}: {key} must be boolean (or 0/1), got {m.dtype}")
                m = m.astype(bool)
            unlabelled = np.nonzero(m & (self.labels < 0))[0]
            if unlabelled.size:
                raise UserError(f"{what}: {key} selects node {unlabelled[0]}, which has no label "
                                "(-1); remove it from the mask")
            setattr(self, key, m)
        if not self.train_mask.any():
            raise UserError(f"{what}: train_mask selects no node; training needs labelled nodes")

    def permute(self, perm) -> "Dataset":
        """The dataset with nodes relabelled: new node ``k`` is old node ``perm[k]``."""
        perm = check_permutation(perm, self.n_nodes)
        return Dataset(self.name, self.graph.permute(perm), self.features[perm],
                       self.labels[perm], self.train_mask[perm], self.val_mask[perm],
                       self.test_mask[perm])

    def summary(self) -> str:
        """One line: nodes, edges, features, classes and split sizes."""
        return (f"{self.name}: {self.n_nodes} nodes, {self.graph.nnz} edges, "
                f"{self.n_features} features, {self.n_classes} classes, "
                f"train/val/test {int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
                f"{int(self.test_mask.sum())}")


# -- .npz ----------------------------------------------------------------------------------------

def load_npz(path) -> Dataset:
    """Read a dataset in the .npz format of the module docstring from any path."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"dataset {path}: no such file (give the path of an .npz file, or one "
                        f"of the built-in datasets: {', '.join(BUILTIN)})")
    try:
        with np.load(p, allow_pickle=False) as data:
            missing = [k for k in NPZ_KEYS if k not in data.files]
            if missing:
                raise UserError(f"dataset {path}: missing key(s) {', '.join(missing)}; the file "
                                f"must hold {', '.join(NPZ_KEYS)}")
            arrays = {k: data[k] for k in NPZ_KEYS}
    except UserError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"dataset {path}: not a readable .npz archive ({exc})") from None
    graph = CSRGraph(arrays["indptr"], arrays["indices"], what=f"dataset {path}")
    return Dataset(p.stem, graph, arrays["features"], arrays["labels"], arrays["train_mask"],
                   arrays["val_mask"], arrays["test_mask"])


def save_npz(dataset: Dataset, path) -> Path:
    """Write ``dataset`` in the .npz format (readable by :func:`load_npz`)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(p, indptr=dataset.graph.indptr, indices=dataset.graph.indices,
                        features=dataset.features, labels=dataset.labels,
                        train_mask=dataset.train_mask, val_mask=dataset.val_mask,
                        test_mask=dataset.test_mask)
    return p


# -- synthetic graphs ----------------------------------------------------------------------------

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
    src, dst = pos[src], pos[dst]
    graph = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), n,
                                what="rmat")
    order = graph.rcm_order()
    connected = order[graph.degrees()[order] > 0]
    labels = rng.integers(0, n_classes, size=n)
    labels[connected] = np.arange(connected.size) * n_classes // max(connected.size, 1)
    X = _class_features(labels, n_classes, n_features, words_per_class, p_topic, p_noise, rng)
    train, val, test = _splits(labels, n_classes, train_per_class, n_val, n_test, rng)
    return Dataset("rmat", graph, X, labels.astype(np.int64), train, val, test)


def load_dataset(spec: str, seed: int = 0, undirected: bool = False) -> Dataset:
    """``sbm``, ``rmat`` (generated with ``seed``), ``cora``, ``citeseer`` (bundled, with the
    public Planetoid split) or the path of a dataset file.

    A path is read by :func:`moagcn.host.graphs.formats.read_dataset`: an .npz dataset or a PyG Data
    object saved as .pt; a graph-only file (.mtx, an edge list, an .npz CSR) is a
    :class:`UserError` saying how to get a dataset. ``undirected`` stores every edge in both
    directions (:func:`moagcn.host.graphs.formats.make_undirected`; the built-in graphs already are).
    """
    from moagcn.host.graphs.formats import SUFFIXES, read_dataset
    if spec in BUNDLED:
        return load_npz(bundled_path(spec))
    if spec in BUILTIN:
        return sbm(seed=seed) if spec == "sbm" else rmat(seed=seed)
    known = any(str(spec).lower().endswith((s, s + ".gz")) for s in SUFFIXES)
    if not known and not Path(spec).exists():
        raise UserError(f"unknown dataset {spec!r}: use one of {', '.join(BUILTIN)} or the "
                        "path of a dataset file (.npz, or a PyG Data object saved as .pt)")
    return read_dataset(spec, undirected=undirected)
