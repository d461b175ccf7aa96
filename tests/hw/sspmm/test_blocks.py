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


def _scheduler_bench(indptr, masks, n_features, take_every=1):
    """Drive a JobScheduler with memories emulated in the testbench; return the offered jobs."""
    from amaranth.hdl import Module

    from moagcn.hw.sspmm import preset
    from moagcn.hw.sspmm.scheduler import JobScheduler

    cfg = preset("tiny")
    dut = JobScheduler(cfg)
    n = len(indptr) - 1
    jobs, flags = [], {}

    async def bench(ctx):
        ctx.set(dut.n_rows, n)
        ctx.set(dut.n_features, n_features)
        ctx.set(dut.n_edges, int(indptr[-1]))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for cycle in range(20 * n + 50):
            # 1-cycle read latency: data for the addresses presented before this edge
            a0, a1, am = (ctx.get(dut.ptr0_addr), ctx.get(dut.ptr1_addr), ctx.get(dut.mask_addr))
            take = ctx.get(dut.job_valid) and cycle % take_every == 0
            ctx.set(dut.job_taken, int(take))
            if take:
                lanes = cfg.group_lanes
                valid = ctx.get(dut.job.lane_valid)
                jobs.append((ctx.get(dut.job.row), ctx.get(dut.job.ptr), ctx.get(dut.job.deg),
                             tuple(ctx.get(dut.job.sel[k]) for k in range(lanes)
                                   if valid >> k & 1)))
            await ctx.tick()
            ctx.set(dut.ptr0_data, int(indptr[min(a0, n)]))
            ctx.set(dut.ptr1_data, int(indptr[min(a1, n)]))
            ctx.set(dut.mask_data, int(masks[min(am, n - 1)]))
            if ctx.get(dut.done) and cycle > 3:
                break
        flags["err"] = ctx.get(dut.err_indptr)
        flags["done"] = ctx.get(dut.done)

    m = Module()
    m.submodules.dut = dut
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return cfg, jobs, flags


@pytest.mark.parametrize("take_every", [1, 3])
def test_job_scheduler_emits_every_chunk_of_every_row_with_work(take_every):
    rng = np.random.default_rng(5)
    n, F = 40, 11
    deg = rng.integers(0, 4, n)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    masks = [int(x) for x in rng.integers(0, 1 << 16, n)]   # bits >= F must be ignored
    masks[2] = 0
    cfg, jobs, flags = _scheduler_bench(indptr, masks, F, take_every)
    expected = []
    for v in range(n):
        feats = [f for f in range(F) if masks[v] >> f & 1]
        if deg[v] == 0 or not feats:
            continue
        w = cfg.group_lanes
        for c in range(0, len(feats), w):
            expected.append((v, int(indptr[v]), int(deg[v]), tuple(feats[c:c + w])))
    assert jobs == expected
    assert flags == {"err": 0, "done": 1}


def test_job_scheduler_flags_decreasing_row_pointers():
    indptr = np.array([0, 2, 1, 3])
    _, _, flags = _scheduler_bench(indptr, [0xF, 0xF, 0xF], 4)
    assert flags["err"] == 1
