"""HyScale-GNN edge dispatcher and the PE pairs' edge queues (Sec. IV-C, Fig. 6).

The **dispatcher** is the shuffle between the scatter and the gather side: it takes the edges
in order, one per cycle, once their source row is resident in the feature ring, and appends
each to the queue (``edge_queue`` entries, an :class:`EdgeQueue`) of the PE pair whose G-PE owns
its destination. Edges that hit one destination (or one bank) close together wait in that
bank's queue, in edge order; a full queue stalls the dispatcher.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import Widths, edge_entry_layout


class EdgeDispatcher(wiring.Component):
    """Take the edges in order, one per cycle, once their source row is in the ring, and give
    each to the queue of the bank that owns its destination.

    A two-entry prefetch buffer sits in front of the dispatcher: the edge buffer's address is
    a register, so its read data never feeds back into the next address in one cycle.

    Members
    -------
    start : In(1)
        Pulse: begin at edge 0.
    active, enable : In(1)
        The job runs; it runs and has no error.
    n_edges, n_dst : In
        Edges loaded (read at ``start`` and kept); destination rows (a destination at or beyond
        it is an error; held).
    edge_addr : Out ; edge_data : In(64)
        Read port of the edge list (one cycle latency).
    slot, slot_avail : In
        The ring slot the next edge's source should be in, and whether it holds a row with
        edges left to dispatch.
    full : In(spes)
        Bank b's queue is full.
    dispatch : Out(1) ; bank : Out ; entry : Out(edge_entry_layout(config))
        The head edge goes to bank ``bank`` this cycle.
    bad_dest : Out(1)
        The head edge's destination is out of range (the edge is dispatched all the same).
    short : Out(1)
        The sources' out-edge counts promise more edges than were loaded.
    edges_left : Out(1)
        Edges remain to be dispatched.
    blocked : Out(1)
        The head edge could go but its bank's queue is full.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "start": In(1), "active": In(1), "enable": In(1),
            "n_edges": In(w.edge + 1), "n_dst": In(w.dst + 1),
            "edge_addr": Out(w.edge), "edge_data": In(64),
            "slot": In(w.slot or 1), "slot_avail": In(1),
            "full": In(config.spes),
            "dispatch": Out(1), "bank": Out(w.bank or 1),
            "entry": Out(edge_entry_layout(config)),
            "bad_dest": Out(1), "short": Out(1), "edges_left": Out(1), "blocked": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        e_ptr = Signal(w.edge + 1)            # edges dispatched
        rd_ptr = Signal(w.edge + 1)
        inflight = Signal()
        occ = Signal(range(3))
        stage = [Signal(64, name=f"edge_stage{i}", reset_less=True) for i in range(2)]
        edge_valid = occ != 0
        # ``e_ptr < n_edges`` as a register set a cycle ahead (for e_ptr + 1 when this cycle
        # dispatches): the compare's carry chain was the front of the dispatch decision
        edges_left = Signal(name="edges_left_r")
        e_weight = stage[0][:32]
        e_dst = stage[0][32:48]
        e_first = stage[0][63]
        e_last = stage[0][62]
        e_bank = e_dst[:w.bank] if w.bank else 0
        want = self.enable & self.slot_avail
        # The destination's range check does not hold the dispatch back (a compare in the
        # dispatch decision, which fans out to the queues, the ring and the edge buffer, was a
        # long path, and so was the same compare on the edge buffer's late read data): a bad
        # edge goes to its bank's queue, its destination row cut to the bank's width, and the
        # error stops the dispatcher from the next cycle on and the job with no output. The
        # field's high bits are only tested for zero (n_dst <= 2 ** w.dst), so the compare is
        # w.dst bits long, not 16.
        dst_high = e_dst[w.dst:].any() if w.dst < 16 else 0
        bad_dest = want & edge_valid & edges_left & (dst_high | (e_dst[:w.dst] >= self.n_dst))
        short = want & ~edges_left                 # counts promise more edges than loaded
        target_full = Array(self.full[b] for b in range(self.config.spes))[e_bank]
        dispatch = wire(m, want & edge_valid & edges_left & ~target_full,
                        name="dispatch")
        m.d.comb += [self.dispatch.eq(dispatch), self.bank.eq(e_bank),
                     self.entry.slot.eq(self.slot), self.entry.dst.eq(e_dst[:w.dst]),
                     self.entry.weight.eq(e_weight), self.entry.first.eq(e_first),
                     *([self.entry.last.eq(e_last)] if self.config.pipelined else []),
                     self.bad_dest.eq(bad_dest), self.short.eq(short),
                     self.edges_left.eq(edges_left),
                     self.blocked.eq(want & edge_valid & edges_left & target_full)]

        # -- prefetch: keep the two-entry buffer full ------------------------------------------
        n_edges = Signal.like(self.n_edges, name="n_edges_job", reset_less=True)
        m.d.comb += self.edge_addr.eq(rd_ptr)
        fetch = self.active & (rd_ptr < n_edges) & (occ + inflight - dispatch < 2)
        m.d.sync += inflight.eq(fetch)
        with m.If(fetch):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)
        # pop the head on dispatch; the data of last cycle's read joins behind what stays
        keep = occ - dispatch
        with m.If(dispatch):
            m.d.sync += stage[0].eq(stage[1])
        with m.If(inflight):
            with m.If(keep == 0):
                m.d.sync += stage[0].eq(self.edge_data)
            with m.Else():
                m.d.sync += stage[1].eq(self.edge_data)
        m.d.sync += occ.eq(keep + inflight)
        with m.If(dispatch):
            m.d.sync += e_ptr.eq(e_ptr + 1)
        m.d.sync += edges_left.eq(Mux(dispatch, e_ptr + 1 < n_edges, e_ptr < n_edges))
        with m.If(self.start):
            m.d.sync += [e_ptr.eq(0), rd_ptr.eq(0), inflight.eq(0), occ.eq(0),
                         edges_left.eq(self.n_edges != 0), n_edges.eq(self.n_edges)]
        return m


class EdgeQueue(wiring.Component):
    """A shift-register FIFO of ``depth`` entries, every entry visible.

    A pop shifts the entries down; a push writes behind the ones that stay. Push and pop may
    happen in the same cycle; a push into a full queue is the user's error. The place behind
    the held entries is written every cycle (it is free), so ``push`` only moves the count.

    Members
    -------
    push : In(1); entry : In(layout)
        Append ``entry``.
    pop : In(1)
        Drop the head.
    entries : Out(layout).array(depth)
        ``entries[0]`` is the head; ``entries[i]`` holds an entry when ``level > i``.
    level : Out(range(depth + 1))
        Entries held.
    """

    def __init__(self, layout: data.Layout, depth: int):
        self.layout, self.depth = layout, depth
        super().__init__({
            "push": In(1), "entry": In(layout), "pop": In(1),
            "entries": Out(layout).array(depth), "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self.depth
        q = [Signal(self.layout, name=f"q{i}", reset_less=True) for i in range(Q)]
        count = Signal(range(Q + 1), name="count")
        with m.If(self.pop):
            for i in range(Q - 1):
                m.d.sync += q[i].eq(q[i + 1])
        # ``entry`` is written into the first free place every cycle, pushed or not: that place
        # holds nothing, and only ``count`` says whether it holds an entry now. The registers'
        # enables depend on the queue's own pop and count, not on ``push``, which comes late
        # in the cycle from the dispatcher and would otherwise fan out to every entry's bits.
        tail = Mux(self.pop, count - 1, count)
        for i in range(Q):
            with m.If(tail == i):
                m.d.sync += q[i].eq(self.entry)
        m.d.sync += count.eq(count + self.push - self.pop)
        m.d.comb += [entry.eq(reg) for entry, reg in zip(self.entries, q)]
        m.d.comb += self.level.eq(count)
        return m
