"""S-SpMM benchmark: utilisation, output-mask skipping, cycle-model error, co-simulation speed.

``python -m moagcn.sim.bench_sspmm [--backend verilator] [--preset default] [--nodes 2000]``
runs a power-law graph (average degree >= 8) with F = 64 features under a random 50 % mask and
under an all-ones mask, on the RTL and on the cycle model, and prints one JSON object. On
``verilator`` it also runs a small job on the tiny preset through the per-cycle cocotb testbench
and through the lean harness, for their co-simulation speeds side by side.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from moagcn.hw.sspmm import preset
from moagcn.sim.golden.sspmm import sspmm, work_adds
from moagcn.sim.sspmm_driver import SSpmmDriver
from moagcn.sim.sspmm_model import estimate


def power_law_graph(n: int, avg_degree: float, seed: int):
    """CSR of a graph whose degrees follow a Pareto law scaled to ``avg_degree``."""
    rng = np.random.default_rng(seed)
    raw = rng.pareto(1.5, n) + 1.0
    deg = np.maximum(np.round(raw / raw.mean() * avg_degree), 0).astype(np.int64)
    deg = np.minimum(deg, n)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, n, int(indptr[-1]))
    return indptr, indices


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="verilator")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--degree", type=float, default=8.5)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fetch-rows", type=int, default=None,
                        help="override the preset's fetch_rows (node-buffer rows per cycle)")
    parser.add_argument("--cocotb-nodes", type=int, default=250,
                        help="size of the job (tiny preset, F = 16, 50 %% mask) run through the "
                             "per-cycle cocotb testbench and the lean harness for comparison "
                             "(0: skip)")
    args = parser.parse_args(argv)

    overrides = {} if args.fetch_rows is None else {"fetch_rows": args.fetch_rows}
    cfg = preset(args.preset, **overrides)
    indptr, indices = power_law_graph(args.nodes, args.degree, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    H = rng.standard_normal((args.nodes, args.features)).astype(np.float32)
    masks = {"half": rng.random(H.shape) < 0.5, "ones": np.ones(H.shape, bool)}
    out = {"backend": args.backend, "preset": args.preset, "lanes": cfg.lanes,
           "groups": cfg.groups, "fetch_rows": cfg.fetch_rows, "nodes": args.nodes,
           "edges": int(indices.size),
           "avg_degree": indices.size / args.nodes, "features": args.features}
    driver = SSpmmDriver(cfg, args.backend)
    for name, M in masks.items():
        t0 = time.perf_counter()
        res = driver.run(indptr, indices, H, M)
        wall = time.perf_counter() - t0
        exact = np.array_equal(res.Z.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
        model = estimate(indptr, M, args.features, cfg)
        c = res.counters
        work = work_adds(indptr, M)
        out[name] = {
            "bit_exact": bool(exact),
            "cycles_compute": c["cycles_compute"],
            "cycles_load": c["cycles_load"],
            "cycles_output": c["cycles_output"],
            "work_adds": work,
            "utilization": work / (cfg.lanes * c["cycles_compute"]),
            "stall_no_job": c.get("stall_no_job"),
            "stall_no_context": c.get("stall_no_context"),
            "bubbles": c.get("bubbles"),
            "turns": model.turns,
            "rows_fetched": c.get("rows_fetched"),
            "model_rows_fetched": model.rows_fetched,
            "model_cycles_compute": model.cycles_compute,
            "model_error": c["cycles_compute"] / model.cycles_compute - 1,
            "model_cycles_output": model.cycles_output,
            "wall_s": round(wall, 2),
            "sim_cycles_per_s": (c["sim_cycles"] / c["sim_testbench_s"]
                                 if c.get("sim_testbench_s") else None),
        }
    out["mask_speedup"] = out["ones"]["cycles_compute"] / out["half"]["cycles_compute"]
    if args.backend == "verilator" and args.cocotb_nodes:
        # the same RTL driven cycle by cycle from Python (cocotb) against the lean harness
        tiny = preset("tiny")
        n = min(args.cocotb_nodes, tiny.max_nodes)
        ip, ix = power_law_graph(n, args.degree, args.seed)
        Ht = rng.standard_normal((n, 16)).astype(np.float32)
        Mt = rng.random(Ht.shape) < 0.5
        tiny_driver = SSpmmDriver(tiny, "verilator")
        speeds = {}
        for name, per_cycle in (("cocotb", True), ("lean", False)):
            c = tiny_driver.run(ip, ix, Ht, Mt, per_cycle=per_cycle).counters
            speeds[name] = c["sim_cycles"] / c["sim_testbench_s"]
        out["tiny_job"] = {"nodes": n, "edges": int(ix.size), "features": 16,
                           "cocotb_sim_cycles_per_s": speeds["cocotb"],
                           "lean_sim_cycles_per_s": speeds["lean"]}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
