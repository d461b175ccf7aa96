"""PyTorch Geometric's ``GATConv`` (Veličković et al.) with its sparse products on a sparse device.

``GATConv(in_channels, out_channels, heads=1, concat=True, negative_slope=0.2, dropout=0.0,
add_self_loops=True, bias=True)`` takes PyG's arguments and keeps PyG's parameter names
(``lin.weight``, ``att_src``, ``att_dst``, ``bias``; ``res.weight`` with ``residual=True``), so
``load_state_dict(pyg_gat.state_dict())`` works; ``forward(x, edge_index,
return_attention_weights=None)`` returns what PyG's returns. One layer is::

    h = x W                                  (N x heads x C)             dense worker
    s_v = <h_v, a_dst>, t_u = <h_u, a_src>                                dense worker
    e_vu = s_v + t_u = <[s_v, 1], [1, t_u]>  per stored entry            SDDMM
    α_v· = softmax(LeakyReLU(e_v·)), dropout                             dense worker
    out_v = Σ_u α_vu h_u                                                 weighted SpMM
    concat (or mean) the heads, + bias

The SDDMM and the weighted SpMM (and, in the backward pass, their transposes and the gradient
of the attention weights ``<dZ_v, h_u>``, an SDDMM) are :mod:`moagcn.host.nn.attention`'s
operations on the layer's sparse device: ``cpu`` runs them; so does a pair of accelerator
devices (:class:`moagcn.host.devices.pair.AttentionDevice`: the weighted S-SpMM aggregates,
the SDDMM scores, ``moagcn train --model gat --device model|rtl``); a single ``model`` /
``rtl`` device has only one of the two and refuses the other in one line naming the fix. In
training with attention dropout the gradient SDDMM skips the dropped weights (its mask).

Conventions are PyG's: with ``add_self_loops`` every self loop in ``edge_index`` is removed and
one loop per node appended (``remove_self_loops`` then ``add_self_loops``); repeated edges each
get their own attention weight; the softmax subtracts the row maximum and adds ``1e-16`` to the
row sum; attention dropout is drawn over the edges in PyG's order (the given edges without
loops, then the loops), so with the same seed the same edges are dropped as in PyG.

Not supported, each refused in one line: edge features (``edge_dim``, ``edge_attr``, and so
``fill_value`` other than its default, which only fills edge features), bipartite
``(in_src, in_dst)`` channels and ``(x_src, x_dst)`` inputs, lazy ``in_channels=-1``, ``size``,
a torch_sparse ``SparseTensor``.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from moagcn.core.device import SparseDevice
from moagcn.errors import UserError

from moagcn.host.graphs.pyg import check_edge_index
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.nn.attention import row_softmax, sddmm, spmm_weighted
from moagcn.host.nn.autograd import AggregationOp
from moagcn.host.nn.layers import _check_channels, _DeviceConv, _reject

__all__ = ["GAT", "GATConv"]

_WHAT = "GAT attention"


def _glorot(t: torch.Tensor) -> None:
    """PyG's ``glorot``: uniform in ``±sqrt(6 / (size(-2) + size(-1)))``."""
    a = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    with torch.no_grad():
        t.uniform_(-a, a)


class _Edges:
    """The layer's edges for one ``edge_index``: PyG's order (with loops handled) and the CSR
    the device multiplies by (row = target), with the permutation between them."""

    def __init__(self, edge_index, n: int, add_loops: bool, what: str):
        src, dst, n = check_edge_index(edge_index, n, what)
        if add_loops:
            keep = src != dst
            loops = np.arange(n, dtype=np.int64)
            src = np.concatenate([src[keep], loops])
            dst = np.concatenate([dst[keep], loops])
        order = np.lexsort((src, dst))          # CSRGraph.from_edges' order: target, source
        self.csr = CSRGraph.from_edges(dst, src, n, dedupe=False, what=what)
        self.order = torch.from_numpy(order)    # CSR entry k is PyG edge order[k]
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        self.inv = torch.from_numpy(inv)        # PyG edge i is CSR entry inv[i]
        self.edge_index = torch.from_numpy(np.stack([src, dst]))


class GATConv(_DeviceConv):
    """PyG's ``GATConv`` with the attention scores (SDDMM) and the aggregation (weighted SpMM)
    on a sparse device. See the module docstring; device arguments as
    :class:`~moagcn.host.nn.layers.GCNConv`."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value="mean", bias: bool = True, residual: bool = False, *,
                 device: str | SparseDevice = "cpu", design: str = "sspmm",
                 preset: str | None = None, params: Mapping | None = None,
                 simulator: str | None = None, **kwargs):
        aggr = kwargs.pop("aggr", "add")
        if aggr != "add":
            raise UserError(f"GATConv: aggr={aggr!r} is not supported; attention weights are "
                            "summed (aggr='add', PyG's default)")
        _reject("GATConv", kwargs)
        _check_channels("GATConv", in_channels=in_channels, out_channels=out_channels)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0:
            raise UserError(f"GATConv: heads={heads!r}: give a positive int (the number of "
                            "attention heads, e.g. 8)")
        if edge_dim is not None:
            raise UserError(f"GATConv: edge_dim={edge_dim!r}: edge features are not supported "
                            "(the attention uses node features only); leave edge_dim=None")
        if not (isinstance(fill_value, str) and fill_value == "mean"):
            raise UserError(f"GATConv: fill_value={fill_value!r}: fill values are the edge "
                            "features of added self loops, and edge features are not "
                            "supported; leave the default")
        if not math.isfinite(float(negative_slope)):
            raise UserError(f"GATConv: negative_slope={negative_slope} must be finite")
        if not 0.0 <= float(dropout) <= 1.0:
            raise UserError(f"GATConv: dropout={dropout} must be in [0, 1]")
        super().__init__(device, design, preset, params, simulator)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope = bool(concat), float(negative_slope)
        self.dropout, self.add_self_loops = float(dropout), bool(add_self_loops)
        self.edge_dim, self.fill_value, self.residual = None, fill_value, bool(residual)
        total = out_channels * (heads if concat else 1)
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.res = nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = nn.Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and attention vectors, zero bias (PyG's initialisation)."""
        nn.init.xavier_uniform_(self.lin.weight)
        if self.res is not None:
            nn.init.xavier_uniform_(self.res.weight)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def _edges(self, edge_index, n: int) -> _Edges:
        version = getattr(edge_index, "_version", None)
        key = (id(edge_index), version, n)
        if self._op is None or self._op_key != key or self._op_src is not edge_index:
            self._op = _Edges(edge_index, n, self.add_self_loops, "GATConv: edge_index")
            self._op_key, self._op_src = key, edge_index
        return self._op

    def forward(self, x: torch.Tensor, edge_index, edge_attr=None, size=None,
                return_attention_weights: bool | None = None):
        if edge_attr is not None:
            raise UserError("GATConv: edge_attr is not supported (no edge features); call "
                            "conv(x, edge_index)")
        if size is not None:
            raise UserError("GATConv: size is not supported (bipartite message passing); "
                            "call conv(x, edge_index)")
        n = self._check_input(x, edge_index)
        edges = self._edges(edge_index, n)
        csr, dev = edges.csr, self.sparse_device
        h, s, t = self.project(x)
        alpha = self.attention(csr, s, t, dev)
        order, inv = edges.order.to(x.device), edges.inv.to(x.device)
        keep = None
        if self.training and self.dropout > 0 or return_attention_weights:
            alpha_edges = F.dropout(alpha[inv], p=self.dropout, training=self.training)
            alpha = alpha_edges[order]
            if self.training and self.dropout > 0 and torch.is_grad_enabled():
                # a zero weight (dropped, or a softmax that underflowed) passes no gradient to
                # the scores: dropout's is 0 where it dropped, the softmax's is α_k (...) = 0
                # where α_k = 0; so the gradient SDDMM <dZ_v, h_u> skips those pairs
                keep = alpha.detach() != 0
        out = self.combine(spmm_weighted(csr, alpha, h, dev, _WHAT, keep), x)
        if return_attention_weights:
            return out, (edges.edge_index.to(x.device), alpha_edges)
        return out

    # -- the layer's steps, also run by the parallel runtimes and DEAL on their own rows --------

    def project(self, x: torch.Tensor):
        """``h = x W`` (rows x heads x C) and its attention terms: ``s = <h, a_dst>`` (as a
        target) and ``t = <h, a_src>`` (as a source), rows x heads."""
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        return h, (h * self.att_dst).sum(-1), (h * self.att_src).sum(-1)

    def attention(self, csr: CSRGraph, s: torch.Tensor, t: torch.Tensor, device):
        """The attention weights of ``csr``'s entries (rows: targets, ``s`` per row; columns:
        sources, ``t`` per column): the scores ``<[s_v, 1], [1, t_u]>`` as an SDDMM on
        ``device``, LeakyReLU, the softmax over each row's entries."""
        e = sddmm(csr, torch.stack([s, torch.ones_like(s)], -1),
                  torch.stack([torch.ones_like(t), t], -1), device, _WHAT)
        return row_softmax(F.leaky_relu(e, self.negative_slope), csr)

    @staticmethod
    def drop_attention(alpha: torch.Tensor, keep: torch.Tensor, scale: float):
        """Attention dropout with a given keep-mask: the kept weights scaled, and the pairs
        whose weight's gradient is used (the gradient SDDMM's mask: a zero weight, dropped or
        underflowed, passes no gradient to its score)."""
        alpha = alpha * keep.to(alpha.device) * scale
        return alpha, alpha.detach() != 0

    def combine(self, out: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The aggregated heads (rows x heads x C) concatenated or averaged, plus the residual
        of ``x`` (with ``residual=True``) and the bias."""
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat \
            else out.mean(dim=1)
        if self.res is not None and x is not None:
            out = out + self.res(x)
        return out + self.bias if self.bias is not None else out

    def __repr__(self) -> str:
        return (f"GATConv({self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"device={self.sparse_device.name})")


class GAT(nn.Module):
    """PyTorch Geometric's example GAT (``examples/gat.py``), two :class:`GATConv` layers (or
    ``conv``, e.g. PyG's own ``GATConv``)::

        x = dropout(x, p);  x = elu(conv1(x))       conv1: in -> hidden x heads, concatenated
        x = dropout(x, p);  logits = conv2(x)       conv2: -> classes, one head, concat=False

    What all-node inference reads (as of :class:`~moagcn.host.nn.models.GNN`): ``kind``
    (``"gat"``), ``dims`` (``[in, hidden * heads, classes]``), ``n_layers``, ``convs``, ``norms``
    (None) and ``label_embedding`` (False)."""

    kind = "gat"
    norms = None
    label_embedding = False
    #: (the partition-parallel runtime's interface, :meth:`aggregation` and :meth:`pad_input`
    #: too) no self term beside the aggregation
    uses_self = False

    def __init__(self, in_features: int, hidden: int, heads: int, n_classes: int,
                 dropout: float = 0.6, conv=None, **kw):
        super().__init__()
        conv = conv or GATConv
        self.p = float(dropout)
        self.conv1 = conv(in_features, hidden, heads=heads, dropout=dropout, **kw)
        self.conv2 = conv(hidden * heads, n_classes, heads=1, concat=False, dropout=dropout,
                          **kw)
        self.dims = [in_features, hidden * heads, n_classes]
        self.n_layers = 2

    @staticmethod
    def head_shapes(hidden: int, heads: int, n_classes: int) -> list[tuple[int, int]]:
        """Each layer's ``(heads, C)``: ``heads`` heads of ``hidden``, then one head of the
        classes (what the performance model's GAT step composes)."""
        return [(int(heads), int(hidden)), (1, int(n_classes))]

    @property
    def convs(self) -> list:
        return [self.conv1, self.conv2]

    def aggregation(self, graph) -> AggregationOp:
        """The graph every layer attends over (:meth:`AggregationOp.attention`)."""
        return AggregationOp.attention(graph)

    def pad_input(self, X):
        """The input features as they are (a GAT takes no label columns)."""
        return X

    def use_edge_weights(self, graph, weights) -> None:
        """A GAT takes no edge weights (as PyG's ``GATConv``)."""
        if weights is not None:
            raise UserError("--model gat: the dataset has edge weights and GAT takes none (as "
                            "PyG's GATConv); use --model gcn, or drop the weights")

    def dense_macs(self, layer: int, n_in: int, input_grad: bool = True) -> int:
        """Multiply-accumulates of layer ``layer``'s projection of ``n_in`` rows, forward and
        backward (the weight gradient, and the input gradient when ``input_grad``)."""
        d_in, d_out = self.dims[layer], self.convs[layer].lin.out_features
        return (3 if input_grad else 2) * n_in * d_in * d_out

    def forward(self, x, edge_index):
        x = F.dropout(x, p=self.p, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=self.p, training=self.training)
        return self.conv2(x, edge_index)
