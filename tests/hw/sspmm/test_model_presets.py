"""The one cycle model against the RTL on held-out jobs of the presets users run: ``tiny``,
``default`` and ``multi`` as they are, each job's ``cycles_total`` and ``cycles_compute`` within
3 % (the jobs of ``moagcn bench sspmm-model --presets ...``, whose table docs/sspmm.md quotes:
hubs, isolated rows, self loops, duplicate indices, widths that are not a multiple of the lanes,
masks 0.25-1.0). The RTL runs on Verilator's lean harness through the driver; the larger jobs
(a tiled 6,000-node job on the default preset) and every ``multi`` job (its build is the
largest of the suite: the default suite covers slices with 2 and 4 slices of ``tiny``) are
slow (``make test-slow``)."""

import pytest

from moagcn.sim.benches.validate_sspmm import PRESET_CASES, preset_row

pytestmark = pytest.mark.xdist_group("verilator-sspmm")

CASES = [pytest.param(name, case, id=f"{name}-{case[1]}-F{case[2]}-mask{case[4]}",
                      marks=[pytest.mark.slow] if case[-1] or name == "multi" else [])
         for name, cases in PRESET_CASES.items() for case in cases]


@pytest.mark.parametrize("name,case", CASES)
def test_cycle_model_within_3_percent_of_the_rtl(name, case):
    row = preset_row(name, case)
    assert row["bit_exact"]
    assert abs(row["error_total"]) <= 0.03, row
    assert abs(row["error_compute"]) <= 0.03, row
