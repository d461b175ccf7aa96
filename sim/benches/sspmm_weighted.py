"""``moagcn bench sspmm-weighted``: the weighted S-SpMM (``weighted=true``) against the binary
one on the same jobs, and its cycle model against its RTL.

Each held-out-style job (power-law graphs with hub rows, isolated rows, self loops and
duplicate entries; feature widths that are not multiples of the lanes; masks of density 0.25 to
1; values drawn standard normal) runs on the weighted configuration (the preset with
``weighted=true``) and, without its values, on the binary one (the preset as it is). Per job:
both utilisations (useful operations per lane per compute cycle) and their ratio, whether the
weighted RTL's Z equals the golden model's bit for bit, and the weighted cycle model's error
on ``cycles_total`` and ``cycles_compute``. ``--device model`` runs the cycle and golden
models alone (any preset; the RTL columns are then the model's). The first job is the target's:
a power-law graph with hubs, F = 64, 50 % mask (docs/sspmm.md, "Weighted S-SpMM").
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.options import accelerator, add_accelerator_flags
from moagcn.core.spec import get_spec
from moagcn.sim.benches.sddmm import awkward, power_law
from moagcn.sim.driver import Driver

#: (name, pattern, width, mask density)
CASES = [
    ("power-law hubs F=64 50%", lambda: power_law(1000, 8.0, 1), 64, 0.5),
    ("power-law F=61 25%", lambda: power_law(800, 8.0, 2), 61, 0.25),
    ("power-law F=40 no mask", lambda: power_law(600, 8.0, 3), 40, 1.0),
    ("power-law deg 16 F=19 50%", lambda: power_law(500, 16.0, 4), 19, 0.5),
    ("awkward F=13 75%", lambda: awkward(400, 5), 13, 0.75),
    ("awkward F=30 50%", lambda: awkward(400, 6), 30, 0.5),
]


def make_job(make, width: int, density: float, seed: int):
    """(indptr, indices, H, M, values) of one case: features and values standard normal, a
    random mask of ``density`` (all ones at 1)."""
    indptr, indices = make()
    n = indptr.size - 1
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((n, width)).astype(np.float32)
    M = np.ones((n, width), dtype=bool) if density >= 1 else rng.random((n, width)) < density
    values = rng.standard_normal(indices.size).astype(np.float32)
    return indptr, indices, H, M, values


def run_case(spec, cfg, device, simulator, name, make, width, density, seed=0) -> dict:
    """One job on the weighted and the binary configuration (``cfg`` is the weighted one)."""
    indptr, indices, H, M, values = make_job(make, width, density, seed)
    plain_cfg = replace(cfg, weighted=False)
    weighted_job = spec.check(spec.job(indptr, indices, H, M, values), cfg)
    plain_job = spec.check(spec.job(indptr, indices, H, M), plain_cfg)
    t0 = time.perf_counter()
    w = Driver(spec, cfg, device, simulator).run(weighted_job, checked=True)
    p = Driver(spec, plain_cfg, device, simulator).run(plain_job, checked=True)
    wall = time.perf_counter() - t0
    model = spec.replayed_cycles(weighted_job, cfg)
    golden = spec.golden(weighted_job, cfg)
    rc, pc = w.counters, p.counters
    return {"job": name, "rows": int(indptr.size - 1), "entries": int(indices.size),
            "width": width, "mask_density": density, "parts": rc.tiles,
            "compute": rc.cycles_compute, "total": rc.cycles_total,
            "model_compute": model.cycles_compute, "model_total": model.cycles_total,
            "error_compute_pct": 100.0 * (model.cycles_compute / rc.cycles_compute - 1),
            "error_total_pct": 100.0 * (model.cycles_total / rc.cycles_total - 1),
            "binary_compute": pc.cycles_compute, "binary_total": pc.cycles_total,
            "utilization": round(rc.utilization, 4),
            "binary_utilization": round(pc.utilization, 4),
            "utilization_ratio": round(rc.utilization / pc.utilization, 4),
            "bit_exact": bool(np.array_equal(w.output.view(np.uint32), golden.view(np.uint32))),
            "wall_s": round(wall, 2)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="moagcn bench sspmm-weighted",
                                description=__doc__.splitlines()[0])
    add_accelerator_flags(p, designs=("sspmm",), devices=("rtl", "model"), device="rtl",
                          preset="tiny",
                          notes={"--device": "model: the cycle and golden models alone (any "
                                             "preset; the RTL columns are then the model's)",
                                 "--preset": "weighted=true is set on it"})
    p.add_argument("--cases", type=int, default=len(CASES),
                   help=f"run the first N jobs (default all {len(CASES)})")
    p.add_argument("--report", metavar="R.json", help="also write the rows as JSON")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    spec = get_spec("sspmm")
    params = accelerator(args).params
    params["weighted"] = "true"
    cfg = apply_params(spec.config(args.preset), params)
    rows = []
    print(f"{'job':27s} {'rows':>5s} {'entries':>7s} {'F':>3s} {'mask':>4s} {'parts':>5s} "
          f"{'compute':>8s} {'model':>8s} {'err c':>6s} {'err t':>6s} {'binary':>8s} "
          f"{'util':>6s} {'binary':>6s} {'ratio':>6s} exact")
    for k, case in enumerate(CASES[:args.cases]):
        r = run_case(spec, cfg, args.device, args.simulator, *case, seed=k)
        rows.append(r)
        print(f"{r['job']:27s} {r['rows']:5d} {r['entries']:7d} {r['width']:3d} "
              f"{r['mask_density']:4.2f} {r['parts']:5d} {r['compute']:8d} "
              f"{r['model_compute']:8d} {r['error_compute_pct']:5.2f}% "
              f"{r['error_total_pct']:5.2f}% {r['binary_compute']:8d} {r['utilization']:6.3f} "
              f"{r['binary_utilization']:6.3f} {r['utilization_ratio']:6.3f} "
              f"{'yes' if r['bit_exact'] else 'NO'}", flush=True)
    worst = max(max(abs(r["error_compute_pct"]), abs(r["error_total_pct"])) for r in rows)
    lowest = min(r["utilization_ratio"] for r in rows)
    ok = worst <= 3.0 and all(r["bit_exact"] for r in rows) and lowest >= 0.95
    print(f"{args.device} ({args.preset}, weighted): largest model error {worst:.2f} % "
          f"(target 3 %); lowest utilisation against the binary design {lowest:.3f} (target "
          f">= 0.95); all bit-exact: {all(r['bit_exact'] for r in rows)}")
    if args.report:
        Path(args.report).write_text(json.dumps({"preset": args.preset, "device": args.device,
                                                 "rows": rows}, indent=2) + "\n")
    return 0 if ok else 1
