"""Sparse devices: results against independent references, counters, tiling, device choices."""

import numpy as np
import pytest
import torch

from moagcn.core.spec import get_spec
from moagcn.core.tiling import plan_tiles
from moagcn.errors import UserError
from moagcn.host.devices.moa import MixtureOfAccelerators
from moagcn.host.devices.select import AcceleratorChoice, CpuDevice, dense_device, make_device
from moagcn.host.graphs.generators import rmat, sbm
from moagcn.host.graphs.ops import CSRGraph
from moagcn.sim.sspmm.golden import float64_bound, sspmm
from moagcn.sim.sspmm.model import estimate

SSPMM = get_spec("sspmm")


def ref_work(g, M):
    """W = sum over stored entries of the row's unmasked features (a loop, no shared code)."""
    return sum(int(M[v].sum()) for v in range(g.n_rows) for _ in g.neighbours(v))


@pytest.fixture(scope="module")
def job():
    d = sbm(n_nodes=300, seed=4)
    g = d.graph.with_self_loops()
    rng = np.random.default_rng(0)
    H = rng.standard_normal((300, 40)).astype(np.float32)
    M = rng.random((300, 40)) < 0.5
    return g, H, M


def test_model_is_within_the_fp32_bound_and_counts_cycles(job):
    g, H, M = job
    dev = make_device("model")
    Z = dev.sspmm(g, H, M)
    exact = g.to_scipy(np.float64) @ H.astype(np.float64) * M
    assert (np.abs(Z - exact) <= 2 * float64_bound(g.indptr, g.indices, H, M) + 1e-30).all()
    assert (Z[~M] == 0).all()
    est = estimate(g.indptr, M, 40, SSPMM.config())
    c = dev.counters
    assert c.calls == 1 and c.tiles == 1
    assert (c.cycles_load, c.cycles_compute, c.cycles_output) == \
        (est.cycles_load, est.cycles_compute, est.cycles_output)
    assert c.work_adds == ref_work(g, M)
    assert c.utilization == pytest.approx(c.work_adds / (16 * c.cycles_compute))
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
    assert dev.counters.cycles_total == 0 and dev.counters.work_adds == ref_work(g, M)


def test_tiling_covers_the_job_and_is_bit_exact():
    d = rmat(scale=9, seed=2)
    g = d.graph.with_self_loops()
    cfg = SSPMM.config("tiny")  # 256 nodes, 4096 edges, 16 features per job
    rng = np.random.default_rng(1)
    H = rng.standard_normal((g.n_nodes, 37)).astype(np.float32)
    M = rng.random((g.n_nodes, 37)) < 0.6
    tiles = plan_tiles(g.indptr, g.indices, g.n_rows, g.n_cols, 37, SSPMM.limits(None, cfg))
    assert len({(t.rows_start, t.rows_stop) for t in tiles}) > 2  # rows were split
    assert {(t.feat_start, t.feat_stop) for t in tiles} == {(0, 16), (16, 32), (32, 37)}
    for t in tiles:
        assert t.size <= cfg.max_nodes and t.indices.size <= cfg.max_edges
    covered = np.zeros(g.n_rows, dtype=int)
    for t in tiles:
        if t.feat_start == 0:
            covered[t.rows_start:t.rows_stop] += 1
    assert (covered == 1).all()
    # the golden model run part by part, as the RTL runs them, equals the whole job
    job = SSPMM.check(SSPMM.job(g.indptr, g.indices, H, M), cfg)
    Z = SSPMM.empty_output(job)
    parts = SSPMM.split(job, cfg)
    for part in parts:
        SSPMM.place(Z, part, SSPMM.golden(part.job, cfg))
    np.testing.assert_array_equal(Z, sspmm(g.indptr, g.indices, H, M))
    dev = make_device("model", config=cfg)
    np.testing.assert_array_equal(dev.sspmm(g, H, M), Z)
    assert dev.counters.tiles == len(tiles) == len(parts)


@pytest.mark.xdist_group("verilator-sspmm")
@pytest.mark.parametrize("design", ["sspmm", "hyscale"])
def test_model_device_equals_the_rtl_device(job, design):
    """The `model` device against the `rtl` device (the design's RTL on Verilator), tiled on the
    tiny preset: bit-exact Z, the same tiles, the same work."""
    g, H, M = job
    model = AcceleratorChoice("model", design, "tiny").make()
    rtl = AcceleratorChoice("rtl", design, "tiny").make()
    Zm, Zr = model.sspmm(g, H, M), rtl.sspmm(g, H, M)
    assert np.array_equal(Zm.view(np.uint32), Zr.view(np.uint32))
    assert model.counters.tiles == rtl.counters.tiles > 2
    assert model.counters.work_adds == rtl.counters.work_adds == ref_work(g, M)
    assert rtl.counters.sim_cycles > rtl.counters.cycles_compute > 0


def test_tiling_rejects_a_row_too_long():
    n = 300
    g = CSRGraph.from_edges(np.zeros(n - 1, int), np.arange(1, n), n)
    cfg = SSPMM.config("tiny")
    with pytest.raises(UserError, match="row 0 has 299 neighbours.*max_nodes=256"):
        plan_tiles(g.indptr, g.indices, n, n, 4, SSPMM.limits(None, cfg))


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


def test_device_choices_name_the_bad_value():
    with pytest.raises(UserError, match="--device 'fpga'"):
        AcceleratorChoice("fpga")
    with pytest.raises(UserError, match="--simulator 'vcs'"):
        AcceleratorChoice("rtl", simulator="vcs")
    with pytest.raises(UserError, match="unknown accelerator design 'nope'"):
        AcceleratorChoice("model", "nope").config()
    with pytest.raises(UserError, match="has no parameter 'lane'"):
        AcceleratorChoice("model", params={"lane": "8"}).config()
    cfg = AcceleratorChoice("model", preset="tiny", params={"lanes": "8"}).config()
    assert cfg.lanes == 8 and cfg.max_nodes == 256


def test_dense_device():
    assert dense_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert dense_device("cpu").type == "cpu"
    with pytest.raises(UserError):
        dense_device("tpu")


def test_hyscale_aggregates_as_a_sparse_device(job):
    """The HyScale fused layer as an aggregation device (W = I, unit edge weights): within the
    fp32 bound of float64, masked outputs zero, split into parts by its smaller buffers."""
    g, H, M = job
    cfg = get_spec("hyscale").config("tiny")     # 64 destinations, 16 features per job
    dev = AcceleratorChoice("model", "hyscale", "tiny").make()
    Z = dev.sspmm(g, H, M)
    exact = g.to_scipy(np.float64) @ H.astype(np.float64) * M
    bound = float64_bound(g.indptr, g.indices, H, M)
    assert (np.abs(Z - exact) <= 2 * bound + 1e-30).all()
    assert (Z[~M] == 0).all()
    c = dev.counters
    assert c.tiles >= -(-300 // cfg.max_destinations) * -(-40 // cfg.max_feature_width)
    assert c.lanes == cfg.spes and c.cycles_compute > 0
    assert c.work_adds == ref_work(g, M)


def test_mixture_of_unequal_accelerators(job):
    g, H, M = job
    moa = MixtureOfAccelerators([0, 1, 2], [AcceleratorChoice("model", params={"lanes": "32"}),
                                            AcceleratorChoice("model", params={"lanes": "8"}),
                                            AcceleratorChoice("cpu")])
    for i in moa.workers:
        moa[i].sspmm(g, H, M)
    c = moa.counters()
    assert c[0].lanes == 32 and c[1].lanes == 8 and c[2].cycles_total == 0
    assert c[0].cycles_compute < c[1].cycles_compute        # four times the adders
    assert moa.total().work_adds == 3 * ref_work(g, M)
    with pytest.raises(UserError, match="2 device choices for 3 workers"):
        MixtureOfAccelerators([0, 1, 2], [AcceleratorChoice("cpu")] * 2)
