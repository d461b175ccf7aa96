"""The driver gives the accelerator long rows first (``row_order``): the RTL's Z is still the
golden model's in the graph's order, the cycle model follows the RTL, and a hub at the end of
the graph costs fewer cycles first than in place."""

import dataclasses

import numpy as np
import pytest

from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.golden import sspmm
from moagcn.sim.sspmm.model import estimate, row_order

from .graphs import drive, power_law_job

DEFAULT = preset("default")
GIVEN = dataclasses.replace(DEFAULT, row_order="given")
pytestmark = pytest.mark.xdist_group("verilator-sspmm")


@pytest.fixture(scope="module")
def hub_last():
    """600 rows of 64 features, degrees capped at 16, and a 300-neighbour row as the last
    (its 8 or so jobs take 300 x 7 cycles each, however idle the other contexts are)."""
    indptr, indices, H, M = power_law_job(600, 64, seed=5, max_deg=16)
    deg = np.diff(indptr)
    rng = np.random.default_rng(6)
    deg[-1] = 300
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, 600, int(indptr[-1]))
    return indptr, indices, H, M


def test_rows_reordered_on_the_rtl_give_z_in_the_graphs_order(hub_last):
    indptr, indices, H, M = hub_last
    assert row_order(np.diff(indptr), DEFAULT)[0] == 599
    expected = sspmm(indptr, indices, H, M).view(np.uint32)
    runs = {}
    for cfg in (DEFAULT, GIVEN):
        res = drive(cfg, "verilator", indptr, indices, H, M)
        bad = np.argwhere(res.output.view(np.uint32) != expected)
        assert bad.size == 0, f"{cfg.row_order}: {len(bad)} elements differ, first {bad[:3]}"
        model = estimate(indptr, M, 64, cfg)
        assert res.counters.extra["rows_fetched"] == model.extra["rows_fetched"]
        assert res.counters.cycles_output == model.cycles_output
        err = model.cycles_compute / res.counters.cycles_compute - 1
        assert abs(err) < 0.03, (cfg.row_order, model.cycles_compute,
                                 res.counters.cycles_compute)
        runs[cfg.row_order] = res.counters.cycles_compute
    assert runs["long_first"] < 0.85 * runs["given"], runs
