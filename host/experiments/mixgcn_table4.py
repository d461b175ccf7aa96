"""MixGCN Table 4: the speed-up of node reordering in the fine-grain pipeline, four workers.

``moagcn experiment table4 [--datasets reddit,orkut,...] [--scale 1] [--workers 4]
[--stages 8] [--epochs 2] [--device model] [--design sspmm] [--preset NAME]
[--param clock_mhz=20] [--out DIR]``

Each synthetic stand-in (:mod:`moagcn.host.experiments.mixgcn_fig10`'s, random features of the real width and
random labels: only the schedule matters here) is trained with ``moagcn train --parallelism mop
--pipeline natural`` and ``--pipeline rcm`` (GCN, 2 layers, S-SpMM cycle model at 20 MHz, so
that the sparse and dense units' batch times are comparable; ``--param clock_mhz=...`` sets
another clock, ``--param KEY=VALUE`` any field of the S-SpMM configuration), and the last
training step's forward timelines give the pipeline throughput (batches per second of the
makespan) of each order; the speed-up of RCM is their ratio. Also printed: the bandwidth of
each order, Prop. 3.5's condition at ``s``, the idle fractions, and the pipeline's speed-up
over ``off`` (no overlap) on the same costs. Writes ``table4.csv`` and ``table4.json``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from moagcn.core.options import accelerator, add_accelerator_flags
from moagcn.core.reports import output_dir, write_csv
from moagcn.errors import UserError
from moagcn.host.experiments.mixgcn_fig10 import SCALES, stand_in
from moagcn.host.graphs.data import Dataset
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train

#: the S-SpMM cycle model's clock (MHz) unless --param clock_mhz= sets another
DEFAULT_CLOCK_MHZ = 20


def _dataset(name: str, scale: float, seed: int) -> Dataset:
    g, feats, classes = stand_in(name, scale, seed)
    rng = np.random.default_rng(seed)
    n = g.n_rows
    labels = rng.integers(0, classes, n).astype(np.int64)
    split = rng.permutation(n)
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    for mask, part in zip(masks, np.array_split(split, [n // 10, n // 5])):
        mask[part] = True
    X = rng.random((n, feats), dtype=np.float32)
    return Dataset(name, g, X, labels, *masks)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn experiment table4",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(SCALES),
                    help=f"stand-ins of the paper's graphs, any of {', '.join(SCALES)} "
                         "(default all)")
    ap.add_argument("--scale", type=float, default=0.5,
                    help="multiplies every stand-in's size (default 0.5)")
    ap.add_argument("--workers", type=int, default=4, help="MoP workers (default 4)")
    ap.add_argument("--stages", type=int, default=8,
                    help="pipeline batches s, a multiple of --workers (default 8)")
    ap.add_argument("--epochs", type=int, default=2, help="training epochs (default 2)")
    ap.add_argument("--hidden", type=int, default=16, help="hidden units (default 16)")
    add_accelerator_flags(ap, designs=("sspmm",), devices=("model", "rtl"), device="model",
                          legacy={"--clock-mhz": "clock_mhz"}, legacy_type=float,
                          notes={"--device": "the S-SpMM of the pipeline's aggregations (rtl: "
                                             "the same schedule, simulated; slow)",
                                 "--param": "default clock_mhz=20, a clock at which the "
                                            "sparse and dense units' batch times are "
                                            "comparable"})
    ap.add_argument("--seed", type=int, default=0, help="graph, feature and training seed")
    ap.add_argument("--out", default="reports/table4", metavar="DIR",
                    help="folder of table4.csv and table4.json (default reports/table4)")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    acc = accelerator(args)
    params = acc.params
    params.setdefault("clock_mhz", str(DEFAULT_CLOCK_MHZ))
    names = [x.strip() for x in args.datasets.split(",") if x.strip()]
    bad = [x for x in names if x not in SCALES]
    if bad:
        raise UserError(f"--datasets: unknown stand-in {bad[0]!r}; choose from "
                        f"{', '.join(SCALES)}")
    if args.workers < 1 or args.stages % args.workers:
        raise UserError(f"--stages {args.stages} must be a multiple of --workers "
                        f"{args.workers}")
    from tqdm import tqdm
    rows = []
    for name in tqdm(names, desc="table4", unit="graph"):
        d = _dataset(name, args.scale, args.seed)
        r = {"dataset": name, "nodes": d.n_nodes, "entries": d.graph.nnz}
        for order in ("natural", "rcm"):
            cfg = TrainConfig(device=acc.device, design=acc.design, preset=acc.preset,
                              simulator=acc.simulator, workers=args.workers, parallelism="mop",
                              pipeline=order, stages=args.stages, epochs=args.epochs,
                              hidden=args.hidden, seed=args.seed,
                              params=dict(params))
            p = train(d, cfg).report()["pipeline"]
            r[f"{order}_bandwidth"] = p["bandwidth"]
            r[f"{order}_prop35_holds"] = p["prop35_holds"]
            r[f"{order}_makespan_s"] = p["pipelined_makespan_s"]
            r[f"{order}_idle_fraction"] = p["idle_fraction"]
            r[f"{order}_speedup_over_off"] = p["pipeline_speedup"]
            r[f"{order}_backward_makespan_s"] = p["backward_pipelined_makespan_s"]
            r[f"{order}_backward_idle_fraction"] = p["backward_idle_fraction"]
            r[f"{order}_step_makespan_s"] = (p["pipelined_makespan_s"]
                                             + p["backward_pipelined_makespan_s"])
        r["rcm_speedup"] = r["natural_makespan_s"] / r["rcm_makespan_s"]
        r["rcm_step_speedup"] = r["natural_step_makespan_s"] / r["rcm_step_makespan_s"]
        rows.append(r)
    out = output_dir(args.out)
    write_csv(out / "table4.csv", rows)
    (out / "table4.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"GCN 2 x {args.hidden}, MoP x {args.workers}, s = {args.stages} batches, S-SpMM at "
          f"{params['clock_mhz']} MHz (cycle model), dense updates measured; the last step's "
          "forward and backward:")
    print("| dataset | nodes | bandwidth natural / RCM | Prop. 3.5 natural / RCM | idle natural "
          "/ RCM (fwd; bwd) | RCM speed-up (fwd; step) | paper (Table 4) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['nodes']} | {r['natural_bandwidth']} / "
              f"{r['rcm_bandwidth']} | {r['natural_prop35_holds']} / {r['rcm_prop35_holds']} | "
              f"{r['natural_idle_fraction']:.3f} / {r['rcm_idle_fraction']:.3f}; "
              f"{r['natural_backward_idle_fraction']:.3f} / "
              f"{r['rcm_backward_idle_fraction']:.3f} | "
              f"{r['rcm_speedup']:.2f}x; {r['rcm_step_speedup']:.2f}x | 1.01-1.18x |")
    print(f"wrote {out / 'table4.csv'}, table4.json")
    return 0
