"""U250 resource counts (yosys synth_xilinx), the unit-times-count assembly, and the 28 nm area
model of the S-SpMM accelerator."""

import json
import math

import pytest

from moagcn.cli.main import main
from moagcn.core.registry import gateware
from moagcn.errors import UserError
from moagcn.hw.arith import Fp32AddConfig
from moagcn.synth import synthesize
from moagcn.synth.assemble import memories, ram_stubs
from moagcn.synth.xilinx import (U250, check_fit, classify, memory_blocks, run_yosys,
                                 yosys_script)

pytestmark = pytest.mark.xdist_group("synth")


def test_u250_report_of_the_adder_from_a_real_run(tmp_path):
    """The binary32 adder through yosys synth_xilinx: the report reads the netlist's cells."""
    report = synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "xcup-u250", tmp_path)
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert report["target"] == "xcup-u250" and report["pre_route"] and "fmax_mhz" not in report
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    luts = sum(int(n) for c, n in cells.items() if c in ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5",
                                                           "LUT6", "INV"))
    assert report["luts"] == luts + report["luts_as_memory"]
    assert report["ffs"] == sum(int(n) for c, n in cells.items() if c.startswith("FD"))
    assert 300 < report["luts"] < 2000 and report["ffs"] >= 33     # the result is registered
    assert report["dsps"] == 0 and report["bram36"] == 0 and report["urams"] == 0
    assert not any(c.endswith("BUF") for c in cells)                # out of context: no pads
    assert report["utilization"]["luts"] == round(100 * report["luts"] / 1_728_000, 2)


def test_cell_classes():
    cells = {"LUT2": 10, "LUT6": 5, "INV": 2, "RAM32M16": 3, "SRL16E": 4, "FDRE": 7, "FDSE": 1,
             "DSP48E2": 6, "RAMB36E2": 2, "RAMB18E2": 3, "URAM288": 1, "CARRY8": 9,
             "MUXF7": 11, "$scopeinfo": 4}
    r = classify(cells)
    assert r["luts"] == 10 + 5 + 2 + 3 * 8 + 4 and r["luts_as_memory"] == 28
    assert (r["ffs"], r["dsps"], r["bram36"], r["urams"]) == (8, 6, 3.5, 1)


def test_memories_mapped_by_capacity():
    """Hand-worked: the RAMB18 / RAMB36 mode with the fewest RAMB36 equivalents, URAM when it is
    the smaller share of the U250, a copy per read port, distributed RAM up to 64 words."""
    # 512 x 32: one RAMB18 (512 x 36); two read ports, two copies
    assert memory_blocks(512, 32, 2) == {"kind": "bram", "mode": "512x36", "copies": 2,
                                         "luts": 0, "luts_as_memory": 0, "bram36": 1.0,
                                         "urams": 0}
    # 1025 x 32 (a u250 MAC's weights): RAMB18 512 x 36 needs 3 (1.5), RAMB36 1K x 36 needs 2
    assert memory_blocks(1025, 32)["bram36"] == 1.5
    # 2048 x 64: 4 RAMB36 (1/672 of the device) against one URAM (1/1280): URAM
    assert memory_blocks(2048, 64)["kind"] == "uram" and memory_blocks(2048, 64)["urams"] == 1
    # 1024 x 32: one RAMB36 (1/2688) beats one URAM (1/1280)
    assert memory_blocks(1024, 32)["kind"] == "bram"
    # 32 x 64: RAM32M16 holds 14 bits -> 5 of them, 8 LUTs each; 64 deep: RAM64M8, 7 bits
    assert memory_blocks(32, 64)["luts"] == 40 and memory_blocks(64, 64)["luts"] == 80
    # 512 x 2048 (a u250 S-PE's ring: 32 rows of 16 beats of 64 words): 57 RAMB18 (512 x 36)
    # = 28.5 RAMB36, 1.1 % of the device, against 29 URAM, 2.3 %
    big = memory_blocks(512, 2048)
    assert big["kind"] == "bram" and big["bram36"] == math.ceil(2048 / 36) * 0.5 == 28.5


def test_ram_instances_are_read_from_the_verilog_and_boxed_modules_skipped():
    text = """module top(clk);
  moagcn_ram #(
    .AW(32'd9),
    .DEPTH(32'd512),
    .GRAN(32'd32),
    .NR(32'd2),
    .NW(32'd1),
    .WIDTH(32'd32)
  ) ram (
    .clk(clk)
  );
endmodule
module \\top.pe0.bank (clk);
  moagcn_ram #(
    .DEPTH(32'd64),
    .WIDTH(32'd8)
  ) ram (
    .clk(clk)
  );
endmodule
module moagcn_ram #(
  parameter WIDTH = 32
) (
  input clk
);
  reg [WIDTH-1:0] mem [0:3];
endmodule
"""
    assert memories(text) == [
        {"module": "top", "instance": "ram", "width": 32, "depth": 512, "read_ports": 2},
        {"module": "top.pe0.bank", "instance": "ram", "width": 8, "depth": 64, "read_ports": 1}]
    assert [m["module"] for m in memories(text, ("*.pe*",))] == ["top"]
    stubbed = ram_stubs(text)
    assert "(* blackbox *)\nmodule moagcn_ram #(" in stubbed and "reg [WIDTH-1:0]" not in stubbed


def test_a_design_beyond_the_u250_names_the_resource_and_the_overflow(tmp_path):
    report = {"luts": 2_000_000, "ffs": 10, "dsps": 12_288, "bram36": 3000.5, "urams": 0}
    with pytest.raises(UserError) as err:
        check_fit(report, "xcup-u250", tmp_path / "report.json")
    message = str(err.value)
    assert "LUTs 2,000,000 of 1,728,000 (116 %, 272,000 over)" in message
    assert "BRAM (RAMB36) 3,000.5 of 2,688 (112 %, 312.5 over)" in message
    assert "DSPs" not in message and "\n" not in message
    check_fit(dict(report, luts=1, bram36=1), "xcup-u250", tmp_path / "report.json")
    assert U250["urams"] == 1280 and U250["bram36"] == 2688


def test_a_synthesis_past_its_timeout_says_so_and_keeps_the_log(tmp_path):
    (tmp_path / "x.v").write_text("module x(input a, output b); assign b = a; endmodule\n")
    with pytest.raises(UserError, match=r"ran past --timeout 0.01 s .*/yosys\.log"):
        run_yosys(tmp_path, yosys_script("x.v", "x"), timeout=0.01)
    assert (tmp_path / "yosys.out").exists()


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["synth", "fp32-add", "--target", "xc7a35t", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown target 'xc7a35t'" in err and "xcup-u250" in err
    assert main(["synth", "fp32-add", "--target", "xcup-u250", "--timeout", "0.01",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "ran past --timeout" in err and "Traceback" not in err
    assert (tmp_path / "fp32-add.v").exists()
    assert main(["synth", "fp32-add", "--target", "ecp5-25k", "--units",
                 "--out", str(tmp_path)]) == 2
    assert "--units" in capsys.readouterr().err
    # model-only configurations: not buildable for ECP5; on the U250 only HyScale's assembles
    assert main(["synth", "hyscale", "--preset", "u250", "--target", "ecp5-85k",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "models only" in err and "xcup-u250" in err
    assert main(["synth", "sspmm", "--preset", "paper", "--target", "xcup-u250",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sspmm area" in err


@pytest.mark.slow
def test_units_times_counts_against_the_whole_design(tmp_path):
    """HyScale tiny (n = 2, m = 4) synthesised whole and assembled from its units: the logic
    within 5 %, the DSPs equal, the memories within 5 RAMB36 (yosys maps some small memories
    to distributed RAM or other modes than the capacity rule's). 10-18 minutes on this shared
    two-core machine."""
    # lazy: keeps the gateware (amaranth) out of the collection
    from moagcn.core.registry import get_design
    from moagcn.synth.assemble import assemble
    from moagcn.synth.flow import get_target
    design = gateware("hyscale")
    config = get_design("hyscale").configure("tiny", {})
    target = get_target("xcup-u250")
    whole = synthesize(design, config, "xcup-u250", tmp_path / "whole")
    units = assemble(design, config, target, tmp_path / "units")
    assert units["dsps"] == whole["dsps"] > 0
    for key in ("luts", "ffs"):
        assert abs(units[key] - whole[key]) <= 0.05 * whole[key], key
    memory = lambda r: r["bram36"] + r["urams"] * 8                      # noqa: E731
    assert abs(memory(units) - memory(whole)) <= 5
