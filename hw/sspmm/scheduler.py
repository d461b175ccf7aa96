"""Job scheduler: the adjacency index decoder and the job emitter of the S-SpMM controller."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..common.bits import popcount
from ..common.ram import RamReadSignature
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
    ptr : Out(RamReadSignature(row bits + 1, 32))
        Reads the row pointer ``indptr[ptr.addr]`` (1-cycle latency).
    mask : Out(RamReadSignature(row bits, max_feature_width))
        Reads the output-mask row ``mask.addr`` (1-cycle latency).
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
        F = config.max_feature_width
        super().__init__({
            "start": In(1),
            "n_rows": In(w["row"] + 1),
            "n_features": In(range(F + 1)),
            "n_edges": In(w["edge"]),
            "ptr": Out(RamReadSignature(w["row"] + 1, 32)),
            "mask": Out(RamReadSignature(w["row"], F)),
            "job": Out(job_layout(config)),
            "job_valid": Out(1),
            "job_taken": In(1),
            "count_en": Out(1), "count_row": Out(w["row"]),
            "count": Out(range(F + 1)),
            "done": Out(1),
            "err_indptr": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rec_layout = row_record_layout(self.config)
        m.submodules.queue = queue = SyncFIFO(width=rec_layout.size, depth=ROW_QUEUE_DEPTH)
        fetched, fetched_row, last_ptr, fetch_busy = self._walk_rows(m, queue)
        self._queue_row(m, queue, fetched, fetched_row, last_ptr)
        self._emit_jobs(m, queue)
        m.d.comb += self.done.eq(~fetch_busy & ~queue.r_rdy & ~self.job_valid)
        return m

    def _walk_rows(self, m: Module, queue: SyncFIFO):
        """Read the rows' pointers and mask rows in order, one row per cycle while the queue
        has room.

        Rows go in order, so each needs one new pointer, ``indptr[v + 1]``; ``indptr[v]`` is
        the previous row's (``indptr[0]`` is read first). Returns (a read issued last cycle:
        its data is on the ports now, its row, ``indptr`` of that row, busy).
        """
        row = Signal(range(self.config.max_nodes + 1))
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
        m.d.comb += [self.ptr.addr.eq(Mux(fetching, row + 1, 0)), self.mask.addr.eq(row)]
        m.d.sync += [fetched.eq(issue), fetched_row.eq(row)]
        with m.If(issue):
            m.d.sync += row.eq(row + 1)
        with m.Elif(fetching & (row >= self.n_rows)):
            m.d.sync += fetching.eq(0)
        primed = Signal()
        m.d.sync += primed.eq(priming)
        with m.If(primed | fetched):
            m.d.sync += last_ptr.eq(self.ptr.data)
        return fetched, fetched_row, last_ptr, priming | primed | fetching | fetched

    def _queue_row(self, m: Module, queue: SyncFIFO, fetched, fetched_row, last_ptr):
        """A fetched row: check its pointers, count its computed elements, queue it if it has
        work."""
        cfg = self.config
        F, W = cfg.max_feature_width, cfg.group_lanes
        p0, p1 = last_ptr, self.ptr.data
        feature_valid = Cat(*[f < self.n_features for f in range(F)])
        mask = self.mask.data & feature_valid
        unmasked = popcount(m, mask)
        deg = (p1 - p0)[:len(self.job.deg)]
        bad = fetched & ((p1 < p0) | (p1 > self.n_edges))
        with m.If(bad):
            m.d.sync += self.err_indptr.eq(1)
        with m.If(self.start):
            m.d.sync += self.err_indptr.eq(0)
        jobs = (unmasked + (W - 1)) >> (W.bit_length() - 1)
        record = Signal(row_record_layout(cfg))
        m.d.comb += [record.row.eq(fetched_row), record.ptr.eq(p0), record.deg.eq(deg),
                     record.mask.eq(mask), record.jobs.eq(jobs),
                     queue.w_data.eq(record),
                     queue.w_en.eq(fetched & ~bad & (p1 != p0) & (unmasked != 0))]
        m.d.comb += [self.count_en.eq(fetched & ~bad), self.count_row.eq(fetched_row),
                     self.count.eq(Mux(p1 != p0, unmasked, 0))]

    def _emit_jobs(self, m: Module, queue: SyncFIFO):
        """Split the head row of the queue into jobs of W features, one offered at a time."""
        cfg = self.config
        F, W = cfg.max_feature_width, cfg.group_lanes
        m.submodules.decoder = decoder = MaskDecoder(F, W)
        head = data.View(row_record_layout(cfg), queue.r_data)
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
                    m.d.sync += self.job.sel[k].eq(decoder.sel[k])
                with m.If(row_last):
                    m.d.comb += queue.r_en.eq(1)
                    m.d.sync += chunk.eq(0)
                with m.Else():
                    m.d.sync += chunk.eq(chunk + 1)
