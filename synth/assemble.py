"""U250 resources of a configuration too large to synthesise whole, from its units.

HyScale-GNN's (n, m) = (8, 2048) design (the ``u250`` preset) has 2,048 MACs: its Verilog alone
would take longer to write than a user waits, and yosys would need hours. The design is a few
kinds of unit repeated, so the report is assembled:

    resources = sum over units (count x unit's logic) + the memories, each mapped by capacity

- **units** (:func:`hyscale_units`): each synthesised alone with ``synth_xilinx`` at the
  configuration's own fields: the PE pair (an S-PE and a G-PE with their edge queue) n times,
  the MAC m times, the result drain and the token generator once (both grow with m), and the
  *shell* once: the layer with those units left as empty boxes (the load buffers' loaders, the
  dispatcher, the feature duplicator and ring, the counters, the pipelining vector);
- **memories**: every ``moagcn_ram`` instance of the units (the units' RAMs are empty boxes in
  their synthesis) goes through :func:`moagcn.synth.xilinx.memory_blocks`: one copy per read
  port, distributed RAM up to 64 words, else the cheaper of block RAM (best RAMB18 / RAMB36
  mode) and URAM288 as a share of the device.

The RTL is built only for m in (4, 16, 64); a unit of a model-only configuration (``simulate``
false) is elaborated with that check lifted (every field else as configured: the units take
m only as a size). The shell does not grow with m (the weight bus and the MAC chain are
wires), so it is synthesised at the smallest buildable m that carries the memory port's
words. :func:`assemble` on a configuration small enough to synthesise whole is compared with
the whole synthesis in ``tests/synth/test_xilinx.py`` and docs/hyscale.md.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable

from moagcn.errors import UserError
from moagcn.synth.xilinx import (U250, check_fit, classify, memory_blocks, run_yosys,
                                 utilization, yosys_script)

#: report fields summed over units and memories
FIELDS = ("luts", "luts_as_memory", "ffs", "dsps", "bram36", "ramb36", "ramb18", "urams",
          "carry")

_RAM_MODULE = re.compile(r"^module (moagcn_ram\w*) #\(.*?^endmodule\n", re.S | re.M)
_MODULE = re.compile(r"^module \\?([^\s(]+)", re.M)
_RAM_INSTANCE = re.compile(r"moagcn_ram\w* #\((?P<params>[^;]*?)\)\s*\\?(?P<inst>\S+)\s*\(")
_PARAM = re.compile(r"\.(\w+)\(\d+'d(\d+)\)")


@dataclass
class Unit:
    """A unit of a design: what to synthesise, how many the design holds, and which of its
    modules (name patterns) are other units, left as empty boxes. ``scale``: a unit too wide to
    build at the configuration (over Amaranth's 65,536 port bits) is synthesised narrower and
    its resources multiplied by this factor (used where they grow linearly)."""

    name: str
    count: int
    build: Callable[[], Any]
    boxes: tuple[str, ...] = ()
    scale: float = 1.0


def ram_stubs(text: str) -> str:
    """``text`` with every moagcn RAM module an empty box with the same ports."""
    # the module's own header (hw/common/ram.py writes it) over an empty body
    return _RAM_MODULE.sub(lambda m: "(* blackbox *)\n" + m.group(0)[:m.group(0).index(");") + 2]
                           + "\nendmodule\n", text)


def memories(text: str, boxes: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The RAM instances of a generated Verilog text (``module``, ``instance``, ``width``,
    ``depth``, ``read_ports``), leaving out those inside modules matching ``boxes``."""
    found = []
    starts = [(m.start(), m.group(1)) for m in _MODULE.finditer(text)] + [(len(text), "")]
    for (begin, name), (end, _) in zip(starts, starts[1:]):
        if name.startswith("moagcn_ram") or any(fnmatch(name, pattern) for pattern in boxes):
            continue
        for inst in _RAM_INSTANCE.finditer(text, begin, end):
            params = {k: int(v) for k, v in _PARAM.findall(inst.group("params"))}
            found.append({"module": name, "instance": inst.group("inst"),
                          "width": params["WIDTH"], "depth": params["DEPTH"],
                          "read_ports": params.get("NR", 1)})
    return found


def buildable(config):
    """``config`` as the RTL builds it: a model-only configuration (``simulate`` false) with
    the build check lifted, every other field unchanged."""
    if config.simulate:
        return config
    lifted = copy.copy(config)
    object.__setattr__(lifted, "simulate", True)
    return lifted


def hyscale_units(config) -> list[Unit]:
    """The units of a HyScale layer at ``config`` (see the module docstring)."""
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.hw.hyscale.aggregate import PEPair
    # lazy: the gateware, as above
    from moagcn.hw.hyscale.layer import HyScaleLayer
    # lazy: the gateware, as above
    from moagcn.hw.hyscale.mac import MacCell
    # lazy: the gateware, as above
    from moagcn.hw.hyscale.update import ResultDrain, TokenGenerator
    unit_cfg = buildable(config)
    if config.simulate:
        shell_cfg = config
    else:
        macs = next(m for m in (4, 16, 64) if m >= config.mem_words_per_cycle)
        shell_cfg = dataclasses.replace(config, macs=macs, simulate=True)
    # the drain reads every MAC's result port (36 bits each): beyond 1,024 MACs its ports pass
    # Amaranth's limit, so it is built for 1,024 and scaled (a mux of m words: linear in m)
    drain_macs = min(config.macs, DRAIN_MACS)
    drain_cfg = buildable(dataclasses.replace(config, macs=drain_macs, simulate=False))
    return [
        Unit("pe_pair", config.spes, lambda: PEPair(unit_cfg)),
        Unit("mac", config.macs, lambda: MacCell(unit_cfg)),
        Unit("result_drain", 1, lambda: ResultDrain(drain_cfg),
             scale=config.macs / drain_macs),
        Unit("token_generator", 1, lambda: TokenGenerator(unit_cfg)),
        Unit("shell", 1, lambda: HyScaleLayer(shell_cfg),
             ("*.agg.pe*", "*.upd.mac*", "*.upd.drain*", "*.upd.tokens*")),
    ]


#: the most MACs a result drain is built for (see :func:`hyscale_units`)
DRAIN_MACS = 1024

#: designs whose report can be assembled, by name
UNITS = {"hyscale-layer": hyscale_units}


def synthesize_unit(unit: Unit, out_dir: Path, timeout: float | None) -> dict[str, Any]:
    """One unit alone: its logic (yosys, its RAMs and boxed units empty) and its memories."""
    # lazy: keeps the gateware (amaranth) out of this module's import
    from moagcn.sim.rtl.build import verilog_text
    out_dir.mkdir(parents=True, exist_ok=True)
    top = f"unit_{unit.name}"
    text, _ = verilog_text(unit.build(), top, synthesis=True)
    vfile, script = out_dir / f"{top}.v", yosys_script(f"{top}.v", top, list(unit.boxes))
    t0 = time.perf_counter()
    done = out_dir / "cells.json"
    if (done.exists() and vfile.exists() and vfile.read_text() == ram_stubs(text)
            and (out_dir / "synth.ys").read_text() == script):
        cells = json.loads(done.read_text())      # this unit, synthesised before: reused
    else:
        vfile.write_text(ram_stubs(text))
        cells = run_yosys(out_dir, script, timeout)
        done.write_text(json.dumps(cells))
    logic = classify(cells)
    mems = []
    for mem in memories(text, unit.boxes):
        mems.append({**mem, **memory_blocks(mem["depth"], mem["width"], mem["read_ports"])})
    return {"name": unit.name, "count": unit.count, "scale": unit.scale, "logic": logic,
            "memories": mems,
            "yosys_cells": cells, "time_s": round(time.perf_counter() - t0, 2)}


def assemble(design, config, target, out_dir: Path, timeout: float | None = None,
             check: bool = True) -> dict[str, Any]:
    """The U250 report of ``design`` at ``config``, from its units (see the module
    docstring); written to ``report.json`` in ``out_dir`` (each unit's run in
    ``units/<name>/``). With ``check``, a design beyond the U250 is a :class:`UserError`
    after the report is written."""
    if design.name not in UNITS:
        raise UserError(f"{design.name} has no unit list to assemble its report from; "
                        f"{', '.join(UNITS)} has one (synthesise {design.name} whole instead)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    units = [synthesize_unit(unit, out_dir / "units" / unit.name, timeout)
             for unit in UNITS[design.name](config)]
    totals: dict[str, Any] = {field: 0 for field in FIELDS}
    for unit in units:
        n = unit["count"] * unit["scale"]
        for field in FIELDS:
            totals[field] += n * unit["logic"][field]
        for mem in unit["memories"]:
            for field in ("luts", "luts_as_memory", "bram36", "urams"):
                totals[field] += n * mem[field]
    for field in FIELDS:
        # whole cells (a scaled unit can leave fractions); RAMB36 equivalents keep halves
        totals[field] = (math.ceil(2 * totals[field]) / 2 if field == "bram36"
                         else math.ceil(totals[field]))
    report: dict[str, Any] = {"design": design.name, "target": target.name,
                              "config": dataclasses.asdict(config), "method": "units",
                              "pre_route": True, **totals}
    report["utilization"] = utilization(report)
    report["totals"] = dict(U250)
    report["units"] = units
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    if check:
        check_fit(report, target.name, out_dir / "report.json")
    return report


def breakdown(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per unit kind: count, and the logic and memory resources of all of them together."""
    rows = []
    for unit in report["units"]:
        n = unit["count"] * unit.get("scale", 1.0)
        row = {"unit": unit["name"], "count": unit["count"], "scale": unit.get("scale", 1.0),
               **{f: round(n * unit["logic"][f]) for f in ("luts", "ffs", "dsps")}}
        row["luts"] += round(n * sum(mem["luts"] for mem in unit["memories"]))
        row["bram36"] = n * sum(mem["bram36"] for mem in unit["memories"])
        row["urams"] = math.ceil(n * sum(mem["urams"] for mem in unit["memories"]))
        rows.append(row)
    return rows
