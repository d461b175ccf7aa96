"""The fused HyScale-GNN layer: aggregate kernel -> update kernel, one write-back of the output.

``Y = act((A X) W + b)``. The aggregated rows stay in the G-PE banks and stream straight into
the update kernel; only ``Y`` leaves the design. :class:`HyScaleLayer` reads ``X`` through an
external-memory port (``mem_words_per_cycle`` words per cycle, one cycle of latency: DDR on the
board); the words it reads, and the words of ``Y`` it writes, are counted.
:class:`HyScaleSystem` is the layer plus a model of that memory (a RAM filled through a load
stream): what the simulations run. Synthesis takes the layer alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.banks import LoadBanks, job_loads
from moagcn.hw.common.bits import bits_for
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.loader import BufferLoader
from moagcn.hw.common.ram import Ram
from moagcn.hw.hyscale.aggregate import AggregateKernel
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import EDGE_WORD_LAYOUT, SOURCE_WORD_LAYOUT, Widths
from moagcn.hw.hyscale.protocol import (AGG_COUNTERS, COUNTER_BITS, COUNTERS, FLAGS,
                                        LAYER_STREAMS, UPD_COUNTERS)
from moagcn.hw.hyscale.update import UpdateKernel


class HyScaleLayer(wiring.Component):
    """One fused GNN layer on the HyScale kernels.

    Use: after reset, fill the buffers through the load streams (each from its start, in any
    interleaving), set the scalars, pulse ``start``, take ``Y`` from ``out`` until ``done``.
    Jobs follow one another without a reset: ``start`` is taken whenever the layer is not
    busy (also after ``done``, which it clears in the next cycle), and each start restarts the
    load streams at their first word. The job begins in the cycle after ``start`` (the *job
    start*, ``job_start``), from a register: its pulse reaches every kernel's clear and the
    load streams' ``ready`` straight from a flip-flop (decided in the cycle it took effect,
    it fanned out across the device from the layer's state and was the longest path at some
    placements). ``busy`` is high from that cycle. With ``load_banks = 2`` the buffers are
    ping-pong pairs: from the cycle after the job start, the streams fill the other half with
    the next job while this one runs (no beat is taken in the job start cycle itself; a beat
    taken with ``start`` belongs to the starting job); with ``load_banks = 1`` they are ready
    only while the layer is not busy. The scalars are read while the job runs: change them
    only at the next start.

    With ``pipelined`` the update starts with the job and opens each block of rows once their
    aggregation is complete (:meth:`_pipelined`); ``cycles_update`` then spans the job.

    Counters are per job: cleared at ``start``, read after ``done``. ``cycles_load`` and
    ``cycles_load_hidden`` are those of the job that started: the cycles with a load beat
    between the previous start and this one, and how many of them fell while the previous job
    was busy (overlapped with its compute).

    Parameters
    ----------
    config : HyScaleConfig
        A configuration that can be built (``simulate``).

    Members
    -------
    mem_addr : Out ; mem_data : In(32 * mem_words_per_cycle)
        External-memory read port: beat ``mem_addr`` (row ``u`` of ``X`` is beats ``u *
        max_feature_width / mem_words_per_cycle`` onward) arrives on ``mem_data`` next cycle.
        With two load banks its top bit is the running job's bank (``X`` of consecutive jobs
        in two halves of the memory).
    load_bank : Out(1)
        The bank the load streams fill (always 0 with one bank).
    n_rows : In
        Rows of ``X`` in external memory; a source index at or beyond it raises ``err_source``
        (read at ``start``).
    src_in : In(stream.Signature(32))
        Distinct sources in edge order: index (bits 0-15) and out-edge count (bits 16-31)
        (:data:`.protocol.SOURCE_WORD`).
    edge_in : In(stream.Signature(64))
        Edges sorted by source: weight (bits 0-31), destination (32-47), last edge into its
        destination (bit 62; read with ``pipelined`` only), first edge into it (bit 63)
        (:data:`.protocol.EDGE_WORD`).
    dst_in : In(stream.Signature(1))
        One bit per destination: it has at least one in-edge.
    weight_in : In(stream.Signature(32 * macs))
        ``W`` and ``b``: for each column group ``g``, rows ``W[i, g m : (g + 1) m]`` for
        ``i < f_in``, then ``b[g m : (g + 1) m]``.
    out : Out(stream.Signature(32 * mem_words_per_cycle))
        ``Y`` row-major, ``ceil(f_out / mem_words_per_cycle)`` beats per row (padding zero).
    n_dst, f_in, f_out, relu, start : In
    busy, done, job_start : Out(1)
        ``job_start``: the job begins this cycle (the cycle after its ``start``).
    err_source, err_dest, err_edges : Out(1)
    cycles_total, cycles_load, cycles_load_hidden, cycles_aggregate, cycles_update,
    feature_reads, words_read, spe_busy, stall_feature, stall_gather, words_written,
    stall_output : Out(32)
    """

    def __init__(self, config: HyScaleConfig = HyScaleConfig()):
        if not config.simulate:
            raise ValueError("this configuration is for the performance model only; it cannot "
                             "be built")
        self.config = config
        w = Widths(config)
        bank_bits = 1 if config.load_banks == 2 else 0
        super().__init__({
            "mem_addr": Out(w.src + w.beat + bank_bits), "mem_data": In(32 * w.words),
            "load_bank": Out(1),
            "n_rows": In(w.src + 1),
            "src_in": In(stream.Signature(32)),
            "edge_in": In(stream.Signature(64)),
            "dst_in": In(stream.Signature(1)),
            "weight_in": In(stream.Signature(32 * config.macs)),
            "out": Out(stream.Signature(32 * w.words)),
            "n_dst": In(w.dst + 1), "f_in": In(w.feat + 1), "f_out": In(w.feat + 1),
            "relu": In(1), "start": In(1),
            "busy": Out(1), "done": Out(1), "job_start": Out(1),
            **{name: Out(1) for name in FLAGS},
            **counter_members(COUNTERS, COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.agg = agg = AggregateKernel(cfg)
        m.submodules.upd = upd = UpdateKernel(cfg)
        aggregating, updating = Signal(), Signal()
        busy = aggregating | updating
        # the start, taken a cycle late from a register (see the class docstring)
        start_agg = Signal(name="start_job")
        accept = self.start & ~busy & ~start_agg
        m.d.sync += start_agg.eq(accept)
        with m.If(accept):
            m.d.sync += self.done.eq(0)
        m.d.comb += [self.busy.eq(busy | start_agg), self.job_start.eq(start_agg)]
        banks = LoadBanks(m, cfg.load_banks, start_agg, busy)
        m.d.comb += self.load_bank.eq(banks.load)

        buffers = self._load(m, upd, banks)
        load_transfer = Cat(*[getattr(self, s).valid & banks.loading
                              for s in LAYER_STREAMS]).any()
        agg_finished = self._aggregate(m, agg, buffers, banks, aggregating, start_agg)
        agg_error = agg.err_source | agg.err_dest | agg.err_edges
        if cfg.pipelined:
            self._update(m, agg, upd, buffers["dst"], banks, start_agg)
            self._pipelined(m, agg, upd, buffers["dst"], start_agg, agg_finished, agg_error,
                            aggregating, updating)
        else:
            start_upd = agg_finished & ~agg_error
            self._update(m, agg, upd, buffers["dst"], banks, start_upd)
            m.d.comb += upd.rows_ready.eq(self.n_dst)

            # -- sequencing --------------------------------------------------------------------
            with m.If(start_agg):
                m.d.sync += [aggregating.eq(1), self.done.eq(0)]
            with m.If(agg_finished):
                m.d.sync += aggregating.eq(0)
                with m.If(agg_error):
                    m.d.sync += self.done.eq(1)     # a bad job stops with its flag set
                with m.Else():
                    m.d.sync += updating.eq(1)
            with m.If(updating & upd.done & ~start_upd):
                m.d.sync += [updating.eq(0), self.done.eq(1)]
        m.d.comb += [self.err_source.eq(agg.err_source), self.err_dest.eq(agg.err_dest),
                     self.err_edges.eq(agg.err_edges)]

        # -- counters: the kernels', and the layer's own ------------------------------------------
        ours = counters_of(self, COUNTERS)
        for kernel, names in ((agg, AGG_COUNTERS), (upd, UPD_COUNTERS)):
            m.d.comb += [ours[name].eq(theirs)
                         for name, theirs in counters_of(kernel, names).items()]
        count_events(m, ours, {
            "cycles_total": busy,
            "cycles_aggregate": aggregating,
            "cycles_update": updating,
        }, clear=start_agg)
        job_loads(m, start_agg, busy, load_transfer, self.cycles_load, self.cycles_load_hidden)
        return m

    def _pipelined(self, m: Module, agg: AggregateKernel, upd: UpdateKernel, dst: "_Buffer",
                   start, agg_finished, agg_error, aggregating, updating):
        """Aggregate and update together: the update starts with the job; ``rows_ready``, the
        number of leading rows whose aggregation is complete, lets it open its blocks.

        ``final`` (one bit per destination) starts as "no in-edges" (those rows read as zero)
        and takes the G-PEs' reports of each row's last write; a scanner moves ``rows_ready``
        over it, one row per cycle, and sets it to ``n_dst`` when the aggregation ends (a
        missing last-edge flag costs time, never a hang). A bad job is found at its start
        (:meth:`_checks`): the watermark stays at 0, no block opens, nothing is sent. Should
        an error come while the job runs, the watermark moves at most one row after it and
        the open blocks drain before ``done``."""
        cfg = self.config
        w = Widths(cfg)
        final = Signal(cfg.max_destinations, name="row_final")
        ready = Signal(w.dst + 1, name="rows_ready")
        # the aggregate kernel's error flags, copied beside the scanner (the flags, across the
        # die, into the watermark's enable were the longest path at one placement): set at the
        # start from the job's checks, as the flags are, and a cycle after a flag set while
        # the job runs (the kernel ends at least a cycle after its flag, so at its end the
        # copy is the flags)
        halted = Signal(name="rows_ready_halted")
        # ``final[ready]`` as a register set a cycle ahead: the bit at next cycle's ``ready``
        # (``ready + 1``, kept in a register, when the scanner moves) with this cycle's row
        # reports merged, so the scanner's step does not wait for a 256-way multiplexer (it,
        # through the step's decision into the watermark's enable, was a long path)
        ready_p1 = Signal(w.dst + 1, name="rows_ready_p1")
        bit = Signal(name="rows_ready_bit")
        reports = []
        for b, done in enumerate(agg.rows_done):
            # each G-PE's row report registered before its decode into the 256 enables (a
            # report, from a G-PE across the die, through its decode was a long path)
            valid = Signal(name=f"row_done{b}_valid")
            row = Signal.like(done.row, name=f"row_done{b}_row")
            m.d.sync += [valid.eq(done.valid), row.eq(done.row)]
            reports.append((valid, Cat(Const(b, w.bank), row) if w.bank else row))

        def final_next(index):
            """Bit ``index`` of ``final`` next cycle (the reports of this cycle written)."""
            hit = Cat(*[v & (at == index[:w.dst]) for v, at in reports]).any()
            return final.bit_select(index[:w.dst], 1) | hit

        step = ~halted & (ready < self.n_dst) & bit
        with m.If(start):
            m.d.sync += [final.eq(~dst.nonempty), ready.eq(0), ready_p1.eq(1),
                         bit.eq(~dst.nonempty[0]), halted.eq(agg.bad_job.any())]
        with m.Else():
            m.d.sync += halted.eq(halted | agg_error)
            for valid, index in reports:
                with m.If(valid):
                    m.d.sync += final.bit_select(index, 1).eq(1)
            with m.If(agg_finished & ~halted):      # every row final (not after an error)
                m.d.sync += [ready.eq(self.n_dst), bit.eq(0)]
            with m.Elif(step):
                m.d.sync += [ready.eq(ready_p1), ready_p1.eq(ready_p1 + 1),
                             bit.eq(final_next(ready_p1))]
            with m.Else():
                m.d.sync += bit.eq(final_next(ready))
        m.d.comb += upd.rows_ready.eq(ready)

        stopping = Signal()
        upd_end = updating & ~start & (upd.done | ((stopping | (agg_finished & agg_error))
                                                   & upd.idle))
        with m.If(start):
            m.d.sync += [aggregating.eq(1), updating.eq(1), stopping.eq(0), self.done.eq(0)]
        with m.If(agg_finished):
            m.d.sync += aggregating.eq(0)
            with m.If(agg_error):
                m.d.sync += stopping.eq(1)
        with m.If(upd_end):
            m.d.sync += updating.eq(0)
        with m.If(~start & (aggregating | updating) & (agg_finished | ~aggregating)
                  & (upd_end | ~updating)):
            m.d.sync += self.done.eq(1)

    def _load(self, m: Module, upd: UpdateKernel, banks: LoadBanks) -> dict[str, "_Buffer"]:
        """Fill the source, edge and destination buffers from their streams, each from address
        0 of the load bank (beats past a buffer's end are dropped), and stream the weights into
        the update kernel's MACs. Returns the buffers by name."""
        cfg = self.config
        buffers = {}
        for name, port, width, depth in (("src", self.src_in, 32, cfg.max_sources),
                                         ("edge", self.edge_in, 64, cfg.max_edges),
                                         ("dst", self.dst_in, 1, cfg.max_destinations)):
            bits = bits_for(depth)
            m.submodules[f"{name}_buf"] = ram = Ram(width, banks.count << bits if banks.count > 1
                                                    else depth)
            m.submodules[f"{name}_load"] = loader = BufferLoader(
                width, bits, bits + 1, capacity=depth, overflow="hold")
            m.d.comb += [loader.enable.eq(banks.loading), loader.clear.eq(banks.swap)]
            wiring.connect(m, wiring.flipped(port), loader.beats)
            write = ram.write[0]
            m.d.comb += [write.addr.eq(banks.load_addr(loader.write.addr)),
                         write.data.eq(loader.write.data), write.en.eq(loader.write.en)]
            buffers[name] = _Buffer(ram, loader.count)
            if name in ("src", "edge"):
                buffers[name].summary = self._summarise(m, name, loader, banks)
            if name == "dst" and cfg.pipelined:
                # the loaded job's destination bits as a vector too: its rows without
                # in-edges are final from its start
                # The write is registered before its decode into the vector's enables (the
                # loader's write through that decode was among the slowest endpoints at one
                # placement), so a bit lands a cycle late; a job start in that cycle (after a
                # last beat offered with ``start``) reads the vector with the write applied
                vec = Signal(cfg.max_destinations, name="dst_nonempty")
                w_en = Signal(name="dst_bit_en")
                w_addr = Signal(bits_for(depth), name="dst_bit_addr")
                w_data = Signal(name="dst_bit_data")
                m.d.sync += [w_en.eq(loader.write.en), w_addr.eq(loader.write.addr[:len(w_addr)]),
                             w_data.eq(loader.write.data[0])]
                now = Signal(cfg.max_destinations, name="dst_nonempty_now")
                m.d.comb += now.eq(vec)
                with m.If(w_en):
                    m.d.sync += vec.bit_select(w_addr, 1).eq(w_data)
                    m.d.comb += now.bit_select(w_addr, 1).eq(w_data)
                buffers[name].nonempty = now
        m.d.comb += [self.weight_in.ready.eq(banks.loading),
                     upd.weights.valid.eq(self.weight_in.valid & banks.loading),
                     upd.weights.data.eq(self.weight_in.payload),
                     upd.weights.restart.eq(banks.swap), upd.weights.bank.eq(banks.next_load)]
        return buffers

    def _summarise(self, m: Module, name: str, loader: BufferLoader, banks: LoadBanks) -> tuple:
        """What the job's checks need, kept while its lists load (cleared at each start, with
        the loader): the source list's largest index and the sum of its out-edge counts, the
        edge list's largest destination field (all 16 bits). At start they are compared with
        the job's scalars (:meth:`_checks`), so a bad job stops before it reads or sends
        anything. Returns ``(seen, top)``, and for the source list ``(seen, top, total)``."""
        write = loader.write
        seen = Signal(name=f"{name}_seen")
        top = Signal(16, name=f"{name}_top")
        value = (SOURCE_WORD_LAYOUT(write.data).index if name == "src"
                 else EDGE_WORD_LAYOUT(write.data).dst)
        with m.If(banks.swap):
            m.d.sync += [seen.eq(0), top.eq(0)]
        with m.Elif(write.en):
            m.d.sync += [seen.eq(1), top.eq(Mux(value > top, value, top))]
        if name == "src":
            total = Signal(16 + bits_for(self.config.max_sources), name="src_count_sum")
            with m.If(banks.swap):
                m.d.sync += total.eq(0)
            with m.Elif(write.en):
                m.d.sync += total.eq(total + SOURCE_WORD_LAYOUT(write.data).count)
            return seen, top, total
        return seen, top

    def _checks(self, buffers: dict[str, "_Buffer"]):
        """The starting job's errors, from its loaded lists' summaries and its scalars:
        ``Cat(source, destination, edge count)``. A source index >= ``n_rows``, a destination
        >= ``n_dst``, out-edge counts that do not add up to the edges loaded."""
        s_seen, s_top, total = buffers["src"].summary
        e_seen, e_top = buffers["edge"].summary
        return Cat(s_seen & (s_top >= self.n_rows), e_seen & (e_top >= self.n_dst),
                   total != buffers["edge"].count)

    def _aggregate(self, m: Module, agg: AggregateKernel, buffers: dict[str, "_Buffer"],
                   banks: LoadBanks, aggregating, start_agg):
        """The aggregate kernel on the source and edge buffers and the memory port; returns
        its end (the kernel is done and was not started this cycle)."""
        src, edge = buffers["src"], buffers["edge"]
        banks.connect_reader(m, agg.src_list, src.ram.read[0])
        banks.connect_reader(m, agg.edge_list, edge.ram.read[0])
        m.d.comb += [self.mem_addr.eq(banks.read_addr(agg.features.addr)),
                     agg.features.data.eq(self.mem_data),
                     agg.n_sources.eq(src.count), agg.n_edges.eq(edge.count),
                     agg.n_rows.eq(self.n_rows), agg.n_dst.eq(self.n_dst),
                     agg.f_in.eq(self.f_in), agg.start.eq(start_agg),
                     agg.bad_job.eq(self._checks(buffers))]
        return aggregating & agg.done & ~start_agg

    def _update(self, m: Module, agg: AggregateKernel, upd: UpdateKernel, dst_buf: "_Buffer",
                banks: LoadBanks, start_upd):
        """The update kernel on the aggregated rows (a destination without in-edges reads as
        zero), streaming ``Y`` out."""
        dst = dst_buf.ram.read[0]
        # the row's has-in-edges bit, a cycle later like the banks' registered read data
        has_edges = Signal(name="act_has_edges", reset_less=True)
        m.d.sync += has_edges.eq(dst.data)
        m.d.comb += [agg.act.row.eq(upd.act.row), agg.act.idx.eq(upd.act.idx),
                     dst.addr.eq(banks.read_addr(upd.act.row)),
                     upd.act.data.eq(agg.act.data & has_edges.replicate(32)),
                     upd.n_rows.eq(self.n_dst), upd.f_in.eq(self.f_in), upd.f_out.eq(self.f_out),
                     upd.relu.eq(self.relu), upd.start.eq(start_upd),
                     # pipelined, the update starts in the start cycle, before the toggle
                     upd.bank.eq(banks.read if self.config.pipelined else banks.run)]
        wiring.connect(m, wiring.flipped(self.out), upd.out)


class HyScaleSystem(wiring.Component):
    """:class:`HyScaleLayer` with a model of its external memory, for simulation.

    Every member of the layer is here except the memory port, ``load_bank`` and ``n_rows``; in
    their place
    ``feat_in`` (``In(stream.Signature(32 * mem_words_per_cycle))``) fills the memory before the
    job: feature rows of ``max_feature_width / mem_words_per_cycle`` beats each (zero-padded),
    row ``u`` for source index ``u``. ``cycles_load`` counts its transfers too.
    """

    HIDDEN = ("mem_addr", "mem_data", "n_rows", "load_bank", "job_start")

    def __init__(self, config: HyScaleConfig = HyScaleConfig()):
        self.layer = HyScaleLayer(config)
        self.config = config
        members = {"feat_in": In(stream.Signature(32 * config.mem_words_per_cycle))}
        for name, member in self.layer.signature.members.items():
            if name not in self.HIDDEN:
                members[name] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.layer = layer = self.layer
        self._forward(m, layer)
        start = layer.job_start
        loading = ~start if self.config.load_banks == 2 else ~layer.busy
        self._memory(m, layer, loading, start)
        # cycles_load also counts the feature transfers that no layer stream overlaps
        feat_only = self.feat_in.valid & loading & ~Cat(
            *[getattr(self, s).valid for s in LAYER_STREAMS]).any()
        feat_cycles = Signal(COUNTER_BITS)
        feat_hidden = Signal(COUNTER_BITS)
        job_loads(m, start, layer.busy, feat_only, feat_cycles, feat_hidden)
        m.d.comb += [self.cycles_load.eq(layer.cycles_load + feat_cycles),
                     self.cycles_load_hidden.eq(layer.cycles_load_hidden + feat_hidden)]
        return m

    def _forward(self, m: Module, layer: HyScaleLayer):
        """Every port the system shares with the layer, connected straight through (except
        ``cycles_load``, which the system extends)."""
        theirs = {path: value for path, _, value in layer.signature.flatten(layer)}
        for path, member, ours in self.signature.flatten(self):
            if path[0] == "feat_in" or path in (("cycles_load",), ("cycles_load_hidden",)):
                continue
            if member.flow == In:
                m.d.comb += theirs[path].eq(ours)
            else:
                m.d.comb += ours.eq(theirs[path])

    def _memory(self, m: Module, layer: HyScaleLayer, loading, start):
        """The model of the external memory, filled from ``feat_in`` (beat k at word k of the
        layer's load bank) while the layer takes loads, read through the layer's memory port.
        ``n_rows`` is the number of whole feature rows loaded for the next job."""
        cfg = self.config
        w = Widths(cfg)
        half = 1 << (w.src + w.beat)        # the layer's row addresses span this per bank
        two = cfg.load_banks == 2
        m.submodules.ext_mem = ext_mem = Ram(32 * w.words, 2 * half if two
                                             else cfg.max_sources * cfg.beats_per_row)
        bits = w.src + w.beat
        m.submodules.feat_load = load = BufferLoader(ext_mem.width, bits, bits + 1,
                                                     capacity=cfg.max_sources * cfg.beats_per_row,
                                                     overflow="hold")
        m.d.comb += [load.enable.eq(loading), load.clear.eq(start)]
        wiring.connect(m, wiring.flipped(self.feat_in), load.beats)
        write = ext_mem.write[0]
        m.d.comb += [write.addr.eq(Cat(load.write.addr, layer.load_bank) if two
                                   else load.write.addr),
                     write.data.eq(load.write.data), write.en.eq(load.write.en)]
        read = ext_mem.read[0]
        m.d.comb += [read.addr.eq(layer.mem_addr), layer.mem_data.eq(read.data),
                     layer.n_rows.eq(load.count >> w.beat)]

@dataclass
class _Buffer:
    """One of the layer's load buffers and the entries loaded into it."""

    ram: Ram
    count: Signal
    nonempty: Signal | None = None     # the destination buffer's bits, pipelined layers
    summary: tuple | None = None       # the source and edge lists: :meth:`HyScaleLayer._summarise`
