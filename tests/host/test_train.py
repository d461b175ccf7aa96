"""Training: device backends against the plain torch reference, counters in the report."""

import dataclasses

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.datasets import sbm
from moagcn.host.devices import DeviceCounters, TiledDevice, register_backend
from moagcn.host.train import TrainConfig, train, train_reference


@pytest.fixture(scope="module")
def data():
    return sbm(n_nodes=300, n_features=64, n_val=100, n_test=150, seed=7)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_model_backend_follows_the_torch_reference(data, kind):
    cfg = TrainConfig(model=kind, epochs=25, backend="model", lr=0.05)
    dev = train(data, cfg)
    ref = train_reference(data, cfg)
    np.testing.assert_allclose(dev.train_loss, ref.train_loss, rtol=1e-4, atol=1e-5)
    assert dev.train_loss[-1] < 0.8 * dev.train_loss[0]
    assert dev.val_acc > 0.3  # 5 classes: chance is 0.2
    assert abs(dev.test_acc - ref.test_acc) <= 0.02


def test_cpu_backend_and_report_fields(data):
    cfg = TrainConfig(epochs=8, backend="cpu", workers=2)
    r = train(data, cfg)
    rep = r.report()
    for key in ("test_acc", "val_acc", "train_loss", "epoch_time_s", "phase_time_s",
                "comm_bytes", "worker_ops", "sim_cycles", "backend", "parallelism", "workers"):
        assert key in rep
    assert len(rep["train_loss"]) == 8
    assert set(rep["phase_time_s"]) >= {"aggregate", "update", "communicate"}
    assert rep["comm_bytes"] == rep["comm_bytes_analytic"] > 0
    assert rep["sim_cycles"]["total"] == 0  # the cpu backend has no cycle count
    assert len(rep["worker_ops"]) == 2


def test_model_backend_counts_cycles_per_epoch(data):
    r = train(data, TrainConfig(epochs=3, backend="model", workers=2))
    rep = r.report()
    per = [h.sim_cycles for h in r.history]
    assert all(c > 0 for c in per) and rep["sim_cycles"]["total"] == sum(per)
    assert rep["sim_cycles"]["per_epoch_max_device"] <= rep["sim_cycles"]["per_epoch"]
    devs = rep["sim_cycles"]["devices"]
    assert [d["worker"] for d in devs] == [0, 1]
    assert all(0 < d["utilization"] <= 1 for d in devs)


def test_reorder_keeps_the_result(data):
    cfg = TrainConfig(epochs=5, backend="model")
    a = train(data, cfg)
    b = train(data, dataclasses.replace(cfg, reorder="rcm"))
    np.testing.assert_allclose(a.train_loss, b.train_loss, rtol=1e-5)


def test_config_errors(data):
    with pytest.raises(UserError, match="--dropout 1.0"):
        train(data, TrainConfig(dropout=1.0))
    with pytest.raises(UserError, match="--model 'gat'"):
        train(data, TrainConfig(model="gat"))
    with pytest.raises(UserError, match="unknown sparse backend 'fpga'"):
        train(data, TrainConfig(backend="fpga"))
    with pytest.raises(UserError, match="workers = 301 exceeds"):
        train(data, TrainConfig(workers=301, epochs=1))


class TiledGolden(TiledDevice):
    """The golden model run tile by tile, as an RTL backend runs its jobs."""

    name = "tiled-golden"

    def run_job(self, indptr, indices, H, M):
        from moagcn.sim.golden.sspmm import sspmm
        return sspmm(indptr, indices, H, M), DeviceCounters(cycles_compute=1)


def test_tiled_backends_reproduce_the_model_losses_bit_for_bit(data):
    """`--backend rtl` (the RTL on the lean Verilator harness, tiny preset so that the job is cut
    into many tiles) and a tile-by-tile golden device give per-epoch losses identical to
    `--backend model`."""
    register_backend("tiled-golden", TiledGolden, replace=True)
    backends = ["tiled-golden", "rtl"]
    cfg = TrainConfig(epochs=3, backend="model", preset="tiny", workers=2)  # tiny: many tiles
    model = train(data, cfg)
    for name in backends:
        other = train(data, dataclasses.replace(cfg, backend=name))
        assert other.train_loss == model.train_loss, name
        assert [h.val_acc for h in other.history] == [h.val_acc for h in model.history]
        assert other.device_counters[0]["tiles"] > 2
