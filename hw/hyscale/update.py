"""HyScale-GNN update kernel: a linear systolic array of m binary32 MACs, ``act(A W + b)``.

The work is a list of *items*, (row, column group) pairs in row-major order, where a column
group is ``m`` consecutive output columns. A *block* holds ``R = add_latency`` items and feeds
``R * f_in`` tokens, item-interleaved (``i`` outer, item inner), into MAC 0; every token moves on to the next MAC one cycle later (the systolic chain), carrying
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

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith import Fp32Adder, Fp32AddConfig, Fp32MulConfig, Fp32Multiplier
from ..common.ram import Ram
from .aggregate import Widths, bits_for, delay
from .config import HyScaleConfig
from .protocol import COUNTER_BITS, UPD_COUNTERS


def weight_depth(cfg: HyScaleConfig) -> int:
    """Words of each MAC's weight RAM: ``ceil(F / m)`` groups of ``F + 1`` rows (bias last)."""
    return -(-cfg.max_feature_width // cfg.macs) * (cfg.max_feature_width + 1)


class MacCell(wiring.Component):
    """One MAC of the chain (see the module docstring).

    Members
    -------
    tok_valid, tok_first, tok_last, tok_row, tok_par, tok_act, tok_waddr, tok_baddr : In
        The token at this MAC this cycle.
    relu : In(1)
    w_en, w_addr, w_data : In
        Weight RAM write port (loading).
    res_addr : In ; res_data : Out(32)
        Result RAM read port (one cycle latency); a row's result is at ``par * R + row``.
    last_valid, last_row, last_par : Out
        A row's result was written this cycle.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        R = config.rows_per_block
        self.rbits = bits_for(R)
        self.wbits = bits_for(weight_depth(config))
        super().__init__({
            "tok_valid": In(1), "tok_first": In(1), "tok_last": In(1),
            "tok_row": In(self.rbits), "tok_par": In(1), "tok_act": In(32),
            "tok_waddr": In(self.wbits), "tok_baddr": In(self.wbits),
            "relu": In(1),
            "w_en": In(1), "w_addr": In(self.wbits), "w_data": In(32),
            "res_addr": In(bits_for(2 * R)), "res_data": Out(32),
            "last_valid": Out(1), "last_row": Out(self.rbits), "last_par": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        R = cfg.rows_per_block
        m.submodules.weights = wram = Ram(32, weight_depth(cfg), read_ports=2)
        wa, wd, we = wram.write(0)
        m.d.comb += [wa.eq(self.w_addr), wd.eq(self.w_data), we.eq(self.w_en)]
        (r0a, r0d), (r1a, r1d) = wram.read(0), wram.read(1)
        m.d.comb += r0a.eq(self.tok_waddr)
        # stage 1: the weight is out of the RAM
        meta0 = Cat(self.tok_valid, self.tok_first, self.tok_last, self.tok_row, self.tok_par,
                    self.tok_baddr)
        meta1 = Signal(len(meta0))
        act1 = Signal(32, reset_less=True)
        m.d.sync += [meta1.eq(meta0), act1.eq(self.tok_act)]
        m.submodules.mul = mul = Fp32Multiplier(Fp32MulConfig(latency=cfg.mul_latency))
        m.d.comb += [mul.i.valid.eq(meta1[0]), mul.i.payload.a.eq(act1),
                     mul.i.payload.b.eq(r0d)]
        line = delay(m, meta1, cfg.mul_latency, "mmeta", reset_less=False)
        # the bias is read one cycle before the product reaches the adder
        m.d.comb += r1a.eq(line[-2][-self.wbits:])
        meta = line[-1]
        valid, first = meta[0], meta[1]
        m.submodules.adder = adder = Fp32Adder(Fp32AddConfig(latency=cfg.add_latency))
        m.d.comb += [adder.i.valid.eq(valid), adder.i.payload.a.eq(mul.o.payload),
                     adder.i.payload.b.eq(Mux(first, r1d, adder.o.payload))]
        out_meta = delay(m, meta[:3 + self.rbits + 1], cfg.add_latency, "ameta",
                         reset_less=False)[-1]
        o_valid, o_last = out_meta[0], out_meta[2]
        o_row = out_meta[3:3 + self.rbits]
        o_par = out_meta[3 + self.rbits]
        result = adder.o.payload
        act = Mux(self.relu & result[31], 0, result)
        m.submodules.results = rram = Ram(32, 2 * R)
        xa, xd, xe = rram.write(0)
        write = o_valid & o_last
        m.d.comb += [xa.eq(Mux(o_par, o_row + R, o_row)), xd.eq(act), xe.eq(write)]
        ra, rd = rram.read(0)
        m.d.comb += [ra.eq(self.res_addr), self.res_data.eq(rd),
                     self.last_valid.eq(write), self.last_row.eq(o_row),
                     self.last_par.eq(o_par)]
        return m


class UpdateKernel(wiring.Component):
    """m MACs in a chain, the token generator and the result drain.

    Members
    -------
    start : In(1)
        Pulse: run ``n_rows`` rows (``f_in`` inputs, ``f_out`` outputs, optional ReLU).
    n_rows, f_in, f_out, relu : In
    act_row, act_idx : Out ; act_data : In(32)
        Activation read (one cycle latency): row ``act_row``, element ``act_idx``.
    w_valid, w_data : In
        Weight load: one beat of ``m`` words per cycle, stored at consecutive addresses
        (group ``g``'s rows ``0 .. f_in - 1`` then its bias row, groups in order).
    out : Out(stream.Signature(32 * mem_words_per_cycle))
        Output beats (see the module docstring for the order); padding words are zero.
    done, busy : Out(1)
    words_written, stall_output : Out(32)
        Valid words sent out; cycles a beat waited on ``out.ready``.
    """

    def __init__(self, config: HyScaleConfig):
        self.config = config
        w = Widths(config)
        self.wbits = bits_for(weight_depth(config))
        members = {
            "start": In(1), "n_rows": In(w.dst + 1), "f_in": In(w.feat + 1),
            "f_out": In(w.feat + 1), "relu": In(1),
            "act_row": Out(w.dst), "act_idx": Out(w.feat), "act_data": In(32),
            "w_valid": In(1), "w_data": In(32 * config.macs),
            "out": Out(stream.Signature(32 * config.mem_words_per_cycle)),
            "done": Out(1), "busy": Out(1),
        }
        for name in UPD_COUNTERS:
            members[name] = Out(COUNTER_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        w = Widths(cfg)
        M = cfg.macs
        R = cfg.rows_per_block
        WPB = cfg.mem_words_per_cycle
        cells = [MacCell(cfg) for _ in range(M)]
        for c, cell in enumerate(cells):
            m.submodules[f"mac{c}"] = cell
            m.d.comb += cell.relu.eq(self.relu)

        # -- weight loading ----------------------------------------------------------------------
        w_ptr = Signal(self.wbits + 1)
        for c, cell in enumerate(cells):
            m.d.comb += [cell.w_en.eq(self.w_valid), cell.w_addr.eq(w_ptr),
                         cell.w_data.eq(self.w_data.word_select(c, 32))]
        with m.If(self.w_valid):
            m.d.sync += w_ptr.eq(w_ptr + 1)

        # -- token generator ---------------------------------------------------------------------
        # work items are (row, column group) pairs in row-major order; a block holds R of them
        running = Signal()
        m.d.comb += self.busy.eq(running)
        groups = (self.f_out + (M - 1)) // M
        gstep = self.f_in + 1                 # weight rows per column group (bias last)
        b_row = Signal(w.dst + 1)            # the block's first item
        b_g = Signal(w.feat + 1)
        b_gb = Signal(self.wbits + 1)        # its weight base g * (f_in + 1)
        t_row = Signal(w.dst + 1)            # the item of the current slot
        t_g = Signal(w.feat + 1)
        t_gb = Signal(self.wbits + 1)
        i = Signal(w.feat + 1)
        r = Signal(bits_for(R))
        in_block = Signal()
        par = Signal()                       # result buffer of the block being fed
        pending = Array([Signal(name="pending0"), Signal(name="pending1")])
        fed_all = Signal()
        r_last = r == R - 1
        i_last = i + 1 >= self.f_in
        g_wrap = t_g + 1 >= groups
        n_row = Mux(g_wrap, t_row + 1, t_row)
        n_g = Mux(g_wrap, 0, t_g + 1)
        n_gb = Mux(g_wrap, 0, t_gb + gstep)
        can_open = running & ~in_block & ~fed_all & ~pending[par]
        with m.If(can_open):
            m.d.sync += [in_block.eq(1), pending[par].eq(1), i.eq(0), r.eq(0),
                         t_row.eq(b_row), t_g.eq(b_g), t_gb.eq(b_gb)]
        token = in_block
        with m.If(token):
            m.d.sync += [r.eq(r + 1), t_row.eq(n_row), t_g.eq(n_g), t_gb.eq(n_gb)]
            with m.If(r_last):
                m.d.sync += [r.eq(0), i.eq(i + 1), t_row.eq(b_row), t_g.eq(b_g),
                             t_gb.eq(b_gb)]
                with m.If(i_last):
                    # block fed: the next block starts at the item after this slot's
                    m.d.sync += [in_block.eq(0), par.eq(~par), b_row.eq(n_row), b_g.eq(n_g),
                                 b_gb.eq(n_gb), fed_all.eq(n_row >= self.n_rows)]
        row = t_row
        m.d.comb += [self.act_row.eq(row), self.act_idx.eq(i)]
        # the activation arrives next cycle; the token enters MAC 0 with it
        t_meta = Cat(token, i == 0, i_last, r, par)
        t1 = Signal(len(t_meta))
        waddr1 = Signal(self.wbits, reset_less=True)
        baddr1 = Signal(self.wbits, reset_less=True)
        live1 = Signal(reset_less=True)
        m.d.sync += [t1.eq(Mux(token, t_meta, 0)), waddr1.eq(t_gb + i),
                     baddr1.eq(t_gb + self.f_in), live1.eq(row < self.n_rows)]
        act1 = Mux(live1, self.act_data, 0)
        rb = bits_for(R)
        prev = None
        for c, cell in enumerate(cells):
            if prev is None:
                fields = (t1[0], t1[1], t1[2], t1[3:3 + rb], t1[3 + rb], act1, waddr1, baddr1)
            else:
                fields = prev
            regs = [Signal(len(f), name=f"c{c}_tok{k}", reset_less=(k != 0))
                    for k, f in enumerate(fields)]
            m.d.sync += [reg.eq(f) for reg, f in zip(regs, fields)]
            m.d.comb += [cell.tok_valid.eq(regs[0]), cell.tok_first.eq(regs[1]),
                         cell.tok_last.eq(regs[2]), cell.tok_row.eq(regs[3]),
                         cell.tok_par.eq(regs[4]), cell.tok_act.eq(regs[5]),
                         cell.tok_waddr.eq(regs[6]), cell.tok_baddr.eq(regs[7])]
            prev = regs

        # -- drain -------------------------------------------------------------------------------
        # blocks complete in the order they were fed; the drain walks the same items
        full = Array([Signal(name="full0"), Signal(name="full1")])
        tail_cell = cells[-1]
        with m.If(tail_cell.last_valid & (tail_cell.last_row == R - 1)):
            m.d.sync += full[tail_cell.last_par].eq(1)
        d_par = Signal()
        d_r = Signal(bits_for(R) + 1)        # result slot
        d_q = Signal(range(-(-M // WPB) + 1))
        d_row = Signal(w.dst + 1)
        d_g = Signal(w.feat + 1)
        d_col = Signal(w.feat + 1)           # first column of the current beat
        have = Signal()                       # read data of (d_r, d_q) is on the RAM outputs
        cols_here = Mux(self.f_out - d_g * M < M, self.f_out - d_g * M, M)
        beats_here = (cols_here + (WPB - 1)) // WPB
        take = have & self.out.ready
        q_last = d_q + 1 >= beats_here
        dg_wrap = d_g + 1 >= groups
        nd_row = Mux(dg_wrap, d_row + 1, d_row)
        nd_g = Mux(dg_wrap, 0, d_g + 1)
        job_end = nd_row >= self.n_rows
        block_end = take & q_last & ((d_r == R - 1) | job_end)
        nxt_q = Mux(q_last, 0, d_q + 1)
        addr_r = Mux(take & q_last, d_r + 1, d_r)
        for cell in cells:
            m.d.comb += cell.res_addr.eq(Mux(d_par, addr_r + R, addr_r))
        q_reg = Signal.like(d_q)
        m.d.sync += q_reg.eq(Mux(take, nxt_q, d_q))
        n_q = -(-M // WPB)
        for k in range(WPB):
            options = [cells[q * WPB + k].res_data if q * WPB + k < M else 0 for q in range(n_q)]
            word = Array(options)[q_reg] if n_q > 1 else options[0]
            m.d.comb += self.out.payload.word_select(k, 32).eq(
                Mux(d_col + k < self.f_out, word, 0))
        m.d.comb += self.out.valid.eq(have)
        with m.If(~have & full[d_par] & running):
            m.d.sync += have.eq(1)
        with m.If(take):
            m.d.sync += [d_q.eq(nxt_q), d_col.eq(d_col + WPB)]
            with m.If(q_last):
                m.d.sync += [d_r.eq(d_r + 1), d_row.eq(nd_row), d_g.eq(nd_g),
                             d_col.eq(nd_g * M)]
            with m.If(block_end):
                m.d.sync += [have.eq(0), full[d_par].eq(0), pending[d_par].eq(0),
                             d_par.eq(~d_par), d_r.eq(0)]
                with m.If(job_end):
                    m.d.sync += [running.eq(0), self.done.eq(1)]

        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), b_row.eq(0), b_g.eq(0), b_gb.eq(0),
                         in_block.eq(0), par.eq(0), pending[0].eq(0), pending[1].eq(0),
                         full[0].eq(0), full[1].eq(0), fed_all.eq(0), d_par.eq(0), d_r.eq(0),
                         d_q.eq(0), d_row.eq(0), d_g.eq(0), d_col.eq(0), have.eq(0)]
            with m.If(self.n_rows == 0):
                m.d.sync += [running.eq(0), self.done.eq(1)]

        valid_words = sum(((d_col + k) < self.f_out).as_unsigned() for k in range(WPB))
        increments = {"words_written": Mux(take, valid_words, 0),
                      "stall_output": have & ~self.out.ready}
        for name, inc in increments.items():
            counter = getattr(self, name)
            with m.If(self.start):
                m.d.sync += counter.eq(0)
            with m.Elif(running):
                m.d.sync += counter.eq(counter + inc)
        return m
