"""Shared test fixtures and markers."""

import shutil

import pytest

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None,
                                  reason="Icarus Verilog not installed (apt-get install iverilog)")
