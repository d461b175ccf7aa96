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

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.counters import count_events, counter_members, counters_of
from ..common.loader import BufferLoader
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
        super().__init__({
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
            **{name: Out(1) for name in FLAGS},
            **counter_members(COUNTERS, COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.agg = agg = AggregateKernel(self.config)
        m.submodules.upd = upd = UpdateKernel(self.config)
        aggregating, updating = Signal(), Signal()
        m.d.comb += self.busy.eq(aggregating | updating)
        loading = ~(aggregating | updating | self.done)
        start_agg = self.start & loading

        buffers = self._load(m, upd, loading)
        load_transfer = Cat(*[getattr(self, s).valid & loading for s in LAYER_STREAMS]).any()
        agg_finished = self._aggregate(m, agg, buffers, aggregating, start_agg)
        agg_error = agg.err_source | agg.err_dest | agg.err_edges
        start_upd = agg_finished & ~agg_error
        self._update(m, agg, upd, buffers["dst"].ram, start_upd)

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

        # -- counters: the kernels', and the layer's own ------------------------------------------
        ours = counters_of(self, COUNTERS)
        for kernel, names in ((agg, AGG_COUNTERS), (upd, UPD_COUNTERS)):
            m.d.comb += [ours[name].eq(theirs)
                         for name, theirs in counters_of(kernel, names).items()]
        count_events(m, ours, {
            "cycles_total": aggregating | updating,
            "cycles_load": load_transfer,
            "cycles_aggregate": aggregating,
            "cycles_update": updating,
        })
        return m

    def _load(self, m: Module, upd: UpdateKernel, loading) -> dict[str, "_Buffer"]:
        """Fill the source, edge and destination buffers from their streams, each from address
        0 (beats past a buffer's end are dropped), and stream the weights into the update
        kernel's MACs. Returns the buffers by name."""
        cfg = self.config
        buffers = {}
        for name, port, width, depth in (("src", self.src_in, 32, cfg.max_sources),
                                         ("edge", self.edge_in, 64, cfg.max_edges),
                                         ("dst", self.dst_in, 1, cfg.max_destinations)):
            m.submodules[f"{name}_buf"] = ram = Ram(width, depth)
            m.submodules[f"{name}_load"] = loader = BufferLoader(
                width, ram.addr_bits, ram.addr_bits + 1, capacity=depth, overflow="hold")
            m.d.comb += loader.enable.eq(loading)
            wiring.connect(m, wiring.flipped(port), loader.beats)
            wiring.connect(m, loader.write, ram.write[0])
            buffers[name] = _Buffer(ram, loader.count)
        m.d.comb += [self.weight_in.ready.eq(loading),
                     upd.w_valid.eq(self.weight_in.valid & loading),
                     upd.w_data.eq(self.weight_in.payload)]
        return buffers

    def _aggregate(self, m: Module, agg: AggregateKernel, buffers: dict[str, "_Buffer"],
                   aggregating, start_agg):
        """The aggregate kernel on the source and edge buffers and the memory port; returns
        its end (the kernel is done and was not started this cycle)."""
        src, edge = buffers["src"], buffers["edge"]
        m.d.comb += [src.ram.read[0].addr.eq(agg.src_addr),
                     agg.src_data.eq(src.ram.read[0].data),
                     edge.ram.read[0].addr.eq(agg.edge_addr),
                     agg.edge_data.eq(edge.ram.read[0].data),
                     self.mem_addr.eq(agg.mem_addr), agg.mem_data.eq(self.mem_data),
                     agg.n_sources.eq(src.count), agg.n_edges.eq(edge.count),
                     agg.n_rows.eq(self.n_rows), agg.n_dst.eq(self.n_dst),
                     agg.f_in.eq(self.f_in), agg.start.eq(start_agg)]
        return aggregating & agg.done & ~start_agg

    def _update(self, m: Module, agg: AggregateKernel, upd: UpdateKernel, dst_buf: Ram,
                start_upd):
        """The update kernel on the aggregated rows (a destination without in-edges reads as
        zero), streaming ``Y`` out."""
        dst = dst_buf.read[0]
        m.d.comb += [agg.act_dst.eq(upd.act_row), agg.act_idx.eq(upd.act_idx),
                     dst.addr.eq(upd.act_row),
                     upd.act_data.eq(agg.act_data & dst.data.replicate(32)),
                     upd.n_rows.eq(self.n_dst), upd.f_in.eq(self.f_in), upd.f_out.eq(self.f_out),
                     upd.relu.eq(self.relu), upd.start.eq(start_upd)]
        wiring.connect(m, wiring.flipped(self.out), upd.out)


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
        m.submodules.layer = layer = self.layer
        self._forward(m, layer)
        loading = ~(layer.busy | layer.done)
        self._memory(m, layer, loading)
        # cycles_load also counts the feature transfers that no layer stream overlaps
        feat_cycles = Signal(COUNTER_BITS)
        with m.If(self.feat_in.valid & loading & ~Cat(
                *[getattr(self, s).valid for s in LAYER_STREAMS]).any()):
            m.d.sync += feat_cycles.eq(feat_cycles + 1)
        m.d.comb += self.cycles_load.eq(layer.cycles_load + feat_cycles)
        return m

    def _forward(self, m: Module, layer: HyScaleLayer):
        """Every port the system shares with the layer, connected straight through (except
        ``cycles_load``, which the system extends)."""
        theirs = {path: value for path, _, value in layer.signature.flatten(layer)}
        for path, member, ours in self.signature.flatten(self):
            if path[0] == "feat_in" or path == ("cycles_load",):
                continue
            if member.flow == In:
                m.d.comb += theirs[path].eq(ours)
            else:
                m.d.comb += ours.eq(theirs[path])

    def _memory(self, m: Module, layer: HyScaleLayer, loading):
        """The model of the external memory, filled from ``feat_in`` (beat k at word k) while
        the layer is idle, read through the layer's memory port. ``n_rows`` is the number of
        whole feature rows loaded."""
        cfg = self.config
        w = Widths(cfg)
        m.submodules.ext_mem = ext_mem = Ram(32 * w.words, cfg.max_sources * cfg.beats_per_row)
        m.submodules.feat_load = load = BufferLoader(ext_mem.width, ext_mem.addr_bits,
                                                     ext_mem.addr_bits + 1,
                                                     capacity=ext_mem.depth, overflow="hold")
        m.d.comb += load.enable.eq(loading)
        wiring.connect(m, wiring.flipped(self.feat_in), load.beats)
        wiring.connect(m, load.write, ext_mem.write[0])
        read = ext_mem.read[0]
        m.d.comb += [read.addr.eq(layer.mem_addr), layer.mem_data.eq(read.data),
                     layer.n_rows.eq(load.count >> w.beat)]


@dataclass
class _Buffer:
    """One of the layer's load buffers and the entries loaded into it."""

    ram: Ram
    count: Signal
