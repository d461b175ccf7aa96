"""``moagcn hyscale run``: one fused GNN layer on the HyScale-GNN kernels (RTL or model)."""

from __future__ import annotations

import time

import numpy as np

from .cli_common import (add_accelerator_args, add_undirected_arg, job_driver, load_float32,
                         load_graph, write_json)
from .errors import UserError


def cmd_hyscale_run(args) -> int:
    choice, spec, config, driver = job_driver(args)
    indptr, indices, n_cols, data = load_graph(args.graph, args.undirected)
    X = load_float32(args.features, "--features", 2)
    W = load_float32(args.weight, "--weight", 2)
    b = load_float32(args.bias, "--bias", 1) if args.bias else None
    if n_cols is not None and n_cols != X.shape[0]:
        raise UserError(f"--graph has {n_cols} columns (sources) but --features has "
                        f"{X.shape[0]} rows")
    job = spec.check(spec.job(indptr, indices, X, W, b, relu=args.relu, data=data), config,
                     what=f"--graph {args.graph}")
    t0 = time.perf_counter()
    # a mini-batch larger than the buffers runs as several jobs, split by destination rows
    res = driver.run(job, checked=True, waves=args.vcd, progress=True)
    wall = time.perf_counter() - t0
    np.save(args.out, res.output)
    report = {"preset": choice.preset or spec.default_preset, **spec.report(res, job, config),
              "command_wall_s": round(wall, 4)}
    write_json(args.report, report)
    where = f"rtl on {choice.simulator}" if choice.device == "rtl" else choice.device
    print(f"hyscale on {where} ({report['preset']}, n={config.spes}, m={config.macs}): "
          f"{report['destinations']} rows, {report['edges']} edges, "
          f"{report['distinct_sources']} sources, {report['f_in']} -> {report['f_out']}, "
          f"{report['tiles']} job(s): {report['cycles_compute']:.0f} compute cycles (model "
          f"{report['model_cycles']:.0f}, error {report['model_error']:+.3f}), feature reads "
          f"{report['feature_reads']}, wall {wall:.2f} s -> {args.out}, {args.report}")
    return 0


def register(sub) -> None:
    """Add the ``hyscale`` command to the CLI's sub-parsers."""
    hp = sub.add_parser("hyscale", help="run fused GNN layers on the HyScale-GNN kernels")
    hp_sub = hp.add_subparsers(dest="hyscale_command", required=True, metavar="HYSCALE_COMMAND")
    r = hp_sub.add_parser("run", help="Y = act((A X) W + b) on the RTL or model; writes Y and "
                                      "a report")
    r.add_argument("--graph", required=True, metavar="G",
                   help="CSR: row v lists v's in-neighbours (rows of X); optional data "
                        "(float32 edge weights; default GCN normalisation) and shape; or "
                        ".mtx (values: the weights), an edge list or a PyG .pt "
                        "(docs/formats.md)")
    add_undirected_arg(r)
    r.add_argument("--features", required=True, metavar="X.npy")
    r.add_argument("--weight", required=True, metavar="W.npy")
    r.add_argument("--bias", metavar="b.npy")
    r.add_argument("--relu", action="store_true")
    r.add_argument("--out", required=True, metavar="Y.npy")
    r.add_argument("--report", required=True, metavar="R.json")
    add_accelerator_args(r, design="hyscale", devices=("model", "rtl"),
                         legacy={"--spes": "spes", "--macs": "macs"})
    r.add_argument("--vcd", metavar="FILE", help="write a waveform (cocotb path)")
    r.set_defaults(func=cmd_hyscale_run)
