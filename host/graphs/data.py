"""The dataset type every runtime trains on, and the .npz format.

The .npz format (the one of ``../shared/datasets/cora.npz``): ``indptr``, ``indices`` (binary
CSR, usually symmetric, no self loops), ``features`` (float32, N x F, raw), ``labels`` (int64,
-1 for unlabelled), ``train_mask``, ``val_mask``, ``test_mask`` (bool, N), and optionally
``data`` (float32 edge weights, one per stored entry). :func:`save_npz` writes it,
:func:`load_npz` reads it from any path.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moagcn.errors import UserError
from moagcn.host.graphs.ops import CSRGraph, check_permutation

NPZ_KEYS = ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")
#: names :func:`moagcn.host.graphs.datasets.load_dataset` accepts besides a path: generated graphs, then bundled files
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
    edge_weight : numpy.ndarray or None
        float32 edge weights, one per stored entry of ``graph`` in CSR order (None: unweighted).
        A GCN normalises them as PyG's ``gcn_norm`` does (``moagcn train``).
    """

    name: str
    graph: CSRGraph
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    edge_weight: np.ndarray | None = None

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
        if self.edge_weight is not None:
            w = np.asarray(self.edge_weight)
            if w.shape != (self.graph.nnz,):
                raise UserError(f"{what}: edge weights have shape {w.shape}; expected "
                                f"({self.graph.nnz},), one per stored entry")
            if w.size and not np.issubdtype(w.dtype, np.floating):
                raise UserError(f"{what}: edge weights have dtype {w.dtype}; expected floats")
            if not np.isfinite(w).all():
                k = int(np.argmax(~np.isfinite(w)))
                raise UserError(f"{what}: edge weight {k} is {w[k]}; give finite weights "
                                "(or drop them)")
            self.edge_weight = w.astype(np.float32, copy=False)
        if not self.train_mask.any():
            raise UserError(f"{what}: train_mask selects no node; training needs labelled nodes")

    def permute(self, perm) -> "Dataset":
        """The dataset with nodes relabelled: new node ``k`` is old node ``perm[k]``."""
        perm = check_permutation(perm, self.n_nodes)
        w = self.edge_weight
        if w is not None:   # CSRGraph.permute orders the entries by new row, then new column
            pos = np.empty_like(perm)
            pos[perm] = np.arange(perm.size)
            w = w[np.lexsort((pos[self.graph.indices], pos[self.graph.row_ids()]))]
        return Dataset(self.name, self.graph.permute(perm), self.features[perm],
                       self.labels[perm], self.train_mask[perm], self.val_mask[perm],
                       self.test_mask[perm], w)

    def summary(self) -> str:
        """One line: nodes, edges, features, classes and split sizes."""
        weighted = "" if self.edge_weight is None else " (weighted)"
        return (f"{self.name}: {self.n_nodes} nodes, {self.graph.nnz} edges{weighted}, "
                f"{self.n_features} features, {self.n_classes} classes, "
                f"train/val/test {int(self.train_mask.sum())}/{int(self.val_mask.sum())}/"
                f"{int(self.test_mask.sum())}")


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
            weights = data["data"] if "data" in data.files else None
    except UserError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"dataset {path}: not a readable .npz archive ({exc})") from None
    graph = CSRGraph(arrays["indptr"], arrays["indices"], what=f"dataset {path}")
    if weights is not None and weights.dtype != np.float32:
        raise UserError(f"dataset {path}: data (edge weights) must be float32, got "
                        f"{weights.dtype}")
    return Dataset(p.stem, graph, arrays["features"], arrays["labels"], arrays["train_mask"],
                   arrays["val_mask"], arrays["test_mask"], weights)


def save_npz(dataset: Dataset, path) -> Path:
    """Write ``dataset`` in the .npz format (readable by :func:`load_npz`)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    extra = {} if dataset.edge_weight is None else {"data": dataset.edge_weight}
    np.savez_compressed(p, indptr=dataset.graph.indptr, indices=dataset.graph.indices,
                        features=dataset.features, labels=dataset.labels,
                        train_mask=dataset.train_mask, val_mask=dataset.val_mask,
                        test_mask=dataset.test_mask, **extra)
    return p


