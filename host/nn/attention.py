"""The two per-entry products of weighted aggregation and attention, with autograd.

A weighted or attention layer needs, beyond the binary S-SpMM, two sparse products with one
value per stored entry ``k`` (row ``v``, column ``u``) and head ``h``:

- **weighted SpMM** ``Z[v, h] = Σ_k values[k, h] · X[u, h]`` (the aggregation ``Σ_u α_vu h_u``
  of GAT, ``A_w H`` of a weighted GCN), :func:`spmm_weighted`;
- **SDDMM** ``S[k, h] = <Q[v, h], K[u, h]>`` (attention scores), :func:`sddmm`.

Each one's backward is made of the two again::

    Z = A_w X          dX = A_wᵀ G           dvalues[k] = <G[v], X[u]>      (an SDDMM)
    S = SDDMM(Q, K)    dQ = A_dS K           dK = A_dSᵀ Q                   (weighted SpMMs)

so a sparse device that runs both (``SparseDevice.entry_ops``) takes over every sparse product
of a GAT layer, forward and backward; the per-edge softmax, LeakyReLU and dropout stay on the
dense worker (here: torch on the host). A device that does not run them refuses in one line
(``SparseDevice.cannot``). The transposed products use ``csr.transpose()`` with the values
reordered to its entries (:func:`transpose_order`).
"""

from __future__ import annotations

import numpy as np
import torch

from moagcn.core.device import SparseDevice
from moagcn.core.graph import CSRGraph


def transpose_order(csr: CSRGraph) -> torch.Tensor:
    """Positions ``p`` such that entry ``j`` of ``csr.transpose()`` is entry ``p[j]`` of
    ``csr`` (``CSRGraph.transpose`` orders by column, then row, stably)."""
    if "T_order" not in csr._cache:
        order = np.lexsort((csr.row_ids(), csr.indices))
        csr._cache["T_order"] = torch.from_numpy(order.astype(np.int64))
    return csr._cache["T_order"]


class _WeightedSpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, X, csr, device, what, keep):
        ctx.csr, ctx.device, ctx.what, ctx.keep = csr, device, what, keep
        ctx.save_for_backward(values, X)
        return device.spmm_weighted(csr, values, X, what)

    @staticmethod
    def backward(ctx, G):
        values, X = ctx.saved_tensors
        csr, device, what = ctx.csr, ctx.device, ctx.what
        G = G.contiguous()
        dvalues = dX = None
        if ctx.needs_input_grad[0]:
            dvalues = device.sddmm(csr, G, X, what, mask=ctx.keep)
        if ctx.needs_input_grad[1]:
            order = transpose_order(csr).to(values.device)
            dX = device.spmm_weighted(csr.transpose(), values[order], G, what)
        return dvalues, dX, None, None, None, None


class _SDDMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, csr, device, what):
        ctx.csr, ctx.device, ctx.what = csr, device, what
        ctx.save_for_backward(Q, K)
        return device.sddmm(csr, Q, K, what)

    @staticmethod
    def backward(ctx, dS):
        Q, K = ctx.saved_tensors
        csr, device, what = ctx.csr, ctx.device, ctx.what
        dS = dS.contiguous()
        dQ = dK = None
        if ctx.needs_input_grad[0]:
            dQ = device.spmm_weighted(csr, dS, K, what)
        if ctx.needs_input_grad[1]:
            order = transpose_order(csr).to(dS.device)
            dK = device.spmm_weighted(csr.transpose(), dS[order], Q, what)
        return dQ, dK, None, None, None


def spmm_weighted(csr: CSRGraph, values: torch.Tensor, X: torch.Tensor,
                  device: SparseDevice, what: str = "edge weights",
                  keep: torch.Tensor | None = None) -> torch.Tensor:
    """``Z[v, h] = Σ_k values[k, h] X[col_k, h]`` on ``device``, differentiable in ``values``
    (``nnz x heads``) and ``X`` (``n_cols x heads x C``).

    ``keep`` (bool, ``nnz x heads``; None: all): the (entry, head) pairs whose value's
    gradient the caller uses. The gradient of the values is the SDDMM ``<G[v], X[u]>``; it is
    computed only on ``keep`` (the SDDMM's mask) and is +0 elsewhere, so a caller passes it
    only where the gradient of the others is discarded anyway (GAT: attention weights that
    dropout zeroed)."""
    return _WeightedSpMM.apply(values.contiguous(), X.contiguous(), csr, device, what, keep)


def sddmm(csr: CSRGraph, Q: torch.Tensor, K: torch.Tensor, device: SparseDevice,
          what: str = "GAT attention") -> torch.Tensor:
    """``S[k, h] = <Q[row_k, h], K[col_k, h]>`` on ``device``, differentiable in ``Q``
    (``n_rows x heads x D``) and ``K`` (``n_cols x heads x D``)."""
    return _SDDMM.apply(Q.contiguous(), K.contiguous(), csr, device, what)


def head_segments(C: int, c0: int, c1: int) -> list[tuple[int, int, int]]:
    """The heads that columns ``[c0, c1)`` of a heads x ``C`` tensor touch: ``(head, a, b)``
    with ``[a, b)`` the head's columns, as positions within the block (a feature-partitioned
    attention layer: DEAL's processes, MoP's sparse devices); none for an empty block."""
    if c1 <= c0:
        return []
    return [(h, max(c0, h * C) - c0, min(c1, (h + 1) * C) - c0)
            for h in range(c0 // C, (c1 - 1) // C + 1)]


def spmm_segments(csr: CSRGraph, values: torch.Tensor, X: torch.Tensor, segs: list,
                  device: SparseDevice, what: str = "GAT attention",
                  keep: torch.Tensor | None = None) -> torch.Tensor:
    """A feature block's weighted aggregation when the block cuts heads: ``X`` holds the
    block's columns, ``segs`` its :func:`head_segments` ``(head, a, b)``, ``values[:, j]`` (and
    ``keep[:, j]``) segment ``j``'s head; returns ``Σ_u values[k, j] X[u, a:b]`` side by side
    (rows x block width), one :func:`spmm_weighted` when the segments are equally wide."""
    n, rows = X.shape[0], csr.n_rows
    if not segs:
        return X.new_zeros((rows, 0))
    w = segs[0][2] - segs[0][1]
    if all(b - a == w for _, a, b in segs):
        return spmm_weighted(csr, values, X.reshape(n, len(segs), w), device, what,
                             keep).reshape(rows, -1)
    return torch.cat([spmm_weighted(csr, values[:, j:j + 1], X[:, a:b].reshape(n, 1, b - a),
                                    device, what, None if keep is None else keep[:, j:j + 1]
                                    ).reshape(rows, b - a)
                      for j, (_, a, b) in enumerate(segs)], dim=1)


def row_softmax(scores: torch.Tensor, csr: CSRGraph) -> torch.Tensor:
    """Softmax of ``scores`` (``nnz x heads``) over each row's entries, exactly as PyG's
    ``torch_geometric.utils.softmax``: the row maximum (not differentiated) subtracted,
    ``exp``, divided by the row sum plus ``1e-16``. A row without entries has none."""
    rows = torch.from_numpy(csr.row_ids().copy()).to(scores.device)
    n = csr.n_rows
    idx = rows.view(-1, 1).expand_as(scores)
    top = scores.new_full((n, scores.shape[1]), float("-inf"))
    top = top.scatter_reduce(0, idx, scores.detach(), reduce="amax", include_self=True)
    out = (scores - top[rows]).exp()
    total = scores.new_zeros((n, scores.shape[1])).index_add(0, rows, out) + 1e-16
    return out / total[rows]
