"""The gather-sum unit's gateware: ``Y[v] = Σ_u A[v,u] X[u]``, one edge at a time, ``lanes``
binary32 adders wide (a test-only design, docs/architecture.md's worked example).

Block diagram: three buffers filled from their load streams (row pointers, column indices,
feature rows of ``lanes`` words), a controller that walks rows and their entries, and a row of
adders whose sum comes back as an operand once it leaves the pipeline (one edge per
``EDGE_CYCLES + adder_latency`` cycles; no interleaving, so the order is the stored order).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith.adder import Fp32AddConfig, Fp32Adder
from moagcn.hw.common.counters import count_events, counter_members

from tests.gsum import protocol
from tests.gsum.config import GSumConfig


class GSumTop(wiring.Component):
    """The gather-sum unit.

    Members
    -------
    indptr_in, indices_in : In(stream.Signature(32))
        Row pointers (``n_rows + 1`` words) and column indices, one word per beat.
    feat_in : In(stream.Signature(32 * lanes))
        Feature rows, one per beat (word ``k`` is column ``k``; unused columns zero).
    n_rows, n_cols : In(32)
        The job's output rows and feature rows.
    start : In(1)
        Start the job (the buffers loaded).
    out : Out(stream.Signature(32 * lanes))
        One output row per beat, in row order.
    done : Out(1)
        The job finished (or stopped on an error flag); held until reset.
    cycles_load, cycles_compute : Out(32)
        Cycles with a load beat taken; cycles from start to done.
    err_index : Out(1)
        A column index at or beyond ``n_cols``.
    """

    def __init__(self, config: GSumConfig = GSumConfig()):
        self.config = config
        words = 32 * config.lanes
        super().__init__({
            "indptr_in": In(stream.Signature(32)), "indices_in": In(stream.Signature(32)),
            "feat_in": In(stream.Signature(words)),
            "n_rows": In(32), "n_cols": In(32), "start": In(1),
            "out": Out(stream.Signature(words)), "done": Out(1),
            **counter_members(protocol.COUNTERS, protocol.COUNTER_BITS),
            "err_index": Out(1),
        })

    def elaborate(self, platform):
        c = self.config
        m = Module()
        ptr = Memory(shape=unsigned(32), depth=c.max_rows + 1, init=[])
        idx = Memory(shape=unsigned(32), depth=c.max_edges, init=[])
        feat = Memory(shape=unsigned(32 * c.lanes), depth=c.max_cols, init=[])
        m.submodules.ptr, m.submodules.idx, m.submodules.feat = ptr, idx, feat

        # -- loading: each stream writes its buffer from word 0, while no job runs
        busy = Signal()
        taken = []
        for name, mem in (("indptr_in", ptr), ("indices_in", idx), ("feat_in", feat)):
            port, beats = mem.write_port(), getattr(self, name)
            addr = Signal(range(mem.depth + 1), name=f"{name}_addr")
            m.d.comb += [beats.ready.eq(~busy & ~self.done), port.addr.eq(addr),
                         port.data.eq(beats.payload),
                         port.en.eq(beats.valid & beats.ready & (addr < mem.depth))]
            with m.If(beats.valid & beats.ready):
                m.d.sync += addr.eq(addr + 1)
            taken.append(beats.valid & beats.ready)

        # -- the adders: acc + x in every lane
        adders = [Fp32Adder(Fp32AddConfig(latency=c.adder_latency)) for _ in range(c.lanes)]
        for k, a in enumerate(adders):
            m.submodules[f"add{k}"] = a
        acc = Signal(32 * c.lanes)
        issue = Signal()
        ptr_rd, idx_rd, feat_rd = ptr.read_port(), idx.read_port(), feat.read_port()
        for k, a in enumerate(adders):
            m.d.comb += [a.i.valid.eq(issue), a.i.payload.a.eq(acc[32 * k:32 * (k + 1)]),
                         a.i.payload.b.eq(feat_rd.data[32 * k:32 * (k + 1)])]

        # -- the controller
        row = Signal(32)
        edge = Signal(32)
        end = Signal(32)
        m.d.comb += [self.out.payload.eq(acc), idx_rd.addr.eq(edge),
                     feat_rd.addr.eq(idx_rd.data)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += row.eq(0)
                    with m.If(self.n_rows == 0):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "ROW0"
            with m.State("ROW0"):
                m.d.comb += [busy.eq(1), ptr_rd.addr.eq(row)]
                m.next = "ROW1"
            with m.State("ROW1"):
                m.d.comb += [busy.eq(1), ptr_rd.addr.eq(row + 1)]
                m.d.sync += edge.eq(ptr_rd.data)
                m.next = "ROW2"
            with m.State("ROW2"):
                m.d.comb += busy.eq(1)
                m.d.sync += [end.eq(ptr_rd.data), acc.eq(0)]
                with m.If(edge == ptr_rd.data):
                    m.next = "EMIT"
                with m.Else():
                    m.next = "EDGE0"
            with m.State("EDGE0"):          # the index read (addressed by ``edge``)
                m.d.comb += busy.eq(1)
                m.next = "EDGE1"
            with m.State("EDGE1"):          # the feature row read (addressed by the index)
                m.d.comb += busy.eq(1)
                with m.If(idx_rd.data >= self.n_cols):
                    m.d.sync += self.err_index.eq(1)
                    m.next = "DONE"
                with m.Else():
                    m.next = "EDGE2"
            with m.State("EDGE2"):          # the operands issued
                m.d.comb += [busy.eq(1), issue.eq(1)]
                m.next = "WAIT"
            with m.State("WAIT"):
                m.d.comb += busy.eq(1)
                with m.If(adders[0].o.valid):
                    m.d.sync += [acc.eq(Cat(*(a.o.payload for a in adders))),
                                 edge.eq(edge + 1)]
                    with m.If(edge + 1 == end):
                        m.next = "EMIT"
                    with m.Else():
                        m.next = "EDGE0"
            with m.State("EMIT"):
                m.d.comb += [busy.eq(1), self.out.valid.eq(1)]
                with m.If(self.out.ready):
                    m.d.sync += row.eq(row + 1)
                    with m.If(row + 1 == self.n_rows):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "ROW0"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
        count_events(m, {"cycles_load": self.cycles_load, "cycles_compute": self.cycles_compute},
                     {"cycles_load": taken[0] | taken[1] | taken[2], "cycles_compute": busy})
        return m
