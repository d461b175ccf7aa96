"""``moagcn sspmm run``: one S-SpMM job on the accelerator (RTL or model)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from .errors import UserError
from .sparse import validate_csr


def load_graph(path: str):
    """(indptr, indices, n_cols) from an .npz with ``indptr``, ``indices`` and optional
    ``shape``."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"--graph {path}: no such file")
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise UserError(f"--graph {path}: not an .npz archive ({exc})") from None
    missing = [k for k in ("indptr", "indices") if k not in data]
    if missing:
        raise UserError(f"--graph {path}: missing array(s) {', '.join(missing)}; an .npz graph "
                        "holds indptr and indices (and optionally shape)")
    # the arrays and row pointers now; the column range once the caller knows the columns
    indptr, indices = validate_csr(data["indptr"], data["indices"], what=f"--graph {path}",
                                   columns=False)
    n_cols = None
    if "shape" in data:
        shape = tuple(int(x) for x in np.asarray(data["shape"]).ravel())
        if len(shape) != 2 or shape[0] != len(indptr) - 1:
            raise UserError(f"--graph {path}: shape {shape} does not match "
                            f"{len(indptr) - 1} rows in indptr")
        n_cols = shape[1]
    return indptr, indices, n_cols


def load_array(path: str, what: str) -> np.ndarray:
    """A .npy array; a missing or unreadable file is a :class:`UserError` naming ``what``."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} {path}: no such file")
    try:
        return np.load(p, allow_pickle=False)
    except Exception:
        raise UserError(f"{what} {path}: not a .npy array file (write it with numpy.save)") \
            from None


def output_path(path: str | None, what: str) -> None:
    """Make ``path``'s folder and check that the file can be written, before any work is done,
    so a long run never ends with its result unsaved."""
    if path is None:
        return
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot create its folder ({exc.strerror})") from None
    if p.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be written ({exc.strerror})") from None
    if not existed:
        p.unlink()


def cmd_sspmm_run(args) -> int:
    from moagcn.hw.sspmm import preset
    from moagcn.sim.sspmm_driver import SSpmmDriver

    from .config import config_dict
    overrides = {"lanes": args.lanes} if args.lanes else {}
    config = preset(args.preset, **overrides)
    for path, what in ((args.out, "--out"), (args.report, "--report"), (args.vcd, "--vcd")):
        output_path(path, what)
    indptr, indices, n_cols = load_graph(args.graph)
    H = load_array(args.features, "--features")
    if H.dtype != np.float32 or H.ndim != 2:
        raise UserError(f"--features {args.features}: expected a 2-D float32 array, got "
                        f"{H.dtype} with shape {H.shape}")
    n = len(indptr) - 1
    if n_cols is not None and n_cols != H.shape[0]:
        raise UserError(f"--graph has {n_cols} columns but --features has {H.shape[0]} rows")
    if H.shape[0] != n:
        raise UserError(f"--features has {H.shape[0]} rows but the graph has {n} rows; "
                        "S-SpMM needs one feature row per node")
    indptr, indices = validate_csr(indptr, indices, n_cols=H.shape[0], what=f"--graph {args.graph}")
    if args.mask:
        M = load_array(args.mask, "--mask")
        if M.shape != H.shape:
            raise UserError(f"--mask has shape {M.shape}; expected {H.shape} like --features")
        if M.dtype not in (np.bool_, np.uint8):
            raise UserError(f"--mask {args.mask}: dtype {M.dtype}; expected bool or uint8")
        if M.dtype == np.uint8 and M.size and M.max() > 1:
            r, c = (int(x) for x in np.argwhere(M > 1)[0])
            raise UserError(f"--mask {args.mask}: M[{r}, {c}] = {M[r, c]}; a uint8 mask holds "
                            "0 (skip) or 1 (compute)")
        M = M.astype(bool)
    else:
        M = np.ones(H.shape, dtype=bool)
    if args.backend != "model" and not config.simulate:
        raise UserError(f"preset {args.preset!r} is for the cycle model only; use "
                        "--backend model or another preset")

    driver = SSpmmDriver(config, args.backend)
    t0 = time.perf_counter()
    # a job larger than the buffers runs as several tiles; the counters are their sums
    res = driver.run(indptr, indices, H, M, waves=args.vcd, progress=True)
    wall = time.perf_counter() - t0
    np.save(args.out, res.Z)
    totals = res.counters
    sim_cycles = totals.get("sim_cycles", 0)
    sim_time = totals.get("sim_testbench_s", 0.0)

    from moagcn.sim.golden.sspmm import work_adds
    work = work_adds(indptr, M)
    load = int(totals.get("cycles_load", 0))
    compute = int(totals.get("cycles_compute", 0))
    output = int(totals.get("cycles_output", 0))
    report = {
        "backend": args.backend,
        "preset": args.preset,
        "config": config_dict(config),
        "nodes": n, "edges": int(indices.size), "features": int(H.shape[1]),
        "tiles": res.tiles,
        "cycles_total": load + compute + output,
        "cycles_load": load, "cycles_compute": compute, "cycles_output": output,
        "work_adds": work,
        "lanes": config.lanes,
        "utilization": work / (config.lanes * compute) if compute else 0.0,
        "stall_no_job": int(totals.get("stall_no_job", 0)),
        "stall_no_context": int(totals.get("stall_no_context", 0)),
        "stall_output": int(totals.get("stall_output", 0)),
        "bubbles": int(totals.get("bubbles", 0)),
        # node-buffer row reads (each multicast to the pass's jobs); the model predicts them
        "rows_fetched": int(totals.get("rows_fetched", 0)),
        # wall time of the whole command (builds included) and the simulator's own speed while
        # the job ran (loads, compute, output), as a host-driven run sees it
        "sim_wall_s": round(wall, 4),
        "sim_cycles": sim_cycles,
        "sim_cycles_per_s": (sim_cycles / sim_time) if (sim_time and sim_cycles) else None,
    }
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    print(f"sspmm on {args.backend} ({args.preset}, P={config.lanes}): {n} rows, "
          f"{indices.size} edges, F={H.shape[1]}, {res.tiles} tile(s): compute {compute} cycles, "
          f"utilisation {report['utilization']:.3f}, wall {wall:.2f} s -> {args.out}, "
          f"{args.report}")
    return 0


def register(sub) -> None:
    """Add the ``sspmm`` command to the CLI's sub-parsers."""
    sp = sub.add_parser("sspmm", help="run S-SpMM jobs on the MixGCN sparse accelerator")
    sp_sub = sp.add_subparsers(dest="sspmm_command", required=True, metavar="SSPMM_COMMAND")
    r = sp_sub.add_parser("run", help="Z = (A H) * M on a backend; writes Z and a JSON report")
    r.add_argument("--graph", required=True, metavar="G.npz")
    r.add_argument("--features", required=True, metavar="H.npy")
    r.add_argument("--mask", metavar="M.npy")
    r.add_argument("--out", required=True, metavar="Z.npy")
    r.add_argument("--report", required=True, metavar="R.json")
    r.add_argument("--backend", default="verilator",
                   choices=["verilator", "icarus", "pysim", "model"])
    r.add_argument("--preset", default="default", help="tiny, default or paper")
    r.add_argument("--lanes", type=int, help="reduction lanes P (2, 4, 8, 16, 32)")
    r.add_argument("--vcd", metavar="FILE",
                   help="write a waveform (one per tile, FILE.tileK.vcd, for a tiled job)")
    r.set_defaults(func=cmd_sspmm_run)
