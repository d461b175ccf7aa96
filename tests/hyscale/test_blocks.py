"""Amaranth-simulator tests of the HyScale blocks alone: G-PE, S-PE, update kernel."""

from dataclasses import replace

import numpy as np
import pytest
from amaranth.sim import Simulator

from moagcn.hw.hyscale import preset
from moagcn.hw.hyscale.dispatch import EdgeDispatcher
from moagcn.hw.hyscale.gather import GatherPE
from moagcn.hw.hyscale.protocol import EDGE_WORD, field_offsets
from moagcn.hw.hyscale.scatter import ScatterPE
from moagcn.hw.hyscale.update import UpdateKernel
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import add, as_bits, mul


def _bits(x) -> int:
    return int(np.float32(x).view(np.uint32))


def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


#: the aggregated rows' read port: data two cycles after the address
ACT_LATENCY = 2


async def _read_port(ctx, set_addr, data, addrs):
    """Read ``addrs`` through a read port of ``ACT_LATENCY`` cycles, one address a cycle
    (back to back: a port one cycle faster or slower returns the wrong words)."""
    words = []
    for k in range(len(addrs) + ACT_LATENCY - 1):
        if k < len(addrs):
            set_addr(addrs[k])
        await ctx.tick()
        if k >= ACT_LATENCY - 1:
            words.append(ctx.get(data))
    return words


def test_gather_pe_accumulates_each_element_in_arrival_order():
    cfg = preset("tiny")
    dut = GatherPE(cfg)
    rng = np.random.default_rng(0)
    F = cfg.max_feature_width
    # edges into bank rows 0..2 with F elements each; consecutive edges into one row are a
    # gather slot apart, as the kernel guarantees
    rows = [0, 1, 0, 2, 0, 1]
    values = rng.standard_normal((len(rows), F)).astype(np.float32)
    values[1, 3] = -0.0
    values[3, 3] = -0.0          # row 2's only edge: +0 + -0 = +0 (from -0 it would stay -0)
    expect = {}
    for r, vals in zip(rows, values):
        expect[r] = add(expect.get(r, np.zeros(F, np.uint32)), as_bits(vals))
    got = {}

    async def bench(ctx):
        seen = set()
        for r, vals in zip(rows, values):
            for j in range(max(F, cfg.gather_slot)):
                live = j < F
                ctx.set(dut.products.valid, live)
                if live:
                    ctx.set(dut.products.addr, r * F + j)
                    ctx.set(dut.products.first, r not in seen)
                    ctx.set(dut.products.data, _bits(vals[j]))
                await ctx.tick()
            seen.add(r)
        ctx.set(dut.products.valid, 0)
        while ctx.get(dut.busy):
            await ctx.tick()
        for r in expect:
            words = await _read_port(ctx, lambda a: ctx.set(dut.act.addr, a), dut.act.data,
                                     [r * F + j for j in range(F)])
            got[r] = np.array(words, np.uint32)

    _simulate(dut, bench)
    for r in expect:
        assert np.array_equal(got[r], expect[r]), r
    assert got[2][3] == 0


@pytest.mark.parametrize("words", [2, 4])   # element read when streamed; read a cycle ahead
def test_scatter_pe_streams_weighted_products_after_its_grant(words):
    cfg = replace(preset("tiny"), mem_words_per_cycle=words)
    dut = ScatterPE(cfg)
    W = cfg.mem_words_per_cycle
    F = cfg.max_feature_width
    bpr = cfg.beats_per_row
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((cfg.feature_slots, F)).astype(np.float32)
    weight = np.float32(-1.75)
    f_in, slot, dst = 11, 2, 7
    log = []

    async def bench(ctx):
        ctx.set(dut.f_in, f_in)
        for s in range(cfg.feature_slots):
            for k in range(bpr):
                word = sum(_bits(rows[s, k * W + i]) << (32 * i) for i in range(W))
                ctx.set(dut.ring.addr, s * bpr + k)
                ctx.set(dut.ring.data, word)
                ctx.set(dut.ring.en, 1)
                await ctx.tick()
        ctx.set(dut.ring.en, 0)
        assert ctx.get(dut.edges.ready)
        ctx.set(dut.edges.valid, 1)
        ctx.set(dut.edges.payload, {"slot": slot, "dst": dst, "weight": _bits(weight),
                                    "first": 1, "last": 0})
        await ctx.tick()
        ctx.set(dut.edges.valid, 0)
        assert not ctx.get(dut.edges.ready)
        for cycle in range(60):
            # it asks for its G-PE until the grant, then streams and lets go of the request
            assert ctx.get(dut.req) == (cycle <= 4)
            assert ctx.get(dut.holding) == (cycle <= 4 + f_in)
            ctx.set(dut.grant, cycle == 4)
            if ctx.get(dut.products.valid):
                log.append((cycle, ctx.get(dut.products.addr), ctx.get(dut.products.first),
                            ctx.get(dut.products.done), ctx.get(dut.products.data)))
            await ctx.tick()
        assert ctx.get(dut.edges.ready)

    _simulate(dut, bench)
    assert len(log) == f_in
    bank_bits = (cfg.spes - 1).bit_length()
    for j, (cycle, addr, first, done, data) in enumerate(log):
        # grant at cycle 4, read j at cycle 5 + j, product 1 + mul_latency cycles later
        assert cycle == 5 + j + 1 + cfg.mul_latency
        assert first == 1 and done == 0          # not the last edge into its destination
        assert addr == (dst >> bank_bits) * F + j
        assert data == mul(as_bits(rows[slot, j]), as_bits(weight))


@pytest.mark.parametrize("n_rows,f_in,f_out,relu,stall,latencies", [
    (9, 5, 6, True, 0, None), (3, 16, 9, False, 3, None),
    # the bias chosen in the adder's last stage with 3 registers after it (lead 3), and the
    # multiplexer in front of the adder where the multiplier's pipeline is too short for that
    (11, 6, 7, False, 0, (9, 4)), (5, 7, 10, True, 2, (3, 1)), (4, 3, 5, False, 0, (12, 2)),
    # one row and one column (the drain's first item is also the job's last); whole groups
    (1, 1, 1, False, 0, None), (2, 3, 8, True, 2, None)])
@pytest.mark.parametrize("pipelined", [True, False])
def test_update_kernel_matches_the_golden_mac_order(n_rows, f_in, f_out, relu, stall, latencies,
                                                    pipelined):
    cfg = replace(preset("tiny"), pipelined=pipelined)
    if latencies is not None:
        cfg = replace(cfg, add_latency=latencies[0], mul_latency=latencies[1])
    dut = UpdateKernel(cfg)
    M, W = cfg.macs, cfg.mem_words_per_cycle
    rng = np.random.default_rng(n_rows)
    A = rng.standard_normal((n_rows, f_in)).astype(np.float32)
    Wt = rng.standard_normal((f_in, f_out)).astype(np.float32)
    b = rng.standard_normal(f_out).astype(np.float32)
    groups = -(-f_out // M)
    wb = np.zeros((f_in + 1, groups * M), np.uint32)
    wb[:f_in, :f_out] = as_bits(Wt)
    wb[f_in, :f_out] = as_bits(b)
    beats_in = np.concatenate([wb[:, g * M:(g + 1) * M] for g in range(groups)])
    out = []

    async def bench(ctx):
        for row in beats_in:
            ctx.set(dut.weights.valid, 1)
            ctx.set(dut.weights.data, sum(int(x) << (32 * k) for k, x in enumerate(row)))
            await ctx.tick()
        ctx.set(dut.weights.valid, 0)
        ctx.set(dut.n_rows, n_rows)
        ctx.set(dut.f_in, f_in)
        ctx.set(dut.f_out, f_out)
        ctx.set(dut.relu, relu)
        # pipelined: rows become final one every `gap` cycles (none at the start); a row read
        # before it is final reads a NaN, which the golden comparison would catch. Not
        # pipelined: rows_ready stays 0 and must not matter.
        gap = 3 + n_rows % 4
        rows_ready = 0
        ctx.set(dut.rows_ready, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycle = 0
        read = []           # the word at each cycle's address, as the RAM reads it then
        while not ctx.get(dut.done):
            r, i = ctx.get(dut.act.row), ctx.get(dut.act.idx)
            final = r < rows_ready or not pipelined
            if r >= n_rows or i >= f_in:
                read.append(0)
            else:
                read.append(_bits(A[r, i]) if final else 0x7FC0DEAD)
            ready = not (stall and cycle % stall == 0)
            ctx.set(dut.out.ready, ready)
            if ready and ctx.get(dut.out.valid):
                out.append(ctx.get(dut.out.payload))
            await ctx.tick()
            cycle += 1
            if pipelined and cycle % gap == 0 and rows_ready < n_rows:
                rows_ready += 1
                ctx.set(dut.rows_ready, rows_ready)
            # the word read ACT_LATENCY cycles ago arrives now
            if len(read) >= ACT_LATENCY:
                ctx.set(dut.act.data, read[-ACT_LATENCY])
            assert cycle < 20_000

    _simulate(dut, bench)
    words = np.array([[(v >> (32 * k)) & 0xFFFFFFFF for k in range(W)] for v in out], np.uint32)
    per_row = -(-f_out // W)
    assert len(words) == n_rows * per_row
    Y = words.reshape(n_rows, per_row * W)[:, :f_out]
    assert np.array_equal(Y, as_bits(golden.update(A, Wt, b, relu)))


def _hub_kernel_job(cfg):
    from moagcn.sim.hyscale.spec import check_job, pack_job

    from .jobs import hub_job
    indptr, indices, data, X, W, b = hub_job(11, 10, 7, 9, 3, hub_edges=12, shared_dst_edges=7)
    job = pack_job(*check_job(indptr, indices, X, W, b, data, cfg), relu=False, config=cfg)
    return (indptr, indices, data, X), job


def _run_kernel(dut, job, X, edge_words, *, after_done=0, rows=None):
    """Run ``AggregateKernel`` on a packed job (its edge list replaced by ``edge_words``) with
    one-cycle RAMs; then read every destination row through the update port, once right
    after ``done`` and, with ``after_done``, again that many cycles later (the destinations
    ``rows``, in that order; default all ``n_dst``). Returns the error flags, the read
    counters and the rows read (a list of one or two {row: words})."""
    src = job.streams["src_in"][:, 0]
    mem = [sum(int(w) << (32 * k) for k, w in enumerate(beat)) for beat in job.streams["feat_in"]]
    f_in = X.shape[1]
    out = {"rows": []}

    async def read_rows(ctx):
        got = {}
        def set_addr(a):
            ctx.set(dut.act.row, a[0])
            ctx.set(dut.act.idx, a[1])

        for row in range(job.scalars["n_dst"]) if rows is None else rows:
            got[row] = await _read_port(ctx, set_addr, dut.act.data,
                                        [(row, i) for i in range(f_in)])
        return got

    async def bench(ctx):
        ctx.set(dut.n_sources, len(src))
        ctx.set(dut.n_edges, len(edge_words))
        ctx.set(dut.n_rows, X.shape[0])
        ctx.set(dut.n_dst, job.scalars["n_dst"])
        ctx.set(dut.f_in, f_in)
        ctx.set(dut.start, 1)
        cycle = 0
        while True:
            sa, ea = ctx.get(dut.src_list.addr), ctx.get(dut.edge_list.addr)
            ma = ctx.get(dut.features.addr)
            await ctx.tick()
            ctx.set(dut.start, 0)
            # one cycle of read latency, like the layer's RAMs
            ctx.set(dut.src_list.data.as_value(), int(src[sa]) if sa < len(src) else 0)
            ctx.set(dut.edge_list.data.as_value(),
                    edge_words[ea] if ea < len(edge_words) else 0)
            ctx.set(dut.features.data, mem[ma] if ma < len(mem) else 0)
            cycle += 1
            if ctx.get(dut.done):
                break
            assert cycle < 5000
        out["errors"] = {name: ctx.get(getattr(dut, name))
                         for name in ("err_source", "err_dest", "err_edges")}
        out["reads"] = (ctx.get(dut.feature_reads), ctx.get(dut.words_read))
        out["rows"].append(await read_rows(ctx))
        if after_done:
            await ctx.tick().repeat(after_done)
            out["rows"].append(await read_rows(ctx))

    _simulate(dut, bench)
    return out


def _edge_words(job):
    return [int(lo) | (int(hi) << 32) for lo, hi in job.streams["edge_in"]]


def test_aggregate_kernel_alone_reads_each_source_once_and_sums_in_edge_order():
    from moagcn.hw.hyscale.aggregate import AggregateKernel
    cfg = preset("tiny")
    (indptr, indices, data, X), job = _hub_kernel_job(cfg)
    out = _run_kernel(AggregateKernel(cfg), job, X, _edge_words(job))
    assert out["errors"] == {"err_source": 0, "err_dest": 0, "err_edges": 0}
    got = out["rows"][0]
    sched = golden.edge_schedule(indptr, indices, data)
    Z = as_bits(golden.aggregate(sched, X, job.scalars["n_dst"]))
    assert out["reads"] == (sched.sources.size, sched.sources.size * X.shape[1])
    for v in range(job.scalars["n_dst"]):
        if sched.nonempty[v]:
            assert np.array_equal(np.array(got[job.context.row_of[v]], np.uint32), Z[v]), v


def test_aggregate_kernel_stops_on_a_bad_destination_only_once_its_pes_are_idle():
    """A destination out of range on the first edge: the edge still enters its (empty) queue,
    and ``done`` waits until the PEs have streamed it -- nothing is written after ``done``."""
    from moagcn.hw.hyscale.aggregate import AggregateKernel
    from moagcn.hw.hyscale.layouts import EDGE_WORD_LAYOUT
    cfg = preset("tiny")
    (_, _, _, X), job = _hub_kernel_job(cfg)
    words = _edge_words(job)
    dst = EDGE_WORD_LAYOUT["dst"]
    mask = ((1 << dst.width) - 1) << dst.offset
    # destination n_dst: in range of the bank's row bits, beyond the job's destinations
    words[0] = (words[0] & ~mask) | (job.scalars["n_dst"] << dst.offset)
    # the bad row first: it is read a cycle after ``done``, before its products could land
    n_dst = job.scalars["n_dst"]
    out = _run_kernel(AggregateKernel(cfg), job, X, words, after_done=60,
                      rows=[n_dst, *range(n_dst)])
    assert out["errors"]["err_dest"] == 1
    right_after, later = out["rows"]
    assert right_after == later


def test_aggregate_kernel_alone_stops_on_a_bad_source_found_while_it_runs():
    """The last source index at ``n_rows`` and no start check (``bad_job`` low, as for the
    kernel alone): the duplicator's in-flight check raises ``err_source``, the kernel stops,
    and nothing is written after ``done``."""
    from moagcn.hw.hyscale.aggregate import AggregateKernel
    cfg = preset("tiny")
    (_, _, _, X), job = _hub_kernel_job(cfg)
    src = job.streams["src_in"].copy()
    src[-1, 0] = (int(src[-1, 0]) & 0xFFFF0000) | X.shape[0]
    job.streams["src_in"] = src
    out = _run_kernel(AggregateKernel(cfg), job, X, _edge_words(job), after_done=60)
    assert out["errors"] == {"err_source": 1, "err_dest": 0, "err_edges": 0}
    right_after, later = out["rows"]
    assert right_after == later


@pytest.mark.parametrize("spes, queue_depth", [(2, 1), (2, 2), (4, 1), (1, 2)])
def test_the_dispatcher_sends_an_edge_every_cycle_when_nothing_holds_it_back(spes, queue_depth):
    """The edge dispatcher alone: the ring always has the edge's row, every queue hands its
    edge on at once (its credit a cycle later), the edge list answers a cycle after its
    address. The edges go to the banks in turn, so a bank's credit is back before its next
    edge (with one bank, two places a queue): nothing but the dispatcher's own prefetch can
    slow it. N edges leave in N consecutive cycles, in order, each to its destination's bank.
    Reference: the edge list itself and cycle counting."""
    cfg = replace(preset("tiny"), spes=spes, edge_queue=queue_depth)
    dut = EdgeDispatcher(cfg)
    n = 40
    dsts = [(k * 7) % cfg.max_destinations for k in range(n)]
    dsts = [d - d % spes + k % spes for k, d in enumerate(dsts)]        # banks in turn
    at = field_offsets(EDGE_WORD)
    words = [(d << at["dst"]) | ((k + 1) << at["weight"]) for k, d in enumerate(dsts)]
    sent = []

    async def bench(ctx):
        ctx.set(dut.n_edges, n)
        ctx.set(dut.n_dst, cfg.max_destinations)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.active, 1)
        ctx.set(dut.enable, 1)
        ctx.set(dut.edge_slots.valid, 1)
        addr = 0
        credits = 0
        for cycle in range(4 * n + 20):
            ctx.set(dut.edge_list.data.as_value(), words[addr] if addr < n else 0)
            ctx.set(dut.credits, credits)
            credits = 0
            for b in range(spes):
                if ctx.get(dut.queues[b].valid):
                    entry = ctx.get(dut.queues[b].payload)
                    sent.append((cycle, b, int(entry.dst), int(entry.weight)))
                    credits |= 1 << b
            addr = ctx.get(dut.edge_list.addr)
            await ctx.tick()
            if len(sent) == n:
                break

    _simulate(dut, bench)
    assert [(b, d, wt) for _, b, d, wt in sent] == [
        (d % spes, d, k + 1) for k, d in enumerate(dsts)]
    cycles = sent[-1][0] - sent[0][0] + 1
    assert cycles == n, cycles
