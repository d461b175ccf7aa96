"""The online correction of a fleet's split (host/vgnn/adjust.py) and its use by training.

The references are written here from first principles: the best split of devices whose times
are linear in their shares is ``rate_i / sum(rate)``; a model off by a constant factor per
device is exactly corrected by one measurement; blocks are cut with scipy.
"""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.devices.select import parse_devices
from moagcn.host.graphs.generators import rmat
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train
from moagcn.host.vgnn.adjust import EQUAL, ShareAdjuster, check_budget, check_warmup
from moagcn.host.vgnn.perfmodel import fit

FLEET = "sspmm:lanes=32,sspmm:lanes=8"


def linear_devices(rates):
    """Each device's time for a split: its share of a unit of work at its rate."""
    r = np.asarray(rates, dtype=np.float64)
    return lambda s: np.asarray(s, dtype=np.float64) / r


def drive(adj, times_of, epochs):
    """Run ``adj`` for ``epochs`` epochs against the true ``times_of(split)``; the splits run."""
    split = adj.shares
    ran = []
    for e in range(epochs):
        cur = np.full(2, 0.5) if isinstance(split, str) else np.asarray(split)
        ran.append(cur.copy())
        new = adj.observe(e, times_of(cur))
        if new is not None:
            split = new
    return ran


def test_without_a_model_one_correction_reaches_the_rate_ratio():
    rates = np.array([3.0, 1.0])
    adj = ShareAdjuster(np.array([0.5, 0.5]), None, budget=3)
    ran = drive(adj, linear_devices(rates), 4)
    assert np.allclose(ran[1], rates / rates.sum(), atol=1e-9)
    assert [a.reason for a in adj.log] == ["correct"]      # balanced after it: no more moves
    assert adj.log[0].measured_s == pytest.approx([0.5 / 3, 0.5])


def test_a_model_off_by_a_factor_per_device_is_corrected_in_one_step():
    rates = np.array([4.0, 1.0, 2.0])
    true = linear_devices(rates)
    # the model thinks device 0 is 45 % faster and device 2 30 % slower than they are
    wrong = np.array([1 / 1.45, 1.0, 1.3])
    model = lambda s: true(s) * wrong  # noqa: E731
    start = (rates * [1.45, 1.0, 1 / 1.3]) / (rates * [1.45, 1.0, 1 / 1.3]).sum()
    adj = ShareAdjuster(start, model, budget=2)
    ran = drive(adj, true, 3)
    assert np.allclose(ran[1], rates / rates.sum(), atol=1e-6)
    a = adj.log[0]
    assert a.predicted_s == pytest.approx(list(model(start)))
    assert a.corrected_s == pytest.approx([1 / rates.sum()] * 3, rel=1e-6)


def test_a_correction_measured_worse_is_reverted_and_not_tried_again():
    # times jump up at any split but the start (a partition that cuts badly elsewhere)
    start = np.array([0.6, 0.4])

    def times(s):
        base = np.array([s[0] / 2.0, s[1] / 1.0])
        return base if np.allclose(s, start) else base * 1.5
    adj = ShareAdjuster(start, None, budget=3)
    ran = drive(adj, times, 6)
    reasons = [a.reason for a in adj.log]
    assert reasons[:2] == ["correct", "revert"]
    assert np.allclose(ran[2], start) and all(np.allclose(r, start) for r in ran[2:])
    assert reasons.count("correct") == 1


@pytest.mark.parametrize("noise,ends_on_start", [(0.0, True), (0.005, False)])
def test_a_correction_slower_by_less_than_the_noise_is_reverted_only_on_exact_times(
        noise, ends_on_start):
    # the correction lands 0.01 % slower than the start (cycle counts repeat exactly: with
    # noise 0 the run goes back; with wall times' 0.5 % it keeps the correction)
    start = np.array([0.6, 0.4])

    def times(s):
        base = np.array([0.3, 0.4]) if np.allclose(s, start) else np.array([0.35, 0.35])
        return base * (1.0 if np.allclose(s, start) else 0.4 / 0.35 * 1.0001)
    adj = ShareAdjuster(start, None, budget=3, noise=noise)
    ran = drive(adj, times, 6)
    reasons = [a.reason for a in adj.log]
    assert reasons[0] == "correct"
    assert ("revert" in reasons) == ends_on_start
    assert np.allclose(ran[-1], start) == ends_on_start
    assert max(times(ran[-1])) <= max(times(start)) * (1 + noise)


def test_probes_are_measured_and_the_best_split_is_kept():
    rates = np.array([2.0, 1.0])
    # the model's split is bad (0.2 / 0.8); the probe 0.7 / 0.3 is close to the best 2/3
    adj = ShareAdjuster(np.array([0.2, 0.8]), None, budget=1, probes=[np.array([0.7, 0.3]),
                                                                    EQUAL])
    ran = drive(adj, linear_devices(rates), 6)
    reasons = [a.reason for a in adj.log]
    assert reasons[:2] == ["probe", "probe"]
    assert np.allclose(ran[1], [0.7, 0.3]) and np.allclose(ran[2], [0.5, 0.5])
    # the correction starts from the best measured split (the first probe), not the last
    c = adj.log[2]
    assert c.reason == "correct" and c.measured_s == pytest.approx([0.35, 0.3])
    assert np.allclose(ran[3], [2 / 3, 1 / 3], atol=1e-9)


def test_the_budget_bounds_the_corrections():
    # a device whose time is not linear in its share: the corrections keep missing
    def times(s):
        return np.array([s[0] ** 2 * 3, s[1]])
    adj = ShareAdjuster(np.array([0.5, 0.5]), None, budget=2)
    drive(adj, times, 12)
    assert sum(a.reason == "correct" for a in adj.log) <= 2
    assert len(adj.log) <= 2 * 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, "x"])
def test_a_bad_budget_is_named_with_its_range(bad):
    with pytest.raises(UserError, match=r"--adjust .*whole number >= 1"):
        check_budget(bad)
    with pytest.raises(UserError, match=r"--warmup .*whole number >= 1"):
        check_warmup(bad)


# -- training --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    return rmat(scale=9, edge_factor=8, n_features=24, seed=3)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory, data):
    g = data.graph
    m = fit(g, parse_devices(FLEET), ratios=(0.4, 0.7, 1.0), widths=(16, 24), seeds=2,
            regressors=("cost_terms",), keeps=(1.0, 0.5), name="rmat-9-seed3")
    path = tmp_path_factory.mktemp("pm") / "pm.json"
    m.save(path)
    return path


def cfg(**kw):
    base = dict(device="model", workers=2, devices=FLEET, parallelism="mop", hidden=16,
                epochs=6, seed=0)
    return TrainConfig(**{**base, **kw})


def test_spec_with_adjust_corrects_from_measured_times_and_logs_it(data):
    uni = train(data, cfg(balance="uniform")).report()
    res = train(data, cfg(balance="spec", adjust=2))
    rep = res.report()
    log = rep["adjust"]["log"]
    assert rep["initial_shares"] == pytest.approx([0.8, 0.2])
    assert log and log[0]["reason"] == "probe"          # spec probes the equal split
    assert all(len(a["measured_s"]) == 2 for a in log)
    # every epoch's device times are those of its split; the last are the report's
    assert rep["device_time_s_curve"][-1] == rep["device_time_s"]
    assert len(rep["shares_curve"]) == 6 and rep["predicted_device_time_s"] is None
    # a logged measurement is what that epoch measured
    a = log[0]
    assert a["measured_s"] == pytest.approx(rep["device_time_s_curve"][a["epoch"]])
    assert rep["makespan_s"] <= uni["makespan_s"] * 1.005
    # the split does not change the model: the same accuracy as the equal split
    assert rep["test_acc"] == uni["test_acc"]


def test_the_report_predicts_the_blocks_the_runtime_builds(data, model_file):
    """MoP: each device aggregates A + I over its columns; the reference cuts the columns by
    largest remainder and builds A + I with scipy."""
    from moagcn.host.graphs.ops import CSRGraph
    from moagcn.host.vgnn.perfmodel import PerfModel
    c = cfg(balance="vgnn", perf_model=str(model_file), adjust=0, dropout=0.2)
    rep = train(data, c).report()
    g = data.graph
    A = sp.csr_matrix((np.ones(g.nnz), g.indices, g.indptr), shape=(g.n_rows, g.n_cols))
    A = (A + sp.identity(g.n_rows, format="csr")).tocsr()
    A.data[:] = 1.0
    A.sum_duplicates()
    op = CSRGraph(A.indptr.astype(np.int64), A.indices.astype(np.int64), what="A + I")
    back = CSRGraph(A.T.tocsr().indptr.astype(np.int64), A.T.tocsr().indices.astype(np.int64),
                    what="(A + I)^T")
    shares = np.array(rep["shares"])
    pm = PerfModel.load(model_file)
    specs = parse_devices(FLEET)

    def cols(width):
        exact = width * shares
        k = np.floor(exact).astype(int)
        k[np.argsort(-(exact - k), kind="stable")[:width - k.sum()]] += 1
        return k
    widths = [data.n_features, 16]
    want = []
    for i, s in enumerate(specs):
        # forward: the dropout mask keeps 0.8; backward: the ReLU mask, taken as half
        t = sum(pm.predict(op, int(cols(w)[i]), s, 0.8) for w in widths if cols(w)[i])
        t += pm.predict(back, int(cols(16)[i]), s, 0.5) if cols(16)[i] else 0.0
        want.append(t)
    assert rep["predicted_device_time_s"] == pytest.approx(want, rel=1e-9)
    err = rep["prediction_error_curve"][-1]
    assert err == pytest.approx([p / t - 1 for p, t in zip(want, rep["device_time_s"])])


def test_vgnn_adjusts_by_default_and_never_ends_behind_its_start(data, model_file):
    res = train(data, cfg(balance="vgnn", perf_model=str(model_file),
                          parallelism="partition", partition="metis", epochs=8))
    rep = res.report()
    assert rep["adjust"]["budget"] == 3 and rep["adjust"]["log"]
    static = train(data, cfg(balance="vgnn", perf_model=str(model_file), adjust=0,
                             parallelism="partition", partition="metis", epochs=8)).report()
    uni = train(data, cfg(balance="uniform", parallelism="partition", partition="metis",
                          epochs=8)).report()
    assert rep["makespan_s"] <= min(static["makespan_s"], uni["makespan_s"]) * 1.005
    assert static["adjust"]["log"] == []


# -- the command line ------------------------------------------------------------------------

def _one_line(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moagcn: error: ") and match in err[0], err


@pytest.mark.parametrize("budget", ["0", "-2"])
def test_cli_refuses_a_budget_below_one(tmp_path, monkeypatch, capsys, budget):
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, ["train", "--devices", FLEET, "--device", "model", "--balance", "spec",
                       "--adjust", budget, "--epochs", "1"], f"--adjust {budget}")


def test_cli_refuses_a_model_of_other_devices_or_an_old_format(tmp_path, monkeypatch, capsys,
                                                               model_file):
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, ["train", "--devices", "sspmm:lanes=32,sspmm:lanes=4", "--device",
                       "model", "--balance", "vgnn", "--perf-model", str(model_file),
                       "--epochs", "1", "--dataset", "rmat"], "no device 'sspmm:lanes=4'")
    old = json.loads(model_file.read_text())
    old["version"] = 2
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    _one_line(capsys, ["train", "--devices", FLEET, "--device", "model", "--balance", "vgnn",
                       "--perf-model", str(path), "--epochs", "1", "--dataset", "rmat"],
              "version 2 is not")
