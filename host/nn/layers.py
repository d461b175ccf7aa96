"""Graph convolutions with PyTorch Geometric's interface, aggregated on a moagcn sparse device.

``GCNConv``, ``SAGEConv`` and ``GINConv`` take PyG's constructor arguments (for the options they
support) and PyG's call ``conv(x, edge_index)``, and keep PyG's parameter names, so a PyG model's
``state_dict`` loads into the moagcn layer unchanged. The neighbour sum of every layer, forward
and backward, runs on a sparse device (:mod:`moagcn.host.devices.select`): ``cpu`` (torch), ``model``
(an accelerator's bit-exact golden model and cycle model) or ``rtl`` (its RTL in a simulator),
through :func:`moagcn.host.nn.autograd.aggregate`. Without edge weights the device only sees the
binary adjacency; degree normalisation is a pair of row scalings on the host, exactly as in
``moagcn train``. ``GCNConv(x, edge_index, edge_weight)`` normalises as PyG's ``gcn_norm`` does
(weighted degrees, added self loops of weight 1) and aggregates with a weighted SpMM
(:mod:`moagcn.host.nn.attention`): the ``cpu`` device runs it, differentiable in the weights too;
``model`` / ``rtl`` of the binary S-SpMM refuse it in one line.

Conventions are PyG's: ``edge_index[0]`` are sources, ``edge_index[1]`` targets, and a target
sums its incoming messages (repeated edges count twice). ``GCNConv`` adds a self loop to every
node that lacks one (a node with several keeps one), normalises by ``D^-1/2 (A + I) D^-1/2``
with ``D`` the in-degree, transforms before aggregating and adds the bias after. ``SAGEConv``
averages incoming messages (isolated nodes get 0; self loops in ``edge_index`` are messages like
any other), then ``lin_l``, plus ``lin_r`` of the root. ``GINConv`` sums them, adds
``(1 + eps) x`` and applies its ``nn``.

Example::

    from moagcn.nn import GCNConv
    conv1 = GCNConv(dataset_features, 16, device="model")          # the default S-SpMM preset
    conv2 = GCNConv(16, n_classes, device=conv1.sparse_device)     # share one device
    h = conv2(torch.relu(conv1(x, edge_index)), edge_index)
    conv1.sparse_device.counters                                    # cycles, adds, tiles

Options PyG has and these layers do not (``improved``, lazy ``in_channels=-1``,
bipartite ``(x_src, x_dst)`` inputs, aggregations other than mean/sum, a ``flow`` other than
``source_to_target``) raise a :class:`~moagcn.errors.UserError` (a ``ValueError``) naming the
option and what to do instead.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from moagcn.core.device import DEVICE_KINDS, SparseDevice
from moagcn.errors import UserError

from moagcn.host.nn.autograd import AggregationOp, aggregate
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph, mean_scaling
from moagcn.host.graphs.pyg import check_edge_index, from_edge_index
from moagcn.host.nn.attention import spmm_weighted

__all__ = ["GCNConv", "SAGEConv", "GINConv", "make_sparse_device"]


def make_sparse_device(device: str | SparseDevice = "cpu", design: str = "sspmm",
                       preset: str | None = None, params: Mapping[str, str] | None = None,
                       simulator: str | None = None) -> SparseDevice:
    """A sparse device for a layer: an existing :class:`SparseDevice` as is, or ``cpu`` /
    ``model`` / ``rtl`` of ``design`` with ``preset`` and ``params`` (``KEY=VALUE`` strings or
    values, as ``--param``)."""
    if isinstance(device, SparseDevice):
        return device
    if not isinstance(device, str) or device not in DEVICE_KINDS:
        raise UserError(f"device={device!r}: give one of {', '.join(map(repr, DEVICE_KINDS))} "
                        "or a SparseDevice (this is where the aggregation runs; put the dense "
                        "parameters on a GPU with .to('cuda'))")
    kw = {} if simulator is None else {"simulator": simulator}
    choice = AcceleratorChoice(device, design, preset,
                               {k: str(v) for k, v in (params or {}).items()}, **kw)
    choice.config()  # a bad design, preset or parameter is named here
    return choice.make()


def _reject(layer: str, kwargs: dict) -> None:
    for key, value in kwargs.items():
        if key == "flow" and value == "source_to_target":
            continue
        if key == "aggr":
            raise UserError(f"{layer}: aggr={value!r} is not supported here; use the default")
        hint = {"flow": "only flow='source_to_target' (PyG's default) is supported; "
                        "transpose edge_index instead",
                "node_dim": "node features must be rows (node_dim=-2, PyG's default)",
                "edge_dim": "edge features are not supported (the devices multiply by a "
                            "binary adjacency)"}.get(key, "moagcn's layers do not support it")
        raise UserError(f"{layer}: option {key}={value!r}: {hint}")


def _check_channels(layer: str, **channels) -> None:
    for name, v in channels.items():
        if isinstance(v, (tuple, list)):
            raise UserError(f"{layer}: {name}={v!r}: bipartite (source, target) channel pairs "
                            "are not supported; give one int")
        if not isinstance(v, int) or v <= 0:
            raise UserError(f"{layer}: {name}={v!r}: give a positive int (lazy "
                            "initialisation with -1 is not supported)")


class _DeviceConv(nn.Module):
    """Shared plumbing: the sparse device, input checks and the cached operator."""

    def __init__(self, device, design, preset, params, simulator):
        super().__init__()
        self.sparse_device = make_sparse_device(device, design, preset, params, simulator)
        self._op_key = None
        self._op: AggregationOp | None = None
        self._op_src = None

    def _check_input(self, x, edge_index, edge_weight=None) -> int:
        name = type(self).__name__
        if isinstance(x, (tuple, list)):
            raise UserError(f"{name}: x is a pair (x_src, x_dst); bipartite message passing "
                            "is not supported, give one node-feature tensor")
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise UserError(f"{name}: x must be a 2-D float tensor (nodes x channels), got "
                            f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x)}")
        if not torch.is_floating_point(x):
            raise UserError(f"{name}: x has dtype {x.dtype}; use a float tensor (x.float())")
        if isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
            raise UserError(f"{name}: edge_index is a sparse {edge_index.layout} tensor; pass a "
                            "2 x E LongTensor of (source, target) ids")
        if not isinstance(edge_index, (torch.Tensor, np.ndarray)):
            raise UserError(f"{name}: edge_index must be a 2 x E LongTensor, got "
                            f"{type(edge_index).__name__} (a torch_sparse SparseTensor is not "
                            "supported; use edge_index)")
        if edge_weight is not None:
            raise UserError(f"{name}: edge_weight is not supported (PyG's {name} takes none "
                            "either); use GCNConv(..., edge_weight) for a weighted graph")
        return int(x.shape[0])

    def _operator(self, edge_index, n: int) -> AggregationOp:
        """The layer's operator for ``edge_index`` on ``n`` nodes, reused while the same tensor
        (same object, unchanged in place) comes back."""
        version = getattr(edge_index, "_version", None)
        key = (id(edge_index), version, n)
        if self._op is None or self._op_key != key or self._op_src is not edge_index:
            graph = from_edge_index(edge_index, n, what=f"{type(self).__name__}: edge_index")
            self._op = self._make_op(graph)
            self._op_key, self._op_src = key, edge_index
        return self._op

    def _make_op(self, graph: CSRGraph) -> AggregationOp:
        raise NotImplementedError

    def _aggregate(self, x, edge_index, n):
        return aggregate(self._operator(edge_index, n), x, self.sparse_device)


class GCNConv(_DeviceConv):
    """PyG's ``GCNConv`` (Kipf & Welling) with the aggregation on a sparse device.

    Parameters
    ----------
    in_channels, out_channels : int
    improved : bool
        Must be False (self loops of weight 2 are not supported).
    cached : bool
        Accepted for compatibility; the operator is always reused while ``edge_index`` is the
        same unmodified tensor.
    add_self_loops : bool, optional
        Default: ``normalize``. Adds a loop to every node without one (PyG's
        ``add_remaining_self_loops``).
    normalize : bool
        ``D^-1/2 Â D^-1/2`` (nodes without incoming edges get 0) or, when False, the plain sum.
    bias : bool
    device : str or SparseDevice
        ``cpu``, ``model`` or ``rtl`` (or a device to share between layers).
    design, preset, params, simulator
        The accelerator for ``model`` / ``rtl`` (see ``moagcn train --design/--preset/--param``).
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, bias: bool = True, *,
                 device: str | SparseDevice = "cpu", design: str = "sspmm",
                 preset: str | None = None, params: Mapping | None = None,
                 simulator: str | None = None, **kwargs):
        _reject("GCNConv", kwargs)
        _check_channels("GCNConv", in_channels=in_channels, out_channels=out_channels)
        if improved:
            raise UserError("GCNConv: improved=True (self loops of weight 2) is not supported; "
                            "the sparse devices multiply by a binary adjacency")
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise UserError("GCNConv: add_self_loops=True needs normalize=True (as in PyG); "
                            "add the loops to edge_index yourself for a plain sum")
        super().__init__(device, design, preset, params, simulator)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = False, cached
        self.add_self_loops, self.normalize = bool(add_self_loops), bool(normalize)
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weight, zero bias (PyG's initialisation)."""
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def _make_op(self, graph):
        if self.add_self_loops:
            return AggregationOp.gcn(graph)  # A + I (one loop per node), D^-1/2 on both sides
        if not self.normalize:
            return AggregationOp(graph, None, None, "sum")
        deg = graph.degrees().astype(np.float64)
        with np.errstate(divide="ignore"):
            d = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1)), 0.0).astype(np.float32)
        return AggregationOp(graph, d, d, "gcn")

    def forward(self, x: torch.Tensor, edge_index, edge_weight=None) -> torch.Tensor:
        n = self._check_input(x, edge_index)
        if edge_weight is None:
            out = self._aggregate(self.lin(x), edge_index, n)
        else:
            out = self._aggregate_weighted(self.lin(x), edge_index, edge_weight, n)
        return out if self.bias is None else out + self.bias

    def _weighted_edges(self, edge_index, n: int):
        """``(csr, order, src, dst, loops, loop_nodes)`` of ``edge_index`` for weighted aggregation: the
        edges as PyG's ``gcn_norm`` arranges them (with ``add_self_loops``: the edges that are
        not loops, then one loop per node), the CSR the device multiplies by and ``order``
        (CSR entry k is edge ``order[k]``); ``loops`` the given edges that are loops, ``loop_nodes`` their nodes."""
        version = getattr(edge_index, "_version", None)
        key = (id(edge_index), version, n)
        cached = getattr(self, "_wedges", None)
        if cached is not None and cached[0] == key and cached[1] is edge_index:
            return cached[2]
        src, dst, n = check_edge_index(edge_index, n, "GCNConv: edge_index")
        loops = src == dst
        loop_nodes = dst[loops]
        if self.add_self_loops:
            src = np.concatenate([src[~loops], np.arange(n)])
            dst = np.concatenate([dst[~loops], np.arange(n)])
        order = np.lexsort((src, dst))
        csr = CSRGraph.from_edges(dst, src, n, dedupe=False, what="GCNConv: edge_index")
        value = (csr, torch.from_numpy(order), torch.from_numpy(src), torch.from_numpy(dst),
                 torch.from_numpy(loops), torch.from_numpy(loop_nodes))
        self._wedges = (key, edge_index, value)
        return value

    def _aggregate_weighted(self, h, edge_index, edge_weight, n):
        """PyG's ``gcn_norm`` with weights, then the weighted SpMM on the sparse device:
        ``add_remaining_self_loops`` (a node's loop keeps its weight, the last one where it has
        several; the others get 1), ``deg`` the weighted in-degree, ``dis[src] w dis[dst]``."""
        if not isinstance(edge_weight, torch.Tensor) or not torch.is_floating_point(edge_weight):
            raise UserError("GCNConv: edge_weight must be a float tensor with one weight per "
                            f"edge, got {type(edge_weight).__name__}"
                            + (f" of dtype {edge_weight.dtype}"
                               if isinstance(edge_weight, torch.Tensor) else ""))
        csr, order, src, dst, loops, loop_nodes = self._weighted_edges(edge_index, n)
        E = loops.numel()
        if tuple(edge_weight.shape) != (E,):
            raise UserError(f"GCNConv: edge_weight has shape {tuple(edge_weight.shape)}; "
                            f"expected ({E},), one weight per edge of edge_index")
        if not bool(torch.isfinite(edge_weight).all()):
            k = int(torch.nonzero(~torch.isfinite(edge_weight))[0])
            raise UserError(f"GCNConv: edge_weight[{k}] = {float(edge_weight[k])} is not "
                            "finite; give finite weights")
        dev = h.device
        w = edge_weight.to(dev, h.dtype)
        loops, src, dst = loops.to(dev), src.to(dev), dst.to(dev)
        if self.add_self_loops:
            loop_w = torch.ones(n, dtype=w.dtype, device=dev)
            loop_w[loop_nodes.to(dev)] = w[loops]
            w = torch.cat([w[~loops], loop_w])
        if self.normalize:
            deg = torch.zeros(n, dtype=w.dtype, device=dev).index_add(0, dst, w)
            if bool((deg < 0).any()):
                v = int(torch.nonzero(deg < 0)[0])
                raise UserError(f"GCNConv: node {v} has weighted in-degree {float(deg[v]):g} "
                                "(< 0), so D^-1/2 is undefined; give weights whose in-degree "
                                "sums are >= 0")
            dis = deg.pow(-0.5)
            dis = dis.masked_fill(dis == float("inf"), 0.0)
            w = dis[src] * w * dis[dst]
        out = spmm_weighted(csr, w[order.to(dev)].unsqueeze(-1), h.unsqueeze(1),
                            self.sparse_device, "edge weights")
        return out.squeeze(1)

    def __repr__(self) -> str:
        return (f"GCNConv({self.in_channels}, {self.out_channels}, "
                f"device={self.sparse_device.name})")


class SAGEConv(_DeviceConv):
    """PyG's ``SAGEConv`` (GraphSAGE) with the aggregation on a sparse device.

    ``out = lin_l(aggr_j x_j) + lin_r(x_i)``, optionally L2-normalised; ``aggr`` is ``mean``
    (default) or ``sum``/``add``. ``project=True`` first maps the neighbours' ``x`` through
    ``relu(lin(x))`` (the root term keeps the raw ``x``, as in PyG).
    Other arguments as :class:`GCNConv`.
    """

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True, *, device: str | SparseDevice = "cpu",
                 design: str = "sspmm", preset: str | None = None,
                 params: Mapping | None = None, simulator: str | None = None, **kwargs):
        _reject("SAGEConv", kwargs)
        _check_channels("SAGEConv", in_channels=in_channels, out_channels=out_channels)
        if aggr not in ("mean", "sum", "add"):
            raise UserError(f"SAGEConv: aggr={aggr!r} is not supported; the sparse devices "
                            "compute sums, so use 'mean' or 'sum'")
        super().__init__(device, design, preset, params, simulator)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr = "sum" if aggr == "add" else aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        if project:
            self.lin = nn.Linear(in_channels, in_channels, bias=True)
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        if root_weight:
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def reset_parameters(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.reset_parameters()

    def _make_op(self, graph):
        if self.aggr == "mean":
            return AggregationOp(graph, mean_scaling(graph), None, "mean")
        return AggregationOp(graph, None, None, "sum")

    def forward(self, x: torch.Tensor, edge_index, edge_weight=None) -> torch.Tensor:
        n = self._check_input(x, edge_index, edge_weight)
        x_root = x
        if self.project:
            x = torch.relu(self.lin(x))
        out = self.lin_l(self._aggregate(x, edge_index, n))
        if self.root_weight:
            out = out + self.lin_r(x_root)  # the root's own features, not projected
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return (f"SAGEConv({self.in_channels}, {self.out_channels}, aggr={self.aggr}, "
                f"device={self.sparse_device.name})")


class GINConv(_DeviceConv):
    """PyG's ``GINConv``: ``nn((1 + eps) x_i + sum_j x_j)`` with the sum on a sparse device.

    Parameters
    ----------
    nn : torch.nn.Module
        The update applied after the aggregation (e.g. a two-layer MLP).
    eps : float
    train_eps : bool
        Makes ``eps`` a parameter.
    Other arguments as :class:`GCNConv`.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False, *,
                 device: str | SparseDevice = "cpu", design: str = "sspmm",
                 preset: str | None = None, params: Mapping | None = None,
                 simulator: str | None = None, **kwargs):
        _reject("GINConv", kwargs)
        if not callable(nn):
            raise UserError(f"GINConv: nn must be a torch module (e.g. an MLP), got "
                            f"{type(nn).__name__}")
        if not math.isfinite(float(eps)):
            raise UserError(f"GINConv: eps={eps} must be finite")
        super().__init__(device, design, preset, params, simulator)
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for m in self.nn.modules() if isinstance(self.nn, torch.nn.Module) else ():
            if m is not self.nn and hasattr(m, "reset_parameters"):
                m.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def _make_op(self, graph):
        return AggregationOp(graph, None, None, "sum")

    def forward(self, x: torch.Tensor, edge_index, edge_weight=None) -> torch.Tensor:
        n = self._check_input(x, edge_index, edge_weight)
        out = self._aggregate(x, edge_index, n) + (1 + self.eps) * x
        return self.nn(out)

    def __repr__(self) -> str:
        return f"GINConv(nn={self.nn}, device={self.sparse_device.name})"
