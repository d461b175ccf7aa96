"""moagcn against PyTorch Geometric: accuracy and seconds per epoch on Cora and CiteSeer.

``moagcn bench pyg [--datasets cora,citeseer] [--seeds 3] [--epochs 200] [--design sspmm]
[--preset NAME] [--param KEY=VALUE] [--out DIR]`` (the ``model`` runs on the accelerator the
shared flags choose; ``--device`` takes ``model`` only, since ``--impls`` names the devices) trains
the same 2-layer GCN (16 hidden, dropout 0.5, Adam lr 0.01, weight decay 5e-4 on every
parameter, row-normalised features, Planetoid split) several ways, on one torch thread, in one
process, one after the other for every seed:

- ``pyg``: PyG's ``GCNConv`` in the model of PyG's ``examples/gcn.py`` (dropout on each layer's
  input);
- ``nn:cpu``, ``nn:model``: the same model with :class:`moagcn.nn.GCNConv` on the ``cpu`` and
  ``model`` sparse devices (same seed, so the same initial weights and dropout draws);
- ``train:cpu``, ``train:model``: ``moagcn train`` (:func:`moagcn.host.training.fullgraph.train`), which
  drops each layer's aggregation output (the S-SpMM output mask) instead of its input;
- ``train:cpu:input-dropout``: ``moagcn train --dropout-at input`` (dropout on each layer's
  input, as PyG; the forward S-SpMM then has no mask to skip).
- ``gat:pyg``, ``gat:cpu``, ``gat:model``: PyG's Cora GAT example (8 heads x 8 hidden, dropout
  0.6, Adam lr 0.005, weight decay 5e-4) with PyG's ``GATConv`` and with
  :class:`moagcn.nn.GATConv` on the ``cpu`` device (``moagcn train --model gat``) or on
  ``model`` (the weighted S-SpMM beside the SDDMM; ``weighted=true`` is set for it). GAT rows
  are timed against ``gat:pyg``, GCN rows against ``pyg``.

An epoch is one training step plus one evaluation forward pass, for every row. Accuracy is the
test accuracy after the last epoch. The conv models are also timed stepped round-robin, one
epoch each in turn (median seconds per epoch), which a busy machine slows alike. Writes ``bench_pyg.json`` and ``bench_pyg.csv`` to ``--out``
and prints a table (mean ± std over seeds).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from moagcn.core.device import CpuDevice
from moagcn.core.options import Accelerator, accelerator, add_accelerator_flags
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.data import BUNDLED, Dataset, bundled_path, load_npz
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.pyg import require_pyg, to_edge_index
from moagcn.host.nn.layers import GCNConv
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train

IMPLS = ("pyg", "nn:cpu", "nn:model", "train:cpu", "train:model", "train:cpu:input-dropout",
         "gat:pyg", "gat:cpu", "gat:model")
#: what ``--impls`` runs by default (the GAT rows on request: they take four times as long)
DEFAULT_IMPLS = IMPLS[:6]
FIELDS = ("dataset", "impl", "seed", "test_acc", "s_per_epoch", "train_s_per_epoch",
          "eval_s_per_epoch", "epochs")


def bundled(name: str) -> Dataset:
    if name not in BUNDLED:
        raise UserError(f"--datasets {name}: not a bundled dataset; choose from "
                        f"{', '.join(BUNDLED)}")
    return load_npz(bundled_path(name))


class Net(torch.nn.Module):
    """PyG's examples/gcn.py model: dropout, conv, relu, dropout, conv."""

    def __init__(self, conv1, conv2, p: float = 0.5):
        super().__init__()
        self.conv1, self.conv2, self.p = conv1, conv2, p

    def forward(self, x, edge_index):
        x = F.dropout(x, self.p, self.training)
        x = torch.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.p, self.training)
        return self.conv2(x, edge_index)


def _model_choice(accel: Accelerator | None) -> AcceleratorChoice:
    """The ``model`` device's accelerator (default: the S-SpMM's default preset)."""
    if accel is None:
        return AcceleratorChoice("model")
    return AcceleratorChoice("model", accel.design, accel.preset, accel.params)


def make_net(kind: str, d: Dataset, seed: int, accel: Accelerator | None = None) -> Net:
    """The :class:`Net` of ``kind``: PyG's ``GCNConv`` (``pyg``) or moagcn's on the ``cpu`` or
    ``model`` device (``nn:cpu``, ``nn:model``), from ``seed``."""
    torch.manual_seed(seed)
    if kind == "pyg":
        tg = require_pyg()
        return Net(tg.nn.GCNConv(d.n_features, 16), tg.nn.GCNConv(16, d.n_classes))

    dev = CpuDevice() if kind == "nn:cpu" else _model_choice(accel).make()
    return Net(GCNConv(d.n_features, 16, device=dev), GCNConv(16, d.n_classes, device=dev))


def run_conv_model(kind: str, d: Dataset, seed: int, epochs: int, record: bool = False,
                   accel: Accelerator | None = None) -> dict:
    """Train the :class:`Net` of ``kind`` (``pyg``, ``nn:cpu``, ``nn:model``); ``record``
    adds the training loss of every epoch (``loss_curve``)."""
    x = torch.from_numpy(row_normalize(d.features))
    y = torch.from_numpy(d.labels)
    ei = to_edge_index(d.graph)
    tr, te = torch.from_numpy(d.train_mask), torch.from_numpy(d.test_mask)
    net = make_net(kind, d, seed, accel)
    opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
    t_train = t_eval = 0.0
    losses = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        net.train()
        opt.zero_grad()
        loss = F.cross_entropy(net(x, ei)[tr], y[tr])
        loss.backward()
        opt.step()
        if record:
            losses.append(loss.item())
        t1 = time.perf_counter()
        net.eval()
        with torch.no_grad():
            pred = net(x, ei).argmax(1)
        t_eval += time.perf_counter() - t1
        t_train += t1 - t0
    acc = float((pred[te] == y[te]).float().mean())
    out = {"test_acc": acc, "train_s_per_epoch": t_train / epochs,
           "eval_s_per_epoch": t_eval / epochs}
    if record:
        out["loss_curve"] = losses
    return out


def time_interleaved(d: Dataset, kinds: list[str], epochs: int, seed: int = 0,
                     accel: Accelerator | None = None) -> dict:
    """Median seconds per epoch of the conv models ``kinds`` (``pyg``, ``nn:cpu``,
    ``nn:model``), stepped round-robin one epoch each, so that a busy spell of the machine
    slows them alike."""
    x = torch.from_numpy(row_normalize(d.features))
    y = torch.from_numpy(d.labels)
    ei = to_edge_index(d.graph)
    tr = torch.from_numpy(d.train_mask)
    nets = {}
    for kind in kinds:
        net = make_net(kind, d, seed, accel)
        nets[kind] = (net, torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4))
    times = {k: [] for k in kinds}
    for _ in range(epochs):
        for kind, (net, opt) in nets.items():
            t0 = time.perf_counter()
            net.train()
            opt.zero_grad()
            F.cross_entropy(net(x, ei)[tr], y[tr]).backward()
            opt.step()
            net.eval()
            with torch.no_grad():
                net(x, ei).argmax(1)
            times[kind].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def run_train(kind: str, d: Dataset, seed: int, epochs: int,
              accel: Accelerator | None = None) -> dict:
    """``moagcn train`` on ``cpu`` or ``model`` (``train:DEVICE[:input-dropout]``)."""
    parts = kind.split(":")
    fields = {} if accel is None or parts[1] == "cpu" else {
        "design": accel.design, "preset": accel.preset, "params": dict(accel.params)}
    cfg = TrainConfig(device=parts[1], seed=seed, epochs=epochs, **fields,
                      dropout_at="input" if parts[2:] == ["input-dropout"] else "aggregate")
    r = train(d, cfg).report()
    return {"test_acc": r["test_acc"], "train_s_per_epoch": r["epoch_time_s"],
            "eval_s_per_epoch": r["eval_time_s"]}


def run_gat(kind: str, d: Dataset, seed: int, epochs: int,
            accel: Accelerator | None = None) -> dict:
    """PyG's GAT example with PyG's or moagcn's ``GATConv`` (``gat:pyg|cpu|model``)."""
    # lazy: the GAT trainer imports the attention layers only when a GAT row runs
    from moagcn.host.training.gat import GATConfig, train_gat

    device = kind.split(":")[1]
    fields = {}
    if device == "model":
        # GAT aggregates with attention weights: the weighted S-SpMM, whatever else is set
        params = {} if accel is None else dict(accel.params)
        fields = {"params": {**params, "weighted": "true"}}
        if accel is not None:
            fields.update(design=accel.design, preset=accel.preset)
    cfg = GATConfig(seed=seed, epochs=epochs, device="cpu" if device == "pyg" else device,
                    **fields)
    r = train_gat(d, cfg, "pyg" if device == "pyg" else "moagcn")
    # means over the epochs, as ``moagcn train``'s report gives the GCN rows
    step, epoch = np.mean(r.step_s), np.mean(r.epoch_s)
    return {"test_acc": r.final_test_acc, "best_val_test_acc": r.best_val_test_acc,
            "train_s_per_epoch": float(step), "eval_s_per_epoch": float(epoch - step)}


def run(impl: str, d: Dataset, seed: int, epochs: int, accel: Accelerator | None = None) -> dict:
    head = impl.split(":")[0]
    out = (run_conv_model if head in ("pyg", "nn") else run_gat if head == "gat" else
           run_train)(impl, d, seed, epochs, accel=accel)
    out["s_per_epoch"] = out["train_s_per_epoch"] + out["eval_s_per_epoch"]
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Mean and std of accuracy and time per (dataset, implementation)."""
    out = []
    keys = dict.fromkeys((r["dataset"], r["impl"]) for r in rows)
    for ds, impl in keys:
        sel = [r for r in rows if r["dataset"] == ds and r["impl"] == impl]
        acc = np.array([r["test_acc"] for r in sel])
        t = np.array([r["s_per_epoch"] for r in sel])
        best = [r["best_val_test_acc"] for r in sel if "best_val_test_acc" in r]
        out.append({"dataset": ds, "impl": impl, "seeds": len(sel),
                    "test_acc_mean": float(acc.mean()), "test_acc_std": float(acc.std()),
                    "best_val_test_acc_mean": float(np.mean(best)) if best else None,
                    "s_per_epoch_mean": float(t.mean()), "s_per_epoch_std": float(t.std())})
    for s in out:  # time against PyG's on the same dataset (GAT against PyG's GAT)
        ref = "gat:pyg" if s["impl"].startswith("gat:") else "pyg"
        base = next((b for b in out if b["dataset"] == s["dataset"] and b["impl"] == ref), None)
        s["time_over_pyg"] = s["s_per_epoch_mean"] / base["s_per_epoch_mean"] if base else None
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moagcn bench pyg", description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="cora,citeseer",
                        help="bundled datasets, comma-separated (default cora,citeseer)")
    parser.add_argument("--impls", default=",".join(DEFAULT_IMPLS),
                        help=f"comma-separated, from {', '.join(IMPLS)} (default "
                             f"{','.join(DEFAULT_IMPLS)})")
    parser.add_argument("--seeds", type=int, default=3,
                        help="training seeds 0..N-1 of every implementation (default 3)")
    parser.add_argument("--epochs", type=int, default=200,
                        help="training epochs of every run (default 200)")
    add_accelerator_flags(parser, devices=("model",), device="model",
                          why={"--device": "this bench runs cpu and model side by side, as "
                                           "--impls names them; the accelerator's device is model"},
                          notes={"--device": "the device of the --impls model runs, whose "
                                             "accelerator --design, --preset and --param choose"})
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", default="reports/bench-pyg", metavar="DIR",
                        help="folder of bench_pyg.json and bench_pyg.csv (default "
                             "reports/bench-pyg)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        raise UserError(f"--impls {','.join(bad)}: choose from {', '.join(IMPLS)}")
    if args.seeds < 1 or args.epochs < 1:
        raise UserError("--seeds and --epochs must be at least 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    accel = accelerator(args)
    datasets = {name: bundled(name) for name in args.datasets.split(",") if name}
    rows = []
    for name, d in datasets.items():
        for seed in range(args.seeds):
            for impl in impls:
                r = {"dataset": name, "impl": impl, "seed": seed, "epochs": args.epochs,
                     **run(impl, d, seed, args.epochs, accel)}
                rows.append(r)
                print(f"{name:9s} {impl:24s} seed {seed}  test {r['test_acc']:.3f}  "
                      f"{r['s_per_epoch'] * 1e3:7.1f} ms/epoch", flush=True)
    summary = summarize(rows)
    conv = [i for i in impls if i.split(":")[0] in ("pyg", "nn")]
    gat = [i for i in impls if i.startswith("gat:")]
    interleaved = {}
    if len(conv) > 1:
        for name, d in datasets.items():
            interleaved[name] = time_interleaved(d, conv, args.epochs, accel=accel)
            print(f"{name}: median s/epoch, interleaved: " + ", ".join(
                f"{k} {v * 1e3:.1f} ms" for k, v in interleaved[name].items()), flush=True)
    with open(out / "bench_pyg.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows({k: r[k] for k in FIELDS} for r in rows)
    (out / "bench_pyg.json").write_text(json.dumps(
        {"threads": args.threads, "epochs": args.epochs, "seeds": args.seeds,
         "torch": torch.__version__, "summary": summary, "interleaved_s_per_epoch": interleaved,
         "runs": rows}, indent=2) + "\n")
    print(f"\n| dataset | implementation | test accuracy (mean ± std, {args.seeds} seeds) | "
          "s/epoch | time / PyG |")
    print("|---|---|---|---|---|")
    for s in summary:
        ratio = "" if s["time_over_pyg"] is None else f"{s['time_over_pyg']:.2f}"
        print(f"| {s['dataset']} | {s['impl']} | {s['test_acc_mean']:.3f} ± "
              f"{s['test_acc_std']:.3f} | {s['s_per_epoch_mean']:.4f} | {ratio} |")
    if gat:
        print(f"\nGAT, test accuracy at the epoch of the best validation accuracy (what PyG's "
              f"example prints), mean of {args.seeds} seeds; difference from gat:pyg")
        for s in summary:
            if s["impl"] in gat:
                ref = next((b for b in summary if b["dataset"] == s["dataset"]
                            and b["impl"] == "gat:pyg"), None)
                diff = ("" if ref is None else
                        f"  final {100 * (s['test_acc_mean'] - ref['test_acc_mean']):+.2f} "
                        f"points, best-val "
                        f"{100 * (s['best_val_test_acc_mean'] - ref['best_val_test_acc_mean']):+.2f}"
                        f" points")
                print(f"  {s['dataset']} {s['impl']}: best-val {s['best_val_test_acc_mean']:.4f}"
                      f", final {s['test_acc_mean']:.4f}{diff}")
    print(f"\nwrote {out / 'bench_pyg.json'} and {out / 'bench_pyg.csv'}")
    return 0
