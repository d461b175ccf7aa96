"""Word selects and simulation forms: logic as synthesis sees it, and as a simulator evaluates
it cheaply.

A design that picks one word of a feature row by a run-time index (the output-mask MUXes of an
S-SpMM group pick W of a row's 64 words, every cycle) can say it in three ways, and each costs a
simulator differently:

- ``value.word_select(index, 32)``: Amaranth writes ``value >> (index * 32)``; Verilator
  computes the shift of the whole row into a temporary (a 256-byte copy per word picked);
- a ``case`` over the words (what :func:`select_word` wrote before): Verilator makes it a tree of
  ``?:`` six levels deep, whose branches depend on the data and are mispredicted;
- an indexed part-select, ``value[index * 32 +: 32]``: Verilator reads the one word
  (``VL_SEL_IWII``: an index, a load, a shift). Amaranth cannot write it.

So in Verilog :class:`WordSelect` is an instance of a small generated module
(:func:`word_select_verilog`, appended to the design's Verilog by
:func:`moagcn.sim.rtl.build.verilog_text`) that simulators read as the part-select and synthesis
(yosys defines ``SYNTHESIS``) as the same ``case`` Amaranth would write, so the netlist is
unchanged; in the Amaranth simulator it is that ``case``. Out-of-range indices give 0 on every
path.

*Simulation forms* do the same for gates Verilator evaluates bit by bit every cycle (a
population count's tables and adder tree, a lowest-set-bit one-hot, the bits above it, the job
emitter's chunk select): the design builds its gates as before and passes them through a
generated module (:class:`SimForm`, :func:`chunk_select_module`) that returns them under
``SYNTHESIS`` and otherwise computes the same function in a few operations from the gates'
inputs; the gates then have no reader in a simulation, and Verilator removes them. Icarus reads
the simulation forms too. ``tests/hw/test_wordsel_rtl.py`` checks both branches of every module
against Python references; docs/sim.md (Co-simulation speed) has the profile they came from.
"""

from __future__ import annotations

import re

from amaranth.hdl import ClockSignal, Instance, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.target import VerilogTarget

MODULE_PREFIX = "moagcn_word_select"
_NAME = re.compile(rf"\b{MODULE_PREFIX}_w(\d+)_n(\d+)_s(\d+)\b")
SIM_FORM_PREFIX = "moagcn_sim_form"
_CHUNK_NAME = re.compile(rf"\b{SIM_FORM_PREFIX}_chunksel_f(\d+)_l(\d+)_c(\d+)_s(\d+)\b")
_SIM_NAME = re.compile(rf"\b{SIM_FORM_PREFIX}_(popcount|lowest|second|above|pass)_n(\d+)_w(\d+)\b")
_HELD_NAME = re.compile(rf"\b{SIM_FORM_PREFIX}_held_w(\d+)\b")
#: what a simulator computes instead of the gates, per operation: ``a`` the input (``n`` bits),
#: ``y`` the output (``w`` bits); ``low`` is ``a``'s lowest set bit
_SIM_FORMS = {
    # one population count (an instruction) instead of the 4-bit tables and their adder tree
    "popcount": "y = $countones(a);",
    # two operations instead of an AND with the OR below it per bit
    "lowest": "y = a & (~a + 1'b1);",
    # the second-lowest set bit: the lowest of what is left without the lowest
    "second": "y = (a & ~(a & (~a + 1'b1))) & (~(a & ~(a & (~a + 1'b1))) + 1'b1);",
    # a structure simulators model more cheaply, given whole as ``a`` (the same values)
    "pass": "y = a;",
    # the bits above the lowest set bit: everything above its one-hot, by one subtraction
    "above": "y = ~(((a & (~a + 1'b1)) << 1) - 1'b1);",
}


def module_name(width: int, words: int, index_bits: int) -> str:
    """Name of the Verilog module selecting a ``width``-bit word of ``words`` by an index of
    ``index_bits`` bits."""
    return f"{MODULE_PREFIX}_w{width}_n{words}_s{index_bits}"


def word_select_verilog(width: int, words: int, index_bits: int) -> str:
    """Verilog of :func:`module_name` ``(width, words, index_bits)``: ports ``a`` (the words,
    word 0 in the low bits), ``s`` (the index), ``y`` (the word, 0 when ``s >= words``)."""
    name = module_name(width, words, index_bits)
    arms = "\n".join(f"      {index_bits}'h{i:x}: y = a[{i * width + width - 1}:{i * width}];"
                     for i in range(words))
    full = words == 1 << index_bits
    # simulators: the part-select; an index past the last word reads 0 (guarded, not padded:
    # a padded copy of the row would cost a copy of the row)
    sim = (f"y = a[s * {width} +: {width}];" if full else
           f"y = s < {words} ? a[s * {width} +: {width}] : {width}'h0;")
    return f"""
// Word select used by moagcn designs (see moagcn.hw.common.wordsel): word s of a, 0 past the
// last word. Simulators read the part-select; synthesis reads the case Amaranth would write.
module {name}(a, s, y);
  input [{width * words - 1}:0] a;
  input [{index_bits - 1}:0] s;
`ifdef SYNTHESIS
  output reg [{width - 1}:0] y;
  always @* begin
    y = {width}'h0;
    (* full_case = 32'd1 *)
    casez (s)
{arms}
    endcase
  end
`else
  // a continuous assignment: Icarus evaluates it at time 0 (an always block whose inputs never
  // change would leave y undefined there)
  output [{width - 1}:0] y;
  assign {sim}
`endif
endmodule
"""


def sim_form_verilog(op: str, n: int, w: int) -> str:
    """Verilog of the simulation form of ``op`` on ``n`` bits with a ``w``-bit result: ports
    ``a`` (the input), ``t`` (the design's own gates' result), ``y``. Synthesis passes ``t``
    through (and drops nothing of the design's logic); simulators compute ``y`` from ``a`` by
    ``_SIM_FORMS[op]``, so ``t`` and the gates behind it have no reader and Verilator removes
    them."""
    return f"""
// Simulation form of a moagcn operation (see moagcn.hw.common.wordsel): synthesis takes the
// design's gates (t), simulators the same function in a few operations.
module {SIM_FORM_PREFIX}_{op}_n{n}_w{w}(a, t, y);
  input [{n - 1}:0] a;
  input [{w - 1}:0] t;
  output [{w - 1}:0] y;
`ifdef SYNTHESIS
  assign y = t;
`else
  assign {_SIM_FORMS[op]}
`endif
endmodule
"""


def chunk_select_module(features: int, lanes: int, chunk_bits: int, sel_bits: int) -> str:
    """Name of the simulation form of :class:`~moagcn.hw.sspmm.mask_decoder.ChunkSelect`."""
    return f"{SIM_FORM_PREFIX}_chunksel_f{features}_l{lanes}_c{chunk_bits}_s{sel_bits}"


def chunk_select_verilog(features: int, lanes: int, chunk_bits: int, sel_bits: int) -> str:
    """Verilog of :func:`chunk_select_module`: ``a`` = {chunk, mask}, ``t`` the gates' {valid,
    sel[lanes - 1], ..., sel[0]}, ``y`` the same fields. Simulators compute lane k's feature
    as the set bit of ``mask`` of rank ``chunk * lanes + k`` (a binary search: in a window of
    2^b bits from ``pos``, the lower half holds ``cnt`` set bits; the bit lies above them when
    the rank left is at least ``cnt``), 0 and not valid when the mask has no such bit."""
    F, L, C, S = features, lanes, chunk_bits, sel_bits
    out = L * S + L
    return f"""
// Simulation form of the S-SpMM chunk select (see moagcn.hw.common.wordsel): synthesis takes
// the design's gates (t), simulators each lane's feature by a search of population counts.
module {chunk_select_module(F, L, C, S)}(a, t, y);
  input [{F + C - 1}:0] a;
  input [{out - 1}:0] t;
  output [{out - 1}:0] y;
`ifdef SYNTHESIS
  assign y = t;
`else
  function automatic [{out - 1}:0] lanes(input [{F + C - 1}:0] w);
    reg [{F - 1}:0] mask, window;
    integer k, b, total, rank, pos, cnt, ge;
    begin
      mask = w[{F - 1}:0];
      total = $countones(mask);
      lanes = {out}'h0;
      for (k = 0; k < {L}; k = k + 1) begin
        rank = w[{F + C - 1}:{F}] * {L} + k;
        pos = 0;
        for (b = {S - 1}; b >= 0; b = b - 1) begin
          window = (mask >> pos) & ~({{{F}{{1'b1}}}} << (1 << b));
          cnt = $countones(window);
          ge = rank >= cnt;
          pos = pos + (ge << b);
          rank = rank - (ge ? cnt : 0);
        end
        if (w[{F + C - 1}:{F}] * {L} + k < total) begin
          lanes[k * {S} +: {S}] = pos[{S - 1}:0];
          lanes[{L * S} + k] = 1'b1;
        end
      end
    end
  endfunction
  // continuously assigned: Icarus evaluates it at time 0
  assign y = lanes(a);
`endif
endmodule
"""


def held_register_module(width: int) -> str:
    """Name of the simulation form of a ``width``-bit register with an enable."""
    return f"{SIM_FORM_PREFIX}_held_w{width}"


def held_register_verilog(width: int) -> str:
    """Verilog of :func:`held_register_module`: ports ``clk``, ``en``, ``d``, ``t`` (the
    design's register), ``y``. Synthesis passes ``t`` through; simulators keep their own copy,
    loaded only in enabled cycles. The design's register is written as a multiplexer in front
    of a register that loads every cycle (Amaranth's Verilog): Verilator then copies the whole
    word two or three times a cycle (the multiplexer's output, its delayed-assignment shadow and
    back), 768 bytes for a 2,048-bit row, enabled or not."""
    return f"""
// Simulation form of a register with an enable (see moagcn.hw.common.wordsel): synthesis takes
// the design's register (t), simulators load their own only when enabled.
module {held_register_module(width)}(clk, en, d, t, y);
  input clk, en;
  input [{width - 1}:0] d, t;
  output [{width - 1}:0] y;
`ifdef SYNTHESIS
  assign y = t;
`else
  reg [{width - 1}:0] r = {width}'h0;
  always @(posedge clk) if (en) r <= d;
  assign y = r;
`endif
endmodule
"""


def word_select_modules(text: str) -> str:
    """The Verilog of every word-select and simulation-form module that ``text`` instantiates
    (once each)."""
    seen = dict.fromkeys(_NAME.findall(text))
    forms = dict.fromkeys(_SIM_NAME.findall(text))
    chunks = dict.fromkeys(_CHUNK_NAME.findall(text))
    held = dict.fromkeys(_HELD_NAME.findall(text))
    return ("".join(word_select_verilog(int(w), int(n), int(s)) for w, n, s in seen)
            + "".join(sim_form_verilog(op, int(n), int(w)) for op, n, w in forms)
            + "".join(chunk_select_verilog(*map(int, c)) for c in chunks)
            + "".join(held_register_verilog(int(w)) for w in held))


class SimForm(wiring.Component):
    """``gates`` (the design's logic for ``op`` of ``value``) as synthesis sees it, and in
    Verilog simulations the same function in a few operations (:data:`_SIM_FORMS`); in the
    Amaranth simulator, ``gates``.

    Members
    -------
    value : In(n)
    gates : In(w)
    result : Out(w)
    """

    def __init__(self, op: str, n: int, w: int):
        if op not in _SIM_FORMS:
            raise ValueError(f"no simulation form for {op!r}")
        self.op, self.n, self.w = op, n, w
        super().__init__({"value": In(n), "gates": In(w), "result": Out(w)})

    def elaborate(self, platform):
        m = Module()
        if isinstance(platform, VerilogTarget):
            m.submodules.form = Instance(f"{SIM_FORM_PREFIX}_{self.op}_n{self.n}_w{self.w}",
                                         i_a=self.value, i_t=self.gates, o_y=self.result)
        else:
            m.d.comb += self.result.eq(self.gates)
        return m


def sim_form(m: Module, op: str, value: Value, gates: Value, name: str) -> Signal:
    """``gates`` (``op`` of ``value`` as the design's logic computes it) through a
    :class:`SimForm` submodule of ``m`` (unnamed: helpers may be called several times with one
    name); returns the result as a signal ``name``."""
    value, gates = Value.cast(value), Value.cast(gates)
    form = SimForm(op, len(value), len(gates))
    m.submodules += form
    sig = Signal(len(gates), name=name)
    m.d.comb += [form.value.eq(value), form.gates.eq(gates), sig.eq(form.result)]
    return sig


def held_register(m: Module, platform, enable: Value, value: Value, name: str) -> Value:
    """A register of ``value``'s width loading ``value`` in cycles where ``enable`` is set (reset
    to 0, no reset input), as a signal ``name`` of ``m``; in Verilog (``platform`` a
    :class:`VerilogTarget`), through its simulation form (:func:`held_register_verilog`).
    Returns what the register holds."""
    value = Value.cast(value)
    reg = Signal(len(value), name=name, reset_less=True)
    with m.If(enable):
        m.d.sync += reg.eq(value)
    if not (isinstance(platform, VerilogTarget) and platform.clocked_forms):
        return reg
    out = Signal(len(value), name=f"{name}_held")
    m.submodules += Instance(held_register_module(len(value)), i_clk=ClockSignal(),
                             i_en=enable, i_d=value, i_t=reg, o_y=out)
    return out


class WordSelect(wiring.Component):
    """Word ``index`` of ``value`` (words of ``width`` bits; 0 past the last word).

    Members
    -------
    value : In(width * words)
    index : In(index_bits)
    word : Out(width)
    """

    def __init__(self, words: int, index_bits: int, width: int = 32):
        if words < 1 or index_bits < 1:
            raise ValueError(f"word select of {words} words by a {index_bits}-bit index")
        self.words, self.index_bits, self.width = words, index_bits, width
        super().__init__({"value": In(width * words), "index": In(index_bits),
                          "word": Out(width)})

    def elaborate(self, platform):
        m = Module()
        W = self.width
        if isinstance(platform, VerilogTarget):
            m.submodules.select = Instance(
                module_name(W, self.words, self.index_bits),
                i_a=self.value, i_s=self.index, o_y=self.word)
            return m
        with m.Switch(self.index):
            for i in range(self.words):
                with m.Case(i):
                    m.d.comb += self.word.eq(self.value[i * W:(i + 1) * W])
        return m


def select_word(m: Module, value: Value, index: Value, width: int = 32,
                name: str | None = None) -> Signal:
    """Word ``index`` of ``value`` (words of ``width`` bits; out of range gives 0), through a
    :class:`WordSelect` submodule of ``m`` (``NAME_select`` for a ``name``)."""
    value, index = Value.cast(value), Value.cast(index)
    sel = WordSelect(len(value) // width, len(index), width)
    if name is None:
        m.submodules += sel
    else:
        m.submodules[f"{name}_select"] = sel
    sig = Signal(width, name=name)
    m.d.comb += [sel.value.eq(value[:sel.words * width]), sel.index.eq(index), sig.eq(sel.word)]
    return sig
