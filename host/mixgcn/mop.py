"""Mixture of Parallelism (MixGCN Alg. 2): :class:`MoPRuntime`.

Per layer ``l`` with aggregation width ``d_l``: sparse device ``i`` aggregates feature columns
``[d_l i / m, d_l (i+1) / m)`` for all N nodes; an all-to-all regroups by node; dense worker
``j`` updates nodes ``[N j / m, N (j+1) / m)`` with the full weights; an all-to-all sends the new
pre-activations back as feature slices. The input features are split by columns once, before
training. Work is balanced by construction (Prop. 3.3) and the bytes of an all-to-all of width
``w`` are ``4 (N w - Σ_i n_i w_i)`` whatever the graph (Prop. 3.4), so they approach ``4 N w`` as
``m`` grows. With work shares (vGNN's non-uniform split) the column and row ranges follow them.

**GAT under MoP** (beyond MixGCN, whose Sec. 5 leaves attention out; :meth:`MoPRuntime._gat_forward`):
a GAT layer projects first, so dense worker ``j`` computes ``h = act(x) W`` of its rows, and
with whole rows it computes their attention terms ``s = <h, a_dst>``, ``t = <h, a_src>`` whole
too: no partial dot products cross. One all-to-all sends sparse device ``i`` its columns of
``h`` and, for the ``k_i`` heads those columns touch, ``s`` and ``t`` of every node; device
``i`` scores every entry for those heads (the SDDMM), normalises each row, aggregates its
columns (the weighted SpMM), and a second all-to-all returns the rows. Bytes per layer and
direction: MoP's ``4 (N w - Σ n_i w_i)`` twice (``w = heads x C``), plus ``4 · 2 (N Σ_i k_i -
Σ_i n_i k_i)`` for the attention terms (``k_i = H / m`` when ``m`` divides the heads).

The partition-parallel baseline (Alg. 1) is
:class:`moagcn.host.supergcn.partition.PartitionRuntime`, which SuperGCN extends.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.host.graphs.ops import contiguous_ranges
from moagcn.host.graphs.partition import weighted_ranges
from moagcn.host.nn.attention import head_segments, spmm_segments
from moagcn.host.parallel.comm import FLOAT_BYTES
from moagcn.host.parallel.runtime import Runtime


def _width(r) -> int:
    return r[1] - r[0]


class MoPRuntime(Runtime):
    """Mixture of Parallelism (Alg. 2): feature slices to sparse devices, node slices to dense
    workers, all-to-all in between. See the module docstring."""

    name = "mop"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        X = self.features
        self.node_ranges = contiguous_ranges(self.n, self.m)
        # sparse device i aggregates its share of every layer's columns
        self.feat_ranges = [contiguous_ranges(d, self.m) if self.shares is None
                            else weighted_ranges(d, self.shares) for d in self.widths]
        # the input features are split by columns once (Alg. 2 line 1); SAGE's self term needs
        # the worker's own rows as well
        self.X_cols = {i: torch.from_numpy(np.ascontiguousarray(X[:, slice(*fr)]))
                       for i, fr in enumerate(self.feat_ranges[0]) if i in self.local}
        gat = self.model.kind == "gat"
        self.X_rows = {j: torch.from_numpy(X[slice(*self.node_ranges[j])]).to(self.dense)
                       for j in self.local} if self.model.uses_self or gat else {}
        if gat:
            self._gat_setup()

    def _gat_setup(self) -> None:
        """A GAT: each layer's column ranges of ``h`` (``heads x C``, by the shares when
        given) and the heads they touch (:class:`Runtime` paired each accelerator with the
        SDDMM)."""
        self.gat_cols, self.gat_segs = [], []
        for conv in self.model.convs:
            w = conv.heads * conv.out_channels
            cols = (contiguous_ranges(w, self.m) if self.shares is None
                    else weighted_ranges(w, self.shares))
            self.gat_cols.append(cols)
            self.gat_segs.append([head_segments(conv.out_channels, *c) for c in cols])

    def rows(self, j):
        return np.arange(*self.node_ranges[j])

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        if self.model.kind == "gat":
            return self._gat_forward(mask_fn, out_scale, count_ops)
        model, m, L = self.model, self.m, self.model.n_layers
        nr = self.node_ranges
        H_cols = dict(self.X_cols)
        H_self = dict(self.X_rows)
        self._dynamic_input = inputs is not None
        if inputs is not None:
            extra = inputs(np.arange(self.n))
            fr0 = self.feat_ranges[0]
            H_cols = {i: H_cols[i] + extra[:, slice(*fr0[i])].cpu() for i in self.local}
            H_self = {j: H_self[j] + extra[slice(*nr[j])].to(self.dense) for j in H_self}
        P = {}
        for layer in range(L):
            fr = self.feat_ranges[layer]
            mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
            # the square operator's input and output rows are the same nodes: one slice
            cols = {i: None if mask is None else mask[:, slice(*fr[i])] for i in self.local}
            Z_cols = {i: self._aggregate(self.op, H_cols[i], i, cols[i], out_scale, layer,
                                         in_mask=cols[i]) for i in self.local}
            recv = self.comm.all_to_all(
                {i: [Z_cols[i][slice(*nr[j])] for j in range(m)] for i in self.local},
                {j: [(_width(nr[j]), _width(fr[i])) for i in range(m)] for j in self.local})
            for j in self.local:
                Z_rows = torch.cat([t.to(self.dense) for t in recv[j]], dim=1)
                P[j] = model.update(layer, Z_rows, H_self.get(j))
                if count_ops:
                    self.dense_macs[j] += model.update_macs(layer, _width(nr[j]), layer > 0)
                if model.uses_self:
                    H_self[j] = torch.relu(P[j])
            if layer < L - 1:
                fr2 = self.feat_ranges[layer + 1]
                recv = self.comm.all_to_all(
                    {j: [P[j][:, slice(*fr2[i])] for i in range(m)] for j in self.local},
                    {i: [(_width(nr[j]), _width(fr2[i])) for j in range(m)] for i in self.local})
                H_cols = {i: torch.cat([t.cpu() for t in recv[i]], dim=0) for i in self.local}
        return P

    def _gat_forward(self, mask_fn, out_scale, count_ops):
        """PyG's example GAT under MoP (the module docstring): dense workers project their rows
        and form the attention terms; sparse devices score, normalise and aggregate their
        columns for every node. Dropout as PyG's (each layer's input; the attention weights,
        one global ``(nnz, heads)`` mask per layer)."""
        model, m, L, nr = self.model, self.m, self.model.n_layers, self.node_ranges
        adj = self.op.adj
        P = {}
        for layer, conv in enumerate(model.convs):
            fr, segs = self.gat_cols[layer], self.gat_segs[layer]
            heads = [[h for h, _, _ in sg] for sg in segs]
            mask = mask_fn(layer, (self.n, model.dims[layer])) if mask_fn else None
            att = mask_fn(L + layer, (adj.nnz, conv.heads)) if mask_fn else None
            send = {}
            for j in self.local:
                x = self.X_rows[j] if layer == 0 else F.elu(P[j])
                if mask is not None:
                    x = x * mask[slice(*nr[j])].to(x.device) * out_scale
                hv, s, t = conv.project(x)
                h = hv.reshape(hv.shape[0], -1)
                send[j] = [torch.cat([h[:, slice(*fr[i])], s[:, heads[i]], t[:, heads[i]]], 1)
                           for i in range(m)]
                if count_ops:
                    self.dense_macs[j] += model.dense_macs(layer, _width(nr[j]), layer > 0)
            recv = self.comm.all_to_all(
                send, {i: [(_width(nr[j]), _width(fr[i]) + 2 * len(heads[i])) for j in range(m)]
                       for i in self.local})
            Z = {}
            for i in self.local:
                got = torch.cat([r.cpu() for r in recv[i]], dim=0)       # N x (w_i + 2 k_i)
                w, k = _width(fr[i]), len(heads[i])
                Z[i] = self._gat_aggregate(i, got[:, :w], got[:, w:w + k], got[:, w + k:],
                                           segs[i], conv, None if att is None
                                           else att[:, heads[i]], out_scale)
            back = self.comm.all_to_all(
                {i: [Z[i][slice(*nr[j])] for j in range(m)] for i in self.local},
                {j: [(_width(nr[j]), _width(fr[i])) for i in range(m)] for j in self.local})
            for j in self.local:
                out = torch.cat([b.to(self.dense) for b in back[j]], dim=1)
                P[j] = conv.combine(out.view(-1, conv.heads, conv.out_channels))
        return P

    def _gat_aggregate(self, i, h, S, T, segs, conv, att, out_scale):
        """Device ``i``'s part of a GAT layer: the scores of every entry for its heads (the
        SDDMM), LeakyReLU, the row softmax, attention dropout (``att``), and ``Σ_u α_vu h_u`` of
        each head's columns of its slice (the weighted SpMM)."""
        adj, dev = self.op.adj, self.devices[i]
        if not segs:
            return h.new_zeros((h.shape[0], 0))
        alpha = conv.attention(adj, S, T, dev)
        keep = None
        if att is not None:
            alpha, keep = conv.drop_attention(alpha, att, out_scale)
        return spmm_segments(adj, alpha, h, segs, dev, keep=keep)

    def _exchange_bytes(self, w: int) -> int:
        """``4 (N w - Σ_i n_i w_i)``: an all-to-all of width w without the diagonal blocks."""
        own = sum(_width(n) * _width(f) for n, f in zip(self.node_ranges,
                                                        contiguous_ranges(w, self.m)))
        return FLOAT_BYTES * (self.n * w - own)

    def comm_bytes_analytic(self, backward=True):
        if self.model.kind == "gat":
            return self._gat_bytes(backward)
        d, L = self.model.dims, self.model.n_layers
        fwd = sum(self._exchange_bytes(d[l]) for l in range(L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        if not backward:
            return fwd
        # no gradient flows into the first aggregation (its input is the data)
        bwd = sum(self._exchange_bytes(d[l]) for l in range(1, L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        return fwd + bwd

    def _gat_feature_bytes(self) -> list[int]:
        """Per worker and layer: the sparse side's received columns and attention terms, its
        scores and weights (``nnz x k_i`` each) and output columns; the dense side's input,
        projected and output rows."""
        nnz, d = self.op.adj.nnz, self.model.dims
        out = []
        for i in range(self.m):
            n_i = _width(self.node_ranges[i])
            b = 0
            for layer, (cols, segs) in enumerate(zip(self.gat_cols, self.gat_segs)):
                w, k = _width(cols[i]), len(segs[i])
                b += self.n * (2 * w + 2 * k) + 2 * nnz * k
                b += n_i * (d[layer] + 2 * sum(_width(c) for c in cols))
            out.append(FLOAT_BYTES * b)
        return out

    def _gat_bytes(self, backward: bool) -> int:
        """Per layer: the all-to-all of ``h`` with the attention terms, and that of the
        aggregated rows back (module docstring); the backward pass returns both (the first
        layer's input needs no gradient, but its projection's output does)."""
        own = [_width(n) for n in self.node_ranges]
        fwd = 0
        for cols, segs in zip(self.gat_cols, self.gat_segs):
            w = [_width(c) + 2 * len(s) for c, s in zip(cols, segs)]
            fwd += FLOAT_BYTES * (self.n * sum(w) - sum(o * x for o, x in zip(own, w)))
            fwd += FLOAT_BYTES * (self.n * sum(_width(c) for c in cols)
                                  - sum(o * _width(c) for o, c in zip(own, cols)))
        return 2 * fwd if backward else fwd

    def feature_bytes(self):
        if self.model.kind == "gat":
            return self._gat_feature_bytes()
        d, L = self.model.dims, self.model.n_layers
        out = []
        for i in range(self.m):
            n_i = _width(self.node_ranges[i])
            b = 0
            for l in range(L):
                w_i = _width(self.feat_ranges[l][i])
                b += 2 * self.n * w_i              # sparse side: input slice and Z slice
                b += n_i * (d[l] + d[l + 1])       # dense side: Z rows and P rows
                if self.model.uses_self:
                    b += n_i * d[l]
            out.append(FLOAT_BYTES * b)
        return out
