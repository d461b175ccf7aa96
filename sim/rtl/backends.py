"""Run a testbench (or a host job written as one) against a design on any simulator.

>>> from moagcn.core.registry import gateware
>>> result = run(gateware("fp32-add"), None, my_testbench, simulator="verilator", n=100)

Backends:

- ``pysim``: the Amaranth simulator, in this process (no Verilog involved);
- ``verilator``: cocotb + Verilator on the generated Verilog (build cached);
- ``icarus``: cocotb + Icarus Verilog on the generated Verilog.

On the cocotb backends the testbench runs in the simulator's process: it must be a module-level
``async def`` (importable by module name, or from its file) and its keyword arguments and return
value must pickle.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from moagcn.core.names import SIMULATORS
from moagcn.errors import SimulationError, UserError

from moagcn.sim.rtl.build import (ClockedTop, build_simulator, cache_dir, component_ports, generate_verilog,
                    verilator_env)
from moagcn.sim.rtl.io import PysimIO



@dataclass
class RunResult:
    """What a testbench returned, with the clock cycles it ran and its wall time."""

    value: Any
    cycles: int
    wall_s: float
    simulator: str

    @property
    def cycles_per_s(self) -> float:
        """Simulated cycles per wall-clock second of the testbench (set-up excluded)."""
        return self.cycles / self.wall_s if self.wall_s > 0 else float("inf")


def run(design, config, testbench: Callable, simulator: str = "verilator", *,
        waves: str | os.PathLike | None = None, max_cycles: int | None = None,
        **kwargs) -> RunResult:
    """Run ``testbench(io, **kwargs)`` against ``design`` at ``config`` on ``simulator``.

    Parameters
    ----------
    design : moagcn.core.registry.Gateware
    config : dataclass or None
        Design configuration (``None``: the design's defaults).
    testbench : async callable
        ``async def tb(io: SimIO, **kwargs) -> value``.
    simulator : str
        One of :data:`moagcn.core.names.SIMULATORS`.
    waves : path or None
        Write a waveform there (VCD for pysim and Verilator, FST for Icarus).
    max_cycles : int or None
        Fail with :class:`~moagcn.sim.rtl.io.CycleLimitExceeded` when the testbench runs longer.
    """
    if simulator not in SIMULATORS:
        raise UserError(f"unknown simulator {simulator!r}; choose one of {', '.join(SIMULATORS)}")
    config = design.default_config() if config is None else config
    if simulator == "pysim":
        return _run_pysim(design, config, testbench, waves, max_cycles, kwargs)
    return _run_cocotb(design, config, testbench, simulator, waves, max_cycles, kwargs)


def _run_pysim(design, config, testbench, waves, max_cycles, kwargs) -> RunResult:
    from amaranth.sim import Simulator

    dut = design.build(config)
    ports = component_ports(dut)
    top = ClockedTop(dut)
    sim = Simulator(top)
    sim.add_clock(10e-9)
    box: dict = {}

    async def bench(ctx):
        io = PysimIO(ctx, ports, top.domain.rst, max_cycles)
        start = time.perf_counter()
        box["value"] = await testbench(io, **kwargs)
        box["cycles"] = io.cycle
        box["wall_s"] = time.perf_counter() - start

    sim.add_testbench(bench)
    with (sim.write_vcd(str(waves)) if waves else contextlib.nullcontext()):
        sim.run()
    return RunResult(box["value"], box["cycles"], box["wall_s"], "pysim")


def _testbench_location(testbench) -> tuple[str, str | None, str]:
    module = getattr(testbench, "__module__", None)
    qualname = getattr(testbench, "__qualname__", "")
    if module is None or "<locals>" in qualname or "<lambda>" in qualname:
        raise TypeError(f"testbench {testbench!r} must be a module-level async function to run "
                        "in a cocotb simulator")
    try:
        file = inspect.getsourcefile(testbench)
    except TypeError:
        file = None
    return module, file, qualname


def _run_cocotb(design, config, testbench, simulator, waves, max_cycles, kwargs) -> RunResult:
    from cocotb_tools.runner import get_runner

    module, file, qualname = _testbench_location(testbench)
    verilog = generate_verilog(design, config)
    build_dir = build_simulator(simulator, verilog, waves=bool(waves))

    runs = cache_dir() / "runs"
    runs.mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{verilog.toplevel}-", dir=runs))
    job_file = run_dir / "job.pkl"
    result_file = run_dir / "result.pkl"
    with open(job_file, "wb") as fh:
        pickle.dump({"module": module, "file": file, "qualname": qualname, "kwargs": kwargs,
                     "inputs": [p.name for p in verilog.inputs], "backend": simulator,
                     "max_cycles": max_cycles, "result": str(result_file)}, fh)

    runner = get_runner(simulator)
    log = run_dir / "sim.log"
    env_before = dict(os.environ)
    if simulator == "verilator":
        os.environ.update(verilator_env())
    # the runner inspects PYTEST_CURRENT_TEST to decide how to report; we read our own result
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        runner.test(test_module="moagcn.sim.rtl.cocotb_entry", hdl_toplevel=verilog.toplevel,
                    hdl_toplevel_lang="verilog", build_dir=build_dir, test_dir=run_dir,
                    extra_env={"MOAGCN_JOB": str(job_file)}, waves=bool(waves),
                    timescale=TIMESCALE_IF_ICARUS.get(simulator), log_file=log)
    except (SystemExit, RuntimeError):
        # a failing testbench, a crashed simulator or one whose loader failed (the runner raises
        # RuntimeError on a non-zero exit status): judged from the result file below, whose
        # absence reports the log's tail
        pass
    finally:
        os.environ.clear()
        os.environ.update(env_before)

    if not result_file.exists():
        tail = log.read_text()[-4000:] if log.exists() else "(no log)"
        raise SimulationError(f"{simulator} simulation of {verilog.toplevel} produced no result; "
                              f"log {log}:\n{tail}")
    with open(result_file, "rb") as fh:
        result = pickle.load(fh)
    if "error" in result:
        raise SimulationError(f"testbench {qualname} failed on {simulator} "
                              f"(log {log}):\n{result['traceback']}")
    if waves:
        produced = [p for p in run_dir.iterdir() if p.suffix in (".vcd", ".fst")]
        produced += [p for p in build_dir.iterdir() if p.suffix in (".vcd", ".fst")]
        if produced:
            shutil.copyfile(produced[0], waves)
    shutil.rmtree(run_dir, ignore_errors=True)
    return RunResult(result["value"], result["cycles"], result["wall_s"], simulator)


# Icarus needs the timescale at test time to write its command file; Verilator takes it at build.
TIMESCALE_IF_ICARUS = {"icarus": ("1ns", "1ps")}
