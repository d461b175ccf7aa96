"""Aggregation group: interleaved accumulation contexts in front of W binary32 adders."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..arith import Fp32AddConfig, Fp32Adder
from .config import SSpmmConfig
from .layouts import job_layout, widths

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
    ``+0``; its last turn's sums are written to the output buffer, each lane to its feature's
    word of the row.

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
    wr_addr, wr_data, wr_en : output-buffer write port (``wr_en`` per 32-bit word)
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
            "wr_data": Out(32 * F),
            "wr_en": Out(F),
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
                                        "lane_valid": W})
        meta_layout = data.StructLayout({"valid": 1, "first": 1, "last": 1,
                                         "row": jl["row"].shape, "sel": jl["sel"].shape,
                                         "lane_valid": W})

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
        issue = head.active | self.take
        last = issue & (cur_left == 1)

        nxt = Signal(ctx_layout)
        m.d.comb += [nxt.active.eq(issue & ~last), nxt.row.eq(cur_row), nxt.ptr.eq(cur_ptr + 1),
                     nxt.left.eq(cur_left - 1), nxt.sel.eq(cur_sel), nxt.lane_valid.eq(cur_lv)]
        for i in range(L - 1):
            m.d.sync += ring[i].eq(ring[i + 1])
        m.d.sync += ring[L - 1].eq(nxt)
        m.d.comb += self.idx_addr.eq(cur_ptr)

        meta0 = Signal(meta_layout)
        m.d.comb += [meta0.valid.eq(issue), meta0.first.eq(self.take), meta0.last.eq(last),
                     meta0.row.eq(cur_row), meta0.sel.eq(cur_sel), meta0.lane_valid.eq(cur_lv)]

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
            m.d.sync += operands[k].eq(self.row_data.word_select(meta2.sel[k], 32))

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
        meta_out = meta3
        for i in range(L):
            delayed = Signal(meta_layout, name=f"meta_add_{i}")
            m.d.sync += delayed.eq(meta_out)
            beside.append(delayed)
            meta_out = delayed

        # -- write-back: a job's last turn puts each lane's sum into its feature's word -----
        write = meta_out.valid & meta_out.last
        m.d.comb += self.wr_addr.eq(meta_out.row)
        for f in range(F):
            hits = [meta_out.lane_valid[k] & (meta_out.sel[k] == f) for k in range(W)]
            word = Const(0, 32)
            for k in range(W):
                word = word | Mux(hits[k], adders[k].o.payload, 0)
            m.d.comb += [self.wr_en[f].eq(write & Cat(*hits).any()),
                         self.wr_data.word_select(f, 32).eq(word)]

        in_flight = Cat(*[ctx.active for ctx in ring], meta1.valid, meta2.valid, meta3.valid,
                        *[meta.valid for meta in beside])
        m.d.comb += self.busy.eq(in_flight.any())
        return m
