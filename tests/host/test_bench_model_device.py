"""`moagcn bench model-device` end to end on small sizes: what it times is what it says."""

import json

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.benches import model_device as bench_model_device


def test_bench_reports_the_model_device_beside_scipy_and_cpu(tmp_path, capsys):
    assert bench_model_device.main(["--nodes", "2000", "--entries", "20000", "--repeats", "1",
                                    "--rmat-scale", "8", "--epochs", "2",
                                    "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads((tmp_path / "model-device-bench.json").read_text())
    s = out["sspmm"]
    assert (s["nodes"], s["entries"], s["features"]) == (2000, 20000, 64)
    assert s["half_entries"]["entries"] == 10000
    assert s["model_over_scipy"] == pytest.approx(s["model_s"] / s["scipy_s"])
    # the same product: float32 sums of at most a few hundred terms in another order
    assert s["max_abs_diff_vs_scipy"] <= 1e-4 * s["max_abs_scipy"]
    t = out["train"]
    assert (t["nodes"], t["epochs"]) == (256, 2)
    for device in ("model", "cpu"):
        assert len(t[device]["epoch_s_curve"]) == 2
        assert t[device]["epoch_s"] == pytest.approx(np.mean(t[device]["epoch_s_curve"]))
    assert t["model"]["final_loss"] == pytest.approx(t["cpu"]["final_loss"], rel=1e-4)
    assert t["model_over_cpu"] == pytest.approx(t["model"]["epoch_s"] / t["cpu"]["epoch_s"])


def test_bench_trains_gat_on_the_model_device_beside_cpu(tmp_path, capsys):
    """--model gat: PyG's GAT example on the weighted S-SpMM + SDDMM model and on cpu; the same
    seed gives the same losses (float32 sums in another order)."""
    assert bench_model_device.main(["--nodes", "500", "--entries", "4000", "--repeats", "1",
                                    "--rmat-scale", "7", "--epochs", "2", "--model", "gat",
                                    "--width", "16"]) == 0
    t = json.loads(capsys.readouterr().out)["train"]
    assert (t["gnn"], t["nodes"], t["epochs"]) == ("gat", 128, 2)
    for device in ("model", "cpu"):
        assert len(t[device]["epoch_s_curve"]) == 2
    assert t["model"]["final_loss"] == pytest.approx(t["cpu"]["final_loss"], rel=1e-4)
    assert t["model_over_cpu"] == pytest.approx(t["model"]["epoch_s"] / t["cpu"]["epoch_s"])


def test_bench_refuses_sizes_below_one():
    with pytest.raises(UserError, match="--entries 0"):
        bench_model_device.main(["--entries", "0"])
