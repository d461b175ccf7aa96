"""Jobs back to back on the fused layer without a reset, with the next job's loads overlapping
the running one (two load banks) or following it (one bank): Verilator, lean harness."""

import numpy as np
import pytest

from moagcn.hw.hyscale import preset
from moagcn.sim.rtl.build import generate_verilog
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.rtl.lean import LeanJob, build_lean, run_lean_jobs
from moagcn.sim import run
from moagcn.sim.hyscale.spec import SPEC
from moagcn.sim.rtl.stream_tb import beat_ints, int_words, stream_jobs

from ..conftest import needs_icarus
from ..lean_jobs import run_back_to_back
from .jobs import hub_job, sampled_job

pytestmark = pytest.mark.xdist_group("verilator-hyscale")


def _jobs(config):
    """Four jobs of different sizes: widths that are not multiples of the lane counts, an
    empty destination in each hub job, a sampled mini-batch layer, a one-column output."""
    out = []
    for seed, (f_in, f_out) in enumerate([(16, 12), (5, 7), (13, 16), (8, 1)]):
        if seed == 2:
            indptr, indices, X, W, b = sampled_job(seed, 3, (25, 10), f_in, f_out, layer=1)
            data = None
        else:
            indptr, indices, data, X, W, b = hub_job(seed, 30 + 5 * seed, 25, f_in, f_out,
                                                     hub_edges=20, shared_dst_edges=10)
            if seed % 2:
                # the hub is the last source here, so that consecutive jobs' first source
                # entries differ (a job that read the other half's entry 0 would show)
                indices, X = X.shape[0] - 1 - indices, X[::-1].copy()
        out.append(SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=seed % 2 == 0,
                                       data=data), config))
    return out


def _expected(job):
    return golden.layer(job.indptr, job.indices, job.data, job.X, job.W, job.b, job.relu)


def _run(config, jobs, **options):
    return run_back_to_back(SPEC, config, jobs, **options)


@pytest.mark.parametrize("banks", [1, 2])
def test_jobs_back_to_back_match_jobs_alone(banks):
    config = preset("tiny", load_banks=banks)
    jobs = _jobs(config)
    together = _run(config, jobs)
    previous_busy, previous_done = None, 0
    for job, (Y, res) in zip(jobs, together):
        assert np.array_equal(as_bits(Y), as_bits(_expected(job)))
        (_, alone), = _run(config, [job])
        v, a = res.values, alone.values
        # the same work and cycles as the job alone after a reset ...
        for name in SPEC.protocol.counters:
            if name != "cycles_load_hidden":
                assert v[name] == a[name], name
        assert a["cycles_load_hidden"] == 0
        # ... except that its loads ran beside the previous job's busy cycles (every beat is
        # offered at once, so they start the cycle after the previous start)
        hidden = 0 if previous_busy is None or banks == 1 else min(a["cycles_load"],
                                                                  previous_busy)
        assert v["cycles_load_hidden"] == hidden
        # the harness's cycles from the previous done: the job's exposed loads, its start
        # cycle, its job start cycle (the start taken from a register) and its busy cycles
        assert res.cycles - previous_done == (a["cycles_load"] - hidden) + 2 + a["cycles_total"]
        previous_busy, previous_done = a["cycles_total"], res.cycles
    if banks == 2:
        assert sum(r.values["cycles_load_hidden"] for _, r in together) > 0


def test_back_to_back_with_idle_loads_and_backpressure():
    config = preset("tiny")
    jobs = _jobs(config)
    for job, (Y, res) in zip(jobs, _run(config, jobs, idle_every=3, stall_every=2)):
        assert np.array_equal(as_bits(Y), as_bits(_expected(job)))
        assert res.values["stall_output"] > 0


def test_a_bad_job_stops_and_the_next_one_runs():
    config = preset("tiny")
    jobs = _jobs(config)[:3]
    exe = build_lean(generate_verilog(SPEC.gateware(), config), SPEC.protocol)
    packed = [SPEC.pack(j, config) for j in jobs]
    streams = {k: v.copy() for k, v in packed[1].streams.items()}
    streams["src_in"][1, 0] = (streams["src_in"][1, 0] & 0xFFFF0000) | 1000  # no such row
    lean_jobs = [LeanJob(p.streams, p.scalars) for p in packed]
    lean_jobs[1] = LeanJob(streams, packed[1].scalars)
    results = run_lean_jobs(exe, SPEC.protocol, lean_jobs, SPEC.output_words(config),
                            max_cycles=sum(SPEC.max_cycles(j, p, config)
                                           for j, p in zip(jobs, packed)))
    assert results[1].values["err_source"] == 1 and results[1].beats.size == 0
    for k in (0, 2):
        assert results[k].values["err_source"] == 0
        Y = SPEC.unpack(results[k].beats, packed[k], jobs[k], config)
        assert np.array_equal(as_bits(Y), as_bits(_expected(jobs[k])))


def _wide_sources(seed):
    """120 destinations with 12 in-edges each from 3,000 sources, two features: tiles whose
    feature loads (8 beats a row on the tiny preset) outlast the previous tile's compute."""
    rng = np.random.default_rng(seed)
    n_dst, deg, n_src = 120, 12, 3000
    indptr = np.arange(0, deg * n_dst + 1, deg)
    indices = np.concatenate([rng.choice(n_src, deg, replace=False) for _ in range(n_dst)])
    X = rng.standard_normal((n_src, 2)).astype(np.float32)
    W = rng.standard_normal((2, 1)).astype(np.float32)
    return indptr, indices, None, X, W, None


@pytest.mark.parametrize("banks", [1, 2])
@pytest.mark.parametrize("shape", ["compute_bound", "load_bound"])
def test_tiled_job_model_follows_rtl_with_overlapped_loads(banks, shape):
    # more destinations / sources than the tiny preset holds: tiles, run back to back
    config = preset("tiny", load_banks=banks)
    if shape == "compute_bound":
        indptr, indices, data, X, W, b = hub_job(3, 200, 150, 13, 10, hub_edges=90,
                                                 shared_dst_edges=40)
    else:
        indptr, indices, data, X, W, b = _wide_sources(5)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=True, data=data), config)
    rtl = Driver(SPEC, config, "rtl").run(job, checked=True)
    model = Driver(SPEC, config, "model").run(job, checked=True)
    assert rtl.tiles == model.tiles > 1
    assert np.array_equal(as_bits(rtl.output), as_bits(model.output))
    r, m = rtl.counters, model.counters
    hidden = r.extra.get("cycles_load_hidden", 0)
    m_hidden = m.extra.get("cycles_load_hidden", 0)
    assert (hidden > 0) == (banks == 2)
    # the loads themselves do not depend on the compute: exposed + hidden is their sum
    assert r.cycles_load + hidden == m.cycles_load + m_hidden
    for ours, theirs in ((r.cycles_compute, m.cycles_compute), (r.cycles_load, m.cycles_load),
                         (hidden, m_hidden)):
        assert abs(ours - theirs) <= 0.005 * theirs
    if banks == 2 and shape == "load_bound":
        # a tile's loads outlast the tile before it: more is exposed than the first tile's
        first = SPEC.cycles(SPEC.split(job, config)[0].job, config).cycles_load
        assert r.cycles_load > first
    # the simulator ran the exposed loads, two start cycles per tile (the start and the job
    # start) and the busy cycles
    assert r.sim_cycles == r.cycles_load + 2 * rtl.tiles + r.cycles_compute


def test_report_of_a_tiled_job_models_the_hidden_loads():
    config = preset("tiny")
    indptr, indices, data, X, W, b = hub_job(3, 200, 150, 13, 10, hub_edges=90,
                                             shared_dst_edges=40)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b, data=data), config)
    res = Driver(SPEC, config, "rtl").run(job, checked=True)
    report = SPEC.report(res, job, config)
    assert report["tiles"] > 1
    assert report["cycles_load_hidden"] == report["model_cycles_load_hidden"] > 0
    assert report["model_cycles"] == (report["model_cycles_load"]
                                      + report["model_cycles_compute"])
    assert abs(report["model_error"]) < 0.01


def _small_jobs(config):
    out = []
    for seed, (f_in, f_out) in enumerate([(7, 5), (3, 6), (5, 2)]):
        indptr, indices, data, X, W, b = hub_job(20 + seed, 8 + seed, 6, f_in, f_out,
                                                 hub_edges=5, shared_dst_edges=4)
        if seed % 2:
            indices, X = X.shape[0] - 1 - indices, X[::-1].copy()
        out.append(SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=seed == 0, data=data),
                              config))
    return out


@pytest.mark.parametrize("simulator", [pytest.param("icarus", marks=needs_icarus), "pysim"])
def test_the_python_testbench_runs_jobs_back_to_back_like_the_harness(simulator):
    # the same RTL on another simulator, driven by the Python testbench (its own code for the
    # protocol), against the lean harness on Verilator: bits, every counter, the done cycles
    config = preset("tiny")
    jobs = _small_jobs(config)
    packed = [SPEC.pack(j, config) for j in jobs]
    words = SPEC.output_words(config)
    res = run(SPEC.gateware(), config, stream_jobs, simulator, proto=SPEC.protocol,
              jobs=[(p.streams, p.scalars) for p in packed], stall_every=3).value
    lean = _run(config, jobs, stall_every=3)
    for job, p, r, (Y, l) in zip(jobs, packed, res, lean):
        assert np.array_equal(as_bits(SPEC.unpack(int_words(r["beats"], words), p, job, config)),
                              as_bits(_expected(job)))
        assert np.array_equal(as_bits(Y), as_bits(_expected(job)))
        assert {k: int(r[k]) for k in l.values} == l.values
        assert r["done_cycle"] == l.cycles
    assert sum(r["cycles_load_hidden"] for r in res) > 0


@needs_icarus
def test_tiled_job_on_icarus_runs_back_to_back_like_verilator():
    # the driver's other path: the Python testbench's stream_jobs on Icarus, the same counters
    config = preset("tiny")
    indptr, indices, data, X, W, b = hub_job(6, 80, 40, 5, 3, hub_edges=20, shared_dst_edges=8)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b, data=data), config)
    icarus = Driver(SPEC, config, "rtl", "icarus").run(job, checked=True)
    lean = Driver(SPEC, config, "rtl").run(job, checked=True)
    assert icarus.tiles == lean.tiles > 1
    assert np.array_equal(as_bits(icarus.output), as_bits(lean.output))
    assert icarus.raw == lean.raw
    assert icarus.counters.sim_cycles == lean.counters.sim_cycles
    assert icarus.counters.extra["cycles_load_hidden"] > 0


@pytest.mark.slow            # a configuration of its own: make test-slow
def test_buffers_that_are_not_powers_of_two_keep_their_halves_apart():
    # each half is rounded up to a power of two: 300 sources, 700 edges, 30 destinations
    config = preset("tiny", max_sources=300, max_edges=700, max_destinations=30)
    indptr, indices, X, W, b = sampled_job(3, 48, (10, 25), 11, 6, n_graph=3000, layer=0)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=True), config)
    rtl = Driver(SPEC, config, "rtl").run(job, checked=True)
    model = Driver(SPEC, config, "model").run(job, checked=True)
    assert rtl.tiles == model.tiles > 2
    assert np.array_equal(as_bits(rtl.output), as_bits(_expected(job)))
    r, m = rtl.counters, model.counters
    assert r.extra["cycles_load_hidden"] == m.extra["cycles_load_hidden"] > 0
    assert (r.cycles_load, r.cycles_compute) == (m.cycles_load, m.cycles_compute)


async def _start_with_last_beats(io, proto, streams, scalars):
    """Load every stream but its last beat, offer the last beats with ``start``, then offer a
    stray beat in the next cycle (the job start). Returns whether each last beat was taken
    with ``start``, whether each stream was ready in the job start cycle, ``busy`` in both
    cycles and the run's output beats."""
    beats = {s: beat_ints(streams[s]) for s in proto.loads if len(streams[s])}
    for name, value in scalars.items():
        io.set(name, value)
    pos = {s: 0 for s in beats}
    while any(pos[s] < len(b) - 1 for s, b in beats.items()):
        offered = [s for s, b in beats.items() if pos[s] < len(b) - 1]
        for s in beats:
            io.set(f"{s}__valid", int(s in offered))
            if s in offered:
                io.set(f"{s}__payload", beats[s][pos[s]])
        taken = [s for s in offered if await io.get(f"{s}__ready")]
        await io.tick()
        for s in taken:
            pos[s] += 1
    for s, b in beats.items():
        io.set(f"{s}__valid", 1)
        io.set(f"{s}__payload", b[-1])
    io.set(proto.start, 1)
    with_start = {s: bool(await io.get(f"{s}__ready")) for s in beats}
    busy_at_start = await io.get("busy")
    await io.tick()
    io.set(proto.start, 0)
    for s, b in beats.items():
        io.set(f"{s}__payload", b[0])       # the next job's first beat, offered too early
    at_job_start = {s: bool(await io.get(f"{s}__ready")) for s in beats}
    busy_at_job_start = await io.get("busy")
    await io.tick()
    for s in beats:
        io.set(f"{s}__valid", 0)
    io.set(f"{proto.output}__ready", 1)
    out = []
    while not await io.get(proto.done):
        if await io.get(f"{proto.output}__valid"):
            out.append(await io.get(f"{proto.output}__payload"))
        await io.tick()
    return {"with_start": with_start, "at_job_start": at_job_start, "beats": out,
            "busy": (busy_at_start, busy_at_job_start),
            "cycles_total": await io.get("cycles_total")}


def _last_row_last_job(config):
    """41 destinations, one in-edge each, all from the one source: the destination and edge
    streams are the longest, and the last row (alone in its bank's last gather slot) is the
    last one final, so the pipelined update's last block waits for it."""
    rng = np.random.default_rng(40)
    n_dst = 41
    return SPEC.check(SPEC.job(np.arange(n_dst + 1), np.zeros(n_dst, dtype=np.int64),
                               rng.standard_normal((1, 2)).astype(np.float32),
                               rng.standard_normal((2, 3)).astype(np.float32),
                               rng.standard_normal(3).astype(np.float32)), config)


@pytest.mark.parametrize("which", ["hub", "last_row_last"])
@pytest.mark.parametrize("banks", [1, 2])
def test_a_beat_taken_with_start_belongs_to_the_starting_job(banks, which):
    # the layer takes the start a cycle late, from a register: a beat offered with ``start``
    # is the starting job's last, none is taken in the job start cycle. With the second job
    # the last destination bit comes with ``start``: the job start must see it (the bits'
    # write is registered before their decode), or the last row counts as final at once
    config = preset("tiny", load_banks=banks)
    job = _jobs(config)[1] if which == "hub" else _last_row_last_job(config)
    packed = SPEC.pack(job, config)
    res = run(SPEC.gateware(), config, _start_with_last_beats, "pysim", proto=SPEC.protocol,
              streams=packed.streams, scalars=packed.scalars).value
    assert all(res["with_start"].values()) and not any(res["at_job_start"].values())
    assert res["busy"] == (0, 1)
    words = SPEC.output_words(config)
    Y = SPEC.unpack(int_words(res["beats"], words), packed, job, config)
    assert np.array_equal(as_bits(Y), as_bits(_expected(job)))
    # the job's busy span (the layer's own counter) is the cycle model's
    model = Driver(SPEC, config, "model").run(job, checked=True).counters
    assert res["cycles_total"] == model.cycles_compute
