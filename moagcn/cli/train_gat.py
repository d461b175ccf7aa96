"""``moagcn train --model gat``: PyG's Cora GAT example with moagcn's GATConv
(:mod:`moagcn.host.training.gat`), full graph, one process, the sparse products on ``cpu`` or,
on ``model`` / ``rtl``, on the weighted S-SpMM (``--param weighted=true``) paired with the
SDDMM (``--sddmm-preset``), each design's cycles per epoch reported.

The options of the GCN runtimes that this one-process path does not have (workers, fleets,
pipelines, label propagation, ...) are refused in one line when given, never ignored; with
``--workers``, ``--devices``, ``--distributed`` or ``--parallelism partition`` GAT trains on the
runtimes instead (MoP: :meth:`moagcn.host.mixgcn.mop.MoPRuntime._gat_forward`; partition:
:meth:`moagcn.host.supergcn.partition.PartitionRuntime._gat_forward`), checked by
:func:`check_runtime_gat`.
``--save C.pt`` writes the trained GAT as a checkpoint (:mod:`moagcn.host.nn.checkpoint`) that
``moagcn infer`` embeds all nodes with.
"""

from __future__ import annotations

import sys
import time

from moagcn.cli.common import one_line_warnings, output_path, report_path, write_json
from moagcn.errors import UserError

#: PyG's Cora GAT example, where the flag is not given
GAT_DEFAULTS = {"heads": 8, "hidden": 8, "dropout": 0.6, "lr": 0.005}

#: (attribute, value it must keep, flag) for the GCN runtimes' options
_UNSUPPORTED = (("workers", 1, "--workers"), ("parallelism", "mop", "--parallelism"),
                ("devices", None, "--devices"), ("distributed", False, "--distributed"),
                ("label_prop", 0.0, "--label-prop"), ("layer_norm", False, "--layer-norm"),
                ("reorder", "none", "--reorder"), ("pipeline", "layers", "--pipeline"),
                ("comm_bits", 32, "--comm-bits"), ("layers", 2, "--layers"),
                ("dropout_at", "aggregate", "--dropout-at"), ("reference", False, "--reference"),
                ("balance", "uniform", "--balance"),
                ("perf_model", None, "--perf-model"), ("adjust", None, "--adjust"),
                ("aggregation", "post", "--aggregation"), ("stages", None, "--stages"))


def check_runtime_gat(args) -> None:
    """``--model gat`` on the runtimes (workers, fleets, ``--distributed``; MoP or partition
    parallelism): refuse in one line what it does not take, before any work -- the plain torch
    reference, ``--dropout-at`` and the SDDMM's preset (each accelerator's is its default).
    ``TrainConfig`` refuses the rest (an accelerator without edge weights among them)."""
    if args.reference:
        raise UserError("--reference with --model gat: the plain torch reference trains GCN, "
                        "GraphSAGE and GIN; the GAT's own reference is the one-process run "
                        "(leave out --workers, --devices, --distributed); leave it out")
    if args.dropout_at != "aggregate":
        raise UserError(f"--dropout-at {args.dropout_at} with --model gat: a GAT's dropout is "
                        "PyG's (each layer's input and the attention weights); leave it out")
    if args.sddmm_preset is not None:
        raise UserError(f"--sddmm-preset {args.sddmm_preset}: on the runtimes (workers, "
                        "fleets) each worker's SDDMM is its design's default preset; leave "
                        "it out")


def cmd_train_gat(args, choice) -> int:
    """Train PyG's example GAT; write the report (JSON)."""
    for attr, keep, flag in _UNSUPPORTED:
        if getattr(args, attr, keep) != keep:
            raise UserError(f"{flag} {getattr(args, attr)}: not available with --model gat "
                            "in one process (PyG's Cora example: --heads, --hidden, "
                            "--dropout, --lr, --weight-decay, --epochs, --seed); with "
                            "--workers, --devices or --distributed GAT trains on the "
                            "runtimes, or leave it out")
    if args.early_stop not in (None, 0):
        raise UserError(f"--early-stop {args.early_stop}: not available with --model gat "
                        "(PyG's example trains every epoch); leave it out")
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.graphs.datasets import load_dataset
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.training.gat import GATConfig, train_gat

    cfg = GATConfig(heads=args.heads, hidden=args.hidden, dropout=args.dropout, lr=args.lr,
                    weight_decay=args.weight_decay, epochs=args.epochs, seed=args.seed,
                    device=choice.device, design=choice.design, preset=choice.preset,
                    params=dict(choice.params), simulator=choice.simulator,
                    sddmm_preset=args.sddmm_preset,
                    normalize_features=not args.raw_features).validate()
    rpath = report_path(args.report)
    save = output_path(args.save, "--save") if getattr(args, "save", None) else None
    with one_line_warnings():
        dataset = load_dataset(args.dataset, seed=args.seed, undirected=args.undirected)
    cfg.validate(dataset)
    print(f"{dataset.summary()}\nGAT 2 layers, {cfg.heads} heads x {cfg.hidden} hidden, "
          f"dropout {cfg.dropout}, lr {cfg.lr}, device {cfg.device_label()}, {cfg.epochs} epochs")

    def cycles(r):
        if not r.counters:
            return ""
        return "  cycles " + " + ".join(f"{d} {c['cycles_total']:,}"
                                        for d, c in r.counters[-1].items())

    def on_epoch(epoch, r):
        if not args.quiet:
            print(f"epoch {epoch + 1:4d}/{cfg.epochs}  loss {r.loss[-1]:.4f}  train "
                  f"{r.train_acc[-1]:.3f}  val {r.val_acc[-1]:.3f}  test {r.test_acc[-1]:.3f}  "
                  f"{r.epoch_s[-1] * 1e3:7.1f} ms{cycles(r)}", file=sys.stderr)

    t0 = time.perf_counter()
    result = train_gat(dataset, cfg, "moagcn", on_epoch)
    wall = time.perf_counter() - t0
    report = result.report()
    report.update(wall_s=wall, dataset=dataset.name, dataset_path=args.dataset,
                  device=cfg.device, heads=cfg.heads, hidden=cfg.hidden, seed=cfg.seed,
                  counters=result.model.conv1.sparse_device.counters.as_dict())
    write_json(rpath, report)
    if save is not None:
        # lazy: keeps the host runtime, torch out of this module's import
        from moagcn.host.nn.checkpoint import save as save_checkpoint
        save_checkpoint(save, result.model.state_dict(), result.model_meta(dataset, cfg))
        print(f"checkpoint: {save}")
    print(f"done in {wall:.1f} s: test accuracy {report['test_acc']:.4f} (at the best "
          f"validation epoch {report['best_val_test_acc']:.4f}), validation "
          f"{report['val_acc']:.4f}, final loss {report['train_loss'][-1]:.4f}")
    print(f"epoch time {report['epoch_s_median'] * 1e3:.1f} ms (median)")
    if "sim_cycles" in report:
        sc = report["sim_cycles"]
        per = ", ".join(f"{d} {c:,}" for d, c in sc["per_epoch"].items())
        print(f"accelerator cycles per training step (last epoch): {per}; total "
              f"{sc['per_epoch_total']:,} ({sc['accelerator_s_per_epoch'] * 1e3:.2f} ms at "
              "each design's clock)")
    print(f"report: {rpath}")
    return 0
