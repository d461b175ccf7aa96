"""Autograd functions that send both aggregation passes to a sparse device.

A GNN aggregation here is ``Â = diag(r) · A · diag(c)`` with A binary (what the accelerator
holds) and the degree normalisation as two row scalings on the host (on a weighted graph ``A``
carries one value per entry, ``values``, and both products are weighted SpMMs with the same
output masks, which only a device with ``"weighted"`` in its ``entry_ops`` runs: ``cpu``, and
``model``/``rtl`` of the weighted S-SpMM, ``--param weighted=true``):

- GCN: ``A + I`` with ``r = c = d^-1/2``;
- GraphSAGE-mean: ``A`` with ``r = 1/deg``, ``c = 1``;
- GIN (sum, ε = 0): ``A + I`` with no scaling.

Forward (MixGCN Eq. 4 with the dropout mask as output mask)::

    Z = s · r ⊙ S-SpMM(A, c ⊙ relu?(P), M_drop)        s = 1 / (1 - p)

Backward (the ReLU mask of the previous layer as output mask)::

    dP = c ⊙ S-SpMM(Aᵀ, s · r ⊙ (G ⊙ M_drop), 1[P > 0])

With the dropout on the layer's input instead (``in_mask``; PyG's and Kipf & Welling's
placement, ``moagcn train --dropout-at input``) the forward product has no output mask and the
backward one masks by both::

    Z  = r ⊙ S-SpMM(A, c ⊙ s · (relu?(P) ⊙ M_drop), none)
    dP = s · c ⊙ S-SpMM(Aᵀ, r ⊙ G, M_drop ⊙ 1[P > 0])

Row scaling commutes with an element-wise mask, so the device only ever sees a binary matrix,
a feature block and a bitmap. ``relu?`` is applied when the input is the previous layer's
pre-activation (every layer after the first); then the backward product directly yields the
gradient of that pre-activation. On a design with a dense datapath (HyScale), the dense layers
can run there too, both passes (:func:`linears_on_device`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from moagcn.errors import UserError

from moagcn.host.devices.select import SparseDevice
from moagcn.host.graphs.ops import CSRGraph, gcn_scaling, mean_scaling


@dataclass(eq=False)
class AggregationOp:
    """``Â = diag(row_scale) · adj · diag(col_scale)`` (``None`` scale = all ones).

    Members
    -------
    adj : CSRGraph
        The binary matrix the sparse device multiplies by (rows = outputs).
    row_scale, col_scale : numpy.ndarray or None
        float32 per output row / per input row.
    kind : str
        ``gcn``, ``mean`` or ``sum`` (informative).
    values : numpy.ndarray or None
        float32 per stored entry of ``adj`` (edge weights; None: binary).
    """

    adj: CSRGraph
    row_scale: np.ndarray | None = None
    col_scale: np.ndarray | None = None
    kind: str = "custom"
    values: np.ndarray | None = None

    def __post_init__(self):
        for name, v, n in (("row_scale", self.row_scale, self.adj.n_rows),
                           ("col_scale", self.col_scale, self.adj.n_cols),
                           ("values", self.values, self.adj.nnz)):
            if v is not None and np.shape(v) != (n,):
                raise UserError(f"AggregationOp: {name} has shape {np.shape(v)}; expected ({n},)")
        self._torch: dict = {}

    @classmethod
    def gcn_weighted(cls, graph: CSRGraph, weights) -> "AggregationOp":
        """``D^-1/2 (A_w + I) D^-1/2`` exactly as PyG's ``gcn_norm`` builds it: every self loop
        removed and one per node added, of weight 1 or, where the node had loops, the weight
        of its last one (``add_remaining_self_loops``); ``D`` the weighted in-degree (row sums),
        a node of degree 0 scaled by 0. ``weights``: float32 per stored entry of ``graph``."""
        w = np.asarray(weights, dtype=np.float32)
        if w.shape != (graph.nnz,):
            raise UserError(f"edge weights have shape {w.shape}; expected ({graph.nnz},), one "
                            "per stored entry")
        if not np.isfinite(w).all():
            k = int(np.argmax(~np.isfinite(w)))
            raise UserError(f"edge weight {k} is {w[k]}; give finite weights")
        n = graph.n_nodes
        rows, cols = graph.row_ids(), graph.indices
        loop = rows == cols
        loop_w = np.ones(n, dtype=np.float32)
        loop_w[rows[loop]] = w[loop]            # repeated loops: the last one's weight
        ids = np.arange(n, dtype=np.int64)
        r = np.concatenate([rows[~loop], ids])
        c = np.concatenate([cols[~loop], ids])
        v = np.concatenate([w[~loop], loop_w])[np.lexsort((c, r))]
        looped = CSRGraph.from_edges(r, c, n, dedupe=False)
        deg = np.bincount(looped.row_ids(), weights=v.astype(np.float64), minlength=n)
        if (deg < 0).any():
            k = int(np.argmax(deg < 0))
            raise UserError(f"node {k} has weighted in-degree {deg[k]:g} (< 0), so D^-1/2 is "
                            "undefined; give weights whose in-degree sums are >= 0")
        with np.errstate(divide="ignore"):
            d = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0).astype(np.float32)
        return cls(looped, d, d, "gcn", values=v)

    def values_torch(self, transpose: bool, device) -> torch.Tensor:
        """``values`` as an ``nnz x 1`` tensor, in the entry order of ``adj`` or of
        ``adj.transpose()``."""
        key = ("values", transpose, str(device))
        if key not in self._torch:
            v = self.values
            if transpose:
                v = v[np.lexsort((self.adj.row_ids(), self.adj.indices))]
            self._torch[key] = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)
                                                ).reshape(-1, 1).to(device)
        return self._torch[key]

    @classmethod
    def gcn(cls, graph: CSRGraph) -> "AggregationOp":
        """``D^-1/2 (A + I) D^-1/2`` (Kipf & Welling)."""
        looped, d = gcn_scaling(graph)
        return cls(looped, d, d, "gcn")

    @classmethod
    def mean(cls, graph: CSRGraph) -> "AggregationOp":
        """Mean over neighbours (GraphSAGE-mean): ``D^-1 A``, self loops removed."""
        plain = graph.without_self_loops()
        return cls(plain, mean_scaling(plain), None, "mean")

    @classmethod
    def sum_with_self(cls, graph: CSRGraph) -> "AggregationOp":
        """``A + I`` unscaled (GIN with ε = 0)."""
        return cls(graph.with_self_loops(), None, None, "sum")

    @classmethod
    def attention(cls, graph: CSRGraph) -> "AggregationOp":
        """The graph a GAT attends over, as PyG's ``GATConv`` builds it: the stored self loops
        removed and one per node added; binary, unscaled (the attention weights are the
        values)."""
        return cls(graph.without_self_loops().with_self_loops(), None, None, "gat")

    def block(self, rows, cols) -> "AggregationOp":
        """The operator restricted to output ``rows`` and input ``cols`` (ascending ids)."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        values = None
        if self.values is not None:     # the rows' entries, in order (block keeps them all)
            values = self.values[self.adj.row_entries(rows)]
        return AggregationOp(self.adj.block(rows, cols),
                             None if self.row_scale is None else self.row_scale[rows],
                             None if self.col_scale is None else self.col_scale[cols], self.kind,
                             values)

    def scale(self, which: str, device) -> torch.Tensor | None:
        """The row (``"row"``) or column (``"col"``) scale as an N x 1 tensor on ``device``."""
        v = self.row_scale if which == "row" else self.col_scale
        if v is None:
            return None
        key = (which, str(device))
        if key not in self._torch:
            self._torch[key] = torch.as_tensor(v, dtype=torch.float32).reshape(-1, 1).to(device)
        return self._torch[key]

    def torch_sparse(self, device="cpu") -> torch.Tensor:
        """Â as a torch sparse COO tensor with its real values (for plain torch references)."""
        key = ("coo", str(device))
        if key not in self._torch:
            rows, cols = self.adj.row_ids(), self.adj.indices
            vals = (np.ones(self.adj.nnz, dtype=np.float32) if self.values is None
                    else self.values.astype(np.float32))
            if self.row_scale is not None:
                vals = vals * self.row_scale[rows]
            if self.col_scale is not None:
                vals = vals * self.col_scale[cols]
            idx = torch.from_numpy(np.stack([rows, cols]))
            self._torch[key] = torch.sparse_coo_tensor(
                idx, torch.from_numpy(vals), self.adj.shape,
                check_invariants=False).coalesce().to(device)  # CSRGraph validated it
        return self._torch[key]

    def dense(self) -> np.ndarray:
        """Â as a dense float64 array (tests only)."""
        A = self.adj.to_scipy(np.float64)
        if self.values is not None:
            A.data = self.values.astype(np.float64)
        A = A.toarray()
        if self.row_scale is not None:
            A = self.row_scale.astype(np.float64)[:, None] * A
        if self.col_scale is not None:
            A = A * self.col_scale.astype(np.float64)[None, :]
        return A


class PhaseTimer:
    """Wall time per phase (``aggregate``, ``communicate``, ...), accumulated across calls."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def reset(self) -> None:
        self.seconds = {}


def _rowscale(x: torch.Tensor, s: torch.Tensor | None) -> torch.Tensor:
    return x if s is None else x * s


def _product(device: SparseDevice, op: AggregationOp, H: torch.Tensor, mask,
             transpose: bool = False) -> torch.Tensor:
    """``(A H) ⊙ M`` (or ``Aᵀ``) on ``device``: the S-SpMM of the binary ``adj``, or with
    ``op.values`` the weighted SpMM (which the binary S-SpMM devices refuse in one line)."""
    adj = op.adj.transpose() if transpose else op.adj
    if op.values is None:
        return device.sspmm(adj, H, mask)
    # the mask goes to the device (an accelerator skips the masked outputs' work, as the
    # binary S-SpMM does), and is applied here again so a masked output is +0 on any device
    Z = device.spmm_weighted(adj, op.values_torch(transpose, H.device), H.unsqueeze(1),
                             "edge weights",
                             mask=None if mask is None else mask.unsqueeze(1)).squeeze(1)
    return Z if mask is None else torch.where(mask, Z, torch.zeros((), dtype=Z.dtype))


class SSpmmAggregate(torch.autograd.Function):
    """``Z = s · Â relu?(P) ⊙ M`` forward and ``dP = Âᵀ (s · G ⊙ M) ⊙ 1[P > 0]`` backward,
    both computed by ``device.sspmm``. Use through :func:`aggregate`."""

    @staticmethod
    def forward(ctx, P, op: AggregationOp, device: SparseDevice, mask, out_scale: float,
                relu_input: bool, timer: PhaseTimer | None, in_mask, in_scale: float):
        t0 = time.perf_counter()
        H = torch.relu(P) if relu_input else P
        if in_mask is not None:
            H = H * in_mask * in_scale if in_scale != 1.0 else H * in_mask
        Hs = _rowscale(H, op.scale("col", P.device))
        Z = _product(device, op, Hs, mask)
        r = op.scale("row", Z.device)
        Z = _rowscale(Z, r)
        if out_scale != 1.0:
            Z = Z * out_scale
        ctx.op, ctx.device, ctx.out_scale, ctx.relu_input, ctx.timer, ctx.in_scale = \
            op, device, out_scale, relu_input, timer, in_scale
        ctx.save_for_backward(P if relu_input else None, mask, in_mask)
        if timer is not None:
            timer.add("aggregate", time.perf_counter() - t0)
        return Z

    @staticmethod
    def backward(ctx, G):
        if not ctx.needs_input_grad[0]:
            return (None,) * 9
        t0 = time.perf_counter()
        P, mask, in_mask = ctx.saved_tensors
        dP = aggregate_backward(ctx.op, ctx.device, G, P, mask, ctx.out_scale, ctx.relu_input,
                                in_mask, ctx.in_scale)
        if ctx.timer is not None:
            ctx.timer.add("aggregate", time.perf_counter() - t0)
        return dP, None, None, None, None, None, None, None, None


def aggregate_backward(op: AggregationOp, device: SparseDevice, G: torch.Tensor,
                       P: torch.Tensor | None, mask=None, out_scale: float = 1.0,
                       relu_input: bool = False, in_mask=None,
                       in_scale: float = 1.0) -> torch.Tensor:
    """The gradient of :func:`aggregate`'s input given its output's gradient ``G``: the
    transposed product on ``device`` (the module docstring's backward formulas). ``P`` is the
    forward input (only its sign is used, with ``relu_input``); the masks and scales are the
    forward's."""
    G = _rowscale(G, op.scale("row", G.device))
    if out_scale != 1.0:
        G = G * out_scale
    if mask is not None:
        G = G * mask
    relu_mask = (P > 0) if relu_input else None
    if in_mask is not None:
        relu_mask = in_mask if relu_mask is None else relu_mask & in_mask
    dP = _product(device, op, G.contiguous(), relu_mask, transpose=True)
    dP = _rowscale(dP, op.scale("col", dP.device))
    if in_mask is not None and in_scale != 1.0:
        dP = dP * in_scale
    return dP


def aggregate(op: AggregationOp, P: torch.Tensor, device: SparseDevice, mask=None,
              out_scale: float = 1.0, relu_input: bool = False,
              timer: PhaseTimer | None = None, in_mask=None,
              in_scale: float = 1.0) -> torch.Tensor:
    """S-SpMM aggregation with autograd; see the module docstring for the formulas.

    Parameters
    ----------
    op : AggregationOp
        ``Â`` (binary adjacency plus row scalings).
    P : torch.Tensor
        Input features (``relu_input=False``) or the previous layer's pre-activation.
    device : SparseDevice
        Runs both the forward and the backward product.
    mask : torch.Tensor of bool, optional
        Output mask (the dropout keep-mask in training); ``None`` computes every output.
    out_scale : float
        Multiplies the result (``1 / (1 - p)`` for inverted dropout).
    in_mask : torch.Tensor of bool, optional
        Dropout keep-mask of the (activated) input, ``n_cols x F``; the kept inputs are
        multiplied by ``in_scale``.
    """
    if P.dim() != 2 or P.shape[0] != op.adj.n_cols:
        raise UserError(f"aggregate: input has shape {tuple(P.shape)}; the operator needs "
                        f"{op.adj.n_cols} rows")
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool, device=P.device)
        if tuple(mask.shape) != (op.adj.n_rows, P.shape[1]):
            raise UserError(f"aggregate: mask has shape {tuple(mask.shape)}; expected "
                            f"{(op.adj.n_rows, P.shape[1])}")
    if in_mask is not None:
        in_mask = torch.as_tensor(in_mask, dtype=torch.bool, device=P.device)
        if tuple(in_mask.shape) != tuple(P.shape):
            raise UserError(f"aggregate: in_mask has shape {tuple(in_mask.shape)}; expected "
                            f"the input's {tuple(P.shape)}")
    return SSpmmAggregate.apply(P.contiguous(), op, device, mask, float(out_scale),
                                bool(relu_input), timer, in_mask, float(in_scale))


def reference_aggregate(op: AggregationOp, P: torch.Tensor, mask=None, out_scale: float = 1.0,
                        relu_input: bool = False) -> torch.Tensor:
    """The same aggregation in plain torch (sparse matmul, relu, mask): the reference path."""
    H = torch.relu(P) if relu_input else P
    Z = torch.sparse.mm(op.torch_sparse(P.device), H)
    if mask is not None:
        Z = Z * mask
    return Z * out_scale if out_scale != 1.0 else Z


class _LinearOnDevice(torch.autograd.Function):
    """``y = x Wᵀ + b`` (an ``nn.Linear``) with all three products on an accelerator's dense
    datapath (:meth:`moagcn.sim.device.AcceleratorDevice.linear`): forward ``x Wᵀ``, backward
    ``dx = g W`` and ``dW = gᵀ x``; the bias gradient (a column sum) on the host."""

    @staticmethod
    def forward(ctx, x, weight, bias, device, timer):
        t0 = time.perf_counter()
        xn = x.detach().cpu().numpy()
        wn = weight.detach().cpu().numpy()
        bn = None if bias is None else bias.detach().cpu().numpy()
        y = torch.from_numpy(device.linear(xn, np.ascontiguousarray(wn.T), bn)).to(x.device)
        ctx.device, ctx.timer = device, timer
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, weight)
        if timer is not None:
            timer.add("aggregate", time.perf_counter() - t0)
        return y

    @staticmethod
    def backward(ctx, g):
        t0 = time.perf_counter()
        x, weight = ctx.saved_tensors
        gn = np.ascontiguousarray(g.detach().cpu().numpy(), dtype=np.float32)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = torch.from_numpy(ctx.device.linear(gn, weight.detach().cpu().numpy())
                                  ).to(g.device)
        if ctx.needs_input_grad[1]:
            dw = torch.from_numpy(ctx.device.linear(np.ascontiguousarray(gn.T),
                                                    x.detach().cpu().numpy())).to(g.device)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = g.sum(0)
        if ctx.timer is not None:
            ctx.timer.add("aggregate", time.perf_counter() - t0)
        return dx, dw, db, None, None


def linears_on_device(module: torch.nn.Module, device, timer: PhaseTimer | None = None) -> int:
    """Make every ``nn.Linear`` in ``module`` compute on ``device``'s dense datapath, forward
    and backward (:class:`_LinearOnDevice`); the parameters stay where they are (an optimiser
    or a gradient synchronizer sees no difference). Device time is counted under the timer's
    ``aggregate`` phase, with the aggregations. Returns how many layers were moved."""
    count = 0
    for lin in module.modules():
        if isinstance(lin, torch.nn.Linear):
            def forward(x, lin=lin):
                return _LinearOnDevice.apply(x, lin.weight, lin.bias, device, timer)
            lin.forward = forward
            count += 1
    return count
