"""Multiply-add ``a * b + c`` from the binary32 multiplier and adder (two roundings)."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith.adder import ADDER_STAGES, Fp32AddConfig, Fp32Adder
from moagcn.hw.arith.fp32 import WIDTH, TernaryOperands
from moagcn.hw.arith.multiplier import MULTIPLIER_STAGES, Fp32MulConfig, Fp32Multiplier


@dataclass(frozen=True)
class Fp32MulAddConfig:
    """Parameters of :class:`Fp32MulAdd`: the latencies of its multiplier and adder."""

    mul_latency: int = MULTIPLIER_STAGES
    add_latency: int = ADDER_STAGES
    enable: bool = False

    def __post_init__(self):
        # the sub-unit configurations validate the ranges
        Fp32MulConfig(self.mul_latency)
        Fp32AddConfig(self.add_latency)

    @property
    def latency(self) -> int:
        """Cycles from operands to result."""
        return self.mul_latency + self.add_latency


class Fp32MulAdd(wiring.Component):
    """``o = round(round(i.a * i.b) + i.c)``, ``mul_latency + add_latency`` cycles later.

    Not fused: the product is rounded to binary32 before the addition, exactly as
    ``np.float32(a * b) + c`` in numpy. ``c`` is delayed alongside the multiplier.

    Members are those of :class:`~moagcn.hw.arith.unit.PipelinedBinaryUnit` with a
    :data:`TernaryOperands` payload.
    """

    def __init__(self, config: Fp32MulAddConfig = Fp32MulAddConfig()):
        self.config = config
        members = {
            "i": In(stream.Signature(TernaryOperands, always_ready=not config.enable)),
            "o": Out(stream.Signature(WIDTH, always_ready=True)),
        }
        if config.enable:
            members["en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(cfg.mul_latency, cfg.enable))
        m.submodules.add = add = Fp32Adder(Fp32AddConfig(cfg.add_latency, cfg.enable))
        if cfg.enable:
            m.d.comb += [mul.en.eq(self.en), add.en.eq(self.en), self.i.ready.eq(self.en)]

        c = self.i.payload.c
        for k in range(cfg.mul_latency):
            delayed = Signal(WIDTH, name=f"c_delay{k}", reset_less=True)
            if cfg.enable:
                with m.If(self.en):
                    m.d.sync += delayed.eq(c)
            else:
                m.d.sync += delayed.eq(c)
            c = delayed

        m.d.comb += [
            mul.i.valid.eq(self.i.valid),
            mul.i.payload.a.eq(self.i.payload.a),
            mul.i.payload.b.eq(self.i.payload.b),
            add.i.valid.eq(mul.o.valid),
            add.i.payload.a.eq(mul.o.payload),
            add.i.payload.b.eq(c),
        ]
        wiring.connect(m, wiring.flipped(self.o), add.o)
        return m
