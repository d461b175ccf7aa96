"""The binary32 adder's and multiplier's simulation forms: their gates as synthesis sees them,
and for Verilator the same function in word operations.

A pipelined :class:`~moagcn.hw.arith.adder.Fp32Adder` is seven stages of bit-level logic (the
magnitude compare, a prefix OR for the sticky bit, the alignment shifter, a leading-zero tree, the
normalising shift, rounding, the special values) with their register slices. Verilator
evaluates all of it, gate by gate, for every adder on every cycle: the S-SpMM default preset's 16
lane adders were a quarter of its co-simulation time (docs/sim.md). Like the word selects and
population counts (:mod:`moagcn.hw.common.wordsel`), the adder's result passes through a
generated module. Under ``SYNTHESIS`` it returns the gates' result (so the netlist is the
design's own), and in Icarus too (Icarus simulates the gates beside a form anyway, since it
keeps logic nobody reads, and the gates resolve undefined values bit by bit where a form's word
compares would not). Under Verilator it computes the sum at the operands' cycle with one
Verilog function (unpack, compare, aligned shift with a sticky bit, add, a five-step
leading-zero search, round to nearest even, special values: moagcn's binary32 conventions,
:mod:`.fp32`) and delays it through ``latency`` registers, frozen with the clock enable as the
gates' slices are. The gates then have no reader, and Verilator removes them.

The multiplier (:class:`~moagcn.hw.arith.multiplier.Fp32Multiplier`: unpack, a subnormal
operand normalised, partial products, one align shift with a sticky bit, rounding, special
values) has
the same kind of form, ``fmul``: the 48-bit product in one multiplication, the leading-zero
count capped so the exponent stays at or above 1, or the right shift of an underflowing
product, then the same rounding. The HyScale MAC's accumulating adder
(:class:`moagcn.hw.hyscale.mac.AccumulatingAdder`, whose second operand is its own result or a
new item's initial value, chosen in its last stage) has one too, ``fadd`` around a register
loop.

The two forms agree on every cycle once the pipeline has filled (the function of the operands
is the same and the registers hold the same values): ``tests/hw/test_arith_forms.py`` runs
both branches of each module on Verilator against numpy, special-value pairs and random ones
(and the accumulating adder against a numpy model of its loop), and the S-SpMM's and HyScale's
co-simulation outputs are byte-identical to the ones before the forms (docs/sim.md). The
Amaranth simulator runs the gates.
"""

from __future__ import annotations

import re

from amaranth.hdl import ClockSignal, Instance, Signal

from moagcn.hw.common.target import VerilogTarget

#: prefix of the generated modules' names
ADD_FORM_PREFIX = "moagcn_sim_form_fp32add"
MUL_FORM_PREFIX = "moagcn_sim_form_fp32mul"
_NAME = re.compile(rf"\b{ADD_FORM_PREFIX}_l(\d+)_r([01])_e([01])\b")
_MUL_NAME = re.compile(rf"\b{MUL_FORM_PREFIX}_l(\d+)_e([01])\b")
ACC_FORM_PREFIX = "moagcn_sim_form_fp32acc"
_ACC_NAME = re.compile(rf"\b{ACC_FORM_PREFIX}_l(\d+)_d(\d+)\b")

#: the sum as one function (Verilog-2005). ``x`` is the operand of
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


#: the product as one function. Subnormal operands take exponent 1 and no hidden bit; the
#: 48-bit product's leading-zero count is capped at the exponent above the bias (a one ORed in
#: at bit 47 - e), so the normalised exponent never falls below 1; a product below the normal
#: range is shifted right instead, its lost bits kept as a sticky bit. ``fmul`` is evaluated
#: only for finite, nonzero operands' words; the special values take their flags' results
_MUL_FUNCTION = """
  function automatic [31:0] fmul(input [31:0] p, input [31:0] q);
    reg nan, inf, zero, pinf, qinf, pzero, qzero, rup, lost;
    reg [7:0] ep, eq;
    reg [23:0] mp, mq;
    reg [8:0] es, e;
    reg [6:0] shr;
    reg [47:0] prod, v, n;
    reg [5:0] lz;
    reg [9:0] ex;
    reg [30:0] rounded;
    begin
      pinf = p[30:0] == 31'h7f800000;
      qinf = q[30:0] == 31'h7f800000;
      pzero = p[30:0] == 31'h0;
      qzero = q[30:0] == 31'h0;
      nan = (p[30:23] == 8'hff && p[22:0] != 23'h0) || (q[30:23] == 8'hff && q[22:0] != 23'h0)
            || (pinf && qzero) || (qinf && pzero);
      inf = (pinf || qinf) && !nan;
      zero = (pzero || qzero) && !nan;
      if (nan) fmul = 32'h7fc00000;
      else if (inf) fmul = {p[31] ^ q[31], 31'h7f800000};
      else if (zero) fmul = {p[31] ^ q[31], 31'h0};
      else begin
        ep = p[30:23] == 8'h0 ? 8'd1 : p[30:23];
        eq = q[30:23] == 8'h0 ? 8'd1 : q[30:23];
        mp = {p[30:23] != 8'h0, p[22:0]};
        mq = {q[30:23] != 8'h0, q[22:0]};
        prod = {24'h0, mp} * {24'h0, mq};
        es = {1'b0, ep} + {1'b0, eq};
        lost = 1'b0;
        if (es < 9'd127) begin
          shr = 7'd127 - es[6:0];
          if (shr >= 7'd48) begin
            n = 48'h0;
            lost = prod != 48'h0;
          end else begin
            n = prod >> shr;
            lost = (prod & ((48'h1 << shr) - 48'h1)) != 48'h0;
          end
          ex = 10'd1;
        end else begin
          e = es - 9'd127;
          v = prod | (48'h800000000000 >> e);
          lz = 6'd0;
          if (v[47:16] == 32'h0) begin lz = lz + 6'd32; v = v << 32; end
          if (v[47:32] == 16'h0) begin lz = lz + 6'd16; v = v << 16; end
          if (v[47:40] == 8'h0) begin lz = lz + 6'd8; v = v << 8; end
          if (v[47:44] == 4'h0) begin lz = lz + 6'd4; v = v << 4; end
          if (v[47:46] == 2'h0) begin lz = lz + 6'd2; v = v << 2; end
          if (v[47] == 1'b0) lz = lz + 6'd1;
          n = prod << lz;
          ex = {1'b0, e} + 10'd1 - {4'h0, lz};
        end
        rup = n[23] & ((n[22:0] != 23'h0) | lost | n[24]);
        rounded = {n[47] ? ex[7:0] : 8'h0, n[46:24]} + {30'h0, rup};
        if (ex >= 10'd255 || (ex == 10'd254 && n[47:24] == 24'hffffff && rup))
          fmul = {p[31] ^ q[31], 31'h7f800000};
        else
          fmul = {p[31] ^ q[31], rounded};
      end
    end
  endfunction
"""


def add_form_name(latency: int, restart: bool, enable: bool) -> str:
    """Name of the simulation form of an adder of ``latency`` cycles (with ``restart``, an
    ``en``)."""
    return f"{ADD_FORM_PREFIX}_l{latency}_r{int(restart)}_e{int(enable)}"


def _delayed(function: str, operand_a: str, latency: int, operand_b: str = "b",
             enable: str = "en") -> str:
    """The body of a form: ``y`` is ``function(operand_a, operand_b)`` of the operands
    ``latency`` cycles before (cycles with ``enable`` high; every cycle with ``enable=""``)."""
    if latency == 0:
        return f"  assign y = {function}({operand_a}, {operand_b});\n"
    # a register per cycle of latency (a wide shift register costs Verilator a copy of all of
    # it every cycle). The first holds the function of the operands of the last enabled cycle,
    # which are kept (``pa``, ``pb``): operands that have not changed leave it as it is, so an
    # idle unit (its operands held) costs a compare, not a sum or a product. All start at 0, as
    # the gates' registers do (whose result is then +0), and fadd(+0, +0) = fmul(+0, +0) = +0
    regs = [f"r{k}" for k in range(latency)]
    moves = " ".join(f"{regs[k]} <= {regs[k - 1]};" for k in range(latency - 1, 0, -1))
    zeros = ", ".join(f"{r} = 32'h0" for r in ["pa", "pb", *regs])
    gate = f" if ({enable})" if enable else ""
    return (f"  reg [31:0] {zeros};\n"
            f"  wire [31:0] oa = {operand_a};\n"
            f"  always @(posedge clk){gate} begin\n"
            f"    if (oa != pa || {operand_b} != pb) r0 <= {function}(oa, {operand_b});\n"
            f"    pa <= oa; pb <= {operand_b}; {moves}\n"
            "  end\n"
            f"  assign y = {regs[-1]};\n")


def _module(comment: str, name: str, ports: str, inputs: str, simulation: str) -> str:
    """A form's module: ``y`` is the gates' ``t`` for yosys (``SYNTHESIS``) and Icarus, and
    ``simulation`` (the form's declarations and logic) for Verilator."""
    return f"""
{comment}
module {name}({ports});
{inputs}
  output [31:0] y;
`ifdef SYNTHESIS
  assign y = t;
`elsif VERILATOR
{simulation}`else
  assign y = t;
`endif
endmodule
"""


def through_form(m, platform, name: str, gates, signal: str, **ports):
    """``gates``, or in Verilog with clocked forms (:class:`VerilogTarget`) the output ``y`` of
    an instance of form ``name`` (its ports: ``clk``, ``ports`` by name, the gates' word as
    ``t``), a signal named ``signal``."""
    if not (isinstance(platform, VerilogTarget) and platform.clocked_forms):
        return gates
    y = Signal(len(gates), name=signal)
    m.submodules.form = Instance(name, i_clk=ClockSignal(),
                                 **{f"i_{port}": value for port, value in ports.items()},
                                 i_t=gates, o_y=y)
    return y


def add_form_verilog(latency: int, restart: bool, enable: bool) -> str:
    """Verilog of :func:`add_form_name`: ports ``clk``, ``a``, ``b``, ``restart`` (``a`` taken
    as +0), ``en`` (the clock enable: the delay line holds while it is low), ``t`` (the gates'
    result) and ``y`` (the result, ``latency`` enabled cycles after its operands)."""
    name = add_form_name(latency, restart, enable)
    body = _delayed("fadd", "restart ? 32'h0 : a" if restart else "a", latency)
    return _module("// Simulation form of the moagcn binary32 adder (see moagcn.hw.arith.simform): "
                   "yosys and Icarus\n// take the design's gates (t), Verilator the sum computed "
                   "by one function and delayed.",
                   name, "clk, a, b, restart, en, t, y",
                   "  input clk, restart, en;\n  input [31:0] a, b, t;", _ADD_FUNCTION + "\n" + body)


def mul_form_name(latency: int, enable: bool) -> str:
    """Name of the simulation form of a multiplier of ``latency`` cycles (with ``enable``, an
    ``en``)."""
    return f"{MUL_FORM_PREFIX}_l{latency}_e{int(enable)}"


def mul_form_verilog(latency: int, enable: bool) -> str:
    """Verilog of :func:`mul_form_name`: ports ``clk``, ``a``, ``b``, ``en`` (the clock enable),
    ``t`` (the gates' result) and ``y`` (the product, ``latency`` enabled cycles after its
    operands)."""
    body = _delayed("fmul", "a", latency)
    return _module("// Simulation form of the moagcn binary32 multiplier (see "
                   "moagcn.hw.arith.simform): yosys and\n// Icarus take the design's gates (t), "
                   "Verilator the product computed by one function and delayed.",
                   mul_form_name(latency, enable), "clk, a, b, en, t, y",
                   "  input clk, en;\n  input [31:0] a, b, t;", _MUL_FUNCTION + "\n" + body)


def acc_form_name(latency: int, lead: int) -> str:
    """Name of the simulation form of an accumulating adder (``latency`` cycles, its
    ``restart`` and ``init`` ``lead`` cycles ahead of the operand they apply to)."""
    return f"{ACC_FORM_PREFIX}_l{latency}_d{lead}"


def acc_form_verilog(latency: int, lead: int) -> str:
    """Verilog of :func:`acc_form_name` (:class:`moagcn.hw.hyscale.mac.AccumulatingAdder`):
    ports ``clk``, ``a``, ``restart``, ``init``, ``t`` (the gates' result) and ``y``. The sum
    ``y`` is ``fadd(a, f)`` of ``latency`` cycles before, ``f`` the adder's own operand: ``init``
    where ``restart`` was set ``lead`` cycles before, otherwise the sum leaving the adder in
    that cycle, as the gates choose it in their last stage."""
    if latency < 1 or not 1 <= lead <= latency:
        raise ValueError(f"an accumulating adder of latency {latency} with lead {lead}")
    rs = [f"rs{k}" for k in range(lead)]
    ri = [f"ri{k}" for k in range(lead)]
    lead_moves = [f"{x[k]} <= {x[k - 1]};" for x in (rs, ri) for k in range(lead - 1, 0, -1)]
    # restart and init delayed by lead; f is the operand the gates' last stage chooses
    body = (f"  reg {', '.join(f'{r} = 1' + chr(39) + 'b0' for r in rs)};\n"
            f"  reg [31:0] {', '.join(f'{r} = 32' + chr(39) + 'h0' for r in ri)};\n"
            "  wire [31:0] f;\n"
            f"  always @(posedge clk) begin "
            f"{' '.join(['rs0 <= restart; ri0 <= init;', *lead_moves])} end\n"
            + _delayed("fadd", "a", latency, operand_b="f", enable="")
            + f"  assign f = {rs[-1]} ? {ri[-1]} : y;\n")
    return _module("// Simulation form of the HyScale MAC's accumulating adder (see "
                   "moagcn.hw.arith.simform):\n// yosys and Icarus take the design's gates (t), "
                   "Verilator the sum computed by one function.",
                   acc_form_name(latency, lead), "clk, a, restart, init, t, y",
                   "  input clk, restart;\n  input [31:0] a, init, t;", _ADD_FUNCTION + "\n" + body)


def form_modules(text: str) -> str:
    """The Verilog of every adder, multiplier and accumulating adder simulation form that
    ``text`` instantiates (once each)."""
    return ("".join(add_form_verilog(int(lat), r == "1", e == "1")
                    for lat, r, e in dict.fromkeys(_NAME.findall(text)))
            + "".join(mul_form_verilog(int(lat), e == "1")
                      for lat, e in dict.fromkeys(_MUL_NAME.findall(text)))
            + "".join(acc_form_verilog(int(lat), int(lead))
                      for lat, lead in dict.fromkeys(_ACC_NAME.findall(text))))
