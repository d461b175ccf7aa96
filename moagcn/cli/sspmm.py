"""``moagcn sspmm run``: one S-SpMM job on the accelerator (RTL or model)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from moagcn.cli.common import (add_accelerator_args, add_undirected_arg, job_driver, load_array,
                               load_float32, load_graph, output_path, write_json)
from moagcn.cli.compare import register as register_compare
from moagcn.cli.sspmm_area import register as register_area
from moagcn.config import config_dict, parse_params
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.sim.sspmm.memory import estimate_graph, unmasked_counts
from moagcn.sim.sspmm.spec import check_values


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


def _weights_note(path: str, data) -> None:
    """S-SpMM multiplies by the binary structure: say so when the graph file has weights."""
    if data is not None:
        print(f"moagcn: note: --graph {path} has edge weights; S-SpMM multiplies by the binary "
              "structure, so they are not used (a weighted S-SpMM uses them: --param "
              "weighted=true)", file=sys.stderr)


def _edge_values(path: str, data, nnz: int, weighted: bool):
    """The graph file's edge values for a weighted design (checked: one finite float32 per
    stored entry; a file without values multiplies by 1, with a note), None for a binary one
    (a note when the file has values)."""
    if not weighted:
        _weights_note(path, data)
        return None
    if data is None:
        print(f"moagcn: note: --graph {path} has no edge values; the weighted S-SpMM multiplies "
              "every entry by 1 (the binary sums)", file=sys.stderr)
        return None
    return check_values(data, nnz, f"--graph {path} edge values")


def cmd_sspmm_run(args) -> int:
    choice, spec, config, driver = job_driver(args)
    indptr, indices, n_cols, data = load_graph(args.graph, args.undirected, config.weighted)
    values = _edge_values(args.graph, data, int(np.asarray(indices).size), config.weighted)
    H = load_float32(args.features, "--features", 2)
    n = len(indptr) - 1
    if n_cols is not None and n_cols != H.shape[0]:
        raise UserError(f"--graph has {n_cols} columns but --features has {H.shape[0]} rows")
    if H.shape[0] != n:
        raise UserError(f"--features has {H.shape[0]} rows but the graph has {n} rows; "
                        "S-SpMM needs one feature row per node")
    M = _load_mask(args.mask, H.shape)
    job = spec.check(spec.job(indptr, indices, H, M, values), config,
                     what=f"--graph {args.graph}")
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
    if args.report:
        write_json(args.report, report)
    where = f"rtl on {choice.simulator}" if choice.device == "rtl" else choice.device
    hidden = c.extra.get("cycles_load_hidden", 0)
    kind = "weighted sspmm" if config.weighted else "sspmm"
    print(f"{kind} on {where} ({report['preset']}, S={config.slices} x P={config.lanes}): "
          f"{n} rows, {job.indices.size} edges, F={H.shape[1]}, {c.tiles} tile(s): compute "
          f"{c.cycles_compute} cycles, loads {c.cycles_load} exposed + {hidden} beside the tile "
          f"before, utilisation {c.utilization:.3f}, wall {wall:.2f} s -> "
          f"{args.out}{', ' + args.report if args.report else ''}")
    return 0


def cmd_sspmm_estimate(args) -> int:

    output_path(args.report, "--report")
    spec = get_spec("sspmm")
    params = parse_params(args.param)
    # the cycle model alone: more than 64 slices, walk_rows above 1 and HBM are valid on any
    # preset (``--param simulate=true`` keeps the RTL's limits)
    params.setdefault("simulate", "false")
    config = spec.config(args.preset, params)
    if args.mask and args.mask_density is not None:
        raise UserError("give --mask or --mask-density, not both")
    t0 = time.perf_counter()
    indptr, indices, n_cols, data = load_graph(args.graph, args.undirected, config.weighted)
    # the cycles do not depend on the values, but a weighted job's values are checked as the
    # run would check them
    _edge_values(args.graph, data, int(np.asarray(indices).size), config.weighted)
    n = indptr.size - 1
    if n_cols is not None and n_cols != n:
        raise UserError(f"--graph {args.graph}: {n} rows x {n_cols} columns; S-SpMM aggregates "
                        "a square adjacency (one feature row per node)")
    if indices.size and int(indices.max()) >= n:
        v = int(np.argmax(indices >= n))
        raise UserError(f"--graph {args.graph}: entry {v} names column {int(indices[v])} but "
                        f"the graph has {n} nodes")
    mask = None
    if args.mask:
        mask = np.load(args.mask, mmap_mode="r")
        if mask.shape != (n, args.width):
            raise UserError(f"--mask has shape {mask.shape}; expected ({n}, {args.width}) "
                            "(graph rows x --width)")
    unmasked = unmasked_counts(n, args.width, args.mask_density, mask, seed=args.seed)
    progress = None
    if not args.quiet and n > config.max_nodes:
        from tqdm import tqdm
        progress = lambda blocks: tqdm(blocks, unit="block", desc="estimate")  # noqa: E731
    if args.closed_form:
        print("moagcn: --closed-form is ignored: the S-SpMM has one cycle model "
              "(docs/sspmm.md, 'Cycle model')", file=sys.stderr)
    r = estimate_graph(indptr, indices, args.width, unmasked, config, progress)
    wall = time.perf_counter() - t0
    report = {"graph": args.graph, "nodes": n, "entries": int(indices.size), "width": args.width,
              "mask": args.mask or (f"random, density {args.mask_density}"
                                    if args.mask_density is not None else "none (all ones)"),
              "preset": args.preset or spec.default_preset, **r,
              "clock_mhz": config.clock_mhz, "config": config_dict(config),
              "wall_s": round(wall, 2)}
    write_json(args.report, report)
    print(f"sspmm estimate ({report['preset']}, {config.adders} adders, {r['model']} model): "
          f"{n} rows, "
          f"{indices.size} entries, F={args.width}: {r['cycles_total']} cycles "
          f"({r['bound']}-bound), utilisation {r['utilization']:.3f} of the compute cycles "
          f"({r['utilization_total']:.3f} of the total), "
          f"{r['time_s'] * 1e3:.3f} ms at {config.clock_mhz:g} MHz, HBM/stream bytes "
          f"{r['hbm_bytes']}, wall {wall:.1f} s -> {args.report}")
    return 0


def register(sub) -> None:
    """Add the ``sspmm`` command to the CLI's sub-parsers."""
    sp = sub.add_parser("sspmm", help="run S-SpMM jobs on the MixGCN sparse accelerator")
    sp_sub = sp.add_subparsers(dest="sspmm_command", required=True, metavar="SSPMM_COMMAND")
    r = sp_sub.add_parser("run", help="Z = (A H) * M on the RTL or model; writes Z and a report")
    r.add_argument("--graph", required=True, metavar="G",
                   help="the graph: .npz CSR, .mtx, edge list (.txt/.tsv/.csv/.edges/.el) or "
                        "PyG .pt (docs/formats.md)")
    add_undirected_arg(r)
    r.add_argument("--features", required=True, metavar="H.npy",
                   help="the features H, float32, one row per node")
    r.add_argument("--mask", metavar="M.npy",
                   help="the output mask M (bool or 0/1 uint8, the shape of H; default all ones)")
    r.add_argument("--out", required=True, metavar="Z.npy", help="the result Z")
    r.add_argument("--report", metavar="R.json",
                   help="also write the counters and configuration as JSON (default: none)")
    add_accelerator_args(r, design="sspmm", devices=("model", "rtl"),
                         legacy={"--lanes": "lanes"})
    e = sp_sub.add_parser("estimate", help="the cycle model alone on a graph of any size",
                          description="Predict the cycles, HBM traffic and utilisation of "
                                      "Z = (A H) * M without feature values (any preset, "
                                      "'paper' included); graphs larger than the buffers are "
                                      "tiled (docs/sspmm.md, 'Memory system and tiling').")
    e.add_argument("--graph", required=True, metavar="G",
                   help="the graph: .npz CSR, .mtx, edge list or PyG .pt (docs/formats.md)")
    add_undirected_arg(e)
    e.add_argument("--width", required=True, type=int, metavar="F", help="feature columns")
    e.add_argument("--mask-density", type=float, metavar="D",
                   help="a random output mask with this fraction of ones")
    e.add_argument("--mask", metavar="M.npy", help="the output mask (rows x F, bool)")
    e.add_argument("--seed", type=int, default=0, help="seed of the random mask")
    e.add_argument("--preset", metavar="NAME", help="default, tiny, multi, paper")
    e.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="set one configuration field on top of --preset (repeatable)")
    e.add_argument("--report", required=True, metavar="R.json",
                   help="the estimate as JSON (the command's output)")
    # the second cycle model is gone: the flag is accepted, with a notice, and does nothing
    e.add_argument("--closed-form", action="store_true", help=argparse.SUPPRESS)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_sspmm_estimate)
    r.add_argument("--vcd", metavar="FILE",
                   help="write a waveform (one per tile, FILE.tileK.vcd, for a tiled job)")
    r.set_defaults(func=cmd_sspmm_run)
    register_compare(sp_sub)
    register_area(sp_sub)
