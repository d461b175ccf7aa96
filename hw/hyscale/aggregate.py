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

The blocks: :mod:`.duplicator` (feature duplicator, feature ring), :mod:`.dispatch` (edge
dispatcher, edge queues), :mod:`.scatter` (S-PE), :mod:`.gather` (G-PE); here the PE pair that
joins a queue, an S-PE and a G-PE, and the kernel that joins everything.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import bits_for, wire
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.ram import RamWriteSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.dispatch import EdgeDispatcher, EdgeQueue
from moagcn.hw.hyscale.duplicator import FeatureDuplicator, FeatureRing
from moagcn.hw.hyscale.gather import GatherPE
from moagcn.hw.hyscale.layouts import Widths, edge_entry_layout
from moagcn.hw.hyscale.protocol import AGG_COUNTERS, COUNTER_BITS
from moagcn.hw.hyscale.scatter import ScatterPE


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
