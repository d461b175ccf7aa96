"""Shared test fixtures and markers."""

import os
import shutil
import subprocess

import pytest

# the lean harness's model at -O1 for tests: a third faster to build, about as fast to run
# (benchmarks build theirs at -O3); see moagcn.sim.rtl.lean.CFLAGS_ENV
os.environ.setdefault("MOAGCN_LEAN_CFLAGS", "-O1")

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog not installed (apt-get install iverilog)")


def run_icarus(work, files: dict, defines=(), timeout: float = 60):
    """Write ``files`` (name -> Verilog) into ``work``, compile them with Icarus (``-D`` each
    of ``defines``) and run the result; fails the test if the compile fails. Returns the run's
    ``CompletedProcess`` (its ``stdout``, ``stderr``, ``returncode``)."""
    for name, text in files.items():
        (work / name).write_text(text)
    build = subprocess.run(["iverilog", "-g2012", *(f"-D{d}" for d in defines), "-o",
                            str(work / "tb.vvp"), *(str(work / name) for name in files)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    return subprocess.run(["vvp", "-n", str(work / "tb.vvp")], capture_output=True, text=True,
                          timeout=timeout)

# Property-based tests draw the same examples on every run (deterministic seeds everywhere): a
# failure reproduces, and the suite never passes or fails by the luck of the draw.
from hypothesis import settings  # noqa: E402

settings.register_profile("moagcn", derandomize=True, print_blob=True)
settings.load_profile("moagcn")
