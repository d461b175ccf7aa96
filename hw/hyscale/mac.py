"""HyScale-GNN update kernel's MAC: one cell of the systolic chain (binary32 multiply-add into
an item's partial sum, its weight RAM and its double-buffered result RAM), and the weight
layout the kernel loads (see :mod:`.update` for the chain).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import ADDER_STAGES, Fp32Adder, Fp32AddConfig, Fp32MulConfig, Fp32Multiplier
from moagcn.hw.arith.adder import adder_stages
from moagcn.hw.arith.simform import acc_form_name, through_form
from moagcn.hw.common.bits import bits_for
from moagcn.hw.common.pipeline import StagedPipeline, delay, place_registers
from moagcn.hw.common.ram import Ram, RamReadSignature, RamWriteSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import ConfigSignature


def weight_depth(cfg: HyScaleConfig) -> int:
    """Words of one job's weights in each MAC: ``ceil(F / m)`` groups of ``F + 1`` rows (bias
    last)."""
    return -(-cfg.max_feature_width // cfg.macs) * (cfg.max_feature_width + 1)


def bank_base(cfg: HyScaleConfig, bank):
    """The first word of load bank ``bank`` in a MAC's weight RAM."""
    return Mux(bank, weight_depth(cfg), 0) if cfg.load_banks > 1 else 0


def weight_words(cfg: HyScaleConfig) -> int:
    """Words of each MAC's weight RAM: one job's weights per load bank (bank ``k`` from word
    ``k * weight_depth``)."""
    return cfg.load_banks * weight_depth(cfg)


class TokenSignature(ConfigSignature):
    """A token of the systolic chain, as its sender sees it.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
    first, last : Out(1)
        The item's first and last input element (``i = 0``, ``i = f_in - 1``).
    row : Out(bits_for(R))
        The item's slot in its block.
    par : Out(1)
        The block's result buffer.
    act : Out(32)
        The activation ``A[r, i]``.
    waddr, baddr : Out(weight address bits)
        Addresses of the weight and of the bias in every MAC's weight RAM.
    """

    def members_for(self, config):
        rbits = bits_for(config.rows_per_block)
        wbits = bits_for(weight_words(config))
        return {"valid": Out(1), "first": Out(1), "last": Out(1), "row": Out(rbits),
                "par": Out(1), "act": Out(32), "waddr": Out(wbits), "baddr": Out(wbits)}


class ResultSignature(ConfigSignature):
    """A MAC's news that an item's result was written into its result RAM.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    valid : Out(1)
    row : Out(bits_for(R))
        The item's slot in its block.
    par : Out(1)
        The block's result buffer.
    """

    def members_for(self, config):
        return {"valid": Out(1), "row": Out(bits_for(config.rows_per_block)), "par": Out(1)}


class AccumulatingAdder(wiring.Component):
    """A binary32 adder whose second operand is its own result, or ``init`` when an item
    restarts, chosen in the adder's last stage rather than in front of its first.

    ``o = a + b`` with ``b`` the adder's result at the cycle of ``a`` (the sum issued
    ``latency`` cycles earlier), except that ``b = init`` where ``restart`` was high ``lead``
    cycles before ``a``. The choice is made on the last stage's result before its output
    register and kept in a second register beside it, so the operand enters the first stage
    straight from a flop (a multiplexer there, driven by a one-bit select fanned out to 32 bits
    and followed by the magnitude compare, was the fused layer's longest path).

    Parameters
    ----------
    latency : int
        Pipeline depth of the adder (``add_latency``).

    Members
    -------
    valid, a : In
        The operand (with the same meaning as :class:`~moagcn.hw.arith.Fp32Adder`'s ``i``).
    restart, init : In
        ``lead`` cycles ahead of the operand they apply to.
    o_valid, o : Out
        The sum, ``latency`` cycles after its operand.
    """

    def __init__(self, latency: int):
        self.latency = latency
        self.lead = self.lead_for(latency)
        super().__init__({"valid": In(1), "a": In(32), "restart": In(1), "init": In(32),
                          "o_valid": Out(1), "o": Out(32)})

    @staticmethod
    def lead_for(latency: int) -> int:
        """Registers after the adder's last stage: how far ahead ``restart`` and ``init``
        come."""
        return place_registers(ADDER_STAGES, latency)[-1]

    def elaborate(self, platform):
        m = Module()
        stages = list(adder_stages())
        name, last = stages[-1]

        def last_with_operand(mm, values):
            out = dict(last(mm, values))
            out["fb"] = Mux(self.restart, self.init, out["result"])
            return out

        stages[-1] = (name, last_with_operand)
        fb = Signal(32, name="acc_operand")
        out = StagedPipeline(m, stages, self.latency).build(
            {"a": self.a, "b": fb, "valid": self.valid})
        m.d.comb += [fb.eq(out["fb"]), self.o.eq(self._result(m, platform, out["result"])),
                     self.o_valid.eq(out["valid"])]
        return m

    def _result(self, m: Module, platform, gates):
        """The sum from the gates, or in Verilog through its simulation form
        (:mod:`moagcn.hw.arith.simform`)."""
        return through_form(m, platform, acc_form_name(self.latency, self.lead), gates, "sum",
                            a=self.a, restart=self.restart, init=self.init)


class MacCell(wiring.Component):
    """One MAC of the chain (see :mod:`.update`).

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    tok : In(TokenSignature(config))
        The token reaching this MAC; it is registered here, one cycle per MAC.
    next : Out(TokenSignature(config))
        The token this MAC holds (registered), for the next MAC.
    relu : In(1)
    weights : In(RamWriteSignature(weight address bits, 32))
        Weight RAM write port (loading).
    results : In(RamReadSignature(bits_for(2 R), 32))
        Result RAM read port (one cycle latency); a row's result is at ``par * R + row``.
    result : Out(ResultSignature(config))
        A row's result was written this cycle.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        R = config.rows_per_block
        self.rbits = bits_for(R)
        self.wbits = bits_for(weight_words(config))
        super().__init__({
            "tok": In(TokenSignature(config)), "next": Out(TokenSignature(config)),
            "relu": In(1),
            "weights": In(RamWriteSignature(self.wbits, 32)),
            "results": In(RamReadSignature(bits_for(2 * R), 32)),
            "result": Out(ResultSignature(config)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.weights = wram = Ram(32, weight_words(cfg), read_ports=2)
        wiring.connect(m, wiring.flipped(self.weights), wram.write[0])
        tok = self._hold_token(m)
        sum_meta, result = self._multiply_add(m, wram, tok)
        self._store_result(m, sum_meta, result)
        return m

    def _hold_token(self, m: Module) -> dict:
        """This MAC's stage of the chain: the token, registered (only ``valid`` is reset);
        returns the registers by field name."""
        held = {}
        fields = zip(self.tok.signature.flatten(self.tok), self.next.signature.flatten(self.next))
        for (path, member, value), (_, _, passed_on) in fields:
            name = path[-1]
            reg = Signal(member.shape, name=f"tok_{name}", reset_less=(name != "valid"))
            m.d.sync += reg.eq(value)
            m.d.comb += passed_on.eq(reg)
            held[name] = reg
        return held

    def _multiply_add(self, m: Module, wram: Ram, tok):
        """act * weight, then added to the item's partial sum coming back from the adder (to
        the bias on the item's first element); returns the bookkeeping beside the sum and the
        sum."""
        cfg = self.config
        weight, bias = wram.read
        # Both RAM reads are followed by a register before any logic (a block RAM's read data
        # comes late in the cycle: the bias through its word multiplexers into the adder was
        # the layer's longest path), and each is issued a cycle earlier, so the MAC's timing
        # is unchanged: the weight from the token arriving here (the previous MAC's register),
        # the bias two cycles before it is chosen (below).
        m.d.comb += weight.addr.eq(self.tok.waddr)
        weight1 = Signal(32, name="weight_r", reset_less=True)
        m.d.sync += weight1.eq(weight.data)
        # stage 1: the weight is out of the RAM
        meta0 = Cat(tok["valid"], tok["first"], tok["last"], tok["row"], tok["par"],
                    tok["baddr"])
        meta1 = Signal(len(meta0))
        act1 = Signal(32, reset_less=True)
        m.d.sync += [meta1.eq(meta0), act1.eq(tok["act"])]
        # stage 2: both operands registered once more, beside the multiplier. The weight
        # register sits by its block RAM and the multiplier by its DSPs, which can be far
        # apart: the weight's route into the multiplier's first stage (its exponent and
        # fraction tests) was the default preset's longest path at two placements
        meta2 = Signal(len(meta0))
        act2 = Signal(32, name="act_in", reset_less=True)
        weight2 = Signal(32, name="weight_in", reset_less=True)
        m.d.sync += [meta2.eq(meta1), act2.eq(act1), weight2.eq(weight1)]
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(latency=cfg.mul_latency))
        m.d.comb += [mul.i.valid.eq(meta2[0]), mul.i.payload.a.eq(act2),
                     mul.i.payload.b.eq(weight2)]
        line = delay(m, meta2, cfg.mul_latency, "mmeta", reset_less=False)
        chain = [meta0, meta1, *line]          # chain[k + 1] is chain[k] a cycle later
        meta = line[-1]
        valid, first = meta[0], meta[1]
        bias1 = Signal(32, name="bias_r", reset_less=True)
        m.d.sync += bias1.eq(bias.data)
        # The item's first product adds to the bias, every other one to the adder's own result.
        # Where the multiplier's pipeline is deep enough, the choice is made in the adder's last
        # stage, ``lead`` cycles ahead (:class:`AccumulatingAdder`), with the bias read that much
        # earlier; otherwise by a multiplexer in front of the adder.
        lead = AccumulatingAdder.lead_for(cfg.add_latency)
        if len(chain) >= 3 + lead:
            m.submodules.adder = acc = AccumulatingAdder(cfg.add_latency)
            ahead = chain[-1 - lead]
            m.d.comb += [bias.addr.eq(chain[-3 - lead][-self.wbits:]),
                         acc.valid.eq(valid), acc.a.eq(mul.o.payload),
                         acc.restart.eq(ahead[1]), acc.init.eq(bias1)]
            total = acc.o
        else:
            m.submodules.adder = adder = Fp32Adder(Fp32AddConfig(latency=cfg.add_latency))
            m.d.comb += [bias.addr.eq(chain[-3][-self.wbits:]),
                         adder.i.valid.eq(valid), adder.i.payload.a.eq(mul.o.payload),
                         adder.i.payload.b.eq(Mux(first, bias1, adder.o.payload))]
            total = adder.o.payload
        out_meta = delay(m, meta[:3 + self.rbits + 1], cfg.add_latency, "ameta",
                         reset_less=False)[-1]
        return out_meta, total

    def _store_result(self, m: Module, out_meta, result):
        """An item's last sum, ReLU applied, into the result RAM (double buffered by block
        parity)."""
        R = self.config.rows_per_block
        o_valid, o_last = out_meta[0], out_meta[2]
        o_row = out_meta[3:3 + self.rbits]
        o_par = out_meta[3 + self.rbits]
        act = Mux(self.relu & result[31], 0, result)
        m.submodules.results = rram = Ram(32, 2 * R)
        write = rram.write[0]
        wiring.connect(m, wiring.flipped(self.results), rram.read[0])
        written = o_valid & o_last
        m.d.comb += [write.addr.eq(Mux(o_par, o_row + R, o_row)), write.data.eq(act),
                     write.en.eq(written),
                     self.result.valid.eq(written), self.result.row.eq(o_row),
                     self.result.par.eq(o_par)]
