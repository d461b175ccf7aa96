"""The lane adders' speed probe (``moagcn.sim.rtl.lean.adder_loop_speed``): the design's LaneAdders
in Verilator, checked against float32 sums in numpy (no code shared with the RTL)."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.sim.rtl.lean import ADDER_LOOP_SEED, adder_loop_speed

pytestmark = pytest.mark.xdist_group("verilator-lane-adders")


def _xorshift32(x: int) -> int:
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def _expected_checksum(lanes: int, latency: int, cycles: int) -> int:
    """The loop as the wrapper drives it: before step j the register holds x_j (x_0 the
    seed) and the adders give o_j; step j adds lane k's operand (from x_j ^ 0x9E3779B9 k) to
    o_j, or to +0 where restarted (every lane in the first ``latency + 1`` steps), and the sum
    leaves ``latency`` steps later. The checksum is the XOR over steps latency + 1 .. cycles
    of the XOR of the lanes' sums."""
    o = np.zeros((cycles + latency + 1, lanes), dtype=np.float32)
    x, acc = ADDER_LOOP_SEED, 0
    for j in range(cycles):
        for k in range(lanes):
            z = x ^ ((0x9E3779B9 * k) & 0xFFFFFFFF)
            bits = ((z >> 31) << 31) | ((120 + (z & 0xF)) << 23) | ((z >> 4) & 0x7FFFFF)
            y = np.array([bits], dtype=np.uint32).view(np.float32)[0]
            restart = j <= latency or (z >> 28) & (z >> 29) & 1
            a = np.float32(0.0) if restart else o[j, k]
            o[j + latency, k] = np.float32(a + y)
        x = _xorshift32(x)
    for j in range(latency + 1, cycles + 1):
        w = 0
        for v in o[j].view(np.uint32):
            w ^= int(v)
        acc ^= w
    return acc


@pytest.mark.parametrize("lanes,latency", [
    (3, 3), pytest.param(2, 7, marks=pytest.mark.slow)])      # each a build of its own
def test_lane_adders_in_verilator_sum_as_float32(lanes, latency):
    cycles = 400
    r = adder_loop_speed(lanes, latency, cycles)
    assert r["cycles"] == cycles and r["wall_s"] > 0 and r["cycles_per_s"] > 0
    assert r["checksum"] == _expected_checksum(lanes, latency, cycles)


def test_adder_loop_rejects_an_empty_loop():
    with pytest.raises(UserError, match="lanes 0"):
        adder_loop_speed(0, 3)
