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
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.dispatch import EdgeDispatcher, EdgeQueue
from moagcn.hw.hyscale.duplicator import FeatureDuplicator, FeatureRing
from moagcn.hw.hyscale.gather import GatherPE
from moagcn.hw.hyscale.layouts import (EDGE_WORD_LAYOUT, SOURCE_WORD_LAYOUT, RowDoneSignature,
                                       RowReadSignature, Widths, edge_entry_layout,
                                       ring_write_signature)
from moagcn.hw.hyscale.protocol import AGG_COUNTERS, COUNTER_BITS
from moagcn.hw.hyscale.scatter import ScatterPE


class PEPair(wiring.Component):
    """One bank of the aggregate kernel: the queue of edges dispatched to it, the S-PE that
    streams their products, the G-PE that accumulates them into the bank's destination rows,
    and the spacing between two edges entering the G-PE.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    edges : In(stream.Signature(edge_entry_layout(config)))
        The edges dispatched to this bank, into the queue a cycle later through a register
        beside it (the dispatch decision, fanned out to every queue's pointers and flags over
        the die, was a long net). ``ready`` is always high: the dispatcher sends an edge only
        with a free place (a credit), and the register is one of the places it counts.
    f_in : In
        Elements per feature row.
    ring : In(RamWriteSignature(ring address bits, 32 * mem_words_per_cycle))
        The duplicator's broadcast write into the S-PE's copy of the feature ring.
    probe : In(slot bits) ; uses_probe : Out(1)
        An edge held, queued or entering the queue read ring slot ``probe`` in the cycle
        before (a register: the probe comes from the ring and the answer goes back into it,
        and the round trip through every PE's queue in one cycle was the longest path at some
        placements). Every such edge is compared; only the oldest can match (see the code).
    credit : Out(1)
        The queue handed an edge to the S-PE in the cycle before (the place is free again).
    has_edges : Out(1)
        An edge was entering the queue, queued or held in the cycle before (a register: the
        four pairs' status, gathered into the kernel's end test in one cycle, was a long
        path).
    streaming : Out(1)
        The S-PE streams an edge's products.
    producing : Out(1)
        A product enters the G-PE this cycle.
    adding : Out(1)
        The G-PE has an addition in flight.
    act : In(RamReadSignature(bank address bits, 32))
        The G-PE bank's second read port (two cycles latency), for the update kernel.
    row_done : Out(RowDoneSignature(config))
        The G-PE's report of a row's last write (``pipelined`` configurations).
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "edges": In(stream.Signature(edge_entry_layout(config))),
            "f_in": In(w.feat + 1),
            "ring": In(ring_write_signature(config)),
            "probe": In(w.slot or 1), "uses_probe": Out(1),
            "credit": Out(1), "has_edges": Out(1), "streaming": Out(1), "producing": Out(1),
            "adding": Out(1),
            "act": In(RamReadSignature(w.bank_addr, 32)),
            "row_done": Out(RowDoneSignature(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.queue = queue = EdgeQueue(edge_entry_layout(cfg), cfg.edge_queue)
        m.submodules.spe = spe = ScatterPE(cfg)
        m.submodules.gpe = gpe = GatherPE(cfg)

        # -- edges into the queue (through a register), and from it into the S-PE whenever
        # the S-PE is free ------------------------------------------------------------------
        in_valid = Signal(name="edge_in_valid")
        in_entry = Signal(edge_entry_layout(cfg), name="edge_in", reset_less=True)
        m.d.sync += [in_valid.eq(self.edges.valid), in_entry.eq(self.edges.payload)]
        m.d.comb += [self.edges.ready.eq(1), queue.i.valid.eq(in_valid),
                     queue.i.payload.eq(in_entry)]
        wiring.connect(m, queue.o, spe.edges)
        wiring.connect(m, wiring.flipped(self.ring), spe.ring)
        m.d.comb += spe.f_in.eq(self.f_in)

        # -- the S-PE streams into the G-PE, one edge per gather slot ---------------------------
        m.d.comb += spe.grant.eq(self._gather_spacing(m, spe.req))
        wiring.connect(m, spe.products, gpe.products)
        wiring.connect(m, gpe.row_done, wiring.flipped(self.row_done))
        wiring.connect(m, wiring.flipped(self.act), gpe.act)

        # Every edge in the bank, held, queued or on its way in, is compared with the probe,
        # each from its own register (the queue's head through the read pointer's multiplexer
        # was a long path). Only the oldest could match: the bank takes its edges in dispatch
        # order, which is ring order, and every slot before the ring's head is released, which
        # needs no edge of it left anywhere.
        reads = [spe.holding & (spe.slot == self.probe),
                 in_valid & (in_entry.slot == self.probe),
                 *[queue.held[k] & (queue.entries[k].slot == self.probe)
                   for k in range(cfg.edge_queue)]]
        m.d.sync += self.uses_probe.eq(Cat(*reads).any())
        m.d.sync += [self.has_edges.eq(spe.holding | queue.o.valid | in_valid),
                     self.credit.eq(queue.o.valid & queue.o.ready)]
        m.d.comb += [self.streaming.eq(spe.streaming), self.producing.eq(spe.products.valid),
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

    Buffers belong to the layer; the kernel reads them through one-cycle read ports: the
    source list (words of :data:`~.layouts.SOURCE_WORD_LAYOUT`: source index, out-edge count),
    the edge list (words of :data:`~.layouts.EDGE_WORD_LAYOUT`: weight, destination, last- and
    first-edge flags) and the external feature memory (``mem_words_per_cycle`` elements a
    beat).

    Parameters
    ----------
    config : HyScaleConfig

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
    src_list : Out(RamReadSignature(source bits, SOURCE_WORD_LAYOUT))
    edge_list : Out(RamReadSignature(edge bits, EDGE_WORD_LAYOUT))
    features : Out(RamReadSignature(row beat bits, 32 * mem_words_per_cycle))
        The read ports of the source list, the edge list and the external feature memory
        (``features`` reads every cycle: its ``en`` is always high).
    act : In(RowReadSignature(config))
        Read port into the aggregated rows (two cycles latency), for the update kernel.
    rows_done : Out(RowDoneSignature(config)).array(spes)
        With ``pipelined``: bank ``b`` wrote the last sum of its row ``rows_done[b].row`` (that
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
            "src_list": Out(RamReadSignature(w.src, SOURCE_WORD_LAYOUT)),
            "edge_list": Out(RamReadSignature(w.edge, EDGE_WORD_LAYOUT)),
            "features": Out(RamReadSignature(w.src + w.beat, 32 * w.words)),
            "act": In(RowReadSignature(config)),
            "rows_done": Out(RowDoneSignature(config)).array(config.spes),
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
        m.d.comb += [dup.start.eq(start), dup.enable.eq(active & ~error),
                     dup.n_sources.eq(self.n_sources), dup.n_rows.eq(self.n_rows),
                     dup.f_in.eq(self.f_in)]
        wiring.connect(m, dup.src_list, wiring.flipped(self.src_list))
        wiring.connect(m, dup.features, wiring.flipped(self.features))
        wiring.connect(m, dup.ring, *[pair.ring for pair in pairs])

        # -- the ring's slots ----------------------------------------------------------------
        wiring.connect(m, dup.slots, ring.slots)
        m.d.comb += [ring.start.eq(start), ring.active.eq(active),
                     ring.head_busy.eq(Cat(*[pair.uses_probe for pair in pairs]).any())]

        # -- dispatcher: each edge, in order, to the queue of the PE that owns its destination --
        m.d.comb += [disp.start.eq(start), disp.active.eq(active),
                     disp.enable.eq(active & ~error),
                     disp.n_edges.eq(self.n_edges), disp.n_dst.eq(self.n_dst)]
        wiring.connect(m, disp.edge_list, wiring.flipped(self.edge_list))
        wiring.connect(m, ring.edge_slots, disp.edge_slots)
        for b, pair in enumerate(pairs):
            wiring.connect(m, disp.queues[b], pair.edges)
            wiring.connect(m, pair.row_done, wiring.flipped(self.rows_done[b]))
            m.d.comb += [pair.f_in.eq(self.f_in), pair.probe.eq(ring.head),
                         disp.credits[b].eq(pair.credit)]

        self._update_port(m, pairs)
        self._finish(m, active, error, dup, ring, disp, pairs)
        self._count(m, active, error, dup, ring, disp, pairs)
        return m

    def _update_port(self, m: Module, pairs):
        """The read port into the aggregated rows: destination ``v`` is row ``v / n`` of bank
        ``v mod n``."""
        w = Widths(self.config)
        act = self.act
        dst_row = act.row[w.bank:] if w.bank else act.row
        # the bank of the read, kept until its data leaves the G-PE's output register
        bank_sel = [Signal(w.bank or 1, name=f"bank_sel{k}", reset_less=True) for k in (1, 2)]
        m.d.sync += [bank_sel[0].eq(act.row[:w.bank] if w.bank else 0),
                     bank_sel[1].eq(bank_sel[0])]
        for pair in pairs:
            m.d.comb += pair.act.addr.eq(Cat(act.idx, dst_row[:w.bank_row]))
        m.d.comb += act.data.eq(Array(pair.act.data for pair in pairs)[bank_sel[1]])

    def _finish(self, m: Module, active, error, dup, ring, disp, pairs):
        """Start, completion and the error flags.

        The job is done once every source is fetched and released, every edge dispatched and
        streamed, and the last products have left the adders; an error stops it once the PEs
        are idle.
        """
        cfg = self.config
        # edges queued or held in the cycle before, or entering a queue now: registers only
        # (the pairs' status is a cycle old, the dispatcher's ``sent`` covers the edge that
        # was on its way into a queue then)
        spe_active_r = Cat(*[pair.has_edges for pair in pairs]).any()
        edges_in_pairs = spe_active_r | disp.sent
        gpe_active = Cat(*[pair.adding for pair in pairs]).any()
        pipe_busy = Cat(*[pair.producing for pair in pairs]).any()
        tail = Signal(range(cfg.mul_latency + 4))
        # every slot released implies every edge streamed: a slot is released only once all
        # its edges are dispatched and no PE holds or queues one of them
        drained = active & dup.all_fetched & ring.empty
        finished = drained & ~disp.edges_left & ~edges_in_pairs
        extra = drained & disp.edges_left          # edges beyond the sources' counts
        # ``tail``: mul_latency + 3 cycles after the last cycle with an edge in a pair or a
        # product or addition in flight (the pairs' status arrives a cycle late, so it
        # reloads one less)
        with m.If(pipe_busy | gpe_active):
            m.d.sync += tail.eq(cfg.mul_latency + 3)
        with m.Elif(spe_active_r):
            m.d.sync += tail.eq(cfg.mul_latency + 2)
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
            with m.If(error & ~edges_in_pairs & ~pipe_busy & ~gpe_active):
                m.d.sync += [active.eq(0), self.done.eq(1)]
            with m.Elif(finished & ~pipe_busy & ~gpe_active & (tail == 0)):
                # every source fetched and released, every edge dispatched and streamed
                m.d.sync += [active.eq(0), self.done.eq(1)]

    def _count(self, m: Module, active, error, dup, ring, disp, pairs):
        """The kernel's counters (cleared at start, counting while active)."""
        w = Widths(self.config)
        beats_used = (self.f_in + (w.words - 1)) >> w.word_bits
        wr_en, wr_last = dup.written, dup.slots.fill.valid
        streaming = Cat(*[pair.streaming for pair in pairs])
        count_events(m, counters_of(self, AGG_COUNTERS), {
            "feature_reads": wr_en & wr_last,
            "words_read": Mux(wr_en, Mux(wr_last, self.f_in - ((beats_used - 1) << w.word_bits),
                                         w.words), 0),
            "spe_busy": sum(streaming[k] for k in range(len(pairs))),
            "stall_feature": active & disp.edges_left & ~error & ~ring.edge_slots.valid,
            "stall_gather": disp.blocked,
        }, clear=self.start, enable=active)
