"""``moagcn sspmm compare``: the SPU against HyGCN, AWB-GCN and the CPU on one graph.

The ``sspmm`` command group belongs to :mod:`moagcn.cli.sspmm`, whose ``register`` calls
:func:`register` here with its sub-parsers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from moagcn.cli.common import add_undirected_arg, load_graph, output_path, write_json
from moagcn.config import config_dict, parse_params
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.sim.baselines.accelerators import (SYSTEMS, compare, format_table, memory_of,
                                               parse_systems)
from moagcn.sim.sspmm.memory import unmasked_counts


def _check_square(path: str, indptr, indices, n_cols) -> int:
    n = indptr.size - 1
    if n_cols is not None and n_cols != n:
        raise UserError(f"--graph {path}: {n} rows x {n_cols} columns; the aggregation needs a "
                        "square adjacency (one feature row per node)")
    if len(indices) and int(np.max(indices)) >= n:
        v = int(np.argmax(np.asarray(indices) >= n))
        raise UserError(f"--graph {path}: entry {v} names column {int(indices[v])} but the "
                        f"graph has {n} nodes")
    if len(indices) and int(np.min(indices)) < 0:
        raise UserError(f"--graph {path}: a column index is negative")
    return n


def plot_compare(rows, path, title: str) -> None:
    """Time and energy per system, log scale, the SPU's speed-up over each written above."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["system"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((axes[0], "time_s", "time per aggregation (s)"),
                           (axes[1], "energy_j", "energy per aggregation (J)")):
        vals = [r[key] for r in rows]
        bars = ax.bar(names, vals, color=["C0" if n == "spu" else "C7" for n in names])
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ratio = "spu_speedup" if key == "time_s" else "spu_energy_gain"
        for b, r in zip(bars, rows):
            if r.get(ratio) is not None and r["system"] != "spu":
                ax.annotate(f"{r[ratio]:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=8)
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise UserError(f"--plot {path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)


def cmd_sspmm_compare(args) -> int:

    systems = parse_systems(args.systems)
    output_path(args.report, "--report")
    if args.plot:
        if Path(args.plot).suffix.lower() not in (".png", ".pdf", ".svg"):
            raise UserError(f"--plot {args.plot}: give a .png, .pdf or .svg file name")
        output_path(args.plot, "--plot")
    if args.repeats < 1:
        raise UserError(f"--repeats {args.repeats}: use at least 1")
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads {args.threads}: use at least 1")
    spec = get_spec("sspmm")
    config = spec.config(args.preset, parse_params(args.param))
    memory_of(config)                       # an HBM configuration, before the graph is read
    if not Path(args.graph).exists():
        raise UserError(f"--graph {args.graph}: no such file")
    t0 = time.perf_counter()
    indptr, indices, n_cols, data = load_graph(args.graph, args.undirected)
    if data is not None:
        print(f"moagcn: note: --graph {args.graph} has edge weights; the aggregation uses the "
              "binary structure", file=sys.stderr)
    indptr = np.asarray(indptr, dtype=np.int64)
    n = _check_square(args.graph, indptr, indices, n_cols)
    unmasked = unmasked_counts(n, args.width, args.mask_density, seed=args.seed)
    say = None if args.quiet else (lambda s: print(f"compare: {s} ...", file=sys.stderr))
    if args.closed_form:
        print("moagcn: --closed-form is ignored: the S-SpMM has one cycle model "
              "(docs/sspmm.md, 'Cycle model')", file=sys.stderr)
    result = compare(indptr, indices, args.width, unmasked, config, systems,
                     repeats=args.repeats, threads=args.threads, progress=say)
    wall = time.perf_counter() - t0
    report = {"graph": args.graph, "nodes": n, "entries": int(indptr[-1]), "width": args.width,
              "mask": (f"random, density {args.mask_density}" if args.mask_density is not None
                       else "none (all ones)"),
              "preset": args.preset or spec.default_preset, "spu_config": config_dict(config),
              **result, "wall_s": round(wall, 2)}
    write_json(args.report, report)
    print(f"sspmm compare: {n} nodes, {indptr[-1]} entries, F={args.width}, mask "
          f"{report['mask']}, preset {report['preset']}")
    print(format_table(result["rows"]))
    if args.plot:
        plot_compare(result["rows"], args.plot,
                     f"{Path(args.graph).name}: {n} nodes, {indptr[-1]} entries, F={args.width}, "
                     f"mask {report['mask']}")
    print(f"-> {args.report}" + (f", {args.plot}" if args.plot else "") + f" (wall {wall:.1f} s)")
    return 0


def register(sp_sub) -> None:
    """Add ``compare`` to the ``sspmm`` command's sub-parsers."""
    c = sp_sub.add_parser(
        "compare", help="the SPU against HyGCN, AWB-GCN and the CPU on one graph",
        description="Model the aggregation Z = (A H) * M on the SPU (the S-SpMM cycle model), "
                    "HyGCN and AWB-GCN (same units, SRAM and HBM; docs/mixgcn.md), measure it "
                    "with torch on this CPU and estimate a server CPU by its roofline; one "
                    "table of time, energy and speed-ups.")
    c.add_argument("--graph", required=True, metavar="G",
                   help="the graph: .npz CSR, .mtx, edge list or PyG .pt (docs/formats.md)")
    add_undirected_arg(c)
    c.add_argument("--width", required=True, type=int, metavar="F", help="feature columns")
    c.add_argument("--mask-density", type=float, metavar="D",
                   help="the SPU's random output mask: this fraction of ones (default: none)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random mask")
    c.add_argument("--preset", default="paper", metavar="NAME",
                   help="the SPU preset (default paper: the baselines take its units, buffers "
                        "and HBM)")
    c.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="set one field of the SPU's configuration on top of --preset "
                        "(repeatable)")
    c.add_argument("--systems", default=",".join(SYSTEMS), metavar="LIST",
                   help=f"comma-separated, any of {', '.join(SYSTEMS)} (default all)")
    c.add_argument("--repeats", type=int, default=5,
                   help="timed runs of the measured CPU (median; default 5)")
    c.add_argument("--threads", type=int, default=None,
                   help="threads of the measured CPU's multi-threaded run (default: all)")
    c.add_argument("--report", required=True, metavar="R.json",
                   help="the comparison as JSON (the command's output)")
    c.add_argument("--plot", metavar="P.png", help="bar chart of time and energy")
    # the second cycle model is gone: the flag is accepted, with a notice, and does nothing
    c.add_argument("--closed-form", action="store_true", help=argparse.SUPPRESS)
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(func=cmd_sspmm_compare)
