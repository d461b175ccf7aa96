"""`moagcn bench dense-device` on small sizes (the CPU's dense workers; CUDA where present)."""

import json
import statistics

import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.benches import dense as bench_dense


def test_bench_trains_on_every_sparse_and_dense_device(tmp_path, capsys):
    threads = torch.get_num_threads()
    try:
        assert bench_dense.main(["--rmat-scale", "8", "--width", "24", "--hidden", "12",
                                 "--epochs", "3", "--dense", "cpu", "--threads", "1",
                                 "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads((tmp_path / "dense-device-bench.json").read_text())
    assert (out["nodes"], out["features"], out["hidden"]) == (256, 24, 12)
    assert set(out["runs"]) == {"cpu+cpu", "model+cpu"}
    for r in out["runs"].values():
        assert r["dense"] == "cpu" and len(r["loss"]) == len(r["epoch_s_curve"]) == 3
        assert r["epoch_s"] == statistics.median(r["epoch_s_curve"][1:])
        assert r["first_epoch_s"] == r["epoch_s_curve"][0]
        assert 0.0 <= r["test_acc"] <= 1.0 and r["phase_time_s"]["aggregate"] > 0
    # the same training: the model device's sums are float32 sums in another order
    a, b = out["runs"]["cpu+cpu"]["loss"], out["runs"]["model+cpu"]["loss"]
    assert a == pytest.approx(b, rel=1e-5) and a[-1] < a[0]
    assert "compare" not in out        # one dense device: nothing to compare


def test_compare_divides_the_cpu_run_by_the_cuda_run():
    runs = {"cpu+cuda": {"epoch_s": 0.5, "loss": [1.0, 0.5]},
            "cpu+cpu": {"epoch_s": 2.0, "loss": [1.0, 0.25]}}
    c = bench_dense.compare(runs, ["cpu"])["cpu"]
    assert c["cpu_dense_over_cuda_dense"] == 4.0
    assert c["max_abs_loss_diff"] == 0.25


@pytest.mark.parametrize("argv, words", [
    (["--sparse", "rtl"], "--sparse 'rtl'"),
    (["--sparse", "cpu,cpu"], "--sparse 'cpu,cpu'"),
    (["--dense", "tpu"], "'tpu' is not cpu or cuda"),
    (["--dense", ","], "names no device"),
    (["--dense", "cpu,cpu"], "names a device twice"),
    (["--epochs", "0"], "--epochs 0"),
    (["--rmat-scale", "30"], "--rmat-scale 30"),
])
def test_bad_options_are_one_line(argv, words):
    with pytest.raises(UserError, match=words):
        bench_dense.main(argv)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_refused():
    with pytest.raises(UserError, match="sees no CUDA GPU"):
        bench_dense.main(["--dense", "cuda"])
