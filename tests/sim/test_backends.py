"""The simulation layer: caching, waveforms, cycle limits, missing simulators."""


import pytest

from moagcn.errors import SimulationError, SimulatorNotFound
from moagcn.hw.arith import Fp32AddConfig
from moagcn.core.registry import gateware
from moagcn.sim import run
from moagcn.sim.rtl.build import build_simulator, generate_verilog
from moagcn.sim.rtl.io import CycleLimitExceeded

pytestmark = pytest.mark.xdist_group("verilator-arith")


async def wait_forever_for_ready(io):
    """A testbench that waits on a handshake that never comes (o__valid with no input)."""
    io.set("i__valid", 0)
    while not await io.get("o__valid"):
        await io.tick()


async def count_ticks(io, n):
    await io.tick(n)
    return io.cycle


def test_verilog_cache_is_keyed_by_config(tmp_path, monkeypatch):
    monkeypatch.setenv("MOAGCN_CACHE_DIR", str(tmp_path))
    design = gateware("fp32-add")
    first = generate_verilog(design, Fp32AddConfig(latency=2))
    written = first.path.stat().st_mtime_ns
    again = generate_verilog(design, Fp32AddConfig(latency=2))
    other = generate_verilog(design, Fp32AddConfig(latency=3))
    assert first.path == again.path
    assert again.path.stat().st_mtime_ns == written   # a hit reads the file, never rewrites it
    assert other.path != first.path
    assert first.config == {"latency": 2, "enable": False, "restart": False}
    assert [p.name for p in first.ports] == ["clk", "rst", "i__payload", "i__valid",
                                             "o__payload", "o__valid"]


def test_verilator_build_cache_hit_does_not_rebuild():
    design = gateware("fp32-add")
    verilog = generate_verilog(design, None)
    built = build_simulator("verilator", verilog)  # may build
    stamp = {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()}
    again = build_simulator("verilator", verilog)
    assert again == built and (again / ".built").exists()
    # nothing in the build folder was written again: the hit only checked the stamp
    assert {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()} == stamp


def test_simulator_build_key_holds_the_cocotb_library_path(monkeypatch):
    # a Verilator build runs cocotb's VPI library from the environment that built it: a cache
    # kept across environments must not hand one checkout's executable to another
    import moagcn.sim.rtl.build as build
    key = build.simulator_key("verilator", "module m; endmodule", [], False)
    assert build.simulator_key("verilator", "module m; endmodule", [], False) == key
    monkeypatch.setattr(build, "cocotb_libs_dir", lambda: "/elsewhere/cocotb/libs")
    assert build.simulator_key("verilator", "module m; endmodule", [], False) != key


@pytest.mark.parametrize("backend", ["pysim", "verilator"])
def test_cycle_limit_stops_a_stuck_testbench(backend):
    with pytest.raises((SimulationError, CycleLimitExceeded)) as info:
        run(gateware("fp32-add"), None, wait_forever_for_ready, backend, max_cycles=50)
    assert "max_cycles=50" in str(info.value)


@pytest.mark.parametrize("backend", ["pysim", "verilator"])
def test_waveform_written(tmp_path, backend):
    path = tmp_path / "wave.vcd"
    res = run(gateware("fp32-add"), None, count_ticks, backend, waves=path, n=20)
    assert res.value == 20 and res.cycles == 20
    text = path.read_text()
    assert "$enddefinitions" in text and "o__valid" in text


def test_missing_icarus_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SimulatorNotFound, match="apt-get install iverilog"):
        run(gateware("fp32-add"), None, count_ticks, "icarus", n=1)


def test_unknown_simulator():
    from moagcn.errors import UserError
    with pytest.raises(UserError, match="unknown simulator .modelsim.; choose one of verilator, icarus, pysim"):
        run(gateware("fp32-add"), None, count_ticks, "modelsim", n=1)


async def reset_mid_stream(io, payload):
    """Send three operations, reset while they are in flight, count what still comes out."""
    for _ in range(3):
        io.set("i__payload", payload)
        io.set("i__valid", 1)
        await io.tick()
    io.set("i__valid", 0)
    await io.reset(1)
    seen = 0
    for _ in range(12):
        await io.tick()
        seen += await io.get("o__valid")
    # and the unit still works afterwards
    io.set("i__valid", 1)
    await io.tick()
    io.set("i__valid", 0)
    for _ in range(12):
        if await io.get("o__valid"):
            return seen, await io.get("o__payload")
        await io.tick()
    return seen, None


@pytest.mark.parametrize("backend", ["pysim", "verilator"])
def test_reset_mid_stream_drops_in_flight_results(backend):
    one = 0x3F800000
    res = run(gateware("fp32-add"), None, reset_mid_stream, backend, payload=one | one << 32)
    seen, after = res.value
    assert seen == 0
    assert after == 0x40000000  # 1 + 1 = 2 once the pipeline runs again
