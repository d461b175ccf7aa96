"""Aggregation group: local double buffers, interleaved job contexts, W binary32 adders."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith import Fp32AddConfig, Fp32Adder, Fp32MulConfig, Fp32Multiplier
from moagcn.hw.common.wordsel import select_word
from moagcn.hw.common.ram import LvtRam, Ram
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.layouts import RowLinkSignature, chunks, entry_layout, job_layout, widths
from moagcn.hw.sspmm.protocol import FRONT_END_LATENCY  # noqa: F401 (the cycle model shares it)
from moagcn.hw.sspmm.protocol import MUL_LATENCY, local_write_latency


class LaneAdders(wiring.Component):
    """W binary32 adders of latency L whose sums come back as their next operand.

    Each cycle with ``valid`` every lane adds its word of ``addend`` to the sum leaving its
    adder this cycle, or to ``+0`` where its ``restart`` bit is set; the new sums leave L cycles
    later. The L job contexts of a group take turns, so each sum in the loop belongs to one
    context.

    Members
    -------
    valid : In(1)
        Add this cycle.
    restart : In(W)
        Per lane: start from ``+0`` rather than from the sum leaving the adder.
    addend : In(32 * W)
        One binary32 word per lane.
    sums : Out(32 * W)
        The sums leaving the adders this cycle.
    """

    def __init__(self, lanes: int, latency: int):
        self.lanes, self.latency = lanes, latency
        super().__init__({"valid": In(1), "restart": In(lanes), "addend": In(32 * lanes),
                          "sums": Out(32 * lanes)})

    def elaborate(self, platform):
        m = Module()
        for k in range(self.lanes):
            # the restart is the adder's own input, selected after its operand compare
            # rather than multiplexed into its operand (the compare is a carry chain)
            adder = Fp32Adder(Fp32AddConfig(latency=self.latency, restart=True))
            m.submodules[f"adder_{k}"] = adder
            m.d.comb += [adder.i.valid.eq(self.valid), adder.restart.eq(self.restart[k]),
                         adder.i.payload.a.eq(adder.o.payload),
                         adder.i.payload.b.eq(self.addend.word_select(k, 32)),
                         self.sums.word_select(k, 32).eq(adder.o.payload)]
        return m


class LaneMulAdders(wiring.Component):
    """:class:`LaneAdders` behind W binary32 multipliers: each lane adds ``round(weight *
    addend)`` (the weighted S-SpMM's ``acc = round(round(w * h) + acc)``, two roundings, as
    :class:`~moagcn.hw.arith.Fp32MulAdd` rounds).

    The multipliers (``mul_latency`` stages) sit in front of the adders' loop, not in it: the
    accumulation loop is still the adders' L stages, so the L job contexts of a group take
    their turns as without the multipliers, ``mul_latency`` cycles later. ``valid`` and
    ``restart`` travel beside the multipliers.

    Members
    -------
    valid, restart, addend, sums
        As :class:`LaneAdders`, at the multipliers' inputs (``sums`` at the adders' outputs).
    weight : In(32)
        The binary32 value every lane multiplies its addend by (a bubble's is +0 with addend
        +0: its product is +0, which leaves a sum as it is).
    """

    def __init__(self, lanes: int, latency: int, mul_latency: int = MUL_LATENCY):
        self.lanes, self.latency, self.mul_latency = lanes, latency, mul_latency
        super().__init__({"valid": In(1), "restart": In(lanes), "addend": In(32 * lanes),
                          "weight": In(32), "sums": Out(32 * lanes)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.adders = adders = LaneAdders(self.lanes, self.latency)
        valid, restart = self.valid, self.restart
        for i in range(self.mul_latency):
            # the restart bits and the valid bit, delayed beside the multipliers
            v, r = Signal(name=f"mul_valid_{i}"), Signal(self.lanes, name=f"mul_restart_{i}")
            m.d.sync += [v.eq(valid), r.eq(restart)]
            valid, restart = v, r
        products = Signal(32 * self.lanes, name="products")
        for k in range(self.lanes):
            mul = Fp32Multiplier(Fp32MulConfig(latency=self.mul_latency))
            m.submodules[f"mul_{k}"] = mul
            m.d.comb += [mul.i.valid.eq(self.valid), mul.i.payload.a.eq(self.weight),
                         mul.i.payload.b.eq(self.addend.word_select(k, 32)),
                         products.word_select(k, 32).eq(mul.o.payload)]
        m.d.comb += [adders.valid.eq(valid), adders.restart.eq(restart),
                     adders.addend.eq(products), self.sums.eq(adders.sums)]
        return m


class AggregationGroup(wiring.Component):
    """W lanes of the reduction engine with ``L = adder_latency`` interleaved job contexts.

    A *job* sums, for each of its W lanes, one feature of every neighbour of one row. A *turn*
    adds one neighbour's W selected features into the job's W partial sums.

    *Local double buffers.* Each context has a local buffer of ``local_depth`` entries. When the
    fetcher binds a job to a context (``bind_*``) the context keeps the job's row, chunk and
    lanes in use; when a neighbour's row arrives from the distribution tree for that context,
    with the job's W lane features (``sel``, which the fetcher keeps), the output-mask MUXes
    pick those W words and they are written as one entry (the feature-wise selection of the
    hybrid index module; with two or more root links the entry is registered and written a
    cycle later, :func:`~moagcn.hw.sspmm.protocol.local_write_latency`). A row has at most one
    destination per group, so a group has one bank of W MUXes per root link, not one per
    context. ``reserve`` / ``space`` count the entries in flight, so the fetcher never sends
    more than fit. Entries of the next job follow those of the current one: fetching the next
    row overlaps reducing the current one.

    *Ring.* The contexts take turns, one per cycle (context ``cycle mod L``), so a context's
    next turn comes exactly when the adders return its previous sums and every adder can take
    an operand pair every cycle without hazards. At its turn a context with an entry adds it (a
    job's first entry adds to ``+0``); a context in the middle of a job whose next entry has not
    arrived adds ``+0`` to its sums (a *bubble*: ``s + 0 = s`` bit for bit, because a sum
    started from ``+0`` is never ``-0`` and NaN results are canonical), so its partial sums stay
    in the adder loop; an idle context does nothing. A job's last entry writes its W sums into
    the output buffer as one W-word chunk of the row's *compressed* output (the sums of its
    unmasked features in feature order; the output stream expands it).

    Members
    -------
    bind_valid, bind_slot, bind_job : In
        Context ``bind_slot`` takes ``bind_job`` (its fetch side must be free).
    reserve : In(L)
        The fetcher issued an entry for these contexts.
    space : Out(L)
        The context can take one more reserved entry.
    leaf : In(RowLinkSignature(config, 1)).array(fetch_rows)
        Neighbour rows arriving from the distribution tree, one link per root link (at most
        one destination each), with the destination context (``slot``) and its lane features
        (``sel``) looked up by the fetcher.
    released : Out(L)
        The context's job's last entry was written this cycle (it may be bound again).
    run, clear : In(1)
        Take turns; drop every entry and sum (start).
    wr_addr, wr_chunk, wr_data, wr_en : output-buffer write port: row, chunk index within the
        compressed row, W words (idle lanes +0), one enable
    turn, bubble : Out(1)
        This cycle's turn added an entry; it was a bubble.
    busy : Out(1)
        An entry, a job or a turn is in flight.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        L, R = config.adder_latency, config.fetch_rows
        super().__init__({
            "bind_valid": In(1), "bind_slot": In(range(L)), "bind_job": In(job_layout(config)),
            "reserve": In(L), "space": Out(L), "released": Out(L),
            "run": In(1), "clear": In(1),
            "wr_addr": Out(w["row"]),
            "wr_chunk": Out(range(chunks(config))),
            "wr_data": Out(32 * config.group_lanes),
            "wr_en": Out(1),
            "turn": Out(1), "bubble": Out(1), "busy": Out(1),
            "leaf": In(RowLinkSignature(config, 1)).array(R),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        L, W, D = cfg.adder_latency, cfg.group_lanes, cfg.local_depth
        # the group's local buffers in block RAM: in LUT RAM the wide entries (W words) were
        # dozens of cells across the die, the turn's read address fanned out to all of them a
        # longest path. With one root link, one block RAM (its two ports suffice); with more,
        # one block-RAM bank per link and a live-value table of which bank wrote each entry
        # (as one multi-write-port RAM synthesis built it in flip-flops and a read multiplexer
        # tree, the longest path at 61 MHz). An entry is never read in the cycle it is written
        # (a turn reads only an entry that arrived before; see :meth:`_take_turns`), so
        # neither needs collision logic
        if cfg.fetch_rows == 1:
            local = Ram(entry_layout(cfg).size, L * D, read_ports=1, collisions=False,
                        block=True)
        else:
            local = LvtRam(entry_layout(cfg).size, L * D, read_ports=1,
                           write_ports=cfg.fetch_rows)
        m.submodules.local = local
        # weighted: each lane multiplies by its entry's edge value before it adds
        m.submodules.lanes = lanes = LaneMulAdders(W, L) if cfg.weighted else LaneAdders(W, L)
        ctx = self._bind_contexts(m)
        self._write_leaves(m, local, ctx)
        turn, bubble, got, reading = self._take_turns(m, local, ctx)
        # -- the entry arrives and is registered as the adders' operands (the local buffer's
        # read data and the turn, which fans out to every lane, ran into the adders' first
        # stage in one cycle); add it to the context's sums (to +0 on a job's first entry) ---
        jl = job_layout(cfg)
        op = Signal(data.StructLayout({"turn": 1, "bubble": 1, "first": 1, "last": 1,
                                       "row": jl["row"].shape, "chunk": jl["chunk"].shape,
                                       "lane_valid": W}), name="op")
        addend = Signal(32 * W, name="op_words")
        # one restart register per lane, each a different function (the lane's own valid bit
        # in it: a lane the job does not use is written as 0 whatever its adder sums), so that
        # synthesis cannot merge them: one shared register fanned out to every lane's operand
        # MUXes was the longest path
        restart = [Signal(name=f"op_restart_{k}") for k in range(W)]
        starts = turn & got.first & ~self.clear
        m.d.sync += [op.turn.eq(turn & ~self.clear), op.bubble.eq(bubble & ~self.clear),
                     op.first.eq(got.first), op.last.eq(got.last), op.row.eq(got.row),
                     op.chunk.eq(got.chunk), op.lane_valid.eq(got.lane_valid),
                     *[restart[k].eq(starts & got.lane_valid[k]) for k in range(W)],
                     addend.eq(Mux(turn, got.words, 0))]
        m.d.comb += [lanes.valid.eq(op.turn | op.bubble), lanes.restart.eq(Cat(*restart)),
                     lanes.addend.eq(addend)]
        if cfg.weighted:
            # a bubble multiplies +0 by +0: its product is +0 whatever the entry's words
            weight = Signal(32, name="op_weight")
            m.d.sync += weight.eq(Mux(turn, got.value, 0))
            m.d.comb += lanes.weight.eq(weight)
        meta = self._beside_adders(m, op.turn, op.bubble, op)
        # -- write-back: a job's last turn writes its W sums as one chunk of the compressed row
        out = meta[-1]
        m.d.comb += [self.wr_addr.eq(out.row), self.wr_chunk.eq(out.chunk),
                     self.wr_en.eq(out.valid & out.last)]
        for k in range(W):
            m.d.comb += self.wr_data.word_select(k, 32).eq(
                Mux(out.lane_valid[k], lanes.sums.word_select(k, 32), 0))

        pending = Cat(*[(ctx.wptr[i] != ctx.rptr[i]) | ctx.reserved[i][0] for i in range(L)])
        in_flight = Cat(pending, ctx.active, reading, turn, bubble, op.turn, op.bubble,
                        *[stage.valid for stage in meta])
        m.d.comb += self.busy.eq(in_flight.any())
        return m

    def _bind_contexts(self, m: Module):
        """Per context: the bound job's lane features and bookkeeping, its local-buffer
        pointers and reservations (registers; the other steps update them)."""
        cfg = self.config
        L, W, D = cfg.adder_latency, cfg.group_lanes, cfg.local_depth
        jl = job_layout(cfg)
        depth_bits = (D - 1).bit_length()
        ctx = _Contexts(
            job=[Signal(data.StructLayout({"row": jl["row"].shape, "chunk": jl["chunk"].shape,
                                           "lane_valid": W}), name=f"job_{i}")
                 for i in range(L)],
            wptr=[Signal(depth_bits + 1, name=f"wptr_{i}") for i in range(L)],
            rptr=[Signal(depth_bits + 1, name=f"rptr_{i}") for i in range(L)],
            # a thermometer code (bit k: more than k entries), so that the count's update and
            # its compare are a shift and a bit, not a carry chain on the credit loop
            reserved=[Signal(D, name=f"reserved_{i}") for i in range(L)],
            active=Signal(L),        # the context is in the middle of a job
            hit=Signal(L),           # an entry arrives for the context this cycle
            depth_bits=depth_bits,
        )
        for i in range(L):
            with m.If(self.bind_valid & (self.bind_slot == i)):
                m.d.sync += [ctx.job[i].row.eq(self.bind_job.row),
                             ctx.job[i].chunk.eq(self.bind_job.chunk),
                             ctx.job[i].lane_valid.eq(self.bind_job.lane_valid)]
            m.d.comb += self.space[i].eq(~ctx.reserved[i][D - 1])
        return ctx

    def _write_leaves(self, m: Module, local: Ram | LvtRam, ctx: "_Contexts"):
        """The output-mask MUXes: each arriving neighbour row's W features selected by its
        destination context's lane features, written as one entry of that context's local
        buffer.

        A packet has at most one destination in a group, so each root link needs one bank of W
        multiplexers per group. The packet brings the destination context (``slot``) and its
        lane features (``sel``), looked up by the fetcher a cycle earlier.
        """
        cfg = self.config
        L, W, D = cfg.adder_latency, cfg.group_lanes, cfg.local_depth
        el = entry_layout(cfg)
        jobs, wptrs = Array(ctx.job), Array(ctx.wptr)
        hit_ctx = []              # (hit, context, last) per link
        for j, (link, write) in enumerate(zip(self.leaf, local.write)):
            pkt = link.packet
            slot, lane_sel = pkt.slot[0], pkt.sel[0]
            entry = Signal(el, name=f"entry_{j}")
            for k in range(W):
                m.d.comb += entry.words.word_select(k, 32).eq(
                    select_word(m, link.words, lane_sel[k], name=f"leaf_{j}_word_{k}"))
            bound = jobs[slot]
            m.d.comb += [entry.first.eq(pkt.first), entry.last.eq(pkt.last),
                         entry.row.eq(bound.row), entry.chunk.eq(bound.chunk),
                         entry.lane_valid.eq(bound.lane_valid)]
            if cfg.weighted:
                m.d.comb += entry.value.eq(pkt.value)
            addr = slot * D + wptrs[slot][:ctx.depth_bits]
            if local_write_latency(cfg):
                # the entry, its address and enable registered before the write: the two
                # banks are often placed far from the word selects (routing to them was a
                # longest path); :meth:`_take_turns` counts the entry a cycle later
                w_addr = Signal(len(write.addr), name=f"leaf_{j}_w_addr")
                w_data = Signal(el, name=f"leaf_{j}_w_data")
                w_en = Signal(name=f"leaf_{j}_w_en")
                m.d.sync += [w_addr.eq(addr), w_data.eq(entry),
                             w_en.eq(pkt.valid & ~self.clear)]
                m.d.comb += [write.addr.eq(w_addr), write.data.eq(w_data), write.en.eq(w_en)]
            else:
                m.d.comb += [write.addr.eq(addr), write.data.eq(entry), write.en.eq(pkt.valid)]
            hit_ctx.append((pkt.valid, slot, pkt.last))
        for i in range(L):
            hit = 0
            released = 0
            for valid, slot, last in hit_ctx:
                hit = hit | (valid & (slot == i))
                released = released | (valid & (slot == i) & last)
            m.d.comb += [self.released[i].eq(released), ctx.hit[i].eq(hit)]
            with m.If(self.clear):
                m.d.sync += ctx.wptr[i].eq(0)
            with m.Elif(hit):
                m.d.sync += ctx.wptr[i].eq(ctx.wptr[i] + 1)

    def _take_turns(self, m: Module, local: Ram | LvtRam, ctx: "_Contexts"):
        """The ring: context ``phase`` takes this cycle's turn and reads its next entry.

        Returns the turn as its entry arrives two cycles later (the read, its register; the
        operand register follows), with the entry read: (an entry is added, a bubble, the
        entry, the turns and bubbles of the cycle between).
        """
        cfg = self.config
        L, D = cfg.adder_latency, cfg.local_depth
        # the ring starts at context 0 with every job (so a job's cycles do not depend on how
        # long the accelerator waited before it)
        phase = Signal(range(L))
        m.d.sync += phase.eq(Mux(self.clear | (phase == L - 1), 0, phase + 1))
        rptrs, wptrs = Array(ctx.rptr), Array(ctx.wptr)
        have = Signal()           # context ``phase`` has an entry in its local buffer
        if L == 1:
            m.d.comb += have.eq(wptrs[phase] != rptrs[phase])
        else:
            # decided a cycle ahead for the next phase, from the pointers' next values (the
            # multiplexers and the compare ran into every context's credit count in the turn's
            # cycle): its write pointer moves if an entry arrives for it now, its read pointer
            # does not (only the current phase's can)
            ahead = Signal(range(L), name="phase_ahead", init=1)
            m.d.sync += ahead.eq(Mux(self.clear, 1, Mux(ahead == L - 1, 0, ahead + 1)))
            bits = len(ctx.wptr[0])
            if local_write_latency(cfg):
                # an entry arriving now is written next cycle and read from the one after:
                # the write pointer as it is counts the entries written by then
                arriving = wptrs[ahead]
            else:
                arriving = (wptrs[ahead] + Array(ctx.hit)[ahead])[:bits]
            m.d.sync += have.eq(~self.clear & (arriving != rptrs[ahead]))
        turn = self.run & have
        bubble = self.run & ~have & ctx.active.bit_select(phase, 1)
        read = local.read[0]
        # read only at a turn: the context's head entry, written in an earlier cycle (``have``
        # counts the entries that arrived before this cycle), never the one a link writes now
        m.d.comb += [read.addr.eq(phase * D + rptrs[phase][:ctx.depth_bits]), read.en.eq(turn),
                     self.turn.eq(turn), self.bubble.eq(bubble)]
        for i in range(L):
            took = turn & (phase == i)
            with m.If(self.clear):
                m.d.sync += [ctx.rptr[i].eq(0), ctx.reserved[i].eq(0)]
            with m.Else():
                count = ctx.reserved[i]
                with m.If(self.reserve[i] & ~took):
                    m.d.sync += count.eq(Cat(1, count[:D - 1]))
                with m.Elif(took & ~self.reserve[i]):
                    m.d.sync += count.eq(count[1:])
                with m.If(took):
                    m.d.sync += ctx.rptr[i].eq(ctx.rptr[i] + 1)

        # the entry arrives two cycles later: the read, then a register of its data (the block
        # RAM's 5.8 ns of clock-to-out on ECP5 into the operand multiplexers was a longest
        # path; registered, the read has a cycle of its own and the operands start from a
        # flip-flop)
        r_turn, r_bubble = Signal(name="r_turn"), Signal(name="r_bubble")
        r_ctx = Signal(range(L), name="r_ctx")
        m.d.sync += [r_turn.eq(turn & ~self.clear), r_bubble.eq(bubble & ~self.clear),
                     r_ctx.eq(phase)]
        t_turn, t_bubble = Signal(name="t_turn"), Signal(name="t_bubble")
        t_ctx = Signal(range(L))
        m.d.sync += [t_turn.eq(r_turn & ~self.clear), t_bubble.eq(r_bubble & ~self.clear),
                     t_ctx.eq(r_ctx)]
        read_entry = data.View(entry_layout(cfg), read.data)
        got = Signal(entry_layout(cfg), name="entry_read")
        m.d.sync += got.eq(read_entry)
        # whether the context is in the middle of a job (its entry's ``last`` bit), in time for
        # its next turn ``adder_latency`` cycles on: from the registered entry where that is
        # 3 or more (from the block RAM's read it was a longest path), else from the read
        if L >= 3:
            known, known_ctx, last = t_turn, t_ctx, got.last
        else:
            known, known_ctx, last = r_turn, r_ctx, read_entry.last
        for i in range(L):
            with m.If(self.clear):
                m.d.sync += ctx.active[i].eq(0)
            with m.Elif(known & (known_ctx == i)):
                m.d.sync += ctx.active[i].eq(~last)
        return t_turn, t_bubble, got, Cat(r_turn, r_bubble)

    def _beside_adders(self, m: Module, turn, bubble, got):
        """The turn's bookkeeping, delayed beside the adders (one stage per adder stage, and
        with ``weighted`` one per multiplier stage before them); returns the stages, the last
        one leaving with the sums."""
        cfg = self.config
        jl = job_layout(cfg)
        late_layout = data.StructLayout({"valid": 1, "last": 1, "row": jl["row"].shape,
                                         "lane_valid": cfg.group_lanes,
                                         "chunk": jl["chunk"].shape})
        meta = Signal(late_layout, name="meta_add_0")
        m.d.sync += [meta.valid.eq((turn | bubble) & ~self.clear),
                     meta.last.eq(turn & got.last), meta.row.eq(got.row),
                     meta.lane_valid.eq(got.lane_valid), meta.chunk.eq(got.chunk)]
        stages = [meta]
        depth = cfg.adder_latency + (MUL_LATENCY if cfg.weighted else 0)
        for i in range(1, depth):
            delayed = Signal(late_layout, name=f"meta_add_{i}")
            m.d.sync += delayed.eq(stages[-1])
            with m.If(self.clear):
                m.d.sync += delayed.valid.eq(0)
            stages.append(delayed)
        return stages


@dataclass
class _Contexts:
    """The registers of a group's L job contexts (see :meth:`AggregationGroup._bind_contexts`)."""

    job: list          # the bound job's row, chunk and lanes in use
    wptr: list         # local-buffer write pointer (entries written)
    rptr: list         # local-buffer read pointer (entries taken by turns)
    reserved: list     # entries issued by the fetcher and not yet taken (thermometer code)
    active: Signal     # in the middle of a job
    hit: Signal        # an entry arrives this cycle
    depth_bits: int    # bits of an entry's index within a local buffer
