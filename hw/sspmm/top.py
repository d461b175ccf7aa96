"""The S-SpMM accelerator top level: buffers, scheduler, aggregation groups, output stream."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.bits import popcount, select_word
from ..common.ram import Ram
from .config import SSpmmConfig
from .fetch import NeighbourFetcher
from .group import AggregationGroup
from .layouts import chunks, widths
from .protocol import COUNTER_BITS, COUNTERS
from .scheduler import JobScheduler


class SSpmmAccelerator(wiring.Component):
    """``Z = (A H) ⊙ M`` on binary32 data (MixGCN Eq. 4).

    Use: after reset, fill the buffers through the load streams (row pointers, column indices,
    mask rows, feature rows; any order, each from its start), set ``n_rows`` and
    ``n_features``, pulse ``start``, then take beats of Z from ``out`` until ``done``. Status
    and counters stay readable until the next reset.

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
        Z compressed: per row in order, its computed elements (the unmasked features below
        ``n_features``, in feature order; none for a row without neighbours) in ``ceil(k /
        lanes)`` beats, the last one zero-padded. Masked elements are +0 and never move; the
        host, which has the mask, puts the words back in place.
    n_rows, n_features, start : In
        Job size (sampled at ``start``; ``n_features`` also sets the feature-row beats while
        loading), and the start pulse.
    busy, done : Out(1)
        Computing or streaming out; finished (also after an error).
    err_index, err_indptr : Out(1)
        A column index was >= n_rows; a row pointer decreased or went past the loaded indices.
    cycles_total, cycles_load, cycles_compute, cycles_output : Out(32)
        Cycles from start to done; cycles with a load transfer; aggregation; output streaming.
    stall_no_job, stall_no_context, stall_output : Out(32)
        Aggregation cycles in which a context was free but the scheduler offered no job; in
        which a job was offered but no context was free; output cycles waiting on
        ``out.ready``.
    bubbles : Out(32)
        Turns (summed over the groups) in which a context in the middle of a job had no
        neighbour row in its local buffer yet.
    rows_fetched : Out(32)
        Neighbour feature rows read from the node buffer (each multicast to all the contexts
        of its pass).
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
        # row pointers and column indices are stored in rows of one load beat (LW words): one
        # write port, so each buffer is a plain block RAM; a read takes the row, then the word
        lw_bits = LW.bit_length() - 1
        indptr_rows = -(-(cfg.max_nodes + 1) // LW)
        # one read port: the scheduler walks the rows while computing, the output stream while
        # streaming, each reading one new pointer per row
        m.submodules.indptr_buf = indptr_buf = Ram(32 * LW, indptr_rows, read_ports=1)
        # the fetcher reads R = fetch_rows column indices and neighbour rows per cycle
        R = cfg.fetch_rows
        index_rows = -(-cfg.max_edges // LW)
        m.submodules.index_buf = index_buf = Ram(32 * LW, index_rows, read_ports=R)

        def word_read(buf, port, address, name):
            """Read word ``address`` of a buffer stored in LW-word rows (1-cycle latency)."""
            row_addr, row_data = buf.read(port)
            m.d.comb += row_addr.eq(address >> lw_bits)
            if LW == 1:
                return row_data
            word = Signal(lw_bits, name=f"{name}_word")
            m.d.sync += word.eq(address)
            return select_word(m, row_data, word, name=f"{name}_data")

        m.submodules.mask_buf = mask_buf = Ram(F, cfg.max_nodes, read_ports=1)
        # each row's number of computed elements, written by the scheduler as it fetches the
        # row, read by the output stream (which thus needs neither the mask nor the pointers)
        m.submodules.count_buf = count_buf = Ram(len(Signal(range(F + 1))), cfg.max_nodes)
        m.submodules.node_buf = node_buf = Ram(32 * F, cfg.max_nodes, read_ports=R,
                                               granularity=32 * LW)
        # the output buffer holds each row *compressed*: chunk c = the sums of the row's unmasked
        # features c*W .. c*W + W - 1 (in feature order), written whole by the job of chunk c.
        # An entry is one output beat (P = G*W words, i.e. G chunks): row r takes entries
        # r*beats .. r*beats + beats - 1, so the output stream reads beat by beat and no row is
        # ever held in registers
        W, C = cfg.group_lanes, chunks(cfg)
        beats = -(-C // G)
        m.submodules.out_buf = out_buf = Ram(32 * P, cfg.max_nodes * beats, write_ports=G,
                                             granularity=32 * W)
        g_bits = G.bit_length() - 1

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
            addr, data, en = buf.write(0)
            m.d.comb += [port.ready.eq(loading), addr.eq(count >> lw_bits),
                         data.eq(port.payload),
                         en.eq(port.valid & loading & (count < LW * buf.depth))]
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
        # the beat goes to its place in the row: the data repeats it, one enable per beat
        m.d.comb += feat_data.eq(self.feat_in.payload.replicate(F // LW))
        m.d.comb += feat_en.eq(feat_take << feat_beat)
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
        ptr_data = word_read(indptr_buf, 0, sched.ptr_addr, "ptr")
        cw_addr, cw_data, cw_en = count_buf.write(0)
        m.d.comb += [cw_addr.eq(sched.count_row), cw_data.eq(sched.count),
                     cw_en.eq(sched.count_en & running)]
        smask = mask_buf.read(0)
        m.d.comb += [sched.start.eq(self.start & loading), sched.n_rows.eq(n_rows),
                     sched.n_features.eq(n_features), sched.n_edges.eq(n_edges),
                     sched.ptr_data.eq(ptr_data),
                     smask[0].eq(sched.mask_addr), sched.mask_data.eq(smask[1])]
        m.submodules.fetcher = fetcher = NeighbourFetcher(cfg)
        # the engine's state is dropped in the cycle after start (from a register, so that the
        # simulators need not re-evaluate it whenever the inputs change); it works from the next
        clear = Signal()
        m.d.sync += clear.eq(self.start & loading)
        work = running & ~clear
        m.d.comb += [fetcher.job.eq(sched.job), fetcher.job_valid.eq(sched.job_valid),
                     sched.job_taken.eq(fetcher.job_taken), fetcher.run.eq(work),
                     fetcher.clear.eq(clear), fetcher.n_rows.eq(n_rows)]
        for j in range(R):
            ra, rdata = node_buf.read(j)
            m.d.comb += [fetcher.port("idx_data", j).eq(
                             word_read(index_buf, j, fetcher.port("idx_addr", j), f"index_{j}")),
                         ra.eq(fetcher.port("row_addr", j)),
                         getattr(node_buf, f"r{j}_en").eq(fetcher.port("row_en", j)),
                         fetcher.port("row_data", j).eq(rdata)]
        groups = []
        L = cfg.adder_latency
        for g in range(cfg.groups):
            grp = AggregationGroup(cfg)
            m.submodules[f"group_{g}"] = grp
            groups.append(grp)
            owp = out_buf.write(g)
            m.d.comb += [grp.bind_valid.eq(fetcher.bind_valid & (fetcher.bind_group == g)),
                         grp.bind_slot.eq(fetcher.bind_slot), grp.bind_job.eq(fetcher.bind_job),
                         grp.reserve.eq(fetcher.reserve[g * L:(g + 1) * L]),
                         fetcher.space[g * L:(g + 1) * L].eq(grp.space),
                         fetcher.released[g * L:(g + 1) * L].eq(grp.released),
                         grp.run.eq(work), grp.clear.eq(clear),
                         owp[0].eq(grp.wr_addr * beats + (grp.wr_chunk >> g_bits)),
                         owp[1].eq(grp.wr_data.replicate(G)),
                         owp[2].eq((grp.wr_en & running) << grp.wr_chunk[:g_bits])]
            for j in range(R):
                m.d.comb += [grp.leaf(j).eq(fetcher.leaf(g, j)),
                             grp.leaf_words(j).eq(fetcher.leaf_words(g, j))]
        groups_busy = Cat(*[g.busy for g in groups]).any()

        # -- output stream: each row's computed elements only, compressed ----------------------
        (orp_addr, orp_data), (ocnt_addr, ocnt_data) = out_buf.read(0), count_buf.read(0)

        out_row = Signal(w["row"] + 1)
        out_beat = Signal(range(beats + 1))
        row_beats = Signal(range(beats + 1))
        row_count = Signal(range(W * C + 1))       # words of the row (its unmasked features)
        held = Signal()           # the row's beats are being sent
        fetch_wait = Signal()     # the row's element count is being read
        sent = held & self.out.ready
        beat_last = out_beat + 1 >= row_beats
        # the beat on the output now was addressed in the previous cycle: beat 0 while the row
        # is decided, then the next one with each transfer
        next_beat = Mux(fetch_wait, 0, Mux(sent & ~beat_last, out_beat + 1, out_beat))
        m.d.comb += [orp_addr.eq(out_row * beats + next_beat), ocnt_addr.eq(out_row)]
        with m.If(streaming & ~held & ~fetch_wait):
            m.d.sync += fetch_wait.eq(1)
        last_row = out_row + 1 >= n_rows
        with m.If(fetch_wait):
            # a row without neighbours, or fully masked, sends nothing
            count = ocnt_data
            m.d.sync += [fetch_wait.eq(0), out_beat.eq(0), row_count.eq(count),
                         row_beats.eq((count + (P - 1)) >> (P.bit_length() - 1))]
            with m.If(count != 0):
                m.d.sync += held.eq(1)
            with m.Else():
                m.d.sync += out_row.eq(out_row + 1)
                with m.If(last_row):
                    m.d.sync += [streaming.eq(0), self.done.eq(1)]
        for k in range(P):
            m.d.comb += self.out.payload.word_select(k, 32).eq(
                Mux(out_beat * P + k < row_count, orp_data.word_select(k, 32), 0))
        m.d.comb += self.out.valid.eq(held)
        with m.If(sent):
            with m.If(beat_last):
                m.d.sync += [held.eq(0), out_row.eq(out_row + 1)]
                with m.If(last_row):
                    m.d.sync += [streaming.eq(0), self.done.eq(1)]
            with m.Else():
                m.d.sync += out_beat.eq(out_beat + 1)

        # -- sequencing, errors, counters --------------------------------------------------------
        error = fetcher.err_index | sched.err_indptr
        with m.If(self.start & loading):
            m.d.sync += running.eq(1)
            with m.If(self.n_rows == 0):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(running):
            with m.If(error):
                # a bad job stops here: flags set, nothing streamed, never a hang
                m.d.sync += [running.eq(0), self.done.eq(1)]
            with m.Elif(sched.done & ~fetcher.busy & ~groups_busy):
                m.d.sync += [running.eq(0), streaming.eq(1), out_row.eq(0)]
        with m.If(running & fetcher.err_index):
            m.d.sync += self.err_index.eq(1)
        m.d.comb += self.err_indptr.eq(sched.err_indptr)

        counters = {name: getattr(self, name) for name in COUNTERS}
        increments = {
            "cycles_total": running | streaming,
            "cycles_load": load_transfer,
            "cycles_compute": running,
            "cycles_output": streaming,
            "stall_no_job": fetcher.no_job & ~sched.done,
            "stall_output": streaming & held & ~self.out.ready,
            "stall_no_context": fetcher.no_context,
            "bubbles": popcount(m, Cat(*[g.bubble for g in groups])),
            "rows_fetched": fetcher.issued,
        }
        for name, inc in increments.items():
            m.d.sync += counters[name].eq(counters[name] + inc)
        return m
