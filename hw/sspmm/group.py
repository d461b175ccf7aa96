"""Aggregation group: local double buffers, interleaved job contexts, W binary32 adders."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..arith import Fp32AddConfig, Fp32Adder
from ..common.bits import lowest_set, select_word
from ..common.ram import Ram
from .config import SSpmmConfig
from .layouts import (chunks, entry_layout, job_layout, packet_layout, row_words_shape,
                      widths)
from .protocol import FRONT_END_LATENCY  # noqa: F401 (the cycle model shares it)


class AggregationGroup(wiring.Component):
    """W lanes of the reduction engine with ``L = adder_latency`` interleaved job contexts.

    A *job* sums, for each of its W lanes, one feature of every neighbour of one row. A *turn*
    adds one neighbour's W selected features into the job's W partial sums.

    *Local double buffers.* Each context has a local buffer of ``local_depth`` entries. When the
    fetcher binds a job to a context (``bind_*``) the context keeps the job's W lane features
    (``sel``); when a neighbour's row arrives from the distribution tree for that context, the
    output-mask MUXes pick those W words and they are written as one entry (the feature-wise
    selection of the hybrid index module). A row has at most one destination per group, so a
    group has one bank of W MUXes per root link, not one per context. ``reserve`` / ``space``
    count the entries in flight, so the fetcher never sends more than fit. Entries of the next
    job follow those of the current one: fetching the next row overlaps reducing the current
    one.

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
    leaf_j : In(packet_layout(config, L)), leaf_words_j : In(32 * F), j < fetch_rows
        Neighbour rows arriving from the distribution tree (at most one destination each).
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
        members = {
            "bind_valid": In(1), "bind_slot": In(range(L)), "bind_job": In(job_layout(config)),
            "reserve": In(L), "space": Out(L), "released": Out(L),
            "run": In(1), "clear": In(1),
            "wr_addr": Out(w["row"]),
            "wr_chunk": Out(range(chunks(config))),
            "wr_data": Out(32 * config.group_lanes),
            "wr_en": Out(1),
            "turn": Out(1), "bubble": Out(1), "busy": Out(1),
        }
        for j in range(R):
            members[f"leaf_{j}"] = In(packet_layout(config, L))
            members[f"leaf_words_{j}"] = In(row_words_shape(config))
        super().__init__(members)

    def leaf(self, j: int):
        return getattr(self, f"leaf_{j}")

    def leaf_words(self, j: int):
        return getattr(self, f"leaf_words_{j}")

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        L, W, F, D = cfg.adder_latency, cfg.group_lanes, cfg.max_feature_width, cfg.local_depth
        R = cfg.fetch_rows
        jl = job_layout(cfg)
        el = entry_layout(cfg)
        depth_bits = (D - 1).bit_length()
        m.submodules.local = local = Ram(el.size, L * D, read_ports=1, write_ports=R)

        # -- per context: the bound job's lane features, buffer pointers, reservations ---------
        sel = [Signal(jl["sel"].shape, name=f"sel_{i}") for i in range(L)]
        job = [Signal(data.StructLayout({"row": jl["row"].shape, "chunk": jl["chunk"].shape,
                                         "lane_valid": W}), name=f"job_{i}") for i in range(L)]
        wptr = [Signal(depth_bits + 1, name=f"wptr_{i}") for i in range(L)]
        rptr = [Signal(depth_bits + 1, name=f"rptr_{i}") for i in range(L)]
        reserved = [Signal(range(D + 1), name=f"reserved_{i}") for i in range(L)]
        active = Signal(L)        # the context is in the middle of a job
        for i in range(L):
            with m.If(self.bind_valid & (self.bind_slot == i)):
                m.d.sync += [sel[i].eq(self.bind_job.sel), job[i].row.eq(self.bind_job.row),
                             job[i].chunk.eq(self.bind_job.chunk),
                             job[i].lane_valid.eq(self.bind_job.lane_valid)]
            m.d.comb += self.space[i].eq(reserved[i] < D)

        # -- leaves: the output-mask MUXes write a neighbour's W features into a local buffer --
        # a packet has at most one destination in a group, so each root link needs one bank of
        # W multiplexers per group, set by the destination context's lane features
        sels, jobs, wptrs = Array(sel), Array(job), Array(wptr)
        hit_ctx = []              # (hit, context, last) per link
        for j in range(R):
            pkt = self.leaf(j)
            slot = Signal(range(L), name=f"leaf_{j}_slot")
            m.d.comb += slot.eq(lowest_set(m, pkt.dest, name=f"leaf_{j}_dest"))
            lane_sel = sels[slot]
            entry = Signal(el, name=f"entry_{j}")
            for k in range(W):
                m.d.comb += entry.words.word_select(k, 32).eq(
                    select_word(m, self.leaf_words(j), lane_sel[k], name=f"leaf_{j}_word_{k}"))
            bound = jobs[slot]
            m.d.comb += [entry.first.eq(pkt.first), entry.last.eq(pkt.last),
                         entry.row.eq(bound.row), entry.chunk.eq(bound.chunk),
                         entry.lane_valid.eq(bound.lane_valid)]
            addr, wdata, en = local.write(j)
            m.d.comb += [addr.eq(slot * D + wptrs[slot][:depth_bits]), wdata.eq(entry),
                         en.eq(pkt.valid)]
            hit_ctx.append((pkt.valid, slot, pkt.last))
        for i in range(L):
            hit = 0
            released = 0
            for valid, slot, last in hit_ctx:
                hit = hit | (valid & (slot == i))
                released = released | (valid & (slot == i) & last)
            m.d.comb += self.released[i].eq(released)
            with m.If(self.clear):
                m.d.sync += wptr[i].eq(0)
            with m.Elif(hit):
                m.d.sync += wptr[i].eq(wptr[i] + 1)

        # -- ring: context ``phase`` takes this cycle's turn -----------------------------------
        phase = Signal(range(L))
        m.d.sync += phase.eq(Mux(phase == L - 1, 0, phase + 1))
        rptrs = Array(rptr)
        have = Signal()
        m.d.comb += have.eq(Array(wptr)[phase] != rptrs[phase])
        turn = self.run & have
        bubble = self.run & ~have & active.bit_select(phase, 1)
        raddr, rdata = local.read(0)
        m.d.comb += [raddr.eq(phase * D + rptrs[phase][:depth_bits]),
                     self.turn.eq(turn), self.bubble.eq(bubble)]
        for i in range(L):
            took = turn & (phase == i)
            with m.If(self.clear):
                m.d.sync += [rptr[i].eq(0), reserved[i].eq(0)]
            with m.Else():
                m.d.sync += reserved[i].eq(reserved[i] + self.reserve[i] - took)
                with m.If(took):
                    m.d.sync += rptr[i].eq(rptr[i] + 1)

        # -- the entry arrives: accumulate previous sums (or +0 on a job's first entry) + it ----
        t_turn, t_bubble = Signal(), Signal()
        t_ctx = Signal(range(L))
        m.d.sync += [t_turn.eq(turn & ~self.clear), t_bubble.eq(bubble & ~self.clear),
                     t_ctx.eq(phase)]
        got = data.View(el, rdata)
        for i in range(L):
            with m.If(self.clear):
                m.d.sync += active[i].eq(0)
            with m.Elif(t_turn & (t_ctx == i)):
                m.d.sync += active[i].eq(~got.last)
        adders = []
        for k in range(W):
            adder = Fp32Adder(Fp32AddConfig(latency=L))
            m.submodules[f"adder_{k}"] = adder
            adders.append(adder)
            m.d.comb += [adder.i.valid.eq(t_turn | t_bubble),
                         adder.i.payload.a.eq(Mux(t_turn & got.first, 0, adder.o.payload)),
                         adder.i.payload.b.eq(Mux(t_turn, got.words.word_select(k, 32), 0))]

        # the turn's bookkeeping travels beside the adders
        late_layout = data.StructLayout({"valid": 1, "last": 1, "row": jl["row"].shape,
                                         "lane_valid": W, "chunk": jl["chunk"].shape})
        beside = []
        meta_out = Signal(late_layout, name="meta_add_0")
        m.d.sync += [meta_out.valid.eq((t_turn | t_bubble) & ~self.clear),
                     meta_out.last.eq(t_turn & got.last), meta_out.row.eq(got.row),
                     meta_out.lane_valid.eq(got.lane_valid), meta_out.chunk.eq(got.chunk)]
        beside.append(meta_out)
        for i in range(1, L):
            delayed = Signal(late_layout, name=f"meta_add_{i}")
            m.d.sync += delayed.eq(meta_out)
            with m.If(self.clear):
                m.d.sync += delayed.valid.eq(0)
            beside.append(delayed)
            meta_out = delayed

        # -- write-back: a job's last turn writes its W sums as one chunk of the compressed row
        m.d.comb += [self.wr_addr.eq(meta_out.row), self.wr_chunk.eq(meta_out.chunk),
                     self.wr_en.eq(meta_out.valid & meta_out.last)]
        for k in range(W):
            m.d.comb += self.wr_data.word_select(k, 32).eq(
                Mux(meta_out.lane_valid[k], adders[k].o.payload, 0))

        pending = Cat(*[(wptr[i] != rptr[i]) | (reserved[i] != 0) for i in range(L)])
        in_flight = Cat(pending, active, t_turn, t_bubble, *[meta.valid for meta in beside])
        m.d.comb += self.busy.eq(in_flight.any())
        return m
