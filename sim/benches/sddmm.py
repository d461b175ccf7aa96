"""``moagcn bench sddmm``: the SDDMM accelerator's RTL against its cycle model and golden model on
held-out-style patterns (hubs, isolated rows, self loops, duplicate entries, widths not
multiples of the lanes, heads, masks), and its utilisation on a power-law graph at F = 64.

Prints one row per pattern (the validation table of docs/attention.md) and writes them as JSON
with ``--report``. ``moagcn bench sddmm [--device rtl|model] [--simulator verilator] [--design
sddmm] [--preset default] [--param KEY=VALUE] [--cases N] [--report R.json]``; ``--device
model`` runs the cycle and golden models alone (the RTL columns are then the model's).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from moagcn.config import apply_params
from moagcn.core.options import accelerator, add_accelerator_flags
from moagcn.core.spec import get_spec
from moagcn.sim.driver import Driver


def power_law(n: int, avg_degree: float, seed: int, alpha: float = 1.2):
    """Row degrees and columns from a Zipf-like law (hubs of hundreds of entries, isolated
    rows)."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n + 1) ** alpha
    w = rng.permutation(w / w.sum())
    deg = rng.multinomial(int(avg_degree * n), w)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    return indptr, rng.choice(n, size=int(indptr[-1]), p=w).astype(np.int64)


def awkward(n: int, seed: int):
    """Every seventh row isolated, a hub row of n entries, self loops, duplicates."""
    rng = np.random.default_rng(seed)
    rows = []
    for v in range(n):
        if v % 7 == 3:
            rows.append([])
        elif v == 1:
            rows.append(list(rng.integers(0, n, n)))
        else:
            r = list(rng.integers(0, n, int(rng.integers(1, 6)))) + [v]
            rows.append(r + [r[0]] if v % 5 == 0 else r)
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    return indptr, np.array([u for r in rows for u in r], dtype=np.int64)


#: (name, pattern, width, heads, mask density or None)
CASES = [
    ("power-law F=64", lambda: power_law(1500, 8.0, 1), 64, 1, None),
    ("power-law F=64 H=4", lambda: power_law(1500, 8.0, 2), 64, 4, None),
    ("power-law F=64 H=8 masked", lambda: power_law(1500, 8.0, 3), 64, 8, 0.5),
    ("awkward F=50", lambda: awkward(900, 4), 50, 1, None),
    ("awkward F=30 H=3 masked", lambda: awkward(900, 5), 30, 3, 0.7),
    ("awkward F=7", lambda: awkward(900, 6), 7, 1, None),
    ("power-law F=128 H=2", lambda: power_law(800, 12.0, 7), 128, 2, None),
]


def run_case(spec, cfg, simulator, name, make, width, heads, density, seed=0,
             device: str = "rtl") -> dict:
    indptr, indices = make()
    n = indptr.size - 1
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n, width)).astype(np.float32)
    K = rng.standard_normal((n, width)).astype(np.float32)
    mask = None if density is None else rng.random((indices.size, heads)) < density
    job = spec.check(spec.job(indptr, indices, Q, K, heads, mask), cfg)
    t0 = time.perf_counter()
    rtl = Driver(spec, cfg, device, simulator).run(job, checked=True)
    wall = time.perf_counter() - t0
    model = Driver(spec, cfg, "model").run(job, checked=True)
    bits = np.array_equal(rtl.output.view(np.uint32), model.output.view(np.uint32))
    r, m = rtl.counters, model.counters
    return {"pattern": name, "rows": n, "entries": int(indices.size), "width": width,
            "heads": heads, "mask_density": density, "pairs": int(r.unmasked),
            "parts": r.tiles, "rtl_compute": r.cycles_compute, "model_compute": m.cycles_compute,
            "rtl_total": r.cycles_total, "model_total": m.cycles_total,
            "error_pct": 100.0 * (m.cycles_total - r.cycles_total) / r.cycles_total,
            "utilization": round(r.utilization, 4), "bit_exact": bits,
            "wall_s": round(wall, 2)}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="moagcn bench sddmm", description=__doc__.splitlines()[0])
    add_accelerator_flags(p, designs=("sddmm",), devices=("rtl", "model"), device="rtl",
                          preset="default",
                          notes={"--device": "model: the cycle and golden models alone (the RTL "
                                             "columns are then the model's)"})
    p.add_argument("--cases", type=int, default=len(CASES),
                   help=f"run the first N patterns (default all {len(CASES)})")
    p.add_argument("--report", metavar="R.json", help="also write the rows as JSON")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    spec = get_spec("sddmm")
    cfg = apply_params(spec.config(args.preset), accelerator(args).params)
    rows = []
    print(f"{'pattern':28s} {'rows':>5s} {'entries':>7s} {'F':>4s} {'H':>2s} {'pairs':>7s} "
          f"{'parts':>5s} {'RTL cycles':>10s} {'model':>10s} {'error':>7s} {'util':>6s} exact")
    for case in CASES[:args.cases]:
        r = run_case(spec, cfg, args.simulator, *case, device=args.device)
        rows.append(r)
        print(f"{r['pattern']:28s} {r['rows']:5d} {r['entries']:7d} {r['width']:4d} "
              f"{r['heads']:2d} {r['pairs']:7d} {r['parts']:5d} {r['rtl_total']:10d} "
              f"{r['model_total']:10d} {r['error_pct']:6.2f}% {r['utilization']:6.3f} "
              f"{'yes' if r['bit_exact'] else 'NO'}", flush=True)
    worst = max(abs(r["error_pct"]) for r in rows)
    print(f"largest model error {worst:.2f} % (target 3 %); all bit-exact: "
          f"{all(r['bit_exact'] for r in rows)}")
    if args.report:
        Path(args.report).write_text(json.dumps({"preset": args.preset, "device": args.device,
                                                 "rows": rows},
                                                indent=2) + "\n")
    return 0 if worst <= 3.0 and all(r["bit_exact"] for r in rows) else 1
