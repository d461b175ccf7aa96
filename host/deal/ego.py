"""Ego-network inference: the DGL / PyG default that DEAL is measured against.

Targets are taken in batches (``batch_size`` consecutive node ids). For each batch, the sampler
walks down from the targets: layer ``L - 1``'s targets are the batch, its sources the targets and
their sampled neighbours, which are layer ``L - 2``'s targets, and so on (one message-flow graph
per layer, nodes deduplicated within the batch, as a neighbour loader does). The batch is then
computed bottom-up with the model's own aggregate-then-update order, the aggregation on the
same sparse device as DEAL's (a GAT's attention too: its SDDMM and weighted aggregation on
the batch's block). Nothing is shared between batches: a node in the neighbourhood of
many batches is sampled, gathered and computed again in each.

The batches are the mini-batches of :class:`~moagcn.host.graphs.minibatch.NeighborSampler` (unsalted),
whose :func:`~moagcn.host.graphs.sampling.sample_rows` draws the same neighbours for a node at a layer
as DEAL's shared sampler, so with the same seed and fanouts the embeddings equal DEAL's (up to
fp32 summation order) and the comparison is of the work only. Each block's aggregation operator
is built on its local ids. GCN's column scale needs each source's degree in its own layer
sample, so for GCN the sources that have stored self loops are sampled too (to count their
loops).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.errors import UserError
from moagcn.host.deal.engine import MemTracker
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.sampling import sample_rows
from moagcn.host.nn.layerwise import AGGREGATION_KIND, local_operator
from moagcn.host.nn.models import GNN


def _gcn_degree(graph: CSRGraph, has_loop: np.ndarray, nodes: np.ndarray, k, layer: int,
                seed: int) -> np.ndarray:
    """Degree of ``A + I`` (one loop) of ``nodes`` in layer ``layer``'s sample: ``min(deg, k)
    + 1`` for a node without stored self loops; the others' rows are sampled to count theirs."""
    deg = (graph.indptr[nodes + 1] - graph.indptr[nodes]).astype(np.int64)
    out = (deg if k is None else np.minimum(deg, k)) + 1
    looped = np.nonzero(has_loop[nodes])[0]
    if looped.size:
        indptr, idx = sample_rows(graph, nodes[looped], k, layer, seed)
        row = np.repeat(np.arange(looped.size), np.diff(indptr))
        nonloop = idx != nodes[looped][row]
        out[looped] = np.bincount(row[nonloop], minlength=looped.size) + 1
    return out


def _gat_block(conv, x: torch.Tensor, adj: CSRGraph, at: np.ndarray, device,
               times: dict) -> torch.Tensor:
    """One GAT layer on a batch's block: the projection of every source (``x``, already
    activated), the attention of the targets (sources ``at``) over ``adj`` (local ids, one self
    loop each), the weighted aggregation and the bias."""
    t0 = time.perf_counter()
    h, s, t = conv.project(x)
    times["gemm"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    alpha = conv.attention(adj, s[torch.from_numpy(at)], t, device)
    times["sddmm"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    out = conv.combine(device.spmm_weighted(adj, alpha, h, "GAT attention"))
    times["spmm"] += time.perf_counter() - t0
    return out


def ego_forward(model: GNN, graph: CSRGraph, X: np.ndarray, fanout: list, seed: int = 0,
                batch_size: int = 1024, choice: AcceleratorChoice | None = None,
                progress=None) -> tuple[np.ndarray, dict]:
    """Embeddings of every node by batched ego-network inference, and what it cost.

    Returns ``(embeddings N x C, stats)`` with ``stats``: ``time_s`` by phase (``sample``,
    ``gather``, ``spmm``, ``gemm``, ``total``), ``nodes_computed`` per layer (summed over batches;
    DEAL computes ``N`` per layer), ``edges_sampled``, ``peak_feature_bytes`` (the largest batch's
    gathered inputs and intermediates), ``batches`` and the device counters.
    """
    model.eval()
    N, L = graph.n_rows, model.n_layers
    kind = AGGREGATION_KIND[model.kind]
    if len(fanout) < L:
        raise UserError(f"ego_forward: {len(fanout)} fanouts for a {L}-layer model; give one per "
                        "layer, input layer first (parse_fanout(text, layers))")
    choice = choice or AcceleratorChoice("cpu")
    if model.kind == "gat" and choice.device != "cpu":
        # lazy: the pair is needed only for attention on an accelerator
        from moagcn.host.devices.pair import attention_device
        device = attention_device(choice)
    else:
        device = choice.make()
    out = np.empty((N, model.dims[-1]), dtype=np.float32)
    times = {"sample": 0.0, "gather": 0.0, "spmm": 0.0, "gemm": 0.0, "sddmm": 0.0}
    computed = [0] * L
    edges = 0
    mem = MemTracker()
    t_start = time.perf_counter()
    has_loop = graph.has_self_loops() if kind == "gcn" else None   # once, like building the CSR
    sampler = NeighborSampler(graph, fanout[:L], seed)
    batches = range(0, N, batch_size)
    for b0 in batches:
        t0 = time.perf_counter()
        mb = sampler.sample(np.arange(b0, min(N, b0 + batch_size), dtype=np.int64))
        nodes = [blk.src for blk in mb.blocks] + [mb.targets]
        ops = [None] * L
        for layer, blk in enumerate(mb.blocks):
            edges += blk.graph.nnz
            # local ids: src is sorted, so the operator's column order is the global one
            local, rs, cs = local_operator(kind, blk.graph, blk.dst_pos)
            if kind == "gcn":   # the sources' own degrees in this layer's sample
                cs = (1.0 / np.sqrt(_gcn_degree(graph, has_loop, blk.src, fanout[layer], layer,
                                                mb.seed))).astype(np.float32)
            ops[layer] = (local, rs, cs, blk.dst_pos)
        times["sample"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        H = torch.from_numpy(np.ascontiguousarray(X[nodes[0]], dtype=np.float32))
        live = [H]
        mem.hold(H)
        times["gather"] += time.perf_counter() - t0
        H_self = H
        with torch.no_grad():
            for layer in range(L):
                local, rs, cs, at = ops[layer]
                if model.kind == "gat":
                    P = _gat_block(model.convs[layer], H if layer == 0 else F.elu(H), local,
                                   at, device, times)
                    computed[layer] += at.size
                    mem.hold(P)
                    live.append(P)
                    H = P
                    continue
                t0 = time.perf_counter()
                Hs = H * torch.from_numpy(cs)[:, None] if cs is not None else H
                Z = device.sspmm(local, Hs)
                if rs is not None:
                    Z *= torch.from_numpy(rs)[:, None]
                times["spmm"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                P = model.update(layer, Z, H_self[torch.from_numpy(at)])
                times["gemm"] += time.perf_counter() - t0
                computed[layer] += at.size
                mem.hold(Z, P)
                live += [Z, P]
                if layer + 1 < L:
                    norm = model.norms[str(layer + 1)] if model.norms is not None else None
                    H = torch.relu(norm(P)) if norm is not None else torch.relu(P)
                    H_self = torch.relu(P)
                    mem.hold(H)
                    live.append(H)
        out[nodes[L]] = P.numpy()
        mem.drop(*live)
        if progress is not None:
            progress(nodes[L].size)
    times["total"] = time.perf_counter() - t_start
    stats = {"time_s": times, "nodes_computed": computed, "edges_sampled": edges,
             "peak_feature_bytes": mem.peak, "batches": len(batches), "batch_size": batch_size,
             "device": device.counters.as_dict()}
    return out, stats
