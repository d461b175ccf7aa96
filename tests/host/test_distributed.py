"""torch.distributed (gloo): two processes reproduce the in-process MoP run."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.datasets import sbm
from moagcn.host.distributed import DistComm, process_group_backend, train_distributed
from moagcn.host.train import TrainConfig, train


def test_two_gloo_processes_match_the_in_process_run():
    d = sbm(n_nodes=300, n_features=48, n_val=100, n_test=100, seed=5)
    cfg = TrainConfig(epochs=6, workers=2, parallelism="mop", device="model", lr=0.05)
    local = train(d, cfg)
    seen = []
    dist = train_distributed(d, cfg, on_epoch=lambda rec: seen.append(rec.epoch))
    assert dist.processes == 2 and seen == list(range(6))
    np.testing.assert_allclose(dist.train_loss, local.train_loss, rtol=1e-5, atol=1e-6)
    assert dist.test_acc == pytest.approx(local.test_acc, abs=0.01)
    rd, rl = dist.report(), local.report()
    assert rd["comm_bytes"] == rl["comm_bytes"] == rl["comm_bytes_analytic"]
    # both processes' counters reach rank 0; the performed adds depend on ReLU masks, which a
    # different reduction order could flip for a pre-activation within rounding of 0
    for a, b in zip(rd["worker_ops"], rl["worker_ops"]):
        assert (a["worker"], a["spmm_adds"], a["dense_macs"]) == \
            (b["worker"], b["spmm_adds"], b["dense_macs"])
        assert a["sparse_adds"] == pytest.approx(b["sparse_adds"], rel=1e-3)
    assert rd["sim_cycles"]["per_epoch"] == rl["sim_cycles"]["per_epoch"]


def test_errors_without_a_process_group():
    assert process_group_backend() in ("gloo", "nccl")
    with pytest.raises(UserError, match="initialised torch.distributed process group"):
        DistComm()
    d = sbm(n_nodes=100, n_val=10, n_test=10, seed=0)
    with pytest.raises(UserError, match="at least 2"):
        train_distributed(d, TrainConfig(workers=1))
