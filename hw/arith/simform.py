"""The binary32 adder's simulation form: its gates as synthesis sees them, and for Verilog
simulators the same function in word operations.

A pipelined :class:`~moagcn.hw.arith.adder.Fp32Adder` is seven stages of bit-level logic (the
magnitude compare, a prefix OR for the sticky bit, the alignment shifter, a leading-zero tree, the
normalising shift, rounding, the special values) with their register slices. Verilator
evaluates all of it, gate by gate, for every adder on every cycle: the S-SpMM default preset's 16
lane adders were a quarter of its co-simulation time (docs/sim.md). Like the word selects and
population counts (:mod:`moagcn.hw.common.wordsel`), the adder's result passes through a
generated module that returns the gates' result under ``SYNTHESIS`` (so the netlist is the
design's own) and otherwise computes the sum at the operands' cycle with one Verilog function
(unpack, compare, aligned shift with a sticky bit, add, a five-step leading-zero search, round to
nearest even, special values: moagcn's binary32 conventions, :mod:`.fp32`) and delays it through
``latency`` registers, frozen with the clock enable as the gates' slices are. The gates then have
no reader in a simulation, and Verilator removes them.

The two forms agree on every cycle once the pipeline has filled (the function of the operands
is the same and the registers hold the same values): ``tests/hw/test_arith_forms.py`` runs
both branches of the module on Verilator against numpy, special-value pairs and random ones,
and the S-SpMM's co-simulation output is byte-identical to the one before the form
(docs/sim.md). The Amaranth simulator runs the gates.
"""

from __future__ import annotations

import re

#: prefix of the generated modules' names
ADD_FORM_PREFIX = "moagcn_sim_form_fp32add"
_NAME = re.compile(rf"\b{ADD_FORM_PREFIX}_l(\d+)_r([01])_e([01])\b")

#: the sum as one function (Verilog-2005: Icarus and Verilator read it). ``x`` is the operand of
#: the larger magnitude; subnormals take exponent 1; three bits below the significand (guard,
#: round, sticky) suffice for a correctly rounded sum
_ADD_FUNCTION = """
  function automatic [31:0] fadd(input [31:0] p, input [31:0] q);
    reg swap, sub, nan, inf, rup, ovf;
    reg [31:0] x, z, v;
    reg [7:0] ex, ez, d, lim;
    reg [8:0] e;
    reg [23:0] mx, mz;
    reg [26:0] xa, za, n;
    reg [27:0] s;
    reg [4:0] lz;
    reg [30:0] rounded;
    begin
      nan = (p[30:23] == 8'hff && p[22:0] != 23'h0) || (q[30:23] == 8'hff && q[22:0] != 23'h0)
            || (p[30:0] == 31'h7f800000 && q[30:0] == 31'h7f800000 && p[31] != q[31]);
      inf = (p[30:0] == 31'h7f800000 || q[30:0] == 31'h7f800000) && !nan;
      swap = q[30:0] > p[30:0];
      x = swap ? q : p;
      z = swap ? p : q;
      sub = x[31] ^ z[31];
      ex = x[30:23] == 8'h0 ? 8'd1 : x[30:23];
      ez = z[30:23] == 8'h0 ? 8'd1 : z[30:23];
      mx = {x[30:23] != 8'h0, x[22:0]};
      mz = {z[30:23] != 8'h0, z[22:0]};
      d = ex - ez;
      xa = {mx, 3'b000};
      if (d >= 8'd27)
        za = {26'h0, mz != 24'h0};
      else
        za = ({mz, 3'b000} >> d) | {26'h0, ({mz, 3'b000} & ((27'h1 << d) - 27'h1)) != 27'h0};
      s = sub ? {1'b0, xa} - {1'b0, za} : {1'b0, xa} + {1'b0, za};
      if (s[27]) begin
        n = {s[27:2], s[1] | s[0]};
        e = {1'b0, ex} + 9'd1;
      end else begin
        // leading zeros of the 27-bit sum, at most ex - 1 (below that the result is subnormal)
        v = {s[26:0], 5'h0};
        lz = 5'd0;
        if (v[31:16] == 16'h0) begin lz = lz + 5'd16; v = v << 16; end
        if (v[31:24] == 8'h0) begin lz = lz + 5'd8; v = v << 8; end
        if (v[31:28] == 4'h0) begin lz = lz + 5'd4; v = v << 4; end
        if (v[31:30] == 2'h0) begin lz = lz + 5'd2; v = v << 2; end
        if (v[31] == 1'b0) lz = lz + 5'd1;
        lim = ex - 8'd1;
        if (lim < {3'h0, lz}) lz = lim[4:0];
        n = s[26:0] << lz;
        e = {1'b0, ex} - {4'h0, lz};
      end
      rup = n[2] & (n[1] | n[0] | n[3]);
      rounded = {n[26] ? e[7:0] : 8'h0, n[25:3]} + {30'h0, rup};
      ovf = e >= 9'd255 || (e == 9'd254 && n[26:3] == 24'hffffff && rup);
      if (nan) fadd = 32'h7fc00000;
      else if (inf) fadd = {(p[30:0] == 31'h7f800000) ? p[31] : q[31], 31'h7f800000};
      else if (s == 28'h0) fadd = {x[31] & ~sub, 31'h0};
      else if (ovf) fadd = {x[31], 31'h7f800000};
      else fadd = {x[31], rounded};
    end
  endfunction
"""


def add_form_name(latency: int, restart: bool, enable: bool) -> str:
    """Name of the simulation form of an adder of ``latency`` cycles (with ``restart``, an
    ``en``)."""
    return f"{ADD_FORM_PREFIX}_l{latency}_r{int(restart)}_e{int(enable)}"


def add_form_verilog(latency: int, restart: bool, enable: bool) -> str:
    """Verilog of :func:`add_form_name`: ports ``clk``, ``a``, ``b``, ``restart`` (``a`` taken
    as +0), ``en`` (the clock enable: the delay line holds while it is low), ``t`` (the gates'
    result) and ``y`` (the result, ``latency`` enabled cycles after its operands)."""
    name = add_form_name(latency, restart, enable)
    operand = "restart ? 32'h0 : a" if restart else "a"
    if latency == 0:
        body = f"  assign y = fadd({operand}, b);\n"
    else:
        # a register per cycle of latency (a wide shift register costs Verilator a copy of
        # all of it every cycle). The first holds fadd of the operands of the last enabled
        # cycle, which are kept (``pa``, ``pb``): operands that have not changed leave it as it
        # is, so an idle adder (its operands held) costs a compare, not a sum. All start at 0,
        # and fadd(+0, +0) = +0
        regs = [f"r{k}" for k in range(latency)]
        moves = " ".join(f"{regs[k]} <= {regs[k - 1]};" for k in range(latency - 1, 0, -1))
        zeros = ", ".join(f"{r} = 32'h0" for r in ["pa", "pb", *regs])
        body = (f"  reg [31:0] {zeros};\n"
                f"  wire [31:0] oa = {operand};\n"
                "  always @(posedge clk) if (en) begin\n"
                "    if (oa != pa || b != pb) r0 <= fadd(oa, b);\n"
                f"    pa <= oa; pb <= b; {moves}\n"
                "  end\n"
                f"  assign y = {regs[-1]};\n")
    return f"""
// Simulation form of the moagcn binary32 adder (see moagcn.hw.arith.simform): synthesis takes
// the design's gates (t), simulators the sum computed by one function and delayed.
module {name}(clk, a, b, restart, en, t, y);
  input clk, restart, en;
  input [31:0] a, b, t;
  output [31:0] y;
`ifdef SYNTHESIS
  assign y = t;
`else
{_ADD_FUNCTION}
{body}`endif
endmodule
"""


def add_form_modules(text: str) -> str:
    """The Verilog of every adder simulation form that ``text`` instantiates (once each)."""
    return "".join(add_form_verilog(int(lat), r == "1", e == "1")
                   for lat, r, e in dict.fromkeys(_NAME.findall(text)))
