"""PyTorch Geometric interop: ``edge_index`` and ``Data`` objects to and from moagcn graphs.

PyG stores a graph as ``edge_index`` (2 x E, int64): edge ``k`` carries a message from
``edge_index[0, k]`` (the source) to ``edge_index[1, k]`` (the target), and a layer sums the
messages arriving at each target. moagcn's :class:`~moagcn.core.graph.CSRGraph` is the matrix the
accelerator multiplies by: row ``i`` lists the inputs that node ``i`` aggregates. So a row is a
target and its column ids are the sources::

    CSR row i, column j   <=>   edge j -> i   <=>   edge_index[:, k] == (j, i)

Repeated edges stay repeated (PyG adds a repeated message twice, and so does the accelerator);
nothing is symmetrised or sorted away except the order of a row's entries. ``edge_weight``
(one float per edge) follows its edges into CSR order (:func:`weights_to_csr`; a dataset's
``edge_weight``); ``edge_attr`` (edge features) is not read.

torch-geometric is optional (``pip install moagcn[pyg]``): only :func:`to_pyg` and reading
PyG-saved files import it; the other functions work on any object with the same attributes.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import CSRGraph

INSTALL_HINT = "install the optional extra with `pip install moagcn[pyg]` (torch-geometric)"


def require_pyg():
    """Import and return ``torch_geometric``, or raise a :class:`UserError` saying how to get it."""
    try:
        with warnings.catch_warnings():  # its import warns about torch.jit.script
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            import torch_geometric
            import torch_geometric.data  # noqa: F401
    except ImportError:
        raise UserError(f"torch-geometric is not installed; {INSTALL_HINT}") from None
    return torch_geometric


def _as_numpy(x, what: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    raise UserError(f"{what}: expected a torch tensor or numpy array, got {type(x).__name__}")


def check_edge_index(edge_index, num_nodes: int | None = None, what: str = "edge_index"
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """``(sources, targets, num_nodes)`` of a PyG ``edge_index``, checked.

    ``num_nodes`` defaults to the largest id + 1. Raises :class:`UserError` (a ``ValueError``)
    for a shape other than 2 x E, a non-integer dtype, negative ids or ids >= ``num_nodes``.
    """
    ei = _as_numpy(edge_index, what)
    if ei.ndim != 2 or ei.shape[0] != 2:
        fix = " (transpose it: edge_index.t())" if ei.ndim == 2 and ei.shape[1] == 2 else ""
        raise UserError(f"{what} has shape {tuple(ei.shape)}; expected (2, E): row 0 the "
                        f"sources, row 1 the targets{fix}")
    if ei.dtype == bool or not np.issubdtype(ei.dtype, np.integer):
        raise UserError(f"{what} has dtype {ei.dtype}; node ids must be integers "
                        "(use edge_index.long())")
    ei = ei.astype(np.int64, copy=False)
    if num_nodes is None:
        num_nodes = int(ei.max()) + 1 if ei.size else 0
    num_nodes = int(num_nodes)
    if num_nodes < 0:
        raise UserError(f"num_nodes = {num_nodes} must be >= 0")
    if ei.size:
        bad = (ei < 0) | (ei >= num_nodes)
        if bad.any():
            r, k = (int(v) for v in np.argwhere(bad)[0])
            raise UserError(f"{what}[{r}, {k}] = {int(ei[r, k])} is out of range for "
                            f"num_nodes = {num_nodes}; ids must be in 0..{num_nodes - 1} "
                            "(pass the right num_nodes, or remove the edge)")
    return ei[0], ei[1], num_nodes


def from_edge_index(edge_index, num_nodes: int | None = None, what: str = "edge_index"
                    ) -> CSRGraph:
    """The aggregation matrix of ``edge_index``: row = target, columns = its sources.

    Repeated edges and self loops are kept as given.
    """
    src, dst, n = check_edge_index(edge_index, num_nodes, what)
    return CSRGraph.from_edges(dst, src, n, dedupe=False, what=what)


def weights_to_csr(edge_index, edge_weight, num_nodes: int | None = None,
                   what: str = "edge_weight") -> np.ndarray:
    """``edge_weight`` (one float per edge of ``edge_index``) in the entry order of
    :func:`from_edge_index`'s graph (by target, then source, repeated edges in their given
    order), as float32; checked: one finite value per edge."""
    src, dst, _ = check_edge_index(edge_index, num_nodes)
    w = _as_numpy(edge_weight, what)
    if w.shape != (src.size,):
        raise UserError(f"{what} has shape {tuple(w.shape)}; expected ({src.size},), one "
                        "weight per edge of edge_index")
    if w.size and (w.dtype == bool or not np.issubdtype(w.dtype, np.number)):
        raise UserError(f"{what} has dtype {w.dtype}; give float weights")
    w = w.astype(np.float32)
    if not np.isfinite(w).all():
        k = int(np.argmax(~np.isfinite(w)))
        raise UserError(f"{what}[{k}] = {w[k]} is not finite; give finite weights")
    return w[np.lexsort((src, dst))]


def to_edge_index(graph: CSRGraph) -> torch.Tensor:
    """``edge_index`` (2 x nnz, int64) of ``graph``: sources are column ids, targets rows."""
    return torch.from_numpy(np.stack([graph.indices, graph.row_ids()]).astype(np.int64))


def _num_nodes(data) -> int | None:
    n = getattr(data, "num_nodes", None)
    return None if n is None else int(n)


def graph_from_pyg(data, what: str = "data", *, _weights_kept: bool = False) -> CSRGraph:
    """The graph of a PyG ``Data`` object (its ``edge_index`` and ``num_nodes``): the
    structure; :func:`from_pyg` also keeps ``edge_weight`` (or :func:`weights_to_csr`)."""
    ei = getattr(data, "edge_index", None)
    if ei is None:
        raise UserError(f"{what} has no edge_index; a graph needs edge_index (2 x E node ids)")
    if getattr(data, "edge_weight", None) is not None and not _weights_kept:
        warnings.warn(f"{what}: edge_weight is not part of the graph structure returned here; "
                      "keep it with weights_to_csr(data.edge_index, data.edge_weight) (or "
                      "from_pyg, which keeps it)", UserWarning, stacklevel=2)
    if getattr(data, "edge_attr", None) is not None:
        warnings.warn(f"{what}: edge_attr (edge features) is not read; moagcn graphs carry one "
                      "float weight per edge: set data.edge_weight to keep one", UserWarning,
                      stacklevel=2)
    return from_edge_index(ei, _num_nodes(data), what=f"{what}.edge_index")


def _mask(data, key: str, n: int, what: str) -> np.ndarray:
    m = getattr(data, key, None)
    if m is None:
        raise UserError(f"{what} has no {key}; set {what}.{key} (bool, one per node) before "
                        "converting, or use graph_from_pyg for the graph alone")
    m = _as_numpy(m, f"{what}.{key}")
    if m.ndim == 2 and m.shape[0] == n:
        raise UserError(f"{what}.{key} has shape {m.shape}: one column per split; pick one, "
                        f"e.g. {what}.{key} = {what}.{key}[:, 0]")
    return m


def from_pyg(data, name: str = "pyg") -> "Dataset":
    """A moagcn :class:`~moagcn.host.graphs.data.Dataset` from a PyG ``Data`` object.

    Keeps ``x`` (features), ``y`` (labels; -1 = unlabelled), ``train_mask``, ``val_mask``,
    ``test_mask`` and ``edge_weight`` (as the dataset's ``edge_weight``, in CSR order). The
    graph is :func:`graph_from_pyg`'s (row = target).
    """
    graph = graph_from_pyg(data, what="data", _weights_kept=True)
    n = graph.n_nodes
    x = getattr(data, "x", None)
    if x is None:
        raise UserError("data has no x (node features); from_pyg needs x, y and the split "
                        "masks; use graph_from_pyg(data) for the graph alone")
    y = getattr(data, "y", None)
    if y is None:
        raise UserError("data has no y (node labels); from_pyg needs x, y and the split masks; "
                        "use graph_from_pyg(data) for the graph alone")
    X = _as_numpy(x, "data.x")
    Y = _as_numpy(y, "data.y")
    if Y.ndim == 2 and Y.shape[1] == 1:
        Y = Y[:, 0]
    if Y.ndim != 1:
        raise UserError(f"data.y has shape {Y.shape}; moagcn trains single-label node "
                        "classification: give one class id per node (-1 for unlabelled)")
    if np.issubdtype(Y.dtype, np.floating):
        if not np.all(np.isfinite(Y) & (Y == np.round(Y))):
            raise UserError("data.y holds non-integer values; give one class id per node")
        Y = Y.astype(np.int64)
    masks = [_mask(data, k, n, "data") for k in ("train_mask", "val_mask", "test_mask")]
    w = getattr(data, "edge_weight", None)
    if w is not None:
        w = weights_to_csr(data.edge_index, w, n, what="data.edge_weight")
    return Dataset(name, graph, X, Y, *masks, edge_weight=w)


def to_pyg(obj):
    """A PyG ``Data`` object: ``edge_index`` and ``num_nodes`` of a :class:`CSRGraph`, plus
    ``x``, ``y``, the three masks and ``edge_weight`` (when weighted) of a
    :class:`~moagcn.host.graphs.data.Dataset`."""
    tg = require_pyg()
    if isinstance(obj, Dataset):
        extra = {} if obj.edge_weight is None else \
            {"edge_weight": torch.from_numpy(obj.edge_weight.copy())}
        return tg.data.Data(
            x=torch.from_numpy(obj.features.copy()), y=torch.from_numpy(obj.labels.copy()),
            edge_index=to_edge_index(obj.graph), num_nodes=obj.n_nodes,
            train_mask=torch.from_numpy(obj.train_mask.copy()),
            val_mask=torch.from_numpy(obj.val_mask.copy()),
            test_mask=torch.from_numpy(obj.test_mask.copy()), **extra)
    if isinstance(obj, CSRGraph):
        return tg.data.Data(edge_index=to_edge_index(obj), num_nodes=obj.n_nodes)
    raise UserError(f"to_pyg: expected a moagcn Dataset or CSRGraph, got {type(obj).__name__}")
