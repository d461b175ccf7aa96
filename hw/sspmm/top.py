"""The S-SpMM accelerator top level: buffers, scheduler, aggregation groups, output stream."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.bits import select_word, wire
from ..common.ram import Ram
from .config import SSpmmConfig
from .group import AggregationGroup
from .layouts import chunks, widths
from .scheduler import JobScheduler

COUNTER_BITS = 32
COUNTERS = ("cycles_total", "cycles_load", "cycles_compute", "cycles_output",
            "stall_no_job", "stall_output")


class SSpmmAccelerator(wiring.Component):
    """``Z = (A H) ⊙ M`` on binary32 data (MixGCN Eq. 4).

    Use: after reset, fill the buffers through the load streams (row pointers, column indices,
    mask rows, feature rows; any order, each from its start), set ``n_rows`` and
    ``n_features``, pulse ``start``, wait for ``done``, then take ``n_rows * ceil(n_features /
    lanes)`` beats of Z from ``out``. Status and counters stay readable until the next reset.

    Members
    -------
    indptr_in : In(stream.Signature(32 * load_width))
        Row pointers ``indptr[0..n_rows]``, ``load_width`` per beat (last beat zero-padded).
    indices_in : In(stream.Signature(32 * load_width))
        Column indices, each row sorted ascending (the driver sorts), ``load_width`` per beat.
    mask_in : In(stream.Signature(max_feature_width))
        One output-mask row per beat (bit f: compute feature f).
    feat_in : In(stream.Signature(32 * load_width))
        Feature rows, ``ceil(n_features / load_width)`` beats per row (word 0 lowest).
    out : Out(stream.Signature(32 * lanes))
        Z rows, ``ceil(n_features / lanes)`` beats per row; masked elements and rows without
        neighbours are +0.
    n_rows, n_features, start : In
        Job size (sampled at ``start``; ``n_features`` also sets the feature-row beats while
        loading), and the start pulse.
    busy, done : Out(1)
        Computing or streaming out; finished (also after an error).
    err_index, err_indptr : Out(1)
        A column index was >= n_rows; a row pointer decreased or went past the loaded indices.
    cycles_total, cycles_load, cycles_compute, cycles_output, stall_no_job, stall_output : Out(32)
        Cycle counters: from start to done; cycles with a load transfer; aggregation;
        output streaming; cycles a group could have started a job but none was ready; output
        cycles waiting on ``out.ready``.
    """

    def __init__(self, config: SSpmmConfig = SSpmmConfig()):
        if not config.simulate:
            raise ValueError("this configuration is for the cycle model only; it cannot be built")
        if config.max_feature_width % config.load_width:
            raise ValueError(f"max_feature_width={config.max_feature_width} must be a multiple "
                             f"of load_width={config.load_width}")
        self.config = config
        w = widths(config)
        F = config.max_feature_width
        members = {
            "indptr_in": In(stream.Signature(32 * config.load_width)),
            "indices_in": In(stream.Signature(32 * config.load_width)),
            "mask_in": In(stream.Signature(F)),
            "feat_in": In(stream.Signature(32 * config.load_width)),
            "out": Out(stream.Signature(32 * config.lanes)),
            "n_rows": In(w["row"] + 1),
            "n_features": In(range(F + 1)),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "err_index": Out(1),
            "err_indptr": Out(1),
        }
        for name in COUNTERS:
            members[name] = Out(COUNTER_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        F = cfg.max_feature_width
        P = cfg.lanes
        LW = cfg.load_width
        w = widths(cfg)

        # -- buffers ---------------------------------------------------------------------------
        G = cfg.groups
        # row pointers and column indices arrive load_width words per beat: one write port each
        m.submodules.indptr_buf = indptr_buf = Ram(32, cfg.max_nodes + 1, read_ports=4,
                                                   write_ports=LW)
        m.submodules.index_buf = index_buf = Ram(32, cfg.max_edges, read_ports=G,
                                                 write_ports=LW)
        m.submodules.mask_buf = mask_buf = Ram(F, cfg.max_nodes, read_ports=2)
        m.submodules.node_buf = node_buf = Ram(32 * F, cfg.max_nodes, read_ports=G,
                                               granularity=32)
        # the output buffer holds each row *compressed*: chunk c = the sums of the row's unmasked
        # features c*W .. c*W + W - 1 (in feature order), written whole by the job of chunk c
        W, C = cfg.group_lanes, chunks(cfg)
        m.submodules.out_buf = out_buf = Ram(32 * W * C, cfg.max_nodes, write_ports=G,
                                             granularity=32 * W)

        # -- control -----------------------------------------------------------------------------
        running = Signal()      # aggregation
        streaming = Signal()    # output
        m.d.comb += self.busy.eq(running | streaming)
        loading = ~(running | streaming | self.done)

        # -- loads (sequential fill of each buffer) ----------------------------------------------
        mask_wr, feat_wr = mask_buf.write(0), node_buf.write(0)
        n_ptrs = Signal(w["row"] + 2)
        n_edges = Signal(w["edge"] + 1)
        n_masks = Signal(w["row"] + 1)
        feat_row = Signal(w["row"] + 1)
        feat_beat = Signal(range(F // LW + 1))
        beats_per_row = (self.n_features + (LW - 1)) // LW

        # word k of a beat goes to entry count + k (the host pads the last beat; padding lies
        # past indptr[-1] and is never read)
        for port, buf, count in ((self.indptr_in, indptr_buf, n_ptrs),
                                 (self.indices_in, index_buf, n_edges)):
            m.d.comb += port.ready.eq(loading)
            for k in range(LW):
                addr, data, en = buf.write(k)
                m.d.comb += [addr.eq(count + k), data.eq(port.payload.word_select(k, 32)),
                             en.eq(port.valid & loading & (count + k < buf.depth))]
            with m.If(port.valid & loading):
                m.d.sync += count.eq(count + LW)
        addr, data, en = mask_wr
        m.d.comb += [self.mask_in.ready.eq(loading), addr.eq(n_masks),
                     data.eq(self.mask_in.payload), en.eq(self.mask_in.valid & loading)]
        with m.If(self.mask_in.valid & loading):
            m.d.sync += n_masks.eq(n_masks + 1)
        feat_addr, feat_data, feat_en = feat_wr
        m.d.comb += [self.feat_in.ready.eq(loading), feat_addr.eq(feat_row)]
        feat_take = self.feat_in.valid & loading
        for f in range(F):
            word = self.feat_in.payload.word_select(f % LW, 32)
            m.d.comb += [feat_data.word_select(f, 32).eq(word),
                         feat_en[f].eq(feat_take & (feat_beat == f // LW))]
        with m.If(feat_take):
            with m.If(feat_beat + 1 >= beats_per_row):
                m.d.sync += [feat_beat.eq(0), feat_row.eq(feat_row + 1)]
            with m.Else():
                m.d.sync += feat_beat.eq(feat_beat + 1)
        load_transfer = Cat(*[p.valid & loading for p in
                              (self.indptr_in, self.indices_in, self.mask_in, self.feat_in)]).any()

        # -- job size, sampled at start ----------------------------------------------------------
        n_rows = Signal.like(self.n_rows)
        n_features = Signal.like(self.n_features)
        with m.If(self.start & loading):
            m.d.sync += [n_rows.eq(self.n_rows), n_features.eq(self.n_features)]

        # -- scheduler and aggregation groups ----------------------------------------------------
        m.submodules.scheduler = sched = JobScheduler(cfg)
        sp0, sp1, smask = indptr_buf.read(0), indptr_buf.read(1), mask_buf.read(0)
        m.d.comb += [sched.start.eq(self.start & loading), sched.n_rows.eq(n_rows),
                     sched.n_features.eq(n_features), sched.n_edges.eq(n_edges),
                     sp0[0].eq(sched.ptr0_addr), sched.ptr0_data.eq(sp0[1]),
                     sp1[0].eq(sched.ptr1_addr), sched.ptr1_data.eq(sp1[1]),
                     smask[0].eq(sched.mask_addr), sched.mask_data.eq(smask[1])]
        groups = []
        taken = []
        earlier_free = []
        err_index = []
        for g in range(cfg.groups):
            grp = AggregationGroup(cfg)
            m.submodules[f"group_{g}"] = grp
            groups.append(grp)
            irp, nrp, owp = index_buf.read(g), node_buf.read(g), out_buf.write(g)
            m.d.comb += [grp.job.eq(sched.job), grp.job_valid.eq(sched.job_valid & running),
                         grp.grant.eq(~Cat(*earlier_free).any() if earlier_free else 1),
                         grp.n_rows.eq(n_rows),
                         irp[0].eq(grp.idx_addr), grp.idx_data.eq(irp[1]),
                         nrp[0].eq(grp.row_addr), grp.row_data.eq(nrp[1]),
                         owp[0].eq(grp.wr_addr), owp[1].eq(grp.wr_data.replicate(C)),
                         owp[2].eq((grp.wr_en & running) << grp.wr_chunk)]
            earlier_free.append(grp.free)
            taken.append(grp.take)
            err_index.append(grp.err_index)
        m.d.comb += sched.job_taken.eq(Cat(*taken).any())
        groups_busy = Cat(*[g.busy for g in groups]).any()

        # -- output stream -----------------------------------------------------------------------
        beats = -(-F // P)
        (orp_addr, orp_data), (omask_addr, omask_data) = out_buf.read(0), mask_buf.read(1)
        (op0_addr, op0_data), (op1_addr, op1_data) = indptr_buf.read(2), indptr_buf.read(3)
        out_row = Signal(w["row"] + 1)
        out_beat = Signal(range(beats + 1))
        held = Signal()           # the row's words are latched and being sent
        fetch_wait = Signal()     # row read issued last cycle
        # the compressed row; ``sent`` counts its words sent by the row's earlier beats
        row_words = Signal(32 * W * C)
        row_keep = Signal(beats * P)
        sent = Signal(range(W * C + 1))
        out_beats_per_row = (n_features + (P - 1)) // P
        m.d.comb += [orp_addr.eq(out_row), omask_addr.eq(out_row), op0_addr.eq(out_row),
                     op1_addr.eq(out_row + 1)]
        feature_valid = Cat(*[f < n_features for f in range(F)])
        with m.If(streaming & ~held & ~fetch_wait):
            m.d.sync += fetch_wait.eq(1)
        with m.If(fetch_wait):
            nonempty = op1_data != op0_data
            keep = omask_data & feature_valid & nonempty.replicate(F)
            m.d.sync += [fetch_wait.eq(0), held.eq(1), out_beat.eq(0), sent.eq(0),
                         row_words.eq(orp_data), row_keep.eq(keep)]
        # expand: a kept lane takes the next compressed word; masked lanes are +0
        beat_keep = wire(m, row_keep.word_select(out_beat, P), name="beat_keep")
        rank = sent
        for k in range(P):
            word = select_word(m, row_words, rank, name=f"out_word_{k}")
            m.d.comb += self.out.payload.word_select(k, 32).eq(Mux(beat_keep[k], word, 0))
            rank = wire(m, rank + beat_keep[k], name=f"rank_{k + 1}")
        m.d.comb += self.out.valid.eq(held)
        with m.If(held & self.out.ready):
            m.d.sync += sent.eq(rank)
            with m.If(out_beat + 1 >= out_beats_per_row):
                m.d.sync += [held.eq(0), out_row.eq(out_row + 1)]
                with m.If(out_row + 1 >= n_rows):
                    m.d.sync += [streaming.eq(0), self.done.eq(1)]
            with m.Else():
                m.d.sync += out_beat.eq(out_beat + 1)

        # -- sequencing, errors, counters --------------------------------------------------------
        error = Cat(*err_index).any() | sched.err_indptr
        with m.If(self.start & loading):
            m.d.sync += running.eq(1)
            with m.If(self.n_rows == 0):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(running):
            with m.If(error):
                # a bad job stops here: flags set, nothing streamed, never a hang
                m.d.sync += [running.eq(0), self.done.eq(1)]
            with m.Elif(sched.done & ~groups_busy & ~self.start):
                m.d.sync += [running.eq(0), streaming.eq(1), out_row.eq(0)]
        with m.If(running & Cat(*err_index).any()):
            m.d.sync += self.err_index.eq(1)
        m.d.comb += self.err_indptr.eq(sched.err_indptr)

        counters = {name: getattr(self, name) for name in COUNTERS}
        some_free = Cat(*earlier_free).any()
        increments = {
            "cycles_total": running | streaming,
            "cycles_load": load_transfer,
            "cycles_compute": running,
            "cycles_output": streaming,
            "stall_no_job": running & some_free & ~sched.job_valid & ~sched.done,
            "stall_output": streaming & held & ~self.out.ready,
        }
        for name, inc in increments.items():
            with m.If(inc):
                m.d.sync += counters[name].eq(counters[name] + 1)
        return m
