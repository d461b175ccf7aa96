"""Unit tests of the S-SpMM blocks on the Amaranth simulator."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from moagcn.hw.common.ram import Ram
from moagcn.hw.sspmm.mask_decoder import MaskDecoder


@pytest.mark.parametrize("width,lanes", [(16, 4), (13, 8), (64, 8)])
def test_mask_decoder_selects_consecutive_set_bits(width, lanes):
    dut = MaskDecoder(width, lanes)
    rng = np.random.default_rng(width)
    masks = [0, (1 << width) - 1] + [int(x) for x in rng.integers(0, 1 << min(width, 62), 60)]
    checked = []

    async def bench(ctx):
        for mask in masks:
            positions = [f for f in range(width) if mask >> f & 1]
            for base in range(0, min(len(positions) + lanes, width + 1), lanes):
                ctx.set(dut.mask, mask)
                ctx.set(dut.base, base)
                for k in range(lanes):
                    want = base + k < len(positions)
                    assert ((ctx.get(dut.valid) >> k) & 1) == want
                    if want:
                        assert ctx.get(dut.sel(k)) == positions[base + k]
                checked.append(mask)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert len(checked) >= len(masks)


def test_ram_reads_old_data_and_honours_word_enables():
    dut = Ram(64, 8, read_ports=2, write_ports=2, granularity=32)
    log = []

    async def bench(ctx):
        (wa0, wd0, we0), (wa1, wd1, we1) = dut.write(0), dut.write(1)
        (ra0, rd0), (ra1, rd1) = dut.read(0), dut.read(1)
        ctx.set(wa0, 3)
        ctx.set(wd0, 0x1111_1111_2222_2222)
        ctx.set(we0, 0b11)
        await ctx.tick()
        # port 1 writes only the high word of 3 while port 0 writes the low word of 5
        ctx.set(wa1, 3)
        ctx.set(wd1, 0xAAAA_AAAA_0000_0000)
        ctx.set(we1, 0b10)
        ctx.set(wa0, 5)
        ctx.set(wd0, 0x0000_0000_BBBB_BBBB)
        ctx.set(we0, 0b01)
        ctx.set(ra0, 3)
        await ctx.tick()
        log.append(ctx.get(rd0))          # old contents of 3 (read during write)
        ctx.set(we0, 0)
        ctx.set(we1, 0)
        ctx.set(ra1, 5)
        await ctx.tick()
        log.append(ctx.get(rd0))
        log.append(ctx.get(rd1) & 0xFFFF_FFFF)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert log == [0x1111_1111_2222_2222, 0xAAAA_AAAA_2222_2222, 0xBBBB_BBBB]
