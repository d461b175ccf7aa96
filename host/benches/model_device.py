"""The bit-exact ``model`` device's speed: one S-SpMM against scipy, and training against ``cpu``.

``moagcn bench model-device [--nodes 100000] [--entries 1000000] [--width 64] [--repeats 5]
[--rmat-scale 17] [--epochs 3] [--model gcn|gat] [--seed 0] [--preset NAME] [--param KEY=VALUE] [--out DIR]``
(``--device`` model and ``--design`` sspmm only: the bench measures the S-SpMM's model device)
prints one JSON object:

- ``sspmm``: one S-SpMM (no mask) of a power-law graph (``moagcn.host.graphs.generators.synth_graph``,
  ``--nodes`` nodes, ``--entries`` stored entries) with ``--width`` columns, on the ``model``
  device of the default S-SpMM preset (bit-exact Z and the cycle model's counters): the first
  call (which plans the tiles) and the median of ``--repeats`` later calls, against the median
  of scipy's float32 CSR product on the same arrays, and their ratios (issue target: the model
  device within 10x of scipy); the largest difference between the two results (the model sums
  each row in the golden model's fixed order, scipy in the stored order); and the same
  steady-state time at half the entries (``per_entry_ratio``: how far from linear in entries
  x width the cost is, 1.0 = linear).
- ``train``: ``moagcn train``'s GCN (2 layers, hidden 16; with ``--model gat`` PyG's GAT
  example, 8 heads x 8 hidden, on ``model`` the weighted S-SpMM beside the SDDMM) for
  ``--epochs`` epochs on R-MAT at
  ``--rmat-scale`` (2^K nodes) with ``--width`` features, aggregating on the ``model``
  device and on ``cpu``, one after the other: mean seconds per epoch each, the epochs after the
  first (the model device plans A's and A^T's tiles in its first), and the ratio (issue target:
  within 3x); both runs' final losses, which match (same seed; the model's sums are exact
  float32 sums in another order).

``--out DIR`` writes ``model-device-bench.json``. Timings depend on the machine and what else
runs on it; one run is one sample.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from moagcn.core.generators import synth_graph
from moagcn.core.graph import CSRGraph
from moagcn.core.options import Accelerator, accelerator, add_accelerator_flags, add_renamed
from moagcn.errors import UserError
from moagcn.host.graphs.generators import rmat


def _time(fn, repeat: int) -> tuple[float, object]:
    """Median seconds of ``repeat`` calls of ``fn`` and its last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def sspmm_speed(nodes: int, entries: int, features: int, repeat: int, seed: int,
                accel: Accelerator | None = None) -> dict:
    """``accel``: the model device's design, preset and fields (default: the S-SpMM's default
    preset)."""
    # lazy: keeps torch out of this module's import
    from moagcn.host.devices.select import AcceleratorChoice
    choice = AcceleratorChoice("model") if accel is None else \
        AcceleratorChoice("model", accel.design, accel.preset, accel.params)

    def one(m: int) -> dict:
        indptr, indices, _ = synth_graph(nodes, m, max_degree=max(nodes / 20, 2), seed=seed)
        H = np.random.default_rng(seed + 1).standard_normal((nodes, features)).astype(np.float32)
        A = sp.csr_matrix((np.ones(indices.size, np.float32), indices, indptr),
                          shape=(nodes, nodes))
        scipy_s, Z_ref = _time(lambda: A @ H, repeat)
        device = choice.make()
        csr = CSRGraph(indptr, indices, nodes)
        t0 = time.perf_counter()
        Z = device.sspmm(csr, H)
        first = time.perf_counter() - t0
        steady, Z = _time(lambda: device.sspmm(csr, H), repeat)
        return {"nodes": nodes, "entries": int(indices.size), "features": features,
                "scipy_s": scipy_s, "model_first_s": first, "model_s": steady,
                "model_over_scipy_first": first / scipy_s, "model_over_scipy": steady / scipy_s,
                "max_abs_diff_vs_scipy": float(np.abs(np.asarray(Z) - Z_ref).max()),
                "max_abs_scipy": float(np.abs(Z_ref).max())}

    full = one(entries)
    half = one(entries // 2)
    full["half_entries"] = {k: half[k] for k in ("entries", "scipy_s", "model_s")}
    full["per_entry_ratio"] = (full["model_s"] / full["entries"]) / (half["model_s"]
                                                                      / half["entries"])
    return full


def _train_gat(d, device: str, epochs: int, seed: int, fields: dict) -> dict:
    """PyG's GAT example (8 heads x 8 hidden) on ``device``: the weighted S-SpMM and the SDDMM
    on ``model`` (``weighted=true`` added), torch on ``cpu``; seconds per training step (the
    evaluation pass left out, as the GCN runs' ``epoch_time_s`` leaves it)."""
    # lazy: keeps torch out of this module's import
    from moagcn.host.training.gat import GATConfig, train_gat
    if device == "model":
        fields = {**fields, "params": {"weighted": "true", **fields.get("params", {})}}
    r = train_gat(d, GATConfig(epochs=epochs, device=device, seed=seed, **fields))
    return {"epoch_s": float(statistics.mean(r.step_s)), "epoch_s_curve": list(r.step_s),
            "final_loss": r.loss[-1]}


def train_speed(scale: int, features: int, epochs: int, seed: int,
                accel: Accelerator | None = None, model: str = "gcn") -> dict:
    # lazy: keeps torch out of this module's import
    from moagcn.host.training.config import TrainConfig
    from moagcn.host.training.fullgraph import train  # lazy, as above
    d = rmat(scale=scale, n_features=features, seed=seed)
    out = {"dataset": f"rmat-{scale}", "gnn": model, "nodes": int(d.graph.n_rows),
           "entries": int(d.graph.nnz), "features": features, "epochs": epochs}
    for device in ("model", "cpu"):
        fields = {} if accel is None or device == "cpu" else {
            "design": accel.design, "preset": accel.preset, "params": dict(accel.params)}
        if model == "gat":
            out[device] = _train_gat(d, device, epochs, seed, fields)
        else:
            r = train(d, TrainConfig(epochs=epochs, device=device, seed=seed,
                                     **fields)).report()
            out[device] = {"epoch_s": r["epoch_time_s"], "epoch_s_curve": r["epoch_time_s_curve"],
                           "final_loss": r["train_loss"][-1]}
        curve = out[device]["epoch_s_curve"]
        out[device]["later_epochs_s"] = statistics.mean(curve[1:]) if len(curve) > 1 else curve[0]
    out["model_over_cpu"] = out["model"]["epoch_s"] / out["cpu"]["epoch_s"]
    out["model_over_cpu_later_epochs"] = (out["model"]["later_epochs_s"]
                                          / out["cpu"]["later_epochs_s"])
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn bench model-device",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000,
                    help="nodes of the S-SpMM's power-law graph (default 100000)")
    ap.add_argument("--entries", type=int, default=1_000_000,
                    help="stored entries of the S-SpMM's graph (default 1000000)")
    ap.add_argument("--width", type=int, default=64, metavar="F",
                    help="feature columns of both parts (default 64)")
    add_renamed(ap, "--features", "--width")
    ap.add_argument("--repeats", type=int, default=5, dest="repeat",
                    help="timed S-SpMM calls after the first; the median is reported "
                         "(default 5)")
    add_renamed(ap, "--repeat", "--repeats")
    ap.add_argument("--rmat-scale", type=int, default=17, dest="train_scale", metavar="K",
                    help="R-MAT graph of 2^K nodes of the training run (0: no training run; "
                         "default 17)")
    add_renamed(ap, "--train-scale", "--rmat-scale")
    ap.add_argument("--epochs", type=int, default=3,
                    help="epochs of each training run (default 3)")
    ap.add_argument("--model", choices=("gcn", "gat"), default="gcn",
                    help="the training run's model: gcn (2 layers, hidden 16) or gat (PyG's "
                         "GAT example, 8 heads x 8 hidden; on model the weighted S-SpMM beside "
                         "the SDDMM) (default gcn)")
    add_accelerator_flags(ap, designs=("sspmm",), devices=("model",), device="model",
                          why={"--device": "this bench measures the model device against scipy "
                                           "and against the cpu device: model only"},
                          notes={"--simulator": "unused (the model device only)"})
    ap.add_argument("--seed", type=int, default=0, help="graph and training seed (default 0)")
    ap.add_argument("--out", metavar="DIR", help="also write DIR/model-device-bench.json")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for flag, name in (("--nodes", "nodes"), ("--entries", "entries"),
                       ("--width", "width"), ("--repeats", "repeat"),
                       ("--epochs", "epochs")):
        if getattr(args, name) < 1:
            raise UserError(f"{flag} {getattr(args, name)} must be at least 1")
    if args.train_scale < 0:
        raise UserError(f"--rmat-scale {args.train_scale} must be >= 0 (0: no training run)")
    print("S-SpMM: model device and scipy", file=sys.stderr, flush=True)
    acc = accelerator(args)
    out = {"sspmm": sspmm_speed(args.nodes, args.entries, args.width, args.repeat, args.seed,
                                acc)}
    if args.train_scale:
        print("training: model device and cpu", file=sys.stderr, flush=True)
        out["train"] = train_speed(args.train_scale, args.width, args.epochs, args.seed, acc,
                                   args.model)
    s = out["sspmm"]
    print(f"S-SpMM {s['nodes']} nodes, {s['entries']} entries, F = {s['features']}: model "
          f"device {s['model_s'] * 1e3:.1f} ms ({s['model_first_s'] * 1e3:.1f} ms first call), "
          f"scipy {s['scipy_s'] * 1e3:.1f} ms: {s['model_over_scipy']:.1f}x "
          f"({s['model_over_scipy_first']:.1f}x first; target <= 10x); cost per entry at "
          f"{s['entries']} / {s['half_entries']['entries']} entries: "
          f"{s['per_entry_ratio']:.2f}", file=sys.stderr)
    if "train" in out:
        t = out["train"]
        print(f"training {t['gnn'].upper()} {t['epochs']} epochs on {t['dataset']} ({t['nodes']} nodes, "
              f"{t['entries']} entries, F = {t['features']}): model {t['model']['epoch_s']:.3f} "
              f"s per epoch, cpu {t['cpu']['epoch_s']:.3f} s: {t['model_over_cpu']:.2f}x "
              f"(after the first epoch {t['model_over_cpu_later_epochs']:.2f}x; target <= 3x)",
              file=sys.stderr)
    print(json.dumps(out, indent=2))
    if args.out:
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "model-device-bench.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
