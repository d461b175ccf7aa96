"""Mixture of Parallelism (MixGCN Alg. 2): :class:`MoPRuntime`.

Per layer ``l`` with aggregation width ``d_l``: sparse device ``i`` aggregates feature columns
``[d_l i / m, d_l (i+1) / m)`` for all N nodes; an all-to-all regroups by node; dense worker
``j`` updates nodes ``[N j / m, N (j+1) / m)`` with the full weights; an all-to-all sends the new
pre-activations back as feature slices. The input features are split by columns once, before
training. Work is balanced by construction (Prop. 3.3) and the bytes of an all-to-all of width
``w`` are ``4 (N w - Σ_i n_i w_i)`` whatever the graph (Prop. 3.4), so they approach ``4 N w`` as
``m`` grows. With work shares (vGNN's non-uniform split) the column and row ranges follow them.

The partition-parallel baseline (Alg. 1) is
:class:`moagcn.host.supergcn.partition.PartitionRuntime`, which SuperGCN extends.
"""

from __future__ import annotations

import numpy as np
import torch

from moagcn.host.graphs.ops import contiguous_ranges
from moagcn.host.graphs.partition import weighted_ranges
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
        self.X_rows = {j: torch.from_numpy(X[slice(*self.node_ranges[j])]).to(self.dense)
                       for j in self.local} if self.model.uses_self else {}

    def rows(self, j):
        return np.arange(*self.node_ranges[j])

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
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

    def _exchange_bytes(self, w: int) -> int:
        """``4 (N w - Σ_i n_i w_i)``: an all-to-all of width w without the diagonal blocks."""
        own = sum(_width(n) * _width(f) for n, f in zip(self.node_ranges,
                                                        contiguous_ranges(w, self.m)))
        return FLOAT_BYTES * (self.n * w - own)

    def comm_bytes_analytic(self, backward=True):
        d, L = self.model.dims, self.model.n_layers
        fwd = sum(self._exchange_bytes(d[l]) for l in range(L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        if not backward:
            return fwd
        # no gradient flows into the first aggregation (its input is the data)
        bwd = sum(self._exchange_bytes(d[l]) for l in range(1, L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        return fwd + bwd

    def feature_bytes(self):
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
