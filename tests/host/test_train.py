"""Training: device backends against the plain torch reference and against the formulas
(tests/host/plain_gnn.py: the operators built from the graph's entries, dense torch
forward and backward), counters in the report."""

import dataclasses

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.generators import sbm
from moagcn.host.nn.models import GNN
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train, train_reference

from . import plain_gnn


@pytest.fixture(scope="module")
def data():
    return sbm(n_nodes=300, n_features=64, n_val=100, n_test=150, seed=7)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_model_backend_follows_the_torch_reference(data, kind):
    cfg = TrainConfig(model=kind, epochs=25, device="model", lr=0.05)
    dev = train(data, cfg)
    ref = train_reference(data, cfg)
    np.testing.assert_allclose(dev.train_loss, ref.train_loss, rtol=1e-4, atol=1e-5)
    assert dev.train_loss[-1] < 0.8 * dev.train_loss[0]
    assert dev.val_acc > 0.3  # 5 classes: chance is 0.2
    assert abs(dev.test_acc - ref.test_acc) <= 0.02


@pytest.mark.parametrize("kind, device, workers, dropout_at", [
    ("gcn", "model", 1, "aggregate"), ("gcn", "cpu", 2, "input"),
    ("sage", "model", 2, "aggregate"), ("sage", "cpu", 1, "input"),
    ("gin", "model", 1, "input"), ("gin", "cpu", 2, "aggregate")])
def test_training_equals_the_formula_reference(data, kind, device, workers, dropout_at):
    """Losses and final weights of ``train`` against full-graph training written from the
    formulas (D^-1/2 (A + I) D^-1/2, D^-1 A, A + I as dense matrices built here; dense torch
    forward and backward; Adam), from the same initial weights and dropout masks."""
    cfg = TrainConfig(model=kind, epochs=8, device=device, workers=workers, lr=0.05,
                      dropout_at=dropout_at)
    got = train(data, cfg)
    torch.manual_seed(cfg.seed)
    init = GNN(kind, data.n_features, cfg.hidden, data.n_classes, cfg.layers)
    losses, W = plain_gnn.train(data, init, cfg.epochs, cfg.lr, cfg.weight_decay, cfg.dropout,
                                cfg.seed, dropout_at)
    np.testing.assert_allclose(got.train_loss, losses, rtol=1e-5)
    for k, v in W.items():
        np.testing.assert_allclose(got.model_state[k].double().numpy(), v.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=k)


def test_cpu_backend_and_report_fields(data):
    cfg = TrainConfig(epochs=8, device="cpu", workers=2)
    r = train(data, cfg)
    rep = r.report()
    for key in ("test_acc", "val_acc", "train_loss", "epoch_time_s", "phase_time_s",
                "comm_bytes", "worker_ops", "sim_cycles", "device", "parallelism", "workers"):
        assert key in rep
    assert len(rep["train_loss"]) == 8
    assert set(rep["phase_time_s"]) >= {"aggregate", "update", "communicate"}
    assert rep["comm_bytes"] == rep["comm_bytes_analytic"] > 0
    assert rep["sim_cycles"]["total"] == 0  # the cpu backend has no cycle count
    assert len(rep["worker_ops"]) == 2


def test_model_backend_counts_cycles_per_epoch(data):
    r = train(data, TrainConfig(epochs=3, device="model", workers=2))
    rep = r.report()
    per = [h.sim_cycles for h in r.history]
    assert all(c > 0 for c in per) and rep["sim_cycles"]["total"] == sum(per)
    assert rep["sim_cycles"]["per_epoch_max_device"] <= rep["sim_cycles"]["per_epoch"]
    devs = rep["sim_cycles"]["devices"]
    assert [d["worker"] for d in devs] == [0, 1]
    assert all(0 < d["utilization"] <= 1 for d in devs)


def test_reorder_keeps_the_result(data):
    cfg = TrainConfig(epochs=5, device="model")
    a = train(data, cfg)
    b = train(data, dataclasses.replace(cfg, reorder="rcm"))
    np.testing.assert_allclose(a.train_loss, b.train_loss, rtol=1e-5)


def test_config_errors(data):
    with pytest.raises(UserError, match="--dropout 1.0"):
        train(data, TrainConfig(dropout=1.0))
    with pytest.raises(UserError, match="--device rtl: GAT aggregates .*sspmm accelerator "
                                        ".*--param weighted=true"):
        train(data, TrainConfig(model="gat"))
    with pytest.raises(UserError, match="--device 'fpga'"):
        train(data, TrainConfig(device="fpga"))
    with pytest.raises(UserError, match="unknown preset 'huge'"):
        train(data, TrainConfig(device="model", preset="huge"))
    with pytest.raises(UserError, match="workers = 301 exceeds"):
        train(data, TrainConfig(workers=301, epochs=1))


def test_rtl_reproduces_the_model_losses_bit_for_bit(data):
    """`--device rtl` (the RTL on the lean Verilator harness, tiny preset so that the job is cut
    into many tiles) gives per-epoch losses identical to `--device model`."""
    cfg = TrainConfig(epochs=3, device="model", preset="tiny", workers=2)  # tiny: many tiles
    model = train(data, cfg)
    other = train(data, dataclasses.replace(cfg, device="rtl"))
    assert other.train_loss == model.train_loss
    assert [h.val_acc for h in other.history] == [h.val_acc for h in model.history]
    assert other.device_counters[0]["tiles"] > 2


def test_train_takes_any_design_parameter(data):
    """--param reaches the devices: twice the lanes, fewer compute cycles, same losses."""
    base = TrainConfig(epochs=2, device="model", params={"lanes": "8"})
    wide = dataclasses.replace(base, params={"lanes": "32"})
    a, b = train(data, base), train(data, wide)
    assert a.train_loss == b.train_loss
    assert a.device_counters[0]["lanes"] == 8 and b.device_counters[0]["lanes"] == 32
    assert b.device_counters[0]["cycles_compute"] < a.device_counters[0]["cycles_compute"]
