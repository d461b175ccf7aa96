"""Where an S-SpMM co-simulation spends its time: the lean harness under ``perf``, per module.

``python -m moagcn.sim.rtl.profile --out DIR [--preset default] [--nodes 2000] [--width 64]
[--param KEY=VALUE] [--repeats 5] [--no-perf]`` writes the benchmark's 50 % job (``moagcn bench
sspmm``'s graph, features and mask for the same seed) and the design's lean harness into DIR,
builds the harness with the lean options plus ``-g`` (debug information only: the same code), and
prints

- the job's simulated cycles per CPU-second of the harness process (user + system time, from
  ``getrusage``: on a shared machine the wall clock measures the other users too), min /
  median / max of ``--repeats`` runs;
- with ``perf`` on PATH, a ``perf record -e cpu-clock`` profile of one more run by Verilog
  module: every sample's C++ source line belongs to one top-level statement of Verilator's
  generated code, and each statement to the module whose signals it names most often
  (``(top)``: the accelerator's top level; names Verilator made up count for nothing). Then
  the statements that cost most.

DIR keeps ``job.bin``, ``harness`` and ``obj/`` (the generated C++), so ``perf report -i
DIR/perf.data`` and ``DIR/harness DIR/job.bin OUT`` can be rerun by hand. docs/sim.md has the
figures this printed.
"""

from __future__ import annotations

import argparse
import collections
import re
import resource
import shutil
import statistics
import subprocess
from pathlib import Path

import numpy as np

from moagcn.config import apply_params, parse_params
from moagcn.core.generators import pareto_graph
from moagcn.core.spec import get_spec
from moagcn.hw.sspmm import preset
from moagcn.sim.rtl.build import generate_verilog
from moagcn.sim.rtl.lean import generate_harness, generate_wrapper, lean_args, verilate_and_make

_IDENT = re.compile(r"moagcn_lean_top__DOT__(?:dut__DOT__dut__DOT__)?(\w+)")
_SAMPLE = re.compile(r"\s*([\d.]+)%\s+(\S+):(\d+)")


def prepare(out: Path, preset_name: str, params: dict, nodes: int, width: int,
            seed: int) -> None:
    """The benchmark's 50 % job and the lean harness's sources in ``out``."""
    spec = get_spec("sspmm")
    cfg = apply_params(preset(preset_name), params)
    n = min(nodes, cfg.max_nodes)
    indptr, indices = pareto_graph(n, 8.5, seed)
    rng = np.random.default_rng(seed + 1)
    H = rng.standard_normal((n, width)).astype(np.float32)
    M = rng.random(H.shape) < 0.5          # the benchmark's "half" mask, drawn first
    job = spec.check(spec.job(indptr, indices, H, M), cfg)
    run_job, _ = spec.expand(job, cfg)
    packed = [spec.pack(part.job, cfg) for part in spec.split(run_job, cfg)]
    proto = spec.protocol
    verilog = generate_verilog(spec.gateware(), cfg)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(verilog.path, out / "top.v")
    (out / "wrapper.v").write_text(generate_wrapper(verilog))
    (out / "harness.cpp").write_text(generate_harness(verilog, proto))
    with open(out / "job.bin", "wb") as fh:
        fh.write(np.uint64(len(packed)).tobytes())
        for p in packed:
            for s in proto.loads:
                arr = np.ascontiguousarray(p.streams[s], dtype=np.uint32)
                fh.write(np.uint64(arr.shape[0]).tobytes())
                fh.write(arr.tobytes())
            for s in proto.scalars:
                fh.write(np.uint64(p.scalars[s]).tobytes())
        for v in (0, 0, 1 << 40):                  # no idle loads, no stalls, no cycle limit
            fh.write(np.uint64(v).tobytes())


def build(out: Path) -> Path:
    """The harness, built with the lean options and ``-g``; keeps the generated C++."""
    shutil.rmtree(out / "obj", ignore_errors=True)
    with open(out / "build.log", "w") as fh:
        ok = verilate_and_make(out, ["top.v", "wrapper.v", "harness.cpp"], lean_args(),
                               (out / "harness").resolve(), fh, extra_cflags="-g")
    if not ok:
        raise SystemExit(f"the harness did not build; see {out / 'build.log'}")
    return out / "harness"


def speed(out: Path, repeats: int) -> tuple[int, list[float]]:
    """Simulated cycles and cycles per CPU-second of the harness, ``repeats`` runs."""
    rates, cycles = [], 0
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([str(out / "harness"), str(out / "job.bin"), str(out / "out.bin")],
                       check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cycles = int(np.frombuffer((out / "out.bin").read_bytes()[:8], np.uint64)[0])
        rates.append(cycles / cpu)
    return cycles, rates


def by_module(out: Path, depth: int = 2) -> tuple[dict, list, float]:
    """Shares of the samples in ``out/perf.data`` per module (``depth`` levels of the
    hierarchy), the statements by share (file, line, lines, module, text) and the share
    outside the model's C++."""
    report = subprocess.run(["perf", "report", "-i", str(out / "perf.data"), "--no-children",
                             "--sort", "srcline", "-g", "none", "--percent-limit", "0",
                             "--stdio"], capture_output=True, text=True).stdout
    samples = collections.Counter()
    for row in report.splitlines():
        m = _SAMPLE.match(row)
        if m:
            samples[(Path(m.group(2)).name, int(m.group(3)))] += float(m.group(1))
    stmt_of, text = {}, {}
    for f in sorted((out / "obj").glob("Vtop___024root__*.cpp")):
        start = None
        for i, line in enumerate(f.read_text().splitlines(), 1):
            # a statement of a function body starts at 4 spaces of indentation (or a new
            # function at none) and runs to the next one
            if re.match(r"^(    )?\S", line):
                start = (f.name, i)
                text[start] = []
            if start:
                stmt_of[(f.name, i)] = start
                text[start].append(line)

    def module(start):
        names = collections.Counter(
            ".".join(v.split("__DOT__")[:-1][:depth]) or "(top)"
            for line in text[start] for v in _IDENT.findall(line))
        return names.most_common(1)[0][0] if names else "(no signal)"

    mods, stmts, outside = collections.Counter(), collections.Counter(), 0.0
    for key, share in samples.items():
        start = stmt_of.get(key)
        if start is None:
            outside += share
            continue
        mods[module(start)] += share
        stmts[start] += share
    top = [(s[0], s[1], len(text[s]), module(s), " ".join(x.strip() for x in text[s])[:160],
            share) for s, share in stmts.most_common()]
    return dict(mods), top, outside


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m moagcn.sim.rtl.profile",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--param", action="append", metavar="KEY=VALUE")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--width", type=int, default=64, metavar="F")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-perf", action="store_true", help="time the runs only")
    parser.add_argument("--statements", type=int, default=15,
                        help="statements to list (default 15)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    prepare(out, args.preset, parse_params(args.param), args.nodes, args.width, args.seed)
    build(out)
    cycles, rates = speed(out, max(args.repeats, 1))
    print(f"{cycles} cycles; cycles per CPU-second min {min(rates):,.0f} median "
          f"{statistics.median(rates):,.0f} max {max(rates):,.0f} ({len(rates)} runs)")
    if args.no_perf or shutil.which("perf") is None:
        return 0
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "20000", "-o",
                    str(out / "perf.data"), str(out / "harness"), str(out / "job.bin"),
                    str(out / "out.bin")], check=True, capture_output=True)
    mods, top, outside = by_module(out)
    print(f"samples outside the model's C++ (harness, kernel, libraries): {outside:.1f} %")
    for name, share in sorted(mods.items(), key=lambda kv: -kv[1]):
        if share >= 0.5:
            print(f"  {share:5.1f} %  {name}")
    print("statements:")
    for f, line, n, mod, txt, share in top[:args.statements]:
        print(f"  {share:5.2f} %  {f}:{line} ({n} lines, {mod})  {txt}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
