"""S-SpMM jobs back to back without a reset: the next job's loads overlap the running one
(two load banks) or follow it (one bank); each job runs exactly as it would after a reset."""

import numpy as np
import pytest

from moagcn.core.registry import gateware
from moagcn.hw.sspmm import preset
from moagcn.sim import run
from moagcn.sim.rtl.build import generate_verilog
from moagcn.sim.driver import Driver
from moagcn.sim.sspmm.golden import sspmm
from moagcn.sim.rtl.lean import LeanJob, build_lean, run_lean_jobs
from moagcn.sim.sspmm.spec import SPEC
from moagcn.sim.rtl.stream_tb import int_words, stream_jobs

from ...conftest import needs_icarus
from ...lean_jobs import run_back_to_back
from .graphs import power_law_job

pytestmark = pytest.mark.xdist_group("verilator-sspmm-b2b")


def _jobs(config, seeds=(1, 2, 3, 4)):
    """Jobs of different shapes: widths that are not multiples of the lanes or the load width,
    dense and sparse masks, a hub row, empty rows, self loops and duplicate columns."""
    shapes = [(60, 13, 0.5, 40), (25, 16, 1.0, None), (80, 5, 0.3, 90), (40, 9, 0.8, None)]
    out = []
    for seed, (n, F, density, hub) in zip(seeds, shapes):
        indptr, indices, H, M = power_law_job(n, F, seed, density=density, max_deg=30, hub=hub)
        out.append(SPEC.check(SPEC.job(indptr, indices, H, M), config))
    return out


def _random_jobs(config, seed, count=6):
    """``count`` random jobs that fit ``config``: sizes, widths, mask densities, degree caps
    and hub rows drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(5, 120))
        F = int(rng.integers(1, config.max_feature_width + 1))
        hub = int(rng.integers(10, 120)) if rng.random() < 0.5 else None
        indptr, indices, H, M = power_law_job(n, F, int(rng.integers(1 << 30)),
                                              density=float(rng.uniform(0.1, 1)),
                                              max_deg=int(rng.integers(3, 40)), hub=hub)
        out.append(SPEC.check(SPEC.job(indptr, indices, H, M), config))
    return out


def _run(config, jobs, **options):
    return run_back_to_back(SPEC, config, jobs, **options)


def _bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


#: four groups of two lanes, two reads per cycle (the default preset's structure, small)
FOUR_GROUPS = dict(lanes=8, groups=4, fetch_rows=2, adder_latency=4)


@pytest.mark.parametrize("banks,params,seed,idle", [
    (1, {}, None, 0), (2, {}, None, 0), (2, {"slices": 2}, None, 0),
    pytest.param(2, FOUR_GROUPS, 4, 0, marks=pytest.mark.slow), (1, {}, None, 5), (2, {}, None, 5)])
def test_jobs_back_to_back_match_jobs_alone(banks, params, seed, idle):
    config = preset("tiny", load_banks=banks, **params)
    jobs = _jobs(config) if seed is None else _random_jobs(config, seed)
    # output backpressure (and idle load cycles): each job's patterns from its own start
    options = dict(stall_every=3, idle_every=idle)
    together = _run(config, jobs, **options)
    previous_busy, previous_done = None, 0
    for job, (Z, res) in zip(jobs, together):
        assert np.array_equal(_bits(Z), _bits(sspmm(job.indptr, job.indices, job.H, job.M)))
        (_, alone), = _run(config, [job], **options)
        v, a = res.values, alone.values
        # the same cycles, stalls and reads as the job alone after a reset ...
        for name in SPEC.protocol.counters:
            if name != "cycles_load_hidden":
                assert v[name] == a[name], name
        assert a["cycles_load_hidden"] == 0
        assert v["err_index"] == v["err_indptr"] == 0
        # ... except that its loads ran beside the previous job's busy cycles (offered from
        # the cycle after the previous start)
        overlapped = banks == 2 and previous_busy is not None
        assert (v["cycles_load_hidden"] > 0) == overlapped
        if not idle:
            # every beat offered at once: the loads hidden and the harness's cycles from the
            # previous done (exposed loads, the start cycle, the busy cycles) follow exactly
            hidden = min(a["cycles_load"], previous_busy) if overlapped else 0
            assert v["cycles_load_hidden"] == hidden
            assert res.cycles - previous_done == (a["cycles_load"] - hidden) + 1 + a[
                "cycles_total"]
        if banks == 1:
            # loads after the previous done, idle pattern and all: the job's whole run alone
            assert res.cycles - previous_done == alone.cycles
        previous_busy, previous_done = a["cycles_total"], res.cycles


@pytest.mark.parametrize("banks,slices", [(1, 1), (2, 1), (2, 2)])
def test_a_bad_job_stops_and_the_next_one_runs(banks, slices):
    # a column index out of range at a job's first entry (it stops with rows still queued
    # and in flight), then a row pointer past the loaded indices, between good jobs: the bad
    # jobs raise their flag and send nothing; the good job after each runs exactly as after a
    # reset (nothing of the stopped job reaches it) with clear flags
    config = preset("tiny", load_banks=banks, slices=slices)
    jobs = _jobs(config, seeds=(5, 6, 7, 8)) + _jobs(config, seeds=(9,))
    exe = build_lean(generate_verilog(SPEC.gateware(), config), SPEC.protocol)
    packed = [SPEC.pack(j, config) for j in jobs]
    lean = [LeanJob({k: v.copy() for k, v in p.streams.items()}, p.scalars) for p in packed]
    lean[1].streams["indices_in"][0, 0] = jobs[1].H.shape[0] + 3
    last = lean[3].streams["indptr_in"].reshape(-1)
    last[jobs[3].indptr.size - 1] += 5
    options = dict(stall_every=3)
    results = run_lean_jobs(exe, SPEC.protocol, lean, SPEC.output_words(config),
                            max_cycles=sum(SPEC.max_cycles(j, p, config)
                                           for j, p in zip(jobs, packed)), **options)
    assert results[1].values["err_index"] == 1 and results[1].values["err_indptr"] == 0
    assert results[3].values["err_indptr"] == 1 and results[3].values["err_index"] == 0
    assert results[1].beats.size == results[3].beats.size == 0
    for k in (0, 2, 4):
        r = results[k]
        assert r.values["err_index"] == r.values["err_indptr"] == 0
        Z = SPEC.unpack(r.beats, packed[k], jobs[k], config)
        assert np.array_equal(_bits(Z), _bits(sspmm(jobs[k].indptr, jobs[k].indices, jobs[k].H,
                                                    jobs[k].M)))
        (_, alone), = _run(config, [jobs[k]], **options)
        for name in SPEC.protocol.counters:
            if name != "cycles_load_hidden":
                assert r.values[name] == alone.values[name], (k, name)


def _tiled_job(seed, config):
    # more rows, entries and features than the tiny preset holds: row blocks x feature chunks
    indptr, indices, H, M = power_law_job(700, 21, seed, density=0.6, max_deg=60, hub=300)
    return SPEC.check(SPEC.job(indptr, indices, H, M), config)


@pytest.mark.parametrize("banks", [1, 2])
def test_tiled_job_rtl_and_model_overlap_the_same_loads(banks):
    config = preset("tiny", load_banks=banks)
    job = _tiled_job(11, config)
    rtl = Driver(SPEC, config, "rtl").run(job, checked=True)
    model = Driver(SPEC, config, "model").run(job, checked=True)
    assert rtl.tiles == model.tiles > 2
    expected = sspmm(job.indptr, job.indices, job.H, job.M)
    assert np.array_equal(_bits(rtl.output), _bits(expected))
    assert np.array_equal(_bits(model.output), _bits(expected))
    r, m = rtl.counters, model.counters
    hidden, m_hidden = (c.extra.get("cycles_load_hidden", 0) for c in (r, m))
    assert (hidden > 0) == (m_hidden > 0) == (banks == 2)
    # the loads do not depend on the compute: exposed + hidden is the same sum
    assert r.cycles_load + hidden == m.cycles_load + m_hidden
    # each tile hides what ran beside the tile before: within the compute model's error
    assert abs(hidden - m_hidden) <= 0.05 * max(m_hidden, 1)
    # the simulator ran the exposed loads, a start cycle per tile and the busy cycles
    assert r.sim_cycles == r.cycles_load + rtl.tiles + r.cycles_compute + r.cycles_output
    if banks == 2:
        one = Driver(SPEC, preset("tiny", load_banks=1), "rtl").run(job, checked=True)
        assert np.array_equal(_bits(one.output), _bits(expected))
        assert r.sim_cycles + hidden == one.counters.sim_cycles
        assert one.counters.cycles_compute == r.cycles_compute


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=needs_icarus), "pysim"])
def test_the_python_testbench_runs_jobs_back_to_back_like_the_harness(simulator):
    # the same RTL on another simulator, driven by the Python testbench (its own code for the
    # protocol), against the lean harness on Verilator: bits, every counter, the done cycles
    config = preset("tiny")
    jobs = _jobs(config)[:3]
    packed = [SPEC.pack(j, config) for j in jobs]
    words = SPEC.output_words(config)
    res = run(SPEC.gateware(), config, stream_jobs, simulator, proto=SPEC.protocol,
              jobs=[(p.streams, p.scalars) for p in packed], stall_every=2,
              idle_every=3).value
    lean = _run(config, jobs, stall_every=2, idle_every=3)
    for job, p, r, (Z, l) in zip(jobs, packed, res, lean):
        expected = _bits(sspmm(job.indptr, job.indices, job.H, job.M))
        assert np.array_equal(_bits(SPEC.unpack(int_words(r["beats"], words), p, job, config)),
                              expected)
        assert np.array_equal(_bits(Z), expected)
        assert {k: int(r[k]) for k in l.values} == l.values
        assert r["done_cycle"] == l.cycles
    assert sum(r["cycles_load_hidden"] for r in res) > 0
