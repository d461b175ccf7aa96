"""``moagcn infer``: all-node inference of a trained checkpoint (DEAL, seed 004).

:func:`register` adds the sub-command; bad input (a checkpoint for another dataset or model, a
process count that does not match, a fanout longer than the model, an unwritable output) is a
:class:`~moagcn.errors.UserError`, printed as one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from moagcn.cli.common import (accelerator_choice, add_accelerator_args, add_undirected_arg,
                               one_line_warnings, output_path, report_path, write_json)
from moagcn.core.names import GEMMS, GNN_NAMES
from moagcn.core.options import add_renamed, deprecated
from moagcn.errors import UserError

DEFAULT_EMB = "reports/infer/embeddings.npy"
DEFAULT_REPORT = "reports/infer/report.json"


def _save_npy(path: Path, emb: np.ndarray) -> None:
    """Write the embeddings under a temporary name, then rename: a run that fails never leaves
    a partial file under the final name."""
    tmp = path.with_name(path.name + ".partial.npy")
    try:
        np.save(tmp, emb)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"--out {path}: cannot write the embeddings ({exc.strerror})") from None


def grid(args) -> tuple[int, int]:
    """``(P, M)`` of ``--grid PxM``; the old ``--partitions P`` and ``--feature-groups M`` set
    their part of it, with their deprecation line."""
    try:
        P, M = (int(v) for v in args.grid.lower().split("x"))
    except ValueError:
        raise UserError(f"--grid {args.grid!r}: give PxM, P row ranges x M feature groups, "
                        "e.g. 2x2") from None
    old = [(flag, v) for flag, v in (("--partitions", args.partitions),
                                     ("--feature-groups", args.feature_groups)) if v is not None]
    if old:
        P = args.partitions if args.partitions is not None else P
        M = args.feature_groups if args.feature_groups is not None else M
        deprecated(" ".join(f"{flag} {v}" for flag, v in old), f"--grid {P}x{M}")
    if P < 1 or M < 1:
        raise UserError(f"--grid {P}x{M}: P and M must be at least 1 (e.g. 1x1, 2x2)")
    return P, M


def cmd_infer(args) -> int:
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.deal.engine import InferConfig
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.deal.infer import compare, infer
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.datasets import load_dataset
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.sampling import parse_fanout
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.nn.checkpoint import load

    out = output_path(args.out, "--out")
    if out.suffix.lower() != ".npy":
        raise UserError(f"--out {args.out}: embeddings are written as a NumPy .npy file; give a "
                        "path ending in .npy")
    rpath = report_path(args.report)
    P, M = grid(args)
    choice = accelerator_choice(args)
    if choice.device != "cpu":
        choice.config()   # a bad design, preset or parameter is named before any work
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.formats import warn_unused_weights
    with one_line_warnings():
        dataset = load_dataset(args.dataset, seed=args.seed, undirected=args.undirected)
        warn_unused_weights(dataset, f"dataset {args.dataset}", "moagcn infer")
    model, meta = load(args.checkpoint, dataset.n_features, args.model)
    if meta.get("n_nodes") not in (None, dataset.n_nodes) and not args.quiet:
        print(f"note: the checkpoint was trained on {meta.get('dataset')} "
              f"({meta.get('n_nodes')} nodes); embedding {dataset.name} "
              f"({dataset.n_nodes} nodes)", file=sys.stderr)
    fanout = parse_fanout(args.fanout, model.n_layers)
    width = min(model.dims)
    if P > dataset.n_nodes or M > width:
        raise UserError(f"--grid {P}x{M}: the graph has {dataset.n_nodes} nodes and the "
                        f"narrowest layer is {width} wide; use P <= {dataset.n_nodes} and "
                        f"M <= {width}")
    cfg = InferConfig(P, M, fanout, args.gemm, not args.no_pipeline, args.groups, args.seed)
    cfg.validate(dataset.n_nodes, width)
    if args.processes is not None and args.processes != cfg.processes:
        raise UserError(f"--processes {args.processes} does not equal --grid "
                        f"{cfg.partitions}x{cfg.feature_groups} = {cfg.processes} processes; "
                        "DEAL runs one process per (partition, feature group)")
    print(f"{dataset.summary()}\n{meta['model'].upper()} {model.n_layers} layers {model.dims}, "
          f"fanout {args.fanout}, P x M = {cfg.partitions} x {cfg.feature_groups}"
          f"{' (torch.distributed)' if args.distributed else ''}, device {choice.device}, "
          f"GEMM {cfg.gemm}, SpMM {'pipelined' if cfg.pipeline else 'sequential'} in "
          f"{cfg.groups} sub-groups")
    t0 = time.perf_counter()
    emb, report = infer(dataset, model, meta, cfg, choice, args.distributed, args.timeout)
    if args.compare:
        report["compare"] = compare(dataset, model, meta, cfg, choice, args.distributed,
                                    args.batch_size, args.timeout)
    report["checkpoint"] = {"path": str(args.checkpoint), **meta}
    report["dataset"] = dataset.name
    _save_npy(out, emb)
    write_json(rpath, report)
    wall = time.perf_counter() - t0
    print(f"embedded {dataset.n_nodes} nodes in {report['wall_s']:.2f} s "
          f"(total {wall:.2f} s); per process: GEMM bytes received "
          f"{report['gemm_bytes_received']} (Table 1: "
          f"{report['formulas']['gemm_bytes_per_process']['deal']:.0f}), SpMM bytes received "
          f"{report['spmm_bytes_received']}, peak feature bytes {report['peak_feature_bytes']}")
    if meta["model"] == "gat":
        t3 = report["formulas"]["sddmm_bytes_per_process_table3"]
        print(f"attention SDDMM bytes received per process {report['sddmm_bytes_received']} "
              f"(Table 3, approach ii: {t3.get('approach_ii', 0):.0f})")
    if args.compare:
        sp = report["compare"]["speedup_over"]
        print("DEAL speed-up over " + ", ".join(f"{k} {v:.2f}x" for k, v in sp.items()))
    print(f"embeddings: {out}\nreport: {rpath}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "infer", help="embed every node of a graph with a trained checkpoint (DEAL)",
        description="All-node inference (DEAL): each layer's 1-hop graph sampled once for all "
                    "nodes, computed layer by layer over P row ranges x M feature groups, with "
                    "the ring-exchange GEMM and the sub-grouped, pipelined SpMM on the sparse "
                    "devices (a GAT's attention: DEAL's distributed SDDMM, Table 3 approach "
                    "ii). See docs/deal.md.")
    p.add_argument("--dataset", default="cora", metavar="sbm|rmat|cora|citeseer|PATH",
                   help="the graph and features to embed (default cora)")
    add_undirected_arg(p)
    p.add_argument("--checkpoint", required=True, metavar="C.pt",
                   help="weights written by moagcn train --save C.pt")
    p.add_argument("--model", default=None, choices=GNN_NAMES,
                   help="check that the checkpoint holds this model")
    p.add_argument("--fanout", default="all", metavar="all|K|K1,K2,...",
                   help="neighbours sampled per node and layer, input layer first (default all)")
    p.add_argument("--grid", default="1x1", metavar="PxM",
                   help="P row ranges (1-D graph partition) x M feature column groups per row "
                        "range, one process each (default 1x1)")
    p.add_argument("--partitions", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--feature-groups", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="check that P x M of --grid equals this process count")
    p.add_argument("--distributed", action="store_true",
                   help="one torch.distributed process per (partition, feature group)")
    p.add_argument("--gemm", default="deal", choices=GEMMS,
                   help="deal: ring exchange of row tiles; cagnet: feature-partitioned GEMM "
                        "with a reduce-scatter (the baseline); auto: per layer, whichever "
                        "receives fewer bytes (default deal)")
    p.add_argument("--subgroups", type=int, default=4, metavar="S", dest="groups",
                   help="SpMM sub-groups per owning range (default 4)")
    add_renamed(p, "--groups", "--subgroups")
    p.add_argument("--no-pipeline", action="store_true",
                   help="fetch each SpMM sub-group, then aggregate it (no overlap)")
    p.add_argument("--compare", action="store_true",
                   help="also run CAGNET's GEMM, the SpMM without pipelining and ego-network "
                        "inference; report the speed-ups")
    p.add_argument("--batch-size", type=int, default=1024,
                   help="targets per batch of the ego-network baseline (default 1024)")
    add_accelerator_args(p, design=None)
    p.add_argument("--seed", type=int, default=0, help="sampling seed (and dataset seed)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="--distributed: fail if a process waits longer than this for a peer")
    p.add_argument("--out", default=DEFAULT_EMB, metavar="EMB.npy",
                   help=f"the embeddings, one row per node (default {DEFAULT_EMB})")
    p.add_argument("--report", default=DEFAULT_REPORT, metavar="R.json",
                   help=f"JSON report (default {DEFAULT_REPORT})")
    p.add_argument("--quiet", action="store_true",
                   help="no note when the checkpoint was trained on another graph")
    p.set_defaults(func=cmd_infer)
