"""HyScale-GNN scatter PE (S-PE): a local copy of the feature ring and a binary32 multiplier
(Sec. IV-C, Fig. 6).

The S-PE takes the edges of its bank's queue one at a time, waits for its G-PE's gather slot,
then streams the edge's source row from its copy of the ring, one element per cycle, times the
edge weight, into the G-PE.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32MulConfig, Fp32Multiplier
from moagcn.hw.common.pipeline import delay
from moagcn.hw.common.ram import Ram
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import (ProductSignature, Widths, edge_entry_layout, ring_depth,
                                       ring_write_signature)


class ScatterPE(wiring.Component):
    """One scatter PE: a local copy of the feature ring and a binary32 multiplier.

    It takes an edge from ``edges`` when it holds none (or in the cycle of the held edge's
    last read), asks its G-PE for a gather slot with ``req``, and after ``grant`` reads one
    element per cycle for ``f_in`` cycles; the products leave on ``products`` ``1 +
    mul_latency`` cycles after each read, tagged with their address in the G-PE's bank.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    edges : In(stream.Signature(edge_entry_layout(config)))
        The edges of the bank's queue; ``ready``: the S-PE is free.
    req : Out(1) ; grant : In(1)
        The S-PE asks for its G-PE; the G-PE's gather slot starts (the reads begin next
        cycle).
    holding, streaming : Out(1)
        An edge is held; its products are being read.
    slot : Out(slot bits)
        The ring slot of the held edge's source row.
    f_in : In
        Elements per feature row.
    ring : In(RamWriteSignature(ring address bits, 32 * mem_words_per_cycle))
        Broadcast write port of the local copy of the feature ring.
    products : Out(ProductSignature(config))
        The products, into the G-PE (``done``: the last element of the last edge into its
        destination).
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = ring_depth(config)
        super().__init__({
            "edges": In(stream.Signature(edge_entry_layout(config))),
            "req": Out(1), "grant": In(1), "holding": Out(1), "streaming": Out(1),
            "slot": Out(w.slot or 1), "f_in": In(w.feat + 1),
            "ring": In(ring_write_signature(config)),
            "products": Out(ProductSignature(config)),
        })

    def elaborate(self, platform):
        m = Module()
        w = Widths(self.config)
        m.submodules.local = local = Ram(32 * w.words, self.depth)
        wiring.connect(m, wiring.flipped(self.ring), local.write[0])
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
        m.d.comb += [self.edges.ready.eq(~holding | (streaming & last)),
                     self.req.eq(waiting), self.holding.eq(holding),
                     self.streaming.eq(streaming), self.slot.eq(edge.slot)]
        with m.If(waiting & self.grant):
            m.d.sync += [waiting.eq(0), streaming.eq(1), j.eq(0), last.eq(self.f_in <= 1)]
        with m.If(streaming):
            m.d.sync += [j.eq(j + 1), last.eq(j + 2 >= self.f_in)]
            with m.If(last):
                # the last read is issued now: the slot may be reused from the next cycle on
                m.d.sync += [streaming.eq(0), holding.eq(0)]
        # a new edge may arrive in the cycle of the last read (the read uses this cycle's slot)
        new = self.edges.payload
        with m.If(self.edges.valid & self.edges.ready):
            m.d.sync += [holding.eq(1), waiting.eq(1), edge.slot.eq(new.slot),
                         edge.dst.eq(new.dst), edge.weight.eq(new.weight),
                         edge.first.eq(new.first)]
            if self.config.pipelined:
                m.d.sync += edge.last.eq(new.last)
        return edge

    def _stream_products(self, m: Module, local: Ram, edge: "_HeldEdge"):
        """Read element j's beat; one cycle later pick the element and multiply it by the
        weight; the product leaves tagged with its bank address."""
        cfg = self.config
        w = Widths(cfg)
        j = edge.j
        read = local.read[0]
        # With 4 or more words per beat, each element's beat is read two cycles ahead and
        # registered beside the local ring's block RAMs (``beat_r``), then its word is picked
        # into a register (``element_r``): element j + 2 while element j streams (past the
        # row's end the read is not used), beat 0 of the held edge while it waits for the
        # grant, and beat 0 of a new edge in the cycle it is taken (from the queue's head;
        # the grant comes a cycle later at the earliest). Elements 0 and 1 share beat 0. That
        # local ring is a RAM of 128 bits or more spread over several block RAMs: its read
        # data (late out of the block RAMs) through the word multiplexer into a register, and
        # before that into the multiplier, were the default preset's longest paths. With 2
        # words the read-ahead's increment and registers cost more than they save
        # (docs/hyscale.md has the synthesis runs). Either way the products keep their cycles.
        ahead = w.words >= 4
        if ahead:
            take = self.edges.valid & self.edges.ready      # a new edge is taken this cycle
            beat_ahead = (j + 2)[w.word_bits:w.word_bits + w.beat] if w.beat else Const(0, 1)
            slot = Mux(take, self.edges.payload.slot, edge.slot)
            beat = Mux(edge.streaming & ~take, beat_ahead, 0)
        else:
            slot = edge.slot
            beat = j[w.word_bits:w.word_bits + w.beat] if w.beat else Const(0, 1)
        m.d.comb += read.addr.eq(Cat(beat, slot) if w.beat else slot)
        dst_row = edge.dst[w.bank:] if w.bank else edge.dst
        # every element of the first edge into a destination starts from +0
        meta0 = Cat(edge.streaming, j[:w.feat], dst_row[:w.bank_row], edge.first,
                    *([edge.last & edge.last_read] if cfg.pipelined else []))
        meta1 = Signal(len(meta0))
        weight1 = Signal(32, reset_less=True)
        if ahead:
            beat_r = Signal(len(read.data), name="beat_r", reset_less=True)
            element = Signal(32, name="element_r", reset_less=True)
            m.d.sync += [meta1.eq(meta0), weight1.eq(edge.weight), beat_r.eq(read.data),
                         element.eq(beat_r.word_select(j[:w.word_bits], 32))]
        else:
            sel1 = Signal(max(w.word_bits, 1), reset_less=True)
            m.d.sync += [meta1.eq(meta0), sel1.eq(j[:w.word_bits] if w.word_bits else 0),
                         weight1.eq(edge.weight)]
            element = read.data.word_select(sel1, 32) if w.word_bits else read.data
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(latency=cfg.mul_latency))
        m.d.comb += [mul.i.valid.eq(meta1[0]), mul.i.payload.a.eq(element),
                     mul.i.payload.b.eq(weight1)]
        meta = delay(m, meta1, cfg.mul_latency, "smeta", reset_less=False)[-1]
        out = self.products
        m.d.comb += [out.valid.eq(meta[0]), out.addr.eq(meta[1:1 + w.bank_addr]),
                     out.first.eq(meta[1 + w.bank_addr]), out.data.eq(mul.o.payload)]
        if cfg.pipelined:
            m.d.comb += out.done.eq(meta[-1])


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
