"""The PyG comparison benchmark and the SuperGCN experiment run end to end (tiny settings)."""

import json

from moagcn.cli.main import main


def test_bench_pyg_writes_its_tables(tmp_path, capsys):
    assert main(["bench", "pyg", "--datasets", "cora", "--impls", "pyg,nn:model,train:cpu",
                 "--seeds", "1", "--epochs", "3", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench_pyg.json").read_text())
    impls = [s["impl"] for s in report["summary"]]
    assert impls == ["pyg", "nn:model", "train:cpu"]
    acc = {s["impl"]: s["test_acc_mean"] for s in report["summary"]}
    assert acc["pyg"] == acc["nn:model"]          # same seed: same weights, same masks
    assert set(report["interleaved_s_per_epoch"]["cora"]) == {"pyg", "nn:model"}
    assert (tmp_path / "bench_pyg.csv").read_text().count("\n") == 4
    assert "time / PyG" in capsys.readouterr().out


def test_bench_pyg_gat_rows_against_pygs_gat(tmp_path, capsys):
    """PyG's GAT example with PyG's GATConv and moagcn's on cpu and on the model device (the
    weighted S-SpMM set for it): same seed, same initial weights and dropout draws, so the same
    accuracy; timed against gat:pyg, the step and the evaluation apart."""
    assert main(["bench", "pyg", "--datasets", "cora", "--impls", "gat:pyg,gat:cpu,gat:model",
                 "--seeds", "1", "--epochs", "2", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench_pyg.json").read_text())
    rows = {s["impl"]: s for s in report["summary"]}
    assert set(rows) == {"gat:pyg", "gat:cpu", "gat:model"}
    assert rows["gat:pyg"]["time_over_pyg"] == 1.0
    for impl in ("gat:cpu", "gat:model"):
        assert rows[impl]["test_acc_mean"] == rows["gat:pyg"]["test_acc_mean"]
        assert rows[impl]["best_val_test_acc_mean"] == rows["gat:pyg"]["best_val_test_acc_mean"]
    for run in report["runs"]:
        assert 0 < run["eval_s_per_epoch"] < run["s_per_epoch"]
    assert "cora gat:cpu: best-val" in capsys.readouterr().out


def test_experiment_supergcn_volume_table(tmp_path, capsys):
    assert main(["experiment", "supergcn", "--skip-accuracy", "--worker-list", "2",
                 "--width-list", "16", "--powerlaw-nodes", "3000", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "post / prepost at 2 workers on power-law 3k" in printed
    assert "prepost <= post and <= pre on every graph and worker count: met" in printed
    report = json.loads((tmp_path / "supergcn.json").read_text())
    for row in report["volume"]:
        assert row["rows_prepost"] <= min(row["rows_pre"], row["rows_post"])
        assert row["bytes_int2_data"] == row["rows_prepost"] * 4       # 16 values at 2 bits
        assert row["bytes_int2_params"] == row["rows_prepost"] * 8
    assert {r["graph"] for r in report["volume"]} == {"cora", "citeseer", "power-law 3k"}
    assert (tmp_path / "supergcn_volume.png").stat().st_size > 0


def test_supergcn_volume_targets_read_the_rows():
    from moagcn.host.experiments.supergcn import volume_targets
    row = {"graph": "power-law 5k", "workers": 8, "width": 16, "rows_pre": 10, "rows_post": 12,
           "rows_prepost": 9, "post_over_prepost": 1.29, "post_over_int2": 12.0}
    lines = volume_targets([row, {**row, "workers": 4, "post_over_prepost": 2.0}])
    assert "met (2 rows)" in lines[0]
    assert lines[1].endswith("1.29 (target >= 1.3, paper 1.52): not met")
    assert "12.0x-12.0x smaller (met" in lines[2]
    bad = volume_targets([{**row, "rows_prepost": 11}])
    assert "NOT met on 1 rows" in bad[0]
