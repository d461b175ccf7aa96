"""A small first-in first-out queue whose storage does not hang on the write enable."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class Queue(wiring.Component):
    """First-in first-out queue of ``depth`` words of ``width`` bits (LUT RAM, read without a
    register), with the members of Amaranth's ``SyncFIFO`` that the S-SpMM blocks use.

    The storage is written at the write pointer in every cycle the queue has room, whatever
    ``w_en`` says; ``w_en`` only moves the pointer and the level. The word at the write
    pointer is not in the queue until then, so writing it is harmless, and a late ``w_en``
    reaches a few flip-flops instead of the write enable of every storage cell (with
    ``SyncFIFO`` it fanned out to each LUT-RAM cell's write enable). A word written in one
    cycle can be read in the next, as with ``SyncFIFO``.

    Members
    -------
    w_data : In(width)
    w_en : In(1)
        Push ``w_data`` (taken only with ``w_rdy``).
    w_rdy : Out(1)
        The queue has room (a register).
    r_data : Out(width)
        The oldest word (valid with ``r_rdy``).
    r_rdy : Out(1)
        The queue holds a word.
    r_en : In(1)
        Pop the oldest word (taken only with ``r_rdy``).
    level : Out(range(depth + 1))
        Words held.
    """

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"depth={depth}; a queue holds at least one word")
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
                          "r_data": Out(width), "r_rdy": Out(1), "r_en": In(1),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        D = self.depth
        m.submodules.storage = mem = Memory(shape=self.width, depth=D, init=[])
        write = mem.write_port()
        read = mem.read_port(domain="comb")
        w_ptr = Signal(range(D), name="w_ptr")
        r_ptr = Signal(range(D), name="r_ptr")
        room = Signal(init=1, name="room")
        push = self.w_en & room
        pop = self.r_en & self.r_rdy
        m.d.comb += [write.addr.eq(w_ptr), write.data.eq(self.w_data), write.en.eq(room),
                     read.addr.eq(r_ptr), self.r_data.eq(read.data),
                     self.r_rdy.eq(self.level != 0), self.w_rdy.eq(room)]

        def step(ptr):
            return Mux(ptr == D - 1, 0, ptr + 1)

        with m.If(push):
            m.d.sync += w_ptr.eq(step(w_ptr))
        with m.If(pop):
            m.d.sync += r_ptr.eq(step(r_ptr))
        level = self.level
        after = Mux(push & ~pop, level + 1, Mux(pop & ~push, level - 1, level))
        m.d.sync += [level.eq(after), room.eq(after != D)]
        return m
