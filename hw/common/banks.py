"""Ping-pong load buffers and per-job load counters, shared by the designs that restart
without a reset (the next job's loads fill one half of each buffer while a job reads the
other)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal

from .bits import wire


def job_loads(m: Module, start, busy, transfer, cycles_load, cycles_load_hidden):
    """The per-job load counters: cycles with a ``transfer`` since the last ``start``, and
    those of them while ``busy``, handed to ``cycles_load`` / ``cycles_load_hidden`` at the
    next ``start`` (so after ``done`` they describe the job that ran)."""
    since = Signal(len(cycles_load), name="load_cycles_since_start")
    hidden = Signal(len(cycles_load_hidden), name="load_cycles_hidden_since_start")
    with m.If(start):
        m.d.sync += [cycles_load.eq(since), cycles_load_hidden.eq(hidden),
                     since.eq(0), hidden.eq(0)]
    with m.Else():
        m.d.sync += [since.eq(since + transfer), hidden.eq(hidden + (transfer & busy))]


def banked_depth(count: int, depth: int) -> int:
    """Words of a RAM that holds ``depth`` words in each of ``count`` (1 or 2) halves: the
    second half starts at the next power of two (its address is the bank bit above the
    word's)."""
    if count == 1:
        return depth
    return (1 << max(depth - 1, 1).bit_length()) + depth


class LoadBanks:
    """Which half of the ping-pong load buffers the streams fill and the job reads.

    ``load`` (a register) is the half the streams fill; each start toggles it, so the
    running job's half is the other one, ``run``. In the start cycle the kernels already
    read the starting job's half, which is ``load`` until the toggle: ``read`` is the one
    bit that picks it. With one bank all of these are zero and loading waits for the job
    (``busy``).
    """

    def __init__(self, m: Module, count: int, start, busy):
        if count not in (1, 2):
            raise ValueError(f"load_banks={count}; choose 1 or 2")
        self.count = count
        self.swap = start
        if self.count == 1:
            self.load = self.next_load = self.run = self.read = 0
            self.loading = wire(m, ~busy & ~start, name="loading")
            return
        load = Signal(name="load_bank_r")
        with m.If(start):
            m.d.sync += load.eq(~load)
        self.load = load
        self.next_load = ~load           # the half loads fill after this cycle's start
        self.run = ~load
        self.read = wire(m, Mux(start, load, ~load), name="read_bank")
        self.loading = wire(m, ~start, name="loading")

    def load_addr(self, addr):
        """``addr`` in the half the streams fill."""
        return Cat(addr, self.load) if self.count > 1 else addr

    def read_addr(self, addr):
        """``addr`` in the half the starting or running job reads."""
        return Cat(addr, self.read) if self.count > 1 else addr
