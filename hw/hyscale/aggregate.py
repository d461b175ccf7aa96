"""HyScale-GNN aggregate kernel: feature duplicator, scatter PEs, gather PEs (Sec. IV-C, Fig. 6).

Edges arrive sorted by source. The **feature duplicator** reads each source's feature row once
from external memory (``mem_words_per_cycle`` words per cycle) and broadcasts it into a ring of
``feature_slots`` rows held in every S-PE's local memory, ahead of use; a slot is reused once
every edge of its source has been streamed. The destination rows are banked over the **G-PEs**
(destination ``v`` lives in bank ``v mod n``). The **dispatcher** is the shuffle between the
two sides: it takes the edges in order, one per cycle, once their source row is resident, and
appends each to the queue (``edge_queue`` entries) of the S-PE paired with its destination's
G-PE. An **S-PE** multiplies the row by the edge weight, one element per cycle, and streams the
products into its G-PE, which accumulates them into the bank (read, add, write).

Conflicts: edges that hit one destination (or one bank) close together wait in that bank's
queue, in edge order, so every destination accumulates its in-edges in edge order, whatever
the timing; a full queue stalls the dispatcher (``stall_gather``). Two edges entering one G-PE
are at least ``max(f_in, add_latency + 3)`` cycles apart, so a read never overtakes the write
of the same element.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32Adder, Fp32AddConfig, Fp32MulConfig, Fp32Multiplier
from moagcn.hw.common.bits import bits_for, log2, wire
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.pipeline import delay
from moagcn.hw.common.ram import Ram, RamWriteSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.protocol import AGG_COUNTERS, COUNTER_BITS


class Widths:
    """Field widths shared by the kernels of one configuration."""

    def __init__(self, cfg: HyScaleConfig):
        self.words = cfg.mem_words_per_cycle
        self.word_bits = log2(self.words)
        self.feat = log2(cfg.max_feature_width)            # element index within a row
        self.beat = log2(cfg.beats_per_row)                # beat index within a row
        self.slot = log2(cfg.feature_slots)
        self.bank = log2(cfg.spes)
        self.dst = bits_for(cfg.max_destinations)
        self.src = bits_for(cfg.max_sources)
        self.edge = bits_for(cfg.max_edges)
        # address of (row, element) within one bank: element in the low bits
        self.bank_row = bits_for(cfg.max_destinations // cfg.spes)
        self.bank_addr = self.feat + self.bank_row


def edge_entry_layout(cfg: HyScaleConfig) -> data.StructLayout:
    """A dispatched edge waiting in a PE queue: the ring slot of its source's row, its
    destination, its weight, and whether it is the first (and, pipelined, the last) edge into
    its destination."""
    w = Widths(cfg)
    fields = {"slot": w.slot or 1, "dst": w.dst, "weight": 32, "first": 1}
    if cfg.pipelined:
        fields["last"] = 1
    return data.StructLayout(fields)


class RingFillSignature(wiring.Signature):
    """The feature duplicator's news for the ring's slot table, as the duplicator sends it.

    Members
    -------
    valid : Out(1)
        The last beat of a source row was written this cycle: its slot is ready.
    slot : Out(slot bits)
        The slot.
    count : Out(16)
        The source's out-edge count (edges that will read the slot).
    """

    def __init__(self, cfg: HyScaleConfig):
        super().__init__({"valid": Out(1), "slot": Out(Widths(cfg).slot or 1),
                          "count": Out(16)})


class GatherPE(wiring.Component):
    """One bank of destination rows and its binary32 adder.

    Members
    -------
    in_valid, in_addr, in_first, in_data : In
        One product for element ``in_addr`` of the bank; ``in_first``: start from ``+0``.
    in_done : In(1)
        The product is its row's last (the last element of the last edge into the row).
    rd_addr : In, rd_data : Out
        Second read port of the bank (one cycle latency), for the update kernel.
    busy : Out(1)
        An addition is in flight.
    row_done : Out(1) ; row_done_row : Out
        A row's last sum is written this cycle, and its row in the bank.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = (config.max_destinations // config.spes) * config.max_feature_width
        super().__init__({
            "in_valid": In(1), "in_addr": In(w.bank_addr), "in_first": In(1), "in_data": In(32),
            "in_done": In(1),
            "rd_addr": In(w.bank_addr), "rd_data": Out(32), "busy": Out(1),
            "row_done": Out(1), "row_done_row": Out(max(w.bank_row, 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.bank = bank = Ram(32, self.depth, read_ports=2)
        old, update = bank.read
        m.d.comb += [old.addr.eq(self.in_addr), update.addr.eq(self.rd_addr),
                     self.rd_data.eq(update.data)]
        # stage 1: the old partial sum is out of the RAM; the product waits one cycle for it
        valid1 = Signal()
        first1 = Signal(reset_less=True)
        data1 = Signal(32, reset_less=True)
        addr1 = Signal(len(self.in_addr), reset_less=True)
        m.d.sync += [valid1.eq(self.in_valid), first1.eq(self.in_first), data1.eq(self.in_data),
                     addr1.eq(self.in_addr)]
        # stage 2: both operands registered (the bank's read data, routed across the chip, ran
        # into the adder's first stage in the same cycle: the longest path of the layer)
        valid2 = Signal()
        data2 = Signal(32, reset_less=True)
        old2 = Signal(32, reset_less=True)
        addr2 = Signal(len(self.in_addr), reset_less=True)
        m.d.sync += [valid2.eq(valid1), data2.eq(data1), old2.eq(Mux(first1, 0, old.data)),
                     addr2.eq(addr1)]
        m.submodules.adder = adder = Fp32Adder(Fp32AddConfig(latency=cfg.add_latency))
        m.d.comb += [adder.i.valid.eq(valid2), adder.i.payload.a.eq(data2),
                     adder.i.payload.b.eq(old2)]
        addr_out = delay(m, addr2, cfg.add_latency, "gaddr")[-1]
        write = bank.write[0]
        m.d.comb += [write.addr.eq(addr_out), write.data.eq(adder.o.payload),
                     write.en.eq(adder.o.valid)]
        inflight = delay(m, valid2, cfg.add_latency, "gvalid", reset_less=False)
        m.d.comb += self.busy.eq(self.in_valid | valid1 | Cat(*inflight).any())
        if cfg.pipelined:
            w = Widths(cfg)
            done1, done2 = Signal(), Signal()
            m.d.sync += [done1.eq(self.in_valid & self.in_done), done2.eq(valid1 & done1)]
            done_out = delay(m, done2, cfg.add_latency, "gdone", reset_less=False)[-1]
            m.d.comb += [self.row_done.eq(adder.o.valid & done_out),
                         self.row_done_row.eq(addr_out[w.feat:w.feat + w.bank_row]
                                              if w.bank_row else 0)]
        return m


class ScatterPE(wiring.Component):
    """One scatter PE: a local copy of the feature ring and a binary32 multiplier.

    It takes an edge (``assign_*``) when ``free``, asks its G-PE for the bank with ``req`` /
    ``bank``, and after ``grant`` reads one element per cycle for ``f_in`` cycles; the products
    leave on ``out_*`` ``1 + mul_latency`` cycles after each read, tagged with their bank address.

    Members
    -------
    assign_valid, assign_slot, assign_dst, assign_weight, assign_first, assign_last : In
    free, req, holding, streaming : Out(1)
    bank : Out ; slot : Out
        The bank of the held edge, and the ring slot its source row occupies.
    grant : In(1)
    f_in : In
    mem_addr, mem_data, mem_en : In
        Broadcast write port of the local feature memory.
    out_valid, out_bank, out_addr, out_first, out_data : Out
    out_done : Out(1)
        The product is its destination's last (last element of the last edge into it).
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = config.feature_slots * config.beats_per_row
        super().__init__({
            "assign_valid": In(1), "assign_slot": In(w.slot or 1), "assign_dst": In(w.dst),
            "assign_weight": In(32), "assign_first": In(1), "assign_last": In(1),
            "free": Out(1), "req": Out(1), "holding": Out(1), "streaming": Out(1),
            "bank": Out(w.bank or 1), "slot": Out(w.slot or 1), "grant": In(1),
            "f_in": In(w.feat + 1),
            "mem_addr": In(bits_for(self.depth)), "mem_data": In(32 * config.mem_words_per_cycle),
            "mem_en": In(1),
            "out_valid": Out(1), "out_bank": Out(w.bank or 1), "out_addr": Out(w.bank_addr),
            "out_first": Out(1), "out_data": Out(32), "out_done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        m.submodules.local = local = Ram(32 * w.words, self.depth)
        write = local.write[0]
        m.d.comb += [write.addr.eq(self.mem_addr), write.data.eq(self.mem_data),
                     write.en.eq(self.mem_en)]
        edge = self._hold_edge(m)
        self._stream_products(m, local, edge)
        return m

    def _hold_edge(self, m: Module) -> "_HeldEdge":
        """Take an edge when free, ask for the G-PE, then count ``f_in`` reads after the
        grant."""
        w = Widths(self.config)
        holding, waiting, streaming = Signal(), Signal(), Signal()
        edge = _HeldEdge(
            streaming=streaming,
            slot=Signal(w.slot or 1, reset_less=True),
            dst=Signal(w.dst, reset_less=True),
            weight=Signal(32, reset_less=True),
            first=Signal(reset_less=True),
            last=Signal(reset_less=True),
            j=Signal(w.feat + 1),
            last_read=Signal(name="last_read"),
        )
        j = edge.j
        # ``j + 1 >= f_in`` (this read is the row's last) as a register set a cycle ahead: the
        # counter through the compare into ``free``, the queue's pop and its register enables
        # was the default preset's longest path
        last = edge.last_read
        m.d.comb += [self.free.eq(~holding | (streaming & last)),
                     self.req.eq(waiting), self.holding.eq(holding),
                     self.streaming.eq(streaming), self.slot.eq(edge.slot),
                     self.bank.eq(edge.dst[:w.bank] if w.bank else 0)]
        with m.If(waiting & self.grant):
            m.d.sync += [waiting.eq(0), streaming.eq(1), j.eq(0), last.eq(self.f_in <= 1)]
        with m.If(streaming):
            m.d.sync += [j.eq(j + 1), last.eq(j + 2 >= self.f_in)]
            with m.If(last):
                # the last read is issued now: the slot may be reused from the next cycle on
                m.d.sync += [streaming.eq(0), holding.eq(0)]
        # a new edge may arrive in the cycle of the last read (the read uses this cycle's slot)
        with m.If(self.assign_valid & self.free):
            m.d.sync += [holding.eq(1), waiting.eq(1), edge.slot.eq(self.assign_slot),
                         edge.dst.eq(self.assign_dst), edge.weight.eq(self.assign_weight),
                         edge.first.eq(self.assign_first)]
            if self.config.pipelined:
                m.d.sync += edge.last.eq(self.assign_last)
        return edge

    def _stream_products(self, m: Module, local: Ram, edge: "_HeldEdge"):
        """Read element j's beat; one cycle later pick the element and multiply it by the
        weight; the product leaves tagged with its bank address."""
        cfg = self.config
        w = Widths(cfg)
        j = edge.j
        read = local.read[0]
        # With 4 or more words per beat, each element is read a cycle ahead and its word
        # registered: the held edge's element 0 while it waits for the grant, element j + 1
        # while element j streams (past the row's end the read is not used). That local ring
        # is a RAM of 128 bits or more spread over several block RAMs, and its read data
        # through the word multiplexer into the multiplier's first stage was the default
        # preset's longest path. With 2 words the read-ahead's increment and register cost
        # more than they save (the small preset: 81.68 MHz mean over seeds 1-3 with it, 91.17
        # without). Either way the products keep their cycles.
        ahead = w.words >= 4
        j_read = Mux(edge.streaming, j + 1, 0) if ahead else j
        beat = j_read[w.word_bits:w.word_bits + w.beat] if w.beat else Const(0, 1)
        m.d.comb += read.addr.eq(Cat(beat, edge.slot) if w.beat else edge.slot)
        dst_row = edge.dst[w.bank:] if w.bank else edge.dst
        # every element of the first edge into a destination starts from +0
        meta0 = Cat(edge.streaming, self.bank, j[:w.feat], dst_row[:w.bank_row], edge.first,
                    *([edge.last & edge.last_read] if cfg.pipelined else []))
        meta1 = Signal(len(meta0))
        weight1 = Signal(32, reset_less=True)
        if ahead:
            element = Signal(32, name="element_r", reset_less=True)
            m.d.sync += [meta1.eq(meta0), weight1.eq(edge.weight),
                         element.eq(read.data.word_select(j[:w.word_bits], 32))]
        else:
            sel1 = Signal(max(w.word_bits, 1), reset_less=True)
            m.d.sync += [meta1.eq(meta0), sel1.eq(j[:w.word_bits] if w.word_bits else 0),
                         weight1.eq(edge.weight)]
            element = read.data.word_select(sel1, 32) if w.word_bits else read.data
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(latency=cfg.mul_latency))
        m.d.comb += [mul.i.valid.eq(meta1[0]), mul.i.payload.a.eq(element),
                     mul.i.payload.b.eq(weight1)]
        meta = delay(m, meta1, cfg.mul_latency, "smeta", reset_less=False)[-1]
        nb = w.bank or 1
        m.d.comb += [self.out_valid.eq(meta[0]), self.out_bank.eq(meta[1:1 + nb]),
                     self.out_addr.eq(meta[1 + nb:1 + nb + w.bank_addr]),
                     self.out_first.eq(meta[1 + nb + w.bank_addr]),
                     self.out_done.eq(meta[-1] if cfg.pipelined else 0),
                     self.out_data.eq(mul.o.payload)]


@dataclass
class _HeldEdge:
    """The edge a :class:`ScatterPE` holds (registers)."""

    streaming: Signal   # reading its source row, element ``j``
    slot: Signal        # ring slot of the source row
    dst: Signal
    weight: Signal
    first: Signal       # first edge into ``dst``
    last: Signal        # last edge into ``dst``
    j: Signal           # element read this cycle
    last_read: Signal   # element ``j`` is the row's last (``j + 1 >= f_in``)


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


class PEPair(wiring.Component):
    """One bank of the aggregate kernel: the queue of edges dispatched to it, the S-PE that
    streams their products, the G-PE that accumulates them into the bank's destination rows,
    and the spacing between two edges entering the G-PE.

    Members
    -------
    push : In(1); entry : In(edge_entry_layout(config))
        An edge for this bank (taken unless ``full``).
    full : Out(1)
        The queue holds ``edge_queue`` edges.
    f_in : In
        Elements per feature row.
    ring : In(RamWriteSignature(ring address bits, 32 * mem_words_per_cycle))
        The duplicator's broadcast write into the S-PE's copy of the feature ring.
    probe : In(slot bits) ; uses_probe : Out(1)
        A queued or held edge reads ring slot ``probe``.
    edges : Out(1)
        An edge is queued or held.
    streaming : Out(1)
        The S-PE streams an edge's products.
    products : Out(1)
        A product enters the G-PE this cycle.
    adding : Out(1)
        The G-PE has an addition in flight.
    act_addr : In ; act_data : Out(32)
        The G-PE bank's second read port (one cycle latency), for the update kernel.
    row_done, row_done_row : Out
        The G-PE's report of a row's last write (``pipelined`` configurations).
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        ring_depth = config.feature_slots * config.beats_per_row
        super().__init__({
            "push": In(1), "entry": In(edge_entry_layout(config)), "full": Out(1),
            "f_in": In(w.feat + 1),
            "ring": In(RamWriteSignature(bits_for(ring_depth), 32 * w.words)),
            "probe": In(w.slot or 1), "uses_probe": Out(1),
            "edges": Out(1), "streaming": Out(1), "products": Out(1), "adding": Out(1),
            "act_addr": In(w.bank_addr), "act_data": Out(32),
            "row_done": Out(1), "row_done_row": Out(max(w.bank_row, 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        Q = cfg.edge_queue
        m.submodules.queue = queue = EdgeQueue(edge_entry_layout(cfg), Q)
        m.submodules.spe = spe = ScatterPE(cfg)
        m.submodules.gpe = gpe = GatherPE(cfg)

        # -- the queue feeds the S-PE whenever it is free --------------------------------------
        pop = wire(m, (queue.level != 0) & spe.free, name="pop")
        head = queue.entries[0]
        m.d.comb += [queue.push.eq(self.push), queue.entry.eq(self.entry), queue.pop.eq(pop),
                     self.full.eq(queue.level == Q),
                     spe.assign_valid.eq(pop), spe.assign_slot.eq(head.slot),
                     spe.assign_dst.eq(head.dst), spe.assign_weight.eq(head.weight),
                     spe.assign_first.eq(head.first),
                     spe.assign_last.eq(head.last if cfg.pipelined else 0),
                     spe.f_in.eq(self.f_in), spe.mem_addr.eq(self.ring.addr),
                     spe.mem_data.eq(self.ring.data), spe.mem_en.eq(self.ring.en)]

        # -- the S-PE streams into the G-PE, one edge per gather slot ---------------------------
        m.d.comb += [spe.grant.eq(self._gather_spacing(m, spe.req)),
                     gpe.in_valid.eq(spe.out_valid), gpe.in_addr.eq(spe.out_addr),
                     gpe.in_first.eq(spe.out_first), gpe.in_data.eq(spe.out_data),
                     gpe.in_done.eq(spe.out_done),
                     self.row_done.eq(gpe.row_done), self.row_done_row.eq(gpe.row_done_row),
                     gpe.rd_addr.eq(self.act_addr), self.act_data.eq(gpe.rd_data)]

        queued_probe = [(queue.level > i) & (entry.slot == self.probe)
                        for i, entry in enumerate(queue.entries)]
        m.d.comb += [self.uses_probe.eq(Cat(spe.holding & (spe.slot == self.probe),
                                            *queued_probe).any()),
                     self.edges.eq(spe.holding | (queue.level != 0)),
                     self.streaming.eq(spe.streaming), self.products.eq(spe.out_valid),
                     self.adding.eq(gpe.busy)]
        return m

    def _gather_spacing(self, m: Module, req):
        """The grant of the S-PE's request: two edges into one bank are at least a gather
        slot (``max(f_in, add_latency + 3)`` cycles) apart."""
        cfg = self.config
        timer = Signal(range(max(cfg.max_feature_width, cfg.gather_slot) + 1), name="timer")
        grant = wire(m, req & (timer == 0), name="grant")
        slot_len = Mux(self.f_in > cfg.gather_slot, self.f_in, cfg.gather_slot)
        with m.If(grant):
            m.d.sync += timer.eq(slot_len - 1)
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        return grant


class FeatureDuplicator(wiring.Component):
    """Read each source's feature row once from external memory, ``mem_words_per_cycle``
    words per cycle, into the next free slot of the feature ring of every S-PE.

    Members
    -------
    start : In(1)
        Pulse: begin at source entry 0, ring slot 0.
    enable : In(1)
        The job runs and has no error.
    room : In(1)
        The ring has a free slot.
    n_sources, n_rows, f_in : In
        Source entries; feature rows in external memory (a source index at or beyond it is an
        error); elements per row. ``n_sources`` and ``n_rows`` are read at ``start`` and kept
        (the layer loads the next job's buffers while this one runs); ``f_in`` is held.
    src_addr : Out ; src_data : In(32)
        Read port of the source list (one cycle latency).
    mem_addr : Out ; mem_data : In(32 * mem_words_per_cycle)
        External-memory read port (one cycle latency).
    ring : Out(RamWriteSignature(ring address bits, 32 * mem_words_per_cycle))
        Broadcast write into the S-PEs' rings.
    fill : Out(RingFillSignature(config))
        A row is complete in its slot.
    advance : Out(1)
        The last beat of a row is read this cycle (the row takes a slot).
    written : Out(1)
        A beat is written into the ring this cycle.
    bad_source : Out(1)
        The source index read two cycles ago was out of range (its row is read and written,
        but its slot never becomes ready, so no edge reads it).
    all_fetched : Out(1)
        Every source row has been read.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        ring_depth = config.feature_slots * config.beats_per_row
        super().__init__({
            "start": In(1), "enable": In(1), "room": In(1),
            "n_sources": In(w.src + 1), "n_rows": In(w.src + 1), "f_in": In(w.feat + 1),
            "src_addr": Out(w.src), "src_data": In(32),
            "mem_addr": Out(w.src + w.beat), "mem_data": In(32 * w.words),
            "ring": Out(RamWriteSignature(bits_for(ring_depth), 32 * w.words)),
            "fill": Out(RingFillSignature(config)),
            "advance": Out(1), "written": Out(1), "bad_source": Out(1), "all_fetched": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        fill_src = Signal(w.src + 1)          # next source entry to fetch
        fill_ptr = Signal(w.slot or 1)
        beat = Signal(w.beat + 1)
        src_valid = Signal()                   # src_data holds entry fill_src
        beats_used = (self.f_in + (w.words - 1)) >> w.word_bits
        src_id = self.src_data[:16]
        src_count = self.src_data[16:32]
        # Flags and the next source entry kept in registers beside the counters (n_sources
        # and f_in are fixed for the job), so that the next source-list address is a choice
        # between registers: the beat and entry compares and the increment ahead of it ran
        # into the source buffer's address
        more = Signal(name="more_sources")           # fill_src < n_sources
        row_last = Signal(name="beat_last")          # beat is the row's last
        fill_src_p1 = Signal.like(fill_src, name="fill_src_p1")
        one_beat = beats_used <= 1
        can_fill = self.enable & src_valid & more & self.room
        # The fetch does not wait for the range check (the source buffer's read data through
        # a 16-bit compare into the fetch and the ring's count was the longest path), and the
        # check runs a cycle later on a registered copy of the index (the buffer's read data,
        # 5.6 ns after the clock, through the compare into a flag was the next one): a bad
        # source's row is read from an arbitrary address and written into its slot, but the
        # slot never becomes ready (the check is in time for a one-beat row's last write, and a
        # longer row's last write finds the flag held), so no edge reads it; the flag is
        # registered and raises the error a cycle after that, which stops the job.
        chk_id = Signal(16, name="src_check_id", reset_less=True)
        chk = Signal(name="src_check")
        m.d.sync += [chk_id.eq(src_id), chk.eq(can_fill)]
        # the job's sizes as read at start (no check runs in the start cycle)
        n_sources = Signal.like(self.n_sources, name="n_sources_job", reset_less=True)
        n_rows = Signal.like(self.n_rows, name="n_rows_job", reset_less=True)
        with m.If(self.start):
            m.d.sync += [n_sources.eq(self.n_sources), n_rows.eq(self.n_rows)]
        bad_now = wire(m, chk & (chk_id >= n_rows), name="bad_source_now")
        bad_seen = Signal(name="bad_source_seen")
        bad_source = Signal(name="bad_source_r")
        m.d.sync += [bad_source.eq(bad_now), bad_seen.eq(bad_seen | bad_now)]
        issue = wire(m, can_fill, name="dup_issue")
        advance = issue & row_last
        # (the next address does not wait for the range check: a bad source stops the job anyway)
        m.d.comb += [self.src_addr.eq(Mux(self.start, 0, Mux(can_fill & row_last, fill_src_p1,
                                                             fill_src))),
                     self.mem_addr.eq(Cat(beat[:w.beat], src_id[:w.src]) if w.beat
                                      else src_id[:w.src]),
                     self.bad_source.eq(bad_source), self.advance.eq(advance),
                     self.all_fetched.eq(fill_src >= n_sources)]
        # the read data arrives next cycle: write it into every S-PE's ring slot
        wr_en = Signal()
        wr_addr = Signal(len(self.ring.addr), reset_less=True)
        wr_last = Signal()
        wr_slot = Signal(w.slot or 1, reset_less=True)
        wr_count = Signal(16, reset_less=True)
        m.d.sync += [wr_en.eq(issue), wr_last.eq(advance), wr_slot.eq(fill_ptr),
                     wr_count.eq(src_count),
                     wr_addr.eq(Cat(beat[:w.beat], fill_ptr) if w.beat else fill_ptr)]
        m.d.comb += [self.ring.addr.eq(wr_addr), self.ring.data.eq(self.mem_data),
                     self.ring.en.eq(wr_en), self.written.eq(wr_en),
                     self.fill.valid.eq(wr_en & wr_last & ~bad_now & ~bad_seen),
                     self.fill.slot.eq(wr_slot),
                     self.fill.count.eq(wr_count)]
        with m.If(issue):
            m.d.sync += [beat.eq(beat + 1), row_last.eq(beat + 2 >= beats_used)]
            with m.If(row_last):
                m.d.sync += [beat.eq(0), fill_src.eq(fill_src_p1),
                             fill_src_p1.eq(fill_src_p1 + 1), fill_ptr.eq(fill_ptr + 1),
                             more.eq(fill_src_p1 < n_sources), row_last.eq(one_beat)]
        with m.If(self.start):
            m.d.sync += [fill_src.eq(0), fill_ptr.eq(0), beat.eq(0), src_valid.eq(1),
                         bad_source.eq(0), chk.eq(0), bad_seen.eq(0), fill_src_p1.eq(1),
                         more.eq(self.n_sources != 0), row_last.eq(one_beat)]
        return m


class FeatureRing(wiring.Component):
    """The slot table of the feature ring: which slots hold a row, and how many of the row's
    edges are still to be dispatched.

    Three pointers walk the ring: the duplicator fills slots in order, the dispatcher takes
    edges from slot ``disp`` (passing over a fully dispatched slot), and the head slot is
    released once fully dispatched and no queued or held edge reads it any more.

    Members
    -------
    start : In(1)
        Pulse: empty the ring.
    active : In(1)
        The job runs.
    fill : In(RingFillSignature(config))
        A row is complete in its slot.
    grow : In(1)
        A row takes a slot (its last beat is read).
    take : In(1)
        An edge of slot ``disp`` is dispatched.
    head_busy : In(1)
        A queued or held edge reads slot ``head``.
    head, disp : Out(slot bits)
        The oldest slot; the slot the dispatcher takes edges from.
    disp_avail : Out(1)
        Slot ``disp`` holds a row with edges left to dispatch.
    room, empty : Out(1)
        A slot is free; no slot is used.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        sb = Widths(config).slot or 1
        super().__init__({
            "start": In(1), "active": In(1), "fill": In(RingFillSignature(config)),
            "grow": In(1), "take": In(1), "head_busy": In(1),
            "head": Out(sb), "disp": Out(sb),
            "disp_avail": Out(1),
            "room": Out(1), "empty": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        K = self.config.feature_slots
        head_ptr = Signal(w.slot or 1)
        disp_ptr = Signal(w.slot or 1)
        used = Signal(range(K + 1))
        ready = Array(Signal(name=f"slot_ready{s}") for s in range(K))
        left = Array(Signal(16, name=f"slot_left{s}") for s in range(K))
        # ``left[s] != 0`` kept as a flag beside the count, so that the dispatcher's decision
        # reads one bit per slot through the pointer's multiplexer, not a 16-bit count and
        # its zero test (that path ran on into every edge queue)
        nz = Array(Signal(name=f"slot_nz{s}") for s in range(K))
        avail = Array(Signal(name=f"slot_avail{s}") for s in range(K))
        spent = Array(Signal(name=f"slot_spent{s}") for s in range(K))
        for s in range(K):
            m.d.comb += [avail[s].eq(ready[s] & nz[s]), spent[s].eq(ready[s] & ~nz[s])]
        m.d.comb += [self.head.eq(head_ptr), self.disp.eq(disp_ptr),
                     self.room.eq(used < K), self.empty.eq(used == 0)]
        # the pointer passes over a fully dispatched slot only if it is a fresh one (filled
        # since the pointer last passed it): slots not yet released behind the fill point are
        # spent too, and a pointer passing over them would go round the ring while it waits
        # for the next row, then meet that row's slot at a cycle that depends on where it was
        ahead = Signal(range(K + 1), name="disp_ahead")     # filled slots not yet passed
        fresh = Signal(name="disp_fresh")                   # ahead != 0, as a register
        adv = wire(m, self.active & spent[disp_ptr] & fresh, name="disp_pass")
        ahead_next = ahead + self.fill.valid - adv
        m.d.sync += [ahead.eq(ahead_next), fresh.eq(ahead_next != 0)]
        self._avail_ahead(m, disp_ptr, ready, left, avail, spent, adv)
        with m.If(self.fill.valid):
            m.d.sync += [ready[self.fill.slot].eq(1), left[self.fill.slot].eq(self.fill.count),
                         nz[self.fill.slot].eq(self.fill.count != 0)]
        for s in range(K):
            with m.If(self.take & (disp_ptr == s)):
                m.d.sync += [left[s].eq(left[s] - 1), nz[s].eq(left[s] != 1)]
        # a fully dispatched slot is passed over (unfilled slots are not ready: the pointer stops)
        with m.If(adv):
            m.d.sync += disp_ptr.eq(disp_ptr + 1)
        # release the head slot once it is dispatched and no queued or held edge still needs it
        head_done = spent[head_ptr]
        release = wire(m, self.active & head_done & ~self.head_busy, name="release")
        with m.If(release):
            m.d.sync += [ready[head_ptr].eq(0), head_ptr.eq(head_ptr + 1)]
        m.d.sync += used.eq(used + self.grow - release)
        with m.If(self.start):
            m.d.sync += [head_ptr.eq(0), disp_ptr.eq(0), used.eq(0), ahead.eq(0), fresh.eq(0)]
            m.d.sync += [ready[s].eq(0) for s in range(K)]
        return m

    def _avail_ahead(self, m: Module, disp_ptr, ready, left, avail, spent, adv):
        """``disp_avail`` as a register, set a cycle ahead to what ``ready[disp] & nz[disp]``
        will be: the dispatch decision then starts from one flip-flop instead of the slot
        flags through the pointer's multiplexer (that multiplexer, the decision and the slot
        counts' enables were the longest path at some placements).

        Next cycle's slot is ``disp + 1`` when the dispatcher passes over a spent slot (``adv``),
        else ``disp``. Only a fill changes a slot that is not ``disp`` (a slot ahead is released
        only once spent, and a spent slot holds no edges); ``disp`` itself changes by a fill
        (while the pointer waits at an unfilled slot) or by a take (it holds a row with edges,
        so no fill or release touches it that cycle). The take enters last, through one
        multiplexer, because it is the dispatch decision itself.
        """
        K = self.config.feature_slots
        fill = self.fill
        filled = [Signal(name=f"fill_to{s}") for s in range(K)]
        avail_nt = Array(Signal(name=f"slot_avail_nt{s}") for s in range(K))   # no take
        more = Array(Signal(name=f"slot_more{s}") for s in range(K))           # left > 1
        for s in range(K):
            m.d.comb += [filled[s].eq(fill.valid & (fill.slot == s)),
                         avail_nt[s].eq(Mux(filled[s], fill.count != 0, avail[s])),
                         more[s].eq(ready[s] & (left[s] != 1))]
        nxt = (disp_ptr + 1)[:len(disp_ptr)]
        same = Mux(self.take, more[disp_ptr], avail_nt[disp_ptr])
        avail_r = Signal(name="disp_avail_r")
        m.d.sync += avail_r.eq(Mux(adv, avail_nt[nxt], same))
        with m.If(self.start):
            m.d.sync += avail_r.eq(0)
        m.d.comb += self.disp_avail.eq(avail_r)


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


class AggregateKernel(wiring.Component):
    """n S-PEs, n G-PEs, the feature duplicator and the edge dispatcher.

    The blocks: a :class:`FeatureDuplicator` fills the ring of feature rows, a
    :class:`FeatureRing` keeps its slot table, an :class:`EdgeDispatcher` hands the edges to
    the banks, and n bank pairs (:class:`PEPair`: queue, S-PE, G-PE) multiply and accumulate
    them.

    Buffers belong to the layer; the kernel reads them through one-cycle read ports:
    the source list (``src_data``: source index in bits 0-15, out-edge count in bits 16-31), the
    edge list (``edge_data``: weight in bits 0-31, destination in bits 32-47, last-edge flag in
    bit 62, first-edge flag in bit 63) and the external feature memory (``mem_data``:
    ``mem_words_per_cycle`` elements).

    Members
    -------
    start : In(1)
        Pulse: clear the counters and aggregate ``n_sources`` sources / ``n_edges`` edges.
    n_sources, n_edges, n_rows, n_dst, f_in : In
        Job size; ``n_rows`` feature rows are loaded in external memory. The first three are
        read at ``start`` (they may change while the job runs); ``n_dst`` and ``f_in`` are held.
    done, busy : Out(1)
        ``done`` stays high from the end of the job (or an error) until the next ``start``.
    bad_job : In(3)
        Read at ``start``: the job's errors found before it runs (source, destination, edge
        count; the layer checks its lists as they load). Any bit set: the job reads and
        writes nothing, its flags are these bits, and ``done`` follows within two cycles.
    err_source, err_dest, err_edges : Out(1)
        A source index >= ``n_rows``; a destination >= ``n_dst``; the sources' out-edge counts
        disagree with ``n_edges`` (from ``bad_job``, or found while the job runs).
    act_dst, act_idx : In ; act_data : Out(32)
        Read port into the aggregated rows (one cycle latency), for the update kernel.
    row_done : Out(spes) ; row_done_rows : Out
        With ``pipelined``: bank ``b`` wrote the last sum of its row ``row_done_rows[b]`` (that
        is, of destination ``row * spes + b``) this cycle.
    feature_reads, words_read, spe_busy, stall_feature, stall_gather : Out(32)
        Rows read from external memory; elements read; S-PE streaming cycles (summed over
        S-PEs); cycles with a free S-PE and edges left but the next source row not resident;
        cycles with at least one S-PE waiting for its G-PE.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "start": In(1),
            "n_sources": In(w.src + 1), "n_edges": In(w.edge + 1), "n_rows": In(w.src + 1),
            "n_dst": In(w.dst + 1), "f_in": In(w.feat + 1),
            "done": Out(1), "busy": Out(1), "bad_job": In(3),
            "err_source": Out(1), "err_dest": Out(1), "err_edges": Out(1),
            "src_addr": Out(w.src), "src_data": In(32),
            "edge_addr": Out(w.edge), "edge_data": In(64),
            "mem_addr": Out(w.src + w.beat), "mem_data": In(32 * w.words),
            "act_dst": In(w.dst), "act_idx": In(w.feat), "act_data": Out(32),
            "row_done": Out(config.spes), "row_done_rows": Out(config.spes * max(w.bank_row, 1)),
            **counter_members(AGG_COUNTERS, COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        start = self.start
        active = Signal()
        error = Signal()
        m.d.comb += self.busy.eq(active)
        m.submodules.duplicator = dup = FeatureDuplicator(cfg)
        m.submodules.ring = ring = FeatureRing(cfg)
        m.submodules.dispatcher = disp = EdgeDispatcher(cfg)
        pairs = [PEPair(cfg) for _ in range(cfg.spes)]
        for b, pair in enumerate(pairs):
            m.submodules[f"pe{b}"] = pair

        # -- feature duplicator: source rows into the ring -------------------------------------
        m.d.comb += [dup.start.eq(start), dup.enable.eq(active & ~error), dup.room.eq(ring.room),
                     dup.n_sources.eq(self.n_sources), dup.n_rows.eq(self.n_rows),
                     dup.f_in.eq(self.f_in),
                     self.src_addr.eq(dup.src_addr), dup.src_data.eq(self.src_data),
                     self.mem_addr.eq(dup.mem_addr), dup.mem_data.eq(self.mem_data)]
        wiring.connect(m, dup.ring, *[pair.ring for pair in pairs])

        # -- the ring's slots ----------------------------------------------------------------
        wiring.connect(m, dup.fill, ring.fill)
        m.d.comb += [ring.start.eq(start), ring.active.eq(active), ring.grow.eq(dup.advance),
                     ring.take.eq(disp.dispatch),
                     ring.head_busy.eq(Cat(*[pair.uses_probe for pair in pairs]).any())]

        # -- dispatcher: each edge, in order, to the queue of the PE that owns its destination --
        m.d.comb += [disp.start.eq(start), disp.active.eq(active),
                     disp.enable.eq(active & ~error),
                     disp.n_edges.eq(self.n_edges), disp.n_dst.eq(self.n_dst),
                     self.edge_addr.eq(disp.edge_addr), disp.edge_data.eq(self.edge_data),
                     disp.slot.eq(ring.disp), disp.slot_avail.eq(ring.disp_avail),
                     disp.full.eq(Cat(*[pair.full for pair in pairs]))]
        rb = max(Widths(cfg).bank_row, 1)
        for b, pair in enumerate(pairs):
            m.d.comb += [pair.push.eq(disp.dispatch & (disp.bank == b)),
                         pair.entry.eq(disp.entry), pair.f_in.eq(self.f_in),
                         pair.probe.eq(ring.head),
                         self.row_done[b].eq(pair.row_done),
                         self.row_done_rows[b * rb:(b + 1) * rb].eq(pair.row_done_row)]

        self._update_port(m, pairs)
        self._finish(m, active, error, dup, ring, disp, pairs)
        self._count(m, active, error, dup, ring, disp, pairs)
        return m

    def _update_port(self, m: Module, pairs):
        """The read port into the aggregated rows: destination ``v`` is row ``v / n`` of bank
        ``v mod n``."""
        w = Widths(self.config)
        dst_row = self.act_dst[w.bank:] if w.bank else self.act_dst
        bank_sel = Signal(w.bank or 1, reset_less=True)
        m.d.sync += bank_sel.eq(self.act_dst[:w.bank] if w.bank else 0)
        for pair in pairs:
            m.d.comb += pair.act_addr.eq(Cat(self.act_idx, dst_row[:w.bank_row]))
        m.d.comb += self.act_data.eq(Array(pair.act_data for pair in pairs)[bank_sel])

    def _finish(self, m: Module, active, error, dup, ring, disp, pairs):
        """Start, completion and the error flags.

        The job is done once every source is fetched and released, every edge dispatched and
        streamed, and the last products have left the adders; an error stops it once the PEs
        are idle.
        """
        cfg = self.config
        spe_active = Cat(*[pair.edges for pair in pairs]).any()
        gpe_active = Cat(*[pair.adding for pair in pairs]).any()
        pipe_busy = Cat(*[pair.products for pair in pairs]).any()
        tail = Signal(range(cfg.mul_latency + 4))
        drained = active & dup.all_fetched & ring.empty
        finished = drained & ~disp.edges_left & ~spe_active
        extra = drained & disp.edges_left          # edges beyond the sources' counts
        with m.If(spe_active | pipe_busy | gpe_active):
            m.d.sync += tail.eq(cfg.mul_latency + 3)
        with m.Elif(tail != 0):
            m.d.sync += tail.eq(tail - 1)
        bad_source, bad_dest = dup.bad_source, disp.bad_dest
        with m.If(self.start):
            # a job found bad before it starts (``bad_job``) stops in its first cycles
            m.d.sync += [active.eq(1), self.done.eq(0), error.eq(self.bad_job.any()),
                         self.err_source.eq(self.bad_job[0]), self.err_dest.eq(self.bad_job[1]),
                         self.err_edges.eq(self.bad_job[2])]
        with m.Elif(active):
            with m.If(bad_source | bad_dest | disp.short | extra):
                m.d.sync += [error.eq(1), self.err_source.eq(self.err_source | bad_source),
                             self.err_dest.eq(self.err_dest | bad_dest),
                             self.err_edges.eq(self.err_edges | disp.short | extra)]
            with m.If(error & ~spe_active & ~pipe_busy & ~gpe_active):
                m.d.sync += [active.eq(0), self.done.eq(1)]
            with m.Elif(finished & ~pipe_busy & ~gpe_active & (tail == 0)):
                # every source fetched and released, every edge dispatched and streamed
                m.d.sync += [active.eq(0), self.done.eq(1)]

    def _count(self, m: Module, active, error, dup, ring, disp, pairs):
        """The kernel's counters (cleared at start, counting while active)."""
        w = Widths(self.config)
        beats_used = (self.f_in + (w.words - 1)) >> w.word_bits
        wr_en, wr_last = dup.written, dup.fill.valid
        streaming = Cat(*[pair.streaming for pair in pairs])
        count_events(m, counters_of(self, AGG_COUNTERS), {
            "feature_reads": wr_en & wr_last,
            "words_read": Mux(wr_en, Mux(wr_last, self.f_in - ((beats_used - 1) << w.word_bits),
                                         w.words), 0),
            "spe_busy": sum(streaming[k] for k in range(len(pairs))),
            "stall_feature": active & disp.edges_left & ~error
                             & ~ring.disp_avail,
            "stall_gather": disp.blocked,
        }, clear=self.start, enable=active)
