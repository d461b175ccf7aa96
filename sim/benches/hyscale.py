"""HyScale-GNN benchmark: feature reads, performance-model error, S-PE and MAC utilisation.

``moagcn bench hyscale [--device rtl|model] [--simulator verilator] [--design hyscale]
[--preset default] [--jobs 3] [--param spes=2,4,8] [--param macs=16,64] [--out DIR]`` samples mini-batches with fan-outs (25, 10) from a
power-law graph, runs both layers of each on the fused layer of every configuration n in
{2, 4, 8} x m in {16, 64} (``--param``; the ``default`` preset otherwise:
4 memory words per cycle, 7-cycle adders and multipliers), checks every output against the golden
model, and writes ``hyscale_bench.json``, ``hyscale_bench.csv`` and ``hyscale_bench.png`` (RTL
cycles against the kernel cycle model and the paper's Eq. 11 + 12) to ``--out``; it prints one
line per run and a summary. ``model_*`` is the kernel cycle model
(:func:`moagcn.sim.hyscale.model.kernel_cycles`, against ``cycles_total`` = load + aggregate +
update), ``paper_model_*`` Eq. 11 + 12 (against ``cycles_compute`` = aggregate + update).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.generators import power_law_graph
from moagcn.core.options import accelerator, add_accelerator_flags, add_renamed
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.hw.hyscale import preset
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale import golden
from moagcn.sim.hyscale.minibatch import layer_jobs

SPEC = get_spec("hyscale")

FIELDS = ("spes", "macs", "job", "layer", "destinations", "edges", "distinct_sources",
          "feature_reads", "f_in", "f_out", "cycles_load", "cycles_aggregate", "cycles_update",
          "cycles_compute", "cycles_total", "model_cycles_load", "model_cycles_aggregate",
          "model_cycles_update", "model_cycles", "model_error", "aggregate_error", "update_error",
          "paper_model_cycles_aggregate", "paper_model_cycles_update", "paper_model_cycles",
          "paper_model_error", "paper_aggregate_error", "paper_update_error",
          "spe_utilization", "mac_utilization",
          "stall_gather", "stall_feature", "sim_cycles_per_s", "bit_exact")


#: mini-batches :func:`sample_jobs` draws before it gives up on finding enough that fit
_MAX_DRAWS = 200


def sample_jobs(n_jobs: int, seed: int, config, graph_nodes: int, targets: int,
                fanouts=(25, 10)):
    """Both layers of ``n_jobs`` sampled mini-batches that fit ``config``'s buffers."""
    indptr, indices = power_law_graph(graph_nodes, seed, avg=8.0)
    rng = np.random.default_rng(seed + 1)
    sampler = NeighborSampler(CSRGraph(indptr, indices), fanouts, seed + 1)
    jobs = []
    draw = 0
    while len(jobs) < 2 * n_jobs:
        if draw >= _MAX_DRAWS:
            raise UserError(
                f"--targets {targets}: {len(jobs) // 2} of {_MAX_DRAWS} sampled mini-batches "
                f"fit the buffers (max_destinations={config.max_destinations}, "
                f"max_sources={config.max_sources}, max_edges={config.max_edges}), "
                f"{n_jobs} needed; give fewer --targets or larger buffers (--param)")
        batch = sampler.sample(rng.choice(graph_nodes, targets, replace=False), salt=draw)
        draw += 1
        layers = layer_jobs(batch)
        fits = all(j.indptr.size - 1 <= config.max_destinations
                   and j.sources.size <= config.max_sources and j.edges <= config.max_edges
                   for j in layers)
        if fits:
            jobs.extend(layers)
    return jobs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moagcn bench hyscale",
                                     description=__doc__.splitlines()[0])
    add_accelerator_flags(parser, designs=("hyscale",), devices=("rtl", "model"), device="rtl",
                          preset="default", param_metavar="KEY=VALUE[,VALUE...]",
                          legacy={"--spes": "spes", "--macs": "macs"}, legacy_type=str,
                          notes={"--device": "model: the golden and cycle models only",
                                 "--preset": "the swept fields are set on it",
                                 "--param": "spes and macs take a comma list and every pair "
                                            "is run (default spes=2,4,8 and macs=16,64)"})
    parser.add_argument("--jobs", type=int, default=3, help="mini-batches per configuration")
    parser.add_argument("--width", type=int, default=64, metavar="F",
                        help="feature columns, f_in = f_out of each layer (default 64)")
    add_renamed(parser, "--features", "--width")
    parser.add_argument("--targets", type=int, default=32, help="output nodes per mini-batch")
    parser.add_argument("--graph-nodes", type=int, default=20000,
                        help="nodes of the power-law graph the mini-batches are sampled from "
                             "(default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="graph, sampling and feature seed")
    parser.add_argument("--out", default="hyscale_bench", metavar="DIR",
                        help="folder of hyscale_bench.json, .csv and .png (default "
                             "hyscale_bench)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    params = accelerator(args).params
    args.spes, args.macs = params.pop("spes", "2,4,8"), params.pop("macs", "16,64")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    base = apply_params(preset(args.preset), params)
    jobs = sample_jobs(args.jobs, args.seed, base, args.graph_nodes, args.targets)
    rng = np.random.default_rng(args.seed + 2)
    F = args.width
    data = []
    for job in jobs:
        X = rng.standard_normal((job.sources.size, F)).astype(np.float32)
        W = (rng.standard_normal((F, F)) / np.sqrt(F)).astype(np.float32)
        b = rng.standard_normal(F).astype(np.float32)
        weights = golden.gcn_weights(job.indptr, job.indices, X.shape[0])
        want = golden.layer(job.indptr, job.indices, weights, X, W, b, relu=True)
        data.append((job, X, W, b, want))
    rows = []
    t_start = time.perf_counter()
    for n in (int(x) for x in args.spes.split(",")):
        for m in (int(x) for x in args.macs.split(",")):
            cfg = apply_params(preset(args.preset, spes=n, macs=m), params)
            driver = Driver(SPEC, cfg, args.device, args.simulator)
            for k, (job, X, W, b, want) in enumerate(data):
                spec_job = SPEC.check(SPEC.job(job.indptr, job.indices, X, W, b, relu=True), cfg)
                res = driver.run(spec_job, checked=True)
                r = SPEC.report(res, spec_job, cfg)
                row = {key: r.get(key) for key in FIELDS}
                row.update(spes=n, macs=m, job=k // 2, layer=k % 2,
                           aggregate_error=r["cycles_aggregate"] / r["model_cycles_aggregate"] - 1,
                           update_error=r["cycles_update"] / r["model_cycles_update"] - 1,
                           paper_aggregate_error=(r["cycles_aggregate"]
                                                  / r["paper_model_cycles_aggregate"] - 1),
                           paper_update_error=(r["cycles_update"]
                                               / r["paper_model_cycles_update"] - 1),
                           bit_exact=bool(np.array_equal(as_bits(res.output), as_bits(want))))
                rows.append(row)
                print(f"n={n} m={m} job {k // 2} layer {k % 2}: {row['destinations']} dst, "
                      f"{row['edges']} edges, {row['distinct_sources']} sources "
                      f"(reads {row['feature_reads']}); cycles agg {row['cycles_aggregate']} "
                      f"upd {row['cycles_update']} load {row['cycles_load']} total "
                      f"{row['cycles_total']} vs model {row['model_cycles']:.0f} "
                      f"({row['model_error']:+.3f}; Eq. 11 + 12 on compute "
                      f"{row['paper_model_error']:+.3f}); util S-PE "
                      f"{row['spe_utilization']:.3f} MAC {row['mac_utilization']:.3f}; "
                      f"{(row['sim_cycles_per_s'] or 0):,.0f} cycles/s; "
                      f"bit-exact {row['bit_exact']}", flush=True)
    summary = {
        "device": args.device,
        "simulator": args.simulator,
        "runs": len(rows),
        "all_bit_exact": all(r["bit_exact"] for r in rows),
        "feature_reads_equal_distinct_sources": all(
            r["feature_reads"] == r["distinct_sources"] for r in rows),
        "max_abs_model_error": max(abs(r["model_error"]) for r in rows),
        "mean_model_error": float(np.mean([r["model_error"] for r in rows])),
        "max_abs_paper_model_error": max(abs(r["paper_model_error"]) for r in rows),
        "by_config": {
            f"n={n},m={m}": {
                "spe_utilization": float(np.mean([r["spe_utilization"] for r in sel])),
                "mac_utilization": float(np.mean([r["mac_utilization"] for r in sel])),
                "model_error": float(np.mean([r["model_error"] for r in sel])),
                "aggregate_error": float(np.mean([r["aggregate_error"] for r in sel])),
                "update_error": float(np.mean([r["update_error"] for r in sel])),
                "paper_model_error": float(np.mean([r["paper_model_error"] for r in sel])),
                "paper_aggregate_error": float(np.mean([r["paper_aggregate_error"]
                                                        for r in sel])),
                "paper_update_error": float(np.mean([r["paper_update_error"] for r in sel])),
            }
            for n, m in sorted({(r["spes"], r["macs"]) for r in rows})
            for sel in [[r for r in rows if (r["spes"], r["macs"]) == (n, m)]]},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    (out_dir / "hyscale_bench.json").write_text(json.dumps({"summary": summary, "runs": rows},
                                                           indent=2) + "\n")
    with open(out_dir / "hyscale_bench.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    _plot(rows, out_dir / "hyscale_bench.png")
    print(json.dumps(summary, indent=2))
    return 0 if summary["all_bit_exact"] else 1


def _plot(rows, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for n, m in sorted({(r["spes"], r["macs"]) for r in rows}):
        sel = [r for r in rows if (r["spes"], r["macs"]) == (n, m)]
        dots = ax1.scatter([r["model_cycles"] for r in sel], [r["cycles_total"] for r in sel],
                           label=f"n={n}, m={m}", s=18)
        ax1.scatter([r["paper_model_cycles"] for r in sel], [r["cycles_compute"] for r in sel],
                    s=18, marker="x", color=dots.get_facecolor()[0])
    lim = max(max(r["model_cycles"], r["cycles_total"], r["paper_model_cycles"])
              for r in rows) * 1.05
    ax1.plot([0, lim], [0, lim], "k--", lw=0.8)
    ax1.plot([0, lim], [0, 1.25 * lim], "k:", lw=0.6)
    ax1.set_xlabel("model cycles (dots: kernel model; x: Eq. 11 + 12)")
    ax1.set_ylabel("RTL cycles (dots: total; x: aggregate + update)")
    ax1.legend(fontsize=7)
    configs = sorted({(r["spes"], r["macs"]) for r in rows})
    x = np.arange(len(configs))
    spe = [np.mean([r["spe_utilization"] for r in rows if (r["spes"], r["macs"]) == c])
           for c in configs]
    mac = [np.mean([r["mac_utilization"] for r in rows if (r["spes"], r["macs"]) == c])
           for c in configs]
    ax2.bar(x - 0.2, spe, 0.4, label="S-PE")
    ax2.bar(x + 0.2, mac, 0.4, label="MAC")
    ax2.set_xticks(x, [f"n={n}\nm={m}" for n, m in configs], fontsize=7)
    ax2.set_ylabel("utilisation")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
