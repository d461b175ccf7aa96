"""Job scheduler: the adjacency index decoder and the job emitter of the S-SpMM controller."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..common.bits import popcount
from .config import SSpmmConfig
from .layouts import job_layout, row_record_layout, widths
from .mask_decoder import MaskDecoder

ROW_QUEUE_DEPTH = 4


class JobScheduler(wiring.Component):
    """Walk the rows, turn each into jobs, offer one job per cycle.

    Row fetch (one row per cycle, after reading ``indptr[0]``): read ``indptr[v + 1]`` (the
    previous row's gives ``indptr[v]``) and the mask row ``v``;
    next cycle compute the degree and the unmasked-feature count ``|S_v|``, check the row
    pointers, and queue rows that have work (``deg > 0`` and ``|S_v| > 0``): rows without
    neighbours or fully masked cost one fetch cycle and no compute. The emitter splits a queued
    row into ``ceil(|S_v| / W)`` jobs, decoding each job's lane features with the
    :class:`MaskDecoder` (the W lowest features the row has not given out yet), and offers them
    one at a time.

    Members
    -------
    start : In(1)
        Pulse: begin at row 0.
    n_rows, n_features, n_edges : In
        Size of the job and the number of column indices loaded.
    ptr_addr, ptr_data, mask_addr, mask_data : memory read ports (1-cycle latency)
    job, job_valid : Out
        The offered job.
    job_taken : In(1)
        A group takes the offered job this cycle.
    count_en, count_row, count : Out
        Each fetched row's number of computed output elements (``|S_v|``, 0 for a row without
        neighbours), for the output stream.
    done : Out(1)
        Every row has been fetched and every job taken.
    err_indptr : Out(1)
        A row pointer decreased or points beyond the loaded column indices (sticky).
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        w = widths(config)
        super().__init__({
            "start": In(1),
            "n_rows": In(w["row"] + 1),
            "n_features": In(range(config.max_feature_width + 1)),
            "n_edges": In(w["edge"]),
            "ptr_addr": Out(w["row"] + 1), "ptr_data": In(32),
            "mask_addr": Out(w["row"]), "mask_data": In(config.max_feature_width),
            "job": Out(job_layout(config)),
            "job_valid": Out(1),
            "job_taken": In(1),
            "count_en": Out(1), "count_row": Out(w["row"]),
            "count": Out(range(config.max_feature_width + 1)),
            "done": Out(1),
            "err_indptr": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        F = cfg.max_feature_width
        W = cfg.group_lanes
        rec_layout = row_record_layout(cfg)
        m.submodules.queue = queue = SyncFIFO(width=rec_layout.size, depth=ROW_QUEUE_DEPTH)
        m.submodules.decoder = decoder = MaskDecoder(F, W)

        # -- row fetch: rows in order, so each needs one new pointer, indptr[v + 1]; indptr[v]
        # is the previous row's (indptr[0] is read first) ---------------------------------------
        row = Signal(range(cfg.max_nodes + 1))
        priming = Signal()            # indptr[0] is being read
        fetching = Signal()
        fetched = Signal()            # a read issued last cycle: its data is on the ports now
        fetched_row = Signal.like(row)
        last_ptr = Signal(32)         # indptr[fetched_row]
        with m.If(self.start):
            m.d.sync += [row.eq(0), priming.eq(1), fetching.eq(0)]
        with m.If(priming):
            m.d.sync += [priming.eq(0), fetching.eq(1)]
        # issue a read only when the queue can take its result even if nothing leaves it
        issue = fetching & (row < self.n_rows) & (queue.level + fetched < ROW_QUEUE_DEPTH)
        m.d.comb += [self.ptr_addr.eq(Mux(fetching, row + 1, 0)), self.mask_addr.eq(row)]
        m.d.sync += [fetched.eq(issue), fetched_row.eq(row)]
        with m.If(issue):
            m.d.sync += row.eq(row + 1)
        with m.Elif(fetching & (row >= self.n_rows)):
            m.d.sync += fetching.eq(0)
        primed = Signal()
        m.d.sync += primed.eq(priming)
        with m.If(primed | fetched):
            m.d.sync += last_ptr.eq(self.ptr_data)

        p0, p1 = last_ptr, self.ptr_data
        feature_valid = Cat(*[f < self.n_features for f in range(F)])
        mask = self.mask_data & feature_valid
        unmasked = popcount(m, mask)
        deg = (p1 - p0)[:len(self.job.deg)]
        bad = fetched & ((p1 < p0) | (p1 > self.n_edges))
        with m.If(bad):
            m.d.sync += self.err_indptr.eq(1)
        with m.If(self.start):
            m.d.sync += self.err_indptr.eq(0)
        jobs = (unmasked + (W - 1)) >> (W.bit_length() - 1)
        record = Signal(rec_layout)
        m.d.comb += [record.row.eq(fetched_row), record.ptr.eq(p0), record.deg.eq(deg),
                     record.mask.eq(mask), record.jobs.eq(jobs),
                     queue.w_data.eq(record),
                     queue.w_en.eq(fetched & ~bad & (p1 != p0) & (unmasked != 0))]
        m.d.comb += [self.count_en.eq(fetched & ~bad), self.count_row.eq(fetched_row),
                     self.count.eq(Mux(p1 != p0, unmasked, 0))]

        # -- job emitter -----------------------------------------------------------------------
        head = data.View(rec_layout, queue.r_data)
        chunk = Signal(range(-(-F // W) + 1))
        rest = Signal(F)          # the head row's features not given out yet (after chunk 0)
        m.d.comb += decoder.mask.eq(Mux(chunk == 0, head.mask, rest))
        refill = ~self.job_valid | self.job_taken
        row_last = chunk + 1 == head.jobs
        with m.If(refill):
            m.d.sync += self.job_valid.eq(queue.r_rdy)
            with m.If(queue.r_rdy):
                m.d.sync += [self.job.row.eq(head.row), self.job.ptr.eq(head.ptr),
                             self.job.deg.eq(head.deg), self.job.lane_valid.eq(decoder.valid),
                             self.job.chunk.eq(chunk), self.job.row_last.eq(row_last),
                             rest.eq(decoder.rest)]
                for k in range(W):
                    m.d.sync += self.job.sel[k].eq(decoder.sel(k))
                with m.If(row_last):
                    m.d.comb += queue.r_en.eq(1)
                    m.d.sync += chunk.eq(0)
                with m.Else():
                    m.d.sync += chunk.eq(chunk + 1)

        m.d.comb += self.done.eq(~priming & ~primed & ~fetching & ~fetched & ~queue.r_rdy
                                 & ~self.job_valid)
        return m
