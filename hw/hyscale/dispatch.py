"""HyScale-GNN edge dispatcher and the PE pairs' edge queues (Sec. IV-C, Fig. 6).

The **dispatcher** is the shuffle between the scatter and the gather side: it takes the edges
in order, one per cycle, once their source row is resident in the feature ring, and appends
each to the queue (``edge_queue`` entries, an :class:`EdgeQueue`) of the PE pair whose G-PE owns
its destination. Edges that hit one destination (or one bank) close together wait in that
bank's queue, in edge order; a full queue stalls the dispatcher.

The dispatcher knows a queue is full from its own count of the queue's free places (credits),
not from the queue: a queue returns a credit, registered, the cycle after it hands an edge to
its S-PE, so the dispatch decision reads no state of the PE pairs, which are spread over the
die (a queue's fill level through the bank multiplexer into the dispatch decision and the
ring's look-ahead was the longest path of the default preset). The price: a place freed by a
pop is used a cycle later than the queue itself could (two cycles after the pop, not one).
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import EDGE_WORD_LAYOUT, Widths, edge_entry_layout


class EdgeDispatcher(wiring.Component):
    """Take the edges in order, one per cycle, once their source row is in the ring, and give
    each to the queue of the bank that owns its destination.

    A three-entry prefetch buffer sits in front of the dispatcher: the edge buffer's address is
    a register, so its read data never feeds back into the next address in one cycle, and its
    read data is registered before it enters the buffer.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: begin at edge 0.
    active, enable : In(1)
        The job runs; it runs and has no error.
    n_edges, n_dst : In
        Edges loaded (read at ``start`` and kept); destination rows (a destination at or beyond
        it is an error; held).
    edge_list : Out(RamReadSignature(edge bits, EDGE_WORD_LAYOUT))
        Read port of the edge list (one cycle latency).
    edge_slots : In(stream.Signature(slot bits))
        From the feature ring: the slot the next edge's source row is in, valid while it
        holds a row with edges left to dispatch; a transfer is a dispatched edge.
    queues : Out(stream.Signature(edge_entry_layout(config))).array(spes)
        The head edge, sent to the queue of its destination's bank (``valid`` only with a
        credit for that queue, so the queue always has room: ``ready`` is not read).
    credits : In(spes)
        Bit ``b``: queue ``b`` freed a place (handed an edge to its S-PE) in the cycle before.
    bad_dest : Out(1)
        The head edge's destination is out of range (the edge is dispatched all the same).
    short : Out(1)
        The sources' out-edge counts promise more edges than were loaded.
    edges_left : Out(1)
        Edges remain to be dispatched.
    blocked : Out(1)
        The head edge could go in the cycle before but its bank's queue had no free place (no
        credit).
    sent : Out(1)
        An edge was dispatched in the cycle before.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "start": In(1), "active": In(1), "enable": In(1),
            "n_edges": In(w.edge + 1), "n_dst": In(w.dst + 1),
            "edge_list": Out(RamReadSignature(w.edge, EDGE_WORD_LAYOUT)),
            "edge_slots": In(stream.Signature(w.slot or 1)),
            "queues": Out(stream.Signature(edge_entry_layout(config))).array(config.spes),
            "credits": In(config.spes),
            "bad_dest": Out(1), "short": Out(1), "edges_left": Out(1), "blocked": Out(1),
            "sent": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        e_ptr = Signal(w.edge + 1)            # edges dispatched
        rd_ptr = Signal(w.edge + 1)
        inflight = Signal()
        occ = Signal(range(4))
        stage = [Signal(EDGE_WORD_LAYOUT, name=f"edge_stage{i}", reset_less=True)
                 for i in range(3)]
        edge_valid = occ != 0
        # ``e_ptr < n_edges`` as a register set a cycle ahead (for e_ptr + 1 when this cycle
        # dispatches): the compare's carry chain was the front of the dispatch decision
        edges_left = Signal(name="edges_left_r")
        head = stage[0]
        e_dst = head.dst
        e_bank = e_dst[:w.bank] if w.bank else 0
        want = self.enable & self.edge_slots.valid
        # The destination's range check does not hold the dispatch back (a compare in the
        # dispatch decision, which fans out to the queues, the ring and the edge buffer, was a
        # long path, and so was the same compare on the edge buffer's late read data): a bad
        # edge goes to its bank's queue, its destination row cut to the bank's width, and the
        # error stops the dispatcher from the next cycle on and the job with no output. The
        # field's high bits are only tested for zero (n_dst <= 2 ** w.dst), so the compare is
        # w.dst bits long, not 16.
        dst_high = e_dst[w.dst:].any() if w.dst < len(e_dst) else 0
        offer = want & edge_valid & edges_left
        bad_dest = offer & (dst_high | (e_dst[:w.dst] >= self.n_dst))
        short = want & ~edges_left                 # counts promise more edges than loaded
        # each queue's free places, counted here: taken at a dispatch, given back by the
        # queue's credit a cycle after its pop
        Q = self.config.edge_queue
        free = [Signal(range(Q + 1), name=f"free{b}", init=Q)
                for b in range(self.config.spes)]
        # ``free[b] != 0`` as a register set a cycle ahead from the next count: the decision
        # starts from one flip-flop per queue, not from the counts' compares (the credits'
        # count through its compare into the decision was the front of the longest path)
        has = [Signal(name=f"has_credit{b}", init=1) for b in range(self.config.spes)]
        target_ready = Array(has)[e_bank]
        # ``edge_valid & edges_left & target_ready`` as one register set a cycle ahead (from the
        # buffer's next head, the next counts and flags): the dispatch decision, which crosses
        # the die between the ring and this buffer, is then an AND of a flip-flop here, the
        # ring's ``valid`` and ``enable``
        go = Signal(name="dispatch_go_r")
        dispatch = wire(m, want & go, name="dispatch")
        entry = Signal(edge_entry_layout(self.config), name="head_entry")
        m.d.comb += [entry.slot.eq(self.edge_slots.payload), entry.dst.eq(e_dst[:w.dst]),
                     entry.weight.eq(head.weight), entry.first.eq(head.first),
                     *([entry.last.eq(head.last)] if self.config.pipelined else [])]
        has_next = []
        for b, queue in enumerate(self.queues):
            taken = dispatch & (e_bank == b) if w.bank else dispatch
            m.d.comb += [queue.valid.eq(taken), queue.payload.eq(entry)]
            free_next = free[b] - taken + self.credits[b]
            has_next.append(free_next != 0)
            m.d.sync += [free[b].eq(free_next), has[b].eq(has_next[b])]
        m.d.comb += [self.edge_slots.ready.eq(dispatch),
                     self.bad_dest.eq(bad_dest), self.short.eq(short),
                     self.edges_left.eq(edges_left)]
        # both registers: ``blocked`` feeds only a counter, whose logic, on the dispatch
        # decision, pulled that decision's LUT away from the ring at one placement
        m.d.sync += [self.sent.eq(dispatch), self.blocked.eq(offer & ~target_ready)]

        # -- prefetch: keep the three-entry buffer full -----------------------------------------
        # The edge buffer's read data is registered beside its block RAM (``landed``) before it
        # joins the buffer: the block RAM's late output through the buffer's multiplexer was a
        # long path. With the read two cycles from the address to the buffer, three entries
        # keep one edge per cycle.
        n_edges = Signal.like(self.n_edges, name="n_edges_job", reset_less=True)
        read = self.edge_list
        m.d.comb += read.addr.eq(rd_ptr)
        landed = Signal(EDGE_WORD_LAYOUT, name="edge_landed", reset_less=True)
        landed_valid = Signal(name="edge_landed_valid")
        # The buffer's entries with the reads on their way (``occ + inflight + landed_valid``)
        # kept as one count, ``rd_ptr < n_edges`` and the count's compares as registers set a
        # cycle ahead: the read's enable is then the dispatch and four flip-flops (the sum of
        # the three and its compare, behind the dispatch decision, were the longest path at
        # one placement)
        S = len(stage)
        held = Signal(range(S + 1), name="edges_held")
        reads_left = Signal(name="reads_left_r")
        below = Signal(name="held_below_r", init=1)        # held < S
        full = Signal(name="held_full_r")                  # held == S
        fetch = self.active & reads_left & (below | (full & dispatch))
        held_next = held + fetch - dispatch
        m.d.sync += [inflight.eq(fetch), landed_valid.eq(inflight), landed.eq(read.data),
                     held.eq(held_next), below.eq(held_next < S), full.eq(held_next == S),
                     reads_left.eq(Mux(fetch, rd_ptr + 1 < n_edges, rd_ptr < n_edges))]
        with m.If(fetch):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)
        # pop the head on dispatch; the landed edge joins behind what stays
        keep = occ - dispatch
        for k, place in enumerate(stage):
            with m.If(landed_valid & (keep == k)):
                m.d.sync += place.eq(landed)
            if k + 1 < len(stage):
                with m.Elif(dispatch):
                    m.d.sync += place.eq(stage[k + 1])
        occ_next = keep + landed_valid
        m.d.sync += occ.eq(occ_next)
        with m.If(dispatch):
            m.d.sync += e_ptr.eq(e_ptr + 1)
        left_next = Mux(dispatch, e_ptr + 1 < n_edges, e_ptr < n_edges)
        m.d.sync += edges_left.eq(left_next)
        # ``go`` for the next cycle, formed twice from registers (as if this cycle dispatched,
        # and as if it did not) and picked by the dispatch: the decision, late from across the
        # die, then passes one multiplexer, not the counts, the head's bank and the credits
        # (that chain behind it was the longest path at two placements)
        def go_after(d: int):
            kept = occ - d
            head_d = Mux(landed_valid & (kept == 0), landed.dst, stage[1].dst if d else head.dst)
            bank_d = head_d[:w.bank] if w.bank else 0
            taken_d = [((e_bank == b) if w.bank else 1) if d else 0
                       for b in range(self.config.spes)]
            credit = [free[b] - taken_d[b] + self.credits[b] != 0
                      for b in range(self.config.spes)]
            left_d = e_ptr + 1 < n_edges if d else e_ptr < n_edges
            return ((kept + landed_valid) != 0) & left_d & Array(credit)[bank_d]
        m.d.sync += go.eq(Mux(dispatch, go_after(1), go_after(0)))
        with m.If(self.start):
            m.d.sync += [e_ptr.eq(0), rd_ptr.eq(0), inflight.eq(0), landed_valid.eq(0),
                         occ.eq(0), go.eq(0), held.eq(0), below.eq(1), full.eq(0),
                         reads_left.eq(self.n_edges != 0),
                         edges_left.eq(self.n_edges != 0), n_edges.eq(self.n_edges),
                         *[f.eq(Q) for f in free], *[h.eq(1) for h in has]]
        return m


class EdgeQueue(wiring.Component):
    """A FIFO of ``depth`` entries in a ring of registers.

    Push and pop may happen in the same cycle. The place at the write pointer is written every
    cycle while the queue is not full (it is free), so a push only moves the pointer and the
    count: each place's register enable comes from the write pointer and ``room`` alone, both
    registers (``room``, "not full", is set a cycle ahead from the next count). (A shift
    register, which moved every entry on a pop, had the pop and the count in every entry's
    enable, and that decode, spread over the entries, was the longest path at some
    placements.) A pop moves the read pointer; the head is the entry there. Both
    pointers are one-hot.

    Parameters
    ----------
    layout : data.Layout
        An entry.
    depth : int
        Entries held (at least one).

    Members
    -------
    i : In(stream.Signature(layout))
        Entries in (``ready``: the queue is not full).
    o : Out(stream.Signature(layout))
        The head entry, from a register (``valid``: the queue is not empty); a transfer
        drops it.
    entries : Out(data.ArrayLayout(layout, depth)) ; held : Out(depth)
        Every place of the ring, and which of them hold an entry (registers both): for a
        question about all the queued entries at once, asked without the read pointer's
        multiplexer.
    """

    def __init__(self, layout: data.Layout, depth: int):
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"EdgeQueue depth={depth!r}: a queue holds at least one entry "
                             f"(edge_queue >= 1)")
        self.layout, self.depth = data.Layout.cast(layout), depth
        super().__init__({
            "i": In(stream.Signature(self.layout)), "o": Out(stream.Signature(self.layout)),
            "entries": Out(data.ArrayLayout(self.layout, depth)), "held": Out(depth),
        })

    def elaborate(self, platform):
        m = Module()
        Q = self.depth
        q = [Signal(self.layout, name=f"q{k}", reset_less=True) for k in range(Q)]
        count = Signal(range(Q + 1), name="count")
        # the pointers one-hot: the head is an AND-OR of the places with the read pointer's
        # bits (no decode of a binary pointer, which fanned out to every bit of every place)
        rd = Signal(Q, name="rd_ptr", init=1)
        wr = Signal(Q, name="wr_ptr", init=1)
        held = Signal(Q, name="held")
        # ``count != Q`` as a register set a cycle ahead (from the next count): the places'
        # write enables fan out from it, and a compare of the count in front of them, at one
        # placement pulled mid-die, was the longest path
        room = Signal(name="room", init=1)
        pop = wire(m, self.o.valid & self.o.ready, name="pop")
        push = self.i.valid & room

        def step(ptr):
            return ptr.rotate_left(1)

        # The head is a register, set a cycle ahead to the entry at next cycle's read pointer
        # (the entry in, where that place is written this cycle): its user reads it with no
        # multiplexer in front (the head's AND-OR, placed far from the S-PE, in front of the
        # local ring's read address was the longest path at some placements)
        next_rd = Mux(pop, step(rd), rd)
        ahead = 0
        for k in range(Q):
            ahead = ahead | Mux(next_rd[k], q[k].as_value(), 0)
        head = Signal(self.layout, name="head_r", reset_less=True)
        m.d.sync += head.eq(Mux((next_rd & wr).any() & room, self.i.payload, ahead))
        m.d.comb += [self.i.ready.eq(room), self.o.valid.eq(count != 0),
                     self.o.payload.eq(head)]

        for k in range(Q):
            with m.If(wr[k] & room):
                m.d.sync += q[k].eq(self.i.payload)
            with m.If(push & wr[k]):
                m.d.sync += held[k].eq(1)
            with m.Elif(pop & rd[k]):
                m.d.sync += held[k].eq(0)
        with m.If(push):
            m.d.sync += wr.eq(step(wr))
        with m.If(pop):
            m.d.sync += rd.eq(step(rd))
        next_count = count + push - pop
        m.d.sync += [count.eq(next_count), room.eq(next_count != Q)]
        m.d.comb += [self.held.eq(held),
                     *[self.entries[k].eq(q[k]) for k in range(Q)]]
        return m
