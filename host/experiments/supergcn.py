"""SuperGCN's communication experiment (Table 5) and accuracy settings (Table 3), on moagcn.

``moagcn experiment supergcn [--worker-list 2,4,8] [--seeds 3] [--epochs 200] [--device cpu]
[--design sspmm] [--preset NAME] [--param KEY=VALUE] [--out DIR]``

1. **Volume** (Table 5 style): for Cora, CiteSeer and two directed power-law graphs
   (synthetic, Reddit's degree law at 20,000 and 100,000 nodes, ten entries per node, largest
   degree a tenth of the nodes; ``--powerlaw-nodes``), METIS partitions into each worker count, the GCN
   operator (A + I): rows and bytes one layer's exchange sends under ``pre``, ``post``,
   ``prepost`` and ``prepost`` with Int2 messages (data and parameters apart), at the width of
   the runs (``--hidden``) and at 256 (SuperGCN's hidden width). From the plan and the wire
   format; the training runs of part 2 measure the same bytes (their reports' ``comm_bytes``
   equal ``comm_bytes_analytic``).
2. **Accuracy** (Table 3 style): GCN trained with partition parallelism (``--accuracy-workers``
   workers, METIS) in SuperGCN's four settings -- fp32 ``post`` and Int2 ``prepost``, each with
   and without masked label propagation (R = 0.5) -- and Int2 with LayerNorm, with and without
   label propagation; test accuracy (mean ± std over seeds) on Cora and CiteSeer.

Writes ``supergcn_volume.csv``, ``supergcn_accuracy.csv``, ``supergcn.json`` and
``supergcn_volume.png`` to ``--out`` and prints both tables.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from moagcn.core.generators import synth_graph
from moagcn.core.options import Accelerator, accelerator, add_accelerator_flags, add_renamed
from moagcn.core.reports import output_dir, pyplot, write_csv
from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.partition import partition_nodes
from moagcn.host.nn.autograd import AggregationOp
from moagcn.host.parallel.quant import wire_bytes
from moagcn.host.supergcn.prepost import plan_prepost
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train

#: SuperGCN Table 5 (Ogb-lsc-mag240M, 2,048 processes, one GCN layer), GB
PAPER_TABLE5 = {"pre": 1934.8559, "post": 1934.8559, "prepost": 1269.5784,
                "prepost_int2_data": 80.4770, "prepost_int2_params": 1.6530}

SETTINGS = {   # name: (comm_bits, aggregation, label_prop, layer_norm)
    "fp32 post": (32, "post", 0.0, False),
    "fp32 post + LP": (32, "post", 0.5, False),
    "Int2 prepost": (2, "prepost", 0.0, False),
    "Int2 prepost + LP": (2, "prepost", 0.5, False),
    "Int2 prepost + LayerNorm": (2, "prepost", 0.0, True),
    "Int2 prepost + LP + LayerNorm": (2, "prepost", 0.5, True),
}


#: node counts of the volume experiment's power-law graphs
POWERLAW_NODES = (20_000, 100_000)


def graphs(seed: int = 0, powerlaw_nodes=POWERLAW_NODES) -> dict[str, CSRGraph]:
    """The volume experiment's graphs: Cora, CiteSeer and directed power-law graphs of
    ``powerlaw_nodes`` nodes (ten entries per node, largest degree a tenth of the nodes)."""
    out = {name: load_dataset(name).graph for name in ("cora", "citeseer")}
    for n in powerlaw_nodes:
        indptr, indices, _ = synth_graph(n, 10 * n, max_degree=max(1, n // 10), seed=seed)
        out[f"power-law {n // 1000}k" if n % 1000 == 0 else f"power-law {n}"] = \
            CSRGraph(indptr, indices, what="power-law graph")
    return out


def volume_targets(vol: list[dict]) -> list[str]:
    """The issue's volume targets, checked on the rows: prepost <= post and <= pre everywhere;
    post / prepost >= 1.3 at the most workers on each power-law graph; prepost + Int2 (data and
    parameters) <= 1/12 of fp32 post, per width."""
    lines = []
    worst = [r for r in vol if r["rows_prepost"] > min(r["rows_post"], r["rows_pre"])]
    lines.append(f"prepost <= post and <= pre on every graph and worker count: "
                 f"{'met' if not worst else 'NOT met on ' + str(len(worst)) + ' rows'} "
                 f"({len(vol)} rows)")
    most = max(r["workers"] for r in vol)
    for r in vol:
        if r["graph"].startswith("power-law") and r["workers"] == most and \
                r["width"] == vol[0]["width"]:
            v = r["post_over_prepost"]
            lines.append(f"post / prepost at {most} workers on {r['graph']}: {v:.2f} "
                         f"(target >= 1.3, paper 1.52): {'met' if v >= 1.3 else 'not met'}")
    for w in sorted({r["width"] for r in vol}):
        ratios = [r["post_over_int2"] for r in vol if r["width"] == w]
        lines.append(f"prepost + Int2 total <= 1/12 of fp32 post at width {w}: "
                     f"{min(ratios):.1f}x-{max(ratios):.1f}x smaller "
                     f"({'met' if min(ratios) >= 12 else 'not met'} on every graph and count)")
    return lines


def volume_rows(name: str, graph: CSRGraph, workers: list[int], widths: list[int]) -> list[dict]:
    """One row per (workers, width): rows sent and bytes of one layer's forward exchange."""
    adj = AggregationOp.gcn(graph).adj
    out = []
    for m in workers:
        parts = partition_nodes(graph, m, "metis")
        owner = np.empty(graph.n_nodes, dtype=np.int64)
        for j, p in enumerate(parts):
            owner[p] = j
        rows = {mode: int(plan_prepost(adj, owner, m, mode).rows_matrix().sum())
                for mode in ("pre", "post", "prepost")}
        for w in widths:
            b = {mode: sum(wire_bytes(r, w, 32)) for mode, r in rows.items()}
            data, params = wire_bytes(rows["prepost"], w, 2)
            out.append({"graph": name, "workers": m, "width": w,
                        "rows_pre": rows["pre"], "rows_post": rows["post"],
                        "rows_prepost": rows["prepost"],
                        "bytes_pre": b["pre"], "bytes_post": b["post"],
                        "bytes_prepost": b["prepost"], "bytes_int2_data": data,
                        "bytes_int2_params": params,
                        "post_over_prepost": b["post"] / max(b["prepost"], 1),
                        "post_over_int2": b["post"] / max(data + params, 1)})
    return out


def accuracy_rows(datasets: list[str], seeds: int, epochs: int, workers: int, hidden: int,
                  device: str, accel: Accelerator | None = None) -> list[dict]:
    """``accel``: the accelerator of the runs (design, preset, fields, simulator) when
    ``device`` is one."""
    fields = {} if accel is None else {"design": accel.design, "preset": accel.preset,
                                       "params": dict(accel.params),
                                       "simulator": accel.simulator}
    out = []
    for name in datasets:
        d = load_dataset(name)
        for setting, (bits, agg, lp, ln) in SETTINGS.items():
            accs, rep = [], None
            for seed in range(seeds):
                cfg = TrainConfig(epochs=epochs, seed=seed, workers=workers, hidden=hidden,
                                  parallelism="partition", partition="metis", aggregation=agg,
                                  comm_bits=bits, label_prop=lp, layer_norm=ln, device=device,
                                  **fields)
                rep = train(d, cfg).report()
                accs.append(rep["test_acc"])
                print(f"{name:9s} {setting:26s} seed {seed}  test {rep['test_acc']:.3f}  "
                      f"{rep['comm_bytes']:,} B/epoch", flush=True)
            out.append({"dataset": name, "setting": setting, "seeds": seeds,
                        "test_acc_mean": float(np.mean(accs)),
                        "test_acc_std": float(np.std(accs)),
                        "comm_bytes_per_epoch": rep["comm_bytes"],
                        "comm_data_bytes": rep["comm_bytes_per_epoch"]["data"],
                        "comm_param_bytes": rep["comm_bytes_per_epoch"]["params"]})
    return out


def _plot(path: Path, vol: list[dict], width: int) -> None:
    plt = pyplot()
    sel = [r for r in vol if r["width"] == width]
    names = list(dict.fromkeys(r["graph"] for r in sel))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        rs = [r for r in sel if r["graph"] == name]
        x = np.arange(len(rs))
        for k, (key, label) in enumerate((("bytes_pre", "pre"), ("bytes_post", "post"),
                                          ("bytes_prepost", "prepost"))):
            ax.bar(x + (k - 1.5) * 0.2, [r[key] / 1e3 for r in rs], 0.2, label=label)
        ax.bar(x + 1.5 * 0.2, [(r["bytes_int2_data"] + r["bytes_int2_params"]) / 1e3
                               for r in rs], 0.2, label="prepost + Int2")
        ax.set_xticks(x, [str(r["workers"]) for r in rs])
        ax.set_xlabel("workers")
        ax.set_title(name)
        ax.set_yscale("log")
    axes[0][0].set_ylabel(f"kB per layer exchange (width {width})")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moagcn experiment supergcn",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--worker-list", default="2,4,8", metavar="M,...",
                        help="worker counts of the volume table, comma-separated, each at "
                             "least 2 (default 2,4,8)")
    add_renamed(parser, "--workers", "--worker-list")
    parser.add_argument("--width-list", default="16,256", metavar="F,...", dest="widths",
                        help="message widths of the volume table, comma-separated "
                             "(default 16,256)")
    add_renamed(parser, "--widths", "--width-list")
    parser.add_argument("--datasets", default="cora,citeseer",
                        help="datasets of the accuracy table (default cora,citeseer)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="training seeds 0..N-1 of every accuracy setting (mean ± std; "
                             "default 3)")
    parser.add_argument("--epochs", type=int, default=200,
                        help="training epochs of every accuracy run (default 200)")
    parser.add_argument("--hidden", type=int, default=16,
                        help="hidden units of the accuracy runs (default 16)")
    parser.add_argument("--accuracy-workers", type=int, default=4,
                        help="workers of the accuracy runs (default 4)")
    add_accelerator_flags(parser, device="cpu",
                          notes={"--device": "the sparse device of the accuracy runs"})
    parser.add_argument("--skip-accuracy", action="store_true",
                        help="the volume table only")
    parser.add_argument("--powerlaw-nodes", default=",".join(str(n) for n in POWERLAW_NODES),
                        help="node counts of the synthetic power-law graphs of the volume "
                             "table (default 20000,100000)")
    parser.add_argument("--out", default="reports/supergcn", metavar="DIR",
                        help="folder of the tables and the plot (default reports/supergcn)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        workers = [int(x) for x in args.worker_list.split(",") if x]
        widths = [int(x) for x in args.widths.split(",") if x]
        pl_nodes = [int(x) for x in args.powerlaw_nodes.split(",") if x]
    except ValueError:
        raise UserError("--worker-list, --width-list and --powerlaw-nodes take comma-separated "
                        "integers") from None
    if any(n < max(workers, default=2) * 10 for n in pl_nodes):
        raise UserError(f"--powerlaw-nodes {args.powerlaw_nodes}: use at least 10 nodes per "
                        "worker")
    if not workers or min(workers) < 2 or not widths or min(widths) < 1:
        raise UserError("--worker-list: use counts of at least 2; --width-list: at least 1")
    out = output_dir(args.out)
    vol = []
    for name, g in graphs(powerlaw_nodes=pl_nodes).items():
        vol += volume_rows(name, g, workers, widths)
    print("| graph | workers | width | pre | post | prepost | prepost + Int2 (data + params) "
          "| post / prepost | post / Int2 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in vol:
        print(f"| {r['graph']} | {r['workers']} | {r['width']} | {r['bytes_pre']:,} | "
              f"{r['bytes_post']:,} | {r['bytes_prepost']:,} | {r['bytes_int2_data']:,} + "
              f"{r['bytes_int2_params']:,} | {r['post_over_prepost']:.2f} | "
              f"{r['post_over_int2']:.1f} |")
    p = PAPER_TABLE5
    print(f"paper (mag240M, 2,048 processes): post / prepost {p['post'] / p['prepost']:.2f}, "
          f"post / Int2 {p['post'] / (p['prepost_int2_data'] + p['prepost_int2_params']):.1f}")
    print("\nvolume targets:")
    for line in volume_targets(vol):
        print("  " + line)
    write_csv(out / "supergcn_volume.csv", vol)
    _plot(out / "supergcn_volume.png", vol, widths[-1])
    acc = []
    if not args.skip_accuracy:
        acc = accuracy_rows([d for d in args.datasets.split(",") if d], args.seeds, args.epochs,
                            args.accuracy_workers, args.hidden, args.device,
                            accelerator(args))
        write_csv(out / "supergcn_accuracy.csv", acc)
        print("\n| dataset | setting | test accuracy | bytes per epoch (data + params) |")
        print("|---|---|---|---|")
        for r in acc:
            print(f"| {r['dataset']} | {r['setting']} | {r['test_acc_mean']:.3f} ± "
                  f"{r['test_acc_std']:.3f} | {r['comm_data_bytes']:,} + "
                  f"{r['comm_param_bytes']:,} |")
    (out / "supergcn.json").write_text(json.dumps(
        {"volume": vol, "accuracy": acc, "paper_table5_gb": PAPER_TABLE5}, indent=2) + "\n")
    print(f"\nwrote {out}/supergcn_volume.csv, supergcn_volume.png, supergcn.json"
          + (", supergcn_accuracy.csv" if acc else ""))
    return 0
