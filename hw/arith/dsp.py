"""A multiplication with its operands and its product registered: the shape of an FPGA DSP block
with its own input and output registers.

The binary32 multiplier's partial products (:mod:`.multiplier`) are 17 x 17 and 7 x 17 bit
unsigned multiplications between two of its register slices. Written as fabric registers, a
multiplication and fabric registers, yosys maps each to an ECP5 ``MULT18X18D`` without its
registers: the path from a register through the placed DSP's combinational multiplier (3.9 ns
in nextpnr's ECP5 timing) to the next register then crosses the fabric twice, and the placer,
which must put the DSP in one of the die's DSP rows, put those registers 50 columns away (the
HyScale `default` preset's longest path at two placements, docs/hyscale.md). The DSP block has
input registers and an output register of its own, and nextpnr times a ``MULT18X18D`` that
uses them from those registers; yosys (0.70) does not move fabric registers into it.

:class:`RegisteredProduct` is that block: ``p`` is ``a * b`` two clock-enabled cycles after its
operands (a register on each operand, one on the product), the same cycles as the fabric
registers it replaces. In Verilog (:class:`~moagcn.hw.common.target.VerilogTarget`) it is an
instance of a generated module (:func:`dsp_modules`) whose body, for the ECP5 flow of ``moagcn
synth`` (which defines ``MOAGCN_ECP5_DSP``), is a ``MULT18X18D`` with ``REG_INPUTA_CLK``,
``REG_INPUTB_CLK`` and ``REG_OUTPUT_CLK`` on ``CLK0`` (clock enable ``CE0``), and otherwise
(simulators, yosys for other families, which pack DSP registers themselves or have none) the
same registers and product in plain Verilog. The Amaranth simulator runs the registers in
Amaranth.
"""

from __future__ import annotations

import re

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from moagcn.hw.common.ram import refuse
from moagcn.hw.common.target import VerilogTarget

#: prefix of the generated modules' names; the macro that selects the ECP5 DSP primitive
DSP_PREFIX = "moagcn_dsp_mul"
ECP5_DSP_MACRO = "MOAGCN_ECP5_DSP"
#: widest operand one MULT18X18D multiplies (unsigned operands, zero-extended to 18 bits)
DSP_WIDTH = 18
_NAME = re.compile(rf"\b{DSP_PREFIX}_a(\d+)_b(\d+)_e([01])\b")


def dsp_name(a_width: int, b_width: int, enable: bool) -> str:
    """Name of the generated module of an ``a_width`` x ``b_width`` product (``enable``: with
    a clock-enable port ``en``)."""
    return f"{DSP_PREFIX}_a{a_width}_b{b_width}_e{int(enable)}"


class RegisteredProduct(wiring.Component):
    """``p = a * b`` (unsigned), two cycles after its operands: a register on each operand and
    one on the product, all clock-enabled by ``en`` when ``enable``.

    Members
    -------
    a : In(a_width)
    b : In(b_width)
    p : Out(a_width + b_width)
    en : In(1)
        Only with ``enable``: the registers hold while it is low.
    """

    def __init__(self, a_width: int, b_width: int, enable: bool = False):
        for name, width in (("a_width", a_width), ("b_width", b_width)):
            if not 1 <= width <= DSP_WIDTH:
                refuse(self, f"{name}={width}: a DSP product's operands are 1..{DSP_WIDTH} bits")
        self.a_width, self.b_width, self.enable = a_width, b_width, enable
        members = {"a": In(a_width), "b": In(b_width), "p": Out(a_width + b_width)}
        if enable:
            members["en"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        en = self.en if self.enable else Const(1, 1)
        if isinstance(platform, VerilogTarget):
            m.submodules.dsp = Instance(dsp_name(self.a_width, self.b_width, self.enable),
                                        i_clk=ClockSignal(), i_en=en, i_a=self.a, i_b=self.b,
                                        o_p=self.p)
            return m
        a_r = Signal(self.a_width, name="a_r", reset_less=True)
        b_r = Signal(self.b_width, name="b_r", reset_less=True)
        p_r = Signal(len(self.p), name="p_r", reset_less=True)
        with m.If(en):
            m.d.sync += [a_r.eq(self.a), b_r.eq(self.b), p_r.eq(a_r * b_r)]
        m.d.comb += self.p.eq(p_r)
        return m


def dsp_verilog(a_width: int, b_width: int, enable: bool) -> str:
    """Verilog of :func:`dsp_name`: ports ``clk``, ``en`` (the clock enable; tied high by an
    instance without ``enable``), ``a``, ``b`` and ``p``."""
    name = dsp_name(a_width, b_width, enable)
    pw = a_width + b_width
    pins = ",\n    ".join(
        [", ".join(f".A{i}({_bit('a', a_width, i)})" for i in range(DSP_WIDTH)),
         ", ".join(f".B{i}({_bit('b', b_width, i)})" for i in range(DSP_WIDTH)),
         ", ".join(f".C{i}(1'b0)" for i in range(DSP_WIDTH)),
         ".SIGNEDA(1'b0), .SIGNEDB(1'b0), .SOURCEA(1'b0), .SOURCEB(1'b0)",
         ".CLK0(clk), .CE0(en), .RST0(1'b0)",
         ", ".join(f".P{i}(full[{i}])" for i in range(2 * DSP_WIDTH))])
    return f"""
// A product with registered operands and a registered product (see moagcn.hw.arith.dsp): for
// the ECP5 flow a MULT18X18D with its own input and output registers, otherwise plain registers.
module {name}(clk, en, a, b, p);
  input clk, en;
  input [{a_width - 1}:0] a;
  input [{b_width - 1}:0] b;
  output [{pw - 1}:0] p;
`ifdef {ECP5_DSP_MACRO}
  wire [{2 * DSP_WIDTH - 1}:0] full;
  MULT18X18D #(
    .REG_INPUTA_CLK("CLK0"), .REG_INPUTA_CE("CE0"), .REG_INPUTA_RST("RST0"),
    .REG_INPUTB_CLK("CLK0"), .REG_INPUTB_CE("CE0"), .REG_INPUTB_RST("RST0"),
    .REG_OUTPUT_CLK("CLK0"), .REG_OUTPUT_CE("CE0"), .REG_OUTPUT_RST("RST0")
  ) mult (
    {pins}
  );
  assign p = full[{pw - 1}:0];
`else
  // zero at start, as Amaranth's registers and the DSP block's (a simulator that starts them
  // undefined would carry that into a result before the first operands are through)
  reg [{a_width - 1}:0] a_r = 0;
  reg [{b_width - 1}:0] b_r = 0;
  reg [{pw - 1}:0] p_r = 0;
  always @(posedge clk)
    if (en) begin
      a_r <= a;
      b_r <= b;
      p_r <= a_r * b_r;
    end
  assign p = p_r;
`endif
endmodule
"""


def _bit(port: str, width: int, i: int) -> str:
    return f"{port}[{i}]" if i < width else "1'b0"


def dsp_modules(text: str) -> str:
    """The Verilog of every DSP product module that ``text`` instantiates (once each)."""
    return "".join(dsp_verilog(int(a), int(b), e == "1")
                   for a, b, e in dict.fromkeys(_NAME.findall(text)))
