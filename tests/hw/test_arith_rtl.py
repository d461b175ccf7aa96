"""Binary32 units as generated Verilog, through cocotb on Verilator (and Icarus when present).

Default suite: every special-value pair plus 20,000 random pairs per operation on Verilator.
`pytest -m slow`: 1,000,000 random pairs per operation.
"""

import numpy as np
import pytest

from moagcn.sim.arith import stream as arith

from ..conftest import needs_icarus
from .arith_cases import assert_bit_exact, pairs, triples

pytestmark = pytest.mark.xdist_group("verilator-arith")


@pytest.mark.parametrize("op", ["add", "mul"])
def test_verilator_20k_pairs(op):
    a, b = pairs(20_000, seed=11)
    assert a.size >= 20_000
    got = arith.simulate(op, a, b, simulator="verilator")
    assert_bit_exact(op, (a, b), got, arith.expected(op, a, b))


def test_verilator_muladd():
    a, b, c = triples(5_000, seed=12)
    got = arith.simulate("muladd", a, b, c, simulator="verilator")
    assert_bit_exact("muladd", (a, b, c), got, arith.expected("muladd", a, b, c))


@pytest.mark.slow            # a cocotb build of its own (latency 2): make test-slow
def test_verilator_idle_cycles_and_short_latency():
    a, b = pairs(3_000, seed=13)
    got = arith.simulate("add", a, b, simulator="verilator", latency=2, idle_every=4)
    assert_bit_exact("add", (a, b), got, arith.expected("add", a, b))


@needs_icarus
@pytest.mark.parametrize("op", ["add", "mul"])
def test_icarus_subset(op):
    a, b = pairs(1_000, seed=14)
    got = arith.simulate(op, a, b, simulator="icarus")
    assert_bit_exact(op, (a, b), got, arith.expected(op, a, b))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mul"])
def test_verilator_one_million_pairs(op):
    from moagcn.sim.arith import golden
    a, b = golden.random_pairs(1_000_000, seed=2026)
    got = arith.simulate(op, a, b, simulator="verilator")
    expected = arith.expected(op, a, b)
    assert_bit_exact(op, (a, b), got, expected)
    print(f"\n{op}: {a.size} random pairs bit-exact on Verilator "
          f"({int(np.count_nonzero(np.isnan(golden.as_float(expected))))} NaN results)")
