"""Partition parallelism (MixGCN Alg. 1, SuperGCN Sec. 5): :class:`PartitionRuntime`.

Worker ``j`` owns a node set ``P_j`` (``contiguous`` id ranges; ``rcm``: equal runs of the reverse
Cuthill-McKee order, a locality-aware partition; ``kway``: that split refined by greedy k-way
boundary moves; ``metis``) and aggregates and updates only those rows; before every layer after
the first it receives what its remote neighbours ``R_j`` contribute (the input features of the
halo are loaded once), and the backward pass returns their gradients. Bytes per exchange of width
``w`` with ``post`` aggregation: ``4 w Σ_j |R_j|``, which grows with ``m``; work follows the
partition's edges. SuperGCN's exchange plans (:mod:`moagcn.host.supergcn.prepost`) send fewer rows.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.graphs.partition import partition_nodes, partition_quality
from moagcn.host.nn.attention import spmm_weighted
from moagcn.host.nn.autograd import AggregationOp
from moagcn.host.parallel.comm import FLOAT_BYTES
from moagcn.host.parallel.quant import wire_bytes
from moagcn.host.parallel.runtime import Runtime
from moagcn.host.supergcn.prepost import MODES, plan_prepost

#: how cut entries are aggregated (:mod:`moagcn.host.supergcn.prepost`)
AGGREGATIONS = MODES


class PartitionRuntime(Runtime):
    """Partition parallelism (Alg. 1): each worker owns a node set and exchanges its halo.

    Extra parameters: ``partition``: ``contiguous``, ``rcm``, ``kway`` or ``metis`` (see
    :func:`partition_nodes`); ``aggregation``: how the cut entries of every layer after the
    first are aggregated (SuperGCN Sec. 5, :mod:`moagcn.host.supergcn.prepost`): ``post`` (the halo
    exchange: sources sent as rows, summed at the receiver), ``pre`` (partial sums computed on
    the sender's device and sent per destination) or ``prepost`` (a minimum vertex cover of
    each pair's cut entries decides, so the fewest rows cross). The first layer aggregates its
    input features, loaded once with the halo, without communication.
    """

    name = "partition"

    def __init__(self, *args, partition: str = "contiguous", aggregation: str = "post",
                 **kwargs):
        super().__init__(*args, **kwargs)
        if aggregation not in MODES:
            raise UserError(f"--aggregation {aggregation!r}: choose one of {', '.join(MODES)}")
        X = self.features
        self.partition = partition
        self.aggregation = aggregation
        self.parts = partition_nodes(self.graph, self.m, partition, self.shares)
        owner = np.empty(self.n, dtype=np.int64)
        for j, p in enumerate(self.parts):
            owner[p] = j
        adj = self.op.adj
        row_owner = owner[adj.row_ids()]
        self.halo, self.local_cols, self.ops = [], [], {}
        self.send_idx = [[None] * self.m for _ in range(self.m)]  # [i][j]: rows of P_i for j
        self.assemble = {}
        for j, own in enumerate(self.parts):
            used = np.unique(adj.indices[row_owner == j])
            halo = np.setdiff1d(used, own)
            cols = np.union1d(own, halo)
            self.halo.append(halo)
            self.local_cols.append(cols)
            for i in range(self.m):
                from_i = halo[owner[halo] == i] if i != j else own[:0]
                self.send_idx[i][j] = np.searchsorted(self.parts[i], from_i)
            if j in self.local:
                self.ops[j] = self.op.block(own, cols)
                ids = np.concatenate([own] + [self.parts[i][self.send_idx[i][j]]
                                              for i in range(self.m)])
                # received rows arrive grouped by sender; put them in ascending global order
                self.assemble[j] = torch.from_numpy(np.argsort(ids, kind="stable"))
        self.X_local = {j: torch.from_numpy(X[self.local_cols[j]]) for j in self.local}
        self.X_rows = {j: torch.from_numpy(X[self.parts[j]]).to(self.dense)
                       for j in self.local} if self.model.uses_self else {}
        self._send_t = {(i, j): torch.from_numpy(self.send_idx[i][j]).to(self.dense)
                        for i in self.local for j in range(self.m)}
        self._plan_exchange(owner)
        if self.model.kind == "gat":
            self._gat_setup()

    def _gat_setup(self) -> None:
        """A GAT (:meth:`_gat_forward`): post exchange only; each worker's own rows among its
        columns, its block's entries in the global operator (attention dropout slices one
        global mask); :class:`Runtime` paired each accelerator with the SDDMM."""
        if self.aggregation != "post":
            raise UserError(f"--aggregation {self.aggregation} with --model gat: the attention "
                            "normalises each row over all its entries, so a sender cannot "
                            "pre-sum them; use --aggregation post")
        self._gat_own, self._gat_entries = {}, {}
        for j in self.local:
            own = self.parts[j]
            self._gat_own[j] = torch.from_numpy(np.searchsorted(self.local_cols[j], own))
            self._gat_entries[j] = torch.from_numpy(self.op.adj.row_entries(own))

    def _plan_exchange(self, owner) -> None:
        """The exchange of the layers after the first: which rows cross as rows (post) and which
        as partial sums (pre), the operators of both, and where received rows go."""
        m, op = self.m, self.op
        self.plan = plan = plan_prepost(op.adj, owner, m, self.aggregation)
        r = op.row_scale
        c = op.col_scale
        self.n_post = [[int(plan.post_src[i][j].size) for j in range(m)] for i in range(m)]
        self.n_pre = [[int(plan.pre_dst[i][j].size) for j in range(m)] for i in range(m)]
        self.xops, self.xcols, self.xassemble = {}, {}, {}
        self.pre_ops, self.pre_at = {}, {}
        for j in self.local:
            own = self.parts[j]
            if self.aggregation == "post":   # the first layer's operator: every entry is local
                self.xops[j], self.xcols[j] = self.ops[j], self.local_cols[j]
                self.xassemble[j] = self.assemble[j]
            else:
                block, cols = plan.local_block(j)
                self.xops[j] = AggregationOp(block, None if r is None else r[own],
                                             None if c is None else c[cols], op.kind)
                self.xcols[j] = cols
                ids = np.concatenate([own] + [plan.post_src[i][j] for i in range(m)])
                self.xassemble[j] = torch.from_numpy(np.argsort(ids, kind="stable"))
            self.pre_at[j] = {i: torch.from_numpy(plan.pre_index(i, j)) for i in range(m)
                              if self.n_pre[i][j]}
        for i in self.local:
            self._send_t.update({(i, j): torch.from_numpy(plan.send_index(i, j)).to(self.dense)
                                 for j in range(m)})
            for j in range(m):
                if self.n_pre[i][j]:
                    dst = plan.pre_dst[i][j]
                    self.pre_ops[i, j] = AggregationOp(
                        plan.pre_block(i, j), None if r is None else r[dst],
                        None if c is None else c[self.parts[i]], op.kind)

    def exchange_summary(self) -> dict:
        """Rows sent per exchange (one layer, one direction) and how the cut entries split."""
        s = self.plan.summary()
        return {"aggregation": self.aggregation, "rows_sent": s["rows_sent"],
                "post_rows": s["post_rows"], "pre_rows": s["pre_rows"],
                "vertex_cover": s["cover_size"], "cut_entries": s["cut_entries"],
                "pre_entries": s["pre_entries"], "post_entries": s["post_entries"],
                "rows_if_post": s["rows_if_post"], "rows_if_pre": s["rows_if_pre"]}

    def rows(self, j):
        return self.parts[j]

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        if self.model.kind == "gat":
            return self._gat_forward(mask_fn, out_scale, count_ops)
        model, L = self.model, self.model.n_layers
        H_local = dict(self.X_local)
        H_self = dict(self.X_rows)
        self._dynamic_input = inputs is not None
        if inputs is not None:
            H_local = {j: H_local[j] + inputs(self.local_cols[j]).cpu() for j in self.local}
            H_self = {j: H_self[j] + inputs(self.parts[j]).to(self.dense) for j in H_self}
        P = {}
        def rows(mask, ids):
            return None if mask is None else mask[torch.from_numpy(ids)]

        for layer in range(L):
            mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
            partial = {j: [] for j in self.local}
            ops, cols = self.ops, self.local_cols
            if layer > 0:
                ops, cols = self.xops, self.xcols
                H_local, partial = self._exchange(P, mask, out_scale, layer)
            for j in self.local:
                own = self.parts[j]
                Z = self._aggregate(ops[j], H_local[j], j, rows(mask, own), out_scale, layer,
                                    in_mask=rows(mask, cols[j]))
                for at, Zp in partial[j]:   # partial sums aggregated on the senders
                    Z = Z.index_add(0, at, Zp.to(Z.device))
                P[j] = model.update(layer, Z.to(self.dense), H_self.get(j))
                if count_ops:
                    self.dense_macs[j] += model.update_macs(layer, own.size, layer > 0)
                if model.uses_self:
                    H_self[j] = torch.relu(P[j])
        return P

    def _gat_forward(self, mask_fn, out_scale, count_ops):
        """PyG's example GAT (:class:`~moagcn.host.nn.gat.GAT`) on the partition: every worker
        projects its own and halo rows (the halo of layer ``l > 0`` received as pre-activations,
        ELU applied after), scores its rows' entries (the SDDMM), normalises them, and
        aggregates ``Σ_u α_vu h_u`` (the weighted SpMM), both on its sparse device. Dropout as
        PyG's: on each layer's input (``mask_fn(layer, (N, d))``) and on the attention weights
        (``mask_fn(L + layer, (nnz, heads))``, one global mask over the operator's entries)."""
        model, L = self.model, self.model.n_layers
        H_local, P = dict(self.X_local), {}
        for layer, conv in enumerate(model.convs):
            mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
            att = mask_fn(L + layer, (self.op.adj.nnz, conv.heads)) if mask_fn else None
            if layer > 0:
                H_local, _ = self._exchange(P, None, 1.0, layer)
            for j in self.local:
                x = H_local[j].to(self.dense)
                if layer > 0:
                    x = F.elu(x)
                if mask is not None:
                    x = x * mask[torch.from_numpy(self.local_cols[j])].to(x.device) * out_scale
                h, s, t = conv.project(x)
                csr, dev = self.ops[j].adj, self.devices[j]
                alpha = conv.attention(csr, s[self._gat_own[j].to(s.device)], t, dev)
                keep = None
                if att is not None:
                    alpha, keep = conv.drop_attention(alpha, att[self._gat_entries[j]],
                                                      out_scale)
                P[j] = conv.combine(spmm_weighted(csr, alpha, h, dev, "GAT attention", keep))
                if count_ops:
                    self.dense_macs[j] += model.dense_macs(layer, int(x.shape[0]), layer > 0)
        return P

    def _gat_feature_bytes(self) -> list[int]:
        """Per worker and layer of a GAT: its input rows with the halo, their projection and
        attention terms, the scores and weights of its rows' entries, and its output rows."""
        deg = self.op.adj.degrees()
        out = []
        for j in range(self.m):
            own, cols = self.parts[j].size, self.local_cols[j].size
            nnz = int(deg[self.parts[j]].sum())
            b = 0
            for layer, conv in enumerate(self.model.convs):
                w, H = conv.heads * conv.out_channels, conv.heads
                b += cols * (self.model.dims[layer] + w + 2 * H) + 2 * nnz * H
                b += own * self.model.dims[layer + 1]
            out.append(FLOAT_BYTES * b)
        return out

    def _exchange(self, P, mask, out_scale, layer):
        """Send every worker's post rows and pre partial sums of ``layer``'s input (the previous
        pre-activations ``P``) in one all-to-all; return the receivers' input rows (own and
        post, in column order) and their partial sums with the rows they add to."""
        m, w = self.m, self.widths[layer]
        if self.layer_norm:   # normalise the rows, then activate, before they are sent or summed
            P = {i: torch.relu(self.model.norms[str(layer)](p)) for i, p in P.items()}
        send = {}
        for i in self.local:
            blocks = []
            for j in range(m):
                post = P[i][self._send_t[i, j]]
                if self.n_pre[i][j]:
                    dst = self.plan.pre_dst[i][j]
                    Zp = self._aggregate(
                        self.pre_ops[i, j], P[i].cpu(), i,
                        None if mask is None else mask[torch.from_numpy(dst)], out_scale,
                        layer, in_mask=None if mask is None else
                        mask[torch.from_numpy(self.parts[i])])
                    post = torch.cat([post, Zp.to(post.device)], dim=0)
                blocks.append(post)
            send[i] = blocks
        shapes = {j: [(self.n_post[i][j] + self.n_pre[i][j], w) for i in range(m)]
                  for j in self.local}
        recv = self.comm.all_to_all(send, shapes)
        H_local, partial = {}, {}
        for j in self.local:
            got = [recv[j][i][:self.n_post[i][j]] for i in range(m)]
            H_local[j] = torch.cat([P[j]] + got, dim=0).cpu()[self.xassemble[j]]
            partial[j] = [(self.pre_at[j][i], recv[j][i][self.n_post[i][j]:])
                          for i in range(m) if self.n_pre[i][j]]
        return H_local, partial

    def quality(self) -> dict:
        """The partition's method, edge cut and balance (:func:`partition_quality`)."""
        return {"method": self.partition, **partition_quality(self.graph, self.parts)}

    def halo_sizes(self) -> list[int]:
        """|R_j|: remote neighbours of every worker."""
        return [int(h.size) for h in self.halo]

    def comm_bytes_analytic(self, backward=True):
        """Bytes from the plan's row counts and the wire format alone: every layer after the
        first sends ``rows_sent`` rows of its width forward and as many gradient rows back."""
        d, L = self.model.dims, self.model.n_layers
        rows = int(self.plan.rows_matrix().sum())
        fwd = sum(sum(wire_bytes(rows, d[l + 1], self.comm.bits)) for l in range(L - 1))
        return 2 * fwd if backward else fwd

    def feature_bytes(self):
        d, L = self.model.dims, self.model.n_layers
        if self.model.kind == "gat":
            return self._gat_feature_bytes()
        out = []
        for j in range(self.m):
            own, cols = self.parts[j].size, self.local_cols[j].size
            b = 0
            for l in range(L):
                b += cols * d[l] + own * d[l]       # input with halo, Z
                b += own * d[l + 1]                 # P
                if self.model.uses_self:
                    b += own * d[l]
            out.append(FLOAT_BYTES * b)
        return out
