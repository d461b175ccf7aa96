"""Aggregation group: interleaved accumulation contexts in front of W binary32 adders."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..arith import Fp32AddConfig, Fp32Adder
from ..common.bits import select_word
from .config import SSpmmConfig
from .layouts import chunks, job_layout, widths

#: cycles from a turn's issue to its operands entering the adders: index read, feature-row
#: read, lane multiplexers (registered)
FRONT_END_LATENCY = 3


class AggregationGroup(wiring.Component):
    """W lanes of the reduction engine with ``adder_latency`` interleaved jobs.

    A *job* sums, for each of its W lanes, one feature of every neighbour of one row. A *turn*
    adds one neighbour's W selected features into the job's W partial sums. The contexts of
    ``L = adder_latency`` jobs circulate in a ring; each cycle the context at the head issues one
    turn, so a context's next turn comes exactly when the adder returns its previous sum, and
    every adder takes an operand pair every cycle without hazards. A job's first turn adds to
    ``+0``; its last turn's sums are written to the output buffer as one W-word chunk of
    the row's *compressed* output (the sums of its unmasked features in feature order; the
    output stream expands it).

    Each turn reads one column index (``idx_addr`` -> ``idx_data`` next cycle) and one feature
    row (``row_addr`` -> ``row_data`` next cycle), then the lane multiplexers pick the W
    features (the feature-wise selection of the hybrid index module).

    Members
    -------
    job, job_valid : In
        The job offered by the scheduler.
    grant : In(1)
        This group may take the offered job this cycle (the scheduler's arbitration).
    free : Out(1)
        The head context is free: the group would take a job this cycle.
    take : Out(1)
        The group takes the job this cycle.
    idx_addr, idx_data, row_addr, row_data : memory read ports (1-cycle latency)
    wr_addr, wr_chunk, wr_data, wr_en : output-buffer write port: row, chunk index within the
        compressed row, W words (idle lanes +0), one enable
    n_rows : In
        Rows of the job; a column index at or beyond it raises ``err_index``.
    err_index : Out(1)
        A turn read a column index out of range (one-cycle pulse).
    busy : Out(1)
        A context is active or a turn is in flight.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        F = config.max_feature_width
        super().__init__({
            "job": In(job_layout(config)),
            "job_valid": In(1),
            "grant": In(1),
            "free": Out(1),
            "take": Out(1),
            "idx_addr": Out(w["edge"]),
            "idx_data": In(32),
            "row_addr": Out(w["row"]),
            "row_data": In(32 * F),
            "wr_addr": Out(w["row"]),
            "wr_chunk": Out(range(chunks(config))),
            "wr_data": Out(32 * config.group_lanes),
            "wr_en": Out(1),
            "n_rows": In(w["row"] + 1),
            "err_index": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        L = cfg.adder_latency
        W = cfg.group_lanes
        F = cfg.max_feature_width
        jl = job_layout(cfg)
        ctx_layout = data.StructLayout({"active": 1, "row": jl["row"].shape, "ptr": jl["ptr"].shape,
                                        "left": jl["deg"].shape, "sel": jl["sel"].shape,
                                        "lane_valid": W, "chunk": jl["chunk"].shape})
        meta_layout = data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                         "row": jl["row"].shape, "sel": jl["sel"].shape,
                                         "lane_valid": W, "chunk": jl["chunk"].shape})
        # beside the adders only what the write-back needs travels on
        late_layout = data.StructLayout({"valid": 1, "last": 1, "row": jl["row"].shape,
                                         "lane_valid": W, "chunk": jl["chunk"].shape})

        # -- issue: the head context (or a new job) issues one turn -------------------------
        ring = [Signal(ctx_layout, name=f"ctx_{i}") for i in range(L)]
        head = ring[0]
        m.d.comb += [self.free.eq(~head.active),
                     self.take.eq(~head.active & self.job_valid & self.grant)]
        cur_row = Mux(self.take, self.job.row, head.row)
        cur_ptr = Mux(self.take, self.job.ptr, head.ptr)
        cur_left = Mux(self.take, self.job.deg, head.left)
        cur_sel = Mux(self.take, self.job.sel, head.sel)
        cur_lv = Mux(self.take, self.job.lane_valid, head.lane_valid)
        cur_chunk = Mux(self.take, self.job.chunk, head.chunk)
        issue = head.active | self.take
        last = issue & (cur_left == 1)

        nxt = Signal(ctx_layout)
        m.d.comb += [nxt.active.eq(issue & ~last), nxt.row.eq(cur_row), nxt.ptr.eq(cur_ptr + 1),
                     nxt.left.eq(cur_left - 1), nxt.sel.eq(cur_sel), nxt.lane_valid.eq(cur_lv),
                     nxt.chunk.eq(cur_chunk)]
        for i in range(L - 1):
            m.d.sync += ring[i].eq(ring[i + 1])
        m.d.sync += ring[L - 1].eq(nxt)
        m.d.comb += self.idx_addr.eq(cur_ptr)

        meta0 = Signal(meta_layout)
        m.d.comb += [meta0.valid.eq(issue), meta0.first.eq(self.take), meta0.last.eq(last),
                     meta0.row.eq(cur_row), meta0.sel.eq(cur_sel), meta0.lane_valid.eq(cur_lv),
                     meta0.chunk.eq(cur_chunk)]

        # -- stage 1: column index arrives; fetch the neighbour's feature row --------------
        meta1 = Signal(meta_layout)
        m.d.sync += meta1.eq(meta0)
        m.d.comb += [self.row_addr.eq(self.idx_data),
                     self.err_index.eq(meta1.valid & (self.idx_data >= self.n_rows))]

        # -- stage 2: feature row arrives; the lane multiplexers pick W features ------------
        meta2 = Signal(meta_layout)
        m.d.sync += meta2.eq(meta1)
        meta3 = Signal(meta_layout)
        operands = [Signal(32, name=f"operand_{k}") for k in range(W)]
        m.d.sync += meta3.eq(meta2)
        for k in range(W):
            m.d.sync += operands[k].eq(select_word(m, self.row_data, meta2.sel[k],
                                                   name=f"lane_word_{k}"))

        # -- stage 3: accumulate: previous partial sum (or +0 on a job's first turn) + operand
        adders = []
        for k in range(W):
            adder = Fp32Adder(Fp32AddConfig(latency=L))
            m.submodules[f"adder_{k}"] = adder
            adders.append(adder)
            m.d.comb += [adder.i.valid.eq(meta3.valid),
                         adder.i.payload.a.eq(Mux(meta3.first, 0, adder.o.payload)),
                         adder.i.payload.b.eq(operands[k])]

        # the turn's metadata travels beside the adders
        beside = []
        meta_out = Signal(late_layout, name="meta_add_0")
        m.d.sync += [meta_out.valid.eq(meta3.valid), meta_out.last.eq(meta3.last),
                     meta_out.row.eq(meta3.row), meta_out.lane_valid.eq(meta3.lane_valid),
                     meta_out.chunk.eq(meta3.chunk)]
        beside.append(meta_out)
        for i in range(1, L):
            delayed = Signal(late_layout, name=f"meta_add_{i}")
            m.d.sync += delayed.eq(meta_out)
            beside.append(delayed)
            meta_out = delayed

        # -- write-back: a job's last turn writes its W sums as one chunk of the compressed row
        m.d.comb += [self.wr_addr.eq(meta_out.row), self.wr_chunk.eq(meta_out.chunk),
                     self.wr_en.eq(meta_out.valid & meta_out.last)]
        for k in range(W):
            m.d.comb += self.wr_data.word_select(k, 32).eq(
                Mux(meta_out.lane_valid[k], adders[k].o.payload, 0))

        in_flight = Cat(*[ctx.active for ctx in ring], meta1.valid, meta2.valid, meta3.valid,
                        *[meta.valid for meta in beside])
        m.d.comb += self.busy.eq(in_flight.any())
        return m
