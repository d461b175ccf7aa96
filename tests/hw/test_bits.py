"""Bit helpers against Python references, exhaustively on small widths (Amaranth simulator)."""

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from moagcn.hw.common.bits import (above_onehot, leading_zeros, limit_mask, lowest_onehot,
                                   shift_right_sticky, trailing_zeros)


class _Probe(wiring.Component):
    def __init__(self, width, amount_width):
        self._width = width
        super().__init__({"value": In(width), "amount": In(amount_width),
                          "lz": Out(8), "tz": Out(8), "shifted": Out(width), "lost": Out(1),
                          "mask": Out(width), "low": Out(width), "above": Out(width)})

    def elaborate(self, platform):
        m = Module()
        shifted, lost = shift_right_sticky(m, self.value, self.amount)
        m.d.comb += [self.lz.eq(leading_zeros(m, self.value)),
                     self.tz.eq(trailing_zeros(m, self.value)),
                     self.shifted.eq(shifted), self.lost.eq(lost),
                     self.mask.eq(limit_mask(self.amount, self._width)),
                     self.low.eq(lowest_onehot(m, self.value)),
                     self.above.eq(above_onehot(m, self.value))]
        return m


def _ref_lz(v, w):
    return w - v.bit_length()


def _ref_tz(v, w):
    return w if v == 0 else (v & -v).bit_length() - 1


@pytest.mark.parametrize("width,amount_width", [(5, 3), (7, 4), (8, 2)])
def test_bit_helpers_exhaustive(width, amount_width):
    dut = _Probe(width, amount_width)
    sim = Simulator(dut)
    checked = []

    async def bench(ctx):
        for v in range(1 << width):
            for a in range(1 << amount_width):
                ctx.set(dut.value, v)
                ctx.set(dut.amount, a)
                assert ctx.get(dut.lz) == _ref_lz(v, width)
                assert ctx.get(dut.tz) == _ref_tz(v, width)
                assert ctx.get(dut.shifted) == v >> a
                assert ctx.get(dut.lost) == int(v & ((1 << a) - 1) != 0)
                expect_mask = (1 << (width - 1 - a)) if a < width else 0
                assert ctx.get(dut.mask) == expect_mask
                assert ctx.get(dut.low) == v & -v
                # the bits above the lowest set bit (above a one-hot value's bit)
                low = v & -v
                above = ~((low << 1) - 1) & ((1 << width) - 1) if v else 0
                assert ctx.get(dut.above) == above
                checked.append(1)

    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == (1 << width) * (1 << amount_width)
