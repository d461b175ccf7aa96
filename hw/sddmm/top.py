"""The SDDMM accelerator's gateware: ``S[e, h] = Σ_f Q[v, hD + f] K[u, hD + f]`` for every
unmasked (entry, head) pair, one chunk of ``lanes`` columns per cycle through a binary adder
tree (docs/attention.md, "Hardware").

Block diagram::

    entries_in -> entry buffer -> walker (one pair per cycle) -> next-pair register
                                                                       |
    q_in -> Q buffer --+                          slot ring (add_latency pairs)
    k_in -> K buffer --+-- chunk reads (one per cycle) <--------------+
                       v
            P multipliers -> binary adder tree (P - 1 adders) -> accumulating adder --+
                                                                   ^  (restart: +0)   |
                                                                   +------------------+
                                                      last chunk -> output queue -> out

Pairs are issued in groups of ``L = add_latency``: chunk 0 of the group's L pairs in L
cycles, then chunk 1 of the same pairs, and so on, so each pair's next chunk reaches the
accumulating adder exactly when that pair's previous partial sum leaves it (no accumulator
stalls, no accumulator copies). Every group takes ``chunks x L`` cycles; the slots of the last
group without a pair are idle.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith.adder import Fp32AddConfig, Fp32Adder
from moagcn.hw.arith.multiplier import Fp32MulConfig, Fp32Multiplier
from moagcn.hw.common.counters import count_events, counter_members
from moagcn.hw.common.queue import Queue
from moagcn.hw.sddmm import protocol
from moagcn.hw.sddmm.config import SddmmConfig


def _delay(m: Module, value, cycles: int, name: str):
    """``value`` registered ``cycles`` times."""
    for k in range(cycles):
        reg = Signal(len(value), name=f"{name}_d{k}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


class SddmmAccelerator(wiring.Component):
    """The SDDMM accelerator.

    Members
    -------
    entries_in : In(stream.Signature(64))
        One stored entry per beat: Q row (bits 0-15), K row (bits 16-31), head mask (bits
        32-63; bit h set: compute head h). The host leaves out entries without a head to compute.
    q_in, k_in : In(stream.Signature(32 * lanes))
        Rows of Q and K, ``row_chunks`` beats each: head by head, ``chunks`` beats of ``lanes``
        columns per head (columns beyond the head's width zero).
    n_entries, n_rows, n_cols, heads, chunks, row_chunks : In(32)
        The job's entries, Q rows, K rows, heads, chunks per head and chunks per row.
    start : In(1)
        Start the job (the buffers loaded).
    out : Out(stream.Signature(32))
        One score per beat: the unmasked (entry, head) pairs in stored order.
    done : Out(1)
        The job finished (or stopped on an error flag); held until reset.
    cycles_load, cycles_compute, chunks_issued, pairs_done : Out(32)
        Cycles with a load beat taken; cycles from start to done; chunks issued into the tree;
        sums written to the output queue.
    err_index : Out(1)
        An entry names a Q row, K row or head at or beyond the job's.
    """

    def __init__(self, config: SddmmConfig = SddmmConfig()):
        self.config = config
        super().__init__({
            "entries_in": In(stream.Signature(64)),
            "q_in": In(stream.Signature(32 * config.lanes)),
            "k_in": In(stream.Signature(32 * config.lanes)),
            **{name: In(32) for name in protocol.SCALARS},
            "start": In(1),
            "out": Out(stream.Signature(32)), "done": Out(1),
            **counter_members(protocol.COUNTERS, protocol.COUNTER_BITS),
            "err_index": Out(1),
        })

    def elaborate(self, platform):
        c = self.config
        m = Module()
        P, L = c.lanes, c.add_latency
        cbits = (c.max_chunks - 1).bit_length()        # chunk address bits of a row
        ent = Memory(shape=32 + c.max_heads, depth=c.max_edges, init=[])
        qbuf = Memory(shape=32 * P, depth=c.max_rows * c.max_chunks, init=[])
        kbuf = Memory(shape=32 * P, depth=c.max_cols * c.max_chunks, init=[])
        m.submodules.ent, m.submodules.qbuf, m.submodules.kbuf = ent, qbuf, kbuf

        running = Signal()
        stopped = Signal()

        # -- loading: the entries in order; Q and K row by row, ``row_chunks`` beats a row
        taken = []
        ent_w = ent.write_port()
        addr = Signal(range(c.max_edges + 1), name="ent_waddr")
        beats = self.entries_in
        m.d.comb += [beats.ready.eq(~running & ~stopped), ent_w.addr.eq(addr),
                     ent_w.data.eq(beats.payload[:32 + c.max_heads]),
                     ent_w.en.eq(beats.valid & beats.ready & (addr < c.max_edges))]
        with m.If(beats.valid & beats.ready):
            m.d.sync += addr.eq(addr + 1)
        taken.append(beats.valid & beats.ready)
        for name, mem, rows in (("q_in", qbuf, c.max_rows), ("k_in", kbuf, c.max_cols)):
            port, beats = mem.write_port(), getattr(self, name)
            row = Signal(range(rows + 1), name=f"{name}_row")
            k = Signal(range(c.max_chunks + 1), name=f"{name}_chunk")
            m.d.comb += [beats.ready.eq(~running & ~stopped), port.data.eq(beats.payload),
                         port.addr.eq(Cat(k[:cbits], row[:16]) if cbits else row),
                         port.en.eq(beats.valid & beats.ready & (row < rows)
                                    & (k < c.max_chunks))]
            with m.If(beats.valid & beats.ready):
                with m.If(k + 1 >= self.row_chunks):
                    m.d.sync += [k.eq(0), row.eq(row + 1)]
                with m.Else():
                    m.d.sync += k.eq(k + 1)
            taken.append(beats.valid & beats.ready)

        # -- the walker: one (entry, head) pair per cycle into the next-pair register. The
        # entry it works on is a register (``cur``): the buffer's read port, whose output is
        # slow, only feeds registers. It reads ahead: it always shows entry ``ptr + 1``.
        ptr = Signal(range(c.max_edges + 1))
        seen = Signal(c.max_heads)                     # heads of this entry already emitted
        # transparent: an entry written in the cycle before ``start`` is read as written
        rd = ent.read_port(transparent_for=(ent_w,))
        advance = Signal()
        cur_entry = Signal(32 + c.max_heads)
        # while idle the port shows entry 0; from ``start`` on, entry ``ptr + 1``
        # ``ptr + 1`` and ``ptr + 2`` kept in registers: only a multiplexer lies between the
        # walker's decision and the buffer's address
        ptr1 = Signal(range(c.max_edges + 2), init=1)
        ptr2 = Signal(range(c.max_edges + 3), init=2)
        with m.If(running | self.start):
            m.d.comb += rd.addr.eq(Mux(advance, ptr2, ptr1))
        with m.Else():
            m.d.comb += rd.addr.eq(0)
        e_row, e_col = cur_entry[:16], cur_entry[16:32]
        e_mask = cur_entry[32:32 + c.max_heads]
        # per head, registered from the scalars while idle: its first chunk in a row (head x
        # chunks) and whether the job has it
        first_chunk = [Signal(cbits + 1, name=f"head{h}_chunk") for h in range(c.max_heads)]
        in_job = Signal(c.max_heads)
        with m.If(~running):
            m.d.sync += [first_chunk[h].eq(h * self.chunks[:cbits + 1])
                         for h in range(c.max_heads)]
            m.d.sync += [in_job[h].eq(self.heads > h) for h in range(c.max_heads)]
        # whether entry ``ptr`` is one of the job's: a register, updated as ``ptr`` moves
        n_entries = self.n_entries[:len(ptr) + 1]
        has = Signal()
        remaining = Signal(c.max_heads)
        lowest = Signal(c.max_heads)
        m.d.comb += [remaining.eq(e_mask & ~seen),
                     lowest.eq(remaining & (~remaining + 1))]
        offset_of_lowest = Signal(cbits + 1)
        m.d.comb += offset_of_lowest.eq(
            Cat(*[Cat(*[lowest[h] & first_chunk[h][b] for h in range(c.max_heads)]).any()
                  for b in range(cbits + 1)]))
        single = Signal()
        m.d.comb += single.eq((remaining & (remaining - 1)) == 0)

        nxt_valid = Signal()
        nxt_row, nxt_col = Signal(16), Signal(16)
        nxt_off = Signal(cbits + 1)                    # head x chunks: the head's first chunk
        take = Signal()                                # the issue stage takes the next pair
        fill = Signal()
        m.d.comb += fill.eq(~nxt_valid | take)
        bad = Signal()
        m.d.comb += bad.eq((e_row >= self.n_rows) | (e_col >= self.n_cols)
                           | (lowest & ~in_job).any())
        with m.If(fill & running):
            m.d.sync += nxt_valid.eq(has & remaining.any())
            m.d.sync += [nxt_row.eq(e_row), nxt_col.eq(e_col), nxt_off.eq(offset_of_lowest)]
            with m.If(has):
                with m.If(remaining.any() & bad):
                    m.d.sync += self.err_index.eq(1)
                with m.If(single):
                    m.d.comb += advance.eq(1)
                    m.d.sync += [ptr.eq(ptr1), ptr1.eq(ptr2), ptr2.eq(ptr2 + 1),
                                 has.eq(ptr1 < n_entries), seen.eq(0),
                                 cur_entry.eq(rd.data)]
                with m.Else():
                    m.d.sync += seen.eq(seen | lowest)

        # -- the issue stage: groups of L pairs, chunk-major, through a ring of L slots
        slot_layout = [("valid", 1), ("row", 16), ("col", 16), ("off", cbits + 1)]
        slots = [{f: Signal(w, name=f"slot{i}_{f}") for f, w in slot_layout} for i in range(L)]
        active = Signal()
        s = Signal(range(L))
        chunk = Signal(range(c.max_chunks + 1))
        depth = protocol.output_depth(c)
        inflight = Signal(range(depth + L + 1))
        room = Signal(init=1)                          # inflight + L <= depth, registered
        go = Signal()
        m.d.comb += go.eq(running & ~self.err_index & (active | (nxt_valid & room)))
        first = Signal()
        last = Signal()
        m.d.comb += [first.eq(chunk == 0), last.eq(chunk + 1 >= self.chunks)]
        cur = {f: Signal(w, name=f"cur_{f}") for f, w in slot_layout}
        with m.If(first):
            m.d.comb += [cur["valid"].eq(nxt_valid), cur["row"].eq(nxt_row),
                         cur["col"].eq(nxt_col), cur["off"].eq(nxt_off), take.eq(go & nxt_valid)]
        with m.Else():
            m.d.comb += [cur[f].eq(slots[0][f]) for f, _ in slot_layout]
        issue = Signal()
        m.d.comb += issue.eq(go & cur["valid"])
        with m.If(go):
            for i in range(L):
                src = slots[i + 1] if i + 1 < L else cur
                m.d.sync += [slots[i][f].eq(src[f]) for f, _ in slot_layout]
            with m.If(s == L - 1):
                m.d.sync += s.eq(0)
                with m.If(last):
                    m.d.sync += [chunk.eq(0), active.eq(0)]
                with m.Else():
                    m.d.sync += [chunk.eq(chunk + 1), active.eq(1)]
            with m.Else():
                m.d.sync += [s.eq(s + 1), active.eq(1)]
        q_rd, k_rd = qbuf.read_port(), kbuf.read_port()
        offset = Signal(cbits + 1)
        m.d.comb += offset.eq(cur["off"] + chunk)
        if cbits:
            m.d.comb += [q_rd.addr.eq(Cat(offset[:cbits], cur["row"])),
                         k_rd.addr.eq(Cat(offset[:cbits], cur["col"]))]
        else:
            m.d.comb += [q_rd.addr.eq(cur["row"]), k_rd.addr.eq(cur["col"])]

        # -- multipliers, the binary adder tree, the accumulating adder
        # the operands registered after the reads (the buffers' outputs are slow), the tags
        # beside them: valid, first chunk, last chunk
        tag = _delay(m, Cat(issue, first, last), 2, "tag")
        q_data = _delay(m, q_rd.data, 1, "q_operands")
        k_data = _delay(m, k_rd.data, 1, "k_operands")
        level = []
        for k in range(P):
            mul = Fp32Multiplier(Fp32MulConfig(latency=c.mul_latency))
            m.submodules[f"mul{k}"] = mul
            m.d.comb += [mul.i.valid.eq(tag[0]),
                         mul.i.payload.a.eq(q_data[32 * k:32 * (k + 1)]),
                         mul.i.payload.b.eq(k_data[32 * k:32 * (k + 1)])]
            level.append(mul.o)
        d = 0
        while len(level) > 1:
            nodes = []
            for k in range(0, len(level), 2):
                add = Fp32Adder(Fp32AddConfig(latency=c.add_latency))
                m.submodules[f"tree{d}_{k // 2}"] = add
                m.d.comb += [add.i.valid.eq(level[k].valid),
                             add.i.payload.a.eq(level[k].payload),
                             add.i.payload.b.eq(level[k + 1].payload)]
                nodes.append(add.o)
            level, d = nodes, d + 1
        assert d == protocol.tree_depth(P)
        root = level[0]
        flags = _delay(m, tag[1:], c.mul_latency + d * c.add_latency, "tree_tag")
        acc = Fp32Adder(Fp32AddConfig(latency=c.add_latency, restart=True))
        m.submodules.acc = acc
        m.d.comb += [acc.i.valid.eq(root.valid), acc.i.payload.a.eq(acc.o.payload),
                     acc.i.payload.b.eq(root.payload), acc.restart.eq(flags[0])]
        finished = _delay(m, flags[1], c.add_latency, "acc_last")

        # -- the output queue: room for every pair in flight is reserved before a group starts
        m.submodules.queue = queue = Queue(32, depth)
        write = Signal()
        m.d.comb += [write.eq(acc.o.valid & finished), queue.w_en.eq(write),
                     queue.w_data.eq(acc.o.payload),
                     self.out.valid.eq(queue.r_rdy), self.out.payload.eq(queue.r_data),
                     queue.r_en.eq(self.out.ready)]
        sent = Signal()
        m.d.comb += sent.eq(self.out.valid & self.out.ready)
        entered = Signal()
        m.d.comb += entered.eq(issue & first)
        after = Signal.like(inflight)
        m.d.comb += after.eq(inflight + entered - sent)
        m.d.sync += [inflight.eq(after), room.eq(after <= depth - L)]

        # -- control
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    # the read port shows entry 0 (address 0 while idle): it becomes ``cur``
                    m.d.sync += [cur_entry.eq(rd.data), has.eq(self.n_entries != 0)]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += running.eq(1)
                with m.If(self.err_index | (~go & ~active & ~nxt_valid & ~has
                                            & (inflight == 0))):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [stopped.eq(1), self.done.eq(1)]
        count_events(m, {n: getattr(self, n) for n in protocol.COUNTERS},
                     {"cycles_load": taken[0] | taken[1] | taken[2], "cycles_compute": running,
                      "chunks_issued": issue, "pairs_done": write})
        return m
