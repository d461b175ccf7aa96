"""Verilator lint of generated Verilog.

``verilator --lint-only -Wall`` runs with these waivers, each a property of Amaranth's Verilog
backend rather than of a design:

- ``UNUSEDSIGNAL``: Amaranth names every intermediate net, including bits a slice drops;
- ``WIDTHEXPAND`` / ``WIDTHTRUNC``: its arithmetic is emitted with implicit Verilog widening and
  truncation (the widths are exact in the Amaranth source, which checks them);
- ``PROCASSINIT``: registers get their reset value as a declaration initialiser as well as in
  the ``always`` block;
- ``DECLFILENAME``: the whole hierarchy goes into one file, with sub-modules named
  ``top.sub``, which never matches the file name;
- ``CASEINCOMPLETE``: an assignment to an element of an ``Array`` chosen at run time becomes a
  ``case`` on the index with an arm per element, empty where that element keeps its value, and
  none for index values past the array's end (the register holds).

Any other warning is reported.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from moagcn.sim.rtl.build import verilator_env

WAIVERS = ("UNUSEDSIGNAL", "WIDTHEXPAND", "WIDTHTRUNC", "PROCASSINIT", "DECLFILENAME",
           "CASEINCOMPLETE")


def lint_verilog(path: Path, toplevel: str) -> list[str]:
    """Warnings of ``verilator --lint-only -Wall`` beyond :data:`WAIVERS` (empty: clean)."""
    cmd = ["verilator", "--lint-only", "-Wall", *[f"-Wno-{w}" for w in WAIVERS],
           "--top-module", toplevel, str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env())
    lines = (proc.stdout + proc.stderr).splitlines()
    warnings = [line for line in lines
                if re.match(r"%(Warning|Error)", line) and not line.startswith("%Error: Exiting")]
    if proc.returncode != 0 and not warnings:
        warnings = lines[-10:] or [f"verilator exited with status {proc.returncode}"]
    return warnings
