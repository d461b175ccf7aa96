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
are at least ``max(f_in, add_latency + 2)`` cycles apart, so a read never overtakes the write
of the same element.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arith import Fp32Adder, Fp32AddConfig, Fp32MulConfig, Fp32Multiplier
from ..common.bits import wire
from ..common.ram import Ram
from .config import HyScaleConfig
from .protocol import AGG_COUNTERS, COUNTER_BITS


def log2(x: int) -> int:
    """log2 of a power of two."""
    return x.bit_length() - 1


def bits_for(n: int) -> int:
    """Bits of an index 0..n-1 (at least one)."""
    return max(n - 1, 1).bit_length()


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


def delay(m: Module, value, cycles: int, name: str, reset_less: bool = True):
    """``value`` delayed by ``cycles`` registers (a list of the stages; [0] is ``value``).

    Lines that carry a valid bit are reset (``reset_less=False``), so that no simulator sees an
    undefined valid after reset; pure data lines are not.
    """
    stages = [value]
    for k in range(cycles):
        reg = Signal(len(value), name=f"{name}_d{k + 1}", reset_less=reset_less)
        m.d.sync += reg.eq(stages[-1])
        stages.append(reg)
    return stages


class GatherPE(wiring.Component):
    """One bank of destination rows and its binary32 adder.

    Members
    -------
    in_valid, in_addr, in_first, in_data : In
        One product for element ``in_addr`` of the bank; ``in_first``: start from ``+0``.
    rd_addr : In, rd_data : Out
        Second read port of the bank (one cycle latency), for the update kernel.
    busy : Out(1)
        An addition is in flight.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = (config.max_destinations // config.spes) * config.max_feature_width
        super().__init__({
            "in_valid": In(1), "in_addr": In(w.bank_addr), "in_first": In(1), "in_data": In(32),
            "rd_addr": In(w.bank_addr), "rd_data": Out(32), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.bank = bank = Ram(32, self.depth, read_ports=2)
        (a0, d0), (a1, d1) = bank.read(0), bank.read(1)
        m.d.comb += [a0.eq(self.in_addr), a1.eq(self.rd_addr), self.rd_data.eq(d1)]
        # stage 1: the old partial sum is out of the RAM; the product waits one cycle for it
        valid1 = Signal()
        first1 = Signal(reset_less=True)
        data1 = Signal(32, reset_less=True)
        addr1 = Signal(len(self.in_addr), reset_less=True)
        m.d.sync += [valid1.eq(self.in_valid), first1.eq(self.in_first), data1.eq(self.in_data),
                     addr1.eq(self.in_addr)]
        m.submodules.adder = adder = Fp32Adder(Fp32AddConfig(latency=cfg.add_latency))
        m.d.comb += [adder.i.valid.eq(valid1), adder.i.payload.a.eq(data1),
                     adder.i.payload.b.eq(Mux(first1, 0, d0))]
        addr_out = delay(m, addr1, cfg.add_latency, "gaddr")[-1]
        wa, wd, we = bank.write(0)
        m.d.comb += [wa.eq(addr_out), wd.eq(adder.o.payload), we.eq(adder.o.valid)]
        inflight = delay(m, valid1, cfg.add_latency, "gvalid", reset_less=False)
        m.d.comb += self.busy.eq(self.in_valid | Cat(*inflight).any())
        return m


class ScatterPE(wiring.Component):
    """One scatter PE: a local copy of the feature ring and a binary32 multiplier.

    It takes an edge (``assign_*``) when ``free``, asks its G-PE for the bank with ``req`` /
    ``bank``, and after ``grant`` reads one element per cycle for ``f_in`` cycles; the products
    leave on ``out_*`` ``1 + mul_latency`` cycles after each read, tagged with their bank address.

    Members
    -------
    assign_valid, assign_slot, assign_dst, assign_weight, assign_first : In
    free, req, holding, streaming : Out(1)
    bank : Out ; slot : Out
        The bank of the held edge, and the ring slot its source row occupies.
    grant : In(1)
    f_in : In
    mem_addr, mem_data, mem_en : In
        Broadcast write port of the local feature memory.
    out_valid, out_bank, out_addr, out_first, out_data : Out
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = config.feature_slots * config.beats_per_row
        super().__init__({
            "assign_valid": In(1), "assign_slot": In(w.slot or 1), "assign_dst": In(w.dst),
            "assign_weight": In(32), "assign_first": In(1),
            "free": Out(1), "req": Out(1), "holding": Out(1), "streaming": Out(1),
            "bank": Out(w.bank or 1), "slot": Out(w.slot or 1), "grant": In(1),
            "f_in": In(w.feat + 1),
            "mem_addr": In(bits_for(self.depth)), "mem_data": In(32 * config.mem_words_per_cycle),
            "mem_en": In(1),
            "out_valid": Out(1), "out_bank": Out(w.bank or 1), "out_addr": Out(w.bank_addr),
            "out_first": Out(1), "out_data": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = Widths(cfg)
        m.submodules.local = local = Ram(32 * w.words, self.depth)
        wa, wd, we = local.write(0)
        m.d.comb += [wa.eq(self.mem_addr), wd.eq(self.mem_data), we.eq(self.mem_en)]

        holding, waiting, streaming = Signal(), Signal(), Signal()
        slot = Signal(w.slot or 1, reset_less=True)
        dst = Signal(w.dst, reset_less=True)
        weight = Signal(32, reset_less=True)
        first = Signal(reset_less=True)
        j = Signal(w.feat + 1)
        m.d.comb += [self.free.eq(~holding | (streaming & (j + 1 >= self.f_in))),
                     self.req.eq(waiting), self.holding.eq(holding),
                     self.streaming.eq(streaming), self.slot.eq(slot),
                     self.bank.eq(dst[:w.bank] if w.bank else 0)]
        with m.If(waiting & self.grant):
            m.d.sync += [waiting.eq(0), streaming.eq(1), j.eq(0)]
        last = j + 1 >= self.f_in
        with m.If(streaming):
            m.d.sync += j.eq(j + 1)
            with m.If(last):
                # the last read is issued now: the slot may be reused from the next cycle on
                m.d.sync += [streaming.eq(0), holding.eq(0)]
        # a new edge may arrive in the cycle of the last read (the read uses this cycle's slot)
        with m.If(self.assign_valid & self.free):
            m.d.sync += [holding.eq(1), waiting.eq(1), slot.eq(self.assign_slot),
                         dst.eq(self.assign_dst), weight.eq(self.assign_weight),
                         first.eq(self.assign_first)]

        # read j's beat; one cycle later pick the element and multiply
        ra, rd = local.read(0)
        beat = j[w.word_bits:w.word_bits + w.beat] if w.beat else Const(0, 1)
        m.d.comb += ra.eq(Cat(beat, slot) if w.beat else slot)
        dst_row = dst[w.bank:] if w.bank else dst
        # every element of the first edge into a destination starts from +0
        meta0 = Cat(streaming, self.bank, j[:w.feat], dst_row[:w.bank_row], first)
        meta1 = Signal(len(meta0))
        sel1 = Signal(max(w.word_bits, 1), reset_less=True)
        weight1 = Signal(32, reset_less=True)
        m.d.sync += [meta1.eq(meta0), sel1.eq(j[:w.word_bits] if w.word_bits else 0),
                     weight1.eq(weight)]
        element = rd.word_select(sel1, 32) if w.word_bits else rd
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(latency=cfg.mul_latency))
        m.d.comb += [mul.i.valid.eq(meta1[0]), mul.i.payload.a.eq(element),
                     mul.i.payload.b.eq(weight1)]
        meta = delay(m, meta1, cfg.mul_latency, "smeta", reset_less=False)[-1]
        nb = w.bank or 1
        m.d.comb += [self.out_valid.eq(meta[0]), self.out_bank.eq(meta[1:1 + nb]),
                     self.out_addr.eq(meta[1 + nb:1 + nb + w.bank_addr]),
                     self.out_first.eq(meta[-1]), self.out_data.eq(mul.o.payload)]
        return m


class AggregateKernel(wiring.Component):
    """n S-PEs, n G-PEs, the feature duplicator and the edge dispatcher.

    Buffers belong to the layer; the kernel reads them through one-cycle read ports:
    the source list (``src_data``: source index in bits 0-15, out-edge count in bits 16-31), the
    edge list (``edge_data``: weight in bits 0-31, destination in bits 32-47, first-edge flag in
    bit 63) and the external feature memory (``mem_data``: ``mem_words_per_cycle`` elements).

    Members
    -------
    start : In(1)
        Pulse: clear the counters and aggregate ``n_sources`` sources / ``n_edges`` edges.
    n_sources, n_edges, n_rows, n_dst, f_in : In
        Job size; ``n_rows`` feature rows are loaded in external memory.
    done, busy : Out(1)
        ``done`` stays high from the end of the job (or an error) until the next ``start``.
    err_source, err_dest, err_edges : Out(1)
        A source index >= ``n_rows``; a destination >= ``n_dst``; the sources' out-edge counts
        disagree with ``n_edges``.
    act_dst, act_idx : In ; act_data : Out(32)
        Read port into the aggregated rows (one cycle latency), for the update kernel.
    feature_reads, words_read, spe_busy, stall_feature, stall_gather : Out(32)
        Rows read from external memory; elements read; S-PE streaming cycles (summed over
        S-PEs); cycles with a free S-PE and edges left but the next source row not resident;
        cycles with at least one S-PE waiting for its G-PE.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        members = {
            "start": In(1),
            "n_sources": In(w.src + 1), "n_edges": In(w.edge + 1), "n_rows": In(w.src + 1),
            "n_dst": In(w.dst + 1), "f_in": In(w.feat + 1),
            "done": Out(1), "busy": Out(1),
            "err_source": Out(1), "err_dest": Out(1), "err_edges": Out(1),
            "src_addr": Out(w.src), "src_data": In(32),
            "edge_addr": Out(w.edge), "edge_data": In(64),
            "mem_addr": Out(w.src + w.beat), "mem_data": In(32 * w.words),
            "act_dst": In(w.dst), "act_idx": In(w.feat), "act_data": Out(32),
        }
        for name in AGG_COUNTERS:
            members[name] = Out(COUNTER_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = Widths(cfg)
        n = cfg.spes
        K = cfg.feature_slots
        spes = [ScatterPE(cfg) for _ in range(n)]
        gpes = [GatherPE(cfg) for _ in range(n)]
        for k, (s, g) in enumerate(zip(spes, gpes)):
            m.submodules[f"spe{k}"] = s
            m.submodules[f"gpe{k}"] = g
            m.d.comb += s.f_in.eq(self.f_in)

        active = Signal()
        start = self.start
        error = Signal()
        m.d.comb += self.busy.eq(active)

        # -- feature duplicator ------------------------------------------------------------------
        fill_src = Signal(w.src + 1)          # next source entry to fetch
        fill_ptr = Signal(w.slot or 1)
        head_ptr = Signal(w.slot or 1)
        disp_ptr = Signal(w.slot or 1)
        used = Signal(range(K + 1))
        ready = Array(Signal(name=f"slot_ready{s}") for s in range(K))
        left = Array(Signal(16, name=f"slot_left{s}") for s in range(K))
        beat = Signal(w.beat + 1)
        src_valid = Signal()                   # src_data holds entry fill_src
        beats_used = (self.f_in + (w.words - 1)) >> w.word_bits
        src_id = self.src_data[:16]
        src_count = self.src_data[16:32]
        can_fill = active & ~error & src_valid & (fill_src < self.n_sources) & (used < K)
        bad_source = can_fill & (src_id >= self.n_rows)
        issue = wire(m, can_fill & ~bad_source, name="dup_issue")
        row_last = beat + 1 >= beats_used
        advance = issue & row_last
        # (the next address does not wait for the range check: a bad source stops the job anyway)
        m.d.comb += [self.src_addr.eq(Mux(start, 0, Mux(can_fill & row_last, fill_src + 1,
                                                        fill_src))),
                     self.mem_addr.eq(Cat(beat[:w.beat], src_id[:w.src]) if w.beat
                                      else src_id[:w.src])]
        # the read data arrives next cycle: write it into every S-PE's ring slot
        wr_en = Signal()
        wr_addr = Signal(len(spes[0].mem_addr), reset_less=True)
        wr_last = Signal()
        wr_slot = Signal(w.slot or 1, reset_less=True)
        wr_count = Signal(16, reset_less=True)
        m.d.sync += [wr_en.eq(issue), wr_last.eq(advance), wr_slot.eq(fill_ptr),
                     wr_count.eq(src_count),
                     wr_addr.eq(Cat(beat[:w.beat], fill_ptr) if w.beat else fill_ptr)]
        for s in spes:
            m.d.comb += [s.mem_addr.eq(wr_addr), s.mem_data.eq(self.mem_data),
                         s.mem_en.eq(wr_en)]
        with m.If(issue):
            m.d.sync += beat.eq(beat + 1)
            with m.If(row_last):
                m.d.sync += [beat.eq(0), fill_src.eq(fill_src + 1),
                             fill_ptr.eq(fill_ptr + 1)]
        with m.If(wr_en & wr_last):
            m.d.sync += [ready[wr_slot].eq(1), left[wr_slot].eq(wr_count)]

        # -- dispatcher: each edge, in order, to the queue of the PE that owns its destination --
        e_ptr = Signal(w.edge + 1)            # edges dispatched
        # a two-entry prefetch buffer in front of the dispatcher: the edge buffer's address is
        # a register, so its read data never feeds back into the next address in one cycle
        rd_ptr = Signal(w.edge + 1)
        inflight = Signal()
        occ = Signal(range(3))
        stage = [Signal(64, name=f"edge_stage{i}", reset_less=True) for i in range(2)]
        edge_valid = occ != 0
        Q = cfg.edge_queue
        disp_ready = ready[disp_ptr]
        disp_left = left[disp_ptr]
        edges_left = e_ptr < self.n_edges
        e_weight = stage[0][:32]
        e_dst = stage[0][32:48]
        e_first = stage[0][63]
        e_bank = e_dst[:w.bank] if w.bank else 0
        want = active & ~error & disp_ready & (disp_left != 0)
        bad_dest = want & edge_valid & edges_left & (e_dst >= self.n_dst)
        short = want & ~edges_left                 # counts promise more edges than loaded
        entry = Cat(disp_ptr, e_dst[:w.dst], e_weight, e_first)
        queues = []
        for b in range(n):
            q = [Signal(len(entry), name=f"q{b}_{i}", reset_less=True) for i in range(Q)]
            count = Signal(range(Q + 1), name=f"q{b}_count")
            queues.append((q, count))
        target_full = Array(count == Q for _, count in queues)[e_bank]
        dispatch = wire(m, want & edge_valid & edges_left & ~target_full & ~bad_dest,
                        name="dispatch")
        m.d.comb += self.edge_addr.eq(rd_ptr)
        fetch = active & (rd_ptr < self.n_edges) & (occ + inflight - dispatch < 2)
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
            m.d.sync += [e_ptr.eq(e_ptr + 1), left[disp_ptr].eq(disp_left - 1)]
        # a fully dispatched slot is passed over (unfilled slots are not ready: the pointer stops)
        with m.If(active & disp_ready & (disp_left == 0)):
            m.d.sync += disp_ptr.eq(disp_ptr + 1)

        sb = w.slot or 1
        queued_slots = []
        for b, ((q, count), spe, gpe) in enumerate(zip(queues, spes, gpes)):
            push = dispatch & (e_bank == b)
            pop = wire(m, (count != 0) & spe.free, name=f"pop{b}")
            head = q[0]
            m.d.comb += [spe.assign_valid.eq(pop), spe.assign_slot.eq(head[:sb]),
                         spe.assign_dst.eq(head[sb:sb + w.dst]),
                         spe.assign_weight.eq(head[sb + w.dst:sb + w.dst + 32]),
                         spe.assign_first.eq(head[-1])]
            # shift-register FIFO: a pop shifts, a push writes behind the remaining entries
            with m.If(pop):
                for i in range(Q - 1):
                    m.d.sync += q[i].eq(q[i + 1])
            with m.If(push):
                tail = Mux(pop, count - 1, count)
                for i in range(Q):
                    with m.If(tail == i):
                        m.d.sync += q[i].eq(entry)
            m.d.sync += count.eq(count + push - pop)
            queued_slots += [(count > i) & (q[i][:sb] == head_ptr) for i in range(Q)]
            # the G-PE's spacing: two edges into one bank are at least a gather slot apart
            timer = Signal(range(max(cfg.max_feature_width, cfg.gather_slot) + 1),
                           name=f"g{b}_timer")
            grant = wire(m, spe.req & (timer == 0), name=f"grant{b}")
            slot_len = Mux(self.f_in > cfg.gather_slot, self.f_in, cfg.gather_slot)
            with m.If(grant):
                m.d.sync += timer.eq(slot_len - 1)
            with m.Elif(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            m.d.comb += [spe.grant.eq(grant), gpe.in_valid.eq(spe.out_valid),
                         gpe.in_addr.eq(spe.out_addr), gpe.in_first.eq(spe.out_first),
                         gpe.in_data.eq(spe.out_data)]
        queued = Cat(*[count != 0 for _, count in queues]).any()

        # release the head slot once it is dispatched and no queued or held edge still needs it
        head_in_use = Cat(*[s.holding & (s.slot == head_ptr) for s in spes],
                          *queued_slots).any()
        head_done = ready[head_ptr] & (left[head_ptr] == 0)
        release = wire(m, active & head_done & ~head_in_use, name="release")
        with m.If(release):
            m.d.sync += [ready[head_ptr].eq(0), head_ptr.eq(head_ptr + 1)]
        m.d.sync += used.eq(used + advance - release)

        # -- read port for the update kernel -----------------------------------------------------
        dst_row = self.act_dst[w.bank:] if w.bank else self.act_dst
        bank_sel = Signal(w.bank or 1, reset_less=True)
        m.d.sync += bank_sel.eq(self.act_dst[:w.bank] if w.bank else 0)
        for g in gpes:
            m.d.comb += g.rd_addr.eq(Cat(self.act_idx, dst_row[:w.bank_row]))
        m.d.comb += self.act_data.eq(Array(g.rd_data for g in gpes)[bank_sel])

        # -- completion, errors, counters --------------------------------------------------------
        spe_active = Cat(*[s.holding for s in spes]).any() | queued
        gpe_active = Cat(*[g.busy for g in gpes]).any()
        pipe_busy = Cat(*[s.out_valid for s in spes]).any()
        tail = Signal(range(cfg.mul_latency + 4))
        all_fetched = fill_src >= self.n_sources
        drained = active & all_fetched & (used == 0)
        finished = drained & ~edges_left & ~spe_active
        extra = drained & edges_left               # edges beyond the sources' counts
        with m.If(spe_active | pipe_busy | gpe_active):
            m.d.sync += tail.eq(cfg.mul_latency + 3)
        with m.Elif(tail != 0):
            m.d.sync += tail.eq(tail - 1)
        with m.If(start):
            m.d.sync += [active.eq(1), self.done.eq(0), error.eq(0), fill_src.eq(0),
                         fill_ptr.eq(0), head_ptr.eq(0), disp_ptr.eq(0), used.eq(0), beat.eq(0),
                         e_ptr.eq(0), src_valid.eq(1), rd_ptr.eq(0), inflight.eq(0),
                         occ.eq(0),
                         self.err_source.eq(0), self.err_dest.eq(0), self.err_edges.eq(0)]
            m.d.sync += [ready[s].eq(0) for s in range(K)]
        with m.Elif(active):
            with m.If(bad_source | bad_dest | short | extra):
                m.d.sync += [error.eq(1), self.err_source.eq(self.err_source | bad_source),
                             self.err_dest.eq(self.err_dest | bad_dest),
                             self.err_edges.eq(self.err_edges | short | extra)]
            with m.If(error & ~spe_active & ~pipe_busy & ~gpe_active):
                m.d.sync += [active.eq(0), self.done.eq(1)]
            with m.Elif(finished & ~pipe_busy & ~gpe_active & (tail == 0)):
                # every source fetched and released, every edge dispatched and streamed
                m.d.sync += [active.eq(0), self.done.eq(1)]
        counters = {name: getattr(self, name) for name in AGG_COUNTERS}
        streaming = Cat(*[s.streaming for s in spes])
        increments = {
            "feature_reads": wr_en & wr_last,
            "words_read": Mux(wr_en, Mux(wr_last, self.f_in - ((beats_used - 1) << w.word_bits),
                                         w.words), 0),
            "spe_busy": sum(streaming[k] for k in range(n)),
            "stall_feature": active & edges_left & ~error & ~(disp_ready & (disp_left != 0)),
            "stall_gather": want & edge_valid & edges_left & target_full,
        }
        for name, inc in increments.items():
            with m.If(start):
                m.d.sync += counters[name].eq(0)
            with m.Elif(active):
                m.d.sync += counters[name].eq(counters[name] + inc)
        return m
