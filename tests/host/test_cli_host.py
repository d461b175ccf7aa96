"""``moagcn train`` and ``moagcn pipeline`` through register() (as moagcn/cli/main.py wires them)."""

import argparse
import json

import pytest

from moagcn.cli import train as cli_host
from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.graphs.data import save_npz
from moagcn.host.graphs.generators import sbm


def parse(*argv):
    parser = argparse.ArgumentParser(prog="moagcn")
    cli_host.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args([str(a) for a in argv])


def test_train_writes_report_and_plots(tmp_path, capsys):
    d = sbm(n_nodes=200, n_features=32, n_val=50, n_test=50, seed=1)
    data = save_npz(d, tmp_path / "small.npz")
    report = tmp_path / "r" / "R.json"
    args = parse("train", "--dataset", data, "--epochs", 3, "--workers", 2, "--device", "model",
                 "--reference", "--report", report)
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rep = json.loads(report.read_text())
    for key in ("test_acc", "val_acc", "train_loss", "epoch_time_s", "phase_time_s",
                "comm_bytes", "worker_ops", "sim_cycles", "device", "parallelism", "workers"):
        assert key in rep, key
    assert rep["device"] == "model" and rep["workers"] == 2 and len(rep["train_loss"]) == 3
    assert set(rep["phase_time_s"]) >= {"aggregate", "update", "communicate"}
    assert rep["sim_cycles"]["per_epoch"] > 0 and rep["comm_bytes"] > 0
    assert rep["reference"]["train_loss"] == pytest.approx(rep["train_loss"], rel=1e-4)
    for png in ("R-curves.png", "R-time.png"):
        assert (report.parent / png).read_bytes()[:4] == b"\x89PNG"
    assert "epoch    3/3" in out and f"report: {report}" in out and "R-curves.png" in out


def test_pipeline_reports_both_orders(tmp_path, capsys):
    d = sbm(n_nodes=300, n_features=32, n_val=50, n_test=50, seed=1)
    data = save_npz(d, tmp_path / "g.npz")
    report = tmp_path / "P.json"
    args = parse("pipeline", "--dataset", data, "--batches", 6, "--reorder", "rcm",
                 "--dense-macs-per-cycle", 32, "--report", report)
    assert args.func(args) == 0
    rep = json.loads(report.read_text())
    for key in ("bandwidth", "stages_prop35", "idle_fraction", "makespan_cycles"):
        assert key in rep
    assert rep["reorder"] == "rcm" and set(rep["compare"]) == {"rcm", "none"}
    assert rep["bandwidth"] == rep["compare"]["rcm"]["bandwidth"] < \
        rep["compare"]["none"]["bandwidth"]
    assert (tmp_path / "P-timeline.png").exists()
    assert "Prop. 3.5 stages" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["train", "--dataset", "missing.npz"], "missing.npz: no such file"),
    (["train", "--report", "out.txt"], "ending in .json"),
    (["train", "--epochs", "0", "--device", "model"], "--epochs 0"),
    (["train", "--device", "model", "--preset", "huge"], "unknown preset 'huge'"),
    (["train", "--device", "model", "--param", "lanes=3"], "lanes=3 is not supported"),
    (["train", "--device", "model", "--design", "nope"], "unknown accelerator design 'nope'"),
    (["train", "--distributed", "--workers", "1", "--device", "model"], "--workers 2 or more"),
    (["train", "--threads", "-1"], "--threads -1"),
    (["pipeline", "--batches", "0"], "--batches 0"),
    (["pipeline", "--batches", "4", "--mask-density", "0"], "--mask-density 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    args = parse(*argv)
    with pytest.raises(UserError, match=message.replace("(", "\\(")):
        args.func(args)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("moagcn: error: ")
