"""HyScale-GNN gather PE (G-PE): one bank of destination rows and its binary32 adder
(Sec. IV-C, Fig. 6).

Destination ``v`` lives in the bank of G-PE ``v mod n``. The G-PE reads the element's partial
sum, adds the product its S-PE streams in, and writes the sum back: two edges entering one
G-PE are at least ``max(f_in, add_latency + 3)`` cycles apart (:class:`~.aggregate.PEPair`), so
a read never overtakes the write of the same element.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32Adder, Fp32AddConfig
from moagcn.hw.common.pipeline import delay
from moagcn.hw.common.ram import Ram, RamReadSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import ProductSignature, RowDoneSignature, Widths


class GatherPE(wiring.Component):
    """One bank of destination rows and its binary32 adder.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    products : In(ProductSignature(config))
        The S-PE's products, each added into element ``addr`` of the bank (``first``: into
        ``+0``).
    act : In(RamReadSignature(bank address bits, 32))
        Second read port of the bank, for the update kernel: ``data`` two cycles after the
        address (the block RAM's output is registered beside it: a bank's read port, routed
        across the die through the kernel's bank multiplexer, was the longest path at some
        placements). ``en`` is the RAM's read enable, as in a one-cycle port.
    busy : Out(1)
        An addition is in flight.
    row_done : Out(RowDoneSignature(config))
        With ``pipelined``: a row's last sum is written this cycle.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.depth = (config.max_destinations // config.spes) * config.max_feature_width
        super().__init__({
            "products": In(ProductSignature(config)),
            "act": In(RamReadSignature(w.bank_addr, 32)), "busy": Out(1),
            "row_done": Out(RowDoneSignature(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        product = self.products
        m.submodules.bank = bank = Ram(32, self.depth, read_ports=2)
        old, update = bank.read
        act_r = Signal(32, name="act_r", reset_less=True)
        m.d.sync += act_r.eq(update.data)
        m.d.comb += [old.addr.eq(product.addr), update.addr.eq(self.act.addr),
                     update.en.eq(self.act.en), self.act.data.eq(act_r)]
        # stage 1: the old partial sum is out of the RAM; the product waits one cycle for it
        valid1 = Signal()
        first1 = Signal(reset_less=True)
        data1 = Signal(32, reset_less=True)
        addr1 = Signal(len(product.addr), reset_less=True)
        m.d.sync += [valid1.eq(product.valid), first1.eq(product.first), data1.eq(product.data),
                     addr1.eq(product.addr)]
        # stage 2: both operands registered (the bank's read data, routed across the chip, ran
        # into the adder's first stage in the same cycle: the longest path of the layer)
        valid2 = Signal()
        data2 = Signal(32, reset_less=True)
        old2 = Signal(32, reset_less=True)
        addr2 = Signal(len(product.addr), reset_less=True)
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
        m.d.comb += self.busy.eq(product.valid | valid1 | Cat(*inflight).any())
        if cfg.pipelined:
            w = Widths(cfg)
            done1, done2 = Signal(), Signal()
            m.d.sync += [done1.eq(product.valid & product.done), done2.eq(valid1 & done1)]
            done_out = delay(m, done2, cfg.add_latency, "gdone", reset_less=False)[-1]
            m.d.comb += [self.row_done.valid.eq(adder.o.valid & done_out),
                         self.row_done.row.eq(addr_out[w.feat:w.feat + w.bank_row]
                                              if w.bank_row else 0)]
        return m
