"""``moagcn sspmm run``: one S-SpMM job on the accelerator (RTL or model)."""

from __future__ import annotations

import time

import numpy as np

from .cli_common import (add_accelerator_args, job_driver, load_array, load_float32, load_graph,
                         write_json)
from .errors import UserError


def _load_mask(path: str | None, shape) -> np.ndarray:
    if not path:
        return np.ones(shape, dtype=bool)
    M = load_array(path, "--mask")
    if M.shape != shape:
        raise UserError(f"--mask has shape {M.shape}; expected {shape} like --features")
    if M.dtype not in (np.bool_, np.uint8):
        raise UserError(f"--mask {path}: dtype {M.dtype}; expected bool or uint8")
    if M.dtype == np.uint8 and M.size and M.max() > 1:
        r, c = (int(x) for x in np.argwhere(M > 1)[0])
        raise UserError(f"--mask {path}: M[{r}, {c}] = {M[r, c]}; a uint8 mask holds 0 (skip) "
                        "or 1 (compute)")
    return M.astype(bool)


def cmd_sspmm_run(args) -> int:
    from .config import config_dict
    choice, spec, config, driver = job_driver(args)
    indptr, indices, n_cols, _ = load_graph(args.graph)
    H = load_float32(args.features, "--features", 2)
    n = len(indptr) - 1
    if n_cols is not None and n_cols != H.shape[0]:
        raise UserError(f"--graph has {n_cols} columns but --features has {H.shape[0]} rows")
    if H.shape[0] != n:
        raise UserError(f"--features has {H.shape[0]} rows but the graph has {n} rows; "
                        "S-SpMM needs one feature row per node")
    M = _load_mask(args.mask, H.shape)
    job = spec.check(spec.job(indptr, indices, H, M), config, what=f"--graph {args.graph}")
    t0 = time.perf_counter()
    # a job larger than the buffers runs as several tiles; the counters are their sums
    res = driver.run(job, checked=True, waves=args.vcd, progress=True)
    wall = time.perf_counter() - t0
    np.save(args.out, res.output)
    c = res.counters
    report = {
        "device": choice.device,
        "simulator": choice.simulator if choice.device == "rtl" else None,
        "preset": choice.preset or spec.default_preset,
        "config": config_dict(config),
        "nodes": n, "edges": int(job.indices.size), "features": int(H.shape[1]),
        **c.as_dict(),
        # wall time of the whole command (builds included)
        "command_wall_s": round(wall, 4),
        # the simulator's own speed while the jobs ran (loads, compute, output)
        "sim_cycles_per_s": c.sim_cycles_per_s or None,
    }
    write_json(args.report, report)
    where = f"rtl on {choice.simulator}" if choice.device == "rtl" else choice.device
    print(f"sspmm on {where} ({report['preset']}, P={config.lanes}): {n} rows, "
          f"{job.indices.size} edges, F={H.shape[1]}, {c.tiles} tile(s): compute "
          f"{c.cycles_compute} cycles, utilisation {c.utilization:.3f}, wall {wall:.2f} s -> "
          f"{args.out}, {args.report}")
    return 0


def register(sub) -> None:
    """Add the ``sspmm`` command to the CLI's sub-parsers."""
    sp = sub.add_parser("sspmm", help="run S-SpMM jobs on the MixGCN sparse accelerator")
    sp_sub = sp.add_subparsers(dest="sspmm_command", required=True, metavar="SSPMM_COMMAND")
    r = sp_sub.add_parser("run", help="Z = (A H) * M on the RTL or model; writes Z and a report")
    r.add_argument("--graph", required=True, metavar="G.npz")
    r.add_argument("--features", required=True, metavar="H.npy")
    r.add_argument("--mask", metavar="M.npy")
    r.add_argument("--out", required=True, metavar="Z.npy")
    r.add_argument("--report", required=True, metavar="R.json")
    add_accelerator_args(r, design="sspmm", devices=("model", "rtl"),
                         legacy={"--lanes": "lanes"})
    r.add_argument("--vcd", metavar="FILE",
                   help="write a waveform (one per tile, FILE.tileK.vcd, for a tiled job)")
    r.set_defaults(func=cmd_sspmm_run)
