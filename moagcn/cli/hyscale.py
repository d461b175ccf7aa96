"""``moagcn hyscale run``: one fused GNN layer on the HyScale-GNN kernels (RTL or model);
``moagcn hyscale train``: hybrid CPU + accelerator mini-batch training (host/hyscale/train.py)."""

from __future__ import annotations

import time

import numpy as np

from moagcn.cli.common import (accelerator_choice, add_accelerator_args, add_undirected_arg,
                               job_driver, load_float32, load_graph, one_line_warnings,
                               output_path, report_path, write_json)
from moagcn.config import parse_params
from moagcn.core.options import add_renamed
from moagcn.errors import UserError


def _cpu_share(text: str):
    """``--cpu-share``: a number, ``model`` or ``even`` (None: equal per trainer)."""
    if text in ("model", "even"):
        return None if text == "even" else "model"
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--cpu-share {text!r}: give a share in (0, 1), 'model' or "
                        "'even'") from None


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
    if args.report:
        write_json(args.report, report)
    where = f"rtl on {choice.simulator}" if choice.device == "rtl" else choice.device
    print(f"hyscale on {where} ({report['preset']}, n={config.spes}, m={config.macs}): "
          f"{report['destinations']} rows, {report['edges']} edges, "
          f"{report['distinct_sources']} sources, {report['f_in']} -> {report['f_out']}, "
          f"{report['tiles']} job(s): {report['cycles_total']:.0f} cycles, "
          f"{report['cycles_load']:.0f} load"
          + (f" ({report['cycles_load_hidden']:.0f} more hidden behind the job before)"
             if report.get("cycles_load_hidden") else "")
          + f" + {report['cycles_compute']:.0f} compute (kernel "
          f"model {report['model_cycles']:.0f}, error {report['model_error']:+.3f}; Eq. 11 + 12 "
          f"on compute {report['paper_model_error']:+.3f}), feature reads "
          f"{report['feature_reads']}, wall {wall:.2f} s -> {args.out}"
          + (f", {args.report}" if args.report else ""))
    return 0


def cmd_hyscale_train(args) -> int:
    import sys

    from tqdm import tqdm

    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.datasets import load_dataset
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.hyscale.train import HybridConfig, train_hybrid, train_hybrid_distributed

    rpath = report_path(args.report)
    save = output_path(args.save, "--save") if args.save else None
    choice = accelerator_choice(args)
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.formats import warn_unused_weights
    with one_line_warnings():
        dataset = load_dataset(args.dataset, seed=args.seed, undirected=args.undirected)
        warn_unused_weights(dataset, f"dataset {args.dataset}", "moagcn hyscale train")
    batch = args.batch
    if batch is None:
        # lazy: keeps the host runtime out of this module's import
        from moagcn.host.graphs.minibatch import training_ids
        batch = min(1024, int(training_ids(dataset.train_mask, labels=dataset.labels).size))
    cfg = HybridConfig(model=args.model, hidden=args.hidden, fanouts=args.fanout,
                       batch=batch, trainers=args.trainers,
                       device=choice.device if choice.device != "cpu" else "model",
                       design=choice.design, preset=choice.preset,
                       params=dict(parse_params(args.param)), epochs=args.epochs, lr=args.lr,
                       dropout=args.dropout, seed=args.seed,
                       cpu_share=_cpu_share(args.cpu_share),
                       drm=not args.no_drm, prefetch=not args.no_prefetch,
                       update_on=args.update_on, pin_cores=not args.no_pin_cores,
                       recheck=not args.no_recheck, recheck_threshold=args.recheck_threshold,
                       **({"stage_a": args.stage_a} if args.stage_a else {}))
    cfg.validate(dataset)
    where = "processes" if cfg.stage_a == "process" else "threads"
    print(f"{dataset.summary()}\n{cfg.model.upper()} hidden {cfg.hidden}, fanouts "
          f"{cfg.fanouts}, batch {cfg.batch}, trainers {cfg.trainers} (accelerators: "
          f"{cfg.device} {cfg.design}), DRM {'on' if cfg.drm else 'off'}, prefetch "
          f"{f'on (stage A in {where})' if cfg.prefetch else 'off'}"
          f"{', one process per trainer' if args.distributed else ''}")
    bar = tqdm(desc="train", unit="it", disable=args.quiet, file=sys.stderr)

    def on_iteration(rec):
        bar.update(1)
        bar.set_postfix(loss=f"{rec['loss']:.3f}", share=f"{rec['drm']['cpu_share']:.2f}")

    def say(text):
        if not args.quiet:
            tqdm.write(text, file=sys.stderr)

    try:
        if args.distributed:
            report = train_hybrid_distributed(dataset, cfg, on_iteration, args.timeout,
                                              progress=say)
        else:
            report = train_hybrid(dataset, cfg, on_iteration, progress=say)
    finally:
        bar.close()
    state = report.pop("model_state")
    write_json(rpath, report)
    if save is not None:
        # lazy: keeps the host runtime, torch out of this module's import
        from moagcn.host.nn.checkpoint import save as save_checkpoint
        save_checkpoint(save, state, {"model": cfg.model, "in_features": dataset.n_features,
                                      "hidden": cfg.hidden, "n_classes": dataset.n_classes,
                                      "layers": len(cfg.fanout_list()),
                                      "label_embedding": False, "layer_norm": False,
                                      "normalize_features": cfg.normalize_features,
                                      "dataset": dataset.name, "n_nodes": dataset.n_nodes,
                                      "test_acc": report["test_acc"]})
    its = report["iterations"]
    tail = its[len(its) // 2:]
    throughput = np.mean([r['throughput_targets_per_s'] for r in tail])
    print(f"test accuracy {report['test_acc']:.4f} (validation {report['val_acc']:.4f}); "
          f"{len(its)} iterations, throughput {throughput:,.0f} "
          f"targets/s over the second half; CPU share {report['final_cpu_share']:.3f} "
          f"(initial {report['initial_split']['cpu_share']:.3f}, "
          f"{report['initial_split']['source']})")
    mc = report.get("model_check")
    if mc and mc["epochs"]:
        errs = [e["error"] for e in mc["epochs"]]
        print(f"system model: epoch predicted {mc['epochs'][-1]['predicted_s']:.4f} s against "
              f"{mc['epochs'][-1]['measured_s']:.4f} s measured in the last epoch; error per "
              f"epoch {100 * min(errs):+.1f} .. {100 * max(errs):+.1f} % (median |error| "
              f"{100 * float(np.median(np.abs(errs))):.1f} %), re-calibrated "
              f"{mc['recalibrations']} time(s) (threshold {100 * mc['threshold']:g} %)")
    print(f"report: {rpath}")
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
    r.add_argument("--features", required=True, metavar="X.npy",
                   help="the input features X, float32, one row per source")
    r.add_argument("--weight", required=True, metavar="W.npy",
                   help="the weight W, float32, f_in x f_out")
    r.add_argument("--bias", metavar="b.npy", help="the bias b, float32, f_out (default none)")
    r.add_argument("--relu", action="store_true", help="act = ReLU (default: the identity)")
    r.add_argument("--out", required=True, metavar="Y.npy", help="the result Y")
    r.add_argument("--report", metavar="R.json",
                   help="also write the counters, model errors and configuration as JSON "
                        "(default: none)")
    add_accelerator_args(r, design="hyscale", devices=("model", "rtl"),
                         legacy={"--spes": "spes", "--macs": "macs"})
    r.add_argument("--vcd", metavar="FILE", help="write a waveform (cocotb path)")
    r.set_defaults(func=cmd_hyscale_run)
    t = hp_sub.add_parser("train", help="hybrid CPU + accelerator mini-batch training "
                                        "(HyScale-GNN's system: trainers, prefetching, DRM)")
    t.add_argument("--dataset", default="cora", metavar="sbm|rmat|cora|citeseer|PATH",
                   help="built-in synthetic graph (sbm, rmat), bundled Planetoid data (cora, "
                        "citeseer), an .npz dataset or a PyG Data .pt (docs/formats.md; "
                        "default: cora)")
    add_undirected_arg(t)
    t.add_argument("--model", default="sage", choices=("gcn", "sage"),
                   help="the GNN (default sage)")
    t.add_argument("--fanout", default="10,25", metavar="K1,K2",
                   help="neighbours per node and layer, input layer first (default 10,25: "
                        "GraphSAGE's 25 at the targets' hop, 10 at the next)")
    t.add_argument("--batch-size", type=int, default=None, dest="batch",
                   help="targets per mini-batch (default 1024, or the whole training set if it "
                        "is smaller)")
    add_renamed(t, "--batch", "--batch-size")
    t.add_argument("--trainers", default="cpu:1,accel:1", metavar="KIND:N,...",
                   help="cpu, accel (the accelerator: --device, --design, --param) and gpu "
                        "trainers (default cpu:1,accel:1)")
    t.add_argument("--cpu-share", default="model", metavar="S|model|even",
                   help="the CPU trainers' initial share of each batch: a share in (0, 1), "
                        "'model' (the default: the performance model calibrated on this "
                        "machine picks the split with the shortest predicted epoch, as the "
                        "paper's design-time mapping does; a few seconds) or 'even' (equal "
                        "per trainer)")
    t.add_argument("--no-drm", action="store_true", help="keep the initial split")
    t.add_argument("--recheck-threshold", type=float, default=0.1, metavar="E",
                   help="with the split from the model: re-calibrate the model from the run's "
                        "stage times where an epoch's predicted time is off by more than this "
                        "relative error (default 0.1; inf: report the error, never "
                        "re-calibrate), and let the DRM re-split from it")
    t.add_argument("--no-recheck", action="store_true",
                   help="do not re-check the model's prediction during training")
    t.add_argument("--distributed", action="store_true",
                   help="one torch.distributed process per trainer (gradients all-reduced)")
    t.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="--distributed: fail if a process waits longer than this for a peer")
    t.add_argument("--no-prefetch", action="store_true",
                   help="sample, load and transfer in sequence with training")
    t.add_argument("--stage-a", choices=("process", "thread"), default=None,
                   help="prefetching: sample and load in forked processes (the default where "
                        "the platform can fork: no interpreter lock shared with the trainers) "
                        "or in threads")
    t.add_argument("--no-pin-cores", action="store_true",
                   help="leave the stage-A processes and the trainers to the scheduler (by "
                        "default each stage-A process has a core of its own and the trainers "
                        "the others, where there are more cores than stage-A processes)")
    t.add_argument("--update-on", choices=("device", "host"), default="device",
                   help="where accelerator trainers run their dense layers (the update and its "
                        "two backward products): on the design's dense datapath where it has "
                        "one (--design hyscale: the systolic array), or in torch on the host "
                        "(default: device)")
    t.add_argument("--hidden", type=int, default=128, help="hidden units (default 128)")
    t.add_argument("--epochs", type=int, default=5, help="training epochs (default 5)")
    t.add_argument("--lr", type=float, default=0.005, help="Adam learning rate (default 0.005)")
    t.add_argument("--dropout", type=float, default=0.5, help="dropout rate (default 0.5)")
    t.add_argument("--seed", type=int, default=0,
                   help="seed of the weights, sampling and dataset (default 0)")
    add_accelerator_args(t, design=None, devices=("model", "rtl"))
    t.add_argument("--report", default="reports/hyscale-train/report.json", metavar="R.json",
                   help="JSON report (default reports/hyscale-train/report.json)")
    t.add_argument("--save", default=None, metavar="C.pt",
                   help="write the trained weights as a checkpoint (for moagcn infer)")
    t.add_argument("--quiet", action="store_true", help="no progress bar or progress lines")
    t.set_defaults(func=cmd_hyscale_train)
