"""The S-SpMM accelerator's blocks around its buffers: the feature-row loader, word reads from
buffers stored in load-beat rows, and the output stream."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.arith.adder import Fp32AddConfig, Fp32Adder
from moagcn.hw.common.wordsel import select_word
from moagcn.hw.common.ram import RamReadSignature, RamWriteSignature
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.layouts import chunks, widths


class FeatureLoader(wiring.Component):
    """Fill the node buffer from the feature stream: ``ceil(n_features / load_width)`` beats
    per row, row after row from row 0.

    A beat goes to its place in its row: the write data repeats the beat across the row and
    one enable per beat position selects it.

    Members
    -------
    beats : In(stream.Signature(32 * load_width))
        Feature rows (word 0 lowest); ready while ``enable``.
    enable : In(1)
        The buffers may be loaded.
    clear : In(1)
        Start again at row 0 (a job starts; hold ``enable`` low then).
    n_features : In(range(max_feature_width + 1))
        Features per row (sets the beats per row).
    write : Out(RamWriteSignature(row bits, 32 * max_feature_width, max_feature_width //
        load_width))
        To the node buffer's write port (one enable per beat position).
    """

    def __init__(self, config: SSpmmConfig):
        self.config = config
        F, LW = config.max_feature_width, config.load_width
        super().__init__({
            "beats": In(stream.Signature(32 * LW)),
            "enable": In(1), "clear": In(1),
            "n_features": In(range(F + 1)),
            "write": Out(RamWriteSignature(widths(config)["row"], 32 * F, F // LW)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        F, LW = cfg.max_feature_width, cfg.load_width
        row = Signal(widths(cfg)["row"] + 1)
        beat = Signal(range(F // LW + 1))
        beats_per_row = (self.n_features + (LW - 1)) // LW
        take = self.beats.valid & self.enable
        # the write is registered and lands a cycle after its beat: ``enable`` comes from the
        # start input through ``busy`` (no load moves in a start cycle), and from there through
        # the handshake into the node buffer's byte enables, the biggest buffer's, was a
        # longest path. A job reads the node buffer from the third cycle after its start at the
        # earliest, so a beat taken just before the start is written in time; the load half
        # toggles only after a start cycle, in which no beat is taken, so the registered write
        # goes to the half its beat was taken for
        addr = Signal.like(self.write.addr, name="write_addr_r")
        payload = Signal.like(self.beats.payload, name="write_beat_r")
        enables = Signal.like(self.write.en, name="write_en_r")
        m.d.sync += [addr.eq(row), payload.eq(self.beats.payload),
                     enables.eq(Mux(take, 1 << beat, 0))]
        m.d.comb += [self.beats.ready.eq(self.enable), self.write.addr.eq(addr),
                     self.write.data.eq(payload.replicate(F // LW)),
                     self.write.en.eq(enables)]
        with m.If(self.clear):
            m.d.sync += [beat.eq(0), row.eq(0)]
        with m.Elif(take):
            with m.If(beat + 1 >= beats_per_row):
                m.d.sync += [beat.eq(0), row.eq(row + 1)]
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        return m


class WordReader(wiring.Component):
    """Read single 32-bit words from a buffer stored in rows of ``words_per_row`` words.

    Row ``addr / words_per_row`` is read and the word is picked out of it in the next cycle,
    so a word read has the RAM's one-cycle latency.

    Members
    -------
    word : In(RamReadSignature(word_addr_bits, 32))
        The word read port offered to the user.
    row : Out(RamReadSignature(row_addr_bits, 32 * words_per_row))
        To the buffer's read port.
    """

    def __init__(self, words_per_row: int, word_addr_bits: int, row_addr_bits: int):
        if words_per_row < 1 or words_per_row & (words_per_row - 1):
            raise ValueError(f"words_per_row={words_per_row} must be a power of two")
        self.words_per_row = words_per_row
        super().__init__({
            "word": In(RamReadSignature(word_addr_bits, 32)),
            "row": Out(RamReadSignature(row_addr_bits, 32 * words_per_row)),
        })

    def elaborate(self, platform):
        m = Module()
        word_bits = self.words_per_row.bit_length() - 1
        m.d.comb += [self.row.addr.eq(self.word.addr >> word_bits),
                     self.row.en.eq(self.word.en)]
        if self.words_per_row == 1:
            m.d.comb += self.word.data.eq(self.row.data)
            return m
        index = Signal(word_bits, name="word_index")      # the word within the row read
        with m.If(self.word.en):
            m.d.sync += index.eq(self.word.addr)
        m.d.comb += self.word.data.eq(select_word(m, self.row.data, index, name="word"))
        return m


class OutputStream(wiring.Component):
    """Stream Z out, row by row, each row's computed elements only (compressed).

    For each row the element count (from the count buffer) gives its beats, ``ceil(count /
    lanes)``; a row with none sends nothing. The beats are read from the output buffer, where
    row r holds entries ``r * beats .. r * beats + beats - 1``; the words of the last beat past
    the row's count are sent as zero.

    With ``split_degree`` > 0 (``merge``) every slice's bank is read at that entry
    (``banks``), and the owner table's entry for the row (``owner``, read with its count)
    names the slice holding the row (its first piece) and the pieces after it on the slices
    that follow. A row in one piece goes out from its slice's bank; a row in n pieces is merged
    beat by beat: ``lanes`` binary32 adders (``adder_latency`` stages) add the pieces' beats in
    order, ``((p0 + p1) + p2) + ...``, one add after the other, and the sum goes out from a
    register: ``(n - 1) * adder_latency + 2`` cycles more per beat than a row in one piece (the
    operands are registered before the first add).

    Members
    -------
    start : In(1)
        Pulse: stream rows ``0 .. n_rows - 1`` (aggregation is over).
    n_rows : In
        Rows of the job.
    out : Out(stream.Signature(32 * lanes))
        The output stream.
    beats : Out(beats_port)
        Read port of the output buffer.
    counts : Out(counts_port)
        Read port of the count buffer (computed elements per row).
    busy : Out(1)
        Streaming.
    done : Out(1)
        The last row has been sent (one-cycle pulse).
    stall : Out(1)
        A beat waits on ``out.ready``.
    owner : In(owner_shape), with S > 1
        The owner table's entry at ``counts.addr`` (read at the count's address).
    row_owner : Out(owner_shape), with S > 1
        The owner-table entry of the row being streamed (its bank, without ``merge``).
    """

    def __init__(self, config: SSpmmConfig, beats_port: RamReadSignature,
                 counts_port: RamReadSignature, owner_shape=None):
        self.config = config
        #: rows may come in pieces from several slices' banks (``split_degree`` > 0)
        self.merge = bool(config.split_degree)
        members = {
            "start": In(1), "n_rows": In(widths(config)["row"] + 1),
            "out": Out(stream.Signature(32 * config.lanes)),
            "beats": Out(beats_port), "counts": Out(counts_port),
            "busy": Out(1), "done": Out(1), "stall": Out(1),
        }
        if self.merge:
            members["banks"] = In(32 * config.lanes).array(config.slices)
        #: the owner table's entries come in (several slices' banks)
        self.has_owner = config.slices > 1 and owner_shape is not None
        if self.has_owner:
            members["owner"] = In(owner_shape)
            members["row_owner"] = Out(owner_shape)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        P, W, C = cfg.lanes, cfg.group_lanes, chunks(cfg)
        beats = -(-C // cfg.groups)              # output-buffer entries (beats) per row
        streaming = Signal()
        out_row = Signal(widths(cfg)["row"] + 1)
        out_beat = Signal(range(beats + 1))
        row_beats = Signal(range(beats + 1))
        row_count = Signal(range(W * C + 1))       # words of the row (its unmasked features)
        held = Signal()           # the row's beats are being sent
        fetch_wait = Signal()     # the row's element count is being read
        # (a merged beat may go out some cycles after its row is held)
        sent = (self.out.valid if self.merge else held) & self.out.ready
        last_row = out_row + 1 >= self.n_rows
        # the beat on the output now was addressed in the previous cycle: beat 0 while the row
        # is decided, then the next one with each transfer. The addresses and whether the beat
        # is the row's last are kept in registers beside ``out_row`` and ``out_beat`` (from
        # them, two carry chains, the compare and the address's add, ran into the output
        # buffer's read address): ``base`` = out_row * beats, ``cur`` = base + out_beat while
        # the row is held, ``cur_inc`` = cur + 1, ``beat_last`` = out_beat + 1 >= row_beats
        addr_shape = len(self.beats.addr)
        base = Signal(addr_shape, name="row_base")
        cur = Signal(addr_shape, name="beat_addr")
        cur_inc = Signal(addr_shape, name="beat_addr_next")
        beat_last = Signal(name="beat_last")
        step = sent & ~beat_last
        # read only while streaming: the groups write the output buffer while a job computes
        m.d.comb += [self.beats.addr.eq(Mux(fetch_wait, base, Mux(step, cur_inc, cur))),
                     self.beats.en.eq(streaming)]
        with m.If(fetch_wait):
            m.d.sync += [cur.eq(base), cur_inc.eq(base + 1)]
        with m.Elif(step):
            m.d.sync += [cur.eq(cur_inc), cur_inc.eq(cur_inc + 1),
                         beat_last.eq(out_beat + 2 >= row_beats)]

        # -- a row's element count decides its beats -------------------------------------------
        # The count is read a row ahead and registered (``count_ahead``): the count buffer's
        # block-RAM read (late data) through this decision into ``busy`` was a longest path.
        # The read address is the row after ``out_row`` while streaming, row 0 before: a row
        # is decided at least two cycles after ``out_row`` moves to it (one cycle to raise
        # ``fetch_wait``), and the count read for it when ``out_row`` was the row before has
        # reached the register by then; the owner table (read at the same address) the same
        with m.If(streaming & ~held & ~fetch_wait):
            m.d.sync += fetch_wait.eq(1)
        m.d.comb += self.counts.addr.eq(Mux(streaming, out_row + 1, 0))
        count = Signal.like(self.counts.data, name="count_ahead")
        m.d.sync += count.eq(self.counts.data)
        owner = None
        if self.has_owner:
            owner = Signal.like(self.owner, name="owner_ahead")
            m.d.sync += owner.eq(self.owner)
            with m.If(fetch_wait):
                m.d.sync += self.row_owner.eq(owner)
        empty_last = fetch_wait & (count == 0) & last_row
        with m.If(fetch_wait):
            # a row without neighbours, or fully masked, sends nothing
            m.d.sync += [fetch_wait.eq(0), out_beat.eq(0), row_count.eq(count),
                         row_beats.eq((count + (P - 1)) >> (P.bit_length() - 1)),
                         beat_last.eq(count <= P)]
            with m.If(count != 0):
                m.d.sync += held.eq(1)
            with m.Else():
                m.d.sync += [out_row.eq(out_row + 1), base.eq(base + beats)]
                with m.If(last_row):
                    m.d.sync += streaming.eq(0)

        # -- the row's beats, the words past its count zero ------------------------------------
        if self.merge:
            beat, beat_valid = self._merge(m, fetch_wait, count, owner, held, sent, beat_last)
        else:
            beat, beat_valid = self.beats.data, held
        for k in range(P):
            m.d.comb += self.out.payload.word_select(k, 32).eq(
                Mux(out_beat * P + k < row_count, beat.word_select(k, 32), 0))
        m.d.comb += self.out.valid.eq(beat_valid)
        sent_last = sent & beat_last & last_row
        with m.If(sent):
            with m.If(beat_last):
                m.d.sync += [held.eq(0), out_row.eq(out_row + 1), base.eq(base + beats)]
                with m.If(last_row):
                    m.d.sync += streaming.eq(0)
            with m.Else():
                m.d.sync += out_beat.eq(out_beat + 1)

        with m.If(self.start):
            m.d.sync += [streaming.eq(1), out_row.eq(0), base.eq(0)]
        m.d.comb += [self.busy.eq(streaming), self.done.eq(empty_last | sent_last),
                     self.stall.eq(streaming & (beat_valid if self.merge else held)
                                   & ~self.out.ready)]
        return m

    def _merge(self, m: Module, fetch_wait, count, owner, held, sent, beat_last):
        """The beat of a row in pieces: the sum of its slices' beats in piece order.

        Returns the current beat and whether it may go out. A beat's entry is read in the cycle
        before it is current (``beats.addr``), in every bank; in the cycle it is current
        (``go``) the operands of ``piece 0 + piece 1`` are registered, the add issues the cycle
        after, each further piece is added to the sum as the adders return it, and the last
        sum is registered."""
        cfg = self.config
        P, S = cfg.lanes, cfg.slices
        banks = Array(self.banks)
        first = Signal(len(self.owner.slice), name="row_first")
        more = Signal(len(self.owner.more), name="row_more")      # pieces after the first
        go = Signal()             # the beat's entry is on the banks' data: start its merge
        adds = Signal.like(more, name="merge_adds")     # adds issued for the beat
        merged = Signal(32 * P, name="merged")
        ready = Signal(name="merged_ready")            # ``merged`` holds the current beat
        with m.If(fetch_wait):
            m.d.sync += [first.eq(owner.slice), more.eq(owner.more),
                         go.eq((count != 0) & (owner.more != 0)), adds.eq(0)]
        with m.Elif(sent):
            m.d.sync += [ready.eq(0), go.eq(~beat_last & (more != 0)), adds.eq(0)]
        with m.Else():
            m.d.sync += go.eq(0)
        adders = [Fp32Adder(Fp32AddConfig(latency=cfg.adder_latency)) for _ in range(P)]
        for k, adder in enumerate(adders):
            m.submodules[f"merge_adder_{k}"] = adder
        # the operands come from registers, not straight from the banks' block-RAM reads: the
        # banks hold the beat while it merges, so ``op_b`` is loaded every cycle with the piece
        # the next add needs (adds are at least L >= 2 cycles apart) and ``op_a`` with piece 0;
        # the first add issues the cycle after ``go``
        op_a = Signal(32 * P, name="merge_op_a")
        op_b = Signal(32 * P, name="merge_op_b")
        first_add = Signal(name="merge_first_add")
        slot = first + adds + 1                         # the piece added next, on its slice
        m.d.sync += [op_a.eq(banks[first]), op_b.eq(banks[Mux(slot >= S, slot - S, slot)]),
                     first_add.eq(go)]
        result = adders[0].o.valid
        issue = first_add | (result & (adds != more))
        for k, adder in enumerate(adders):
            a = Mux(first_add, op_a.word_select(k, 32), adder.o.payload)
            m.d.comb += [adder.i.valid.eq(issue), adder.i.payload.a.eq(a),
                         adder.i.payload.b.eq(op_b.word_select(k, 32))]
            with m.If(result & (adds == more)):
                m.d.sync += merged.word_select(k, 32).eq(adder.o.payload)
        with m.If(issue):
            m.d.sync += adds.eq(adds + 1)
        with m.If(result & (adds == more)):
            m.d.sync += ready.eq(1)
        split = more != 0
        held_beat = Mux(split, merged, banks[first])
        return held_beat, held & (~split | ready)
