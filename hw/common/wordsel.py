"""Word select: word ``index`` of a wide value, as a simulator evaluates it cheaply.

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
"""

from __future__ import annotations

import re

from amaranth.hdl import Instance, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.ram import VerilogTarget

MODULE_PREFIX = "moagcn_word_select"
_NAME = re.compile(rf"\b{MODULE_PREFIX}_w(\d+)_n(\d+)_s(\d+)\b")


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
    sim = (f"    y = a[s * {width} +: {width}];" if full else
           f"    y = s < {words} ? a[s * {width} +: {width}] : {width}'h0;")
    return f"""
// Word select used by moagcn designs (see moagcn.hw.common.wordsel): word s of a, 0 past the
// last word. Simulators read the part-select; synthesis reads the case Amaranth would write.
module {name}(a, s, y);
  input [{width * words - 1}:0] a;
  input [{index_bits - 1}:0] s;
  output reg [{width - 1}:0] y;
`ifdef SYNTHESIS
  always @* begin
    y = {width}'h0;
    (* full_case = 32'd1 *)
    casez (s)
{arms}
    endcase
  end
`else
  always @*
{sim}
`endif
endmodule
"""


def word_select_modules(text: str) -> str:
    """The Verilog of every word-select module that ``text`` instantiates (once each)."""
    seen = dict.fromkeys(_NAME.findall(text))
    return "".join(word_select_verilog(int(w), int(n), int(s)) for w, n, s in seen)


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
