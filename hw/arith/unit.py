"""Common shell of the pipelined binary32 units: configuration, ports and clock enable."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.pipeline import StagedPipeline
from moagcn.hw.arith.fp32 import WIDTH, BinaryOperands


@dataclass(frozen=True)
class UnitConfig:
    """Parameters of a pipelined unit.

    Parameters
    ----------
    latency : int
        Cycles from operands to result (0 = combinational); one operation per cycle at any latency.
    enable : bool
        Add an ``en`` input that freezes the pipeline when low; the input stream then has a
        ``ready`` equal to ``en`` and results transfer only on enabled cycles.
    """

    latency: int = 1
    enable: bool = False

    def __post_init__(self):
        if not isinstance(self.latency, int) or not 0 <= self.latency <= 32:
            raise ValueError(f"latency={self.latency!r} is out of range; use an integer 0..32")


class PipelinedBinaryUnit(wiring.Component):
    """A binary32 operation ``o = op(i.a, i.b)`` built from :meth:`stages`.

    Members
    -------
    i : In(stream.Signature(BinaryOperands))
        Operands (``ready`` only with ``enable``).
    o : Out(stream.Signature(32, always_ready=True))
        Results, ``latency`` cycles after their operands; the consumer must take them.
    en : In(1)
        Clock enable (only with ``enable=True``).
    """

    def __init__(self, config: UnitConfig, extra_members: dict | None = None):
        self.config = config
        members = {
            "i": In(stream.Signature(BinaryOperands, always_ready=not config.enable)),
            "o": Out(stream.Signature(WIDTH, always_ready=True)),
        }
        if config.enable:
            members["en"] = In(1)
        members.update(extra_members or {})
        super().__init__(members)

    @staticmethod
    def stages():
        """The operation as a list of ``(name, stage)`` pairs; see :class:`StagedPipeline`."""
        raise NotImplementedError

    def extra_inputs(self) -> dict:
        """Inputs of the first stage besides ``a``, ``b`` and ``valid`` (a subclass's members)."""
        return {}

    def result(self, m: Module, platform, gates):
        """The result word from the gates' ``gates`` (a subclass may pass it through a
        simulation form, :mod:`moagcn.hw.arith.simform`)."""
        return gates

    def elaborate(self, platform):
        m = Module()
        enable = self.en if self.config.enable else None
        if enable is not None:
            m.d.comb += self.i.ready.eq(enable)
        pipe = StagedPipeline(m, self.stages(), self.config.latency, enable)
        out = pipe.build({"a": self.i.payload.a, "b": self.i.payload.b, "valid": self.i.valid,
                          **self.extra_inputs()})
        # while frozen the output register holds: a result transfers only on enabled cycles
        valid = out["valid"] if enable is None else out["valid"] & enable
        m.d.comb += [self.o.payload.eq(self.result(m, platform, out["result"])),
                     self.o.valid.eq(valid)]
        return m
