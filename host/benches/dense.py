"""The dense workers on each torch device: full-graph GCN training with the aggregation on a
sparse device (``cpu``: torch's sparse product; ``model``: the bit-exact S-SpMM model) and the
node updates on the CPU or on CUDA.

``moagcn bench dense-device [--rmat-scale 15] [--width 512] [--hidden 256] [--epochs 6]
[--sparse cpu,model] [--dense auto] [--threads 8] [--seed 0] [--design sspmm] [--preset NAME]
[--param KEY=VALUE] [--out DIR]`` (the ``model`` runs on the accelerator the shared flags
choose; ``--device`` takes ``model`` only, since ``--sparse`` names the devices) trains ``moagcn
train``'s GCN (2 layers, Adam, dropout 0.5) on R-MAT at ``--rmat-scale`` (2^K nodes) with
``--width`` input features, once per sparse device and dense device, one run after the
other, and prints one JSON object:

- ``runs["SPARSE+DENSE"]``: the median seconds per epoch after the first (the first builds the
  CUDA context and plans the model device's tiles, and is reported apart), the mean per-phase
  seconds of ``moagcn train``'s report (``aggregate`` is the sparse products, forward and
  backward, with the copies of their operands between the GPU and the host), the loss curve and
  the test accuracy.
- with two dense devices, per sparse device: ``cpu_dense_over_cuda_dense`` (above 1: CUDA
  faster) and the largest difference between the two loss curves (same seed and dropout masks;
  the two devices round the products' sums differently).

``--dense auto`` is ``cuda,cpu`` where torch sees a GPU, else ``cpu``. The sparse devices run
on the host in every case, so a CUDA dense worker copies each aggregation's operand to the host
and its result back: docs/runtime.md ("On a GPU") has the figures of one H200 and where their
time goes. ``--out DIR`` writes ``dense-device-bench.json``. One run is one sample.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from moagcn.core.options import Accelerator, accelerator, add_accelerator_flags, add_renamed
from moagcn.errors import UserError
from moagcn.host.graphs.generators import rmat


def _dense_devices(spec: str) -> list[str]:
    import torch
    names = (["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]) if spec == "auto" \
        else [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise UserError(f"--dense {spec!r} names no device; give auto, cpu, cuda or cuda,cpu")
    for name in names:
        if name not in ("cpu", "cuda"):
            raise UserError(f"--dense {spec!r}: {name!r} is not cpu or cuda")
        if name == "cuda" and not torch.cuda.is_available():
            raise UserError(f"--dense {spec!r}: torch sees no CUDA GPU here; use --dense cpu")
    if len(set(names)) != len(names):
        raise UserError(f"--dense {spec!r} names a device twice")
    return names


def run(scale: int, features: int, hidden: int, epochs: int, sparse: list[str],
        dense: list[str], seed: int = 0, progress=None, accel: Accelerator | None = None) -> dict:
    """``accel``: the accelerator of the ``model`` runs (default: the S-SpMM's default
    preset)."""
    import torch

    # lazy: keeps torch out of this module's import
    from moagcn.host.training.config import TrainConfig
    from moagcn.host.training.fullgraph import train  # lazy, as above
    d = rmat(scale=scale, n_features=features, seed=seed)
    out = {"dataset": f"rmat-{scale}", "nodes": int(d.graph.n_rows), "entries": int(d.graph.nnz),
           "features": features, "hidden": hidden, "epochs": epochs,
           "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
           "gpu": torch.cuda.get_device_name(0) if "cuda" in dense else None, "runs": {}}
    for dev in dense:
        for sp in sparse:
            t0 = time.perf_counter()
            fields = {} if accel is None or sp == "cpu" else {
                "design": accel.design, "preset": accel.preset, "params": dict(accel.params),
                "simulator": accel.simulator}
            r = train(d, TrainConfig(device=sp, epochs=epochs, hidden=hidden, seed=seed,
                                     **fields), dense=torch.device(dev)).report()
            curve = r["epoch_time_s_curve"]
            out["runs"][f"{sp}+{dev}"] = {
                "sparse": sp, "dense": r["dense_device"], "wall_s": time.perf_counter() - t0,
                "first_epoch_s": curve[0],
                "epoch_s": statistics.median(curve[1:]) if len(curve) > 1 else curve[0],
                "epoch_s_curve": curve, "phase_time_s": r["phase_time_s"],
                "loss": r["train_loss"], "test_acc": r["test_acc"]}
            if progress:
                progress(f"sparse {sp}, dense {dev}")
    if sorted(dense) == ["cpu", "cuda"]:
        out["compare"] = compare(out["runs"], sparse)
    return out


def compare(runs: dict, sparse: list[str]) -> dict:
    """Per sparse device: the CPU-dense run's epoch time over the CUDA-dense run's, and the
    largest difference between their loss curves."""
    out = {}
    for sp in sparse:
        g, c = runs[f"{sp}+cuda"], runs[f"{sp}+cpu"]
        out[sp] = {"cpu_dense_over_cuda_dense": c["epoch_s"] / g["epoch_s"],
                   "max_abs_loss_diff": max(abs(x - y) for x, y in zip(g["loss"], c["loss"]))}
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn bench dense-device",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rmat-scale", type=int, default=15, dest="scale", metavar="K",
                    help="R-MAT graph of 2^K nodes (default 15)")
    add_renamed(ap, "--scale", "--rmat-scale")
    ap.add_argument("--width", type=int, default=512, metavar="F",
                    help="input feature columns of the graph (default 512)")
    add_renamed(ap, "--features", "--width")
    ap.add_argument("--hidden", type=int, default=256, help="hidden units (default 256)")
    ap.add_argument("--epochs", type=int, default=6,
                    help="training epochs of every run (default 6)")
    ap.add_argument("--sparse", default="cpu,model",
                    help="sparse devices, comma-separated: cpu, model (default cpu,model)")
    ap.add_argument("--dense", default="auto",
                    help="dense devices: auto (cuda,cpu with a GPU, else cpu), cpu, cuda")
    ap.add_argument("--threads", type=int, default=8,
                    help="torch intra-op threads of the CPU runs (default 8)")
    add_accelerator_flags(ap, devices=("model",), device="model",
                          why={"--device": "this bench runs cpu and model side by side, as "
                                           "--sparse names them; the accelerator's device is model"},
                          notes={"--device": "the device of the --sparse model runs, whose "
                                             "accelerator --design, --preset and --param choose"})
    ap.add_argument("--seed", type=int, default=0, help="graph and training seed (default 0)")
    ap.add_argument("--out", metavar="DIR", help="also write DIR/dense-device-bench.json")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    for name in ("width", "hidden", "epochs", "threads"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} {getattr(args, name)} must be at least 1")
    if not 4 <= args.scale <= 20:
        raise UserError(f"--rmat-scale {args.scale}: use 4..20 (2^K nodes)")
    sparse = [s.strip() for s in args.sparse.split(",") if s.strip()]
    if not sparse or any(s not in ("cpu", "model") for s in sparse) or \
            len(set(sparse)) != len(sparse):
        raise UserError(f"--sparse {args.sparse!r}: give cpu, model or cpu,model")
    dense = _dense_devices(args.dense)
    torch.set_num_threads(args.threads)
    out = run(args.scale, args.width, args.hidden, args.epochs, sparse, dense, args.seed,
              progress=lambda s: print(f"  done: {s}", file=sys.stderr, flush=True),
              accel=accelerator(args))
    print(f"GCN on {out['dataset']} ({out['nodes']} nodes, {out['entries']} entries, "
          f"F = {out['features']}, hidden {out['hidden']}), median epoch after the first of "
          f"{out['epochs']}:", file=sys.stderr)
    for key, r in out["runs"].items():
        phases = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["phase_time_s"].items())
        print(f"  sparse {r['sparse']:5s} dense {r['dense']:6s}: {r['epoch_s'] * 1e3:8.1f} ms "
              f"(first {r['first_epoch_s'] * 1e3:.0f} ms; phases ms: {phases}); final loss "
              f"{r['loss'][-1]:.6f}, test {r['test_acc']:.3f}", file=sys.stderr)
    for sp, c in out.get("compare", {}).items():
        print(f"  sparse {sp}: CPU-dense / CUDA-dense epoch = "
              f"{c['cpu_dense_over_cuda_dense']:.2f}x, largest loss difference "
              f"{c['max_abs_loss_diff']:.2e}", file=sys.stderr)
    print(json.dumps(out, indent=2))
    if args.out:
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "dense-device-bench.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
