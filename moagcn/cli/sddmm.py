"""``moagcn sddmm run`` / ``estimate``: SDDMM jobs on the accelerator (RTL or model), or its
cycle model alone (docs/attention.md)."""

from __future__ import annotations

import sys
import time

import numpy as np

from moagcn.cli.common import (add_accelerator_args, add_undirected_arg, job_driver, load_array,
                               load_float32, load_graph, report_path, write_json)
from moagcn.config import config_dict, parse_params
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.sim.sddmm.spec import estimate_graph


def _heads(value: int, width: int | None) -> int:
    if value < 1:
        raise UserError(f"--heads {value}: use a whole number of at least 1")
    if width is not None and width % value:
        divisors = [d for d in range(1, width + 1) if width % d == 0]
        raise UserError(f"--heads {value} does not divide the width {width}; use one of "
                        f"{', '.join(map(str, divisors))}")
    return value


def _finite(X: np.ndarray, what: str, path: str) -> None:
    bad = ~np.isfinite(X)
    if bad.any():
        r, f = (int(x) for x in np.argwhere(bad)[0])
        raise UserError(f"{what} {path}: [{r}, {f}] = {X[r, f]}; SDDMM operands must be finite "
                        f"(every value within +-{np.finfo(np.float32).max:.4g})")


def _load_mask(path: str | None, entries: int, heads: int) -> np.ndarray | None:
    """An (entries x heads) or (entries,) bool / 0-1 uint8 mask, or None."""
    if not path:
        return None
    M = load_array(path, "--mask")
    if M.shape not in ((entries, heads), (entries,)):
        raise UserError(f"--mask {path} has shape {M.shape}; expected ({entries}, {heads}) "
                        f"(entries x heads) or ({entries},) (one bit per entry, every head)")
    if M.dtype not in (np.bool_, np.uint8):
        raise UserError(f"--mask {path}: dtype {M.dtype}; expected bool or 0/1 uint8")
    if M.dtype == np.uint8 and M.size and M.max() > 1:
        raise UserError(f"--mask {path}: holds {int(M.max())}; a uint8 mask holds 0 (skip) "
                        "or 1 (compute)")
    M = M.astype(bool)
    return np.repeat(M[:, None], heads, axis=1) if M.ndim == 1 else M


def _graph(path: str, undirected: bool):
    indptr, indices, n_cols, data = load_graph(path, undirected)
    if data is not None:
        print(f"moagcn: note: --graph {path} has edge values; SDDMM uses the pattern only "
              "(scale the scores on the host)", file=sys.stderr)
    return indptr, indices, n_cols


def cmd_sddmm_run(args) -> int:
    choice, spec, config, driver = job_driver(args)
    indptr, indices, n_cols = _graph(args.graph, args.undirected)
    Q = load_float32(args.q, "--q", 2)
    K = load_float32(args.k, "--k", 2)
    n = len(indptr) - 1
    if Q.shape[0] != n:
        raise UserError(f"--q has {Q.shape[0]} rows but the graph has {n} rows; Q needs one "
                        "row per graph row")
    if n_cols is not None and K.shape[0] != n_cols:
        raise UserError(f"--k has {K.shape[0]} rows but the graph has {n_cols} columns; K needs "
                        "one row per graph column")
    if K.shape[1] != Q.shape[1]:
        raise UserError(f"--k has {K.shape[1]} columns but --q has {Q.shape[1]}; Q and K must "
                        "have the same width")
    if Q.shape[1] == 0:
        raise UserError("--q and --k have no columns; the width must be at least 1")
    heads = _heads(args.heads, Q.shape[1])
    _finite(Q, "--q", args.q)
    _finite(K, "--k", args.k)
    mask = _load_mask(args.mask, int(np.asarray(indices).size), heads)
    job = spec.check(spec.job(indptr, indices, Q, K, heads, mask), config,
                     what=f"--graph {args.graph}")
    t0 = time.perf_counter()
    res = driver.run(job, checked=True, progress=True)
    wall = time.perf_counter() - t0
    np.save(args.out, res.output)
    c = res.counters
    report = {
        "device": choice.device,
        "simulator": choice.simulator if choice.device == "rtl" else None,
        "preset": choice.preset or spec.default_preset,
        "config": config_dict(config),
        "rows": n, "cols": int(K.shape[0]), "entries": int(job.indices.size),
        "width": int(Q.shape[1]), "heads": heads, **spec.report(res, job, config),
        **c.as_dict(),
        # over the whole job, loads included (the buffers load while nothing computes)
        "utilization_total": c.work_adds / (config.lanes * c.cycles_total)
        if c.cycles_total else 0.0,
        "command_wall_s": round(wall, 4),
        "sim_cycles_per_s": c.sim_cycles_per_s or None,
    }
    if args.report:
        write_json(args.report, report)
    where = f"rtl on {choice.simulator}" if choice.device == "rtl" else choice.device
    print(f"sddmm on {where} ({report['preset']}, P={config.lanes}): {n} rows, "
          f"{job.indices.size} entries, F={Q.shape[1]} in {heads} head(s), {c.unmasked} pairs, "
          f"{c.tiles} part(s): compute {c.cycles_compute} cycles, loads {c.cycles_load}, "
          f"utilisation {c.utilization:.3f}, wall {wall:.2f} s -> "
          f"{args.out}{', ' + args.report if args.report else ''}")
    return 0


def cmd_sddmm_estimate(args) -> int:
    report_path(args.report)
    spec = get_spec("sddmm")
    config = spec.config(args.preset, parse_params(args.param))
    if args.width < 1:
        raise UserError(f"--width {args.width}: use a whole number of at least 1")
    heads = _heads(args.heads, args.width)
    if args.mask and args.mask_density is not None:
        raise UserError("give --mask or --mask-density, not both")
    if args.mask_density is not None and not 0 <= args.mask_density <= 1:
        raise UserError(f"--mask-density {args.mask_density}: use a fraction in [0, 1]")
    t0 = time.perf_counter()
    indptr, indices, n_cols = _graph(args.graph, args.undirected)
    n = len(indptr) - 1
    n_cols = n if n_cols is None else n_cols
    # the spec's checks on the structure (the values are not needed)
    spec.check(spec.job(indptr, indices, np.zeros((n, heads), np.float32),
                        np.zeros((n_cols, heads), np.float32), heads), config,
               what=f"--graph {args.graph}")
    entries = int(np.asarray(indices).size)
    mask = _load_mask(args.mask, entries, heads)
    if args.mask_density is not None:
        mask = np.random.default_rng(args.seed).random((entries, heads)) < args.mask_density
    c = estimate_graph(indptr, indices, n_cols, args.width, heads, mask, config)
    wall = time.perf_counter() - t0
    report = {"graph": args.graph, "rows": n, "cols": n_cols, "entries": entries,
              "width": args.width, "heads": heads,
              "mask": args.mask or (f"random, density {args.mask_density}"
                                    if args.mask_density is not None else "none (all pairs)"),
              "preset": args.preset or spec.default_preset, **c.as_dict(),
              "utilization_total": c.work_adds / (config.lanes * c.cycles_total)
              if c.cycles_total else 0.0,
              "time_s": c.cycles_total / (config.clock_mhz * 1e6),
              "config": config_dict(config), "wall_s": round(wall, 3)}
    write_json(args.report, report)
    print(f"sddmm estimate ({report['preset']}, P={config.lanes}): {n} rows, {entries} "
          f"entries, F={args.width} in {heads} head(s), {c.unmasked} pairs, {c.tiles} part(s): "
          f"{c.cycles_total} cycles ({c.cycles_compute} compute), utilisation "
          f"{c.utilization:.3f} of the compute cycles ({report['utilization_total']:.3f} of "
          f"the total), {report['time_s'] * 1e3:.3f} ms at "
          f"{config.clock_mhz:g} MHz -> {args.report}")
    return 0


def register(sub) -> None:
    """Add the ``sddmm`` command to the CLI's sub-parsers."""
    sp = sub.add_parser("sddmm", help="run SDDMM jobs (attention scores at the stored entries)")
    sp_sub = sp.add_subparsers(dest="sddmm_command", required=True, metavar="SDDMM_COMMAND")
    r = sp_sub.add_parser("run", help="S[e, h] = <Q[v], K[u]> per head on the RTL or model; "
                                      "writes S (entries x heads) and a report")
    r.add_argument("--graph", required=True, metavar="G",
                   help="the pattern: .npz CSR, .mtx, edge list or PyG .pt (docs/formats.md)")
    add_undirected_arg(r)
    r.add_argument("--q", required=True, metavar="Q.npy",
                   help="Q, float32, one row per graph row, finite")
    r.add_argument("--k", required=True, metavar="K.npy",
                   help="K, float32, one row per graph column, the width of Q, finite")
    r.add_argument("--heads", type=int, default=1, metavar="H",
                   help="heads: H scores per entry, each over F / H columns (H divides F; "
                        "default 1)")
    r.add_argument("--mask", metavar="M.npy",
                   help="the pairs to compute: bool or 0/1 uint8, entries x heads or entries "
                        "(default all); the others are +0")
    r.add_argument("--out", required=True, metavar="S.npy", help="the scores, entries x heads")
    r.add_argument("--report", metavar="R.json",
                   help="also write the counters and configuration as JSON (default: none)")
    add_accelerator_args(r, design="sddmm", devices=("model", "rtl"))
    r.set_defaults(func=cmd_sddmm_run)
    e = sp_sub.add_parser("estimate", help="the cycle model alone on a graph of any size",
                          description="Predict the cycles and utilisation of an SDDMM job "
                                      "from its pattern, width and heads (no values).")
    e.add_argument("--graph", required=True, metavar="G",
                   help="the pattern: .npz CSR, .mtx, edge list or PyG .pt (docs/formats.md)")
    add_undirected_arg(e)
    e.add_argument("--width", required=True, type=int, metavar="F", help="columns of Q and K")
    e.add_argument("--heads", type=int, default=1, metavar="H", help="heads (divides F)")
    e.add_argument("--mask-density", type=float, metavar="D",
                   help="a random pair mask with this fraction of ones")
    e.add_argument("--mask", metavar="M.npy", help="the pair mask (entries x heads, bool)")
    e.add_argument("--seed", type=int, default=0, help="seed of the random mask")
    e.add_argument("--preset", metavar="NAME", help="tiny, small, default")
    e.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="set one configuration field on top of --preset (repeatable)")
    e.add_argument("--report", required=True, metavar="R.json",
                   help="the estimate as JSON (the command's output)")
    e.set_defaults(func=cmd_sddmm_estimate)
