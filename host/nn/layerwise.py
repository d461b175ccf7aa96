"""Layer-wise full-graph computation on sampled 1-hop graphs: the model's aggregation restricted
to a block of rows (:func:`local_operator`), every layer's sampled graph (:func:`layer_graphs`) and
the plain-torch layer-wise forward pass that is the reference of all-node inference
(:func:`layerwise_forward`).

DEAL's engine (:mod:`moagcn.host.deal.engine`) computes the same embeddings across processes;
HyScale's trainers build their blocks' operators with :func:`local_operator` and evaluate with
:func:`layerwise_forward`; the ego-network baseline uses both.
"""

from __future__ import annotations

import numpy as np
import torch

from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.sampling import LayerSampler
from moagcn.host.nn.autograd import reference_aggregate
from moagcn.host.nn.models import GNN

#: the operator kind of :func:`local_operator` each model aggregates with
AGGREGATION_KIND = {"gcn": "gcn", "sage": "mean", "gin": "sum", "gat": "sum"}


def local_operator(kind: str, rows: CSRGraph, row_nodes: np.ndarray):
    """The model's aggregation restricted to some rows (``rows``: their sampled neighbours,
    global column ids; ``row_nodes``: the global id of each row): ``(adj, row_scale,
    col_scale)``, with ``col_scale`` the scale of these same nodes as columns (each owner
    scales its own rows before they are used or served).

    ``gcn``: ``A + I`` (one self loop per node), ``r = c = 1 / sqrt(deg)``; ``mean``: loops
    removed, ``r = 1 / deg`` (0 without neighbours); ``sum``: ``A + I`` unscaled (GAT: PyG's
    ``GATConv`` removes the loops and adds one each).
    """
    n = rows.n_rows
    row_nodes = np.asarray(row_nodes, dtype=np.int64)
    r = rows.row_ids()
    nonloop = rows.indices != row_nodes[r]
    src, dst = r[nonloop], rows.indices[nonloop].astype(np.int64)
    if kind in ("gcn", "sum"):
        src = np.concatenate([src, np.arange(n)])
        dst = np.concatenate([dst, row_nodes])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    adj = CSRGraph(indptr, dst, n_cols=rows.n_cols, what="layer graph")
    deg = np.diff(indptr).astype(np.float64)
    if kind == "gcn":
        s = (1.0 / np.sqrt(np.maximum(deg, 1.0))).astype(np.float32)
        return adj, s, s
    if kind == "mean":
        return adj, np.where(deg > 0, 1.0 / np.maximum(deg, 1.0), 0.0).astype(np.float32), None
    return adj, None, None


def layer_graphs(graph: CSRGraph, fanout: list, seed: int) -> list[CSRGraph]:
    """Every layer's sampled 1-hop graph of the whole graph (one sampler, shared state)."""
    sampler = LayerSampler(graph, seed=seed)
    return [sampler.sample(k, layer) for layer, k in enumerate(fanout)]


def layerwise_forward(model: GNN, graphs: list[CSRGraph], X: torch.Tensor) -> torch.Tensor:
    """The model's own forward pass (aggregate, then update) with layer ``l`` aggregating over
    ``graphs[l]``, in plain torch: the single-process reference of the embeddings."""
    model.eval()
    if model.kind == "gat":     # the GAT's own layers, each on its layer's graph
        # lazy: keeps the edge-index conversion out of the GCN path
        from moagcn.host.graphs.pyg import to_edge_index
        with torch.no_grad():
            for layer, conv in enumerate(model.convs):
                X = conv(X if layer == 0 else torch.nn.functional.elu(X),
                         to_edge_index(graphs[layer]))
        return X
    P, H_self = X, X
    with torch.no_grad():
        for layer in range(model.n_layers):
            if layer == 0:
                H = X
            elif model.norms is not None:
                H = torch.relu(model.norms[str(layer)](P))
            else:
                H = torch.relu(P)
            Z = reference_aggregate(model.aggregation(graphs[layer]), H)
            P = model.update(layer, Z, H_self)
            H_self = torch.relu(P)
    return P
