"""Unit tests of the S-SpMM blocks on the Amaranth simulator."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from moagcn.hw.common.ram import Ram
from moagcn.hw.sspmm.mask_decoder import MaskDecoder


@pytest.mark.parametrize("width,lanes", [(16, 4), (13, 8), (64, 8)])
def test_mask_decoder_selects_consecutive_set_bits(width, lanes):
    """Fed its own ``rest`` job after job, the decoder gives out the set bits in ascending
    order, ``lanes`` at a time, each exactly once."""
    dut = MaskDecoder(width, lanes)
    rng = np.random.default_rng(width)
    masks = [0, (1 << width) - 1, 1 << (width - 1)]
    masks += [int(x) for x in rng.integers(0, 1 << min(width, 62), 60)]
    masks += [int(x) << (width - 62) for x in rng.integers(0, 1 << 62, 10)] if width > 62 else []
    checked = []

    async def bench(ctx):
        for mask in masks:
            positions = [f for f in range(width) if mask >> f & 1]
            rest = mask
            for base in range(0, min(len(positions) + lanes, width + 1), lanes):
                ctx.set(dut.mask, rest)
                for k in range(lanes):
                    want = base + k < len(positions)
                    assert ((ctx.get(dut.valid) >> k) & 1) == want
                    if want:
                        assert ctx.get(dut.sel(k)) == positions[base + k]
                rest = ctx.get(dut.rest)
                assert rest == sum(1 << f for f in positions[base + lanes:])
            checked.append(mask)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == len(masks)


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
            a1, am = ctx.get(dut.ptr_addr), ctx.get(dut.mask_addr)
            take = ctx.get(dut.job_valid) and cycle % take_every == 0
            ctx.set(dut.job_taken, int(take))
            if take:
                lanes = cfg.group_lanes
                valid = ctx.get(dut.job.lane_valid)
                jobs.append((ctx.get(dut.job.row), ctx.get(dut.job.ptr), ctx.get(dut.job.deg),
                             tuple(ctx.get(dut.job.sel[k]) for k in range(lanes)
                                   if valid >> k & 1)))
            await ctx.tick()
            ctx.set(dut.ptr_data, int(indptr[min(a1, n)]))
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


async def _group_bench(io, cfg, jobs, rows, seed, limit):
    """Drive one AggregationGroup as the fetcher would: bind each job to a context, then send
    its neighbours' rows (one packet per cycle at most, with gaps) while the context has room,
    and bind the context's next job once its last row is in."""
    from moagcn.hw.sspmm.layouts import job_layout, packet_layout

    rng = np.random.default_rng(seed)
    L, W = cfg.adder_latency, cfg.group_lanes
    jl, pl = job_layout(cfg), packet_layout(cfg, L)
    queue = {i: [j for j in range(len(jobs)) if j % L == i] for i in range(L)}
    current = {i: None for i in range(L)}       # (job, neighbours sent)
    log = {"write": [], "released": [], "bubbles": 0, "turns": 0, "end": None}
    io.set("run", 1)
    for cycle in range(limit):
        io.set("bind_valid", 0)
        io.set("reserve", 0)
        io.set("leaf_0", 0)
        # bind: one context per cycle whose fetch side is free (its rows come later: the
        # fetcher needs a few cycles from a bind to the first row)
        bound_now = None
        for i in range(L):
            if current[i] is None and queue[i]:
                j = queue[i].pop(0)
                v, chunk, sel, _ = jobs[j]
                io.set("bind_valid", 1)
                io.set("bind_slot", i)
                io.set("bind_job", jl.const({
                    "row": v, "chunk": chunk, "sel": list(sel) + [0] * (W - len(sel)),
                    "lane_valid": (1 << len(sel)) - 1}).as_value().value)
                current[i] = [j, 0]
                bound_now = i
                break
        # send: one row to one context with room, sometimes none (the contexts then bubble)
        space = await io.get("space")
        ready = [i for i in range(L) if i != bound_now and current[i] is not None
                 and current[i][1] < len(jobs[current[i][0]][3]) and space >> i & 1]
        if ready and rng.random() < 0.7:
            i = int(rng.choice(ready))
            j, k = current[i]
            nbrs = jobs[j][3]
            io.set("leaf_0", pl.const({"valid": 1, "first": int(k == 0),
                                       "last": int(k == len(nbrs) - 1), "dest": 1 << i,
                                       "words": rows[nbrs[k]]}).as_value().value)
            io.set("reserve", 1 << i)
            current[i][1] += 1
        if await io.get("wr_en"):
            log["write"].append((cycle, await io.get("wr_addr"), await io.get("wr_chunk"),
                                 await io.get("wr_data")))
        released = await io.get("released")
        log["bubbles"] += await io.get("bubble")
        log["turns"] += await io.get("turn")
        busy = await io.get("busy")
        await io.tick()
        for i in range(L):
            if released >> i & 1:
                log["released"].append((i, current[i][0]))
                current[i] = None
        if not busy and all(c is None for c in current.values()) and not any(queue.values()):
            log["end"] = cycle
            break
    return log


def test_aggregation_group_sums_rows_in_order_through_bubbles_bit_exact():
    """AggregationGroup alone: every job's lanes are float32 sequential sums from +0 over its
    neighbours in the order their rows arrived, written as the job's compressed chunk; rows
    arriving late make the contexts bubble (add +0), which leaves every sum unchanged;
    the last row of a job releases its context."""
    from moagcn.hw.designs import Design
    from moagcn.hw.sspmm import SSpmmConfig, preset
    from moagcn.hw.sspmm.group import AggregationGroup
    from moagcn.sim import run

    cfg = preset("tiny")                     # W = 2 lanes, L = 3 contexts, F = 16
    W, F = cfg.group_lanes, cfg.max_feature_width
    n = 6
    rng = np.random.default_rng(12)
    # magnitudes from 1e-4 to 1e4: the sums depend on the order of the additions
    H = (rng.standard_normal((n, F)) * 10.0 ** rng.integers(-4, 5, (n, F))).astype(np.float32)
    H[:, 15] = -0.0                          # a sum of -0 from +0 is +0
    H[2, 3] = np.float32(3e38)               # overflows to +inf in row 4's feature 3
    H[4, 3] = np.float32(3e38)
    H[1, 9] = np.float32(1e-45)              # a subnormal through bubbles
    neighbours = {0: [3, 1, 4, 1, 5, 2, 0], 1: [2], 2: [5, 5, 0, 3],
                  4: [1, 0, 2, 3, 4, 5, 1, 2, 4], 5: [1]}
    selections = {0: [(0, 7), (15,)], 1: [(2, 3)], 2: [(1, 9), (14,)], 4: [(4, 5), (3,), (6, 10)],
                  5: [(9,)]}
    jobs = [(v, chunk, sel, neighbours[v]) for v, sels in selections.items()
            for chunk, sel in enumerate(sels)]
    bits = H.view(np.uint32)
    rows = [sum(int(bits[u, f]) << (32 * f) for f in range(F)) for u in range(n)]

    design = Design("aggregation-group", SSpmmConfig, AggregationGroup, "one aggregation group")
    log = run(design, cfg, _group_bench, "pysim", cfg=cfg, jobs=jobs, rows=rows, seed=3,
              limit=600, max_cycles=700).value

    assert log["end"] is not None
    assert sorted(j for _, j in log["released"]) == list(range(len(jobs)))
    assert log["turns"] == sum(len(nb) for *_, nb in jobs)
    assert log["bubbles"] > 0                # rows came late: contexts held their sums
    assert len(log["write"]) == len(jobs)
    by_place = {(addr, chunk): data for _, addr, chunk, data in log["write"]}
    sums = {}
    for v, chunk, sel, nbrs in jobs:
        data = by_place[v, chunk]
        assert data >> (32 * len(sel)) == 0  # idle lanes write +0
        for k, f in enumerate(sel):
            acc = np.float32(0.0)
            with np.errstate(over="ignore"):
                for u in nbrs:
                    acc = np.float32(acc + H[u, f])
            got = (data >> (32 * k)) & 0xFFFF_FFFF
            assert got == int(np.float32(acc).view(np.uint32)), (v, f, hex(got), acc)
            sums[v, f] = got
    # the edge cases really happened: -0 summed from +0, an overflow to +inf, a subnormal,
    # and sums that ascending column order would have rounded differently
    assert sums[0, 15] == 0 and sums[4, 3] == 0x7F80_0000 and sums[5, 9] == 1
    reordered = 0
    for (v, f), got in sums.items():
        acc = np.float32(0.0)
        with np.errstate(over="ignore"):
            for u in sorted(neighbours[v]):
                acc = np.float32(acc + H[u, f])
        reordered += got != int(acc.view(np.uint32))
    assert reordered >= 2


@pytest.mark.parametrize("groups,radix,rows", [(4, 2, 2), (4, 4, 1), (2, 2, 1), (1, 2, 1)])
def test_distribution_tree_multicasts_to_every_destination_and_nowhere_else(groups, radix, rows):
    """Each packet reaches exactly the groups holding one of its destination contexts, with
    that group's slice of the mask, ``depth`` cycles later; several root links carry packets
    with disjoint destinations side by side."""
    from moagcn.hw.sspmm import preset
    from moagcn.hw.sspmm.layouts import packet_layout
    from moagcn.hw.sspmm.tree import DistributionTree, tree_depth

    cfg = preset("tiny", lanes=4 * groups // 2 if groups > 1 else 4, groups=groups,
                 tree_radix=radix, fetch_rows=rows)
    dut = DistributionTree(cfg)
    L, n = cfg.adder_latency, cfg.contexts
    depth = tree_depth(groups, radix)
    layout = packet_layout(cfg, n)
    rng = np.random.default_rng(groups * 10 + radix + rows)
    sent, seen = [], []

    async def bench(ctx):
        for cycle in range(80):
            owners = rng.permutation(n)     # disjoint destinations across the root links
            for j in range(rows):
                dest = 0
                if rng.random() < 0.8:
                    for c in owners[j::rows][:rng.integers(1, 4)]:
                        dest |= 1 << int(c)
                words = int(rng.integers(0, 1 << 62))
                pkt = {"valid": int(dest != 0), "first": cycle % 2, "last": cycle % 3 == 0,
                       "dest": dest, "words": words}
                ctx.set(dut.root(j), layout.const(pkt))
                if dest:
                    sent.append((cycle, j, dest, words))
            await ctx.tick()
            for g in range(groups):
                for j in range(rows):
                    leaf = dut.leaf(g, j)
                    if ctx.get(leaf.valid):
                        seen.append((cycle + 1, g, j, ctx.get(leaf.dest), ctx.get(leaf.words)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    expected = []
    for cycle, j, dest, words in sent:
        for g in range(groups):
            part = dest >> (g * L) & ((1 << L) - 1)
            if part:
                expected.append((cycle + depth, g, j, part, words))
    horizon = 80
    assert sorted(e for e in expected if e[0] <= horizon) == sorted(seen)
    assert any(bin(d).count("1") > 1 for _, _, d, _ in sent)      # real multicasts happened
