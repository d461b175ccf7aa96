"""Fields a configuration marks as host-only (``HOST_FIELDS``) do not change the gateware.

The Verilog cache keys a configuration by what its gateware reads
(``moagcn.config.gateware_view``), so two configurations that differ only in a host-only field
share one Verilog file and one simulator build. That is right only if the gateware really
ignores those fields: each field is changed here to another valid value and the Verilog is
converted again from scratch (not through the cache) and compared with the cached file of the
unchanged configuration.
"""

from __future__ import annotations

import dataclasses

import pytest

from moagcn.core.registry import design_names, get_design
from moagcn.sim.rtl.build import generate_verilog, verilog_text

#: another valid value for each host-only field
OTHER = {"clock_mhz": 123.0, "row_order": "given", "ddr_gbps": 3.5, "pcie_gbps": 7.25}

#: the smallest preset of each design with host-only fields
CASES = [(name, "tiny") for name in design_names()
         if getattr(get_design(name).config_type, "HOST_FIELDS", ())
         and "tiny" in get_design(name).preset_table]


def test_every_accelerator_with_host_fields_is_covered():
    assert {name for name, _ in CASES} >= {"sspmm", "hyscale", "sddmm"}


@pytest.mark.parametrize("name,preset", CASES)
def test_host_fields_leave_the_verilog_unchanged(name, preset):
    design = get_design(name)
    base = design.configure(preset)
    fields = design.config_type.HOST_FIELDS
    assert set(fields) <= set(OTHER), f"give another value for {set(fields) - set(OTHER)}"
    changed = dataclasses.replace(base, **{f: OTHER[f] for f in fields})
    assert all(getattr(changed, f) != getattr(base, f) for f in fields)
    gate = design.gateware_top(simulate=True)
    cached = generate_verilog(gate, base)
    text, _ = verilog_text(gate.build(changed), gate.toplevel)
    assert text == cached.path.read_text()
    # the cache gives both the same file, and each its own configuration
    again = generate_verilog(gate, changed)
    assert again.path == cached.path
    assert again.config == dataclasses.asdict(changed)
