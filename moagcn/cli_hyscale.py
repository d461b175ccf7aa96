"""``moagcn hyscale run``: one fused GNN layer on the HyScale-GNN kernels (RTL or model)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .cli_sspmm import load_array, load_graph, output_path
from .errors import UserError


def _float32(path: str, what: str, ndim: int) -> np.ndarray:
    arr = load_array(path, what)
    if arr.dtype != np.float32 or arr.ndim != ndim:
        raise UserError(f"{what} {path}: expected a {ndim}-D float32 array, got {arr.dtype} "
                        f"with shape {arr.shape}")
    return arr


def cmd_hyscale_run(args) -> int:
    from moagcn.hw.hyscale import preset
    from moagcn.sim.hyscale_driver import HyScaleDriver

    overrides = {}
    if args.spes:
        overrides["spes"] = args.spes
    if args.macs:
        overrides["macs"] = args.macs
    try:
        config = preset(args.preset, **overrides)
    except ValueError as exc:
        raise UserError(f"--spes/--macs: {exc}") from None
    for path, what in ((args.out, "--out"), (args.report, "--report"), (args.vcd, "--vcd")):
        output_path(path, what)
    indptr, indices, n_cols = load_graph(args.graph)
    data = None
    with np.load(args.graph, allow_pickle=False) as archive:
        if "data" in archive:
            data = archive["data"]
            if data.dtype != np.float32:
                raise UserError(f"--graph {args.graph}: data (edge weights) must be float32, "
                                f"got {data.dtype}")
    X = _float32(args.features, "--features", 2)
    W = _float32(args.weight, "--weight", 2)
    b = _float32(args.bias, "--bias", 1) if args.bias else None
    if n_cols is not None and n_cols != X.shape[0]:
        raise UserError(f"--graph has {n_cols} columns (sources) but --features has "
                        f"{X.shape[0]} rows")
    driver = HyScaleDriver(config, args.backend)
    t0 = time.perf_counter()
    res = driver.run(indptr, indices, X, W, b, relu=args.relu, data=data, waves=args.vcd,
                     what=f"--graph {args.graph}")
    wall = time.perf_counter() - t0
    np.save(args.out, res.Y)
    report = {"preset": args.preset, **res.report, "command_wall_s": round(wall, 4)}
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    print(f"hyscale on {args.backend} ({args.preset}, n={config.spes}, m={config.macs}): "
          f"{report['destinations']} rows, {report['edges']} edges, "
          f"{report['distinct_sources']} sources, {report['f_in']} -> {report['f_out']}: "
          f"{report['cycles_total']:.0f} cycles (model {report['model_cycles']:.0f}, error "
          f"{report['model_error']:+.3f}), feature reads {report['feature_reads']}, wall "
          f"{wall:.2f} s -> {args.out}, {args.report}")
    return 0


def register(sub) -> None:
    """Add the ``hyscale`` command to the CLI's sub-parsers."""
    hp = sub.add_parser("hyscale", help="run fused GNN layers on the HyScale-GNN kernels")
    hp_sub = hp.add_subparsers(dest="hyscale_command", required=True, metavar="HYSCALE_COMMAND")
    r = hp_sub.add_parser("run", help="Y = act((A X) W + b) on a backend; writes Y and a report")
    r.add_argument("--graph", required=True, metavar="G.npz",
                   help="CSR: row v lists v's in-neighbours (rows of X); optional data "
                        "(float32 edge weights; default GCN normalisation) and shape")
    r.add_argument("--features", required=True, metavar="X.npy")
    r.add_argument("--weight", required=True, metavar="W.npy")
    r.add_argument("--bias", metavar="b.npy")
    r.add_argument("--relu", action="store_true")
    r.add_argument("--out", required=True, metavar="Y.npy")
    r.add_argument("--report", required=True, metavar="R.json")
    r.add_argument("--backend", default="verilator",
                   choices=["verilator", "icarus", "pysim", "model"])
    r.add_argument("--preset", default="default", help="tiny, default or u250 (model only)")
    r.add_argument("--spes", type=int, help="scatter-gather PEs n (1, 2, 4, 8)")
    r.add_argument("--macs", type=int, help="MACs of the update kernel m (4, 16, 64)")
    r.add_argument("--vcd", metavar="FILE", help="write a waveform (cocotb path)")
    r.set_defaults(func=cmd_hyscale_run)
