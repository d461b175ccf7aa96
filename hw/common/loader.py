"""Fill a buffer from a load stream, one RAM word per beat, from address 0."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.ram import RamWriteSignature

#: what a :class:`BufferLoader` does with beats past its capacity
OVERFLOW = ("wrap", "drop", "hold")


class BufferLoader(wiring.Component):
    """Write beat k of a load stream to RAM word k, while ``enable``.

    Parameters
    ----------
    width, addr_bits : int
        The RAM's word width and address width (a beat is one word).
    count_bits : int
        Width of ``count``.
    step : int
        What one beat adds to ``count`` (a power of two): with ``step`` values per beat the
        count is in values, and beat k still goes to word ``count / step``.
    capacity : int or None
        Words the RAM holds; with ``overflow`` it says what happens to beats past it.
    overflow : str
        ``"wrap"`` (no capacity: every beat is written and counted, the address wraps),
        ``"drop"`` (a beat past the capacity is counted but not written) or ``"hold"``
        (a beat past the capacity is neither written nor counted).

    Members
    -------
    beats : In(stream.Signature(width))
        The load stream: ready while ``enable`` (a beat past the capacity is taken too).
    enable : In(1)
        The buffer may be loaded.
    clear : In(1)
        Restart at word 0 (``count`` becomes zero; a beat taken in the same cycle is lost, so
        hold ``enable`` low then).
    write : Out(RamWriteSignature(addr_bits, width))
        To the RAM's write port.
    count : Out(count_bits)
        Beats taken so far, times ``step`` (with ``"hold"``: written so far).
    """

    def __init__(self, width: int, addr_bits: int, count_bits: int, *, step: int = 1,
                 capacity: int | None = None, overflow: str = "wrap"):
        if overflow not in OVERFLOW:
            raise ValueError(f"overflow={overflow!r}; choose one of {', '.join(OVERFLOW)}")
        if (capacity is None) != (overflow == "wrap"):
            raise ValueError("a capacity goes with overflow 'drop' or 'hold', and only with them")
        if step < 1 or step & (step - 1):
            raise ValueError(f"step={step} must be a power of two")
        self.step, self.capacity, self.overflow = step, capacity, overflow
        super().__init__({
            "beats": In(stream.Signature(width)),
            "enable": In(1), "clear": In(1),
            "write": Out(RamWriteSignature(addr_bits, width)),
            "count": Out(count_bits),
        })

    def elaborate(self, platform):
        m = Module()
        offered = self.beats.valid & self.enable
        if self.overflow == "wrap":
            write = counted = offered
        else:
            fits = self.count < self.step * self.capacity
            write = offered & fits
            counted = offered if self.overflow == "drop" else write
        m.d.comb += [self.beats.ready.eq(self.enable),
                     self.write.addr.eq(self.count >> (self.step.bit_length() - 1)),
                     self.write.data.eq(self.beats.payload),
                     self.write.en.eq(write)]
        with m.If(self.clear):
            m.d.sync += self.count.eq(0)
        with m.Elif(counted):
            m.d.sync += self.count.eq(self.count + self.step)
        return m
