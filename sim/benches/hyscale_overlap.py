"""HyScale-GNN fused layer: a mini-batch that needs several jobs, with and without ping-pong
load buffers, on the RTL and in the cycle model.

``moagcn bench hyscale-overlap [--device rtl|model] [--simulator verilator] [--design hyscale]
[--preset default] [--param KEY=VALUE]
[--graph-nodes 20000] [--targets 256] [--fanout 10,25] [--layer 0] [--f-in 64] [--f-out 20]
[--seed 7] [--out DIR]`` samples one
layer of a GraphSAGE mini-batch from a power-law graph (the input layer by default: more
destinations and sources than one job of the preset holds, so the driver tiles it), and runs
it on the RTL (the lean Verilator harness by default) with ``load_banks`` 1 (the next tile loads after the running
one is done) and 2 (it loads into the other half while the running one computes), the tiles
back to back. Per case it prints the tiles, the exposed and hidden load cycles, the compute
cycles, ``cycles_total`` (exposed loads + compute), the simulator's cycles, the model's total
and its error, and whether ``Y`` equals the golden model bit for bit; then the speed-up of the
two banks. Writes ``hyscale_overlap.json`` and ``hyscale_overlap.png`` (the cycles of each
case as stacked bars: exposed loads, compute, hidden loads beside them). Exit status 1 if an
output differs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.generators import power_law_graph
from moagcn.core.options import accelerator, add_accelerator_flags, add_renamed
from moagcn.core.reports import output_dir, pyplot
from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.hw.hyscale import preset
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale.minibatch import layer_jobs
from moagcn.sim.hyscale.spec import SPEC


def sampled_job(graph_nodes: int, targets: int, fanouts: tuple, layer: int, f_in: int,
                f_out: int, seed: int):
    """The checked HyScale job of one sampled layer, with random X, W, b (float32)."""
    rng = np.random.default_rng(seed)
    indptr, indices = power_law_graph(graph_nodes, seed)
    chosen = rng.choice(graph_nodes, targets, replace=False)
    lj = layer_jobs(NeighborSampler(CSRGraph(indptr, indices), fanouts, seed).sample(chosen))[layer]
    X = rng.standard_normal((lj.sources.size, f_in)).astype(np.float32)
    W = (rng.standard_normal((f_in, f_out)) / np.sqrt(f_in)).astype(np.float32)
    b = rng.standard_normal(f_out).astype(np.float32)
    return SPEC.job(lj.indptr, lj.indices, X, W, b, relu=True)


def run(preset_name: str, job, banks=(1, 2), progress=None, params=None,
        simulator: str = "verilator", device: str = "rtl") -> dict:
    rows = []
    for k in banks:
        cfg = apply_params(preset(preset_name, load_banks=k), params or {})
        checked = SPEC.check(job, cfg)
        res = Driver(SPEC, cfg, device, simulator).run(checked, checked=True)
        model = Driver(SPEC, cfg, "model").estimate(checked, checked=True)
        expect = SPEC.golden(checked, cfg)
        c = res.counters
        rows.append({
            "load_banks": k, "tiles": res.tiles,
            "bit_exact": bool(np.array_equal(as_bits(res.output), as_bits(expect))),
            "cycles_load": c.cycles_load,
            "cycles_load_hidden": int(c.extra.get("cycles_load_hidden", 0)),
            "cycles_compute": c.cycles_compute, "cycles_total": c.cycles_total,
            "sim_cycles": c.sim_cycles, "sim_cycles_per_s": c.sim_cycles_per_s,
            "model_cycles_load": model.cycles_load,
            "model_cycles_load_hidden": int(model.extra.get("cycles_load_hidden", 0)),
            "model_cycles_total": model.cycles_total,
            "model_error": model.cycles_total / c.cycles_total - 1 if c.cycles_total else 0.0,
        })
        if progress:
            progress(f"load_banks={k}")
    by = {r["load_banks"]: r for r in rows}
    speedup = (by[1]["cycles_total"] / by[2]["cycles_total"]
               if 1 in by and 2 in by and by[2]["cycles_total"] else None)
    return {"preset": preset_name, "params": dict(params or {}), "device": device,
            "simulator": simulator,
            "edges": job.edges, "destinations": job.n_dst,
            "sources": int(job.X.shape[0]), "f_in": job.f_in, "f_out": job.f_out,
            "rows": rows, "speedup": speedup}


def plot(res: dict, path: Path) -> None:
    """Stacked bars per load-bank count: exposed loads, then compute (the time); the hidden
    loads as a hatched bar beside them."""
    plt = pyplot()
    rows = res["rows"]
    x = np.arange(len(rows))
    exposed = np.array([r["cycles_load"] for r in rows])
    compute = np.array([r["cycles_compute"] for r in rows])
    hidden = np.array([r["cycles_load_hidden"] for r in rows])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(x - 0.2, exposed, 0.4, label="loads (exposed)")
    ax.bar(x - 0.2, compute, 0.4, bottom=exposed, label="compute")
    ax.bar(x + 0.2, hidden, 0.4, hatch="//", fill=False, label="loads hidden behind compute")
    ax.scatter(x - 0.2, [r["model_cycles_total"] for r in rows], marker="_", s=600,
               color="black", label="model total", zorder=3)
    ax.set_xticks(x, [f"{r['load_banks']} load bank(s)\n{r['tiles']} tiles" for r in rows])
    ax.set_ylabel("cycles")
    ax.set_title(f"HyScale {res['preset']} preset: a tiled mini-batch layer")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn bench hyscale-overlap",
                                 description=__doc__.split("\n\n")[0])
    add_accelerator_flags(ap, designs=("hyscale",), devices=("rtl", "model"), device="rtl",
                          preset="default",
                          notes={"--device": "model: the cycle and golden models alone (the RTL "
                                             "columns are then the model's)",
                                 "--param": "load_banks is what the bench varies"})
    ap.add_argument("--graph-nodes", type=int, default=20_000,
                    help="nodes of the power-law graph the mini-batch is sampled from "
                         "(default 20000)")
    ap.add_argument("--targets", type=int, default=256,
                    help="targets of the mini-batch (default 256)")
    ap.add_argument("--fanout", default="10,25", dest="fanouts", metavar="K1,K2",
                    help="neighbours per node and layer, input layer first (default 10,25)")
    add_renamed(ap, "--fanouts", "--fanout")
    ap.add_argument("--layer", type=int, default=0, help="which layer (0: the input layer)")
    ap.add_argument("--f-in", type=int, default=64, help="input features of the layer "
                                                          "(default 64)")
    ap.add_argument("--f-out", type=int, default=20, help="output features of the layer "
                                                           "(default 20)")
    ap.add_argument("--seed", type=int, default=7, help="graph, sampling and feature seed")
    ap.add_argument("--out", default="reports/bench-hyscale-overlap", metavar="DIR",
                    help="folder of the report and plot (default reports/bench-hyscale-overlap)")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        fanouts = tuple(int(x) for x in args.fanouts.split(","))
    except ValueError:
        raise UserError(f"--fanout {args.fanouts!r}: give integers, e.g. 10,25") from None
    if not fanouts or min(fanouts) < 1:
        raise UserError(f"--fanout {args.fanouts!r}: every fan-out must be >= 1")
    if not 0 <= args.layer < len(fanouts):
        raise UserError(f"--layer {args.layer}: choose 0..{len(fanouts) - 1}")
    if not 1 <= args.targets <= args.graph_nodes:
        raise UserError(f"--targets {args.targets}: choose 1..--graph-nodes ({args.graph_nodes})")
    if min(args.f_in, args.f_out) < 1:
        raise UserError("--f-in and --f-out must be >= 1")
    params = accelerator(args).params
    if "load_banks" in params:
        raise UserError("--param load_banks: the bench runs load_banks 1 and 2 itself; leave "
                        "it out")
    apply_params(preset(args.preset), params)            # a bad key or value: one line now
    job = sampled_job(args.graph_nodes, args.targets, fanouts, args.layer, args.f_in,
                      args.f_out, args.seed)
    res = run(args.preset, job, progress=lambda s: print(f"  done: {s}", flush=True),
              params=params, simulator=args.simulator, device=args.device)
    out = output_dir(args.out)
    (out / "hyscale_overlap.json").write_text(json.dumps(res, indent=2) + "\n")
    plot(res, out / "hyscale_overlap.png")
    print(f"{args.preset} preset; layer {args.layer} of a mini-batch of {args.targets} targets "
          f"(fan-outs {args.fanouts}): {res['destinations']:,} destinations, {res['sources']:,} "
          f"sources, {res['edges']:,} edges, f_in {res['f_in']}, f_out {res['f_out']}")
    print("| load banks | tiles | bit-exact | loads exposed | loads hidden | compute | "
          "cycles_total | simulator cycles | model total | model error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        print(f"| {r['load_banks']} | {r['tiles']} | {'yes' if r['bit_exact'] else 'NO'} | "
              f"{r['cycles_load']:,} | {r['cycles_load_hidden']:,} | {r['cycles_compute']:,} | "
              f"{r['cycles_total']:,} | {r['sim_cycles']:,} | {r['model_cycles_total']:,} | "
              f"{r['model_error']:+.1%} |")
    if res["speedup"]:
        print(f"ping-pong load buffers: {res['speedup']:.2f}x fewer cycles for the mini-batch")
    print(f"written: {out / 'hyscale_overlap.json'}, {out / 'hyscale_overlap.png'}")
    return 0 if all(r["bit_exact"] for r in res["rows"]) else 1
