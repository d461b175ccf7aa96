"""The S-SpMM driver on jobs larger than the buffers: tiles by rows and feature columns, Z bit
for bit the golden model of the whole job, counters summed over the tiles."""

import numpy as np
import pytest

from moagcn.core.tiling import plan_tiles
from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.golden import sspmm
from moagcn.sim.sspmm.model import estimate
from moagcn.sim.sspmm.spec import SPEC

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
    tiles = plan_tiles(indptr, indices, indptr.size - 1, indptr.size - 1, H.shape[1], SPEC.limits(None, TINY))
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
    tiles = plan_tiles(indptr, indices, indptr.size - 1, indptr.size - 1, H.shape[1], SPEC.limits(None, TINY))
    res = drive(TINY, "model", indptr, indices, H, M)
    assert res.tiles == len(tiles)
    assert np.array_equal(res.output.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
    per_tile = [estimate(t.indptr, t.mask(M), t.feat_stop - t.feat_start, TINY, n_cols=t.cols.size)
                for t in tiles]
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
    est = estimate(indptr, M, 16, TINY)
    for key in ("cycles_load", "cycles_compute", "cycles_output", "work_adds"):
        assert getattr(res.counters, key) == getattr(est, key), key
    assert res.counters.extra == est.extra


def _pieced_reference(indptr, indices, H, M, piece: int, long_rows) -> np.ndarray:
    """Z by plain loops: each row's neighbours in ascending order summed from +0 in binary32;
    the rows in ``long_rows`` in pieces of ``piece`` neighbours, each from +0, the pieces'
    sums added in order; masked elements +0."""
    n, F = indptr.size - 1, H.shape[1]
    Z = np.zeros((n, F), np.float32)
    for v in range(n):
        cols = sorted(indices[indptr[v]:indptr[v + 1]].tolist())
        runs = [cols[i:i + piece] for i in range(0, len(cols), piece)] if v in long_rows \
            else [cols]
        for f in range(F):
            total = None
            for run in runs:
                acc = np.float32(0.0)
                for u in run:
                    acc = np.float32(acc + H[u, f])
                total = acc if total is None else np.float32(total + acc)
            Z[v, f] = total if M[v, f] and total is not None else np.float32(0.0)
    return Z


def test_a_row_longer_than_any_job_runs_in_pieces_added_on_the_host():
    """Row 0 names 299 distinct nodes (max_nodes 256), row 1 has 4,200 entries over 40 nodes
    (max_edges 4,096): each runs as pieces of 256 neighbours, every piece a row of its own,
    the pieces' sums added in order on the host (the golden model's ``buffer`` rule); the
    other rows, row 2's 300 entries over 200 nodes included, run whole."""
    rng = np.random.default_rng(5)
    n, F = 300, 6
    deg = rng.integers(0, 5, n)
    deg[0], deg[1], deg[2] = n - 1, 4200, 300
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1]))
    indices[indptr[0]:indptr[1]] = rng.permutation(np.arange(1, n))
    indices[indptr[1]:indptr[2]] = rng.integers(0, 40, 4200)
    indices[indptr[2]:indptr[3]] = rng.integers(0, 200, 300)
    H = rng.standard_normal((n, F)).astype(np.float32)
    H[rng.random(H.shape) < 0.05] = -0.0
    M = rng.random((n, F)) < 0.7
    want = _pieced_reference(indptr, indices, H, M, 256, {0, 1})
    whole = _pieced_reference(indptr, indices, H, M, 256, set())
    assert not np.array_equal(want.view(np.uint32), whole.view(np.uint32))   # pieces matter
    res = drive(TINY, "verilator", indptr, indices, H, M)
    assert np.array_equal(res.output.view(np.uint32), want.view(np.uint32))
    golden = sspmm(indptr, indices, H, M, buffer=(TINY.max_edges, TINY.max_nodes))
    assert np.array_equal(golden.view(np.uint32), want.view(np.uint32))
    on_model = drive(TINY, "model", indptr, indices, H, M).output   # SSpmmSpec.golden's pieces
    assert np.array_equal(on_model.view(np.uint32), want.view(np.uint32))
    model = SPEC.replayed_cycles(SPEC.job(indptr, indices, H, M), TINY)
    c = res.counters
    assert model.tiles == res.tiles and model.work_adds == c.work_adds
    assert abs(model.cycles_compute / c.cycles_compute - 1) <= 0.05


def test_pysim_tiled_job_writes_one_waveform_per_tile(tmp_path):
    cfg = preset("tiny", max_nodes=16, max_edges=64, max_feature_width=4)
    job = power_law_job(30, 6, seed=3, max_deg=10)
    res = drive(cfg, "pysim", *job, waves=tmp_path / "w.vcd")
    assert res.tiles == len(plan_tiles(job[0], job[1], 30, 30, 6, SPEC.limits(None, cfg))) >= 4
    assert np.array_equal(res.output.view(np.uint32), sspmm(*job).view(np.uint32))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"w.tile{k}.vcd" for k in range(res.tiles)]
    assert all((tmp_path / name).stat().st_size > 0 for name in names)
