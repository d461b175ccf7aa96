"""Job scheduler: the adjacency index decoder and the job emitter of the S-SpMM controller."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import popcount
from moagcn.hw.common.queue import Queue
from moagcn.hw.common.ram import RamReadSignature, RamWriteSignature
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.layouts import (job_layout, ranks_in_record, row_record_layout,
                                     turns_in_record, widths)
from moagcn.hw.sspmm.mask_decoder import ChunkSelect, MaskRanks
from moagcn.hw.sspmm.protocol import ROW_CHECK_LATENCY, row_check_latency

ROW_QUEUE_DEPTH = 4
#: row records each slice can hold: deep enough that the slice with the least work assigned
#: (which the dispatcher waits for) practically never has a full queue while others starve. With
#: 4 entries the dispatcher stalled often enough that 4 slices of P = 4 took 15 % longer on a
#: power-law graph (6,123 against 5,333 cycles with 64 entries)
SLICE_QUEUE_DEPTH = 64


class JobScheduler(wiring.Component):
    """Walk the rows and queue those with work as row records.

    Row fetch (one row per cycle, after reading ``indptr[0]``): read ``indptr[v + 1]`` (the
    previous row's gives ``indptr[v]``) and the mask row ``v``; next cycle register both
    pointers and the mask row (a block RAM's read data arrives late in the cycle: no logic
    follows it); the cycle after compute the degree and the unmasked-feature count ``|S_v|``,
    check the row pointers, and queue rows that have work (``deg > 0`` and ``|S_v| > 0``):
    rows without neighbours or fully masked cost one fetch cycle and no compute. A
    :class:`JobEmitter` (one per slice, behind a :class:`RowDispatcher` when there are
    several) takes the queued rows.

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
    rows : Out(stream.Signature(row_record_layout))
        The queued rows with work, in row order.
    count_en, count_row, count : Out
        Each fetched row's number of computed output elements (``|S_v|``, 0 for a row without
        neighbours), for the output stream.
    done : Out(1)
        Every row has been fetched and every queued row taken.
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
            "rows": Out(stream.Signature(row_record_layout(config))),
            "count_en": Out(1), "count_row": Out(w["row"]),
            "count": Out(range(F + 1)),
            "done": Out(1),
            "err_indptr": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rec_layout = row_record_layout(self.config)
        # (the queue's storage is written whenever it has room: the write enable, late from
        # the row check, fanned out to every LUT-RAM cell's write enable)
        # (a word more per extra check stage, so that rows in flight never hold the walk back
        # when the emitter takes a row every cycle)
        depth = ROW_QUEUE_DEPTH + row_check_latency(self.config) - ROW_CHECK_LATENCY
        m.submodules.queue = queue = Queue(rec_layout.size, depth)
        checking = Signal()           # a fetched row is in the check stage
        late = Signal()               # ... in the second check stage (row_check_latency)
        fetched, fetched_row, last_ptr, fetch_busy = self._walk_rows(m, queue, checking, late)
        self._queue_row(m, queue, fetched, fetched_row, last_ptr, checking, late)
        m.d.comb += [self.rows.valid.eq(queue.r_rdy), self.rows.payload.eq(queue.r_data),
                     queue.r_en.eq(self.rows.ready),
                     self.done.eq(~fetch_busy & ~queue.r_rdy)]
        return m

    def _walk_rows(self, m: Module, queue: SyncFIFO, checking, late):
        """Read the rows' pointers and mask rows in order, one row per cycle while the queue
        has room (counting the rows on their way to it: read, and in the check stage).

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
        issue = fetching & (row < self.n_rows) & (queue.level + fetched + checking + late
                                                   < queue.depth)
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
        return (fetched, fetched_row, last_ptr,
                priming | primed | fetching | fetched | checking | late)

    def _queue_row(self, m: Module, queue: SyncFIFO, fetched, fetched_row, last_ptr, checking,
                   late):
        """A fetched row: register its pointers and mask row; next cycle check the pointers,
        count its computed elements, queue it if it has work."""
        cfg = self.config
        F, W = cfg.max_feature_width, cfg.group_lanes
        row = Signal.like(fetched_row, name="check_row")
        p0, p1 = Signal(32, name="check_p0"), Signal(32, name="check_p1")
        raw_mask = Signal(F, name="check_mask")
        m.d.sync += [checking.eq(fetched), row.eq(fetched_row), p0.eq(last_ptr),
                     p1.eq(self.ptr.data), raw_mask.eq(self.mask.data)]
        # which features the job has, from a register (``n_features`` is sampled at the start,
        # and no row reaches this stage within three cycles of it): the compares were on the
        # way to the queue's write enable
        feature_valid = Signal(F, name="feature_valid")
        m.d.sync += feature_valid.eq(Cat(*[f < self.n_features for f in range(F)]))
        mask = raw_mask & feature_valid
        unmasked = popcount(m, mask)
        # The checks on the pointers' low bits (as wide as ``n_edges``) and an OR of their
        # high bits: the 32-bit compares' carry chains into the queue's write enable were a
        # longest path. The same verdict: a pointer with a high bit set is above ``n_edges``
        # (p1), or above p1 (p0, when p1 is not), and with both clear the low bits are the
        # pointers. For the same reason the row's "has neighbours" compares the low bits (a
        # row that is not bad has no high bits).
        eb = len(self.n_edges)
        lo0, lo1 = p0[:eb], p1[:eb]
        high = p0[eb:].any() | p1[eb:].any()
        deg = (lo1 - lo0)[:widths(cfg)["edge"]]
        bad = checking & (high | (lo1 < lo0) | (lo1 > self.n_edges))
        neighbours = lo1 != lo0
        with m.If(bad):
            m.d.sync += self.err_indptr.eq(1)
        with m.If(self.start):
            m.d.sync += self.err_indptr.eq(0)
        if row_check_latency(cfg) > ROW_CHECK_LATENCY:
            # a second check stage: the pointers' verdicts, the mask and its count registered
            # before the ranks, the job count and the queue (the count's and the ranks' carry
            # chains into the queue's LUT RAM were a longest path)
            row2 = Signal.like(row, name="check2_row")
            p0_2 = Signal(32, name="check2_p0")
            deg2 = Signal.like(deg, name="check2_deg")
            mask2 = Signal(F, name="check2_mask")
            unmasked2 = Signal.like(unmasked, name="check2_unmasked")
            bad2, neighbours2 = Signal(name="check2_bad"), Signal(name="check2_neighbours")
            m.d.sync += [late.eq(checking & ~self.start), row2.eq(row), p0_2.eq(p0),
                         deg2.eq(deg), mask2.eq(mask), unmasked2.eq(unmasked),
                         bad2.eq(bad), neighbours2.eq(neighbours)]
            checking, row, p0, deg, mask, unmasked, bad, neighbours = (
                late, row2, p0_2, deg2, mask2, unmasked2, bad2, neighbours2)
        jobs = (unmasked + (W - 1)) >> (W.bit_length() - 1)
        record = Signal(row_record_layout(cfg))
        ranked = []
        if ranks_in_record(cfg):
            # each feature's job and lane, ranked here from registers on the way into the
            # queue (ranked from the queue's read, on the way into the emitter's head register,
            # they were a longest path)
            m.submodules.ranks = ranks = MaskRanks(F, W)
            m.d.comb += ranks.mask.eq(mask)
            ranked = [*[record.chunk_of[f].eq(ranks.chunk[f]) for f in range(F)],
                      *[record.lane_of[f].eq(ranks.lane[f]) for f in range(F)]]
        if turns_in_record(cfg):
            m.d.comb += record.turns.eq(deg * jobs)
        m.d.comb += [record.row.eq(row), record.ptr.eq(p0),
                     record.deg.eq(deg), record.mask.eq(mask), record.jobs.eq(jobs),
                     *ranked, queue.w_data.eq(record),
                     queue.w_en.eq(checking & ~bad & neighbours & mask.any())]
        m.d.comb += [self.count_en.eq(checking & ~bad), self.count_row.eq(row),
                     self.count.eq(Mux(neighbours, unmasked, 0))]


class JobEmitter(wiring.Component):
    """Split each row record into jobs of W features and offer them one at a time.

    A row becomes ``ceil(|S_v| / W)`` jobs; job ``c`` takes the row's unmasked features of rank
    ``c * W .. c * W + W - 1`` (ranked by :class:`MaskRanks` before the row queue, carried in
    the record, selected by :class:`ChunkSelect`).

    Members
    -------
    rows : In(stream.Signature(row_record_layout))
        Row records; a record is taken into the head register (one cycle) when the register
        is empty or gives out its row's last job.
    jobs : Out(stream.Signature(job_layout))
        The offered job, from a register (``ready``: the fetcher binds it this cycle).
    done : Out(1)
        No record waiting and no job offered.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        super().__init__({
            "rows": In(stream.Signature(row_record_layout(config))),
            "jobs": Out(stream.Signature(job_layout(config))),
            "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        F, W = cfg.max_feature_width, cfg.group_lanes
        # the head record is registered as it leaves the row queue, with the rank of each of
        # its features (:class:`MaskRanks`: ranked before the queue with one slice, here as
        # the record is taken with several); each job's lanes are then picked from the
        # registered ranks (:class:`ChunkSelect`), with nothing carried from job to job
        m.submodules.select = select = ChunkSelect(F, W)
        head = Signal(row_record_layout(cfg))
        head_valid = Signal()
        chunk = Signal(range(-(-F // W) + 1))
        m.d.comb += [select.mask.eq(head.mask), select.chunk.eq(chunk)]
        if ranks_in_record(cfg):
            head_chunk, head_lane = head.chunk_of, head.lane_of
        else:
            m.submodules.ranks = ranks = MaskRanks(F, W)
            head_chunk = Signal(data.ArrayLayout(ranks.chunk[0].shape(), F), name="head_chunk_of")
            head_lane = Signal(data.ArrayLayout(ranks.lane[0].shape(), F), name="head_lane_of")
            m.d.comb += ranks.mask.eq(self.rows.payload.mask)
            with m.If(self.rows.ready):
                for f in range(F):
                    m.d.sync += [head_chunk[f].eq(ranks.chunk[f]),
                                 head_lane[f].eq(ranks.lane[f])]
        for f in range(F):
            m.d.comb += [select.chunk_of[f].eq(head_chunk[f]),
                         select.lane_of[f].eq(head_lane[f])]
        jobs = self.jobs
        refill = ~jobs.valid | jobs.ready
        row_last = chunk + 1 == head.jobs
        head_done = refill & head_valid & row_last     # the head row's last job goes out
        m.d.comb += self.rows.ready.eq(~head_valid | head_done)
        with m.If(self.rows.ready):
            m.d.sync += [head_valid.eq(self.rows.valid), head.eq(self.rows.payload)]
        with m.If(refill):
            m.d.sync += jobs.valid.eq(head_valid)
            with m.If(head_valid):
                job = jobs.payload
                m.d.sync += [job.row.eq(head.row), job.ptr.eq(head.ptr), job.deg.eq(head.deg),
                             job.lane_valid.eq(select.valid), job.chunk.eq(chunk),
                             job.row_last.eq(row_last)]
                for k in range(W):
                    m.d.sync += job.sel[k].eq(select.sel[k])
                with m.If(row_last):
                    m.d.sync += chunk.eq(0)
                with m.Else():
                    m.d.sync += chunk.eq(chunk + 1)
        m.d.comb += self.done.eq(~self.rows.valid & ~head_valid & ~jobs.valid)
        return m


class RowDispatcher(wiring.Component):
    """Hand each row record to the slice with the least work assigned so far; cut hub rows
    into pieces on consecutive slices.

    A row's work is its turns, ``deg * jobs``. The head record goes to the slice whose
    assigned turns are the smallest (the lowest index on a tie) once that slice's row queue
    has room; it waits otherwise (the choice never depends on timing, so the cycle model can
    replay it). Assignments of one job are counted from ``start``.

    With ``split_degree`` D > 0 each row record first enters a register (one cycle; the
    register refills as its row's last piece goes, so one row per cycle still), and a row of
    ``deg`` > D neighbours is cut into pieces of ``q = max(D, ceil(deg / S))`` neighbours (the
    last one the rest: at most S pieces), one piece per cycle. Piece 0 goes to the
    least-loaded slice s, piece k to slice ``(s + k) mod S``, each as a row record of its own
    (its pointer and degree), so the slices sum the pieces side by side and a row never has
    two pieces on one slice. ``ceil(deg / S)`` is a multiplication by a constant
    (:func:`ceil_div_const`). A D above ``max_edges`` splits nothing (no row is longer).

    Members
    -------
    rows : In(stream.Signature(row_record_layout))
        The scheduler's row records.
    start : In(1)
        A job begins: clear the assigned work.
    slice_rows : Out(stream.Signature(row_record_layout)).array(slices)
        Each slice's row queue (``SLICE_QUEUE_DEPTH`` records).
    owner : Out(RamWriteSignature(row bits, slice bits + piece bits))
        Writes each dispatched row's first slice and its pieces less one into the owner table
        (:func:`owner_layout`; the output stream reads the row from those slices' output
        banks).
    idle : Out(1)
        No record in any slice queue and no row half dispatched.
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        layout = row_record_layout(config)
        super().__init__({
            "rows": In(stream.Signature(layout)),
            "start": In(1),
            "slice_rows": Out(stream.Signature(layout)).array(config.slices),
            "owner": Out(RamWriteSignature(widths(config)["row"], owner_layout(config).size)),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        S, D = cfg.slices, cfg.split_degree
        layout = row_record_layout(cfg)
        work_bits = 40
        assigned = [Signal(work_bits, name=f"assigned_{k}") for k in range(S)]
        # argmin over the slices as a tree of (work, index) pairs: the left one wins a tie
        level = [(a, k) for k, a in enumerate(assigned)]
        while len(level) > 1:
            nxt = []
            for i in range(0, len(level) - 1, 2):
                (wa, ia), (wb, ib) = level[i], level[i + 1]
                take_b = Signal(name=f"take_b_{len(level)}_{i}")
                m.d.comb += take_b.eq(wb < wa)
                nxt.append((Mux(take_b, wb, wa), Mux(take_b, ib, ia)))
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        least = Signal(range(max(S, 2)))
        m.d.comb += least.eq(level[0][1])
        head = self.rows.payload
        target = Signal(range(max(S, 2)))
        record = Signal(layout)
        valid = Signal()                # a record is offered to the slices
        last = Signal()                 # the record is its row's last (or only) piece
        piece = Signal(range(max(S, 2))) if D else None
        if D:
            # rows are cut from a register (one row per cycle still: it refills as its last
            # piece goes): its remaining neighbours, piece size and the next piece's pointer
            # come from registers, so the piece's turns are not computed after the row queue's
            # read, the degree's division and the compares
            cur = Signal(layout, name="piece_row")
            first_slice = Signal.like(target, name="piece_first")
            prev = Signal.like(target, name="piece_prev")     # the slice of the piece before
            base = Signal.like(target, name="piece_base")     # the slice of piece 0
            rest = Signal(len(head.deg), name="piece_rest")   # neighbours not yet sent
            size = Signal(len(head.deg), name="piece_size")
            share = ceil_div_const(head.deg, S)
            # (no row is longer than max_edges: a larger D, which would not fit the degree's
            # width, splits nothing, as the golden model says)
            D = min(D, cfg.max_edges)
            # the record's degree and whether it is the row's last piece are registers too,
            # decided as the row or the piece before it goes
            piece_deg = Signal(len(head.deg), name="piece_deg")
            m.d.comb += [target.eq(Mux(piece == 0, least,
                                       Mux(prev == S - 1, 0, prev + 1))),
                         first_slice.eq(Mux(piece == 0, least, base)),
                         record.eq(cur), record.deg.eq(piece_deg)]
        else:
            m.d.comb += [last.eq(1), target.eq(least), record.eq(head),
                         valid.eq(self.rows.valid)]
        turns = Signal(work_bits)
        m.d.comb += turns.eq(record.turns if turns_in_record(cfg) else record.deg * record.jobs)
        sent = Signal()                 # the record goes into its slice's queue
        empties = []
        for k in range(S):
            fifo = SyncFIFO(width=layout.size, depth=SLICE_QUEUE_DEPTH)
            m.submodules[f"queue_{k}"] = fifo
            go = valid & (target == k)
            m.d.comb += [fifo.w_data.eq(record), fifo.w_en.eq(go),
                         self.slice_rows[k].valid.eq(fifo.r_rdy),
                         self.slice_rows[k].payload.eq(fifo.r_data),
                         fifo.r_en.eq(self.slice_rows[k].ready)]
            with m.If(go & fifo.w_rdy):
                m.d.comb += [sent.eq(1), self.owner.en.eq(1)]
                m.d.sync += assigned[k].eq(assigned[k] + turns)
            empties.append(~fifo.r_rdy)
        if D:
            m.d.comb += self.rows.ready.eq(~valid | (sent & last))
            new_size = Mux(share > D, share, D)
            new_rest = Signal.like(rest, name="piece_rest_next")
            m.d.comb += new_rest.eq(rest - size)
            with m.If(self.rows.ready):
                whole = head.deg <= new_size
                m.d.sync += [valid.eq(self.rows.valid), cur.eq(head), rest.eq(head.deg),
                             size.eq(new_size), piece.eq(0), last.eq(whole),
                             piece_deg.eq(Mux(whole, head.deg, new_size))]
            with m.Elif(sent):
                ends = new_rest <= size
                m.d.sync += [piece.eq(piece + 1), cur.ptr.eq(cur.ptr + size),
                             rest.eq(new_rest), prev.eq(target), last.eq(ends),
                             piece_deg.eq(Mux(ends, new_rest, size))]
                with m.If(piece == 0):
                    m.d.sync += base.eq(least)
            m.d.comb += self.owner.addr.eq(cur.row)
            # every piece writes the row's entry: the last write holds its piece count
            owner = Signal(owner_layout(cfg))
            m.d.comb += [owner.slice.eq(first_slice), owner.more.eq(piece),
                         self.owner.data.eq(owner)]
        else:
            m.d.comb += [self.rows.ready.eq(sent), self.owner.addr.eq(head.row),
                         self.owner.data.eq(target)]
        with m.If(self.start):
            m.d.sync += [a.eq(0) for a in assigned]
        idle = Cat(*empties).all()
        m.d.comb += self.idle.eq(idle & ~valid if D else idle)
        return m


def ceil_div_const(value, divisor: int):
    """``ceil(value / divisor)`` for an unsigned ``value`` and a constant ``divisor``: a
    multiplication by ``ceil(2^k / divisor)`` and a shift, exact for every value of its width
    (``floor(n * m / 2^k) = floor(n / d)`` for ``n < 2^N`` with ``k = N + ceil(log2 d)``)."""
    if divisor == 1:
        return value
    n = value + (divisor - 1)
    k = len(n) + (divisor - 1).bit_length()
    return ((n * -(-(1 << k) // divisor)) >> k)[:len(value)]


def owner_layout(config: SSpmmConfig) -> data.StructLayout:
    """An owner-table entry: the slice holding a row (its first piece) and the pieces after it."""
    bits = max(1, (config.slices - 1).bit_length())
    if not config.split_degree:
        return data.StructLayout({"slice": bits})
    return data.StructLayout({"slice": bits, "more": bits})
