"""`moagcn train --model gat`: PyG's Cora GAT example built from moagcn's GATConv follows the
same model built from PyG's GATConv (same seed: same weights, same dropout masks), and the
options it does not have are refused in one line with exit status 2."""

import dataclasses

import numpy as np
import pytest

from moagcn.cli.main import main
from moagcn.host.graphs.data import Dataset, save_npz
from moagcn.host.graphs.generators import sbm
from moagcn.host.training.gat import GATConfig, train_gat


@pytest.fixture(scope="module")
def data():
    return sbm(n_nodes=200, n_features=24, n_val=50, n_test=80, seed=3)


def test_moagcn_gat_follows_pyg_s_gat(data):
    cfg = GATConfig(heads=3, hidden=4, epochs=8, seed=2)
    ours, theirs = train_gat(data, cfg, "moagcn"), train_gat(data, cfg, "pyg")
    np.testing.assert_allclose(ours.loss, theirs.loss, rtol=1e-5, atol=1e-6)
    assert ours.test_acc == theirs.test_acc
    assert ours.loss[-1] < ours.loss[0]


@pytest.fixture
def path(data, tmp_path):
    p = str(tmp_path / "d.npz")
    save_npz(data, p)
    return p


def test_cli_trains_a_gat(path, tmp_path, capsys):
    report = str(tmp_path / "r.json")
    assert main(["train", "--dataset", path, "--model", "gat", "--heads", "2", "--epochs", "3",
                 "--device", "cpu", "--quiet", "--report", report]) == 0
    out = capsys.readouterr().out
    assert "GAT 2 layers, 2 heads x 8 hidden, dropout 0.6, lr 0.005" in out
    assert "test accuracy" in out


@pytest.mark.parametrize("extra,match", [
    (["--device", "model"], r"--device model: GAT aggregates with per-edge attention weights"
                            r".*add --param weighted=true.*--device cpu"),
    (["--device", "cpu", "--heads", "0"], r"--heads 0: give a positive"),
    (["--device", "cpu", "--heads", "-3"], r"--heads -3"),
    (["--device", "cpu", "--layer-norm"], r"--layer-norm True: not available with --model gat"),
    (["--device", "cpu", "--early-stop", "5"], r"--early-stop 5: not available"),
])
def test_cli_refuses_in_one_line(path, extra, match, capsys):
    assert main(["train", "--dataset", path, "--model", "gat", "--epochs", "1"] + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert __import__("re").search(match, err), err


def test_heads_need_gat_and_weights_need_gcn(data, path, tmp_path, capsys):
    assert main(["train", "--dataset", path, "--model", "gcn", "--heads", "4"]) == 2
    assert "--heads 4: attention heads need --model gat" in capsys.readouterr().err
    w = np.ones(data.graph.nnz, dtype=np.float32)
    wpath = str(tmp_path / "w.npz")
    save_npz(dataclasses.replace(data, edge_weight=w), wpath)
    assert main(["train", "--dataset", wpath, "--model", "gat", "--device", "cpu"]) == 2
    assert "has edge weights and GAT takes none" in capsys.readouterr().err
