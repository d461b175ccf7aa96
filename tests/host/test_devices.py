"""Sparse devices: results against the golden model and float64, counters, tiling, registry."""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.hw.sspmm.config import preset
from moagcn.host.datasets import rmat, sbm
from moagcn.host.devices import (CpuDevice, ModelDevice, TiledDevice, backend_available,
                                 backend_names, dense_device, make_device, plan_tiles,
                                 register_backend)
from moagcn.host.graph import CSRGraph
from moagcn.sim.golden.sspmm import float64_bound, sspmm, work_adds
from moagcn.sim.sspmm_model import estimate


@pytest.fixture(scope="module")
def job():
    d = sbm(n_nodes=300, seed=4)
    g = d.graph.with_self_loops()
    rng = np.random.default_rng(0)
    H = rng.standard_normal((300, 40)).astype(np.float32)
    M = rng.random((300, 40)) < 0.5
    return g, H, M


def test_model_is_golden_and_counts_cycles(job):
    g, H, M = job
    dev = make_device("model")
    Z = dev.sspmm(g, H, M)
    np.testing.assert_array_equal(Z, sspmm(g.indptr, g.indices, H, M))
    est = estimate(g.indptr, M, 40, preset("default"))
    c = dev.counters
    assert c.calls == 1 and c.tiles == 1
    assert (c.cycles_load, c.cycles_compute, c.cycles_output) == \
        (est.cycles_load, est.cycles_compute, est.cycles_output)
    assert c.work_adds == work_adds(g.indptr, M) == est.work_adds
    assert 0.5 < c.utilization <= 1.0
    dev.sspmm(g, H, M)
    assert dev.counters.calls == 2 and dev.counters.cycles_total == 2 * est.cycles_total


def test_cpu_within_fp32_bound_and_masked_zero(job):
    g, H, M = job
    dev = CpuDevice()
    Z = dev.sspmm(g, torch.from_numpy(H), torch.from_numpy(M))
    assert isinstance(Z, torch.Tensor) and Z.dtype == torch.float32
    exact = g.to_scipy(np.float64) @ H.astype(np.float64) * M
    bound = float64_bound(g.indptr, g.indices, H, M)
    assert (np.abs(Z.numpy() - exact) <= 2 * bound + 1e-30).all()
    assert (Z.numpy()[~M] == 0).all()
    assert dev.counters.cycles_total == 0 and dev.counters.work_adds == work_adds(g.indptr, M)


def test_tiling_covers_the_job_and_is_bit_exact():
    d = rmat(scale=9, seed=2)
    g = d.graph.with_self_loops()
    cfg = preset("tiny")  # 256 nodes, 4096 edges, 16 features per job
    rng = np.random.default_rng(1)
    H = rng.standard_normal((g.n_nodes, 37)).astype(np.float32)
    M = rng.random((g.n_nodes, 37)) < 0.6
    tiles = plan_tiles(g, 37, cfg)
    assert len({(t.rows_start, t.rows_stop) for t in tiles}) > 2  # rows were split
    assert {(t.feat_start, t.feat_stop) for t in tiles} == {(0, 16), (16, 32), (32, 37)}
    for t in tiles:
        assert t.size <= cfg.max_nodes and t.indices.size <= cfg.max_edges
    covered = np.zeros(g.n_rows, dtype=int)
    for t in tiles:
        if t.feat_start == 0:
            covered[t.rows_start:t.rows_stop] += 1
    assert (covered == 1).all()

    class TiledGolden(TiledDevice):
        name = "tiled-golden"

        def run_job(self, indptr, indices, H, M):
            from moagcn.host.devices import DeviceCounters
            return sspmm(indptr, indices, H, M), DeviceCounters()

    Z_tiled = TiledGolden(cfg).sspmm(g, H, M)
    np.testing.assert_array_equal(Z_tiled, sspmm(g.indptr, g.indices, H, M))
    dev = ModelDevice(cfg)
    np.testing.assert_array_equal(dev.sspmm(g, H, M), Z_tiled)
    assert dev.counters.tiles == len(tiles)


def test_tiling_rejects_a_row_too_long():
    n = 300
    g = CSRGraph.from_edges(np.zeros(n - 1, int), np.arange(1, n), n)
    with pytest.raises(UserError, match="row 0 has 299 neighbours.*max_nodes=256"):
        plan_tiles(g, 4, preset("tiny"))


def test_rectangular_block(job):
    g, H, M = job
    rows = np.arange(10, 60)
    cols = np.unique(g.indices[g.indptr[10]:g.indptr[60]])
    blk = g.block(rows, cols)
    Z = make_device("model").sspmm(blk, H[cols], M[rows])
    np.testing.assert_array_equal(Z, sspmm(g.indptr, g.indices, H, M)[rows])


def test_shape_errors(job):
    g, H, M = job
    dev = make_device("model")
    with pytest.raises(UserError, match="H needs 300 rows"):
        dev.sspmm(g, H[:10], None)
    with pytest.raises(UserError, match="mask has shape \\(300, 3\\)"):
        dev.sspmm(g, H, M[:, :3])


def test_registry():
    assert {"cpu", "model"} <= set(backend_names())
    with pytest.raises(UserError, match="unknown sparse backend .nope.; available: cpu, model"):
        make_device("nope")
    register_backend("test-lazy", "moagcn.host.devices:CpuDevice", replace=True)
    assert isinstance(make_device("test-lazy"), CpuDevice)
    register_backend("test-broken", "moagcn.no_such_module:X", replace=True)
    assert not backend_available("test-broken")
    with pytest.raises(UserError, match="cannot be loaded"):
        make_device("test-broken")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("cpu", CpuDevice)


def test_dense_device():
    assert dense_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert dense_device("cpu").type == "cpu"
    with pytest.raises(UserError):
        dense_device("tpu")


def test_rtl_plugs_in_by_name():
    from moagcn.host.devices import RTL_FACTORY
    assert "rtl" in backend_names()
    if backend_available("rtl"):
        dev = make_device("rtl")
        assert isinstance(dev, TiledDevice) and dev.counts_cycles
    else:  # not built yet: a clear error naming where the backend is expected
        with pytest.raises(UserError, match=RTL_FACTORY.split(":")[0]):
            make_device("rtl")
