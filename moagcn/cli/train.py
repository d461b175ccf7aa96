"""``moagcn train`` and ``moagcn pipeline``: the host runtime's sub-commands.

:func:`register` adds both to the ``moagcn`` parser (``moagcn/cli/main.py`` calls it); the handlers
raise :class:`~moagcn.errors.UserError` for bad input, which the CLI prints as one line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from moagcn.cli.common import (accelerator_choice, add_accelerator_args, add_undirected_arg,
                               one_line_warnings, output_path, report_path, write_json)
from moagcn.core.names import GNN_NAMES, PARALLELISMS, PARTITION_METHODS
from moagcn.core.options import deprecated
from moagcn.errors import UserError

DEFAULT_TRAIN_REPORT = "reports/train/report.json"
DEFAULT_PIPELINE_REPORT = "reports/pipeline/report.json"
#: ``--pipeline``'s values -> the runtime's (``TrainConfig.pipeline``): ``layers`` is the plain
#: MoP runtime (no batches); ``off`` the pipeline's batches one after another, no overlap
PIPELINES = {"layers": "none", "off": "off", "natural": "natural", "rcm": "rcm"}


# -- helpers -------------------------------------------------------------------------------------

def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# -- train ---------------------------------------------------------------------------------------

def _train_plots(report: dict, path: Path) -> list[Path]:
    plt = _pyplot()
    curves = path.with_name(path.stem + "-curves.png")
    times = path.with_name(path.stem + "-time.png")
    epochs = range(1, len(report["train_loss"]) + 1)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(epochs, report["train_loss"], label=f"{report['device']} device")
    ref = report.get("reference")
    if ref:
        ref_epochs = range(1, len(ref["train_loss"]) + 1)
        ax1.plot(ref_epochs, ref["train_loss"], "--", label="plain torch reference")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("training loss")
    ax1.legend()
    ax2.plot(epochs, report["val_acc_curve"], label="validation")
    ax2.plot(epochs, report["test_acc_curve"], label="test")
    if ref:
        ax2.plot(ref_epochs, ref["test_acc_curve"], "--", label="test (reference)")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy")
    ax2.legend()
    fig.suptitle(f"{report['model'].upper()} on {report['dataset']}: "
                 f"{report['parallelism']} x {report['workers']}, {report['device']} device")
    fig.tight_layout()
    fig.savefig(curves, dpi=110)
    plt.close(fig)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    phases = report["phase_time_s"]
    names = ["aggregate", "update", "communicate"]
    ax1.bar(names, [phases.get(k, 0.0) * 1e3 for k in names],
            color=["tab:blue", "tab:orange", "tab:green"])
    ax1.set_ylabel("ms per training step")
    ax1.set_title(f"time per epoch ({report['epoch_time_s'] * 1e3:.1f} ms)")
    ops = report["worker_ops"]
    workers = [w["worker"] for w in ops]
    width = 0.4
    ax2.bar([w - width / 2 for w in workers], [w["sparse_adds"] for w in ops], width,
            label="sparse adds")
    ax2.bar([w + width / 2 for w in workers], [w["dense_macs"] for w in ops], width,
            label="dense MACs")
    ax2.set_xlabel("worker")
    ax2.set_ylabel("operations per training step")
    ax2.set_xticks(workers)
    ax2.legend()
    ax2.set_title("work per worker")
    fig.tight_layout()
    fig.savefig(times, dpi=110)
    plt.close(fig)
    return [curves, times]


def pipeline_mode(value: str) -> str:
    """The runtime's name of ``--pipeline VALUE`` (``none``, the old name of ``layers``, prints
    its deprecation line)."""
    if value == "none":
        deprecated("--pipeline none", "--pipeline layers")
        return "none"
    return PIPELINES[value]


def _set_threads(threads: int) -> None:
    """Apply ``--threads`` (0: torch's default)."""
    import torch
    if threads < 0:
        raise UserError(f"--threads {threads}: use 0 (torch's default) or more")
    if threads:
        torch.set_num_threads(threads)


def cmd_train(args) -> int:
    """Train a GNN with aggregation on sparse devices; write the report and plots."""
    from tqdm import tqdm

    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.datasets import load_dataset
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.training.config import TrainConfig
    from moagcn.host.training.fullgraph import train, train_reference  # lazy, as above


    choice = accelerator_choice(args)
    gat = args.model == "gat"
    if args.heads is not None and not gat:
        raise UserError(f"--heads {args.heads}: attention heads need --model gat")
    if args.sddmm_preset is not None and not gat:
        raise UserError(f"--sddmm-preset {args.sddmm_preset}: the SDDMM computes attention "
                        "scores, which need --model gat")
    # lazy: keeps the host runtime out of this module's import
    from moagcn.cli.train_gat import GAT_DEFAULTS
    for name, default in (("hidden", 16), ("lr", 0.01), ("dropout", 0.5), ("early_stop", 10)):
        if getattr(args, name) is None:      # GAT: PyG's Cora example's settings
            setattr(args, name, GAT_DEFAULTS.get(name, 0) if gat else default)
    if gat:
        if args.heads is None:
            args.heads = GAT_DEFAULTS["heads"]
        runtime = (args.parallelism == "partition" or args.workers > 1 or args.devices
                   or args.distributed)
        if not runtime:    # PyG's example, one process
            # lazy: keeps the host runtime out of this module's import
            from moagcn.cli.train_gat import cmd_train_gat
            _set_threads(args.threads)
            return cmd_train_gat(args, choice)
        # workers, fleets, --distributed: the runtimes' training (MoP or partition)
        # lazy: keeps the host runtime out of this module's import
        from moagcn.cli.train_gat import check_runtime_gat
        check_runtime_gat(args)
    rpath = report_path(args.report)
    save = output_path(args.save, "--save") if args.save else None
    _set_threads(args.threads)
    if args.devices and args.workers == 1:      # the fleet sets the worker count
        # lazy: keeps the host runtime out of this module's import
        from moagcn.host.devices.select import parse_devices
        args.workers = len(parse_devices(args.devices))
    if args.devices and choice.device == "cpu" and args.device is None:
        raise UserError("--devices needs --device model or rtl (what runs the accelerators)")
    if args.distributed and args.workers < 2 and not _under_torchrun():
        raise UserError("--distributed runs one process per worker: give --workers 2 or more")
    adjust = None
    if args.adjust is not None:
        # lazy: keeps the host runtime out of this module's import
        from moagcn.host.vgnn.adjust import check_budget
        adjust = check_budget(args.adjust)
        if args.no_adjust:
            raise UserError("--adjust and --no-adjust contradict each other; give one")
    elif args.no_adjust:
        adjust = 0
    if (args.adjust is not None or args.no_adjust) and not args.devices:
        raise UserError("--adjust / --no-adjust need a mixed fleet (--devices SPEC,SPEC,...)")
    cfg = TrainConfig(model=args.model, layers=args.layers, hidden=args.hidden,
                      dropout=args.dropout, dropout_at=args.dropout_at, lr=args.lr,
                      weight_decay=args.weight_decay,
                      epochs=args.epochs, early_stop=args.early_stop, seed=args.seed,
                      device=choice.device,
                      design=choice.design, preset=choice.preset, params=dict(choice.params),
                      simulator=choice.simulator,
                      workers=args.workers, parallelism=args.parallelism,
                      partition=args.partition, aggregation=args.aggregation,
                      comm_bits=args.comm_bits, label_prop=args.label_prop,
                      layer_norm=args.layer_norm, reorder=args.reorder,
                      devices=args.devices, balance=args.balance, perf_model=args.perf_model,
                      adjust=adjust, warmup=args.warmup,
                      pipeline=pipeline_mode(args.pipeline), stages=args.stages,
                      heads=args.heads if gat else 8,
                      normalize_features=not args.raw_features).validate()
    with one_line_warnings():
        dataset = load_dataset(args.dataset, seed=args.seed, undirected=args.undirected)
    rank0 = True
    if args.distributed and _under_torchrun():
        import os
        rank0 = os.environ.get("RANK", "0") == "0"
    if rank0:
        print(f"{dataset.summary()}\n{cfg.model.upper()} {cfg.layers} layers, hidden "
              f"{cfg.hidden}, {cfg.parallelism} x {cfg.workers}"
              f"{' (torch.distributed)' if args.distributed else ''}, device {cfg.device}"
              f"{'' if cfg.device == 'cpu' else ' ' + cfg.design}, "
              f"{'at most ' if cfg.early_stop else ''}{cfg.epochs} epochs"
              f"{f' (early stop, window {cfg.early_stop})' if cfg.early_stop else ''}")
    # shown after a second: a configuration the runtime refuses ends with its one line alone
    bar = tqdm(total=cfg.epochs, desc="train", unit="epoch", disable=args.quiet or not rank0,
               file=sys.stderr, delay=1.0)

    def on_epoch(rec):
        bar.update(1)
        bar.set_postfix(loss=f"{rec.loss:.3f}", val=f"{rec.val_acc:.3f}")
        ph = rec.phase_time_s
        line = (f"epoch {rec.epoch + 1:4d}/{cfg.epochs}  loss {rec.loss:.4f}  "
                f"train {rec.train_acc:.3f}  val {rec.val_acc:.3f}  test {rec.test_acc:.3f}  "
                f"{rec.time_s * 1e3:7.1f} ms (agg {ph.get('aggregate', 0) * 1e3:.1f}, "
                f"upd {ph.get('update', 0) * 1e3:.1f}, comm {ph.get('communicate', 0) * 1e3:.1f})"
                f"  comm {_si(rec.comm_bytes)}B  cycles {_si(rec.sim_cycles)}")
        if not args.quiet:
            bar.write(line)

    t0 = time.perf_counter()
    try:
        if args.distributed:
            # lazy: keeps the host runtime, torch out of this module's import
            from moagcn.host.training.distributed import train_distributed, train_from_env
            if _under_torchrun():
                result = train_from_env(dataset, cfg, on_epoch=on_epoch if rank0 else None)
            else:
                result = train_distributed(dataset, cfg, on_epoch=on_epoch)
        else:
            result = train(dataset, cfg, on_epoch=on_epoch,
                           on_adjust=lambda a: bar.write("re-partition, " + a.line()))
    finally:
        bar.close()
    wall = time.perf_counter() - t0
    if not rank0:
        return 0
    report = result.report()
    report["wall_s"] = wall
    report["dataset_path"] = args.dataset
    if args.reference:
        ref = train_reference(dataset, cfg)
        report["reference"] = {"device": "torch", "test_acc": ref.test_acc,
                               "val_acc": ref.val_acc, "train_loss": ref.train_loss,
                               "test_acc_curve": [r.test_acc for r in ref.history]}
    write_json(rpath, report)
    if save is not None:
        # lazy: keeps the host runtime, torch out of this module's import
        from moagcn.host.nn.checkpoint import save as save_checkpoint
        save_checkpoint(save, result.model_state, result.model_meta)
        print(f"checkpoint: {save}")
    plots = _train_plots(report, rpath)
    sc = report["sim_cycles"]
    stop = (f" (early stop after epoch {report['epochs_run']}: validation loss above the mean of "
            f"the {cfg.early_stop} epochs before)" if report["stopped_early"] else "")
    print(f"done in {wall:.1f} s: test accuracy {report['test_acc']:.4f}, validation "
          f"{report['val_acc']:.4f}, final loss {report['train_loss'][-1]:.4f}{stop}")
    if args.reference:
        print(f"plain torch reference (same seed): test accuracy "
              f"{report['reference']['test_acc']:.4f}")
    if report.get("pipeline"):
        p = report["pipeline"]
        print(f"pipeline {p['pipeline']}: s = {p['stages']} batches, bandwidth b = "
              f"{p['bandwidth']} of n = {p['nodes']} (Prop. 3.5 holds: {p['prop35_holds']}); "
              f"forward makespan {p['makespan_s'] * 1e3:.2f} ms, idle fraction "
              f"{p['idle_fraction']:.3f}, sparse stalls {p['sparse_stall_s'] * 1e3:.2f} ms, "
              f"pipeline speed-up over off {p['pipeline_speedup']:.2f}x; backward makespan "
              f"{p['backward_makespan_s'] * 1e3:.2f} ms, idle fraction "
              f"{p['backward_idle_fraction']:.3f}; whole step {p['step_pipeline_speedup']:.2f}x "
              "over off")
    if report.get("shares") is not None or report.get("fleet"):
        times = ", ".join(f"{t * 1e3:.2f}" for t in report["device_time_s"])
        shares = ", ".join(f"{x:.3f}" for x in report["shares"]) if report["shares"] else "equal"
        print(f"fleet {report['fleet']}: shares {shares}; device time per epoch (ms) {times}; "
              f"makespan {report['makespan_s'] * 1e3:.2f} ms")
        pred = report.get("predicted_device_time_s")
        if pred is not None:
            print("predicted device time (ms) " + ", ".join(f"{t * 1e3:.2f}" for t in pred)
                  + f"; error {100 * report['prediction_mape_curve'][-1]:.1f}% (mean over the "
                    "devices, last epoch)")
        adj = report.get("adjust") or {}
        if adj.get("log"):
            first = ", ".join(f"{x:.3f}" for x in report["initial_shares"]) \
                if report["initial_shares"] else "equal"
            print(f"split corrected {len(adj['log'])} time(s) from the measured device times "
                  f"(budget {adj['budget']}, warm-up {adj['warmup']} epoch(s)): shares "
                  f"{first} -> {shares}")
    print(f"epoch time {report['epoch_time_s'] * 1e3:.1f} ms; accelerator cycles per epoch "
          f"{sc['per_epoch']:,} (busiest device {sc['per_epoch_max_device']:,}); "
          f"all-to-all bytes per epoch {report['comm_bytes']:,}")
    print(f"report: {rpath}")
    print("plots: " + ", ".join(str(p) for p in plots))
    return 0


def _under_torchrun() -> bool:
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.parallel.launch import under_torchrun
    return under_torchrun()


# -- pipeline ------------------------------------------------------------------------------------

def _pipeline_plot(rep, path: Path, title: str) -> Path:
    plt = _pyplot()
    out = path.with_name(path.stem + "-timeline.png")
    fig, axes = plt.subplots(len(rep), 1, figsize=(10, 1.8 * len(rep) + 0.6), squeeze=False)
    for ax, (label, r) in zip(axes[:, 0], rep.items()):
        tl = r.timeline()
        colors = plt.get_cmap("tab10")
        for unit, y, starts, ends in (("sparse", 1, tl.sparse_start, tl.sparse_end),
                                      ("dense", 0, tl.dense_start, tl.dense_end)):
            for layer, (ls, le) in enumerate(zip(starts, ends)):
                ax.broken_barh([(a, b - a) for a, b in zip(ls, le)], (y - 0.4, 0.8),
                               facecolors=colors(layer), edgecolor="white", linewidth=0.3)
        ax.set_yticks([0, 1], ["dense", "sparse"])
        ax.set_title(f"{label}: b = {r.bandwidth}, s = {r.batches}, idle "
                     f"{r.idle_fraction:.3f}, makespan {r.makespan_cycles:,} cycles", fontsize=9)
    axes[-1, 0].set_xlabel("accelerator cycles (colour = layer)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def cmd_pipeline(args) -> int:
    """Simulate the fine-grain pipeline with and without reordering; write the report."""
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.datasets import load_dataset
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.mixgcn.pipeline import analyze

    rpath = report_path(args.report)
    _set_threads(args.threads)
    if args.batches < 1:
        raise UserError(f"--batches {args.batches}: use at least 1 batch")
    if args.hidden < 1 or args.layers < 1:
        raise UserError("--hidden and --layers must be at least 1")
    if args.dense_macs_per_cycle is not None and args.dense_macs_per_cycle <= 0:
        raise UserError(f"--dense-macs-per-cycle {args.dense_macs_per_cycle}: must be > 0")
    if not 0 < args.mask_density <= 1:
        raise UserError(f"--mask-density {args.mask_density}: must be in (0, 1]")
    with one_line_warnings():
        dataset = load_dataset(args.dataset, seed=args.seed, undirected=args.undirected)
    choice = accelerator_choice(args)
    config = choice.config()
    widths = [dataset.n_features] + [args.hidden] * (args.layers - 1) + [dataset.n_classes]
    results = {}
    for order in ([args.reorder] + [o for o in ("none", "rcm") if o != args.reorder]):
        r = analyze(dataset.graph, args.batches, widths, config, reorder=order,
                    mask_density=args.mask_density,
                    dense_macs_per_cycle=args.dense_macs_per_cycle, seed=args.seed)
        results[order] = r
    main = results[args.reorder]
    report = {k: v for k, v in main.as_dict().items()
              if k not in ("sparse_cycles", "dense_cycles", "dependencies")}
    report.update(dataset=dataset.name, dataset_path=args.dataset, design=choice.design,
                  preset=choice.preset or choice.spec.default_preset, params=dict(choice.params),
                  clock_mhz=config.clock_mhz,
                  per_batch_cycles={"sparse": main.sparse_cycles, "dense": main.dense_cycles},
                  compare={o: {k: getattr(r, k) for k in
                               ("bandwidth", "stages_prop35", "prop35_holds", "idle_fraction",
                                "makespan_cycles", "bottleneck", "sparse_stall_cycles",
                                "dense_stall_cycles", "first_batch_dependency")}
                           for o, r in results.items()})
    write_json(rpath, report)
    plot = _pipeline_plot({f"order {o}": r for o, r in results.items()}, rpath,
                          f"{dataset.name}: fine-grain pipeline, widths {widths}")
    print(dataset.summary())
    for o, r in results.items():
        print(f"order {o:4s}: bandwidth {r.bandwidth}, Prop. 3.5 stages {r.stages_prop35} "
              f"({'met' if r.prop35_holds else 'not met'} with s = {r.batches}), idle fraction "
              f"{r.idle_fraction:.4f} ({r.bottleneck}-bound), makespan {r.makespan_cycles:,} "
              "cycles")
    print(f"report: {rpath}")
    print(f"plot: {plot}")
    return 0


# -- parser --------------------------------------------------------------------------------------

def register(subparsers) -> None:
    """Add the ``train`` and ``pipeline`` sub-commands to a ``moagcn`` sub-parser set."""
    tr = subparsers.add_parser(
        "train", help="train GCN/GraphSAGE/GIN with aggregation on sparse devices",
        description="Full-graph training with the neighbour aggregation (forward: dropout mask, "
                    "backward: ReLU mask) on S-SpMM devices and the node updates on torch, "
                    "under Mixture of Parallelism or partition parallelism. Defaults follow "
                    "Kipf & Welling (hidden 16, dropout 0.5, Adam lr 0.01, weight decay 5e-4, "
                    "at most 200 epochs with early stopping on the validation loss, window "
                    "10, row-normalised features).")
    tr.add_argument("--dataset", default="sbm", metavar="sbm|rmat|cora|citeseer|PATH",
                    help="built-in synthetic graph (sbm, rmat), bundled Planetoid data (cora, "
                         "citeseer), an .npz dataset or a PyG Data .pt "
                         "(docs/formats.md; default: sbm)")
    add_undirected_arg(tr)
    tr.add_argument("--model", default="gcn", choices=GNN_NAMES,
                    help="the GNN (default gcn); gat: PyG's Cora GAT example (--heads; "
                         "--device cpu, or model/rtl with --param weighted=true: "
                         "docs/attention.md)")
    tr.add_argument("--heads", type=int, default=None, metavar="K",
                    help="--model gat: attention heads of the first layer (default 8)")
    tr.add_argument("--sddmm-preset", default=None, metavar="NAME",
                    help="--model gat on model/rtl: the preset of the SDDMM that computes the "
                         "attention scores beside the weighted S-SpMM (default: tiny with "
                         "--preset tiny, else default; docs/attention.md)")
    add_accelerator_args(tr, design=None)
    tr.add_argument("--workers", type=int, default=1, metavar="M",
                    help="sparse devices = dense workers (default 1)")
    tr.add_argument("--parallelism", default="mop", choices=PARALLELISMS,
                    help="mop: Mixture of Parallelism (MixGCN; the default); partition: "
                         "partition parallelism with halo exchanges (SuperGCN, vGNN)")
    tr.add_argument("--partition", default="contiguous", choices=PARTITION_METHODS,
                    help="node partition of --parallelism partition")
    tr.add_argument("--aggregation", default="post", choices=("post", "pre", "prepost"),
                    help="--parallelism partition: aggregate cut edges at the receiver (post, "
                         "the halo exchange), at the sender (pre) or as a minimum vertex cover "
                         "decides (prepost; SuperGCN, docs/runtime.md)")
    tr.add_argument("--comm-bits", type=int, default=32, choices=(32, 16, 8, 4, 2),
                    help="bits per value of every message between workers: 32 (fp32), 16 "
                         "(bf16), 8/4/2 (per-row zero point and scale, stochastic rounding)")
    tr.add_argument("--label-prop", type=float, default=0.0, metavar="R",
                    help="masked label propagation: each epoch, embed the labels of a random "
                         "fraction R of the training nodes into their input features and train "
                         "on the others (SuperGCN; default 0: off)")
    tr.add_argument("--layer-norm", action="store_true",
                    help="LayerNorm of every layer's input rows before they are aggregated or "
                         "sent (--parallelism partition; SuperGCN uses it with --comm-bits 2)")
    tr.add_argument("--distributed", action="store_true",
                    help="one torch.distributed process per worker (spawned, or torchrun's)")
    tr.add_argument("--epochs", type=int, default=200,
                    help="training epochs at most (default 200)")
    tr.add_argument("--early-stop", type=int, default=None, metavar="W",
                    help="stop once an epoch's validation loss exceeds the mean of the W "
                         "epochs before it (Kipf & Welling's window; default 10, 0: train "
                         "every epoch; gat: 0)")
    tr.add_argument("--layers", type=int, default=2, help="GNN layers (default 2)")
    tr.add_argument("--hidden", type=int, default=None,
                    help="hidden units (default 16; gat: 8 per head)")
    tr.add_argument("--lr", type=float, default=None,
                    help="Adam learning rate (default 0.01; gat: 0.005)")
    tr.add_argument("--weight-decay", type=float, default=5e-4,
                    help="Adam weight decay (default 5e-4)")
    tr.add_argument("--dropout", type=float, default=None,
                    help="dropout rate (default 0.5; gat: 0.6, inputs and attention)")
    tr.add_argument("--dropout-at", default="aggregate", choices=("aggregate", "input"),
                    help="where dropout acts: on the aggregation output, as the S-SpMM output "
                         "mask (MixGCN Eq. 4; default), or on each layer's input, as PyG "
                         "(docs/pyg.md: accuracy against skipped work)")
    tr.add_argument("--seed", type=int, default=0,
                    help="seed of the weights, dropout masks and dataset (default 0)")
    tr.add_argument("--reorder", default="none", choices=["none", "rcm"],
                    help="relabel the nodes before training")
    tr.add_argument("--raw-features", action="store_true",
                    help="do not row-normalise the input features")
    tr.add_argument("--reference", action="store_true",
                    help="also train the plain torch reference (same seed) and report it")
    tr.add_argument("--report", default=DEFAULT_TRAIN_REPORT, metavar="R.json",
                    help="JSON report; plots are written beside it "
                         f"(default {DEFAULT_TRAIN_REPORT})")
    tr.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads of the dense workers (default 1: the per-layer "
                         "tensors are small, and extra threads cost more than they give when "
                         "the cores are shared; 0 keeps torch's default)")
    tr.add_argument("--devices", default=None, metavar="SPEC,SPEC,...",
                    help="a mixed fleet, one sparse device per worker: design[:KEY=VALUE...] "
                         "or cpu, e.g. sspmm:lanes=32,sspmm:lanes=8:clock_mhz=150,cpu "
                         "(docs/vgnn.md); --device model|rtl runs the accelerators")
    tr.add_argument("--balance", default="uniform", choices=("uniform", "spec", "vgnn"),
                    help="each worker's share of the work: equal, by peak capability (lanes x "
                         "clock), or by the fitted performance model (--perf-model)")
    tr.add_argument("--perf-model", default=None, metavar="M.json",
                    help="a model from moagcn perfmodel fit, for --balance vgnn (with another "
                         "balance it predicts the devices' times for the report)")
    tr.add_argument("--adjust", type=int, default=None, metavar="K",
                    help="after warm-up, correct the split from the measured device times and "
                         "re-partition, at most K times (>= 1; the default for --balance vgnn "
                         "is 3, --balance spec does it only when asked; docs/vgnn.md)")
    tr.add_argument("--no-adjust", action="store_true",
                    help="--balance vgnn: keep the performance model's split for the whole run")
    tr.add_argument("--warmup", type=int, default=1, metavar="W",
                    help="epochs trained on a split before its device times are read (the "
                         "median of W; default 1)")
    tr.add_argument("--pipeline", default="layers", choices=(*PIPELINES, "none"),
                    metavar="{" + ",".join(PIPELINES) + "}",
                    help="MoP's executed fine-grain pipeline: layers (the default) runs no "
                         "pipeline, each layer aggregated whole, then updated; natural: batches "
                         "of nodes aggregated as soon as their inputs exist, the sparse and "
                         "dense units in two threads; rcm: the same in RCM node order; off: "
                         "natural's batches one after another, no overlap (the pipeline's "
                         "baseline); the report gets the timeline (docs/runtime.md)")
    tr.add_argument("--stages", type=int, default=None, metavar="S",
                    help="--pipeline batches (a multiple of --workers; default from Prop. 3.5)")
    tr.add_argument("--save", default=None, metavar="C.pt",
                    help="write the trained weights as a checkpoint (for moagcn infer)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar or per-epoch lines")
    tr.set_defaults(func=cmd_train)

    pp = subparsers.add_parser(
        "pipeline", help="simulate the fine-grain sparse/dense pipeline (Prop. 3.5, RCM)",
        description="Cut the nodes into s batches and simulate aggregation on the S-SpMM cycle "
                    "model against dense updates, with and without RCM reordering.")
    pp.add_argument("--dataset", default="sbm", metavar="sbm|rmat|cora|citeseer|PATH",
                    help="built-in synthetic graph (sbm, rmat), bundled Planetoid data (cora, "
                         "citeseer), an .npz dataset or a PyG Data .pt "
                         "(docs/formats.md; default: sbm)")
    add_undirected_arg(pp)
    pp.add_argument("--batches", type=int, required=True, metavar="S",
                    help="batches s the nodes are cut into")
    pp.add_argument("--reorder", default="rcm", choices=["rcm", "none"],
                    help="the node order reported first (both are simulated; default rcm)")
    pp.add_argument("--hidden", type=int, default=16, help="hidden units (default 16)")
    pp.add_argument("--layers", type=int, default=2, help="GNN layers (default 2)")
    pp.add_argument("--preset", default=None, metavar="NAME",
                    help="S-SpMM configuration of the cycle model (default: 'default')")
    pp.add_argument("--param", action="append", metavar="KEY=VALUE",
                    help="set one configuration field on top of --preset (repeatable)")
    pp.set_defaults(design_name="sspmm", device="model", simulator=None, backend=None)
    pp.add_argument("--mask-density", type=float, default=0.5,
                    help="fraction of aggregation outputs computed (dropout keep rate)")
    pp.add_argument("--dense-macs-per-cycle", type=float, default=None,
                    help="dense speed at the accelerator clock (default: measured with torch)")
    pp.add_argument("--threads", type=int, default=1,
                    help="torch threads for the dense timing (default 1, as moagcn train)")
    pp.add_argument("--seed", type=int, default=0,
                    help="seed of the dataset and the masks (default 0)")
    pp.add_argument("--report", default=DEFAULT_PIPELINE_REPORT, metavar="R.json",
                    help="JSON report; the timeline plot is written beside it "
                         f"(default {DEFAULT_PIPELINE_REPORT})")
    pp.set_defaults(func=cmd_pipeline)
