"""The fused layer's RTL against the golden model: pysim, Verilator (lean and cocotb), Icarus."""

from dataclasses import replace

import numpy as np
import pytest

from moagcn.core.registry import gateware
from moagcn.hw.hyscale import preset
from moagcn.sim import run
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits
from moagcn.sim.driver import Driver
from moagcn.sim.hyscale.spec import SPEC, check_job, pack_job
from moagcn.sim.rtl.stream_tb import stream_job

from ..conftest import needs_icarus
from .jobs import hub_job, sampled_job

pytestmark = pytest.mark.xdist_group("verilator-hyscale")

TINY = preset("tiny")


class Run:
    """A layer run through the generic driver: ``Y`` and the spec's report."""

    def __init__(self, config, simulator, indptr, indices, X, W, b=None, *, relu=False,
                 data=None, **options):
        job = SPEC.check(SPEC.job(indptr, indices, X, W, b, relu=relu, data=data), config)
        res = Driver(SPEC, config, "rtl", simulator).run(job, checked=True, **options)
        self.Y = res.output
        self.config = config
        self.report = SPEC.report(res, job, config)


def _expect(indptr, indices, X, W, b, relu, data=None):
    if data is None:
        data = golden.gcn_weights(indptr, indices, X.shape[0])
    return golden.layer(indptr, indices, data, X, W, b, relu)


def _check(res, indptr, indices, X, W, b, relu, data=None):
    assert np.array_equal(as_bits(res.Y), as_bits(_expect(indptr, indices, X, W, b, relu, data)))
    r = res.report
    assert r["feature_reads"] == r["distinct_sources"]
    assert r["words_read"] == r["distinct_sources"] * W.shape[0]
    assert r["words_written"] == W.shape[1] * (len(indptr) - 1)
    if res.config.pipelined:
        # the update runs from the job's start: the compute cycles are the busy span
        assert r["cycles_update"] == r["cycles_compute"] >= r["cycles_aggregate"]
    else:
        assert r["cycles_compute"] == r["cycles_aggregate"] + r["cycles_update"]
    assert r["cycles_total"] == r["cycles_load"] + r["cycles_compute"]


def test_pysim_small_layer():
    indptr, indices, data, X, W, b = hub_job(0, 9, 6, 5, 6, hub_edges=7, shared_dst_edges=5)
    res = Run(TINY, "pysim", indptr, indices, X, W, b, relu=True, data=data)
    _check(res, indptr, indices, X, W, b, True, data)


@pytest.mark.parametrize("seed,layer,f_in,f_out", [(0, 0, 16, 16), (1, 1, 13, 7), (2, 0, 8, 16)])
def test_verilator_sampled_minibatches(seed, layer, f_in, f_out):
    # fan-outs (25, 10): layer 0 is the input layer (many sources, most with one out-edge),
    # layer 1 the output layer (few destinations, sources shared)
    indptr, indices, X, W, b = sampled_job(seed, 3, (25, 10), f_in, f_out, layer=layer)
    res = Run(TINY, "verilator", indptr, indices, X, W, b, relu=seed % 2 == 0)
    _check(res, indptr, indices, X, W, b, seed % 2 == 0)
    assert res.report["edges"] == indices.size


def test_verilator_hub_source_shared_destination_idle_and_backpressure():
    indptr, indices, data, X, W, b = hub_job(5, 40, 30, 16, 12, hub_edges=70,
                                             shared_dst_edges=60)
    res = Run(TINY, "verilator", indptr, indices, X, W, b, data=data,
                                               idle_every=3, stall_every=2)
    _check(res, indptr, indices, X, W, b, False, data)
    r = res.report
    assert r["stall_output"] > 0 and r["stall_gather"] > 0
    # the hub's row is read once although 70 edges use it
    assert r["feature_reads"] == np.unique(indices).size


def _bad_streams(kind, config):
    f_in = 2 if kind == "source_first" else 6     # 2: one beat per row, the tightest timing
    indptr, indices, data, X, W, b = hub_job(7, 12, 10, f_in, 5, hub_edges=8,
                                             shared_dst_edges=4)
    if kind == "dest_empty_rows":
        # nine more destinations without in-edges: rows final from the start, numbered first,
        # more than a block's worth, which no block may take while the job is bad
        indptr = np.concatenate([indptr, np.full(9, indptr[-1])])
        kind = "dest_high"
    args = check_job(indptr, indices, X, W, b, data, config)
    job = pack_job(*args, relu=False, config=config)
    streams = {k: v.copy() for k, v in job.streams.items()}
    if kind == "source":
        streams["src_in"][1, 0] = (streams["src_in"][1, 0] & 0xFFFF0000) | 10   # only 10 rows
    elif kind == "source_first":                  # the dispatcher waits for this row at once
        streams["src_in"][0, 0] = (streams["src_in"][0, 0] & 0xFFFF0000) | 11
    elif kind == "dest":
        streams["edge_in"][3, 1] = (streams["edge_in"][3, 1] & 0x80000000) | 12  # n_dst = 12
    elif kind == "dest_high":                     # 3 in the index bits, 64 above them
        streams["edge_in"][3, 1] = (streams["edge_in"][3, 1] & 0x80000000) | 67
    elif kind == "edges_short":
        streams["src_in"][-1, 0] += 1 << 16        # one edge more than loaded
    elif kind == "edges_extra":
        streams["src_in"][0, 0] -= 1 << 16         # one loaded edge left over
    return streams, job.scalars


@pytest.mark.parametrize("kind,flag", [("source", "err_source"),
                                       ("source_first", "err_source"), ("dest", "err_dest"),
                                       ("dest_high", "err_dest"),
                                       ("dest_empty_rows", "err_dest"),
                                       ("edges_short", "err_edges"),
                                       ("edges_extra", "err_edges")])
def test_cocotb_verilator_error_flags_stop_cleanly(kind, flag):
    _bad_job_stops(kind, flag, TINY)


@pytest.mark.slow            # a cocotb build of its own: make test-slow
@pytest.mark.parametrize("kind,flag", [("source", "err_source"), ("dest_high", "err_dest"),
                                       ("edges_extra", "err_edges")])
def test_cocotb_verilator_error_flags_stop_cleanly_without_pipelining(kind, flag):
    _bad_job_stops(kind, flag, replace(TINY, pipelined=False))


def _bad_job_stops(kind, flag, config):
    streams, scalars = _bad_streams(kind, config)
    out = run(gateware("hyscale", simulate=True), config, stream_job, "verilator",
              max_cycles=20_000, proto=SPEC.protocol, streams=streams, scalars=scalars).value
    assert out[flag] == 1
    assert sum(out[f] for f in ("err_source", "err_dest", "err_edges")) == 1
    assert out["beats"] == []                     # nothing written back from a bad job
    # the layer checks the lists as they load: a bad job stops at its start, before it reads a
    # feature row or streams an edge
    assert out["spe_busy"] == 0 and out["feature_reads"] == 0
    assert out["cycles_total"] <= 4


def test_cocotb_verilator_reset_mid_job_then_rerun():
    indptr, indices, X, W, b = sampled_job(3, 2, (25, 10), 16, 16, layer=0)
    res = Run(TINY, "verilator", indptr, indices, X, W, b, relu=True,
                                               reset_after=150)
    _check(res, indptr, indices, X, W, b, True)


@needs_icarus
def test_icarus_layer():
    indptr, indices, data, X, W, b = hub_job(9, 10, 8, 7, 5, hub_edges=9, shared_dst_edges=6)
    res = Run(TINY, "icarus", indptr, indices, X, W, b, data=data, relu=True,
                                            stall_every=3)
    _check(res, indptr, indices, X, W, b, True, data)


def test_benchmark_script_runs_and_reports(tmp_path):
    from moagcn.sim.benches import hyscale as bench_hyscale
    rc = bench_hyscale.main(["--preset", "tiny", "--param", "spes=2", "--param", "macs=4",
                             "--width", "16",
                             "--targets", "3", "--jobs", "1", "--graph-nodes", "2000",
                             "--out", str(tmp_path)])
    assert rc == 0
    import json
    out = json.loads((tmp_path / "hyscale_bench.json").read_text())
    summary = out["summary"]
    assert summary["all_bit_exact"] and summary["feature_reads_equal_distinct_sources"]
    assert len(out["runs"]) == 2 and (tmp_path / "hyscale_bench.png").stat().st_size > 0
    assert (tmp_path / "hyscale_bench.csv").read_text().count("\n") == 3


def test_cocotb_verilator_sampled_minibatch_with_idle_and_backpressure():
    # the same RTL as the lean-harness tests, through cocotb (the per-cycle Python testbench)
    from moagcn.sim.hyscale.spec import unpack_y
    from moagcn.sim.rtl.stream_tb import int_words
    indptr, indices, X, W, b = sampled_job(6, 2, (25, 10), 16, 10, layer=0)
    data = golden.gcn_weights(indptr, indices, X.shape[0])
    job = pack_job(*check_job(indptr, indices, X, W, b, data, TINY), relu=True, config=TINY)
    out = run(gateware("hyscale", simulate=True), TINY, stream_job, "verilator", max_cycles=200_000,
              proto=SPEC.protocol, streams=job.streams, scalars=job.scalars, idle_every=4,
              stall_every=3).value
    Y = unpack_y(int_words(out["beats"], TINY.mem_words_per_cycle), job, indptr.size - 1,
                 W.shape[1], TINY)
    assert np.array_equal(as_bits(Y), as_bits(_expect(indptr, indices, X, W, b, True, data)))
    assert out["feature_reads"] == np.unique(indices).size and out["stall_output"] > 0


def test_pysim_single_pe_pair():
    # n = 1: one S-PE / G-PE pair, every destination in one bank
    cfg = preset("tiny", spes=1)
    indptr, indices, data, X, W, b = hub_job(2, 8, 6, 5, 4, hub_edges=6, shared_dst_edges=4)
    res = Run(cfg, "pysim", indptr, indices, X, W, b, data=data)
    _check(res, indptr, indices, X, W, b, False, data)


@pytest.mark.parametrize("slots,queue", [(2, 1), (2, 3), (4, 5)])
def test_queues_of_any_depth_and_a_two_slot_ring_are_bit_and_cycle_exact(slots, queue):
    # edge queues as rings of 1, 3 and 5 registers (pointers that wrap short of a power of
    # two), a ring of two feature rows: every source's edges spread over both banks, so slots
    # wait for queued edges before they are released; the golden bits, the replay's cycles
    config = preset("tiny", feature_slots=slots, edge_queue=queue)
    rng = np.random.default_rng(slots * 10 + queue)
    n_src, n_dst, f_in = 40, 6, 16
    rows = [[] for _ in range(n_dst)]
    for u in range(n_src):
        for v in rng.choice(n_dst, 4, replace=False):
            rows[v].append(u)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.array([u for r in rows for u in r], dtype=np.int64)
    X = rng.standard_normal((n_src, f_in)).astype(np.float32)
    W = rng.standard_normal((f_in, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    job = SPEC.check(SPEC.job(indptr, indices, X, W, b), config)
    got = Driver(SPEC, config, "rtl", "verilator").run(job, checked=True)
    assert np.array_equal(as_bits(got.output), as_bits(_expect(indptr, indices, X, W, b, False)))
    want = Driver(SPEC, config, "model").run(job, checked=True).counters
    assert got.counters.cycles_compute == want.cycles_compute
    assert got.counters.extra["stall_feature"] > 0
