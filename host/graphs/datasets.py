"""Datasets by name: the built-in stochastic block model and R-MAT graph
(:mod:`moagcn.host.graphs.generators`), the bundled Planetoid files, or the path of a dataset file
(.npz, or a PyG Data object saved as .pt; :mod:`moagcn.host.graphs.formats`)."""

from __future__ import annotations

from pathlib import Path

from moagcn.errors import UserError
from moagcn.host.graphs.data import BUILTIN, BUNDLED, Dataset, bundled_path, load_npz
from moagcn.host.graphs.formats import SUFFIXES, read_dataset
from moagcn.host.graphs.generators import rmat, sbm


def load_dataset(spec: str, seed: int = 0, undirected: bool = False) -> Dataset:
    """``sbm``, ``rmat`` (generated with ``seed``), ``cora``, ``citeseer`` (bundled, with the
    public Planetoid split) or the path of a dataset file.

    A path is read by :func:`moagcn.host.graphs.formats.read_dataset`: an .npz dataset or a PyG Data
    object saved as .pt; a graph-only file (.mtx, an edge list, an .npz CSR) is a
    :class:`UserError` saying how to get a dataset. ``undirected`` stores every edge in both
    directions (:func:`moagcn.host.graphs.formats.make_undirected`; the built-in graphs already are).
    """
    if spec in BUNDLED:
        return load_npz(bundled_path(spec))
    if spec in BUILTIN:
        return sbm(seed=seed) if spec == "sbm" else rmat(seed=seed)
    known = any(str(spec).lower().endswith((s, s + ".gz")) for s in SUFFIXES)
    if not known and not Path(spec).exists():
        raise UserError(f"unknown dataset {spec!r}: use one of {', '.join(BUILTIN)} or the "
                        "path of a dataset file (.npz, or a PyG Data object saved as .pt)")
    return read_dataset(spec, undirected=undirected)
