"""Hub rows split across slices (``split_degree`` > 0) on the RTL, against the golden model.

The dispatcher cuts a row longer than D into pieces of ``max(D, ceil(deg / S))`` neighbours on
consecutive slices; the output stream adds the pieces' beats in order. The golden model with
the same ``split`` and ``pieces = S`` is the reference (itself checked against plain loops in
tests/sim/test_sspmm_golden.py); the cycle model's output cycles and rows fetched must equal
the RTL's, its compute cycles be within 3 %.
"""

import numpy as np
import pytest

from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.golden import piece_sizes, sspmm
from moagcn.sim.sspmm.model import estimate
from moagcn.sim.sspmm.passes import dispatch, split_rows

from .graphs import check_tiled_model, drive, power_law_job
from .test_accelerator import _raw_run

pytestmark = pytest.mark.xdist_group("verilator-sspmm-split")

#: (slices, split_degree): two, three (not a power of two) and four slices
SPLIT = {(2, 8): preset("tiny", slices=2, split_degree=8),
         (3, 5): preset("tiny", slices=3, split_degree=5),
         (4, 16): preset("tiny", slices=4, split_degree=16)}


def check_split(res, cfg, indptr, indices, H, M):
    """Bit for bit the golden model's pieces; and not the unsplit sum (the job can tell)."""
    expected = sspmm(indptr, indices, H, M, split=cfg.split_degree, pieces=cfg.slices)
    got = res.output.view(np.uint32)
    bad = np.argwhere(got != expected.view(np.uint32))
    assert bad.size == 0, f"{len(bad)} elements differ, first at {bad[:5].tolist()}"
    assert not np.array_equal(got, sspmm(indptr, indices, H, M).view(np.uint32))
    assert res.raw["err_index"] == 0 and res.raw["err_indptr"] == 0


@pytest.mark.parametrize("key", list(SPLIT), ids=[f"S{s}-D{d}" for s, d in SPLIT])
@pytest.mark.parametrize("density,F,seed", [(0.6, 13, 1), (1.0, 9, 2)])
def test_split_hub_rows_bit_exact_and_modelled(key, density, F, seed):
    cfg = SPLIT[key]
    indptr, indices, H, M = job = power_law_job(150, F, seed=seed, density=density, hub=400)
    assert (np.diff(indptr) > cfg.split_degree).sum() >= 5
    res = drive(cfg, "verilator", *job)
    check_split(res, cfg, *job)
    model = estimate(indptr, M, F, cfg)
    assert res.raw["rows_fetched"] == model.extra["rows_fetched"]
    assert res.raw["cycles_output"] == model.cycles_output
    err = model.cycles_compute / res.raw["cycles_compute"] - 1
    assert abs(err) < 0.03, (model.cycles_compute, res.raw["cycles_compute"])


def test_split_spreads_a_hub_over_the_slices():
    """A job dominated by one hub row: four slices with the hub split finish in well under
    half the cycles of four slices without (the hub alone holds one slice otherwise)."""
    job = power_law_job(200, 16, seed=7, density=0.5, hub=1500, max_deg=40)
    whole = drive(preset("tiny", slices=4), "verilator", *job).raw["cycles_compute"]
    res = drive(SPLIT[(4, 16)], "verilator", *job)
    check_split(res, SPLIT[(4, 16)], *job)
    assert res.raw["cycles_compute"] < 0.5 * whole, (whole, res.raw["cycles_compute"])


def test_split_merge_under_backpressure_and_idle_loads():
    cfg = SPLIT[(3, 5)]
    indptr, indices, H, M = job = power_law_job(90, 11, seed=5, hub=150)
    res = drive(cfg, "verilator", *job, idle_every=4, stall_every=3)
    check_split(res, cfg, *job)
    c = res.raw
    assert c["stall_output"] > 0
    assert c["cycles_total"] == c["cycles_compute"] + c["cycles_output"]


def test_split_tiled_job_back_to_back():
    """Rows of 700 neighbours do not fit the tiny preset's edge buffer with the rest: the driver
    runs tiles back to back; each tile's hubs are split, the sum of the tiles' models within
    3 % of the RTL."""
    cfg = SPLIT[(4, 16)]
    job = power_law_job(260, 13, seed=12, density=0.7, hub=700)
    res = drive(cfg, "verilator", *job)
    check_split(res, cfg, *job)
    check_tiled_model(res, cfg, job)


@pytest.mark.slow            # the split design's cocotb build is these two tests': test-slow
def test_split_reset_mid_job_then_complete_run():
    cfg = SPLIT[(2, 8)]
    job = power_law_job(60, 8, seed=6, hub=90)
    res = drive(cfg, "verilator", *job, reset_after=40)
    check_split(res, cfg, *job)


@pytest.mark.slow            # the split design's cocotb build is these two tests': test-slow
def test_split_error_in_a_split_row_stops_cleanly():
    cfg = SPLIT[(2, 8)]
    # 30 rows; row 1 has 20 neighbours (two pieces of ten), one in its second piece out of range
    indices = list(range(20))
    indices[13] = 40
    indptr = [0, 2, 22] + [23] * 28
    out = _raw_run(indptr, [0, 1, *indices, 2], cfg=cfg, n_features=4)
    assert out["err_index"] == 1 and out["err_indptr"] == 0 and out["beats"] == []


@pytest.mark.slow            # a configuration of its own: make test-slow
def test_split_edge_degrees_one_group_wrapping_pieces_masked_hub():
    """One group per slice (no lane map), rows of exactly D, D + 1, S * D, S * D + 1 and many
    times S * D neighbours, a hub whose every feature is masked (never dispatched, its owner
    entry stale), pieces that wrap past the last slice, output backpressure."""
    S, D = 4, 6
    cfg = preset("tiny", slices=S, groups=1, split_degree=D)
    rng = np.random.default_rng(21)
    n, F = 120, 10
    deg = rng.integers(0, 5, n)
    deg[[3, 10, 17, 30, 41, 55, 70]] = [D, D + 1, S * D, S * D + 1, 5 * S * D + 3, 2 * D + 1, 400]
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, n, int(indptr[-1]))
    H = rng.standard_normal((n, F)).astype(np.float32)
    M = rng.random((n, F)) < 0.7
    M[70] = False                                   # the 400-neighbour hub: nothing to compute
    size, pieces = piece_sizes(deg, D, S)
    assert pieces[[3, 10, 17, 30, 41]].tolist() == [1, 2, 4, 4, 4]
    # the dispatcher's choice (replayed by the model): some row's pieces wrap past slice S - 1
    jobs = np.where(deg > 0, -(-M.sum(axis=1) // cfg.group_lanes), 0)
    p_deg, p_jobs, _, k, per_row = split_rows(deg, jobs, np.arange(n), D, S)
    owner = dispatch(p_deg * p_jobs, S, k)
    first = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    wraps = [v for v in range(n) if per_row[v] > 1 and jobs[v]
             and owner[first[v]] + per_row[v] > S]
    assert wraps, "no row's pieces wrap past the last slice: the job cannot tell"
    res = drive(cfg, "verilator", indptr, indices, H, M, stall_every=2)
    check_split(res, cfg, indptr, indices, H, M)
    model = estimate(indptr, M, F, cfg)
    assert res.raw["cycles_output"] == model.cycles_output + res.raw["stall_output"]
    assert res.raw["rows_fetched"] == model.extra["rows_fetched"]


@pytest.mark.parametrize("divisor", [2, 3, 5, 6, 7, 12, 31, 64])
def test_ceil_div_const_is_exact_for_every_value(divisor):
    """``ceil(v / d)`` as a multiplication by a constant: every 10-bit value (Amaranth's
    simulator against Python's integer division)."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from moagcn.hw.sspmm.scheduler import ceil_div_const
    m = Module()
    v = Signal(10)
    q = Signal(10)
    m.d.comb += q.eq(ceil_div_const(v, divisor))
    bad = []

    async def bench(ctx):
        for x in range(1 << 10):
            ctx.set(v, x)
            if ctx.get(q) != -(-x // divisor):
                bad.append(x)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]
