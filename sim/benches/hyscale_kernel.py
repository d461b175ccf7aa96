"""HyScale-GNN kernel cycle model against the RTL on held-out shapes.

``moagcn bench hyscale-model-kernel [--device rtl|model] [--simulator verilator] [--design hyscale]
[--preset NAME] [--param KEY=VALUE] [--out DIR] [--only K,...]`` runs
the fused layer on shapes that were not used to derive the kernel cycle model
(:func:`moagcn.sim.hyscale.model.kernel_cycles`): n in {1, 2, 4, 8}, m in {4, 16, 64}, feature
widths that are not multiples of m or of the memory's words per cycle, mini-batches sampled
from power-law graphs with other sizes, seeds and fan-outs than ``moagcn bench hyscale``, and
synthetic layers with a hub source, duplicate edges, self loops, destinations without
in-edges and feature rows no edge reads. Per shape it prints the RTL's cycles (load,
aggregate, update and ``cycles_total``, their sum), the model's total, its error, the error of
the model with the closed-form aggregate bound instead of the replayed schedule, the paper's
Eq. 11 + 12 error (against the compute cycles) and whether ``Y`` equals the golden model bit
for bit; it writes
``hyscale_kernel_model.json`` to ``--out``. Exit status 1 if any output differs or any
|error| exceeds ``--tolerance``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.generators import power_law_graph
from moagcn.core.options import accelerator, add_accelerator_flags
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.hw.hyscale import preset
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale import golden
from moagcn.sim.hyscale.minibatch import layer_jobs
from moagcn.sim.hyscale.spec import SPEC


@dataclass(frozen=True)
class Shape:
    """One held-out job: a configuration (``preset`` with n and m) and how the layer is made.

    ``kind`` ``sampled``: layer ``layer`` of a mini-batch of ``targets`` nodes sampled with
    ``fanouts`` from a ``graph_nodes``-node power-law graph (``seed``); ``synthetic``:
    :func:`synthetic_layer` with ``n_dst`` destinations, ``n_src`` feature rows and a hub of
    ``hub`` out-edges.
    """

    name: str
    spes: int
    macs: int
    f_in: int
    f_out: int
    kind: str
    seed: int
    preset: str = "default"
    graph_nodes: int = 0
    targets: int = 0
    fanouts: tuple = ()
    layer: int = 0
    n_dst: int = 0
    n_src: int = 0
    hub: int = 0


#: the held-out shapes (fixed before the model was compared with any of them)
SHAPES = (
    Shape("s1", 1, 4, 13, 20, "sampled", 11, graph_nodes=3000, targets=8, fanouts=(10, 5)),
    Shape("h1", 1, 4, 45, 37, "synthetic", 21, n_dst=40, n_src=60, hub=50),
    Shape("s2", 2, 16, 20, 37, "sampled", 12, graph_nodes=5000, targets=16, fanouts=(15, 10),
          layer=1),
    Shape("s3", 2, 16, 37, 20, "sampled", 13, graph_nodes=5000, targets=16, fanouts=(15, 10)),
    Shape("s4", 4, 64, 45, 13, "sampled", 14, graph_nodes=8000, targets=24, fanouts=(20, 10)),
    Shape("h2", 4, 64, 13, 45, "synthetic", 22, n_dst=100, n_src=150, hub=120),
    Shape("s5", 8, 16, 37, 45, "sampled", 15, graph_nodes=8000, targets=24, fanouts=(20, 10)),
    Shape("h3", 8, 16, 20, 13, "synthetic", 23, n_dst=200, n_src=400, hub=30),
    Shape("s6", 8, 64, 20, 45, "sampled", 16, graph_nodes=10000, targets=32, fanouts=(25, 10),
          layer=1),
    Shape("s7", 8, 64, 45, 20, "sampled", 17, graph_nodes=10000, targets=32, fanouts=(25, 10)),
    Shape("h4", 2, 4, 13, 7, "synthetic", 24, preset="tiny", n_dst=30, n_src=40, hub=25),
)


def synthetic_layer(seed: int, n_dst: int, n_src: int, hub: int):
    """A layer (CSR ``indptr``, ``indices``) with the awkward cases: source 0 feeds ``hub``
    destinations (wrapping, so some get it twice: duplicate edges), destination ``v`` has a
    self loop (source ``v``) when ``v`` is even, every fifth destination has no in-edge, one
    destination takes a tenth of the sources, and the last quarter of the feature rows is
    never read."""
    rng = np.random.default_rng(seed)
    used = max(1, (3 * n_src) // 4)
    rows = [list(rng.integers(0, used, rng.integers(0, 6))) for _ in range(n_dst)]
    for v in range(0, n_dst, 2):
        rows[v].append(v % used)
    for k in range(hub):
        rows[(3 * k) % n_dst].append(0)
    rows[1].extend(rng.integers(0, used, max(1, used // 10)))
    for v in range(4, n_dst, 5):
        rows[v] = []
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.array([u for r in rows for u in r], dtype=np.int64)
    return indptr, indices


def make_job(shape: Shape, config):
    """``indptr, indices, X, W, b`` of a shape (float32, GCN weights later)."""
    rng = np.random.default_rng(shape.seed + 1000)
    if shape.kind == "sampled":
        indptr, indices = power_law_graph(shape.graph_nodes, shape.seed, avg=8.0)
        targets = rng.choice(shape.graph_nodes, shape.targets, replace=False)
        sampler = NeighborSampler(CSRGraph(indptr, indices), shape.fanouts, shape.seed)
        job = layer_jobs(sampler.sample(targets))[shape.layer]
        indptr, indices, n_rows = job.indptr, job.indices, job.sources.size
    else:
        indptr, indices = synthetic_layer(shape.seed, shape.n_dst, shape.n_src, shape.hub)
        n_rows = shape.n_src
    fits = (indptr.size - 1 <= config.max_destinations and n_rows <= config.max_sources
            and indices.size <= config.max_edges)
    if not fits:
        raise ValueError(f"held-out shape {shape.name} does not fit the buffers")
    X = rng.standard_normal((n_rows, shape.f_in)).astype(np.float32)
    W = (rng.standard_normal((shape.f_in, shape.f_out)) / np.sqrt(shape.f_in)).astype(np.float32)
    b = rng.standard_normal(shape.f_out).astype(np.float32)
    return indptr, indices, X, W, b


def run_shape(shape: Shape, device: str = "rtl", simulator: str = "verilator",
              params: dict | None = None, preset_name: str | None = None) -> dict:
    """Run one shape (its preset, or ``preset_name`` when given, with the shape's n and m, then
    ``params``: ``KEY=VALUE`` strings, as ``--param`` gives them); returns its row of the
    table."""
    cfg = apply_params(preset(preset_name or shape.preset, spes=shape.spes, macs=shape.macs),
                       params or {})
    indptr, indices, X, W, b = make_job(shape, cfg)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=True), cfg)
    res = Driver(SPEC, cfg, device, simulator).run(job, checked=True)
    r = SPEC.report(res, job, cfg)
    want = golden.layer(job.indptr, job.indices, job.data, job.X, job.W, job.b, relu=True)
    bound = SPEC.kernel_model(job, cfg, replay=False)["model_cycles"]
    return {
        "shape": shape.name, "kind": shape.kind, "preset": shape.preset,
        "spes": shape.spes, "macs": shape.macs, "f_in": shape.f_in, "f_out": shape.f_out,
        "destinations": r["destinations"], "edges": r["edges"],
        "distinct_sources": r["distinct_sources"], "feature_rows": int(job.X.shape[0]),
        "tiles": r["tiles"],
        **{k: r[k] for k in ("cycles_load", "cycles_aggregate", "cycles_update",
                             "cycles_compute", "cycles_total", "model_cycles_load",
                             "model_cycles_aggregate", "model_cycles_update",
                             "model_cycles_compute", "model_cycles", "model_error",
                             "paper_model_cycles", "paper_model_error")},
        "bound_model_cycles": bound,
        "bound_model_error": r["cycles_total"] / bound - 1,
        "bit_exact": bool(np.array_equal(as_bits(res.output), as_bits(want))),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moagcn bench hyscale-model-kernel",
                                     description=__doc__.splitlines()[0])
    add_accelerator_flags(parser, designs=("hyscale",), devices=("rtl", "model"), device="rtl",
                          notes={"--device": "model: the golden and cycle models only",
                                 "--preset": "every shape runs on this preset with its own n "
                                             "and m (default: each shape's own preset)",
                                 "--param": "set on every shape, e.g. pipelined=false"})
    parser.add_argument("--only", default="", help="comma-separated shape names (default all)")
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="largest |model error| accepted (total cycles)")
    parser.add_argument("--out", default="hyscale_kernel_model", metavar="DIR",
                        help="folder of the table and plot (default hyscale_kernel_model)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    params = accelerator(args).params
    names = [s for s in args.only.split(",") if s]
    shapes = [s for s in SHAPES if not names or s.name in names]
    if names and len(shapes) != len(names):
        parser.error(f"unknown shape in --only; shapes: {', '.join(s.name for s in SHAPES)}")
    t0 = time.perf_counter()
    rows = []
    print(f"{'shape':5} {'n':>2} {'m':>3} {'f_in':>4} {'f_out':>5} {'dst':>4} {'edges':>5} "
          f"{'srcs':>5} {'load':>6} {'aggr':>6} {'update':>6} {'RTL total':>9} {'model':>9} "
          f"{'error':>7} {'bound':>7} {'Eq.11+12':>8} bit-exact")
    for shape in shapes:
        row = run_shape(shape, args.device, args.simulator, params, args.preset)
        rows.append(row)
        print(f"{row['shape']:5} {row['spes']:>2} {row['macs']:>3} {row['f_in']:>4} "
              f"{row['f_out']:>5} {row['destinations']:>4} {row['edges']:>5} "
              f"{row['distinct_sources']:>5} {row['cycles_load']:>6} "
              f"{row['cycles_aggregate']:>6} {row['cycles_update']:>6} {row['cycles_total']:>9} "
              f"{row['model_cycles']:>9} {row['model_error']:>+7.3f} "
              f"{row['bound_model_error']:>+7.3f} {row['paper_model_error']:>+8.3f} "
              f"{row['bit_exact']}", flush=True)
    worst = max(abs(r["model_error"]) for r in rows)
    summary = {"device": args.device, "simulator": args.simulator, "params": params,
               "shapes": len(rows),
               "all_bit_exact": all(r["bit_exact"] for r in rows),
               "max_abs_model_error": worst,
               "max_abs_bound_model_error": max(abs(r["bound_model_error"]) for r in rows),
               "max_abs_paper_model_error": max(abs(r["paper_model_error"]) for r in rows),
               "within_tolerance": sum(abs(r["model_error"]) <= args.tolerance for r in rows),
               "tolerance": args.tolerance,
               "wall_s": round(time.perf_counter() - t0, 1)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hyscale_kernel_model.json").write_text(json.dumps({"summary": summary,
                                                               "runs": rows}, indent=2) + "\n")
    print(f"{summary['within_tolerance']}/{len(rows)} shapes within {args.tolerance:.0%}; "
          f"largest |error| {worst:.3f} (Eq. 11 + 12: "
          f"{summary['max_abs_paper_model_error']:.3f}, closed-form aggregate bound: "
          f"{summary['max_abs_bound_model_error']:.3f}); all bit-exact: "
          f"{summary['all_bit_exact']}; {summary['wall_s']} s")
    return 0 if summary["all_bit_exact"] and worst <= args.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
