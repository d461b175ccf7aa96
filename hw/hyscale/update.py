"""HyScale-GNN update kernel: a linear systolic array of m binary32 MACs, ``act(A W + b)``.

The work is a list of *items*, (row, column group) pairs in row-major order, where a column
group is ``m`` consecutive output columns. A *block* holds ``R = add_latency`` items and feeds
``R * f_in`` tokens, item-interleaved (``i`` outer, item inner), into MAC 0; every token moves
on to the next MAC one cycle later (the systolic chain), carrying
the activation ``A[r, i]`` and the weight address. MAC ``c`` holds column ``g m + c`` of ``W``
(and ``b``) of every group in its own RAM, multiplies, and adds into the item's partial sum.
With ``R`` equal to the adder's latency, an item's next product reaches the adder exactly when
its previous sum leaves it, so the adder's output is fed straight back: one multiply-add per MAC
per cycle with no hazard and no accumulator RAM. An item's first product adds to ``b[c]``. Only
the job's last block can hold idle slots (fewer than ``R`` items left).

The last token of an item leaves the result (ReLU applied) in the MAC's result RAM (double
buffered by block parity). Once MAC ``m - 1`` has written a block, the drain sends it out as
beats of ``mem_words_per_cycle`` words, ``ceil(columns / words)`` beats per item, so ``Y``
leaves row-major: ``ceil(f_out / words)`` beats per row.
A block starts only when its result buffer has been drained, so output backpressure stalls the
array between blocks, never inside one.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.bits import bits_for, log2
from moagcn.hw.common.counters import count_events, counter_members, counters_of
from moagcn.hw.common.ram import RamReadSignature
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.hw.hyscale.layouts import RowReadSignature, WeightLoadSignature, Widths
from moagcn.hw.hyscale.mac import (MacCell, ResultSignature, TokenSignature, bank_base,
                                   weight_words)
from moagcn.hw.hyscale.protocol import COUNTER_BITS, UPD_COUNTERS


class BlockFreeSignature(wiring.Signature):
    """The drain's news that a block's result buffer has been sent out.

    Members
    -------
    valid : Out(1)
    par : Out(1)
        The buffer (block parity).
    """

    def __init__(self):
        super().__init__({"valid": Out(1), "par": Out(1)})


class TokenGenerator(wiring.Component):
    """Feed the chain: blocks of R items, ``f_in`` tokens per item, item-interleaved.

    A block starts only when its result buffer (by parity) has been drained; it reads the
    activations two cycles ahead of its tokens.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: begin at item 0.
    running : In(1)
        The job runs.
    bank : In(1)
        The load bank holding the job's weights (read at ``start``).
    n_rows, f_in, f_out : In
    act : Out(RowReadSignature(config))
        Activation read (two cycles latency).
    token : Out(TokenSignature(config))
        The token entering MAC 0.
    freed : In(BlockFreeSignature())
        A result buffer has been drained.
    rows_ready : In
        Rows ``0 .. rows_ready - 1`` of ``A`` are final: a block opens only once every row it
        may hold (its first row and the ``R - 1`` after it) is, since an open block cannot stall.
    idle : Out(1)
        No block is being fed or waits for its results to be drained.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        super().__init__({
            "start": In(1), "running": In(1), "bank": In(1),
            "n_rows": In(w.dst + 1), "f_in": In(w.feat + 1), "f_out": In(w.feat + 1),
            "act": Out(RowReadSignature(config)),
            "token": Out(TokenSignature(config)),
            "freed": In(BlockFreeSignature()),
            "rows_ready": In(w.dst + 1), "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        item = self._walk_items(m)
        self._emit_token(m, item)
        return m

    def _walk_items(self, m: Module) -> "_Item":
        """Walk the items block by block: ``f_in`` rounds per block, the block's R slots in
        each round; returns the current slot's item (a token is fed while ``in_block``)."""
        cfg = self.config
        w = Widths(cfg)
        M = cfg.macs
        R = cfg.rows_per_block
        wbits = bits_for(weight_words(cfg))
        # the job's column groups and weight rows per group (bias last) from registers (f_in
        # and f_out are fixed for the job and no block opens in the cycle of the start): an
        # adder on f_in in front of the weight base's, and the groups' adder in front of the
        # wrap's compare, were long paths into the block base
        groups = Signal(w.feat + 1, name="groups_job", reset_less=True)
        gstep = Signal(wbits + 1, name="weight_rows_per_group", reset_less=True)
        m.d.sync += [groups.eq((self.f_out + (M - 1)) // M), gstep.eq(self.f_in + 1)]
        b_row = Signal(w.dst + 1)            # the block's first item
        b_g = Signal(w.feat + 1)
        b_gb = Signal(wbits + 1)             # its weight base g * (f_in + 1)
        t_row = Signal(w.dst + 1)            # the item of the current slot
        t_g = Signal(w.feat + 1)
        t_gb = Signal(wbits + 1)
        i = Signal(w.feat + 1)
        r = Signal(bits_for(R))
        in_block = Signal()
        par = Signal()                       # result buffer of the block being fed
        pending = Array([Signal(name="pending0"), Signal(name="pending1")])
        fed_all = Signal()
        # the weight base of column group 0: the job's load bank
        base = Signal(wbits + 1, name="weight_bank_base", reset_less=True)
        r_last = r == R - 1
        # ``i + 1 >= f_in`` (the block's last round) as a register set a cycle ahead
        i_last = Signal(name="i_last")
        g_wrap = t_g + 1 >= groups
        n_row = Mux(g_wrap, t_row + 1, t_row)
        n_g = Mux(g_wrap, 0, t_g + 1)
        n_gb = Mux(g_wrap, base, t_gb + gstep)
        # a block starts once its result buffer has been drained (and, pipelined, once its rows
        # are final: the rows it may hold, ``b_row .. b_row + R - 1``, within the job)
        m.d.comb += self.idle.eq(~in_block & ~pending[0] & ~pending[1])
        can_open = self.running & ~in_block & ~fed_all & ~pending[par]
        fed = in_block & r_last & i_last     # the block's last slot: the next starts at n_row
        if cfg.pipelined:
            # rows_ready >= min(b_row + R, n_rows) (the rows it may hold, within the job), as a
            # register set a cycle ahead from ``rows_ready`` and the base the next cycle has
            # (``n_row`` when this cycle feeds the block's last slot), so that the block's open
            # decision, which enables every item register, starts from flip-flops: the compares
            # in front of it (from ``b_row`` through the decision across the die into the
            # activation read's row register) were the longest path at some placements
            rows_ok = Signal(name="rows_ok_r")
            ready = self.rows_ready
            b_end = (b_row + R)[:len(b_row) + 1]
            t_end = (t_row + R)[:len(t_row) + 1]
            next_ok = Mux(fed, Mux(g_wrap, t_end < ready, t_end <= ready), b_end <= ready)
            m.d.sync += rows_ok.eq(Mux(self.start, 0, next_ok | (ready >= self.n_rows)))
            can_open = can_open & rows_ok
        with m.If(can_open):
            m.d.sync += [in_block.eq(1), pending[par].eq(1), i.eq(0), r.eq(0),
                         i_last.eq(self.f_in <= 1),
                         t_row.eq(b_row), t_g.eq(b_g), t_gb.eq(b_gb)]
        with m.If(in_block):
            m.d.sync += [r.eq(r + 1), t_row.eq(n_row), t_g.eq(n_g), t_gb.eq(n_gb)]
            with m.If(r_last):
                m.d.sync += [r.eq(0), i.eq(i + 1), i_last.eq(i + 2 >= self.f_in),
                             t_row.eq(b_row), t_g.eq(b_g), t_gb.eq(b_gb)]
                with m.If(i_last):
                    # block fed: the next block starts at the item after this slot's
                    m.d.sync += [in_block.eq(0), par.eq(~par), b_row.eq(n_row), b_g.eq(n_g),
                                 b_gb.eq(n_gb), fed_all.eq(n_row >= self.n_rows)]
        with m.If(self.freed.valid):
            m.d.sync += pending[self.freed.par].eq(0)
        with m.If(self.start):
            first = bank_base(cfg, self.bank)
            m.d.sync += [b_row.eq(0), b_g.eq(0), b_gb.eq(first), in_block.eq(0), par.eq(0),
                         pending[0].eq(0), pending[1].eq(0), fed_all.eq(0), base.eq(first)]
        return _Item(token=in_block, row=t_row, gbase=t_gb, i=i, i_last=i_last, slot=r, par=par)

    def _emit_token(self, m: Module, item: "_Item"):
        """Read the item's activation; two cycles later the token enters MAC 0 with it."""
        wbits = bits_for(weight_words(self.config))
        m.d.comb += [self.act.row.eq(item.row), self.act.idx.eq(item.i)]
        t_meta = Cat(item.token, item.i == 0, item.i_last, item.slot, item.par)
        t1, t2 = Signal(len(t_meta)), Signal(len(t_meta))
        waddr1, waddr2 = (Signal(wbits, name=f"waddr{k}", reset_less=True) for k in (1, 2))
        baddr1, baddr2 = (Signal(wbits, name=f"baddr{k}", reset_less=True) for k in (1, 2))
        live1, live2 = (Signal(name=f"live{k}", reset_less=True) for k in (1, 2))
        m.d.sync += [t1.eq(Mux(item.token, t_meta, 0)), waddr1.eq(item.gbase + item.i),
                     baddr1.eq(item.gbase + self.f_in), live1.eq(item.row < self.n_rows),
                     t2.eq(t1), waddr2.eq(waddr1), baddr2.eq(baddr1), live2.eq(live1)]
        rb = bits_for(self.config.rows_per_block)
        out = self.token
        m.d.comb += [out.valid.eq(t2[0]), out.first.eq(t2[1]), out.last.eq(t2[2]),
                     out.row.eq(t2[3:3 + rb]), out.par.eq(t2[3 + rb]),
                     out.act.eq(Mux(live2, self.act.data, 0)),
                     out.waddr.eq(waddr2), out.baddr.eq(baddr2)]


@dataclass
class _Item:
    """The item of the token generator's current slot (see
    :meth:`TokenGenerator._walk_items`)."""

    token: Signal       # a token is fed this cycle
    row: Signal         # the item's row of A
    gbase: Signal       # weight base of its column group, g * (f_in + 1)
    i: Signal           # the input element of this round
    i_last: object      # the round is the last (``i = f_in - 1``)
    slot: Signal        # the item's slot in its block
    par: Signal         # the block's result buffer


class ResultDrain(wiring.Component):
    """Send the blocks' results out as beats of ``mem_words_per_cycle`` words.

    Blocks complete in the order they were fed; the drain walks the same items:
    ``ceil(columns / words)`` beats per item, so ``Y`` leaves row-major. Padding words are zero.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: begin at item 0, both result buffers empty.
    running : In(1)
        The job runs.
    n_rows, f_out : In
    written : In(ResultSignature(config))
        The last MAC wrote an item's result.
    results : Out(RamReadSignature(bits_for(2 R), 32)).array(macs)
        The MACs' result RAM read ports (one cycle latency), all at one address.
    out : Out(stream.Signature(32 * mem_words_per_cycle))
    freed : Out(BlockFreeSignature())
        A result buffer has been sent out.
    finish : Out(1)
        The job's last beat has been sent.
    sent_words : Out(range(mem_words_per_cycle + 1))
        Valid words sent this cycle.
    stall : Out(1)
        A beat waits on ``out.ready``.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        WPB = config.mem_words_per_cycle
        super().__init__({
            "start": In(1), "running": In(1),
            "n_rows": In(w.dst + 1), "f_out": In(w.feat + 1),
            "written": In(ResultSignature(config)),
            "results": Out(RamReadSignature(bits_for(2 * config.rows_per_block), 32))
            .array(config.macs),
            "out": Out(stream.Signature(32 * WPB)),
            "freed": Out(BlockFreeSignature()), "finish": Out(1),
            "sent_words": Out(range(WPB + 1)), "stall": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = Widths(cfg)
        M = cfg.macs
        R = cfg.rows_per_block
        WPB = cfg.mem_words_per_cycle
        groups = (self.f_out + (M - 1)) >> log2(M)
        full = Array([Signal(name="full0"), Signal(name="full1")])
        with m.If(self.written.valid & (self.written.row == R - 1)):
            m.d.sync += full[self.written.par].eq(1)
        d_par = Signal()
        d_r = Signal(bits_for(R) + 1)        # result slot
        d_q = Signal(range(-(-M // WPB) + 1))
        d_row = Signal(w.dst + 1)
        d_g = Signal(w.feat + 1)
        d_col = Signal(w.feat + 1)           # first column of the current beat
        have = Signal()                       # read data of (d_r, d_q) is on the RAM outputs
        # Per-item quantities come from registers, not from d_g through a subtraction, a
        # compare and a division in the cycle of the read address (that chain into the result
        # RAMs' address was the tiny preset's longest path): the last column group has
        # ((f_out - 1) mod M) + 1 columns, every other one M; f_out is fixed for the job.
        last_beats = Signal(range(-(-M // WPB) + 1), name="last_beats")
        m.d.sync += last_beats.eq((((self.f_out - 1)[:log2(M)] if M > 1 else 0) + WPB) // WPB)
        g_last = Signal(name="g_last")       # d_g is the last column group
        row_last = Signal(name="row_last")   # d_row is the last row
        # Each beat goes through an output register: the MACs' result buffers (LUT RAM,
        # spread with their MACs) are read into registers in each MAC, and those, across the
        # die, through the word multiplexers into the stream's payload were the default
        # preset's most numerous slow endpoints. A beat is taken from the buffers whenever the
        # register is empty or being sent, so the stream runs a beat per cycle, a cycle later.
        o_valid = Signal(name="beat_valid")
        o_data = Signal(32 * WPB, name="beat_data", reset_less=True)
        o_words = Signal(range(WPB + 1), name="beat_words")
        o_finish = Signal(name="beat_finish")
        sent = o_valid & self.out.ready
        take = have & (~o_valid | self.out.ready)
        q_last = d_q + 1 >= Mux(g_last, last_beats, -(-M // WPB))
        dg_wrap = g_last
        nd_row = Mux(dg_wrap, d_row + 1, d_row)
        nd_g = Mux(dg_wrap, 0, d_g + 1)
        job_end = dg_wrap & row_last
        block_end = take & q_last & ((d_r == R - 1) | job_end)
        nxt_q = Mux(q_last, 0, d_q + 1)
        # The result RAMs' read address (fanned out to every MAC's LUT RAM) is one of two
        # registers: the current item's word ``par * R + d_r`` and the next one's, so no
        # adder sits between the take and the RAMs (the reads of the MACs' buffers, after an
        # increment and the parity's offset and across the fan-out, were 123 of the 346
        # endpoints over 11.1 ns at one placement of the default preset).
        abits = bits_for(2 * R)
        d_a = Signal(abits, name="res_addr_now")
        d_a1 = Signal(abits, name="res_addr_next", init=1)
        m.d.comb += [port.addr.eq(Mux(take & q_last, d_a1, d_a)) for port in self.results]
        q_reg = Signal.like(d_q)
        m.d.sync += q_reg.eq(Mux(take, nxt_q, d_q))
        n_q = -(-M // WPB)
        beat = Signal(32 * WPB, name="beat_next")
        for k in range(WPB):
            options = [self.results[q * WPB + k].data if q * WPB + k < M else 0
                       for q in range(n_q)]
            word = Array(options)[q_reg] if n_q > 1 else options[0]
            m.d.comb += beat.word_select(k, 32).eq(Mux(d_col + k < self.f_out, word, 0))
        m.d.comb += [self.out.valid.eq(o_valid), self.out.payload.eq(o_data)]
        with m.If(~have & full[d_par] & self.running):
            m.d.sync += have.eq(1)
        with m.If(take):
            m.d.sync += [d_q.eq(nxt_q), d_col.eq(d_col + WPB)]
            with m.If(q_last):
                m.d.sync += [d_r.eq(d_r + 1), d_a.eq(d_a1), d_a1.eq(d_a1 + 1),
                             d_row.eq(nd_row), d_g.eq(nd_g),
                             d_col.eq(nd_g * M),
                             g_last.eq(Mux(dg_wrap, self.f_out <= M, d_g + 2 >= groups)),
                             row_last.eq(Mux(dg_wrap, d_row + 2 >= self.n_rows, row_last))]
            with m.If(block_end):
                m.d.sync += [have.eq(0), full[d_par].eq(0), d_par.eq(~d_par), d_r.eq(0),
                             d_a.eq(Mux(d_par, 0, R)), d_a1.eq(Mux(d_par, 1, R + 1))]
        valid_words = sum(((d_col + k) < self.f_out).as_unsigned() for k in range(WPB))
        with m.If(take):
            m.d.sync += [o_valid.eq(1), o_data.eq(beat), o_words.eq(valid_words),
                         o_finish.eq(block_end & job_end)]
        with m.Elif(sent):
            m.d.sync += o_valid.eq(0)
        m.d.comb += [self.freed.valid.eq(block_end), self.freed.par.eq(d_par),
                     self.finish.eq(sent & o_finish),
                     self.sent_words.eq(Mux(sent, o_words, 0)),
                     self.stall.eq(o_valid & ~self.out.ready)]
        with m.If(self.start):
            m.d.sync += [full[0].eq(0), full[1].eq(0), d_par.eq(0), d_r.eq(0), d_q.eq(0),
                         o_valid.eq(0),
                         d_a.eq(0), d_a1.eq(1),
                         d_row.eq(0), d_g.eq(0), d_col.eq(0), have.eq(0),
                         g_last.eq(self.f_out <= M), row_last.eq(self.n_rows <= 1)]
        return m


class UpdateKernel(wiring.Component):
    """m MACs in a chain (:class:`MacCell`), the :class:`TokenGenerator` that feeds it and the
    :class:`ResultDrain` that sends the results out.

    Parameters
    ----------
    config : HyScaleConfig

    Members
    -------
    start : In(1)
        Pulse: run ``n_rows`` rows (``f_in`` inputs, ``f_out`` outputs, optional ReLU).
    n_rows, f_in, f_out, relu : In
    act : Out(RowReadSignature(config))
        Activation read (two cycles latency): element ``act.idx`` of row ``act.row``.
    weights : In(WeightLoadSignature(config))
        Weight load: one beat of ``m`` words per cycle, stored at consecutive addresses
        (group ``g``'s rows ``0 .. f_in - 1`` then its bias row, groups in order);
        ``restart``: the next beat is the first of load bank ``bank``.
    bank : In(1)
        The load bank of the job's weights (read at ``start``).
    out : Out(stream.Signature(32 * mem_words_per_cycle))
        Output beats (see the module docstring for the order); padding words are zero.
    done, busy : Out(1)
    rows_ready : In ; idle : Out(1)
        See :class:`TokenGenerator` (``rows_ready`` matters with ``pipelined`` only).
    words_written, stall_output : Out(32)
        Valid words sent out; cycles a beat waited on ``out.ready``.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.wbits = bits_for(weight_words(config))
        super().__init__({
            "start": In(1), "n_rows": In(w.dst + 1), "f_in": In(w.feat + 1),
            "f_out": In(w.feat + 1), "relu": In(1),
            "act": Out(RowReadSignature(config)),
            "weights": In(WeightLoadSignature(config)), "bank": In(1),
            "out": Out(stream.Signature(32 * config.mem_words_per_cycle)),
            "done": Out(1), "busy": Out(1),
            "rows_ready": In(w.dst + 1), "idle": Out(1),
            **counter_members(UPD_COUNTERS, COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        cells = [MacCell(cfg) for _ in range(cfg.macs)]
        for c, cell in enumerate(cells):
            m.submodules[f"mac{c}"] = cell
            m.d.comb += cell.relu.eq(self.relu)
        self._load_weights(m, cells)
        running = Signal()
        m.d.comb += self.busy.eq(running)

        # -- token generator, then the chain of MACs ---------------------------------------------
        m.submodules.tokens = gen = TokenGenerator(cfg)
        m.d.comb += [gen.start.eq(self.start), gen.running.eq(running), gen.bank.eq(self.bank),
                     gen.n_rows.eq(self.n_rows), gen.f_in.eq(self.f_in),
                     gen.f_out.eq(self.f_out), gen.rows_ready.eq(self.rows_ready)]
        wiring.connect(m, gen.act, wiring.flipped(self.act))
        wiring.connect(m, gen.token, cells[0].tok)
        for prev, cell in zip(cells, cells[1:]):
            wiring.connect(m, prev.next, cell.tok)

        # -- drain ---------------------------------------------------------------------------------
        m.submodules.drain = drain = ResultDrain(cfg)
        m.d.comb += [drain.start.eq(self.start), drain.running.eq(running),
                     drain.n_rows.eq(self.n_rows), drain.f_out.eq(self.f_out)]
        wiring.connect(m, cells[-1].result, drain.written)
        for c, cell in enumerate(cells):
            wiring.connect(m, drain.results[c], cell.results)
        wiring.connect(m, drain.out, wiring.flipped(self.out))
        wiring.connect(m, drain.freed, gen.freed)
        # no block in flight and no beat waiting in the drain's output register (``valid``)
        m.d.comb += self.idle.eq(gen.idle & ~drain.out.valid)

        with m.If(drain.finish):
            m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0)]
            with m.If(self.n_rows == 0):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        count_events(m, counters_of(self, UPD_COUNTERS), {
            "words_written": drain.sent_words,
            "stall_output": drain.stall,
        }, clear=self.start, enable=running)
        return m

    def _load_weights(self, m: Module, cells):
        """Weight loading: beat k gives every MAC its word of row k."""
        load = self.weights
        w_ptr = Signal(self.wbits + 1)
        for c, cell in enumerate(cells):
            m.d.comb += [cell.weights.en.eq(load.valid), cell.weights.addr.eq(w_ptr),
                         cell.weights.data.eq(load.data.word_select(c, 32))]
        with m.If(load.restart):
            m.d.sync += w_ptr.eq(bank_base(self.config, load.bank))
        with m.Elif(load.valid):
            m.d.sync += w_ptr.eq(w_ptr + 1)
