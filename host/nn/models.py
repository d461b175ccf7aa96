"""GCN, GraphSAGE-mean and GIN as "aggregate, then update" layers.

Every layer ``l`` is (MixGCN Alg. 2, lines 8 and 12)::

    Z_l = Â_l relu?(P_{l-1}) ⊙ M_drop / (1 - p)        sparse device (S-SpMM)
    P_l = update_l(Z_l, H_self)                          dense worker

with ``relu`` applied to the previous pre-activation (not to the input features) and the last
``P`` the logits. The updates:

- ``gcn``: ``P = Z W + b`` (Kipf & Welling; Â = D^-1/2 (A+I) D^-1/2; on a weighted graph
  ``D^-1/2 (A_w + I) D^-1/2`` with weighted degrees, as PyG's ``gcn_norm``:
  :meth:`GNN.use_edge_weights`);
- ``sage``: ``P = Z W_neigh + H_self W_self + b`` with ``Z`` the neighbour mean and ``H_self``
  the node's own (activated) features, which the dense worker already holds;
- ``gin``: ``P = MLP(Z)`` with ``Z = (A + I) H`` (GIN-0) and a two-layer MLP.

The same module serves the device path (:func:`moagcn.host.nn.autograd.aggregate`, used by the
parallel runtimes in :mod:`moagcn.host.mixgcn.mop`) and the plain torch reference
(:func:`reference_forward`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from moagcn.core.names import GNN_NAMES, MODELS  # noqa: F401 (the vocabulary; re-exported)
from moagcn.errors import UserError
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.nn.autograd import AggregationOp, reference_aggregate


class GNN(nn.Module):
    """A ``layers``-layer GCN / GraphSAGE-mean / GIN classifier.

    Parameters
    ----------
    kind : str
        ``gcn``, ``sage`` or ``gin``.
    in_features, hidden, n_classes : int
    layers : int
        Number of aggregation layers (2 or 3 in practice; at least 1).
    """

    def __init__(self, kind: str, in_features: int, hidden: int, n_classes: int,
                 layers: int = 2, label_embedding: bool = False, layer_norm: bool = False):
        super().__init__()
        if kind not in MODELS:
            raise UserError(f"unknown model {kind!r}; choose one of {', '.join(MODELS)}")
        if layers < 1 or hidden < 1 or in_features < 1 or n_classes < 1:
            raise UserError(f"model sizes must be >= 1 (layers={layers}, hidden={hidden}, "
                            f"in_features={in_features}, classes={n_classes})")
        self.kind = kind
        #: masked label propagation (SuperGCN Sec. 6.3): the labels enter as C extra input
        #: columns (one-hot of the shown class, 0 elsewhere), see :meth:`label_input`
        self.label_classes = n_classes if label_embedding else 0
        self.dims = [in_features + self.label_classes] + [hidden] * (layers - 1) + [n_classes]
        self.updates = nn.ModuleList()
        self.selfs = nn.ModuleList()
        for d_in, d_out in zip(self.dims[:-1], self.dims[1:]):
            if kind == "gin":
                self.updates.append(nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(),
                                                  nn.Linear(hidden, d_out)))
            else:
                self.updates.append(nn.Linear(d_in, d_out))
            if kind == "sage":
                self.selfs.append(nn.Linear(d_in, d_out, bias=False))
        #: LayerNorm of the aggregation input of every layer after the first (the rows that
        #: are sent between workers; the first layer's input features are not), by layer
        self.norms = (nn.ModuleDict({str(l): nn.LayerNorm(d)
                                     for l, d in enumerate(self.dims[:-1]) if l > 0})
                      if layer_norm else None)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)  # Glorot, as Kipf & Welling
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    @property
    def label_embedding(self) -> bool:
        """Whether the model takes shown labels as input (masked label propagation)."""
        return self.label_classes > 0

    def pad_input(self, X):
        """The input features with the C label columns (zeros) appended when the model takes
        labels; ``X`` itself otherwise."""
        if not self.label_classes:
            return X
        pad = np.zeros((X.shape[0], self.label_classes), dtype=np.float32)
        return np.ascontiguousarray(np.hstack([np.asarray(X, dtype=np.float32), pad]))

    def label_input(self, labels: torch.Tensor) -> torch.Tensor:
        """The shown labels as an addition to the (padded) input features: ``labels`` per row,
        -1 for a row whose label is not shown (a zero row); a shown class ``c`` is a 1 in
        label column ``c``.

        SuperGCN (Lemma 2) adds ``Y W_embed`` to ``X`` before the first layer's ``A (.) W``;
        the one-hot columns give the same model, ``A X W + A Y V`` with ``V = W_embed W``, but
        learn ``V`` (C x hidden) directly, as UniMP's and PyG's ``concat`` label input and the
        OGB "label usage" trick do. A learned C x F ``W_embed`` under Adam moves all F columns
        of a class at once -- a step moves ``Y W_embed W`` by about ``lr F mean|W|``, a
        row-normalised feature row's ``X W`` by about ``lr`` (about 46x less on Cora at Glorot
        init) -- and the model then fits the loss nodes through their neighbours' labels
        instead of their features (docs/supergcn.md)."""
        out = torch.zeros(labels.shape[0], self.dims[0], device=labels.device)
        rows = torch.nonzero(labels >= 0).flatten()
        out[rows, self.dims[0] - self.label_classes + labels[rows]] = 1.0
        return out

    @property
    def n_layers(self) -> int:
        return len(self.updates)

    @property
    def uses_self(self) -> bool:
        """Whether the update reads the node's own features (GraphSAGE)."""
        return self.kind == "sage"

    def use_edge_weights(self, graph: CSRGraph, weights) -> None:
        """Aggregate over ``graph`` with these edge weights (float32, one per stored entry in
        CSR order; None: unweighted again). Only a GCN takes weights (PyG's SAGEConv and
        GINConv take none)."""
        if weights is not None and self.kind != "gcn":
            raise UserError(f"the graph has edge weights and a {self.kind} model takes none "
                            "(as PyG's SAGEConv / GINConv); use --model gcn, or drop the "
                            "weights (the .npz data array, the .pt edge_weight)")
        self._edge_weights = None if weights is None else (graph, weights)

    def aggregation(self, graph: CSRGraph) -> AggregationOp:
        """The aggregation operator of this model on ``graph`` (weighted when
        :meth:`use_edge_weights` gave weights for this graph)."""
        weighted = getattr(self, "_edge_weights", None)
        if weighted is None:
            return aggregation_op(self.kind, graph)
        if graph is not weighted[0]:
            raise UserError("the model's edge weights belong to the graph it was given them "
                            "for; this runtime aggregates over another graph (a block or a "
                            "sample), which weighted training does not support")
        return AggregationOp.gcn_weighted(graph, weighted[1])

    def update(self, layer: int, Z: torch.Tensor, H_self: torch.Tensor | None = None):
        """``P_l`` from the aggregated rows ``Z`` (and, for SAGE, the rows' own features)."""
        P = self.updates[layer](Z)
        if self.kind == "sage":
            P = P + self.selfs[layer](H_self)
        return P

    def update_macs(self, layer: int, n_rows: int, input_grad: bool = True) -> int:
        """Multiply-accumulates of ``update(layer)`` on ``n_rows`` rows, forward + backward.

        Forward and the weight gradient cost one product each; the input gradient one more when
        the layer's input needs a gradient.
        """
        passes = 3 if input_grad else 2
        mods = list(self.updates[layer].modules()) + (
            list(self.selfs[layer].modules()) if self.kind == "sage" else [])
        return sum(n_rows * m.in_features * m.out_features * passes
                   for m in mods if isinstance(m, nn.Linear))


def aggregation_op(kind: str, graph: CSRGraph) -> AggregationOp:
    """The aggregation operator of a ``kind`` model (gcn, sage, gin or gat) on ``graph``: its
    ``adj`` is the sparsity the sparse devices run (GCN's, GIN's and GAT's carry a self loop on
    every row, GraphSAGE's none)."""
    return {"gcn": AggregationOp.gcn, "sage": AggregationOp.mean,
            "gin": AggregationOp.sum_with_self, "gat": AggregationOp.attention}[kind](graph)


class DropoutMasks:
    """Keep-masks of dropout, the same for every runtime and worker count.

    The mask of (``epoch``, ``layer``) is drawn from its own seeded generator over the full
    N x d output, so a worker that needs only a slice slices the same global mask. With
    ``order`` (a node permutation, ``order[k]`` = original id of node ``k``) the rows follow the
    nodes, so relabelling the graph does not change which outputs are dropped.
    """

    def __init__(self, p: float, seed: int, order=None):
        if not 0.0 <= p < 1.0:
            raise UserError(f"dropout = {p} must be in [0, 1)")
        self.p = float(p)
        self.seed = int(seed)
        self.order = None if order is None else torch.as_tensor(np.asarray(order))

    @property
    def scale(self) -> float:
        return 1.0 / (1.0 - self.p)

    def mask(self, epoch: int, layer: int, shape) -> torch.Tensor | None:
        """bool keep-mask for the layer's aggregation output (``None`` when ``p = 0``)."""
        if self.p == 0.0:
            return None
        rng = np.random.default_rng([self.seed, epoch, layer])
        keep = torch.from_numpy(rng.random(shape, dtype=np.float32) >= self.p)
        return keep if self.order is None else keep[self.order]


def reference_forward(model: GNN, op: AggregationOp, X: torch.Tensor, masks: list | None,
                      out_scale: float = 1.0, dropout_at: str = "aggregate") -> torch.Tensor:
    """Plain torch forward of ``model`` (torch.sparse aggregation): the reference path.

    ``op`` is the model's aggregation operator, ``masks[l]`` layer l's dropout mask (or
    ``None``), applied to the aggregation's output (``dropout_at="aggregate"``) or to its input
    (``"input"``; the SAGE self term is not dropped).
    """
    P = X
    H_self = X
    for layer in range(model.n_layers):
        mask = masks[layer] if masks else None
        if dropout_at == "input" and mask is not None:
            H = torch.relu(P) if layer > 0 else P
            Z = reference_aggregate(op, H * mask * out_scale)
        else:
            Z = reference_aggregate(op, P, mask, out_scale if mask is not None else 1.0,
                                    relu_input=layer > 0)
        P = model.update(layer, Z, H_self)
        H_self = torch.relu(P)
    return P
