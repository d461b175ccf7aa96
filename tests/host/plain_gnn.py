"""GCN, GraphSAGE-mean and GIN written from the formulas alone: the reference of the training,
autograd, SuperGCN, HyScale and DEAL tests.

Nothing here uses the runtime's normalisation (``AggregationOp``, ``model.aggregation``,
``gcn_scaling``, ``local_operator``), its dropout masks, its forward passes or its samplers. The
operators are dense float64 matrices built from a graph's stored entries (``indptr``,
``indices``: the input, read as data) by the formulas of docs/runtime.md and the papers:

- GCN (Kipf & Welling): ``Â = D^-1/2 (A + I) D^-1/2``, ``D`` the row sums of ``A + I``;
- GraphSAGE-mean: ``Â = D^-1 A`` with the diagonal of ``A`` removed (a row without neighbours
  aggregates to 0);
- GIN-0: ``Â = A + I``.

``A`` counts a repeated stored entry as often as it is stored (the device adds it that often);
``A + I`` has exactly 1 on the diagonal, however many self loops are stored. The forward and
backward passes are dense torch products with autograd (float64); the weights are the only
thing taken from a :class:`~moagcn.host.nn.models.GNN`: its initial values, read by name from
its ``state_dict``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def entries(graph):
    """``(rows, cols)`` of every stored entry of a CSR graph (repeats kept)."""
    indptr = np.asarray(graph.indptr, dtype=np.int64)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return rows, np.asarray(graph.indices, dtype=np.int64)


def adjacency(rows, cols, n_rows, n_cols=None):
    """Dense float64 ``A`` with ``A[r, c]`` = how often ``(r, c)`` is stored."""
    A = np.zeros((n_rows, n_rows if n_cols is None else n_cols))
    np.add.at(A, (np.asarray(rows, np.int64), np.asarray(cols, np.int64)), 1.0)
    return A


def operator(kind: str, graph) -> np.ndarray:
    """The model's aggregation operator on ``graph`` as a dense float64 matrix (``kind``:
    ``gcn``, ``sage``/``mean`` or ``gin``/``sum``)."""
    n = graph.n_rows
    A = adjacency(*entries(graph), n, n)
    np.fill_diagonal(A, 0.0)
    if kind in ("sage", "mean"):
        deg = A.sum(axis=1)
        return np.divide(A, deg[:, None], out=np.zeros_like(A), where=deg[:, None] > 0)
    A_I = A + np.eye(n)
    if kind in ("gin", "sum"):
        return A_I
    d = A_I.sum(axis=1)
    return A_I / np.sqrt(d)[:, None] / np.sqrt(d)[None, :]


def row_normalised(X) -> np.ndarray:
    """Features divided by their row sums, zero rows kept (Kipf & Welling)."""
    X = np.asarray(X, dtype=np.float64)
    s = X.sum(axis=1, keepdims=True)
    return np.divide(X, s, out=np.zeros_like(X), where=s != 0)


def keep_mask(p: float, seed: int, epoch: int, layer: int, shape) -> np.ndarray:
    """The documented dropout keep-mask of (epoch, layer): uniform float32 draws of a generator
    seeded ``[seed, epoch, layer]`` over the whole output, kept where ``>= p``."""
    rng = np.random.default_rng([seed, epoch, layer])
    return rng.random(shape, dtype=np.float32) >= p


def weights(model) -> dict:
    """The model's parameters by name as float64 leaf tensors that require grad."""
    return {k: v.detach().to(torch.float64).clone().requires_grad_(True)
            for k, v in model.state_dict().items()}


def forward(kind: str, W: dict, ops, X, masks=None, scale: float = 1.0,
            dropout_at: str = "aggregate", rows=None):
    """Logits of ``len(ops)`` layers: ``Z_l = Â_l relu?(P_{l-1})`` (relu from the second layer
    on), masked and scaled by ``scale`` at the aggregation's output (``dropout_at="aggregate"``)
    or at its input (``"input"``); ``P_l = Z W^T + b`` (GCN), ``Z W_n^T + H_self W_s^T + b``
    (SAGE, ``H_self`` the layer's own unmasked input), ``W2 relu(W1 Z + b1) + b2`` (GIN).

    ``ops[l]`` is a dense (n_out x n_in) matrix; ``rows[l]`` (optional) the positions of layer
    ``l``'s output rows among its input rows (mini-batch blocks: the self term of SAGE)."""
    P = torch.as_tensor(np.asarray(X, dtype=np.float64))
    H_self = P
    for layer, A in enumerate(ops):
        A = torch.as_tensor(np.asarray(A, dtype=np.float64))
        H = torch.relu(P) if layer > 0 else P
        mask = None if masks is None else masks[layer]
        if mask is None:
            Z = A @ H
        elif dropout_at == "input":
            Z = A @ (H * torch.as_tensor(mask) * scale)
        else:
            Z = (A @ H) * torch.as_tensor(mask) * scale
        own = H_self if rows is None else H_self[torch.as_tensor(rows[layer])]
        w = f"updates.{layer}"
        if kind == "gcn":
            P = Z @ W[f"{w}.weight"].T + W[f"{w}.bias"]
        elif kind == "sage":
            P = Z @ W[f"{w}.weight"].T + W[f"{w}.bias"] + own @ W[f"selfs.{layer}.weight"].T
        else:
            Y = torch.relu(Z @ W[f"{w}.0.weight"].T + W[f"{w}.0.bias"])
            P = Y @ W[f"{w}.2.weight"].T + W[f"{w}.2.bias"]
        H_self = torch.relu(P)
    return P


def train(dataset, model, epochs: int, lr: float, weight_decay: float, dropout: float,
          seed: int, dropout_at: str = "aggregate") -> tuple[list[float], dict]:
    """Full-graph training from ``model``'s initial weights with Adam: the mean cross-entropy
    over the training nodes, every layer's dropout mask from :func:`keep_mask`. Returns the
    per-epoch losses and the final weights."""
    kind = model.kind
    A = operator(kind, dataset.graph)
    X = row_normalised(dataset.features)
    y = torch.as_tensor(np.asarray(dataset.labels, dtype=np.int64))
    train_ids = torch.as_tensor(np.nonzero(dataset.train_mask)[0])
    W = weights(model)
    dims = list(model.dims[:-1])          # each layer's input (= aggregation) width
    opt = torch.optim.Adam(list(W.values()), lr=lr, weight_decay=weight_decay)
    losses = []
    n_layers = len(dims)
    for epoch in range(epochs):
        opt.zero_grad()
        masks = None
        if dropout > 0:
            masks = [keep_mask(dropout, seed, epoch, l, (X.shape[0], dims[l]))
                     for l in range(n_layers)]
        logits = forward(kind, W, [A] * n_layers, X, masks, 1.0 / (1.0 - dropout), dropout_at)
        loss = F.cross_entropy(logits[train_ids], y[train_ids])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, {k: v.detach() for k, v in W.items()}
