"""The PyG comparison benchmark and the SuperGCN experiment run end to end (tiny settings)."""

import json

from moagcn.cli import main


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


def test_experiment_supergcn_volume_table(tmp_path, capsys):
    assert main(["experiment", "supergcn", "--skip-accuracy", "--workers", "2",
                 "--widths", "16", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "supergcn.json").read_text())
    for row in report["volume"]:
        assert row["rows_prepost"] <= min(row["rows_pre"], row["rows_post"])
        assert row["bytes_int2_data"] == row["rows_prepost"] * 4       # 16 values at 2 bits
        assert row["bytes_int2_params"] == row["rows_prepost"] * 8
    assert {r["graph"] for r in report["volume"]} == {"cora", "citeseer", "power-law 20k"}
    assert (tmp_path / "supergcn_volume.png").stat().st_size > 0
