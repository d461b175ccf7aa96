"""``moagcn infer``: all-node inference of a trained checkpoint with DEAL (and its baselines).

:func:`infer` runs :class:`~moagcn.host.deal.engine.DealEngine` for ``P x M`` processes, all in this one
(:class:`~moagcn.host.parallel.comm.LocalComm`) or, with ``distributed``, one torch.distributed process
each (:class:`~moagcn.host.parallel.launch.DistComm`, started by :func:`moagcn.host.parallel.launch.launch`),
and returns the embeddings with a report: per process the bytes received (GEMM, SpMM ids and
rows), the peak feature bytes and the time by phase, next to DEAL's Table 1 and Table 2
formulas. :func:`compare` adds the ego-network and CAGNET-GEMM baselines on the same input.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.deal.ego import ego_forward
from moagcn.host.deal.engine import FLOAT_BYTES, DealEngine, InferConfig, assemble, ring_gemm
from moagcn.host.deal.sddmm import formula as table3
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.ops import contiguous_ranges, row_normalize
from moagcn.host.nn.attention import head_segments
from moagcn.host.nn.models import GNN
from moagcn.host.parallel.comm import LocalComm
from moagcn.host.parallel.launch import DistComm, launch


def model_input(model: GNN, meta: dict, dataset: Dataset) -> np.ndarray:
    """The model's input features: row-normalised if it was trained so, plus the embedded
    training labels if it was trained with label propagation (as its evaluation saw them)."""
    X = row_normalize(dataset.features) if meta.get("normalize_features", True) \
        else np.asarray(dataset.features, dtype=np.float32)
    if model.label_embedding:
        shown = np.where(dataset.train_mask, dataset.labels, -1)
        X = model.pad_input(X) + model.label_input(torch.from_numpy(shown)).numpy()
    return np.ascontiguousarray(X, dtype=np.float32)


def _gemm_formula(model: GNN, cfg: InferConfig, n: int) -> dict:
    """Bytes each process receives in the GEMMs of the whole forward pass, by DEAL's Table 1
    (``2 N D (M - 1) / (P M^2)`` entries for a D -> D product; ``N (D_in + D_out) (M - 1) / (P
    M^2)`` in general) and CAGNET's (``N D_out (M - 1) / (P M)``), averaged over processes."""
    P, M = cfg.partitions, cfg.feature_groups
    deal = cagnet = 0.0
    for layer in range(model.n_layers):
        d_in, d_out = model.dims[layer], model.dims[layer + 1]
        if model.kind in ("gcn", "gat"):
            pairs = [(d_in, [d_out])]
        elif model.kind == "sage":
            pairs = [(d_in, [d_out, d_out])]
        else:
            pairs = ([(d_in, [d_in])] if layer > 0 and model.norms is not None else []) + \
                [(d_in, [d_out])]
        for w_in, w_outs in pairs:
            deal += n * (w_in + sum(w_outs)) * (M - 1) / (P * M * M)
        if model.kind == "gin":
            h = model.updates[layer][0].out_features
            cagnet += n * (h + d_out) * (M - 1) / (P * M)
        else:
            cagnet += sum(n * w * (M - 1) / (P * M) for w in pairs[0][1])
    return {"deal": FLOAT_BYTES * deal, "cagnet": FLOAT_BYTES * cagnet}


def _spmm_formula(graphs_nnz: list[int], widths: list[int], cfg: InferConfig, n: int) -> float:
    """DEAL's Table 2 estimate of SpMM bytes received per process over the layers:
    ``Z N (P - 1) / P^2`` ids (8 bytes) plus ``N (P - 1) / P^2 · D / M`` feature entries, with Z
    the mean non-zeros per column (it assumes no column is needed twice)."""
    P, M = cfg.partitions, cfg.feature_groups
    total = 0.0
    for nnz, w in zip(graphs_nnz, widths):
        z = nnz / n
        total += 8 * z * n * (P - 1) / P ** 2 + FLOAT_BYTES * n * (P - 1) / P ** 2 * w / M
    return total


def sddmm_widths(model, cfg: InferConfig) -> list[tuple[int, float]]:
    """Per layer of a GAT, the SDDMM's operand width ``D`` (the partial attention terms of all
    ``M`` column blocks: ``Σ_m k_m``, the heads block ``m`` touches) and the mean heads of
    attention weights a process receives (``D / M``); empty for the other models."""
    if model.kind != "gat":
        return []
    out = []
    for layer, conv in enumerate(model.convs):
        width = model.dims[layer + 1]
        ranges = contiguous_ranges(width, cfg.feature_groups)
        D = sum(len(head_segments(width // conv.heads, c0, c1)) for c0, c1 in ranges)
        out.append((D, D / cfg.feature_groups))
    return out


def _sddmm_formula(model, cfg: InferConfig, n: int, graphs_nnz) -> dict:
    """DEAL's Table 3 over the layers (:func:`moagcn.host.deal.sddmm.formula`), bytes per
    process."""
    total: dict = {}
    for (D, k), nnz in zip(sddmm_widths(model, cfg), graphs_nnz):
        for key, v in table3(n, nnz, D, k, cfg.partitions, cfg.feature_groups).items():
            total[key] = total.get(key, 0.0) + v
    return total


def _summarise(stats: list[dict], model: GNN, cfg: InferConfig, n: int, spmm_widths,
               graphs_nnz) -> dict:
    def col(key):
        return [s[key] for s in stats]
    phases = sorted({k for s in stats for k in s["time_s"]})
    resident = max(s["rows"] for s in stats) * max(model.dims) // cfg.feature_groups
    return {
        "processes": stats,
        "gemm_bytes_received": col("gemm_bytes_received"),
        "spmm_bytes_received": col("spmm_bytes_received"),
        "sddmm_bytes_received": col("sddmm_bytes_received"),
        "peak_feature_bytes": col("peak_feature_bytes"),
        "time_s": {ph: max(s["time_s"].get(ph, 0.0) for s in stats) for ph in phases},
        "formulas": {
            "gemm_bytes_per_process": _gemm_formula(model, cfg, n),
            "spmm_bytes_per_process_table2": _spmm_formula(graphs_nnz, spmm_widths, cfg, n),
            "resident_block_bytes": FLOAT_BYTES * resident,
            "sddmm_bytes_per_process_table3": _sddmm_formula(model, cfg, n, graphs_nnz),
        },
    }


def _spmm_widths(model: GNN) -> list[int]:
    return [model.dims[l] if model.kind == "gin" else model.dims[l + 1]
            for l in range(model.n_layers)]


def _deal_worker(rank, world, dense, emit, model, graph, X, cfg, choice):
    engine = DealEngine(model, graph, X, cfg, DistComm(), choice)
    out = engine.run()
    return {"blocks": {r: (rows, cols, b.numpy()) for r, (rows, cols, b) in out.items()},
            "stats": [s.as_dict() for s in engine.stats.values()],
            "nnz": [engine._ops[l][engine.pm(rank)[0]][0].nnz for l in engine._ops]}


def infer(dataset: Dataset, model: GNN, meta: dict, cfg: InferConfig,
          choice: AcceleratorChoice | None = None, distributed: bool = False,
          timeout_s: float = 300.0) -> tuple[np.ndarray, dict]:
    """Embeddings (N x classes, the last layer's output) of every node, and the report."""
    X = model_input(model, meta, dataset)
    cfg.validate(dataset.n_nodes, min(model.dims))
    choice = choice or AcceleratorChoice("cpu")
    world = cfg.processes
    t0 = time.perf_counter()
    if distributed:
        if world < 2:
            raise UserError("--distributed runs one process per partition x feature group: "
                            "give --partitions x --feature-groups of at least 2")
        parts = launch(_deal_worker, world, (model, dataset.graph, X, cfg, choice),
                       what="distributed inference", timeout_s=timeout_s)
        blocks = [p["blocks"] for p in parts]
        stats = [s for p in parts for s in p["stats"]]
        nnz_by_rank = [p["nnz"] for p in parts]
    else:
        engine = DealEngine(model, dataset.graph, X, cfg, LocalComm(world), choice)
        out = engine.run()
        blocks = [{r: (rows, cols, b.numpy()) for r, (rows, cols, b) in out.items()}]
        stats = [s.as_dict() for s in engine.stats.values()]
        nnz_by_rank = [[engine._ops[l][engine.pm(r)[0]][0].nnz for l in engine._ops]
                       for r in range(world)]
    wall = time.perf_counter() - t0
    emb = assemble(blocks, dataset.n_nodes, model.dims[-1])
    # each range's graph is counted once (its M processes hold copies)
    M = cfg.feature_groups
    graphs_nnz = [sum(nnz_by_rank[p * M][l] for p in range(cfg.partitions))
                  for l in range(model.n_layers)]
    gemm_used = ["ring" if ring_gemm(model, cfg, l) else "reduce-scatter"
                 for l in range(model.n_layers)]
    report = {"system": "deal", "config": asdict(cfg), "distributed": distributed,
              "gemm_per_layer": gemm_used,
              "device": choice.describe(), "model": meta.get("model"),
              "layers": model.n_layers, "dims": model.dims,
              "nodes": dataset.n_nodes, "edges": int(dataset.graph.nnz),
              "layer_graph_nnz": graphs_nnz, "wall_s": wall}
    report.update(_summarise(stats, model, cfg, dataset.n_nodes, _spmm_widths(model),
                             graphs_nnz))
    return emb, report


def compare(dataset: Dataset, model: GNN, meta: dict, cfg: InferConfig,
            choice: AcceleratorChoice | None = None, distributed: bool = False,
            batch_size: int = 1024, timeout_s: float = 300.0) -> dict:
    """DEAL, DEAL with CAGNET's GEMM, DEAL's SpMM without pipelining and ego-network inference
    on the same input: end-to-end seconds and speed-ups, and whether the embeddings agree."""
    runs = {}
    emb, runs["deal"] = infer(dataset, model, meta, cfg, choice, distributed, timeout_s)
    e2, runs["cagnet_gemm"] = infer(dataset, model, meta, replace(cfg, gemm="cagnet"), choice,
                                    distributed, timeout_s) \
        if model.norms is None else (None, None)
    e3, runs["no_pipeline"] = infer(dataset, model, meta, replace(cfg, pipeline=False), choice,
                                    distributed, timeout_s)
    X = model_input(model, meta, dataset)
    fan = cfg.fanout if cfg.fanout is not None else [None] * model.n_layers
    t0 = time.perf_counter()
    e4, ego = ego_forward(model, dataset.graph, X, fan, cfg.seed, batch_size, choice)
    ego["wall_s"] = time.perf_counter() - t0
    runs["ego"] = ego
    scale = float(np.abs(emb).max()) or 1.0
    agree = {name: float(np.abs(e - emb).max() / scale)
             for name, e in (("cagnet_gemm", e2), ("no_pipeline", e3), ("ego", e4))
             if e is not None}
    base = runs["deal"]["wall_s"]
    return {"runs": runs, "max_rel_difference_from_deal": agree,
            "speedup_over": {k: v["wall_s"] / base for k, v in runs.items()
                             if v is not None and k != "deal"}}
