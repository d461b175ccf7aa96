"""``moagcn perfmodel fit`` and ``moagcn perfmodel predict``: the learned device performance
model (:mod:`moagcn.host.vgnn.perfmodel`, docs/perfmodel.md).

``fit`` samples sub-graphs of a dataset, times them on the devices, prints a Table-7-style
comparison of the regressors (MSE, MAE, MAPE, time per prediction) and writes the model (JSON)
and the table (CSV beside it); ``--holdout`` also scores the chosen model on whole graphs it
never saw. ``predict`` answers the time of one aggregation per device, and with ``--measure``
sets the device's own time beside it.

:func:`register` adds the command to the ``moagcn`` parser; bad input is a
:class:`~moagcn.errors.UserError`, printed as one line.
"""

from __future__ import annotations

import csv
from pathlib import Path

from moagcn.cli.common import add_undirected_arg, one_line_warnings, output_path
from moagcn.core.names import (PERF_ENTRY_WIDTHS, PERF_HEADS, PERF_KEEPS, PERF_RATIOS,
                               PERF_REGRESSORS, PERF_SEEDS, PERF_TEST_FRACTION, PERF_WIDTHS)
from moagcn.core.options import add_renamed
from moagcn.errors import UserError

# -- option parsing ------------------------------------------------------------------------------

def _numbers(text: str, option: str, kind: type) -> list:
    """Comma-separated numbers of ``kind`` (a clear error for anything else)."""
    items = [t.strip() for t in str(text).split(",")]
    try:
        return [kind(t) for t in items if t]
    except ValueError:
        example = "0.1,0.5,1.0" if kind is float else "16,32,64"
        raise UserError(f"{option} {text!r}: expected comma-separated "
                        f"{'numbers' if kind is float else 'integers'}, e.g. {example}") from None


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()] if text else []


def _set_threads(threads: int) -> None:
    """Apply ``--threads`` (0: torch's default)."""
    import torch
    if threads < 0:
        raise UserError(f"--threads {threads}: use 0 (torch's default) or more")
    if threads:
        torch.set_num_threads(threads)


def _json_path(path: str, option: str) -> Path:
    if Path(path).suffix.lower() != ".json":
        raise UserError(f"{option} {path}: the model is a JSON file; give a path ending in .json")
    return output_path(path, option)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f}"


# -- tables --------------------------------------------------------------------------------------

SCORE_COLUMNS = ("regressor", "mse_ms2", "mae_ms", "mape_percent", "us_per_prediction")


def score_rows(report) -> list[dict]:
    """The Table-7 rows of a fit: errors in ms, MAPE in percent."""
    return [{"regressor": s.regressor, "mse_ms2": s.mse * 1e6, "mae_ms": s.mae * 1e3,
             "mape_percent": 100 * s.mape, "us_per_prediction": s.us_per_prediction}
            for s in report.scores]


def print_scores(report) -> None:
    """The regressors' held-out scores, the chosen one marked."""
    print(f"{'regressor':20s} {'MSE (ms^2)':>12s} {'MAE (ms)':>12s} {'MAPE':>8s} "
          f"{'us/pred':>9s}")
    for row in score_rows(report):
        mark = "  <- chosen (lowest MAPE)" if row["regressor"] == report.chosen else ""
        print(f"{row['regressor']:20s} {row['mse_ms2']:12.3e} {row['mae_ms']:12.3e} "
              f"{row['mape_percent']:7.2f}% {row['us_per_prediction']:9.1f}{mark}")


def print_holdout(res, model) -> None:
    """Held-out MAPE per device (rows) and graph (columns)."""
    keys = list(model.devices)
    wide = max(len("device"), *(len(k) for k in keys))
    cols = [g[:12] for g in res.graphs]
    print(f"held-out graphs (never sampled), {model.regressor}: MAPE over the widths and masks")
    print(f"{'device':{wide}s} " + " ".join(f"{c:>12s}" for c in cols) + f" {'all':>8s}")
    for k in keys:
        cells = " ".join(f"{100 * res.mape(g, k):11.2f}%" for g in res.graphs)
        print(f"{k:{wide}s} {cells} {100 * res.mape(device=k):7.2f}%")
    cells = " ".join(f"{100 * res.mape(g):11.2f}%" for g in res.graphs)
    print(f"{'all':{wide}s} {cells} {100 * res.mape():7.2f}%")
    ops = list(dict.fromkeys(r.get("op", "sum") for r in res.rows))
    if len(ops) > 1:
        print("by operation: " + ", ".join(f"{op} {100 * res.mape(op=op):.2f}%" for op in ops))


def write_csv(path: Path, rows: list[dict], columns) -> None:
    try:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(columns))
            w.writeheader()
            w.writerows(rows)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


# -- fit -----------------------------------------------------------------------------------------

def cmd_fit(args) -> int:
    """Sample, time, fit and score; print the table; write the model and the CSV."""
    # lazy: keeps the host runtime out of this module's import
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.devices.select import parse_devices
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.vgnn import perfmodel as pm, augment as pma
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.vgnn.features import check_ops

    out = _json_path(args.out, "--out")
    devices = parse_devices(args.devices)
    ratios = _numbers(args.ratios, "--ratios", float)
    widths = _numbers(args.widths, "--width-list", int)
    keeps = _numbers(args.keeps, "--keeps", float)
    pma.check_ratios(ratios)
    pma.check_widths(widths)
    pma.check_keeps(keeps)
    ops = check_ops(_names(args.ops))
    entry_widths = _numbers(args.entry_widths, "--entry-widths", int)
    heads = _numbers(args.heads_list, "--heads-list", int)
    pma.check_widths(entry_widths)
    regressors = _names(args.regressors) or None
    holdout = _names(args.holdout)
    _set_threads(args.threads)
    names = _names(args.dataset)
    if not names or len(set(names)) != len(names):
        raise UserError(f"--dataset {args.dataset!r}: give one dataset or several distinct "
                        "ones separated by commas, e.g. cora or rmat,powerlaw")
    with one_line_warnings():
        graphs = {(Path(n).stem if Path(n).suffix else n):
                  pma.load_graph(n, seed=args.seed, undirected=args.undirected) for n in names}
        held = {name: pma.load_graph(name, seed=args.seed) for name in holdout}
    label = "+".join(graphs)
    sizes = "; ".join(f"{k}: {g.n_rows} nodes, {g.nnz} edges" for k, g in graphs.items())
    print(f"{sizes}; devices "
          f"{', '.join(d.key for d in devices)} ({args.device} for accelerators); "
          f"{len(ratios)} ratios x {args.seeds} seeds"
          f"{'' if args.no_blocks else ' (and their worker blocks)'} x {len(widths)} widths"
          + (f" x {len(keeps)} output masks" if len(keeps) > 1 or keeps[0] < 1 else "")
          + ("" if len(ops) == 1 else f"; GAT's products ({', '.join(ops[1:])}) at one head's "
             f"widths {','.join(map(str, entry_widths))} x heads {','.join(map(str, heads))}"))
    model = pm.fit(graphs, devices, ratios=ratios, widths=widths, seeds=args.seeds,
                   seed=args.seed, device_kind=args.device, test_fraction=args.test_fraction,
                   regressors=regressors, baseline=not args.no_baseline,
                   blocks=not args.no_blocks, progress=not args.quiet, name=label,
                   keeps=keeps, ops=ops, entry_widths=entry_widths, heads=heads,
                   sddmm_preset=args.sddmm_preset)
    rep = model.report
    print(f"{rep.train_runs} runs fitted, {rep.test_runs} held out (sub-graphs not fitted); "
          f"sampling {rep.sampling_s:.1f} s, fitting {rep.fitting_s:.1f} s; target "
          f"{'log(time / cost-term baseline)' if model.baseline else 'log(time)'}")
    print_scores(rep)
    rows = [{"op": "sum", **r} for r in score_rows(rep)]
    for op, oprep in model.op_reports.items():
        print(f"{op}: {oprep.train_runs} runs fitted, {oprep.test_runs} held out")
        print_scores(oprep)
        rows += [{"op": op, **r} for r in score_rows(oprep)]
    csv_path = out.with_suffix(".csv")
    write_csv(csv_path, rows, ("op",) + SCORE_COLUMNS)
    written = [out, csv_path]
    if held:
        res = pm.held_out(model, held, widths, args.device, progress=not args.quiet,
                          keeps=keeps, ops=ops, entry_widths=entry_widths, heads=heads)
        print_holdout(res, model)
        model.state["holdout"] = {"graphs": res.graphs, "mape": res.mape(),
                                  "mape_by_graph": {g: res.mape(g) for g in res.graphs},
                                  "rows": res.rows}
        hpath = out.with_name(out.stem + "-holdout.csv")
        write_csv(hpath, res.rows, ("graph", "op", "width", "heads", "keep", "device",
                                    "predicted_s", "measured_s"))
        written.append(hpath)
    model.save(out)
    print(f"chosen: {model.regressor}; wrote {', '.join(str(p) for p in written)}")
    return 0


# -- predict -------------------------------------------------------------------------------------

def cmd_predict(args) -> int:
    """Predicted (and with --measure, measured) time of one aggregation per device."""
    # lazy: keeps the host runtime out of this module's import
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.devices.select import parse_devices
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.vgnn import perfmodel as pm, features as pmf, augment as pma
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.devices.pair import entry_devices

    wanted = parse_devices(args.devices) if args.devices else None
    model = pm.PerfModel.load(args.perf_model, wanted)
    if args.width < 1:
        raise UserError(f"--width {args.width}: a feature width is at least 1")
    keep = pmf.check_keep(args.keep)
    _set_threads(args.threads)
    with one_line_warnings():
        graph = pma.load_graph(args.dataset, seed=args.seed, undirected=args.undirected)
    devices = wanted if wanted is not None else list(model.devices.values())
    print(f"{args.dataset}: {graph.n_rows} nodes, {graph.nnz} edges, width {args.width}"
          f"{'' if keep == 1 else f', output mask keeping {keep:g}'}; "
          f"model: {model.describe()}")
    head = f"{'device':36s} {'predicted (ms)':>15s}"
    if args.measure:
        head += f" {'measured (ms)':>15s} {'error':>8s}"
    print(head)
    errors = []
    for dev in devices:
        pred = model.predict(graph, args.width, dev, keep, args.op, args.heads)
        line = f"{dev.key:36s} {_ms(pred):>15s}"
        if args.measure and args.op != "sum":
            pair = entry_devices([dev], args.device,
                                    model.state["sampling"].get("sddmm_preset"))[0][1]
            true = pma.entry_op_time(pair, graph, args.op, args.width, args.heads, keep)
        if args.measure and args.op == "sum":
            true = pma.aggregation_time(dev.on(args.device).make(), graph, args.width, keep=keep)
        if args.measure:
            err = (pred - true) / true
            errors.append(abs(err))
            line += f" {_ms(true):>15s} {100 * err:+7.2f}%"
        print(line)
    if errors:
        what = "cycle model" if args.device == "model" else args.device
        print(f"MAPE {100 * sum(errors) / len(errors):.2f}% against the devices' own times "
              f"({what} for accelerators, median wall time for cpu)")
    return 0


# -- parser --------------------------------------------------------------------------------------

def register(subparsers) -> None:
    """Add the ``perfmodel`` command (``fit``, ``predict``) to a ``moagcn`` sub-parser set."""

    pm_parser = subparsers.add_parser(
        "perfmodel", help="learned performance model of the sparse devices (vGNN Table 7)",
        description="Fit regressors that predict the time of one aggregation from graph and "
                    "device features (vGNN Sec. 4.2-4.3), and use them (docs/perfmodel.md).")
    sub = pm_parser.add_subparsers(dest="perfmodel_command", required=True,
                                   metavar="PERFMODEL_COMMAND")
    dataset_help = ("cora, citeseer, sbm, rmat, powerlaw (synthetic power-law graph), or the "
                    "path of a dataset file (docs/formats.md)")

    f = sub.add_parser(
        "fit", help="sample sub-graphs, time them on the devices, fit and compare regressors",
        description="Time induced sub-graphs of --dataset (every ratio x seed) at every width "
                    "on every device, score the regressors on held-out sub-graphs (MSE, MAE, "
                    "MAPE, time per prediction), keep the lowest MAPE. Writes the model "
                    "(--out M.json) and the table (M.csv).")
    f.add_argument("--devices", required=True, metavar="SPECS",
                   help="comma-separated devices, DESIGN[:KEY=VALUE...]: cpu, "
                        "cpu:adds_per_s=2e10, sspmm, sspmm:lanes=8:clock_mhz=150, "
                        "sspmm:preset=multi, hyscale (any configuration field)")
    f.add_argument("--dataset", required=True, metavar="D[,D...]",
                   help=dataset_help + "; several, comma-separated, are all sampled (a model "
                        "fitted on more than one graph family generalises better)")
    add_undirected_arg(f)
    f.add_argument("--out", required=True, metavar="M.json", help="the model; M.csv beside it")
    f.add_argument("--ratios", default=",".join(f"{r:g}" for r in PERF_RATIOS),
                   metavar="R,...", help="node ratios of the sub-graphs (default 0.1,...,1)")
    f.add_argument("--width-list", default=",".join(map(str, PERF_WIDTHS)),
                   metavar="F,...", dest="widths",
                   help="feature widths, comma-separated (default 16,32,64,100,128; 100: no "
                        "lane multiple)")
    add_renamed(f, "--widths", "--width-list")
    f.add_argument("--keeps", default=",".join(f"{k:g}" for k in PERF_KEEPS),
                   metavar="K,...",
                   help="kept fractions of a random output mask every run is timed with "
                        "(default 1,0.5: unmasked and half-masked, as training's dropout and "
                        "ReLU masks; 1: unmasked only)")
    f.add_argument("--ops", default="sum", metavar="OP,...",
                   help="what the model predicts: sum (the aggregation, default) and, for a "
                        "GAT (--balance vgnn with --model gat), weighted,sddmm: the weighted "
                        "aggregation and the SDDMM, timed on every accelerator (a weighted "
                        "S-SpMM, :weighted=true) paired with its sddmm design")
    f.add_argument("--entry-widths", default=",".join(map(str, PERF_ENTRY_WIDTHS)),
                   metavar="C,...",
                   help="one head's widths the per-entry products are timed at (default "
                        f"{','.join(map(str, PERF_ENTRY_WIDTHS))})")
    f.add_argument("--heads-list", default=",".join(map(str, PERF_HEADS)), metavar="H,...",
                   help="heads the per-entry products are timed with (default "
                        f"{','.join(map(str, PERF_HEADS))})")
    f.add_argument("--sddmm-preset", metavar="P",
                   help="the sddmm design's preset beside each accelerator (default: tiny "
                        "beside a tiny S-SpMM, else default; as moagcn train --sddmm-preset)")
    f.add_argument("--seeds", type=int, default=PERF_SEEDS,
                   help=f"sub-graphs per ratio (default {PERF_SEEDS})")
    f.add_argument("--seed", type=int, default=0, help="base seed of the sampling and split")
    f.add_argument("--device", choices=("model", "rtl"), default="model",
                   help="how accelerators are timed: cycle model (default) or simulated RTL")
    f.add_argument("--test-fraction", type=float, default=PERF_TEST_FRACTION,
                   help="share of the sub-graphs held out to score the regressors "
                        f"(default {PERF_TEST_FRACTION})")
    f.add_argument("--regressors", metavar="NAME,...",
                   help=f"compare only these (default all: {', '.join(PERF_REGRESSORS)})")
    f.add_argument("--no-baseline", action="store_true",
                   help="fit log(time) directly, without the cost-term baseline")
    f.add_argument("--no-blocks", action="store_true",
                   help="sample square induced sub-graphs only, not also the worker blocks "
                        "(rows by the columns they read) of a METIS split of each")
    f.add_argument("--holdout", metavar="D,...",
                   help="also score the chosen model on these whole graphs (e.g. "
                        "citeseer,powerlaw)")
    f.add_argument("--threads", type=int, default=1,
                   help="torch threads of the cpu device (default 1: a multi-threaded op on a "
                        "busy machine waits for its other threads at random; 0: torch's "
                        "default)")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="predicted time of one aggregation on each device",
                       description="Predict the time of Z = A H (H: --width columns) of "
                                   "--dataset's graph on the model's devices; --measure also "
                                   "times it and prints the error.")
    # required, and the old --model must satisfy it too: both in one required group
    required = p.add_mutually_exclusive_group(required=True)
    required.add_argument("--perf-model", metavar="M.json",
                          help="a model from moagcn perfmodel fit")
    add_renamed(required, "--model", "--perf-model")
    p.add_argument("--dataset", required=True, metavar="D", help=dataset_help)
    add_undirected_arg(p)
    p.add_argument("--width", required=True, type=int, metavar="F", help="feature columns")
    p.add_argument("--op", choices=("sum", "weighted", "sddmm"), default="sum",
                   help="the operation: sum (the aggregation, default), weighted (GAT's "
                        "weighted aggregation, --width columns per head) or sddmm (its "
                        "scores, --width columns per head); the model must be fitted with it")
    p.add_argument("--heads", type=int, default=1,
                   help="heads of a weighted or sddmm product (default 1)")
    p.add_argument("--keep", default="1", metavar="K",
                   help="kept fraction of a random output mask (default 1: no mask; 0.5 for a "
                        "dropout of 0.5)")
    p.add_argument("--devices", metavar="SPECS",
                   help="only these devices (each must be in the model; default: all)")
    p.add_argument("--measure", action="store_true",
                   help="also time the aggregation on each device and print the error")
    p.add_argument("--device", choices=("model", "rtl"), default="model",
                   help="how accelerators are timed with --measure (default model)")
    p.add_argument("--seed", type=int, default=0, help="seed of a generated graph")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the cpu device")
    p.set_defaults(func=cmd_predict)
