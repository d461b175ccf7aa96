"""HyScale-GNN feature duplicator and the feature ring's slot table (Sec. IV-C, Fig. 6).

Edges arrive sorted by source. The **feature duplicator** reads each source's feature row once
from external memory (``mem_words_per_cycle`` words per cycle) and broadcasts it into a ring of
``feature_slots`` rows held in every S-PE's local memory, ahead of use. The **feature ring**
keeps the slot table: which slots hold a row and how many of its edges are still to be
dispatched; a slot is reused once every edge of its source has been streamed.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import wire
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import (SOURCE_WORD_LAYOUT, RingSlotSignature, Widths,
                                       ring_write_signature)


class FeatureDuplicator(wiring.Component):
    """Read each source's feature row once from external memory, ``mem_words_per_cycle``
    words per cycle, into the next free slot of the feature ring of every S-PE.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: begin at source entry 0, ring slot 0.
    enable : In(1)
        The job runs and has no error.
    n_sources, n_rows, f_in : In
        Source entries; feature rows in external memory (a source index at or beyond it is an
        error); elements per row. ``n_sources`` and ``n_rows`` are read at ``start`` and kept
        (the layer loads the next job's buffers while this one runs); ``f_in`` is held.
    src_list : Out(RamReadSignature(source bits, SOURCE_WORD_LAYOUT))
        Read port of the source list (one cycle latency).
    features : Out(RamReadSignature(row beat bits, 32 * mem_words_per_cycle))
        External-memory read port (one cycle latency; it reads every cycle).
    ring : Out(RamWriteSignature(ring address bits, 32 * mem_words_per_cycle))
        Broadcast write into the S-PEs' rings.
    slots : Out(RingSlotSignature(config))
        The ring's slot table: a row takes a slot when its last beat is read (``claim``,
        only with ``room``), and fills it when that beat is written (``fill``).
    written : Out(1)
        A beat is written into the ring this cycle.
    bad_source : Out(1)
        The source index read two cycles ago was out of range (its row is read and written;
        the slot of a row of more than one beat never becomes ready, so no edge reads it).
    all_fetched : Out(1)
        Every source row has been read.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "start": In(1), "enable": In(1),
            "n_sources": In(w.src + 1), "n_rows": In(w.src + 1), "f_in": In(w.feat + 1),
            "src_list": Out(RamReadSignature(w.src, SOURCE_WORD_LAYOUT)),
            "features": Out(RamReadSignature(w.src + w.beat, 32 * w.words)),
            "ring": Out(ring_write_signature(config)),
            "slots": Out(RingSlotSignature(config)),
            "written": Out(1), "bad_source": Out(1), "all_fetched": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        fill_src = Signal(w.src + 1)          # next source entry to fetch
        fill_ptr = Signal(w.slot or 1)
        beat = Signal(w.beat + 1)
        src_valid = Signal()                   # the source list's data holds entry fill_src
        beats_used = (self.f_in + (w.words - 1)) >> w.word_bits
        src_id = self.src_list.data.index
        src_count = self.src_list.data.count
        slots = self.slots
        # Flags and the next source entry kept in registers beside the counters (n_sources
        # and f_in are fixed for the job), so that the next source-list address is a choice
        # between registers: the beat and entry compares and the increment ahead of it ran
        # into the source buffer's address
        more = Signal(name="more_sources")           # fill_src < n_sources
        row_last = Signal(name="beat_last")          # beat is the row's last
        fill_src_p1 = Signal.like(fill_src, name="fill_src_p1")
        one_beat = beats_used <= 1
        can_fill = self.enable & src_valid & more & slots.room
        # The fetch does not wait for the range check (the source buffer's read data through
        # a 16-bit compare into the fetch and the ring's count was the longest path), and the
        # check runs a cycle later on a registered copy of the index (the buffer's read data,
        # 5.6 ns after the clock, through the compare into a flag was the next one): a bad
        # source's row is read from an arbitrary address and written into its slot; a longer
        # row's last write finds the flag held, so its slot never becomes ready, and the flag,
        # registered, raises the error a cycle after the check, which stops the job. The check
        # does not gate the fill in its own cycle (its compare through the ring's fill into
        # the dispatch register was a long path): a one-beat row's slot may become ready in
        # the cycle before the error. In the layer no bad source reaches the duplicator: the
        # loaded list's largest index is checked at the job's start, which stops the job first.
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
        next_src = Mux(can_fill & row_last, fill_src_p1, fill_src)
        m.d.comb += [self.src_list.addr.eq(Mux(self.start, 0, next_src)),
                     self.features.addr.eq(Cat(beat[:w.beat], src_id[:w.src]) if w.beat
                                           else src_id[:w.src]),
                     self.bad_source.eq(bad_source), slots.claim.eq(advance),
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
        m.d.comb += [self.ring.addr.eq(wr_addr), self.ring.data.eq(self.features.data),
                     self.ring.en.eq(wr_en), self.written.eq(wr_en),
                     slots.fill.valid.eq(wr_en & wr_last & ~bad_seen),
                     slots.fill.slot.eq(wr_slot), slots.fill.count.eq(wr_count)]
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

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: empty the ring.
    active : In(1)
        The job runs.
    slots : In(RingSlotSignature(config))
        The duplicator's side: ``room`` (a slot is free), ``claim`` (a row takes a slot) and
        ``fill`` (a row is complete in its slot).
    edge_slots : Out(stream.Signature(slot bits))
        Slot ``disp``, valid while it holds a row with edges left to dispatch (from a
        register); each transfer is one of its edges dispatched.
    head_busy : In(1)
        A queued or held edge read slot ``head`` in the cycle before (the PEs' registered
        answers).
    head : Out(slot bits)
        The oldest slot.
    empty : Out(1)
        No slot is used.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        sb = Widths(config).slot or 1
        super().__init__({
            "start": In(1), "active": In(1), "slots": In(RingSlotSignature(config)),
            "edge_slots": Out(stream.Signature(sb)),
            "head_busy": In(1), "head": Out(sb), "empty": Out(1),
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
        fill = self.slots.fill
        take = self.edge_slots.valid & self.edge_slots.ready
        taken = Signal(name="take_r")
        taken_slot = Signal.like(disp_ptr, name="take_slot_r")
        m.d.sync += [taken.eq(take), taken_slot.eq(disp_ptr)]
        # a take's decrement not yet in its slot's count (``left[s]`` is one too many)
        pending = [taken & (taken_slot == s) for s in range(K)]
        m.d.comb += [self.head.eq(head_ptr), self.edge_slots.payload.eq(disp_ptr),
                     self.slots.room.eq(used < K), self.empty.eq(used == 0)]
        # the pointer passes over a fully dispatched slot only if it is a fresh one (filled
        # since the pointer last passed it): slots not yet released behind the fill point are
        # spent too, and a pointer passing over them would go round the ring while it waits
        # for the next row, then meet that row's slot at a cycle that depends on where it was
        ahead = Signal(range(K + 1), name="disp_ahead")     # filled slots not yet passed
        fresh = Signal(name="disp_fresh")                   # ahead != 0, as a register
        adv = wire(m, self.active & spent[disp_ptr] & fresh, name="disp_pass")
        ahead_next = ahead + fill.valid - adv
        m.d.sync += [ahead.eq(ahead_next), fresh.eq(ahead_next != 0)]
        self._avail_ahead(m, disp_ptr, ready, left, pending, avail, adv, take)
        with m.If(fill.valid):
            m.d.sync += [ready[fill.slot].eq(1), left[fill.slot].eq(fill.count),
                         nz[fill.slot].eq(fill.count != 0)]
        # a take decrements its slot's count a cycle later, from registers (the dispatch
        # decision fanned out to every slot's 16-bit count was a long path); the zero flag is
        # set in the take's cycle, from the count and a decrement still pending on it
        for s in range(K):
            with m.If(pending[s]):
                m.d.sync += left[s].eq(left[s] - 1)
            with m.If(take & (disp_ptr == s)):
                m.d.sync += nz[s].eq(Mux(pending[s], left[s] != 2, left[s] != 1))
        # a fully dispatched slot is passed over (unfilled slots are not ready: the pointer stops)
        with m.If(adv):
            m.d.sync += disp_ptr.eq(disp_ptr + 1)
        # release the head slot once it is dispatched and no queued or held edge still needs
        # it. ``head_busy`` answers for last cycle's head, so the release waits for a cycle in
        # which the same slot was the head and already fully dispatched (``head_spent``): no
        # edge of it enters a queue after that cycle, and none used it then, so none uses it
        # now. A release costs a cycle more, and releases are at least two cycles apart.
        head_spent = Signal(name="head_spent_r")
        release = wire(m, self.active & head_spent & ~self.head_busy, name="release")
        m.d.sync += head_spent.eq(spent[head_ptr] & ~release)
        with m.If(release):
            m.d.sync += [ready[head_ptr].eq(0), head_ptr.eq(head_ptr + 1)]
        m.d.sync += used.eq(used + self.slots.claim - release)
        with m.If(self.start):
            m.d.sync += [head_ptr.eq(0), disp_ptr.eq(0), used.eq(0), ahead.eq(0), fresh.eq(0),
                         head_spent.eq(0)]
            m.d.sync += [ready[s].eq(0) for s in range(K)]
        return m

    def _avail_ahead(self, m: Module, disp_ptr, ready, left, pending, avail, adv, take):
        """``edge_slots.valid`` as a register, set a cycle ahead to what ``ready[disp] & nz[disp]``
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
        fill = self.slots.fill
        filled = [Signal(name=f"fill_to{s}") for s in range(K)]
        avail_nt = Array(Signal(name=f"slot_avail_nt{s}") for s in range(K))   # no take
        more = Array(Signal(name=f"slot_more{s}") for s in range(K))           # left > 1
        for s in range(K):
            m.d.comb += [filled[s].eq(fill.valid & (fill.slot == s)),
                         avail_nt[s].eq(Mux(filled[s], fill.count != 0, avail[s])),
                         more[s].eq(ready[s] & Mux(pending[s], left[s] != 2,
                                                   left[s] != 1))]
        nxt = (disp_ptr + 1)[:len(disp_ptr)]
        same = Mux(take, more[disp_ptr], avail_nt[disp_ptr])
        avail_r = Signal(name="disp_avail_r")
        m.d.sync += avail_r.eq(Mux(adv, avail_nt[nxt], same))
        with m.If(self.start):
            m.d.sync += avail_r.eq(0)
        m.d.comb += self.edge_slots.valid.eq(avail_r)
