"""The S-SpMM driver on jobs larger than the buffers: tiles by rows and feature columns, Z bit
for bit the golden model of the whole job, counters summed over the tiles."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.core.tiling import plan_tiles
from moagcn.hw.sspmm import preset
from moagcn.sim.golden.sspmm import sspmm
from moagcn.sim.sspmm_model import estimate
from moagcn.sim.specs.sspmm import SPEC

from .graphs import drive, power_law_job

TINY = preset("tiny")          # 256 nodes, 4096 edges, 16 features per job
pytestmark = pytest.mark.xdist_group("verilator-sspmm")
SUMMED = ("cycles_total", "cycles_load", "cycles_compute", "cycles_output", "stall_no_job",
          "stall_output")


@pytest.fixture(scope="module")
def big_job():
    # 300 rows and 20 features: beyond max_nodes and max_feature_width; one hub row of 300
    # entries (more than max_nodes, fewer distinct columns) that no tile may split
    return power_law_job(300, 20, seed=11, hub=300)


def test_verilator_tiled_job_equals_golden_and_sums_tile_counters(big_job):
    indptr, indices, H, M = big_job
    deg = np.diff(indptr)
    assert indptr.size - 1 > TINY.max_nodes and H.shape[1] > TINY.max_feature_width
    assert deg.max() > TINY.max_nodes
    tiles = plan_tiles(indptr, indices, indptr.size - 1, indptr.size - 1, H.shape[1], SPEC.limits(TINY))
    assert {(t.feat_start, t.feat_stop) for t in tiles} == {(0, 16), (16, 20)}
    assert len({(t.rows_start, t.rows_stop) for t in tiles}) >= 2
    for t in tiles:   # whole rows only: every row keeps all of its neighbours
        assert np.array_equal(np.diff(t.indptr)[:t.rows_stop - t.rows_start],
                              deg[t.rows_start:t.rows_stop])

    res = drive(TINY, "verilator", indptr, indices, H, M, stall_every=3)
    assert res.tiles == len(tiles) >= 4
    expected = sspmm(indptr, indices, H, M)
    bad = np.argwhere(res.output.view(np.uint32) != expected.view(np.uint32))
    assert bad.size == 0, f"{len(bad)} elements differ, first at {bad[:5].tolist()}"

    # the counters are the sums of the tiles run one by one (each a job that fits)
    sums = dict.fromkeys(SUMMED, 0)
    for t in tiles:
        one = drive(TINY, "verilator", t.indptr, t.indices, t.features(H), t.mask(M),
                    stall_every=3)
        assert one.tiles == 1
        for key in SUMMED:
            sums[key] += one.raw[key]
    assert {key: res.raw[key] for key in SUMMED} == sums
    c = res.raw
    assert c["stall_output"] > 0 and c["err_index"] == 0 and c["err_indptr"] == 0
    assert c["cycles_total"] == c["cycles_compute"] + c["cycles_output"]


def test_model_device_tiles_the_same_way(big_job):
    indptr, indices, H, M = big_job
    tiles = plan_tiles(indptr, indices, indptr.size - 1, indptr.size - 1, H.shape[1], SPEC.limits(TINY))
    res = drive(TINY, "model", indptr, indices, H, M)
    assert res.tiles == len(tiles)
    assert np.array_equal(res.output.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
    per_tile = [estimate(t.indptr, t.mask(M), t.feat_stop - t.feat_start, TINY, n_cols=t.cols.size,
                         replay=False) for t in tiles]      # the device runs the closed form
    c = res.counters
    assert c.cycles_compute == sum(e.cycles_compute for e in per_tile)
    # two load banks: each tile's loads run beside the tile before (its compute and output)
    hidden = [0] + [min(e.cycles_load, p.cycles_compute + p.cycles_output)
                    for p, e in zip(per_tile, per_tile[1:])]
    assert sum(hidden) > 0
    assert c.extra["cycles_load_hidden"] == sum(hidden)
    assert c.cycles_load == sum(e.cycles_load for e in per_tile) - sum(hidden)
    work = sum(int(M[v].sum()) * int(indptr[v + 1] - indptr[v]) for v in range(M.shape[0]))
    assert c.work_adds == work
    assert c.lanes == TINY.lanes
    assert c.utilization == pytest.approx(work / (TINY.lanes * c.cycles_compute))


def test_a_job_that_fits_is_one_tile_as_before():
    indptr, indices, H, M = power_law_job(100, 16, seed=4, hub=200)
    res = drive(TINY, "model", indptr, indices, H, M)
    assert res.tiles == 1
    est = estimate(indptr, M, 16, TINY, replay=False)      # the device runs the closed form
    for key in ("cycles_load", "cycles_compute", "cycles_output", "work_adds"):
        assert getattr(res.counters, key) == getattr(est, key), key
    assert res.counters.extra == est.extra


def test_a_row_with_too_many_distinct_neighbours_is_a_clear_error():
    n = 300
    indptr = np.concatenate([[0], np.full(n, n - 1)])          # row 0: every other node
    indices = np.arange(1, n)
    H = np.ones((n, 4), np.float32)
    with pytest.raises(UserError, match=r"row 0 has 299 neighbours.*max_nodes=256"):
        drive(TINY, "verilator", indptr, indices, H)


def test_pysim_tiled_job_writes_one_waveform_per_tile(tmp_path):
    cfg = preset("tiny", max_nodes=16, max_edges=64, max_feature_width=4)
    job = power_law_job(30, 6, seed=3, max_deg=10)
    res = drive(cfg, "pysim", *job, waves=tmp_path / "w.vcd")
    assert res.tiles == len(plan_tiles(job[0], job[1], 30, 30, 6, SPEC.limits(cfg))) >= 4
    assert np.array_equal(res.output.view(np.uint32), sspmm(*job).view(np.uint32))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"w.tile{k}.vcd" for k in range(res.tiles)]
    assert all((tmp_path / name).stat().st_size > 0 for name in names)
