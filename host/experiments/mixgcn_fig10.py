"""MixGCN Fig. 10 and Fig. 11: communication volume and workload balance against the worker
count, MoP against partition parallelism.

``moagcn experiment fig10 [--worker-list 2,4,8,16] [--datasets reddit,orkut,...] [--scale 1]
[--hidden 128] [--layers 3] [--out DIR]``

For each synthetic stand-in of the paper's Table 2 graphs (:func:`~moagcn.host.graphs.generators.
synth_like` at a size that runs here: a few thousand nodes, its degree law and feature width)
and each worker count ``m``, a GCN (``--layers`` x ``--hidden``) is laid out by the runtimes
themselves, and from their plans:

- **communication volume** per training epoch (forward and backward, bytes): MoP's
  all-to-alls (Prop. 3.4: ``4 (N w - Σ n_i w_i)`` per exchange of width ``w``, bounded by
  ``(m-1)/m``) against partition parallelism's halo exchanges with the ``kway`` and ``metis``
  partitions (each worker receives its remote neighbours' rows);
- **workload balance**: max / mean over the workers of one forward pass's FLOPs (aggregation
  additions ``nnz · w`` of the rows and columns a worker aggregates, plus ``2 ×`` its update
  MACs) -- Fig. 11's metric.

Writes ``fig10.csv``, ``fig10.json`` and ``fig10.png`` (volume normalised to MoP at the
smallest worker count, and max/mean FLOPs) and prints both tables and the issue's target: MoP's
volume grows by at most 2x from 2 to 16 workers (the ``(m-1)/m`` bound), partition
parallelism's by much more.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from moagcn.core.options import add_renamed
from moagcn.core.reports import output_dir, pyplot, write_csv
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.generators import synth_like
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.mixgcn.mop import MoPRuntime
from moagcn.host.nn.models import GNN
from moagcn.host.supergcn.partition import PartitionRuntime

#: the stand-ins' sizes (fraction of the real graph) at --scale 1: a few thousand nodes each
SCALES = {"reddit": 0.01, "orkut": 0.003, "twitter": 0.0003, "friendster": 0.0002,
          "papers100m": 0.0001}
SYSTEMS = ("mop", "partition-kway", "partition-metis")


def stand_in(name: str, scale: float, seed: int = 0) -> tuple[CSRGraph, int, int]:
    """The graph (symmetrised, no self loops), feature width and class count of a stand-in."""
    indptr, indices, info = synth_like(name, min(1.0, SCALES[name] * scale), seed)
    g = CSRGraph(indptr, indices.astype(np.int64), n_cols=indptr.size - 1)
    g = g.symmetrized().without_self_loops()
    return g, info["features"], info["classes"]


def _flops(runtime, model: GNN) -> list[float]:
    """One forward pass's FLOPs per worker: aggregation additions plus twice the update MACs."""
    adj = runtime.op.adj
    widths = model.dims[:-1]
    per = []
    for j in range(runtime.m):
        if isinstance(runtime, MoPRuntime):
            adds = sum(adj.nnz * (b - a) for l, w in enumerate(widths)
                       for a, b in [runtime.feat_ranges[l][j]])
            rows = np.arange(*runtime.node_ranges[j])
        else:
            rows = runtime.parts[j]
            nnz = int(adj.degrees()[rows].sum())
            adds = sum(nnz * w for w in widths)
        # update_macs counts forward and weight-gradient products without an input gradient
        macs = sum(model.update_macs(l, rows.size, input_grad=False)
                   for l in range(model.n_layers)) / 2
        per.append(float(adds + 2 * macs))
    return per


def measure(g: CSRGraph, features: int, classes: int, m: int, system: str, hidden: int,
            layers: int, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = GNN("gcn", features, hidden, classes, layers)
    X = np.zeros((g.n_rows, features), dtype=np.float32)
    cpu = AcceleratorChoice("cpu")
    if system == "mop":
        rt = MoPRuntime(model, g, X, m, cpu)
    else:
        rt = PartitionRuntime(model, g, X, m, cpu, partition=system.split("-")[1])
    flops = _flops(rt, model)
    out = {"workers": m, "system": system, "comm_bytes": int(rt.comm_bytes_analytic(True)),
           "flops_max_over_mean": max(flops) / float(np.mean(flops)),
           "flops_per_worker": flops}
    if system != "mop":
        out["edge_cut"] = int(rt.quality()["edge_cut"])
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn experiment fig10",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker-list", default="2,4,8,16", metavar="M,...",
                    help="worker counts, comma-separated (default 2,4,8,16)")
    add_renamed(ap, "--workers", "--worker-list")
    ap.add_argument("--datasets", default=",".join(SCALES),
                    help=f"stand-ins of the paper's graphs, any of {', '.join(SCALES)} "
                         "(default all)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies every stand-in's size (default 1: a few thousand nodes)")
    ap.add_argument("--hidden", type=int, default=128, help="hidden units (default 128)")
    ap.add_argument("--layers", type=int, default=3, help="GCN layers (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="graph and partition seed (default 0)")
    ap.add_argument("--out", default="reports/fig10", metavar="DIR",
                    help="folder of the tables and the plot (default reports/fig10)")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        workers = [int(x) for x in args.worker_list.split(",")]
    except ValueError:
        raise UserError(f"--worker-list {args.worker_list!r}: give whole numbers, e.g. 2,4,8,16") \
            from None
    if any(w < 1 for w in workers) or len(set(workers)) != len(workers):
        raise UserError(f"--worker-list {args.worker_list!r}: give distinct counts of at least 1")
    names = [x.strip() for x in args.datasets.split(",") if x.strip()]
    bad = [x for x in names if x not in SCALES]
    if bad:
        raise UserError(f"--datasets: unknown stand-in {bad[0]!r}; choose from "
                        f"{', '.join(SCALES)}")
    if args.scale <= 0:
        raise UserError(f"--scale {args.scale}: must be > 0")
    from tqdm import tqdm
    rows = []
    bar = tqdm(total=len(names) * len(workers) * len(SYSTEMS), desc="fig10", unit="run")
    for name in names:
        g, feats, classes = stand_in(name, args.scale, args.seed)
        for m in sorted(workers):
            if m > g.n_rows:
                continue
            for system in SYSTEMS:
                r = measure(g, feats, classes, m, system, args.hidden, args.layers, args.seed)
                r.update(dataset=name, nodes=g.n_rows, entries=g.nnz)
                rows.append(r)
                bar.update(1)
    bar.close()
    out = output_dir(args.out)
    write_csv(out / "fig10.csv", rows, ["dataset", "nodes", "entries", "workers", "system",
                                        "comm_bytes", "flops_max_over_mean", "edge_cut"])
    (out / "fig10.json").write_text(json.dumps(rows, indent=2) + "\n")
    lo, hi = min(workers), max(workers)
    print(f"GCN {args.layers} x {args.hidden}; communication per epoch (MB) and max/mean "
          "FLOPs per worker:")
    print("| dataset | nodes | workers | MoP MB | kway MB | METIS MB | MoP max/mean | "
          "kway max/mean | METIS max/mean |")
    print("|---|---|---|---|---|---|---|---|---|")
    by = {(r["dataset"], r["workers"], r["system"]): r for r in rows}
    growth = []
    for name in names:
        for m in sorted(workers):
            if (name, m, "mop") not in by:
                continue
            mop, kw, me = (by[(name, m, s)] for s in SYSTEMS)
            print(f"| {name} | {mop['nodes']} | {m} | {mop['comm_bytes'] / 1e6:.2f} | "
                  f"{kw['comm_bytes'] / 1e6:.2f} | {me['comm_bytes'] / 1e6:.2f} | "
                  f"{mop['flops_max_over_mean']:.3f} | {kw['flops_max_over_mean']:.3f} | "
                  f"{me['flops_max_over_mean']:.3f} |")
        if (name, lo, "mop") in by and (name, hi, "mop") in by:
            growth.append((name, *(by[(name, hi, s)]["comm_bytes"]
                                   / max(1, by[(name, lo, s)]["comm_bytes"]) for s in SYSTEMS)))
    print(f"\nvolume growth from {lo} to {hi} workers (target: MoP <= 2x, the (m-1)/m bound; "
          "paper Fig. 10: MoP constant, the partition baselines growing):")
    print("| dataset | MoP | kway | METIS |")
    print("|---|---|---|---|")
    for name, a, b, c in growth:
        print(f"| {name} | {a:.2f}x | {b:.2f}x | {c:.2f}x |")
    _plot(rows, names, sorted(workers), out / "fig10.png")
    print(f"wrote {out / 'fig10.csv'}, fig10.json, fig10.png")
    return 0


def _plot(rows, names, workers, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, len(names), figsize=(3.2 * len(names), 5.5), squeeze=False)
    by = {(r["dataset"], r["workers"], r["system"]): r for r in rows}
    for c, name in enumerate(names):
        base = by.get((name, workers[0], "mop"))
        for s in SYSTEMS:
            ms = [m for m in workers if (name, m, s) in by]
            if base is None or not ms:
                continue
            axes[0][c].plot(ms, [by[(name, m, s)]["comm_bytes"] / base["comm_bytes"]
                                 for m in ms], marker="o", label=s)
            axes[1][c].plot(ms, [by[(name, m, s)]["flops_max_over_mean"] for m in ms],
                            marker="o", label=s)
        axes[0][c].set_title(name)
        axes[0][c].set_xscale("log", base=2)
        axes[1][c].set_xscale("log", base=2)
        axes[1][c].set_xlabel("workers")
    axes[0][0].set_ylabel("volume / MoP's at fewest workers")
    axes[1][0].set_ylabel("max / mean FLOPs")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
