"""Resource / Fmax table of the binary32 units over several latencies.

``python -m moagcn.synth.table --out docs/synth-fp32.md`` runs the real yosys + nextpnr flow for
each configuration and writes a Markdown table plus a CSV beside it (``.csv``).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import tempfile
from pathlib import Path

from moagcn.core.registry import gateware

from moagcn.synth.flow import synthesize

DEFAULT_RUNS = [
    ("fp32-add", "ecp5-85k", [2, 4, 7]),
    ("fp32-mul", "ecp5-85k", [2, 4, 7]),
    ("fp32-add", "ice40-hx8k", [7]),
    ("fp32-mul", "ice40-hx8k", [7]),
]

FIELDS = ["design", "target", "latency", "luts", "ffs", "dsps", "brams", "fmax_mhz"]


def collect(runs=DEFAULT_RUNS, seed: int = 1) -> list[dict]:
    """Synthesise every (design, target, latency) and return one row each."""
    from tqdm import tqdm
    jobs = [(d, t, lat) for d, t, lats in runs for lat in lats]
    rows = []
    for name, target, latency in tqdm(jobs, desc="synthesis", unit="run"):
        design = gateware(name)
        config = dataclasses.replace(design.default_config(), latency=latency)
        with tempfile.TemporaryDirectory() as tmp:
            report = synthesize(design, config, target, Path(tmp), seed=seed)
        rows.append({"design": name, "target": target, "latency": latency,
                     **{k: report[k] for k in FIELDS[3:]}})
    return rows


def write(rows: list[dict], out: Path, seed: int) -> None:
    """Markdown table at ``out`` and the same rows as CSV next to it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| design | target | latency | LUTs | FFs | DSPs | BRAMs | Fmax (MHz, post-route) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['design']} | {r['target']} | {r['latency']} | {r['luts']} | "
                     f"{r['ffs']} | {r['dsps']} | {r['brams']} | {r['fmax_mhz']} |")
    out.write_text("<!-- written by `python -m moagcn.synth.table`; do not edit -->\n"
                   f"nextpnr seed {seed}; ECP5 out of context; LUTs = TRELLIS_COMB / "
                   "ICESTORM_LC cells.\n\n" + "\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/synth-fp32.md"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows = collect(seed=args.seed)
    write(rows, args.out, args.seed)
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
