"""S-SpMM benchmark: utilisation, output-mask skipping, cycle-model error, co-simulation speed.

``moagcn bench sspmm [--device rtl|model] [--simulator verilator] [--design sspmm]
[--preset default] [--param KEY=VALUE] [--nodes 2000] [--repeats 5] [--out DIR]`` runs a power-law graph (average degree >= 8)
with F = 64 features under a random 50 % mask and under an all-ones mask, on the RTL and on the
cycle model, and prints one JSON object:

- per mask: bit-exactness against the golden model, compute / load / output cycles, work,
  utilisation, stalls, rows fetched, and the cycle model's figures and error;
- ``mask_speedup``: all-ones compute cycles over 50 %-mask compute cycles; beside it
  ``mask_speedup_turn_bound``, the same ratio of the jobs' turns (per mask ``turns``: each
  row's neighbours times its ``ceil(k / W)`` jobs of W = ``group_lanes`` lanes), what the
  speed-up would be if nothing but the turns took time: the lanes a row's last job leaves
  idle bound the speed-up below 2 (see docs/sspmm.md);
- ``speed`` (``verilator``): the 50 % job re-run ``--repeats`` times on the host-driven lean
  harness, simulated cycles per second (loads, compute and output) as min / median / max; the
  speed of a shared machine varies from minute to minute, so one run is not a figure; beside
  each run, the design's S x P lane adders alone (``moagcn.sim.rtl.lean.adder_loop_speed``: the
  same ``LaneAdders`` and build options, an operand in every lane every cycle), an upper bound
  on the whole accelerator's speed on this machine (``speed.adders_alone``);
- ``cocotb`` (``verilator``): the same 50 % job through the per-cycle cocotb testbench (Python
  drives every cycle over VPI), its speed beside the lean harness's, and its bit-exactness;
- ``tiny_job`` (``verilator``): a small job on the ``tiny`` preset through the per-cycle cocotb
  testbench and through the lean harness, their speeds side by side;
- ``sweep``: the cycle model against the RTL on several more jobs (average degrees 4 and 16,
  mask densities 0.25 and 0.9, a feature width that is not a multiple of the lanes, the tiny
  preset), each with its error.

``--out DIR`` also writes ``sspmm-bench.json``, ``sspmm-sweep.csv`` and ``sspmm-sweep.png``
(RTL against model compute cycles).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.generators import pareto_graph
from moagcn.core.options import accelerator, add_accelerator_flags, add_renamed
from moagcn.core.spec import get_spec
from moagcn.hw.sspmm import preset
from moagcn.sim.driver import Driver
from moagcn.sim.rtl.lean import adder_loop_speed

SWEEP_FIELDS = ("job", "preset", "nodes", "edges", "features", "density", "bit_exact",
                "cycles_compute", "model_cycles_compute", "model_error", "utilization",
                "model_utilization", "rows_fetched", "model_rows_fetched", "cycles_output",
                "model_cycles_output")


SPEC = get_spec("sspmm")


def make_driver(cfg, device: str, simulator: str) -> Driver:
    return Driver(SPEC, cfg, device, simulator)


def run_mask(driver: Driver, cfg, indptr, indices, H, M) -> dict:
    """One job on the driver's device and on the cycle model: the figures of the report."""
    t0 = time.perf_counter()
    res = driver.run(SPEC.job(indptr, indices, H, M))
    wall = time.perf_counter() - t0
    job = SPEC.check(SPEC.job(indptr, indices, H, M), cfg)
    exact = np.array_equal(res.output.view(np.uint32), SPEC.golden(job, cfg).view(np.uint32))
    model = SPEC.replayed_cycles(job, cfg)   # per tile, as run
    c = res.counters
    return {
        "bit_exact": bool(exact),
        "cycles_compute": c.cycles_compute,
        "cycles_load": c.cycles_load,
        "cycles_output": c.cycles_output,
        "work_adds": c.work_adds,
        "utilization": c.utilization,
        "stall_no_job": c.extra.get("stall_no_job"),
        "stall_no_context": c.extra.get("stall_no_context"),
        "bubbles": c.extra.get("bubbles"),
        "turns": model.extra["turns"],
        "rows_fetched": c.extra.get("rows_fetched"),
        "model_rows_fetched": model.extra["rows_fetched"],
        "model_cycles_compute": model.cycles_compute,
        "model_utilization": model.utilization,
        "model_error": c.cycles_compute / model.cycles_compute - 1,
        "model_cycles_output": model.cycles_output,
        "wall_s": round(wall, 2),
        "sim_cycles_per_s": c.sim_cycles_per_s or None,
    }


def sweep_jobs(nodes: int, features: int):
    """(name, preset, n, avg degree, F, mask density) of the model-vs-RTL sweep."""
    return [
        ("degree 4", None, nodes, 4.0, features, 0.5),
        ("degree 16", None, nodes, 16.0, features, 0.5),
        ("mask 0.25", None, nodes, 8.5, features, 0.25),
        ("mask 0.9", None, nodes, 8.5, features, 0.9),
        ("F = 40", None, nodes, 8.5, 40, 0.5),
        ("tiny, 250 nodes", "tiny", 250, 8.5, 16, 0.5),
        ("tiny, F = 13", "tiny", 250, 6.0, 13, 1.0),
    ]


def run_sweep(device: str, simulator: str, preset_name: str, nodes: int, features: int, seed: int,
              overrides: dict) -> list[dict]:
    rows = []
    jobs = sweep_jobs(nodes, features)
    for k, (name, pname, n, degree, F, density) in enumerate(jobs):
        print(f"sweep {k + 1}/{len(jobs)}: {name}", file=sys.stderr, flush=True)
        cfg = preset(pname or preset_name, **({} if pname else overrides))
        # one accelerator job each: the cycle model describes one job, not a tiled one
        n, F = min(n, cfg.max_nodes), min(F, cfg.max_feature_width)
        indptr, indices = pareto_graph(n, degree, seed + 10 + k)
        rng = np.random.default_rng(seed + 20 + k)
        H = rng.standard_normal((n, F)).astype(np.float32)
        M = rng.random(H.shape) < density
        r = run_mask(make_driver(cfg, device, simulator), cfg, indptr, indices, H, M)
        job = {"job": name, "preset": pname or preset_name, "nodes": n,
               "edges": int(indices.size), "features": F, "density": density}
        rows.append({key: job[key] if key in job else r[key] for key in SWEEP_FIELDS})
    return rows


def write_outputs(out_dir: Path, result: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sspmm-bench.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = result.get("sweep", [])
    with open(out_dir / "sspmm-sweep.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=SWEEP_FIELDS)
        w.writeheader()
        w.writerows(rows)
    if not rows:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 5))
    model = [r["model_cycles_compute"] for r in rows]
    rtl = [r["cycles_compute"] for r in rows]
    ax.loglog(model, rtl, "o")
    for r in rows:
        ax.annotate(f"{r['job']} ({r['model_error']:+.1%})",
                    (r["model_cycles_compute"], r["cycles_compute"]), fontsize=7,
                    xytext=(4, -10), textcoords="offset points")
    lo, hi = min(model + rtl) * 0.8, max(model + rtl) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="RTL = model")
    ax.set_xlabel("cycle model: compute cycles")
    ax.set_ylabel(f"{result['device']} ({result['simulator']}): compute cycles")
    ax.set_title("S-SpMM cycle model against the RTL")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(out_dir / "sspmm-sweep.png", dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moagcn bench sspmm",
                                     description=__doc__.splitlines()[0])
    add_accelerator_flags(parser, designs=("sspmm",), devices=("rtl", "model"), device="rtl",
                          preset="default", legacy={"--fetch-rows": "fetch_rows"},
                          notes={"--device": "model: the golden and cycle models only (no "
                                             "co-simulation speed, cocotb or tiny jobs)",
                                 "--param": "e.g. --param node_banks=8 or --param fetch_rows=2"})
    parser.add_argument("--nodes", type=int, default=2000,
                        help="nodes of the power-law job, at most the preset's (default 2000)")
    parser.add_argument("--degree", type=float, default=8.5,
                        help="average degree of the job's graph (default 8.5)")
    parser.add_argument("--width", type=int, default=64, metavar="F",
                        help="feature columns F of the job (default 64)")
    add_renamed(parser, "--features", "--width")
    parser.add_argument("--seed", type=int, default=0, help="graph, feature and mask seed")
    parser.add_argument("--repeats", type=int, default=5, dest="repeat",
                        help="runs of the 50 %% job for the co-simulation speed (verilator)")
    add_renamed(parser, "--repeat", "--repeats")
    parser.add_argument("--no-cocotb-job", action="store_true",
                        help="skip the 50 %% job through the per-cycle cocotb testbench (its "
                             "first run builds the VPI model: about a minute for the default "
                             "preset)")
    parser.add_argument("--cocotb-nodes", type=int, default=250,
                        help="size of the job (tiny preset, F = 16, 50 %% mask) run through the "
                             "per-cycle cocotb testbench and the lean harness for comparison "
                             "(0: skip)")
    parser.add_argument("--no-sweep", action="store_true",
                        help="skip the cycle-model sweep over further jobs")
    parser.add_argument("--out", metavar="DIR",
                        help="also write sspmm-bench.json, sspmm-sweep.csv, sspmm-sweep.png")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    params = accelerator(args).params
    cfg = apply_params(preset(args.preset), params)
    # the sweep's jobs on --preset take fetch_rows too (the old --fetch-rows set it for both)
    overrides = {"fetch_rows": cfg.fetch_rows} if "fetch_rows" in params else {}
    n = min(args.nodes, cfg.max_nodes)
    indptr, indices = pareto_graph(n, args.degree, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    H = rng.standard_normal((n, args.width)).astype(np.float32)
    masks = {"half": rng.random(H.shape) < 0.5, "ones": np.ones(H.shape, bool)}
    lean = args.device == "rtl" and args.simulator == "verilator"
    out = {"device": args.device, "simulator": args.simulator, "preset": args.preset, "lanes": cfg.lanes,
           "groups": cfg.groups, "fetch_rows": cfg.fetch_rows, "nodes": n,
           "edges": int(indices.size),
           "avg_degree": indices.size / n, "features": args.width}
    driver = make_driver(cfg, args.device, args.simulator)
    for name, M in masks.items():
        print(f"{name} mask", file=sys.stderr, flush=True)
        out[name] = run_mask(driver, cfg, indptr, indices, H, M)
    out["mask_speedup"] = out["ones"]["cycles_compute"] / out["half"]["cycles_compute"]
    # the speed-up if both jobs took exactly their turns (the model's count: a row's k unmasked
    # features go out in jobs of W = group_lanes lanes, each taking one turn per neighbour, so
    # the last job of a row leaves ceil(k / W) * W - k lanes idle; all ones at F a multiple of
    # W: none)
    out["mask_speedup_turn_bound"] = out["ones"]["turns"] / out["half"]["turns"]
    if lean and args.repeat > 0:
        print(f"co-simulation speed: {args.repeat} runs", file=sys.stderr, flush=True)
        # each run beside one of the design's adders alone (the same lean build options):
        # the whole accelerator cannot simulate faster than its own adders
        runs, alone = [], []
        for _ in range(args.repeat):
            runs.append(driver.run(SPEC.job(indptr, indices, H, masks["half"])).counters)
            alone.append(adder_loop_speed(cfg.adders, cfg.adder_latency,
                                          1_000_000)["cycles_per_s"])
        speeds, alone = sorted(c.sim_cycles_per_s for c in runs), sorted(alone)
        out["speed"] = {"job": "half", "runs": len(speeds),
                        "sim_cycles": runs[-1].sim_cycles,
                        "sim_cycles_per_s_min": speeds[0],
                        "sim_cycles_per_s_median": statistics.median(speeds),
                        "sim_cycles_per_s_max": speeds[-1],
                        "adders_alone": {"adders": cfg.adders, "latency": cfg.adder_latency,
                                         "sim_cycles_per_s_min": alone[0],
                                         "sim_cycles_per_s_median": statistics.median(alone),
                                         "sim_cycles_per_s_max": alone[-1]}}
    if lean and not args.no_cocotb_job:
        print("50 % job through the per-cycle cocotb testbench", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        res = driver.run(SPEC.job(indptr, indices, H, masks["half"]), per_cycle=True)
        wall = time.perf_counter() - t0
        golden = SPEC.golden(SPEC.check(SPEC.job(indptr, indices, H, masks["half"]), cfg),
                             cfg).view(np.uint32)
        out["cocotb"] = {"job": "half",
                         "bit_exact": bool(np.array_equal(res.output.view(np.uint32), golden)),
                         "cycles_compute": res.counters.cycles_compute,
                         "sim_cycles_per_s": res.counters.sim_cycles_per_s,
                         "wall_s": round(wall, 2)}
    if lean and args.cocotb_nodes:
        # the same RTL driven cycle by cycle from Python (cocotb) against the lean harness
        print("tiny job: cocotb and lean", file=sys.stderr, flush=True)
        tiny = preset("tiny")
        nt = min(args.cocotb_nodes, tiny.max_nodes)
        ip, ix = pareto_graph(nt, args.degree, args.seed)
        Ht = rng.standard_normal((nt, 16)).astype(np.float32)
        Mt = rng.random(Ht.shape) < 0.5
        tiny_driver = make_driver(tiny, "rtl", "verilator")
        speeds = {}
        for name, per_cycle in (("cocotb", True), ("lean", False)):
            res = tiny_driver.run(SPEC.job(ip, ix, Ht, Mt), per_cycle=per_cycle)
            speeds[name] = res.counters.sim_cycles_per_s
        out["tiny_job"] = {"nodes": nt, "edges": int(ix.size), "features": 16,
                           "cocotb_sim_cycles_per_s": speeds["cocotb"],
                           "lean_sim_cycles_per_s": speeds["lean"]}
    if not args.no_sweep:
        out["sweep"] = run_sweep(args.device, args.simulator, args.preset, n, args.width, args.seed,
                                 overrides)
        errors = [abs(r["model_error"]) for r in out["sweep"]]
        out["sweep_max_abs_model_error"] = max(errors)
    print(json.dumps(out, indent=2))
    if args.out:
        write_outputs(Path(args.out), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
