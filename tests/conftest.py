"""Shared test fixtures and markers."""

import os
import shutil

import pytest

# the lean harness's model at -O1 for tests: a third faster to build, about as fast to run
# (benchmarks build theirs at -O3); see moagcn.sim.rtl.lean.CFLAGS_ENV
os.environ.setdefault("MOAGCN_LEAN_CFLAGS", "-O1")

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog not installed (apt-get install iverilog)")

# Property-based tests draw the same examples on every run (deterministic seeds everywhere): a
# failure reproduces, and the suite never passes or fails by the luck of the draw.
from hypothesis import settings  # noqa: E402

settings.register_profile("moagcn", derandomize=True, print_blob=True)
settings.load_profile("moagcn")
