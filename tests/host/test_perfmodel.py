"""The learned device performance model: device specs, sampling, features, fitting, persistence,
mismatch errors, held-out accuracy and the ``perfmodel`` CLI.

Every accelerator runs on its cycle model (deterministic); the CPU device is timed only in a
smoke test. No assertion depends on wall-clock time.
"""

import argparse
import csv
import json
import math

import numpy as np
import pytest

from moagcn.cli import perfmodel as cli_perfmodel
from moagcn.core.device import CpuDevice
from moagcn.core.names import PERF_KEEPS, PERF_WIDTHS
from moagcn.errors import UserError
from moagcn.host.devices.select import parse_device, parse_devices
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.vgnn import augment as pma, features as pmf, perfmodel as pm, regressors as pmr
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.sim.sspmm.model import estimate

#: a hand-built graph: degrees 2, 0, 3, 1, 0 (two rows without neighbours)
HAND = CSRGraph([0, 2, 2, 5, 6, 6], [1, 2, 0, 1, 3, 4])


# -- device specs --------------------------------------------------------------------------------

def test_parse_devices_keys_and_capability():
    devs = parse_devices("sspmm:lanes=32, sspmm:lanes=8:clock_mhz=150,cpu:adds_per_s=2e10,"
                            "hyscale,sspmm:preset=multi")
    assert [d.key for d in devs] == ["sspmm:lanes=32", "sspmm:clock_mhz=150.0:lanes=8",
                                     "cpu:adds_per_s=20000000000.0", "hyscale",
                                     "sspmm:preset=multi"]
    # peak adds/s: lanes x clock (S-SpMM: slices x P adders; HyScale: its S-PEs)
    assert devs[0].capability() == 32 * 200e6
    assert devs[1].capability() == 8 * 150e6
    assert devs[2].capability() == 2e10
    assert devs[3].capability() == 4 * 200e6
    assert devs[4].capability() == 4 * 8 * 200e6
    assert devs[1].config().clock_mhz == 150.0 and devs[1].config().lanes == 8


def test_one_configuration_has_one_key():
    a, b, c = (parse_device(t) for t in ("sspmm:clock_mhz=150", "sspmm:clock_mhz=150.0",
                                            "sspmm:preset=default:lanes=16"))
    assert a.key == b.key == "sspmm:clock_mhz=150.0"
    assert c.key == "sspmm"


def test_measured_cpu_capability_is_positive():
    dev = parse_device("cpu")
    assert dev.key == "cpu"
    assert dev.capability() > 0


@pytest.mark.parametrize("text, says", [
    ("foo", "unknown design 'foo'"),
    ("foo:lanes=4", "unknown design 'foo'"),
    ("sspmm:lane=8", "no parameter 'lane'"),
    ("cpu:lanes=4", "no parameter 'lanes'"),
    ("sspmm:lanes", "is not KEY=VALUE"),
    ("sspmm:lanes=", "is not KEY=VALUE"),
    ("=3", "expected DESIGN"),
    ("sspmm:lanes=abc", "expected an integer"),
    ("sspmm:lanes=0", "lanes=0 is not supported"),
    ("sspmm:lanes=-8", "lanes=-8 is not supported"),
    ("sspmm:clock_mhz=0", "clock_mhz=0.0 must be > 0"),
    ("hyscale:clock_mhz=-1", "must be positive"),
    ("cpu:adds_per_s=0", "positive number"),
    ("cpu:adds_per_s=fast", "not a number"),
    ("cpu:preset=big", "no presets"),
    ("sspmm:preset=huge", "unknown preset 'huge'"),
    ("sspmm:lanes=8:lanes=16", "given twice"),
])
def test_bad_device_spec_names_the_spec_and_the_fix(text, says):
    with pytest.raises(UserError) as err:
        parse_devices(f"sspmm:lanes=32,{text}")
    msg = str(err.value)
    assert f"--devices {text!r}" in msg and says in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text, says", [
    ("", "--devices is empty"),
    ("sspmm,,cpu", "empty spec between commas"),
    ("sspmm,sspmm:lanes=16", "the same device as 'sspmm'"),
])
def test_bad_device_lists(text, says):
    with pytest.raises(UserError, match=says):
        parse_devices(text)


def test_make_builds_the_devices():
    acc, cpu = parse_devices("sspmm:lanes=8:clock_mhz=150,cpu")
    dev = acc.on("model").make()
    assert dev.kind == "model" and dev.lanes == 8 and dev.clock_mhz == 150.0
    assert isinstance(cpu.on("model").make(), CpuDevice)
    with pytest.raises(UserError, match="use model"):
        acc.on("cpu")


# -- time, sampling, features --------------------------------------------------------------------

def test_model_time_is_the_cycle_model_over_the_clock():
    g = sbm(n_nodes=200, seed=3).graph
    spec = parse_device("sspmm:lanes=8:clock_mhz=150")
    config = SSpmmConfig(lanes=8, clock_mhz=150.0)
    for width in (16, 20, 64):
        cycles = estimate(g.indptr, None, width, config).cycles_total
        assert pma.aggregation_time(spec.on("model").make(), g, width) == cycles / 150e6


def test_induced_subgraph_matches_scipy():
    g = sbm(n_nodes=120, seed=5).graph
    nodes = np.sort(np.random.default_rng(1).choice(120, size=50, replace=False))
    sub = pma.induced_subgraph(g, nodes)
    ref = g.to_scipy()[nodes][:, nodes]
    assert sub.shape == (50, 50)
    assert (sub.to_scipy() != ref).nnz == 0


def test_sampling_is_seeded_and_covers_the_ratios():
    g = sbm(n_nodes=150, seed=2).graph
    a = pma.sample_subgraphs(g, (0.2, 0.5, 1.0), seeds=3, seed=7, blocks=False)
    b = pma.sample_subgraphs(g, (0.2, 0.5, 1.0), seeds=3, seed=7, blocks=False)
    c = pma.sample_subgraphs(g, (0.2, 0.5, 1.0), seeds=3, seed=8, blocks=False)
    assert [s.graph.n_rows for s in a] == [30, 30, 30, 75, 75, 75, 150]   # 1.0 drawn once
    assert all(x.graph == y.graph for x, y in zip(a, b))
    assert any(x.graph != y.graph for x, y in zip(a[:6], c[:6]))
    assert a[-1].graph is g
    with pytest.raises(UserError, match="--ratios"):
        pma.sample_subgraphs(g, (0.5, 1.5))


def test_worker_blocks_are_the_rows_a_partition_worker_aggregates():
    """Each sampled sub-graph is followed by the blocks of a split of its rows: every row once,
    every entry of those rows kept, the columns the rows themselves plus the neighbours they
    read (checked against a dense slice), in the sub-graph's held-out group."""
    g = sbm(n_nodes=150, seed=2).graph
    subs = pma.sample_subgraphs(g, (0.5, 1.0), seeds=2, seed=3)
    whole = {s.name: s for s in subs if s.group == s.name}
    blocks = [s for s in subs if s.group != s.name]
    assert {b.group for b in blocks} == set(whole)
    for name, sub in whole.items():
        mine = [b for b in blocks if b.group == name]
        assert 2 <= len(mine) <= 4
        assert sum(b.graph.n_rows for b in mine) == sub.graph.n_rows
        assert sum(b.graph.nnz for b in mine) == sub.graph.nnz
    # a hand check of worker_block on a known split
    rows = np.array([0, 3, 7, 40])
    blk = pma.worker_block(g, rows)
    dense = g.to_scipy().toarray()[rows]
    cols = np.union1d(rows, np.nonzero(dense.any(axis=0))[0])
    assert blk.shape == (4, cols.size)
    assert np.array_equal(blk.to_scipy().toarray(), dense[:, cols])
    f = dict(zip(pmf.GRAPH_FEATURES, pmf.graph_features(blk, 8)))
    assert (f["nodes"], f["cols"]) == (4, cols.size)


def test_graph_features_of_a_hand_built_graph():
    f = dict(zip(pmf.GRAPH_FEATURES, pmf.graph_features(HAND, 10)))
    # degrees 2, 0, 3, 1, 0: mean 6/5, population variance 14/5 - (6/5)^2
    assert f == pytest.approx({"nodes": 5, "cols": 5, "edges": 6, "deg_mean": 1.2,
                               "deg_std": math.sqrt(2.8 - 1.44), "deg_max": 3, "isolated": 2,
                               "width": 10,
                               # non-empty rows 2, 3, 1 topped up to k: (k - 2) + (k - 3) + (k - 1)
                               "short2": 1, "short4": 6, "short8": 18, "short16": 42,
                               "keep": 1.0, "heads": 1})
    assert dict(zip(pmf.GRAPH_FEATURES, pmf.graph_features(HAND, 10, 0.25)))["keep"] == 0.25
    assert dict(zip(pmf.GRAPH_FEATURES, pmf.graph_features(HAND, 10, 1, 8)))["heads"] == 8
    with pytest.raises(UserError, match="heads 0"):
        pmf.graph_features(HAND, 10, 1, 0)
    for bad in (0, 1.5, "x"):
        with pytest.raises(UserError, match="kept fraction"):
            pmf.graph_features(HAND, 10, bad)


def test_device_features_read_the_configuration():
    s = pmf.device_features(parse_device("sspmm"))
    assert s == {"lanes": 16, "clock_mhz": 200.0, "capability": 3.2e9, "output_words": 16,
                 "words_per_cycle": 4, "granule": 4, "latency": 7, "buffer_nodes": 4096,
                 "buffer_edges": 65536, "buffer_width": 64, "dense_units": 0,
                 "mem_gb_per_s": 4 * 4 * 200 / 1e3}
    h = pmf.device_features(parse_device("hyscale"))
    assert (h["lanes"], h["output_words"], h["words_per_cycle"], h["granule"]) == (4, 4, 4, 1)
    assert (h["buffer_nodes"], h["buffer_edges"], h["dense_units"]) == (256, 4096, 16)
    assert h["mem_gb_per_s"] == 12.8


def _terms(graph, width, spec):
    G = pmf.graph_features(graph, width)[None, :]
    D = np.array([[pmf.device_features(parse_device(spec))[k] for k in pmf.DEVICE_FEATURES]])
    return dict(zip(pmf.COST_TERMS, pmf.cost_terms(G, D)[0]))


def test_cost_terms_of_a_hand_built_graph():
    t = _terms(HAND, 10, "sspmm")
    f = 200e6
    distinct = 5 * (1 - math.exp(-1.2))        # one row tile: 5 nodes, mean degree 1.2
    assert t == pytest.approx({
        "t_adds": 6 * 12 / (16 * f),            # width 10 padded to the 4-lane group: 12
        "t_feature_load": 5 * 10 / (4 * f),     # 5 columns (feature rows read)
        "t_index_load": (5 + 6) / (4 * f),
        "t_rows": 5 / f,
        "t_output": 5 * 10 / (16 * f),
        "t_hub": 3 * 7 / f,
        "t_gather": distinct * 64 / (4 * f),    # a row padded to the 64-wide buffer
        "t_dense": 0.0,
        "t_tiles": 1 / f,
        "t_mask": 0.0,
        "t_fixed": 1 / f}, rel=1e-12)
    # an output mask keeping a quarter: a row's kept elements X ~ Binomial(10, 1/4) take
    # E[ceil(X / 4)] lane groups of 4 (enumerated here), the output carries a quarter, and the
    # mask streams one row per beat
    p = [math.comb(10, x) * 0.25 ** x * 0.75 ** (10 - x) for x in range(11)]
    groups = sum(px * math.ceil(x / 4) for x, px in enumerate(p))
    G = pmf.graph_features(HAND, 10, 0.25)[None, :]
    D = np.array([[pmf.device_features(parse_device("sspmm"))[k] for k in pmf.DEVICE_FEATURES]])
    m = dict(zip(pmf.COST_TERMS, pmf.cost_terms(G, D)[0]))
    assert m["t_adds"] == pytest.approx(6 * 4 * groups / (16 * f), rel=1e-12)
    assert m["t_output"] == pytest.approx(5 * 10 * 0.25 / (16 * f), rel=1e-12)
    assert m["t_mask"] == pytest.approx(5 / f, rel=1e-12)
    assert {k: m[k] for k in ("t_feature_load", "t_gather", "t_rows")} == \
        {k: t[k] for k in ("t_feature_load", "t_gather", "t_rows")}
    # HyScale aggregates through its W = I update: width 100 is tiles of 64 and 36
    h = _terms(HAND, 100, "hyscale")
    assert h["t_dense"] == pytest.approx(5 * (64 ** 2 + 36 ** 2) / (16 * f), rel=1e-12)
    assert h["t_tiles"] == pytest.approx(2 / f, rel=1e-12)


# -- fitting and persistence ---------------------------------------------------------------------

SMALL_DEVICES = "sspmm,sspmm:lanes=8:clock_mhz=150,hyscale"


@pytest.fixture(scope="module")
def small_model():
    graph = sbm(n_nodes=300, seed=1).graph
    return pm.fit(graph, parse_devices(SMALL_DEVICES), ratios=(0.25, 0.5, 0.75, 1.0),
                  widths=(8, 16, 20), seeds=2, seed=3, name="sbm300")


def test_fit_reports_every_regressor_and_keeps_the_lowest_mape(small_model):
    rep = small_model.report
    assert [s.regressor for s in rep.scores] == list(pmr.REGRESSORS)
    subs = pma.sample_subgraphs(sbm(n_nodes=300, seed=1).graph, (0.25, 0.5, 0.75, 1.0),
                               seeds=2, seed=3)
    assert len(subs) > 7                           # 7 sub-graphs and their worker blocks
    assert rep.train_runs + rep.test_runs == len(subs) * 3 * 3 * len(PERF_KEEPS)
    assert rep.test_runs > 0
    best = min(rep.scores, key=lambda s: s.mape)
    assert rep.chosen == small_model.regressor == best.regressor
    for s in rep.scores:
        assert s.mse >= 0 and s.mae >= 0 and s.mape >= 0 and s.us_per_prediction > 0
    assert list(small_model.devices) == ["sspmm", "sspmm:clock_mhz=150.0:lanes=8", "hyscale"]


def test_predictions_are_positive_and_ordered_by_capability(small_model):
    g = sbm(n_nodes=250, seed=9).graph
    fast = small_model.predict(g, 16, "sspmm")
    slow = small_model.predict(g, 16, parse_device("sspmm:lanes=8:clock_mhz=150"))
    assert 0 < fast < slow


def test_save_load_round_trip_predicts_the_same(small_model, tmp_path):
    path = small_model.save(tmp_path / "m.json")
    state = json.loads(path.read_text())           # plain JSON: no pickled objects
    assert state["regressor"]["name"] == small_model.regressor
    assert [d["key"] for d in state["devices"]] == list(small_model.devices)
    loaded = pm.PerfModel.load(path, parse_devices("hyscale,sspmm"))
    graphs = [sbm(n_nodes=n, seed=n).graph for n in (100, 260)] + [HAND]
    for g in graphs:
        for width in (8, 20, 33):
            for key in small_model.devices:
                assert loaded.predict(g, width, key) == small_model.predict(g, width, key)


def test_a_model_without_the_device_says_how_to_fit_one(small_model, tmp_path):
    path = small_model.save(tmp_path / "m.json")
    with pytest.raises(UserError) as err:
        pm.PerfModel.load(path, parse_devices("sspmm,sspmm:lanes=32"))
    msg = str(err.value)
    assert "no device 'sspmm:lanes=32'" in msg and "moagcn perfmodel fit --devices" in msg
    assert "sspmm:lanes=32 --dataset sbm300" in msg
    with pytest.raises(UserError, match="no device 'cpu'"):
        small_model.predict(HAND, 8, "cpu")


def test_load_rejects_what_is_not_a_model(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        pm.PerfModel.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not a readable JSON"):
        pm.PerfModel.load(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(UserError, match="not a moagcn performance model"):
        pm.PerfModel.load(other)


def test_fit_needs_two_subgraphs():
    with pytest.raises(UserError, match="at least two sub-graphs"):
        pm.fit(HAND, parse_devices("sspmm"), ratios=(1.0,), widths=(8,))


def test_cpu_smoke():
    # wall-clock timing: only that it runs and gives positive finite figures
    graph = sbm(n_nodes=120, seed=4).graph
    model = pm.fit(graph, parse_devices("cpu,sspmm"), ratios=(0.5, 1.0), widths=(8, 16),
                   seeds=2, regressors=("cost_terms", "linear", "decision_tree"))
    assert model.devices["cpu"].is_cpu
    assert model.state["devices"][0]["capability"] > 0
    t = model.predict(graph, 16, "cpu")
    assert math.isfinite(t) and t > 0


# -- held-out accuracy ---------------------------------------------------------------------------

#: held-out MAPE measured with the test below (scikit-learn 1.9.1; chosen: svr): CiteSeer
#: 5.2 %, the power-law graph 4.9 % (worst single run 11 %); the issue's target is 10 %
HELD_OUT_BOUND = 0.10


@pytest.mark.slow
def test_held_out_mape_on_graphs_never_sampled():
    devices = parse_devices("sspmm,sspmm:lanes=32,sspmm:lanes=8:clock_mhz=150")
    model = pm.fit("cora", devices)
    graphs = {name: pma.load_graph(name) for name in ("citeseer", pma.POWERLAW)}
    res = pm.held_out(model, graphs, PERF_WIDTHS)
    assert len(res.rows) == 2 * len(PERF_WIDTHS) * len(PERF_KEEPS) * 3
    for name in graphs:
        assert res.mape(name) <= HELD_OUT_BOUND, (name, res.mape(name))
    # every prediction within 25 % (measured: 11 %), none off by a factor
    errors = [abs(r["predicted_s"] - r["measured_s"]) / r["measured_s"] for r in res.rows]
    assert max(errors) <= 0.25


# -- CLI -----------------------------------------------------------------------------------------

def _cli(argv):
    parser = argparse.ArgumentParser(prog="moagcn")
    cli_perfmodel.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_fit_and_predict(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert _cli(["perfmodel", "fit", "--devices", "sspmm,sspmm:lanes=32", "--dataset", "sbm",
                 "--ratios", "0.3,0.6,1", "--width-list", "16,20", "--seeds", "2", "--out",
                 str(out), "--regressors", "cost_terms,linear,decision_tree",
                 "--holdout", "powerlaw", "--keeps", "1,0.5", "--quiet"]) == 0
    text = capsys.readouterr().out
    for word in ("regressor", "MSE (ms^2)", "MAPE", "us/pred", "<- chosen", "powerlaw"):
        assert word in text
    assert out.exists() and out.with_suffix(".csv").exists()
    header = out.with_suffix(".csv").read_text().splitlines()[0]
    assert header == ",".join(("op",) + cli_perfmodel.SCORE_COLUMNS)
    with open(tmp_path / "m-holdout.csv") as f:
        assert {r["keep"] for r in csv.DictReader(f)} == {"1.0", "0.5"}
    state = json.loads(out.read_text())
    assert "holdout" in state and state["sampling"]["keeps"] == [1.0, 0.5]
    assert set(np.array(state["samples"]["graph"])[:, pmf.GRAPH_FEATURES.index("keep")]) == \
        {1.0, 0.5}

    assert _cli(["perfmodel", "predict", "--perf-model", str(out), "--dataset", "citeseer",
                 "--width", "20", "--measure"]) == 0
    text = capsys.readouterr().out
    assert "sspmm:lanes=32" in text and "measured (ms)" in text and "MAPE" in text
    assert _cli(["perfmodel", "predict", "--perf-model", str(out), "--dataset", "citeseer",
                 "--width", "20", "--keep", "0.5", "--measure"]) == 0
    assert "output mask keeping 0.5" in capsys.readouterr().out
    with pytest.raises(UserError, match="kept fraction"):
        _cli(["perfmodel", "predict", "--perf-model", str(out), "--dataset", "citeseer",
              "--width", "20", "--keep", "2"])

    with pytest.raises(UserError, match="no device 'hyscale'"):
        _cli(["perfmodel", "predict", "--perf-model", str(out), "--dataset", "citeseer",
              "--width", "20", "--devices", "hyscale"])


def test_cli_fit_on_several_graphs(tmp_path, capsys):
    """--dataset A,B samples both graphs: the model is labelled with both and has samples of
    each (sub-graphs and their worker blocks)."""
    out = tmp_path / "m.json"
    assert _cli(["perfmodel", "fit", "--devices", "sspmm", "--dataset", "powerlaw,sbm",
                 "--ratios", "0.5,1", "--width-list", "8", "--seeds", "1", "--out", str(out),
                 "--regressors", "cost_terms,linear", "--quiet"]) == 0
    assert "powerlaw: 3000 nodes" in capsys.readouterr().out
    state = json.loads(out.read_text())
    assert state["dataset"] == "powerlaw+sbm"
    groups = set(state["samples"]["group"])
    assert {g.split("@")[0] for g in groups} == {"powerlaw", "sbm"}
    assert len(state["samples"]["group"]) > 2 * len(groups)      # blocks share their group


@pytest.mark.parametrize("extra, says", [
    (["--devices", "sspmm", "--dataset", "sbm,sbm"], "several distinct ones"),
    (["--devices", "sspmm:lanes=0"], "lanes=0 is not supported"),
    (["--devices", "sspmm", "--width-list", "16,x"], "--width-list"),
    (["--devices", "sspmm", "--ratios", "0,1"], "--ratios"),
    (["--devices", "sspmm", "--regressors", "magic"], "unknown regressor 'magic'"),
    (["--devices", "sspmm", "--keeps", "1,1"], "--keeps"),
    (["--devices", "sspmm", "--keeps", "1,0"], "kept fraction"),
])
def test_cli_fit_errors(tmp_path, extra, says):
    with pytest.raises(UserError, match=says):
        _cli(["perfmodel", "fit", "--dataset", "sbm", "--out", str(tmp_path / "m.json"),
              "--quiet", *extra])   # a second --dataset overrides the first
    with pytest.raises(UserError, match="ending in .json"):
        _cli(["perfmodel", "fit", "--dataset", "sbm", "--devices", "sspmm", "--out",
              str(tmp_path / "m.txt")])
