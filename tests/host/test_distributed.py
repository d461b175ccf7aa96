"""torch.distributed (gloo): spawned processes and a torchrun launch reproduce the in-process run.

Every distributed run here is compared with ``train(d, cfg)`` in this process (LocalComm, the
same code path the single-process tests check against plain torch): the losses agree within
float tolerance (the processes sum the loss in another order), and the bytes the processes
actually sent agree with the in-process count and with the sizes alone (MoP: Prop. 3.4;
partition parallelism: the halos, counted here from the graph).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.partition import partition_nodes
from moagcn.host.parallel.launch import DistComm, process_group_backend
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.distributed import train_distributed, train_from_env
from moagcn.host.training.fullgraph import train


def small():
    return sbm(n_nodes=300, n_features=48, n_val=100, n_test=100, seed=5)


def assert_same_run(rd: dict, rl: dict):
    """A distributed report ``rd`` against the in-process report ``rl`` of the same config."""
    np.testing.assert_allclose(rd["train_loss"], rl["train_loss"], rtol=1e-5, atol=1e-6)
    assert rd["test_acc"] == pytest.approx(rl["test_acc"], abs=0.01)
    assert rd["comm_bytes_curve"] == rl["comm_bytes_curve"]
    assert rd["comm_bytes"] == rl["comm_bytes"] == rl["comm_bytes_analytic"] \
        == rd["comm_bytes_analytic"]
    # every process's counters reach rank 0; the performed adds depend on ReLU masks, which a
    # different reduction order could flip for a pre-activation within rounding of 0
    assert [w["worker"] for w in rd["worker_ops"]] == list(range(rl["workers"]))
    for a, b in zip(rd["worker_ops"], rl["worker_ops"], strict=True):
        assert (a["worker"], a["spmm_adds"], a["dense_macs"]) == \
            (b["worker"], b["spmm_adds"], b["dense_macs"])
        assert a["sparse_adds"] == pytest.approx(b["sparse_adds"], rel=1e-3)
    assert rd["sim_cycles"]["per_epoch"] == rl["sim_cycles"]["per_epoch"] > 0


def test_two_gloo_processes_match_the_in_process_run():
    d = small()
    cfg = TrainConfig(epochs=6, workers=2, parallelism="mop", device="model", lr=0.05)
    local = train(d, cfg)
    seen = []
    dist = train_distributed(d, cfg, on_epoch=lambda rec: seen.append(rec.epoch))
    assert dist.processes == 2 and seen == list(range(6))
    rd, rl = dist.report(), local.report()
    assert_same_run(rd, rl)
    # Prop. 3.4: 4 (N w - sum_i n_i w_i) bytes per all-to-all of width w (N = 300 nodes, two
    # workers of 150 rows and w / 2 columns); forward: widths 48 (features), 16, 16 (hidden);
    # backward: 16, 16 (no gradient flows into the input features)
    assert rd["comm_bytes"] == sum(4 * (300 * w - 2 * 150 * w // 2) for w in (48, 16, 16, 16, 16))


@pytest.mark.parametrize("model, pipeline, workers", [("gcn", "natural", 2),
                                                      ("sage", "off", 3)])
def test_the_executed_pipeline_over_processes_matches_the_in_process_run(model, pipeline,
                                                                         workers):
    """MoP's fine-grain pipeline with one worker per gloo process: every block between a
    process's sparse and dense unit and another's travels as a tagged point-to-point message,
    forward and backward; the losses, bytes, device work and the devices' share of the
    timeline equal the in-process pipelined run's."""
    d = small()
    cfg = TrainConfig(epochs=3, workers=workers, parallelism="mop", device="model", lr=0.05,
                      model=model, pipeline=pipeline, stages=2 * workers)
    local = train(d, cfg)
    dist = train_distributed(d, cfg)
    assert dist.processes == workers
    rd, rl = dist.report(), local.report()
    assert_same_run(rd, rl)
    pd, pl = rd["pipeline"], rl["pipeline"]
    assert pd["stages"] == pl["stages"] == 2 * workers and pd["pipeline"] == pipeline
    for key in ("sparse_busy_s", "backward_sparse_busy_s"):
        assert pd[key] == pl[key] > 0


def test_the_pipeline_over_processes_with_batches_nobody_reads():
    """GraphSAGE (self loops dropped) on a graph whose last half is isolated nodes, with a hub
    and a doubled self loop: the tail batches read no rows and no batch reads theirs, so the
    pre-activation slices and gradients sent for them are taken by the drains, not by a
    task; 3 layers of width 11 over 2 processes still equal the in-process run."""
    from moagcn.host.graphs.data import Dataset
    from moagcn.host.graphs.ops import CSRGraph
    rng = np.random.default_rng(1)
    n = 120
    src = np.r_[rng.integers(0, 60, 400), np.zeros(50, int), 5, 5]
    dst = np.r_[rng.integers(0, 60, 400), rng.integers(0, 60, 50), 5, 5]
    g = CSRGraph.from_edges(src, dst, n, dedupe=False)
    masks = [np.zeros(n, bool) for _ in range(3)]
    masks[0][:80], masks[1][80:100], masks[2][100:] = True, True, True
    d = Dataset("isolated-tail", g, rng.random((n, 13), dtype=np.float32),
                rng.integers(0, 3, n), *masks)
    cfg = TrainConfig(epochs=2, workers=2, device="model", pipeline="natural", stages=4,
                      model="sage", hidden=11, layers=3)
    local = train(d, cfg)
    rd, rl = train_distributed(d, cfg).report(), local.report()
    np.testing.assert_allclose(rd["train_loss"], rl["train_loss"], rtol=1e-5)
    assert rd["comm_bytes"] == rl["comm_bytes"] == rl["comm_bytes_analytic"]


def halo_sizes(d, sets) -> list[int]:
    """|R_j|: the remote in-neighbours of every part, from the graph's CSR arrays."""
    g = d.graph
    out = []
    for own in sets:
        cols = np.concatenate([g.indices[g.indptr[v]:g.indptr[v + 1]] for v in own])
        out.append(len(set(cols.tolist()) - set(own.tolist())))
    return out


@pytest.mark.parametrize("workers, partition", [(2, "contiguous"), (4, "kway")])
def test_partition_parallelism_over_processes_matches_the_in_process_run(workers, partition):
    d = small()
    cfg = TrainConfig(epochs=4, workers=workers, parallelism="partition", partition=partition,
                      device="model", lr=0.05)
    local = train(d, cfg)
    dist = train_distributed(d, cfg)
    assert dist.processes == workers
    rd, rl = dist.report(), local.report()
    assert_same_run(rd, rl)
    halo = halo_sizes(d, partition_nodes(d.graph, workers, partition))
    assert rd["halo_sizes"] == rl["halo_sizes"] == halo
    # the hidden layer's rows of every halo, forward and back: 2 x 4 bytes x 16 x sum |R_j|
    assert rd["comm_bytes"] == 2 * 4 * 16 * sum(halo)


@pytest.mark.parametrize("bits, label_prop", [(2, 0.5), (16, 0.0)])
def test_supergcn_over_processes_matches_the_in_process_run(bits, label_prop):
    """prepost aggregation with quantised messages across 3 gloo processes: the packed bytes
    that really cross, the same rounding draws, so the same losses and byte counts as in
    process (and the plan's prediction)."""
    d = small()
    cfg = TrainConfig(epochs=4, workers=3, parallelism="partition", partition="metis",
                      aggregation="prepost", comm_bits=bits, label_prop=label_prop,
                      layer_norm=True, device="model", lr=0.05)
    local = train(d, cfg)
    dist = train_distributed(d, cfg)
    rd, rl = dist.report(), local.report()
    assert dist.processes == 3
    np.testing.assert_allclose(rd["train_loss"], rl["train_loss"], rtol=1e-5, atol=1e-6)
    assert rd["comm_bytes_curve"] == rl["comm_bytes_curve"]
    assert rd["comm_bytes"] == rl["comm_bytes_analytic"]
    assert rd["comm_bytes_per_epoch"] == rl["comm_bytes_per_epoch"]
    assert rd["exchange"] == rl["exchange"]


def test_a_worker_that_dies_ends_the_run_with_one_line():
    """SIGKILL one worker mid-run: the parent stops the others (which would otherwise wait in a
    collective for gloo's 30-minute timeout) and raises a UserError naming the worker."""
    import multiprocessing
    import signal
    import threading

    d = small()
    cfg = TrainConfig(epochs=100_000, workers=2, parallelism="partition", device="cpu")
    started, outcome = threading.Event(), {}

    def run():
        try:
            train_distributed(d, cfg, on_epoch=lambda rec: started.set())
        except UserError as exc:
            outcome["error"] = str(exc)

    before = {p.pid for p in multiprocessing.active_children()}
    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert started.wait(120), "no epoch reported"
    workers = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert len(workers) == 2, workers               # this run's two workers, nothing else
    victim = max(workers, key=lambda p: p.pid)
    os.kill(victim.pid, signal.SIGKILL)
    t.join(60)
    assert not t.is_alive(), "the run did not end after a worker died"
    assert "died (exit code -9)" in outcome["error"] and "\n" not in outcome["error"]


def test_torchrun_launch_matches_the_in_process_run(tmp_path):
    report = tmp_path / "R.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "moagcn", "train", "--distributed", "--dataset", "sbm", "--epochs", "3",
           "--device", "model", "--parallelism", "partition", "--partition", "rcm", "--quiet",
           "--report", str(report)]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    rd = json.loads(report.read_text())
    assert rd["processes"] == 2 and rd["workers"] == 2
    # early_stop=10: the command's default (TrainConfig's own is 0); 3 epochs never stop early
    cfg = TrainConfig(epochs=3, workers=2, device="model", parallelism="partition",
                      partition="rcm", early_stop=10)
    assert rd["config"] == json.loads(json.dumps(dataclasses.asdict(cfg)))
    local = train(load_dataset("sbm", seed=0), cfg)
    assert_same_run(rd, local.report())
    assert f"report: {report}" in run.stdout


def test_nccl_only_with_a_gpu_for_every_rank(monkeypatch):
    """NCCL refuses two ranks on one GPU: with fewer GPUs than workers the group is gloo."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    assert process_group_backend(1) == "nccl"
    assert process_group_backend(2) == "gloo"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert process_group_backend(4) == "nccl"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert process_group_backend(1) == "gloo"


def test_errors_without_a_process_group(monkeypatch):
    assert process_group_backend() in ("gloo", "nccl")
    with pytest.raises(UserError, match="initialised torch.distributed process group"):
        DistComm()
    d = sbm(n_nodes=100, n_val=10, n_test=10, seed=0)
    with pytest.raises(UserError, match="at least 2"):
        train_distributed(d, TrainConfig(workers=1))
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(UserError, match="RANK is not set: run under torchrun"):
        train_from_env(d, TrainConfig(workers=2))
