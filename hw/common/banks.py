"""Ping-pong load buffers and per-job load counters, shared by the designs that restart
without a reset (the next job's loads fill one half of each buffer while a job reads the
other)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal

from moagcn.hw.common.bits import bits_for, wire


def job_loads(m: Module, start, busy, transfer, cycles_load, cycles_load_hidden):
    """The per-job load counters: cycles with a ``transfer`` before the job's ``start`` (since
    the start before), and those of them while ``busy`` (beside the job before), driven onto
    ``cycles_load`` / ``cycles_load_hidden``; after ``done`` they describe the job that ran.
    Until the first start ``cycles_load`` reads the loads so far.

    The start cycle must move no load (a design's streams are not ready then). Transfers,
    ``busy`` and ``start`` are counted from registers, a cycle late: a transfer depends on the
    start pulse, an input, through the streams' ``ready``, and straight into the adds and the
    hand-over it was a design's longest path."""
    transfer_r, busy_r = Signal(name="load_transfer_r"), Signal(name="load_busy_r")
    handover = Signal(name="load_counters_handover")
    m.d.sync += [transfer_r.eq(transfer), busy_r.eq(busy), handover.eq(start)]
    since = Signal(len(cycles_load), name="load_cycles_since_start")
    hidden = Signal(len(cycles_load_hidden), name="load_cycles_hidden_since_start")
    loads = Signal(len(cycles_load), name="load_cycles_of_job")
    loads_hidden = Signal(len(cycles_load_hidden), name="load_cycles_hidden_of_job")
    started = Signal(name="started_since_reset")
    add, add_hidden = since + transfer_r, hidden + (transfer_r & busy_r)
    with m.If(handover):
        m.d.sync += [loads.eq(add), loads_hidden.eq(add_hidden), since.eq(0), hidden.eq(0),
                     started.eq(1)]
    with m.Else():
        m.d.sync += [since.eq(add), hidden.eq(add_hidden)]
    m.d.comb += [cycles_load.eq(Mux(started, loads, add)),
                 cycles_load_hidden.eq(Mux(started, loads_hidden, 0))]


def banked_depth(count: int, depth: int) -> int:
    """Words of a RAM that holds ``depth`` words in each of ``count`` (1 or 2) halves: the
    second half starts at the next power of two (its address is the bank bit above the
    word's)."""
    if count == 1:
        return depth
    return (1 << bits_for(depth)) + depth


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

    def run_addr(self, addr):
        """``addr`` in the half the running job reads, from the register alone: for readers
        that never read in a start cycle (``read`` comes through ``start``, and so from
        ``busy``: a long path into a block RAM's address)."""
        return Cat(addr, self.run) if self.count > 1 else addr

    def connect_reader(self, m: Module, user, port, at_start: bool = True) -> None:
        """Connect a reader ``user`` (a :class:`~moagcn.hw.common.ram.RamReadSignature`
        interface as its user sees it: ``addr``, ``en`` out, ``data`` in) to the RAM read
        ``port`` in the half the job reads. ``at_start=False`` for a reader that never reads
        in the start cycle, which then takes the half from the register (:meth:`run_addr`)."""
        addr = self.read_addr(user.addr) if at_start else self.run_addr(user.addr)
        m.d.comb += [port.addr.eq(addr), port.en.eq(user.en), user.data.eq(port.data)]
