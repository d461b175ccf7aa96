"""The S-SpMM cycle model against the RTL over slices and lanes.

``moagcn bench sspmm-model [--param slices=1,2,4,8] [--param lanes=4,8,16] [--nodes 1200]
[--seed 0] [--param split_degree=D] [--param node_banks=B] [--simulator verilator]
[--preset default] [--out DIR]`` builds the ``--preset``'s buffers with every (S, P) pair (two groups, one node-buffer read
per slice and cycle, so that P = 4 has two lanes per group and the design stays small enough to
build 12 times), runs held-out-style jobs on its RTL and on the cycle model, and prints the
error of each counter:

- a power-law graph with a hub row, 10 % isolated rows, self loops and duplicate indices, a
  width that is not a multiple of the lanes, a random 50 % mask;
- the same graph without a mask (all ones);
- a denser graph (average degree 16) with a 90 % mask and a width of 33.

``--param split_degree=D``: the configurations with S > 1 split rows longer than D across their
slices (the golden model then sums those rows in the same pieces). ``--param node_banks=B``:
the configurations with S > 1 share one node buffer of B banks through the crossbar (the table
then also gives the rows read from the banks and the refused requests, RTL and model). Both
take one value (not swept) and leave the S = 1 configurations as they are (0); the old
``--split-degree D`` and ``--node-banks B`` still work, with a deprecation line.

The bench compares the model with the RTL, so it always runs both: ``--device`` takes ``rtl``
only (``--design`` ``sspmm`` only). Every job's output is checked bit for bit against the
golden model. RTL results are cached by
the Verilog's hash and the job's parameters (re-running the table re-runs only what changed).
``--out DIR`` writes ``sspmm-model.json``, ``sspmm-model.csv`` and ``sspmm-model.png`` (model
against RTL compute cycles).

``moagcn bench sspmm-model --presets tiny,default,multi [--all] [--out DIR]`` runs instead the
held-out jobs of each named preset as it is (:data:`PRESET_CASES`: hubs, isolated rows, self
loops, duplicate indices, widths that are not a multiple of the lanes, masks from 0.25 to all
ones, some jobs tiled) on the RTL and on the cycle model, and prints the error of
``cycles_total`` (loads not hidden + compute + output, as ``sspmm run`` reports them) and
``cycles_compute``; ``--all`` adds the larger jobs (minutes each). ``--out DIR`` writes
``sspmm-model-presets.json`` and ``.csv``. tests/hw/sspmm/test_model_presets.py runs the same
jobs (the larger ones marked slow) and holds each within 3 %.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from moagcn.core.options import accelerator, add_accelerator_flags, add_field_flags
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.hw.sspmm import preset
from moagcn.sim.driver import Driver

SPEC = get_spec("sspmm")
FIELDS = ("slices", "lanes", "split_degree", "node_banks", "job", "nodes", "edges", "features",
          "density", "bit_exact",
          "cycles_compute", "model_cycles_compute", "error_compute", "cycles_total",
          "model_cycles_total", "error_total", "cycles_output", "model_cycles_output",
          "utilization", "model_utilization", "rows_fetched", "rows_read", "model_rows_read",
          "stall_bank", "model_stall_bank")


def held_out_job(n: int, F: int, avg_degree: float, density: float, seed: int):
    """(indptr, indices, H, M): Pareto degrees scaled to ``avg_degree`` with one hub row of
    degree n / 8, 10 % isolated rows, skewed columns (duplicates within rows), a self loop in
    every seventh row, signed zeros in H, a mask of the given density (1.0: none)."""
    rng = np.random.default_rng(seed)
    raw = rng.pareto(1.3, n) + 1.0
    deg = np.round(raw / raw.mean() * avg_degree).astype(np.int64)
    deg = np.minimum(deg, n // 4)
    deg[rng.random(n) < 0.1] = 0
    deg[rng.integers(n)] = n // 8
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    weights = 1.0 / np.arange(1, n + 1) ** 0.7
    indices = rng.permutation(n)[rng.choice(n, size=int(indptr[-1]), p=weights / weights.sum())]
    for v in range(0, n, 7):
        if deg[v]:
            indices[indptr[v]] = v
    H = rng.standard_normal((n, F)).astype(np.float32)
    H[rng.random((n, F)) < 0.02] = -0.0
    M = None if density >= 1.0 else rng.random((n, F)) < density
    return indptr, indices, H, M


def jobs(nodes: int, lanes: int):
    """(name, n, F, average degree, mask density) of the table's jobs for P = ``lanes``."""
    width = 4 * lanes + 3 if 4 * lanes + 3 <= 64 else 61     # never a multiple of the lanes
    return [("power law, 50 % mask", nodes, width, 8.0, 0.5),
            ("power law, no mask", nodes, width, 8.0, 1.0),
            ("degree 16, 90 % mask", nodes, 33, 16.0, 0.9)]


#: per preset, held-out jobs: (name, nodes, width, average degree, mask density, seed, large).
#: Widths are never a multiple of the preset's lanes; the seeds are used by no other bench; the
#: large ones run with ``--all`` (and in the slow tests)
PRESET_CASES = {
    "tiny": [("hub, 25 % mask", 230, 13, 6.0, 0.25, 531, False),
             ("hub, 60 % mask", 250, 15, 9.0, 0.6, 532, False),
             ("hub, no mask", 200, 9, 7.0, 1.0, 533, False),
             ("tiled, 45 % mask", 700, 14, 8.0, 0.45, 534, True)],
    "default": [("hub, 50 % mask", 900, 45, 8.0, 0.5, 541, False),
                ("hub, 25 % mask", 1200, 61, 6.0, 0.25, 542, False),
                ("degree 12, no mask", 700, 33, 12.0, 1.0, 543, False),
                ("tiled, 60 % mask", 6000, 48, 9.0, 0.6, 544, True)],
    "multi": [("hub, 50 % mask", 900, 40, 8.0, 0.5, 551, False),
              ("hub, 75 % mask", 1000, 61, 7.0, 0.75, 552, False),
              ("degree 12, no mask", 700, 27, 12.0, 1.0, 553, False),
              ("power law, 60 % mask", 3000, 48, 9.0, 0.6, 554, True)],
}
PRESET_FIELDS = ("preset", "job", "nodes", "edges", "features", "density", "tiles", "bit_exact",
                 "cycles_total", "model_cycles_total", "error_total", "cycles_compute",
                 "model_cycles_compute", "error_compute", "utilization", "model_utilization")


def preset_row(name: str, case, simulator: str = "verilator") -> dict:
    """One held-out job of :data:`PRESET_CASES` on preset ``name``: the RTL's counters (as the
    driver sums them over the job's tiles) against the cycle model's of the same parts."""
    job_name, n, F, degree, density, seed, _ = case
    cfg = preset(name)
    indptr, indices, H, M = held_out_job(n, F, degree, density, seed)
    rtl = _rtl_counters(cfg, f"preset/{n}/{F}/{degree}/{density}/{seed}", indptr, indices, H, M,
                        simulator)
    model = SPEC.replayed_cycles(SPEC.job(indptr, indices, H, M), cfg)
    # the RTL's load register counts every load cycle; those that overlapped the tile before
    # (two load banks) are not the job's (the driver's counters and the model leave them out)
    exposed = rtl["cycles_load"] - rtl.get("cycles_load_hidden", 0)
    total = exposed + rtl["cycles_compute"] + rtl["cycles_output"]
    return {"preset": name, "job": job_name, "nodes": n, "edges": int(indices.size),
            "features": F, "density": density, "tiles": model.tiles,
            "bit_exact": rtl["bit_exact"], "cycles_total": total,
            "model_cycles_total": model.cycles_total, "error_total": model.cycles_total / total - 1,
            "cycles_compute": rtl["cycles_compute"],
            "model_cycles_compute": model.cycles_compute,
            "error_compute": model.cycles_compute / rtl["cycles_compute"] - 1,
            "utilization": rtl["work_adds"] / (cfg.adders * rtl["cycles_compute"]),
            "model_utilization": model.utilization}


def preset_table(names, simulator: str = "verilator", large: bool = False) -> list[dict]:
    cases = [(p, c) for p in names for c in PRESET_CASES[p] if large or not c[-1]]
    rows = []
    for k, (p, case) in enumerate(cases):
        print(f"[{k + 1}/{len(cases)}] {p}: {case[0]}, {case[1]} nodes, F = {case[2]}",
              file=sys.stderr, flush=True)
        rows.append(preset_row(p, case, simulator))
    return rows


def _rtl_counters(cfg, job_key: str, indptr, indices, H, M, simulator: str) -> dict:
    """The RTL's counters of one job (cached by Verilog hash, job and the order in which the
    driver gives the job's rows, see ``SSpmmConfig.row_order``), and bit-exactness."""
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.core.registry import gateware
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.rtl.build import cache_dir, generate_verilog
    verilog = generate_verilog(gateware("sspmm"), cfg)
    key = hashlib.sha256(f"{verilog.path.parent.name}/{simulator}/{job_key}".encode())
    for part in SPEC.split(SPEC.check(SPEC.job(indptr, indices, H, M), cfg), cfg):
        key.update(b"-" if part.order is None else np.asarray(part.order, np.int64).tobytes())
    path = cache_dir() / "sspmm-model-table" / f"{key.hexdigest()[:20]}.json"
    if path.exists():
        return json.loads(path.read_text())
    res = Driver(SPEC, cfg, "rtl", simulator).run(SPEC.job(indptr, indices, H, M))
    golden = SPEC.golden(SPEC.check(SPEC.job(indptr, indices, H, M), cfg), cfg)
    exact = np.array_equal(res.output.view(np.uint32), golden.view(np.uint32))
    c = res.counters
    out = {"bit_exact": bool(exact), "cycles_compute": c.cycles_compute,
           "cycles_output": c.cycles_output, "cycles_load": c.cycles_load,
           "work_adds": c.work_adds, **{k: int(v) for k, v in res.raw.items()
                                        if k in SPEC.protocol.counters}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def table(slices, lanes, nodes: int, seed: int, simulator: str,
          split_degree: int = 0, node_banks: int = 0, preset_name: str = "default") -> list[dict]:
    rows = []
    cases = [(S, P, j) for S in slices for P in lanes for j in jobs(nodes, P)]
    for k, (S, P, (name, n, F, degree, density)) in enumerate(cases):
        print(f"[{k + 1}/{len(cases)}] S={S} P={P}: {name}", file=sys.stderr, flush=True)
        cfg = preset(preset_name, slices=S, lanes=P, groups=2, fetch_rows=1,
                     split_degree=split_degree if S > 1 else 0,
                     node_banks=node_banks if S > 1 else 0)
        indptr, indices, H, M = held_out_job(n, F, degree, density, seed + k % 3)
        rtl = _rtl_counters(cfg, f"{n}/{F}/{degree}/{density}/{seed + k % 3}", indptr, indices,
                            H, M, simulator)
        model = SPEC.replayed_cycles(SPEC.job(indptr, indices, H, M), cfg)
        hw_total = rtl["cycles_compute"] + rtl["cycles_output"]       # what the RTL counts
        model_total = model.cycles_compute + model.cycles_output
        adders = cfg.adders
        rows.append({
            "slices": S, "lanes": P, "split_degree": cfg.split_degree,
            "node_banks": cfg.node_banks, "job": name, "nodes": n,
            "edges": int(indices.size),
            "features": F, "density": density, "bit_exact": rtl["bit_exact"],
            "cycles_compute": rtl["cycles_compute"],
            "model_cycles_compute": model.cycles_compute,
            "error_compute": model.cycles_compute / rtl["cycles_compute"] - 1,
            "cycles_total": hw_total, "model_cycles_total": model_total,
            "error_total": model_total / hw_total - 1,
            "cycles_output": rtl["cycles_output"], "model_cycles_output": model.cycles_output,
            "utilization": rtl["work_adds"] / (adders * rtl["cycles_compute"]),
            "model_utilization": model.work_adds / (adders * model.cycles_compute),
            "rows_fetched": rtl["rows_fetched"], "rows_read": rtl["rows_read"],
            "model_rows_read": model.extra["rows_read"], "stall_bank": rtl["stall_bank"],
            "model_stall_bank": model.extra["stall_bank"],
        })
    return rows


def summary(rows: list[dict]) -> dict:
    err_c = [abs(r["error_compute"]) for r in rows]
    err_t = [abs(r["error_total"]) for r in rows]
    return {"jobs": len(rows), "all_bit_exact": all(r["bit_exact"] for r in rows),
            "max_abs_error_compute": max(err_c), "mean_abs_error_compute": float(np.mean(err_c)),
            "max_abs_error_total": max(err_t), "mean_abs_error_total": float(np.mean(err_t)),
            "within_3_percent": sum(e <= 0.03 for e in err_c)}


def write_outputs(out_dir: Path, result: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sspmm-model.json").write_text(json.dumps(result, indent=2) + "\n")
    with open(out_dir / "sspmm-model.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(result["rows"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 5))
    for S in sorted({r["slices"] for r in result["rows"]}):
        pts = [(r["cycles_compute"], r["model_cycles_compute"]) for r in result["rows"]
               if r["slices"] == S]
        ax.scatter(*zip(*pts), label=f"S = {S}", s=14)
    lim = max(max(r["cycles_compute"], r["model_cycles_compute"]) for r in result["rows"])
    ax.plot([0, lim], [0, lim], "k:", lw=1)
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("RTL compute cycles"), ax.set_ylabel("model compute cycles")
    ax.set_title("S-SpMM cycle model against the RTL")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "sspmm-model.png", dpi=120)
    plt.close(fig)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="moagcn bench sspmm-model",
                                 description=__doc__.split("\n")[0])
    add_accelerator_flags(
        ap, designs=("sspmm",), devices=("rtl",), device="rtl", simulators=("verilator", "icarus"),
        preset="default", param_metavar="KEY=VALUE[,VALUE...]",
        why={"--device": "this bench compares the cycle model with the RTL, so it always runs "
                         "both (rtl only; the RTL results are cached)",
             "--simulator": "this bench runs its RTL on verilator or icarus"},
        notes={"--device": "the cycle model runs beside it on every job",
               "--preset": "the base of the slices x lanes sweep (two groups, one node-buffer "
                           "read per slice and cycle)",
               "--param": "slices and lanes, each a comma list: every (slices, lanes) pair is "
                          "built and run (default slices=1,2,4,8 and lanes=4,8,16); "
                          "split_degree=D and node_banks=B, one value each, apply to the S > 1 "
                          "configurations only (default 0: no split, a node buffer per slice)"})
    add_field_flags(ap, {"--slices": "slices", "--lanes": "lanes"}, type=str)
    add_field_flags(ap, {"--split-degree": "split_degree", "--node-banks": "node_banks"})
    ap.add_argument("--nodes", type=int, default=1200,
                    help="nodes of the power-law jobs (default 1200)")
    ap.add_argument("--seed", type=int, default=0, help="graph, feature and mask seed")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="also write sspmm-model.json, sspmm-model.csv and sspmm-model.png "
                         "(with --presets: sspmm-model-presets.json and .csv)")
    ap.add_argument("--presets", metavar="NAMES",
                    help="instead of the slices x lanes sweep, the held-out jobs of these "
                         "presets as they are (comma list of tiny, default, multi)")
    ap.add_argument("--all", action="store_true",
                    help="with --presets: the larger held-out jobs too (minutes each)")
    return ap


def presets_main(args) -> int:
    names = [p.strip() for p in args.presets.split(",") if p.strip()]
    bad = [p for p in names if p not in PRESET_CASES]
    if bad or not names:
        raise UserError(f"--presets {args.presets!r}: choose from {', '.join(PRESET_CASES)}")
    rows = preset_table(names, args.simulator, args.all)
    err_c = [abs(r["error_compute"]) for r in rows]
    err_t = [abs(r["error_total"]) for r in rows]
    summ = {"jobs": len(rows), "all_bit_exact": all(r["bit_exact"] for r in rows),
            "max_abs_error_total": max(err_t), "max_abs_error_compute": max(err_c),
            "within_3_percent": sum(max(a, b) <= 0.03 for a, b in zip(err_t, err_c))}
    print(json.dumps(summ, indent=2))
    for r in rows:
        print(f"{r['preset']:<8} {r['job']:<20} {r['nodes']:>5} nodes F={r['features']:<3} "
              f"tiles {r['tiles']:>2}  total rtl {r['cycles_total']:>7} model "
              f"{r['model_cycles_total']:>7} ({r['error_total']:+.2%})  compute rtl "
              f"{r['cycles_compute']:>7} model {r['model_cycles_compute']:>7} "
              f"({r['error_compute']:+.2%})  utilisation {r['utilization']:.3f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sspmm-model-presets.json").write_text(
            json.dumps({"summary": summ, "rows": rows}, indent=2) + "\n")
        with open(args.out / "sspmm-model-presets.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=PRESET_FIELDS)
            w.writeheader()
            w.writerows(rows)
    return 0


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.presets:
        if args.param or any(getattr(args, f"legacy_{f}") is not None
                             for f in ("slices", "lanes", "split_degree", "node_banks")):
            raise UserError("--presets runs each preset as it is: no --param")
        if args.preset != "default":
            raise UserError(f"--preset {args.preset} with --presets: --presets names the "
                            "presets it runs")
        return presets_main(args)
    if args.all:
        raise UserError("--all goes with --presets")
    params = accelerator(args).params
    sweep = {}
    for key, default in (("slices", "1,2,4,8"), ("lanes", "4,8,16")):
        text = params.pop(key, default)
        try:
            sweep[key] = _ints(text)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"--param {key}={text}: {exc}") from None
    fixed = {}
    for key in ("split_degree", "node_banks"):
        text = params.pop(key, "0")
        try:
            fixed[key] = int(text)
        except ValueError:
            raise UserError(f"--param {key}={text}: give one integer (it applies to the "
                            "S > 1 configurations)") from None
    if params:
        raise UserError(f"--param {next(iter(params))}: this bench sweeps slices and lanes "
                        "and takes split_degree and node_banks (the rest is its own "
                        "configuration)")
    args.slices, args.lanes = sweep["slices"], sweep["lanes"]
    split_degree, node_banks = fixed["split_degree"], fixed["node_banks"]
    if split_degree < 0:
        raise UserError(f"--param split_degree={split_degree}: must be >= 0 (0: never split)")
    if node_banks < 0 or node_banks & (node_banks - 1):
        raise UserError(f"--param node_banks={node_banks}: must be 0 (a node buffer per slice) "
                        "or a power of two")
    rows = table(args.slices, args.lanes, args.nodes, args.seed, args.simulator,
                 split_degree, node_banks, args.preset)
    result = {"summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"], indent=2))
    for r in rows:
        print(f"S={r['slices']:>2} P={r['lanes']:>2} {r['job']:<22} compute rtl "
              f"{r['cycles_compute']:>7} model {r['model_cycles_compute']:>7} "
              f"({r['error_compute']:+.1%})  total {r['error_total']:+.1%}")
    if args.out:
        write_outputs(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
