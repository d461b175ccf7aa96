"""The ``moagcn`` command line.

Every sub-command reports bad input as one line on stderr (``moagcn: error: ...``) and a
non-zero exit status; tracebacks are reserved for bugs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from moagcn import __version__
from moagcn.cli import (graph as cli_graph, hyscale as cli_hyscale, infer as cli_infer,
                        perfmodel as cli_perfmodel, sddmm as cli_sddmm, sspmm as cli_sspmm,
                        train as cli_host)
from moagcn.cli.common import add_simulator_arg, load_float32, simulator
from moagcn.config import parse_params
from moagcn.core.registry import design_names, get_design, names_simulation_top
from moagcn.errors import SimulationError, UserError
from moagcn.sim.arith import golden


def _design_and_config(name: str, params: list[str] | None, preset: str | None = None):
    """The top level to generate or synthesise and its configuration: ``--preset`` (default: the
    design's default preset), then every ``--param KEY=VALUE`` on top
    (:meth:`moagcn.core.registry.Design.configure`, the one path of every command)."""
    design = get_design(name)
    return (design.gateware_top(simulate=names_simulation_top(name)),
            design.configure(preset, parse_params(params)))


# -- hw ------------------------------------------------------------------------------------------

def cmd_hw_list(args) -> int:
    for name in design_names():
        d = get_design(name)
        kind = "accelerator" if d.is_accelerator else "unit"
        print(f"{name:12s} {kind:11s} {d.description}")
    return 0


def cmd_hw_generate(args) -> int:
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.rtl.build import generate_verilog
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.rtl.lint import lint_verilog
    design, config = _design_and_config(args.design, args.param, args.preset)
    out = Path(args.out)
    generated = generate_verilog(design, config, out_dir=out)
    vfile = out / f"{design.name}.v"
    print(f"wrote {vfile} and {out / (design.name + '.json')}")
    if args.lint:
        # the cached copy is named after its module, as Verilator's DECLFILENAME rule wants
        warnings = lint_verilog(generated.path, design.toplevel)
        if warnings:
            print("\n".join(warnings))
            raise UserError(f"verilator --lint-only -Wall reported {len(warnings)} warning(s) "
                            f"beyond the documented waivers in {vfile}")
        print("lint: clean (verilator --lint-only -Wall with the documented waivers)")
    return 0


# -- arith ---------------------------------------------------------------------------------------

def cmd_arith(args) -> int:
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.arith import stream as arith

    names = ["a", "b"] + (["c"] if args.op == "muladd" else [])
    if args.op != "muladd" and args.c:
        raise UserError(f"--c is only used by --op muladd, not --op {args.op}")
    if args.op == "muladd" and not args.c:
        raise UserError("--op muladd needs a third operand: --c C.npy")
    arrays = [load_float32(getattr(args, n), f"--{n}") for n in names]
    shape = arrays[0].shape
    for n, arr in zip(names, arrays):
        if arr.shape != shape:
            raise UserError(f"--{n} has shape {arr.shape} but --a has shape {shape}; "
                            "operands must have the same shape")
    bits = [golden.as_bits(a.ravel()) for a in arrays]
    t0 = time.perf_counter()
    sim = simulator(args)
    out = arith.simulate(args.op, *bits, simulator=sim, latency=args.latency,
                         progress=not args.quiet, waves=args.vcd)
    wall = time.perf_counter() - t0
    result = golden.as_float(out).reshape(shape)
    np.save(args.out, result)
    expected = arith.expected(args.op, *bits)
    mismatches = int(np.count_nonzero(out != expected))
    print(f"{args.op}: {out.size} results on {sim} in {wall:.2f} s -> {args.out}; "
          f"{mismatches} differ from numpy float32")
    return 1 if (args.check and mismatches) else 0


# -- synth ---------------------------------------------------------------------------------------

def cmd_synth(args) -> int:
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.synth import synthesize
    # lazy: the gateware, as above (the flow module builds Verilog)
    from moagcn.synth.flow import get_target
    if args.timeout is not None and args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g}: give a positive number of seconds")
    target = get_target(args.target)
    if target.family == "xcup":
        return _synth_xilinx(args, target)
    if args.units:
        raise UserError(f"--units assembles a U250 report (--target xcup-u250); {args.target} "
                        "runs place and route on the whole design")
    design, config = _design_and_config(args.design, args.param, args.preset)
    if not getattr(config, "simulate", True):
        raise UserError(f"this {args.design} configuration is for the models only and cannot "
                        f"be built for {args.target}; --target xcup-u250 assembles its resources "
                        "from synthesised units where the design has a unit list (hyscale)")
    say = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    report = synthesize(design, config, args.target, Path(args.out), seed=args.seed,
                        freq_mhz=args.freq, timeout=args.timeout, router=args.router,
                        goal_mhz=args.goal, progress=say, placer=args.placer)
    print(f"{design.name} on {args.target}: {report['luts']} LUTs, {report['ffs']} FFs, "
          f"{report['dsps']} DSPs, {report['brams']} BRAMs, Fmax {report['fmax_mhz']} MHz "
          f"(post-route) -> {Path(args.out) / 'report.json'}")
    path = report.get("critical_path")
    if path:
        print(f"longest path: {path['from']} -> {path['to']}, {path['ns']} ns "
              f"({path['logic_ns']} ns logic, {path['routing_ns']} ns routing)")
    slow = report.get("slow_endpoints")
    if slow:
        signals = ", ".join(f"{name} {n}" for name, n in list(slow["by_signal"].items())[:5])
        print(f"{slow['over']} of {slow['endpoints']} endpoints miss {slow['goal_mhz']:g} MHz "
              f"({slow['period_ns']} ns)" + (f"; most in: {signals}" if signals else ""))
    return 0


def _synth_xilinx(args, target) -> int:
    """``moagcn synth --target xcup-u250``: yosys resource counts (pre-route), of the whole
    design or, for a configuration that can only be modelled (or with ``--units``), assembled
    from its synthesised units (:mod:`moagcn.synth.assemble`)."""
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.synth.assemble import UNITS, assemble, breakdown
    # lazy: keeps the synthesis flows out of this module's import
    from moagcn.synth.xilinx import check_fit, summary_line, synthesize_xilinx
    design, config = _design_and_config(args.design, args.param, args.preset)
    whole = getattr(config, "simulate", True) and not args.units
    out = Path(args.out)
    if not whole and not getattr(config, "simulate", True) and design.name not in UNITS:
        raise UserError(f"this {args.design} configuration is for the models only and cannot "
                        f"be built, and only {', '.join(UNITS)} has a unit list to assemble "
                        "its resources from"
                        + ("; for the S-SpMM's area see `moagcn sspmm area`"
                           if args.design == "sspmm" else ""))
    if whole:
        report = synthesize_xilinx(design, config, target, out, timeout=args.timeout,
                                   check=False)
    else:
        report = assemble(design, config, target, out, timeout=args.timeout, check=False)
        for row in breakdown(report):
            scaled = f" (x {row['scale']:g}, built narrower)" if row["scale"] != 1 else ""
            print(f"  {row['count']:>6,} x {row['unit']:<16s} {row['luts']:>10,} LUTs "
                  f"{row['ffs']:>10,} FFs {row['dsps']:>6,} DSPs {row['bram36']:>8,.1f} BRAM36 "
                  f"{row['urams']:>6,} URAM{scaled}")
    print(f"{summary_line(report)} -> {out / 'report.json'}")
    # after the figures: a design that does not fit says which resources and by how much
    check_fit(report, target.name, out / "report.json")
    return 0


# -- bench ---------------------------------------------------------------------------------------

#: the benchmark module of each design that has one
BENCHES = {"sspmm": "moagcn.sim.benches.sspmm", "sspmm-model": "moagcn.sim.benches.validate_sspmm",
           "sspmm-weighted": "moagcn.sim.benches.sspmm_weighted",
           "hyscale": "moagcn.sim.benches.hyscale", "pyg": "moagcn.host.benches.pyg",
           "sddmm": "moagcn.sim.benches.sddmm",
           "hyscale-model-kernel": "moagcn.sim.benches.hyscale_kernel",
           "hyscale-overlap": "moagcn.sim.benches.hyscale_overlap",
           "hyscale-model": "moagcn.host.benches.hyscale_model",
           "deal-spmm": "moagcn.host.benches.deal", "hyscale-drm": "moagcn.host.benches.hyscale_train",
           "hyscale-recheck": "moagcn.host.benches.hyscale_recheck",
           "model-device": "moagcn.host.benches.model_device",
           "dense-device": "moagcn.host.benches.dense"}
#: what each benchmark measures, for ``moagcn bench --help``
BENCH_HELP = {
    "sspmm": "the S-SpMM on a power-law job: utilisation, mask skipping, model error, "
             "co-simulation speed",
    "sspmm-model": "the S-SpMM cycle model against the RTL over slices x lanes",
    "sspmm-weighted": "the weighted S-SpMM against the binary one on the same jobs "
                      "(utilisation, bit-exactness) and its cycle model against its RTL",
    "sddmm": "the SDDMM RTL against its cycle and golden models on held-out-style patterns, "
             "utilisation at F = 64",
    "hyscale": "the HyScale fused layer on the RTL against its models",
    "hyscale-model-kernel": "the HyScale kernels' cycle model on held-out shapes",
    "hyscale-overlap": "a tiled HyScale mini-batch with and without ping-pong load buffers",
    "hyscale-model": "the HyScale system model (Eq. 5-13) against measured training runs",
    "hyscale-drm": "HyScale's DRM and two-stage prefetching on this machine",
    "hyscale-recheck": "the HyScale system model re-checked during training: predicted and "
                       "measured epochs (--load busy-core)",
    "deal-spmm": "DEAL's SpMM, pipelined against sequential, on torch.distributed processes",
    "pyg": "moagcn's layers and training against PyTorch Geometric",
    "model-device": "the bit-exact model device against scipy, and in training against cpu",
    "dense-device": "full-graph training with the dense workers on CUDA and on the CPU",
}


#: the experiments that reproduce a paper's tables
EXPERIMENTS = {"supergcn": "moagcn.host.experiments.supergcn", "deal": "moagcn.host.experiments.deal",
               "vgnn": "moagcn.host.experiments.vgnn", "fig12": "moagcn.host.experiments.mixgcn_fig12",
               "fig10": "moagcn.host.experiments.mixgcn_fig10", "table4": "moagcn.host.experiments.mixgcn_table4"}


def _run_module(module_name: str, argv: list[str]) -> int:
    """Run a benchmark or experiment module's ``main(argv)``."""
    import importlib
    return importlib.import_module(module_name).main(argv) or 0


def cmd_experiment(args) -> int:
    return _run_module(EXPERIMENTS[args.experiment], args.experiment_args)


def cmd_bench(args) -> int:
    return _run_module(BENCHES[args.bench_design], args.bench_args)


# -- demo (the main job until training lands) ----------------------------------------------------

def cmd_demo(args) -> int:
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.arith import stream as arith

    sim = simulator(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print("moagcn demo: binary32 units generated from Amaranth, simulated on "
          f"{sim} through cocotb, checked bit for bit against numpy float32")
    report = {"simulator": sim, "operations": {}}
    sa, sb = golden.special_pairs()
    ra, rb = golden.random_pairs(args.pairs, seed=args.seed)
    a, b = np.concatenate([sa, ra]), np.concatenate([sb, rb])
    ok = True
    for op in ("add", "mul"):
        t0 = time.perf_counter()
        got = arith.simulate(op, a, b, simulator=sim, progress=False)
        wall = time.perf_counter() - t0
        mismatches = int(np.count_nonzero(got != arith.expected(op, a, b)))
        ok &= mismatches == 0
        report["operations"][op] = {"pairs": int(a.size), "mismatches": mismatches,
                                    "wall_s": round(wall, 2)}
        print(f"  fp32-{op}: {a.size} operand pairs ({sa.size} special-value pairs), "
              f"{mismatches} mismatches, {wall:.1f} s (first run includes the Verilator build)")
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {path}")
    return 0 if ok else 1


# -- parser --------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    p = argparse.ArgumentParser(
        prog="moagcn",
        description="Design, verify and co-simulate sparse GNN accelerators "
                    "(MixGCN S-SpMM, HyScale-GNN kernels) written in Amaranth HDL.")
    p.add_argument("--version", action="version", version=f"moagcn {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    hw = sub.add_parser("hw", help="list designs, generate Verilog")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, metavar="HW_COMMAND")
    lst = hw_sub.add_parser("list", help="list the designs")
    lst.set_defaults(func=cmd_hw_list)
    gen = hw_sub.add_parser("generate", help="write DIR/<design>.v and DIR/<design>.json")
    gen.add_argument("design", help="design name (see `moagcn hw list`)")
    gen.add_argument("--preset", metavar="NAME", help="start from a named configuration")
    gen.add_argument("--param", action="append", metavar="KEY=VALUE",
                     help="set a configuration parameter (repeatable)")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory")
    gen.add_argument("--lint", action="store_true",
                     help="also run verilator --lint-only -Wall (documented waivers only)")
    gen.set_defaults(func=cmd_hw_generate)

    ar = sub.add_parser("arith", help="stream float32 arrays through a simulated binary32 unit")
    ar.add_argument("--op", required=True, choices=["add", "mul", "muladd"],
                    help="the unit: a + b, a * b or a * b + c")
    ar.add_argument("--a", required=True, metavar="A.npy", help="first operand (float32)")
    ar.add_argument("--b", required=True, metavar="B.npy",
                    help="second operand (float32, the shape of --a)")
    ar.add_argument("--c", metavar="C.npy", help="addend of --op muladd")
    ar.add_argument("--out", required=True, metavar="OUT.npy", help="the results (float32)")
    add_simulator_arg(ar)
    ar.add_argument("--latency", type=int, help="pipeline latency (default: the unit's)")
    ar.add_argument("--check", action="store_true",
                    help="exit non-zero if any result differs from numpy float32")
    ar.add_argument("--vcd", metavar="FILE", help="write a waveform")
    ar.add_argument("--quiet", action="store_true", help="no progress bar")
    ar.set_defaults(func=cmd_arith)

    sy = sub.add_parser("synth", help="yosys + nextpnr: resources and post-route Fmax (ECP5, "
                                      "iCE40); yosys alone: U250 resources, pre-route")
    sy.add_argument("design", help="design name (see `moagcn hw list`)")
    sy.add_argument("--preset", metavar="NAME", help="start from a named configuration")
    sy.add_argument("--param", action="append", metavar="KEY=VALUE",
                    help="set a configuration parameter (repeatable)")
    sy.add_argument("--target", required=True,
                    help="the FPGA: ecp5-25k, ecp5-85k, ice40-hx8k (yosys + nextpnr, post-route) "
                         "or xcup-u250 (Alveo U250: yosys synth_xilinx only, resource counts "
                         "pre-route)")
    sy.add_argument("--out", required=True, metavar="DIR",
                    help="output directory (the Verilog, the tools' files and report.json)")
    sy.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    sy.add_argument("--freq", type=float, help="nextpnr target frequency in MHz")
    sy.add_argument("--router", metavar="NAME",
                    help="nextpnr's router: router1 (nextpnr's default) or router2")
    sy.add_argument("--placer", metavar="NAME",
                    help="nextpnr's placer: heap, static or sa (default: the design's own, "
                         "static for hyscale, heap for the others)")
    sy.add_argument("--quiet", action="store_true",
                    help="no progress lines (the tools' stage, on stderr, while they run)")
    sy.add_argument("--goal", type=float, metavar="MHZ",
                    help="also count the endpoints whose latest arrival misses this clock, by "
                         "block and by signal (nextpnr's detailed timing report; "
                         "report.json's slow_endpoints)")
    sy.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="stop a tool that runs longer (its log is kept); default: none")
    sy.add_argument("--units", action="store_true",
                    help="xcup-u250: assemble the report from the synthesised units times "
                         "their counts plus the memories mapped by capacity (what a "
                         "model-only configuration, such as hyscale's u250 preset, gets)")
    sy.set_defaults(func=cmd_synth)

    cli_graph.register(sub)
    cli_sspmm.register(sub)
    cli_sddmm.register(sub)
    cli_hyscale.register(sub)
    cli_host.register(sub)
    cli_infer.register(sub)
    cli_perfmodel.register(sub)

    be = sub.add_parser("bench", help="benchmark an accelerator (RTL against its models) or "
                                      "moagcn against PyG",
                        description="Run the benchmark NAME; the arguments after NAME are "
                                    "the benchmark's own (see moagcn bench NAME --help). "
                                    + "; ".join(f"{k}: {v}" for k, v in BENCH_HELP.items())
                                    + ".")
    be.add_argument("bench_design", metavar="NAME", choices=sorted(BENCHES),
                    help=", ".join(sorted(BENCHES)))
    be.add_argument("bench_args", nargs=argparse.REMAINDER, metavar="...",
                    help="the benchmark's own options (moagcn bench NAME --help)")
    ex = sub.add_parser("experiment", help="reproduce a paper's experiment (supergcn, deal, "
                                           "vgnn, fig10, fig12, table4)",
                        description="Run the experiment NAME (supergcn: SuperGCN's Table 5 "
                                    "communication volumes and Table 3 accuracy settings; deal: "
                                    "DEAL's all-node inference against CAGNET's GEMM, "
                                    "sequential SpMM and ego-network inference; vgnn: "
                                    "vGNN's uniform / spec-ratio / perf-model work splits of "
                                    "mixed fleets, makespan, device-time spread and halos; "
                                    "fig10 / table4: MixGCN's communication volume and "
                                    "workload balance against the worker count, and the "
                                    "pipeline speed-up of RCM reordering; fig12: the SPU "
                                    "against HyGCN, AWB-GCN and the CPU, with energy); the "
                                    "arguments after NAME are the experiment's own (see moagcn "
                                    "experiment NAME --help).")
    ex.add_argument("experiment", metavar="NAME", choices=sorted(EXPERIMENTS),
                    help=", ".join(sorted(EXPERIMENTS)))
    ex.add_argument("experiment_args", nargs=argparse.REMAINDER, metavar="...",
                    help="the experiment's own options (moagcn experiment NAME --help)")
    ex.set_defaults(func=cmd_experiment)
    be.set_defaults(func=cmd_bench)

    de = sub.add_parser("demo", help="end-to-end check of the binary32 units on a simulator")
    add_simulator_arg(de)
    de.add_argument("--pairs", type=int, default=20_000, help="random operand pairs per unit")
    de.add_argument("--seed", type=int, default=0, help="seed of the random pairs (default 0)")
    de.add_argument("--out", default="reports/demo", metavar="DIR",
                    help="folder of report.json (default reports/demo)")
    de.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``moagcn`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        print(f"moagcn: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:
        print(f"moagcn: simulation failed: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        # a file the command had checked went away or filled the disk: one line, no traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"moagcn: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("moagcn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
