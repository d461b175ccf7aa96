"""Aggregate and update pipelined within a job (``HyScaleConfig.pipelined``): the update opens
each block of rows once their aggregation is complete. Verilator, lean harness, tiny preset;
the references are the golden model (bits) and the cycle model's replay (cycles)."""

import numpy as np
import pytest

from moagcn.hw.hyscale import preset
from moagcn.sim.rtl.build import generate_verilog
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.rtl.lean import LeanJob, build_lean, run_lean_jobs
from moagcn.sim.hyscale.spec import SPEC, job_kernel_cycles

from .jobs import hub_job, sampled_job

pytestmark = pytest.mark.xdist_group("verilator-hyscale")


def _jobs(config):
    """Widths that are not multiples of the lane counts, several column groups, empty
    destinations, a hub source, sampled mini-batch layers (input and output), one input
    feature, one destination, and a job without edges."""
    out = []
    for seed, (f_in, f_out) in enumerate([(16, 12), (5, 7), (13, 16), (8, 1), (1, 9)]):
        if seed in (2, 4):
            indptr, indices, X, W, b = sampled_job(seed, 6, (25, 10), f_in, f_out,
                                                   layer=1 if seed == 2 else 0)
            data = None
        else:
            indptr, indices, data, X, W, b = hub_job(seed, 30 + 5 * seed, 25, f_in, f_out,
                                                     hub_edges=20, shared_dst_edges=10)
        out.append(SPEC.job(indptr, indices, X, W, b, relu=seed % 2 == 0, data=data))
    rng = np.random.default_rng(9)
    X = rng.standard_normal((4, 3)).astype(np.float32)
    W = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    out.append(SPEC.job(np.array([0, 3]), np.array([3, 0, 3]), X, W, b))      # one row
    # half the rows without in-edges and a short aggregation: the first blocks wait only for
    # the scanner passing the empty rows (its first step is the cycle after start)
    deg = np.tile([0, 2], 12)
    idx = rng.integers(0, 4, int(deg.sum()))
    Xe = rng.standard_normal((4, 16)).astype(np.float32)
    We = rng.standard_normal((16, 6)).astype(np.float32)
    out.append(SPEC.job(np.concatenate([[0], np.cumsum(deg)]), idx, Xe, We, b[:1].repeat(6)))
    out.append(SPEC.job(np.zeros(8, dtype=np.int64), np.zeros(0, dtype=np.int64), X, W, b,
                        relu=True))                                             # no edges
    return [SPEC.check(j, config) for j in out]


def _run(config, jobs, lean_jobs=None):
    exe = build_lean(generate_verilog(SPEC.gateware(), config), SPEC.protocol)
    packed = [SPEC.pack(j, config) for j in jobs]
    limit = sum(SPEC.max_cycles(j, p, config) for j, p in zip(jobs, packed))
    lean_jobs = lean_jobs or [LeanJob(p.streams, p.scalars) for p in packed]
    return packed, run_lean_jobs(exe, SPEC.protocol, lean_jobs, SPEC.output_words(config),
                                 max_cycles=limit)


def _expected(job):
    return golden.layer(job.indptr, job.indices, job.data, job.X, job.W, job.b, job.relu)


@pytest.mark.parametrize("banks", [pytest.param(1, marks=pytest.mark.slow), 2])  # 1: own build
def test_pipelined_jobs_are_bit_exact_faster_and_modelled_cycle_for_cycle(banks):
    """Jobs back to back: the golden model's bits; the layer's busy cycles equal the cycle
    model's pipelined replay, and the aggregate phase its replay; the update starts with the
    job (``cycles_update`` spans the job); the set is faster than run in turn."""
    piped = preset("tiny", load_banks=banks, pipelined=True)
    plain = preset("tiny", load_banks=banks, pipelined=False)
    jobs = _jobs(piped)
    packed, results = _run(piped, jobs)
    for job, p, r in zip(jobs, packed, results):
        Y = SPEC.unpack(r.beats, p, job, piped)
        assert np.array_equal(as_bits(Y), as_bits(_expected(job)))
        model = job_kernel_cycles(job, piped)
        v = r.values
        # cycle for cycle, the one-feature job included (its rows of one beat keep the ring
        # full of spent slots waiting for release: the dispatch pointer once went round them
        # while it waited for the next row, 2 cycles the replay did not have)
        assert v["cycles_aggregate"] == model["aggregate"], (job.n_dst, job.edges)
        assert v["cycles_total"] == model["compute"], (job.n_dst, job.edges)
        assert v["cycles_update"] == v["cycles_total"]
        assert not (v["err_source"] or v["err_dest"] or v["err_edges"])
    _, before = _run(plain, _jobs(plain))
    for job, r in zip(_jobs(plain), before):
        model = job_kernel_cycles(job, plain)
        assert r.values["cycles_aggregate"] == model["aggregate"]
        assert r.values["cycles_total"] == model["compute"]
    total = sum(r.values["cycles_total"] for r in results)
    assert total < 0.9 * sum(r.values["cycles_total"] for r in before)


def test_four_words_per_beat_read_ahead_is_bit_exact_and_modelled():
    """Four words per beat, as the default preset: the S-PE reads each beat two cycles ahead
    (a new edge's first beat from its queue's head in the cycle it is taken) and picks the
    word from a register. Hub sources and shared destinations put edges back to back into one
    S-PE, granted at once; the bits and every cycle as the golden and cycle models say."""
    config = preset("tiny", mem_words_per_cycle=4)
    jobs = _jobs(config)
    packed, results = _run(config, jobs)
    for job, p, r in zip(jobs, packed, results):
        Y = SPEC.unpack(r.beats, p, job, config)
        assert np.array_equal(as_bits(Y), as_bits(_expected(job))), (job.n_dst, job.edges)
        model = job_kernel_cycles(job, config)
        assert r.values["cycles_aggregate"] == model["aggregate"], (job.n_dst, job.edges)
        assert r.values["cycles_total"] == model["compute"], (job.n_dst, job.edges)


def test_rows_are_numbered_as_they_complete_and_banks_stay_balanced():
    """The pipelined layer's hardware rows follow the destinations' last in-edges (rows
    without in-edges first), window by window of ``spes`` rows, each window one row per
    bank."""
    from moagcn.sim.hyscale.spec import last_edges, rows_by_completion
    rng = np.random.default_rng(4)
    n, banks = 50, 4
    edge_dst = rng.integers(0, n - 5, 300)             # destinations n-5.. have no in-edges
    flag, at = last_edges(edge_dst, n)
    assert flag.sum() == np.unique(edge_dst).size
    for v in range(n):
        hits = np.nonzero(edge_dst == v)[0]
        assert at[v] == (hits[-1] if hits.size else -1)
        assert (flag[hits] == 1).sum() == (1 if hits.size else 0)
    deg = np.bincount(edge_dst, minlength=n)
    row_of = rows_by_completion(at, deg, banks)
    assert sorted(row_of) == list(range(n))
    by_row = np.empty(n, dtype=np.int64)
    by_row[row_of] = np.arange(n)
    windows = [sorted(at[by_row[w:w + banks]]) for w in range(0, n, banks)]
    flat = [x for w in windows for x in w]
    assert flat == sorted(at)                          # windows in completion order
    empty = set(row_of[at < 0].tolist())               # the empty rows come first: the first
    assert set(range(4)) <= empty <= set(range(8))     # window, and one in the second
    # each window spreads its edges over the banks by the greedy: the heaviest row of a
    # window goes to the bank with the fewest edges so far
    load = np.zeros(banks, dtype=np.int64)
    for w in range(0, n, banks):
        rows = by_row[w:w + banks]
        heavy = rows[np.argmax(deg[rows])]
        assert load[row_of[heavy] % banks] == load[:rows.size].min()
        for v in rows:
            load[row_of[v] % banks] += deg[v]
    assert load.max() - load.min() <= deg.max()


@pytest.mark.parametrize("where", ["first", "late"])
@pytest.mark.parametrize("banks", [1, 2])
def test_a_bad_pipelined_job_stops_at_its_start_and_sends_nothing(where, banks):
    """A bad source at the first or the last entry of the list (the last one would be met
    after rows were sent, were it found while the job runs): the layer checks the lists as they
    load, so the job stops at its start with its flag and ``done``, reads no feature row and
    sends no beat, and the jobs around it are right (a stray beat would land in the next
    job's output)."""
    config = preset("tiny", pipelined=True, load_banks=banks)
    jobs = _jobs(config)[:3]
    packed = [SPEC.pack(j, config) for j in jobs]
    streams = {k: v.copy() for k, v in packed[1].streams.items()}
    k = 0 if where == "first" else streams["src_in"].shape[0] - 1
    streams["src_in"][k, 0] = (streams["src_in"][k, 0] & 0xFFFF0000) | 1000  # no such row
    lean = [LeanJob(p.streams, p.scalars) for p in packed]
    lean[1] = LeanJob(streams, packed[1].scalars)
    _, results = _run(config, jobs, lean)
    bad = results[1]
    assert bad.values["err_source"] == 1
    assert bad.values["err_dest"] == bad.values["err_edges"] == 0
    assert bad.beats.size == 0
    assert bad.values["feature_reads"] == 0 and bad.values["spe_busy"] == 0
    assert bad.values["cycles_total"] <= 4
    for k in (0, 2):
        assert results[k].values["err_source"] == 0
        got = SPEC.unpack(results[k].beats, packed[k], jobs[k], config)
        assert np.array_equal(as_bits(got), as_bits(_expected(jobs[k])))


def test_the_driver_and_report_count_a_pipelined_job_once():
    """Through the driver and the report: compute is the busy span (not aggregate + update,
    which overlap), and the report's model is the pipelined replay."""
    from moagcn.sim.driver import Driver
    config = preset("tiny", pipelined=True)
    job = _jobs(config)[0]
    res = Driver(SPEC, config, "rtl", "verilator").run(job, checked=True)
    c = res.counters
    assert c.cycles_compute < c.extra["cycles_aggregate"] + c.extra["cycles_update"]
    assert c.cycles_compute == c.extra["cycles_update"]
    report = SPEC.report(res, job, config)
    assert report["model_cycles_compute"] == job_kernel_cycles(job, config)["compute"]
    assert abs(report["model_error"]) < 0.002
    model = Driver(SPEC, config, "model").run(job, checked=True)
    assert model.counters.cycles_compute == report["model_cycles_compute"]
    assert np.array_equal(as_bits(model.output), as_bits(res.output))


def test_random_awkward_jobs_through_the_driver_are_bit_and_cycle_exact():
    """Held-out style jobs on the default (pipelined) tiny preset through the driver: isolated
    destinations, a hub source, duplicate neighbours, self loops, heavy-tailed degrees, widths
    from 1 up, one or two tiles. The golden model's bits; the model device's compute and load
    cycles equal the RTL's."""
    from moagcn.sim.driver import Driver
    config = preset("tiny")
    assert config.pipelined
    rtl, model = Driver(SPEC, config, "rtl", "verilator"), Driver(SPEC, config, "model")
    rng = np.random.default_rng(2026)
    tiles = set()
    for _ in range(8):
        n_dst, n_src = int(rng.integers(1, 90)), int(rng.integers(1, 300))
        f_in, f_out = int(rng.integers(1, 17)), int(rng.integers(1, 17))
        hub = int(rng.integers(0, n_src))
        rows = []
        for v in range(n_dst):
            if rng.random() < 0.15:
                rows.append([])
                continue
            nb = list(rng.integers(0, n_src, min(int(rng.pareto(1.2) * 2) + 1, 60)))
            if rng.random() < 0.3:
                nb += [hub] * int(rng.integers(1, 4))
            if rng.random() < 0.2 and v < n_src:
                nb.append(v)
            if rng.random() < 0.2:
                nb.append(nb[0])
            rows.append(nb)
        indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
        indices = np.array([u for r in rows for u in r], dtype=np.int64)
        X = rng.standard_normal((n_src, f_in)).astype(np.float32)
        W = rng.standard_normal((f_in, f_out)).astype(np.float32)
        b = rng.standard_normal(f_out).astype(np.float32)
        job = SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=bool(rng.random() < 0.5)),
                         config)
        got = rtl.run(job, checked=True)
        assert np.array_equal(as_bits(got.output), as_bits(_expected(job)))
        want = model.run(job, checked=True).counters
        assert got.counters.cycles_compute == want.cycles_compute, (n_dst, indices.size)
        assert got.counters.cycles_load == want.cycles_load
        tiles.add(got.counters.tiles)
    assert tiles == {1, 2}
