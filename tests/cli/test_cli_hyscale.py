"""`moagcn hyscale run` and `hw generate hyscale` (and its earlier name hyscale-layer): outputs, report fields, one-line errors."""

import json

import numpy as np
import pytest

from moagcn.sim.hyscale import golden

from ..hyscale.jobs import sampled_job
from .test_cli import device_args, moagcn

REPORT_KEYS = ("cycles_total", "cycles_aggregate", "cycles_update", "edges", "distinct_sources",
               "feature_reads", "words_read", "words_written", "model_cycles", "model_error",
               "spe_utilization", "mac_utilization", "sim_cycles_per_s")


@pytest.fixture
def job_files(tmp_path):
    indptr, indices, X, W, b = sampled_job(4, 3, (25, 10), 12, 10, layer=0)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices,
             shape=np.array([indptr.size - 1, X.shape[0]]))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", W)
    np.save(tmp_path / "b.npy", b)
    return tmp_path, (indptr, indices, X, W, b)


def _run(d, *extra, graph="g.npz", features="x.npy", weight="w.npy"):
    return moagcn("hyscale", "run", "--graph", d / graph, "--features", d / features,
                  "--weight", d / weight, "--out", d / "y.npy", "--report", d / "r.json",
                  "--preset", "tiny", *extra)


def test_the_report_is_optional(job_files):
    d, _ = job_files
    out = moagcn("hyscale", "run", "--graph", d / "g.npz", "--features", d / "x.npy",
                 "--weight", d / "w.npy", "--out", d / "y.npy", "--preset", "tiny",
                 "--device", "model")
    assert out.returncode == 0, out.stderr
    assert (d / "y.npy").exists() and not list(d.glob("*.json"))
    assert out.stdout.rstrip().endswith(str(d / "y.npy"))


@pytest.mark.xdist_group("verilator-hyscale")
@pytest.mark.parametrize("backend", ["model", "verilator"])
def test_hyscale_run_writes_y_and_report(job_files, backend):
    d, (indptr, indices, X, W, b) = job_files
    out = _run(d, "--bias", d / "b.npy", "--relu", *device_args(backend))
    assert out.returncode == 0, out.stderr
    data = golden.gcn_weights(indptr, indices, X.shape[0])
    Y = np.load(d / "y.npy")
    if backend == "model":   # the model against float64 (the golden model is its own code)
        Y64, bound = golden.float64_layer(indptr, indices, data, X, W, b, relu=True)
        assert (np.abs(Y - Y64) <= bound + 1e-30).all()
    else:                    # the RTL against the golden model, bit for bit
        want = golden.layer(indptr, indices, data, X, W, b, relu=True)
        assert np.array_equal(Y.view(np.uint32), want.view(np.uint32))
    report = json.loads((d / "r.json").read_text())
    for key in REPORT_KEYS:
        assert key in report, key
    assert report["feature_reads"] == report["distinct_sources"] == np.unique(indices).size
    assert report["edges"] == indices.size
    assert report["device"] == ("model" if backend == "model" else "rtl")
    if backend == "verilator":
        assert report["cycles_total"] > 0 and report["sim_cycles_per_s"] > 0
        assert 0 < report["spe_utilization"] <= 1 and 0 < report["mac_utilization"] <= 1


@pytest.mark.xdist_group("verilator-hyscale")
def test_hyscale_run_pipelined_gives_the_same_y_in_fewer_cycles(job_files):
    """`--param pipelined=true`: the same bits as the golden model, fewer cycles than without,
    and the report's model is the pipelined replay (within a few cycles)."""
    d, (indptr, indices, X, W, b) = job_files
    cycles = {}
    for flag in ("false", "true"):
        out = _run(d, "--bias", d / "b.npy", "--relu", "--param", f"pipelined={flag}")
        assert out.returncode == 0, out.stderr
        data = golden.gcn_weights(indptr, indices, X.shape[0])
        want = golden.layer(indptr, indices, data, X, W, b, relu=True)
        assert np.array_equal(np.load(d / "y.npy").view(np.uint32), want.view(np.uint32))
        report = json.loads((d / "r.json").read_text())
        assert abs(report["cycles_total"] - report["model_cycles"]) <= 2
        cycles[flag] = report["cycles_total"]
    assert cycles["true"] < cycles["false"]


def test_hyscale_run_uses_edge_weights_from_the_graph(job_files):
    d, (indptr, indices, X, W, b) = job_files
    data = np.linspace(-1, 1, indices.size).astype(np.float32)
    np.savez(d / "gw.npz", indptr=indptr, indices=indices, data=data)
    out = _run(d, "--device", "model", graph="gw.npz")
    assert out.returncode == 0, out.stderr
    want = golden.layer(indptr, indices, data, X, W)
    assert np.array_equal(np.load(d / "y.npy").view(np.uint32), want.view(np.uint32))


def test_hyscale_run_takes_a_hub_beyond_the_buffers(tmp_path):
    """A destination with 700 in-neighbours (tiny holds 512 sources per job) among short rows:
    exit 0, Y the golden layer with the preset's buffers, two jobs' counters in the report."""
    rng = np.random.default_rng(7)
    rows = [rng.permutation(800)[:700]] + [rng.integers(0, 800, 3) for _ in range(99)]
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    indices = np.concatenate(rows).astype(np.int64)
    X = rng.standard_normal((800, 6)).astype(np.float32)
    W = rng.standard_normal((6, 4)).astype(np.float32)
    np.savez(tmp_path / "g.npz", indptr=indptr, indices=indices, shape=np.array([100, 800]))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "w.npy", W)
    out = _run(tmp_path, "--relu", "--device", "model")
    assert out.returncode == 0, out.stderr
    data = golden.gcn_weights(indptr, indices, 800)
    want = golden.layer(indptr, indices, data, X, W, relu=True, buffer=(1024, 512))
    assert np.array_equal(np.load(tmp_path / "y.npy").view(np.uint32), want.view(np.uint32))
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["model_error"] == 0.0 and r["tiles"] >= 3 and r["destinations"] == 100


@pytest.mark.parametrize("case,needle", [
    ("missing", "no such file"),
    ("index", "out of range"),
    ("dtype", "float32"),
    ("shape", "must match"),
    ("spes", "spes=3"),
    ("indptr", "indptr"),
])
def test_hyscale_run_bad_input_is_one_line(job_files, case, needle):
    d, (indptr, indices, X, W, b) = job_files
    kwargs, extra = {}, []
    if case == "missing":
        kwargs["features"] = "nope.npy"
    elif case == "index":
        bad = indices.copy()
        bad[0] = X.shape[0] + 5
        np.savez(d / "bad.npz", indptr=indptr, indices=bad)
        kwargs["graph"] = "bad.npz"
    elif case == "dtype":
        np.save(d / "x64.npy", X.astype(np.float64))
        kwargs["features"] = "x64.npy"
    elif case == "shape":
        np.save(d / "w2.npy", W[:-1])
        kwargs["weight"] = "w2.npy"
    elif case == "spes":
        extra = ["--param", "spes=3"]
    elif case == "indptr":
        bad = indptr.copy()
        bad[1], bad[2] = bad[2], bad[1]
        np.savez(d / "bad.npz", indptr=bad, indices=indices)
        kwargs["graph"] = "bad.npz"
    out = _run(d, "--device", "model", *extra, **kwargs)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_hw_generate_hyscale_layer(tmp_path):
    # the tiny preset's values spelled as parameters over the default preset: the same
    # configuration as tests/cli/test_registry.py generates, so one Verilog for both
    out = moagcn("hw", "generate", "hyscale-layer", "--param", "spes=2", "--param", "macs=4",
                 "--param", "max_feature_width=16", "--param", "mem_words_per_cycle=2",
                 "--param", "max_sources=512", "--param", "max_edges=1024",
                 "--param", "max_destinations=64", "--param", "feature_slots=4",
                 "--param", "edge_queue=4", "--param", "add_latency=7",
                 "--param", "mul_latency=7", "--param", "load_banks=2",
                 "--out", tmp_path, "--lint")
    assert out.returncode == 0, out.stderr
    assert "lint: clean" in out.stdout
    text = (tmp_path / "hyscale-layer.v").read_text()
    assert "module hyscale_layer" in text
    meta = json.loads((tmp_path / "hyscale-layer.json").read_text())
    assert meta["config"]["spes"] == 2 and meta["config"]["macs"] == 4


@pytest.mark.xdist_group("verilator-hyscale")
def test_bench_hyscale_overlap_tiles_a_minibatch_with_and_without_ping_pong(tmp_path):
    out = moagcn("bench", "hyscale-overlap", "--preset", "tiny", "--graph-nodes", "2000",
                 "--targets", "40", "--f-in", "11", "--f-out", "6", "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    res = json.loads((tmp_path / "hyscale_overlap.json").read_text())
    one, two = res["rows"]
    assert one["load_banks"] == 1 and two["load_banks"] == 2
    assert one["tiles"] == two["tiles"] > 1
    assert one["bit_exact"] and two["bit_exact"]
    assert one["cycles_load_hidden"] == 0 < two["cycles_load_hidden"]
    # the same loads and compute; two banks hide part of the loads behind the compute
    assert one["cycles_load"] == two["cycles_load"] + two["cycles_load_hidden"]
    assert one["cycles_compute"] == two["cycles_compute"]
    assert res["speedup"] == pytest.approx(one["cycles_total"] / two["cycles_total"])
    assert res["speedup"] > 1
    for row in res["rows"]:
        assert abs(row["model_error"]) < 0.03
    assert "ping-pong load buffers" in out.stdout
    assert (tmp_path / "hyscale_overlap.png").stat().st_size > 0


def test_bench_hyscale_overlap_bad_fanout_is_one_line(tmp_path):
    out = moagcn("bench", "hyscale-overlap", "--fanout", "10,0", "--out", tmp_path)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "--fanout '10,0'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("param,says", [("load_banks=1", "runs load_banks 1 and 2 itself"),
                                        ("nonsense=1", "nonsense")])
def test_bench_hyscale_overlap_bad_param_is_one_line(tmp_path, param, says):
    out = moagcn("bench", "hyscale-overlap", "--param", param, "--out", tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and says in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
