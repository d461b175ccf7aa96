"""The weighted S-SpMM (``weighted=True``) on the RTL: bit for bit against a plain loop, and the
cycle model within 3 %.

The reference is :func:`tests.sim.test_weighted_golden.reference`: Python loops over each row's
entries in the documented order with numpy float32 scalars, ``acc = float32(float32(w * h) +
acc)``, written without the golden model (whose pieces and cuts the driver shares). The jobs
have hub rows, empty rows, self loops, duplicate columns, signed zeros, values of every
magnitude (exact zeros, -0, products near the subnormal range and near overflow), feature
widths that are not multiples of the lanes and masks of density 0.25 to 1; one has a row longer
than the buffers (cut into pieces, added on the host) in a job of several tiles, one splits
hub rows across two slices.
"""

import numpy as np
import pytest

from moagcn.hw.sspmm import preset
from moagcn.sim.driver import Driver
from moagcn.sim.sspmm.golden import sspmm
from moagcn.sim.sspmm.spec import SPEC

from ...conftest import needs_icarus
from ...sim.test_weighted_golden import assert_bits, reference, weighted_job

pytestmark = pytest.mark.xdist_group("verilator-sspmm-weighted")

TINY_W = preset("tiny", weighted=True)
SPLIT_W = preset("tiny", weighted=True, slices=2, split_degree=8)


def run(config, indptr, indices, H, M, values, simulator="verilator", **options):
    return Driver(SPEC, config, "rtl", simulator).run(
        SPEC.job(indptr, indices, H, M, values), **options)


def check_model(res, config, job, limit=0.03):
    """The replayed cycle model of the same parts: rows fetched and output cycles equal,
    ``cycles_total`` and ``cycles_compute`` within ``limit``."""
    model = SPEC.replayed_cycles(SPEC.job(*job), config)
    c = res.counters
    assert c.tiles == model.tiles
    assert c.extra["rows_fetched"] == model.extra["rows_fetched"]
    assert c.cycles_output == model.cycles_output
    for key in ("cycles_compute", "cycles_total"):
        err = getattr(model, key) / getattr(c, key) - 1
        assert abs(err) < limit, (key, getattr(model, key), getattr(c, key))


@pytest.mark.parametrize("F,density,seed,hub", [(13, 0.5, 1, 400), (7, 1.0, 2, None),
                                                (16, 0.25, 3, 150), (9, 0.75, 4, 250)])
def test_weighted_rtl_bit_exact_and_modelled(F, density, seed, hub):
    job = weighted_job(150, F, seed, density=density, hub=hub)
    res = run(TINY_W, *job)
    assert_bits(res.output, reference(*job))
    assert res.raw["err_index"] == 0 and res.raw["err_indptr"] == 0
    check_model(res, TINY_W, job)


def test_a_long_row_in_pieces_in_a_tiled_job():
    """A hub of 5,000 entries is more than the tiny preset's 4,096-entry index buffer: the
    driver cuts it into pieces of 256 (rows of the job, each with its values) in a job of
    several tiles run back to back, and adds the pieces on the host in order."""
    indptr, indices, H, M, values = job = weighted_job(300, 13, 5, density=0.6, hub=5000)
    res = run(TINY_W, *job)
    assert res.counters.tiles > 2
    # the documented rule: a row with more entries than max_edges, or more distinct columns
    # than max_nodes, is summed in pieces of min(max_edges, max_nodes) entries, each from +0,
    # the pieces added in order (the reference's split with pieces = 0); the others whole
    deg = np.diff(indptr)
    distinct = np.array([np.unique(indices[a:b]).size for a, b in zip(indptr, indptr[1:])])
    long = (deg > TINY_W.max_edges) | (distinct > TINY_W.max_nodes)
    assert long.sum() == 1
    size = min(TINY_W.max_edges, TINY_W.max_nodes)
    want = np.where(long[:, None], reference(indptr, indices, H, M, values, split=size),
                    reference(indptr, indices, H, M, values))
    assert_bits(res.output, want)
    check_model(res, TINY_W, job)


@pytest.mark.slow            # a configuration of its own: make test-slow
def test_hub_rows_split_across_slices():
    indptr, indices, H, M, values = job = weighted_job(120, 11, 6, density=0.6, hub=300)
    res = run(SPLIT_W, *job)
    want = reference(indptr, indices, H, M, values, SPLIT_W.split_degree, SPLIT_W.slices)
    assert_bits(res.output, want)
    # the job can tell the pieces from the whole row
    assert not np.array_equal(res.output.view(np.uint32),
                              reference(indptr, indices, H, M, values).view(np.uint32))
    check_model(res, SPLIT_W, job)


def test_idle_loads_backpressure_and_a_binary_job():
    """Idle load cycles and output backpressure change no bit; a job without values on the
    weighted design multiplies by 1: the binary design's sums."""
    indptr, indices, H, M, values = job = weighted_job(90, 10, 7, hub=120)
    res = run(TINY_W, *job, idle_every=3, stall_every=4)
    assert_bits(res.output, reference(*job))
    c = res.raw
    assert c["stall_output"] > 0 and c["cycles_total"] == c["cycles_compute"] + c["cycles_output"]
    plain = run(TINY_W, indptr, indices, H, M, None)
    assert_bits(plain.output, sspmm(indptr, indices, H, M))


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=needs_icarus), "pysim"])
def test_other_simulators(simulator):
    """The per-cycle testbench on Icarus and on Amaranth's simulator, a small job."""
    job = weighted_job(30 if simulator == "icarus" else 20, 6, 8, max_deg=12)
    res = run(TINY_W, *job, simulator=simulator)
    assert_bits(res.output, reference(*job))


@pytest.mark.slow
def test_shared_node_buffer_carries_the_values():
    """With ``node_banks`` the value waits in the reader's request queue beside its index
    (bank conflicts delay both): two slices over two banks, hubs split."""
    cfg = preset("tiny", weighted=True, slices=2, node_banks=2, fetch_rows=1, split_degree=8)
    indptr, indices, H, M, values = job = weighted_job(120, 9, 11, density=0.7, hub=250)
    res = run(cfg, *job)
    assert_bits(res.output, reference(indptr, indices, H, M, values, cfg.split_degree,
                                      cfg.slices))
    check_model(res, cfg, job, limit=0.05)


def test_rtl_device_runs_spmm_weighted():
    """``SparseDevice.spmm_weighted`` on the ``rtl`` device of a weighted configuration: one
    job per head, each bit for bit the plain loop; the cycles counted."""
    import torch

    from moagcn.core.graph import CSRGraph
    from moagcn.sim.device import AcceleratorDevice

    indptr, indices, H, _, values = weighted_job(50, 6, 13, hub=80)
    vals = torch.from_numpy(np.stack([values, values[::-1].copy()], axis=1))
    X = torch.from_numpy(np.stack([H, -H], axis=1))
    dev = AcceleratorDevice(SPEC, TINY_W, "rtl")
    Z = dev.spmm_weighted(CSRGraph(indptr, indices), vals, X).numpy()
    ones = np.ones(H.shape, dtype=bool)
    for h in range(2):
        assert_bits(Z[:, h], reference(indptr, indices, X[:, h].numpy(), ones,
                                       vals[:, h].numpy()))
    assert dev.counters.cycles_compute > 0 and dev.counters.sim_cycles > 0
