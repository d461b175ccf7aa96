"""cocotb test module that runs one moagcn testbench inside a cocotb simulator.

:func:`moagcn.sim.rtl.backends.run` writes a job file (the testbench's module and name, its keyword
arguments, the ports) and points ``MOAGCN_JOB`` at it; this module starts the clock, resets the
design, runs the testbench with a :class:`~moagcn.sim.rtl.io.CocotbIO` and pickles the result (or
the traceback) next to the job.
"""

from __future__ import annotations

import os
import pickle
import time
import traceback

import cocotb
from cocotb.clock import Clock

from moagcn.sim.rtl.io import CocotbIO


def load_testbench(module: str, file: str | None, qualname: str):
    """Import a testbench function by module name, or from its file when not importable."""
    import importlib
    import importlib.util
    import sys
    try:
        mod = importlib.import_module(module)
    except ImportError:
        if not file:
            raise
        spec = importlib.util.spec_from_file_location(f"_moagcn_tb_{abs(hash(file))}", file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@cocotb.test()
async def moagcn_job(dut):
    """Run the job named by ``MOAGCN_JOB``."""
    job_path = os.environ["MOAGCN_JOB"]
    with open(job_path, "rb") as fh:
        job = pickle.load(fh)
    result: dict = {}
    try:
        tb = load_testbench(job["module"], job["file"], job["qualname"])
        Clock(dut.clk, 10, unit="ns").start()
        # Icarus starts inputs at X: drive every input before the first edge
        for name in job["inputs"]:
            getattr(dut, name).value = 0
        io = CocotbIO(dut, job["backend"], job["max_cycles"])
        await io.reset(2)
        io.cycle = 0
        start = time.perf_counter()
        value = await tb(io, **job["kwargs"])
        result = {"value": value, "cycles": io.cycle, "wall_s": time.perf_counter() - start}
    except BaseException as exc:  # the parent re-raises with this traceback
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    with open(job["result"], "wb") as fh:
        pickle.dump(result, fh)
    if "error" in result:
        raise AssertionError(result["error"])
