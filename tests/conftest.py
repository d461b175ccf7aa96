"""Shared test fixtures and markers."""

import shutil

import pytest

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog not installed (apt-get install iverilog)")

# Property-based tests draw the same examples on every run (deterministic seeds everywhere): a
# failure reproduces, and the suite never passes or fails by the luck of the draw.
from hypothesis import settings  # noqa: E402

settings.register_profile("moagcn", derandomize=True, print_blob=True)
settings.load_profile("moagcn")
