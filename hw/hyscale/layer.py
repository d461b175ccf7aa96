"""The fused HyScale-GNN layer: aggregate kernel -> update kernel, one write-back of the output.

``Y = act((A X) W + b)``. The aggregated rows stay in the G-PE banks and stream straight into
the update kernel; only ``Y`` leaves the design. :class:`HyScaleLayer` reads ``X`` through an
external-memory port (``mem_words_per_cycle`` words per cycle, one cycle of latency: DDR on the
board); the words it reads, and the words of ``Y`` it writes, are counted.
:class:`HyScaleSystem` is the layer plus a model of that memory (a RAM filled through a load
stream): what the simulations run. Synthesis takes the layer alone.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.ram import Ram
from .aggregate import AggregateKernel, Widths
from .config import HyScaleConfig
from .protocol import (AGG_COUNTERS, COUNTER_BITS, COUNTERS, FLAGS, LAYER_STREAMS,  # noqa: F401
                       STREAMS, UPD_COUNTERS)
from .update import UpdateKernel


class HyScaleLayer(wiring.Component):
    """One fused GNN layer on the HyScale kernels.

    Use: after reset, fill the buffers through the load streams (each from its start, in any
    interleaving), set the scalars, pulse ``start``, take ``Y`` from ``out`` until ``done``.

    Members
    -------
    mem_addr : Out ; mem_data : In(32 * mem_words_per_cycle)
        External-memory read port: beat ``mem_addr`` (row ``u`` of ``X`` is beats ``u *
        max_feature_width / mem_words_per_cycle`` onward) arrives on ``mem_data`` next cycle.
    n_rows : In
        Rows of ``X`` in external memory; a source index at or beyond it raises ``err_source``.
    src_in : In(stream.Signature(32))
        Distinct sources in edge order: index (bits 0-15) and out-edge count (bits 16-31).
    edge_in : In(stream.Signature(64))
        Edges sorted by source: weight (bits 0-31), destination (32-47), first edge into its
        destination (bit 63).
    dst_in : In(stream.Signature(1))
        One bit per destination: it has at least one in-edge.
    weight_in : In(stream.Signature(32 * macs))
        ``W`` and ``b``: for each column group ``g``, rows ``W[i, g m : (g + 1) m]`` for
        ``i < f_in``, then ``b[g m : (g + 1) m]``.
    out : Out(stream.Signature(32 * mem_words_per_cycle))
        ``Y`` row-major, ``ceil(f_out / mem_words_per_cycle)`` beats per row (padding zero).
    n_dst, f_in, f_out, relu, start : In
    busy, done : Out(1)
    err_source, err_dest, err_edges : Out(1)
    cycles_total, cycles_load, cycles_aggregate, cycles_update, feature_reads, words_read,
    spe_busy, stall_feature, stall_gather, words_written, stall_output : Out(32)
    """

    def __init__(self, config: HyScaleConfig = HyScaleConfig()):
        if not config.simulate:
            raise ValueError("this configuration is for the performance model only; it cannot "
                             "be built")
        self.config = config
        w = Widths(config)
        members = {
            "mem_addr": Out(w.src + w.beat), "mem_data": In(32 * w.words),
            "n_rows": In(w.src + 1),
            "src_in": In(stream.Signature(32)),
            "edge_in": In(stream.Signature(64)),
            "dst_in": In(stream.Signature(1)),
            "weight_in": In(stream.Signature(32 * config.macs)),
            "out": Out(stream.Signature(32 * w.words)),
            "n_dst": In(w.dst + 1), "f_in": In(w.feat + 1), "f_out": In(w.feat + 1),
            "relu": In(1), "start": In(1),
            "busy": Out(1), "done": Out(1),
        }
        for name in FLAGS:
            members[name] = Out(1)
        for name in COUNTERS:
            members[name] = Out(COUNTER_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = Widths(cfg)
        m.submodules.agg = agg = AggregateKernel(cfg)
        m.submodules.upd = upd = UpdateKernel(cfg)
        m.submodules.src_buf = src_buf = Ram(32, cfg.max_sources)
        m.submodules.edge_buf = edge_buf = Ram(64, cfg.max_edges)
        m.submodules.dst_buf = dst_buf = Ram(1, cfg.max_destinations)

        aggregating, updating = Signal(), Signal()
        m.d.comb += self.busy.eq(aggregating | updating)
        loading = ~(aggregating | updating | self.done)

        # -- loads: each stream fills its buffer from address 0 ----------------------------------
        counts = {}
        for name, buf in (("src_in", src_buf), ("edge_in", edge_buf), ("dst_in", dst_buf)):
            port = getattr(self, name)
            count = Signal(buf.addr_bits + 1, name=f"{name}_count")
            counts[name] = count
            wa, wd, we = buf.write(0)
            take = port.valid & loading & (count < buf.depth)
            m.d.comb += [port.ready.eq(loading), wa.eq(count), wd.eq(port.payload),
                         we.eq(take)]
            with m.If(take):
                m.d.sync += count.eq(count + 1)
        m.d.comb += [self.weight_in.ready.eq(loading),
                     upd.w_valid.eq(self.weight_in.valid & loading),
                     upd.w_data.eq(self.weight_in.payload)]
        load_transfer = Cat(*[getattr(self, s).valid & loading for s in LAYER_STREAMS]).any()

        # -- aggregate kernel ---------------------------------------------------------------------
        (sa, sd), (ea, ed) = src_buf.read(0), edge_buf.read(0)
        m.d.comb += [sa.eq(agg.src_addr), agg.src_data.eq(sd), ea.eq(agg.edge_addr),
                     agg.edge_data.eq(ed), self.mem_addr.eq(agg.mem_addr),
                     agg.mem_data.eq(self.mem_data),
                     agg.n_sources.eq(counts["src_in"]), agg.n_edges.eq(counts["edge_in"]),
                     agg.n_rows.eq(self.n_rows), agg.n_dst.eq(self.n_dst),
                     agg.f_in.eq(self.f_in)]
        start_agg = self.start & loading
        m.d.comb += agg.start.eq(start_agg)
        agg_finished = aggregating & agg.done & ~start_agg
        agg_error = agg.err_source | agg.err_dest | agg.err_edges

        # -- update kernel -------------------------------------------------------------------------
        da, dd = dst_buf.read(0)
        m.d.comb += [agg.act_dst.eq(upd.act_row), agg.act_idx.eq(upd.act_idx), da.eq(upd.act_row),
                     upd.act_data.eq(agg.act_data & dd.replicate(32)),
                     upd.n_rows.eq(self.n_dst), upd.f_in.eq(self.f_in), upd.f_out.eq(self.f_out),
                     upd.relu.eq(self.relu)]
        start_upd = agg_finished & ~agg_error
        m.d.comb += upd.start.eq(start_upd)
        wiring.connect(m, wiring.flipped(self.out), upd.out)

        # -- sequencing ----------------------------------------------------------------------------
        with m.If(start_agg):
            m.d.sync += aggregating.eq(1)
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
        for name in AGG_COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(agg, name))
        for name in UPD_COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(upd, name))
        increments = {
            "cycles_total": aggregating | updating,
            "cycles_load": load_transfer,
            "cycles_aggregate": aggregating,
            "cycles_update": updating,
        }
        for name, inc in increments.items():
            counter = getattr(self, name)
            with m.If(inc):
                m.d.sync += counter.eq(counter + 1)
        return m


class HyScaleSystem(wiring.Component):
    """:class:`HyScaleLayer` with a model of its external memory, for simulation.

    Every member of the layer is here except the memory port and ``n_rows``; in their place
    ``feat_in`` (``In(stream.Signature(32 * mem_words_per_cycle))``) fills the memory before the
    job: feature rows of ``max_feature_width / mem_words_per_cycle`` beats each (zero-padded),
    row ``u`` for source index ``u``. ``cycles_load`` counts its transfers too.
    """

    HIDDEN = ("mem_addr", "mem_data", "n_rows")

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
        cfg = self.config
        w = Widths(cfg)
        m.submodules.layer = layer = self.layer
        for name, member in self.layer.signature.members.items():
            if name in self.HIDDEN:
                continue
            if member.is_signature:
                if member.flow == In:
                    wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(layer, name))
                else:
                    wiring.connect(m, getattr(layer, name), wiring.flipped(getattr(self, name)))
            elif member.flow == In:
                m.d.comb += getattr(layer, name).eq(getattr(self, name))
            elif name != "cycles_load":
                m.d.comb += getattr(self, name).eq(getattr(layer, name))
        m.submodules.ext_mem = ext_mem = Ram(32 * w.words, cfg.max_sources * cfg.beats_per_row)
        loading = ~(layer.busy | layer.done)
        beats = Signal(ext_mem.addr_bits + 1)
        wa, wd, we = ext_mem.write(0)
        take = self.feat_in.valid & loading & (beats < ext_mem.depth)
        m.d.comb += [self.feat_in.ready.eq(loading), wa.eq(beats), wd.eq(self.feat_in.payload),
                     we.eq(take)]
        with m.If(take):
            m.d.sync += beats.eq(beats + 1)
        ra, rd = ext_mem.read(0)
        m.d.comb += [ra.eq(layer.mem_addr), layer.mem_data.eq(rd),
                     layer.n_rows.eq(beats >> w.beat)]
        feat_cycles = Signal(COUNTER_BITS)
        with m.If(self.feat_in.valid & loading & ~Cat(
                *[getattr(self, s).valid for s in LAYER_STREAMS]).any()):
            m.d.sync += feat_cycles.eq(feat_cycles + 1)
        m.d.comb += self.cycles_load.eq(layer.cycles_load + feat_cycles)
        return m
