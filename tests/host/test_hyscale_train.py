"""HyScale-GNN as a training system: hybrid trainers, synchronous SGD, DRM (Alg. 1).

The references of the training steps share no code with the trainers: one trainer step on
sampled blocks against the gradients computed here from the blocks' entries and the documented
mini-batch GCN scaling (docs/hyscale.md: each node ``1 / sqrt(min(deg, fanout) + 1)``) or the
neighbour mean, in dense float64 torch; full-neighbourhood hybrid training against full-graph
training from the formulas (tests/host/plain_gnn.py)."""

import dataclasses
import json
import os

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import sbm
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.hyscale.minibatch import LoadedBatch
from moagcn.host.hyscale.train import DRM, HybridConfig, parse_trainers, train_hybrid
from moagcn.host.hyscale.trainers import Trainer
from moagcn.host.nn.models import GNN

from . import plain_gnn


def test_trainer_specs():
    assert parse_trainers("cpu:2,accel:1") == ["cpu", "cpu", "accel"]
    assert parse_trainers("accel") == ["accel"]
    for bad, msg in (("fpga:1", "names no trainer kind"), ("cpu:x", "not a whole number"),
                     ("cpu:0", "asks for 0 trainers")):
        with pytest.raises(UserError, match=msg):
            parse_trainers(bad)


def test_bad_configurations():
    d = sbm(n_nodes=200, seed=0)
    n_train = int(d.train_mask.sum())
    with pytest.raises(UserError, match="larger than the"):
        HybridConfig(batch=n_train + 1).validate(d)
    with pytest.raises(UserError, match="cannot be sampled"):
        HybridConfig(fanouts="10,0", batch=10).validate(d)
    for empty in ("", " ", ",", " , "):
        with pytest.raises(UserError, match="is empty"):
            HybridConfig(fanouts=empty, batch=10).validate(d)
    with pytest.raises(UserError, match="must be in"):
        HybridConfig(cpu_share=1.0, batch=10).validate(d)


def test_split_training_equals_one_trainer():
    """Full neighbourhoods, no dropout: the summed gradients of a CPU and an accelerator trainer
    (S-SpMM cycle model) on two halves of a batch equal one trainer's on the whole batch."""
    d = sbm(n_nodes=150, n_classes=3, seed=1)
    base = HybridConfig(model="gcn", hidden=8, fanouts="all,all", batch=int(d.train_mask.sum()),
                        epochs=2, dropout=0.0, drm=False, lr=0.01)
    one = train_hybrid(d, dataclasses.replace(base, trainers="cpu:1"))
    two = train_hybrid(d, dataclasses.replace(base, trainers="cpu:1,accel:1", cpu_share=0.4))
    assert two["iterations"][0]["sub_batches"][0] < two["iterations"][0]["sub_batches"][1]
    for k, v in one["model_state"].items():
        assert torch.allclose(v, two["model_state"][k], rtol=1e-4, atol=1e-6), k
    assert two["devices"][1]["cycles_total"] > 0 and two["devices"][0]["cycles_total"] == 0


def block_operator(kind, block, degrees, fanout):
    """A block's aggregation as a dense (targets x sources) float64 matrix, from its entries:
    GCN ``A + I`` scaled on both sides by ``1 / sqrt(min(deg, fanout) + 1)`` of each node's
    degree in the whole graph; SAGE the mean over the sampled neighbours (0 without any)."""
    n_dst, n_src = block.dst_pos.size, block.src.size
    rows, cols = plain_gnn.entries(block.graph)
    A = plain_gnn.adjacency(rows, cols, n_dst, n_src)
    A[np.arange(n_dst), block.dst_pos] = 0.0                 # a stored self loop is dropped
    if kind == "sage":
        deg = A.sum(axis=1, keepdims=True)
        return np.divide(A, deg, out=np.zeros_like(A), where=deg > 0)
    A[np.arange(n_dst), block.dst_pos] = 1.0
    d = degrees[block.src].astype(np.float64)
    if fanout is not None:
        d = np.minimum(d, fanout)
    s = 1.0 / np.sqrt(d + 1.0)
    return s[block.dst_pos][:, None] * A * s[None, :]


@pytest.mark.parametrize("kind, kinds", [("gcn", "cpu"), ("gcn", "accel"), ("sage", "cpu")])
def test_a_trainer_step_on_sampled_blocks_equals_the_step_by_hand(kind, kinds):
    """Fanouts 3 and 4 (below most degrees): a trainer's gradients of its share of the loss
    equal those computed here from the blocks' entries with the documented scaling."""
    d = sbm(n_nodes=150, n_classes=3, n_features=20, seed=6)
    fanouts = [3, 4]
    degrees = d.graph.degrees().astype(np.int64)
    assert (degrees > 4).mean() > 0.5                       # the caps bind on most rows
    targets = np.nonzero(d.train_mask)[0][:12]
    mb = NeighborSampler(d.graph, fanouts, seed=4).sample(targets, salt=(0, 1))
    X = plain_gnn.row_normalised(d.features).astype(np.float32)
    lb = LoadedBatch(0, mb, torch.from_numpy(X[mb.input_nodes]),
                     torch.from_numpy(d.labels[mb.targets]), [])
    torch.manual_seed(3)
    model = GNN(kind, d.n_features, 7, d.n_classes, 2)
    choice = AcceleratorChoice("model" if kinds == "accel" else "cpu")
    tr = Trainer(0, kinds, model, choice, torch.device("cpu"), fanouts, 0.0, 0, degrees,
                 update_on="host")
    got = tr.step(lb, 20, 0)                                # 12 of a batch of 20
    W = plain_gnn.weights(model)
    ops = [block_operator(kind, b, degrees, k) for b, k in zip(mb.blocks, fanouts)]
    logits = plain_gnn.forward(kind, W, ops, X[mb.input_nodes].astype(np.float64),
                               rows=[b.dst_pos for b in mb.blocks])
    y = torch.from_numpy(d.labels[mb.targets])
    loss = torch.nn.functional.cross_entropy(logits, y, reduction="sum") / 20
    loss.backward()
    assert got["loss"] == pytest.approx(float(loss.detach()) * 20, rel=1e-5)
    for (name, _), g in zip(tr.model.named_parameters(), got["grads"]):
        np.testing.assert_allclose(g.double().numpy(), W[name].grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_full_neighbourhood_hybrid_training_equals_full_graph_training():
    """Fanout ``all`` at both layers, the whole training set as one batch, no dropout: every
    iteration of a CPU and an accelerator trainer is one full-graph training step, so the
    losses and weights equal full-graph training from the formulas."""
    d = sbm(n_nodes=150, n_classes=3, seed=1)
    cfg = HybridConfig(model="gcn", hidden=8, fanouts="all,all", batch=int(d.train_mask.sum()),
                       epochs=4, dropout=0.0, drm=False, lr=0.01, cpu_share=0.4,
                       trainers="cpu:1,accel:1")
    got = train_hybrid(d, cfg)
    torch.manual_seed(cfg.seed)
    init = GNN("gcn", d.n_features, cfg.hidden, d.n_classes, 2)
    losses, W = plain_gnn.train(d, init, cfg.epochs, cfg.lr, cfg.weight_decay, 0.0, cfg.seed)
    np.testing.assert_allclose([r["loss"] for r in got["iterations"]], losses, rtol=1e-5)
    for k, v in W.items():
        np.testing.assert_allclose(got["model_state"][k].double().numpy(), v.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=k)


def test_hybrid_cora_accuracy_matches_cpu_only():
    d = load_dataset("cora")
    cfg = HybridConfig(batch=70, epochs=30, hidden=64, fanouts="25,10", lr=0.01)
    # the split fixed (no DRM, half each): the DRM's moves follow measured times, and with them
    # the mini-batches each trainer gets, which made the accuracy vary with the machine's load
    hybrid = train_hybrid(d, dataclasses.replace(cfg, trainers="cpu:1,accel:1", drm=False,
                                                 cpu_share=0.5))
    cpu = train_hybrid(d, dataclasses.replace(cfg, trainers="cpu:1"))
    assert hybrid["test_acc"] >= 0.77
    assert abs(hybrid["test_acc"] - cpu["test_acc"]) <= 0.02


def _times(**kw):
    t = {"T_SC": 1.0, "T_SA": 1.0, "T_Load": 1.0, "T_Tran": 1.0, "T_TC": 1.0, "T_TA": 1.0}
    t.update(kw)
    return t


def test_drm_balances_work_toward_the_faster_group():
    drm = DRM(0.5, {"sampler": 1, "trainer": 1}, damping=1.0)
    e = drm.update(0, _times(T_TA=3.0, T_Tran=0.5), True, True)      # accelerator bottleneck
    # one share seen so far: the means' proportional balance
    assert e["bottleneck"] == "T_Accel" and e["action"] == "balance_work(T_TC, T_Accel) (means)"
    assert drm.cpu_share == pytest.approx(0.75)                        # 0.5/1 : 0.5/3
    drm = DRM(0.5, {"sampler": 1, "trainer": 1}, damping=1.0)
    e = drm.update(0, _times(T_TC=4.0, T_TA=0.5, T_Tran=0.5), True, True)
    assert e["action"] == "balance_work(T_TC, T_Accel) (means)" and drm.cpu_share < 0.5


def test_drm_weighs_the_groups_iteration_times_when_it_has_them():
    """Sampling of the accelerator group is the largest stage (4 against 1), but each group's
    own iteration time (its trainers' overlapped stages) is what the iteration waits for:
    G_C = 1, G_A = 3 move the share to 0.75, as T_SC / T_SA alone would have to 0.8, and the
    sample kept for the fit is the groups' times."""
    drm = DRM(0.5, {"sampler": 1, "trainer": 1}, damping=1.0)
    e = drm.update(0, _times(T_SA=4.0, G_C=1.0, G_A=3.0), True, True, share_used=0.5)
    assert e["bottleneck"] == "T_SA" and e["action"] == "balance_work(T_SC, T_SA) (means)"
    assert drm.cpu_share == pytest.approx(0.75)
    assert drm.samples == [(0.5, 1.0, 3.0)]


def test_drm_balances_the_expected_maximum_of_fitted_affine_times():
    """With iterations at several shares, the trainers' times are fitted as affine in the
    share: T_TC = 2 + 20 s, T_Accel = 2 + 10 (1 - s) meet at s = 1/3. Without spread the
    balance goes there; when the CPU trainer's time fluctuates (and the accelerator's does not)
    the expected maximum is least with the CPU trainer further from critical."""
    rng = np.random.default_rng(0)
    for noise, lo, hi in ((0.0, 0.32, 0.345), (6.0, 0.15, 0.29)):
        drm = DRM(0.5, {"sampler": 1, "trainer": 1}, damping=1.0)
        for k in range(60):
            sh = (0.2, 0.4, 0.6)[k % 3]
            drm.samples.append((sh, 2 + 20 * sh + noise * rng.standard_normal(),
                                2 + 10 * (1 - sh)))
        assert drm.balance_trainers(1.0, 1.0) == "expected max"
        assert lo <= drm.cpu_share <= hi, (noise, drm.cpu_share)


def test_drm_never_fits_away_the_work_of_the_slower_group():
    """On a shared machine the CPU group's time can look flat over the narrow range of shares
    the DRM has visited (noise larger than its growth): a fit that takes it as free of work
    pushed the split towards the CPU trainer although it was the slower group (a measured run
    went from 0.57 to 0.98 with G_C 12-23 ms against G_A 6-14 ms). Without a clear slope the
    balance is the means': the share falls."""
    rng = np.random.default_rng(3)
    for trend in (-4.0, 0.0, 4.0):          # what the noise made of the CPU group's growth
        drm = DRM(0.7, {"sampler": 1, "trainer": 1}, damping=1.0)
        for k in range(12):
            sh = 0.57 + 0.3 * rng.random()
            drm.samples.append((sh, 16.0 + trend * (sh - 0.7) + 4.0 * rng.standard_normal(),
                                3 + 10 * (1 - sh)))
        assert drm.balance_trainers(16.0, 6.0) == "means; fit without a clear slope", trend
        assert drm.cpu_share < 0.7, trend


def test_drm_moves_threads_when_it_can_and_work_when_it_cannot():
    drm = DRM(0.5, {"sampler": 2, "trainer": 1})
    e = drm.update(0, _times(T_TC=5.0, T_Load=0.1, T_SC=2.0, T_SA=2.0, T_TA=2.0), True, True)
    assert e["fastest"] == "T_Load" and e["action"] == "balance_thread sampler -> trainer"
    assert drm.threads == {"sampler": 1, "trainer": 2}
    drm = DRM(0.5, {"sampler": 1, "trainer": 1})
    e = drm.update(0, _times(T_TC=5.0, T_Load=0.1, T_SC=2.0, T_SA=2.0, T_TA=2.0), True, True)
    assert e["action"].startswith("balance_work(T_TC, T_Accel) (no thread")
    assert drm.cpu_share < 0.5
    off = DRM(0.5, {"sampler": 1, "trainer": 1}, enabled=False)
    assert off.update(0, _times(T_TC=9.0), True, True)["action"] == "none"


def test_drm_leaves_a_bad_split():
    d = sbm(n_nodes=2000, n_classes=3, seed=3)
    train = (d.labels >= 0) & ~d.val_mask & ~d.test_mask
    d = dataclasses.replace(d, train_mask=train)
    r = train_hybrid(d, HybridConfig(hidden=16, fanouts="10,5", batch=100, epochs=3,
                                     cpu_share=0.95, drm=True))
    assert r["drm_log"] and r["final_cpu_share"] != 0.95
    assert any(e["action"].startswith("balance_work") for e in r["drm_log"])
    assert len(r["iterations"]) == 3 * int(np.ceil(train.sum() / 100))


def test_distributed_trainers_equal_the_in_process_run():
    """One process per trainer, gradients all-reduced: the same weights as in one process
    (DRM off); with DRM on, each batch is split by the decision taken depth + 1 iterations
    before (every rank cuts it alike; a mismatch would fail the run)."""
    from moagcn.host.hyscale.train import train_hybrid_distributed
    d = sbm(n_nodes=2000, n_classes=3, seed=3)
    d = dataclasses.replace(d, train_mask=(d.labels >= 0) & ~d.val_mask & ~d.test_mask)
    cfg = HybridConfig(hidden=16, fanouts="5,5", batch=100, epochs=1, drm=False, cpu_share=0.4)
    a = train_hybrid(d, cfg)
    b = train_hybrid_distributed(d, cfg, timeout_s=60)
    assert b["processes"] == 2
    for k, v in a["model_state"].items():
        assert torch.equal(v, b["model_state"][k]), k
    c = train_hybrid_distributed(d, dataclasses.replace(cfg, drm=True, cpu_share=0.9),
                                 timeout_s=60)
    used = [r["cpu_share_used"] for r in c["iterations"]]
    lag = cfg.depth + 1              # a decision applies to the batches not sampled yet
    assert used[:lag] == [0.9] * lag
    assert used[lag:] == [e["cpu_share"] for e in c["drm_log"]][:len(used) - lag]
    # the performance model's split, decided once before the ranks start: every rank's
    # batches cut by it (a rank cutting another way would fail the run)
    m = train_hybrid_distributed(d, dataclasses.replace(cfg, cpu_share="model"), timeout_s=60)
    assert m["initial_split"]["source"] == "model"
    assert {r["cpu_share_used"] for r in m["iterations"]} == {m["initial_split"]["cpu_share"]}


def test_stage_a_in_processes_threads_or_in_sequence_trains_the_same_weights():
    """Sampling, operators and feature loading in forked processes (the default), in threads or
    without prefetching: the same batches, so the same weights bit for bit (DRM off), over
    epochs that reuse the processes; none is left running."""
    import multiprocessing
    d = sbm(n_nodes=600, n_classes=3, seed=4)
    d = dataclasses.replace(d, train_mask=(d.labels >= 0) & ~d.val_mask & ~d.test_mask)
    before = set(multiprocessing.active_children())
    for model in ("gcn", "sage"):
        cfg = HybridConfig(model=model, hidden=12, fanouts="4,6", batch=60, epochs=3, drm=False,
                           cpu_share=0.3)
        assert cfg.stage_a == "process"
        runs = [train_hybrid(d, c) for c in (cfg, dataclasses.replace(cfg, stage_a="thread"),
                                             dataclasses.replace(cfg, prefetch=False),
                                             dataclasses.replace(cfg, pin_cores=False))]
        # the one stage-A process bound to a core of its own where there are two or more
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        assert runs[0]["stage_a_cores"] == [None if len(cores) < 2 else
                                            {"trainers": cores[:-1], "stage_a": cores[-1:]}]
        assert runs[3]["stage_a_cores"] == [None] and runs[1]["stage_a_cores"] == []
        assert sorted(os.sched_getaffinity(0)) == cores           # the trainers' cores back
        for other in runs[1:]:
            for k, v in runs[0]["model_state"].items():
                assert torch.equal(v, other["model_state"][k]), (model, k)
        assert runs[0]["iterations"][-1]["stage_s"]["T_SC"] > 0
        # one prefetcher per trainer for the whole run: the pipeline runs on across epochs
        assert [{t: v["iterations"] for t, v in s.items()} for s in runs[0]["prefetch"]] == \
            [{0: len(runs[0]["iterations"]), 1: len(runs[0]["iterations"])}]
    assert set(multiprocessing.active_children()) == before
    with pytest.raises(UserError, match="--stage-a 'fork'"):
        HybridConfig(stage_a="fork").validate(d)


def test_awkward_graph_and_a_tail_batch_smaller_than_the_trainers():
    """40 training nodes in batches of 13 leave a tail of 1 for 3 trainers: it joins the batch
    before it; the hub, isolated nodes and self loops train, and the split still equals one
    trainer on the whole batch."""
    from moagcn.host.hyscale.trainers import epoch_batches

    from .test_pipeline_exec import awkward_dataset
    d = awkward_dataset()
    assert [b.size for b in epoch_batches(np.arange(40), 13, 0, 0, 3)] == [13, 13, 14]
    r = train_hybrid(d, HybridConfig(model="sage", hidden=11, fanouts="3,all", batch=13,
                                     epochs=2, trainers="cpu:1,accel:2"))
    assert len(r["iterations"]) == 6 and all(min(x["sub_batches"]) >= 1
                                             for x in r["iterations"])
    base = HybridConfig(model="gcn", hidden=11, fanouts="all,all", batch=40, epochs=2,
                        dropout=0.0, drm=False)
    one = train_hybrid(d, dataclasses.replace(base, trainers="cpu:1"))
    two = train_hybrid(d, dataclasses.replace(base, trainers="cpu:1,accel:1", cpu_share=0.3))
    for k, v in one["model_state"].items():
        assert torch.allclose(v, two["model_state"][k], rtol=1e-4, atol=1e-6), k


def test_cli_default_batch_fits_the_training_set(tmp_path, capsys):
    """`moagcn hyscale train` with its defaults runs on a dataset with fewer training nodes than
    the default batch (it refused Cora's 140); an explicit larger --batch-size is still an
    error."""
    from moagcn.cli.main import main
    report = tmp_path / "r.json"
    assert main(["hyscale", "train", "--dataset", "sbm", "--device", "model", "--epochs", "1",
                 "--quiet", "--report", str(report)]) == 0
    r = json.loads(report.read_text())
    assert r["config"]["batch"] == 100 and r["config"]["pin_cores"]   # sbm: 100 train nodes
    # the initial split: the performance model's by default, every iteration cut by it (DRM
    # off here: it would move the share)
    split = r["initial_split"]
    assert split["source"] == "model" and split["cpu_share"] in split_shares()
    assert r["config"]["cpu_share"] == split["cpu_share"]
    assert main(["hyscale", "train", "--dataset", "sbm", "--device", "model", "--epochs", "1",
                 "--quiet", "--no-pin-cores", "--cpu-share", "even", "--no-drm",
                 "--report", str(report)]) == 0
    r = json.loads(report.read_text())
    assert not r["config"]["pin_cores"] and r["stage_a_cores"] == [None]
    assert r["initial_split"] == {"source": "even", "cpu_share": 0.5}
    assert {it["cpu_share_used"] for it in r["iterations"]} == {0.5}
    capsys.readouterr()
    assert main(["hyscale", "train", "--dataset", "sbm", "--device", "model", "--cpu-share",
                 "half", "--quiet", "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert "--cpu-share 'half': give a share in (0, 1), 'model' or 'even'" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["hyscale", "train", "--dataset", "sbm", "--device", "model",
                 "--batch-size", "5000", "--quiet", "--report", str(report)]) == 2
    assert "--batch 5000 is larger than the 100 training nodes" in capsys.readouterr().err


def test_one_group_of_trainers_has_no_split_whatever_was_asked():
    from moagcn.host.hyscale.train import resolve_split
    d = sbm(n_nodes=300, n_classes=3, seed=2)
    for trainers, share in (("cpu:2", 1.0), ("accel:2", 0.0)):
        for asked in (0.3, "model", None):
            cfg, info = resolve_split(d, HybridConfig(trainers=trainers, cpu_share=asked))
            assert info == {"source": "one group", "cpu_share": share} and cfg.cpu_share is None


def split_shares():
    from moagcn.host.hyscale.split import SPLIT_SHARES
    return set(SPLIT_SHARES)


def test_accelerator_trainers_update_on_the_hyscale_array():
    """With --design hyscale an accelerator trainer's dense layers run on the systolic array,
    forward and both backward products (its counters count the multiply-adds); the run equals
    the one with host updates to float rounding, and the S-SpMM design keeps host updates."""
    d = sbm(n_nodes=400, seed=3)
    runs = {}
    for upd in ("device", "host"):
        runs[upd] = train_hybrid(d, HybridConfig(design="hyscale", preset="tiny", epochs=2,
                                                 batch=60, hidden=16, update_on=upd,
                                                 drm=False))
    dev = runs["device"]["devices"][1]
    assert dev["dense_macs"] > 0 and "dense_macs" not in runs["host"]["devices"][1]
    assert dev["cycles_update"] > runs["host"]["devices"][1]["cycles_update"]
    losses = {k: [it["loss"] for it in r["iterations"]] for k, r in runs.items()}
    np.testing.assert_allclose(losses["device"], losses["host"], rtol=1e-4)
    sspmm = train_hybrid(d, HybridConfig(epochs=1, batch=60, hidden=16, drm=False))
    assert "dense_macs" not in sspmm["devices"][1]


@pytest.mark.slow
def test_drm_bench_repeats_every_measurement_and_reports_medians(monkeypatch):
    """`moagcn bench hyscale-drm --repeats R`: each static split, the DRM run and the pair of
    runs with and without prefetching R times, and the best split again beside each DRM run;
    the reported figures are the medians. The sweep runs in rounds (every share once per
    round) and the DRM runs alternate with the best split's, so that a slow minute of the
    host does not fall on one measurement only."""
    from moagcn.host.benches import hyscale_train as bench
    order = []

    def recorded(d, cfg):
        order.append((cfg.cpu_share, cfg.drm))
        return train_hybrid(d, cfg)
    monkeypatch.setattr(bench, "train_hybrid", recorded)
    res = bench.run(9, 64, 12, [0.3, 0.7], repeats=3)
    best, bad = res["best_static_share"], res["drm_initial_share"]
    assert order[:6] == [(0.3, False), (0.7, False)] * 3
    assert order[6:12] == [(bad, True), (best, False)] * 3
    assert res["repeats"] == 3
    for v in res["static"].values():
        assert len(v["throughputs"]) == 3 and v["throughput"] == np.median(v["throughputs"])
    assert len(res["drm_throughputs_after_10"]) == 3
    assert res["drm_throughput_after_10"] == np.median(res["drm_throughputs_after_10"])
    best = res["static"][str(res["best_static_share"])]["throughput"]
    assert best == max(v["throughput"] for v in res["static"].values())
    assert res["drm_vs_best_static_sweep"] == pytest.approx(res["drm_throughput_after_10"] / best)
    # the ratio's denominator: the best split run again beside each DRM run
    assert len(res["best_static_alternated"]) == 3
    ref = np.median(res["best_static_alternated"])
    assert res["drm_vs_best_static"] == pytest.approx(res["drm_throughput_after_10"] / ref)
    assert res["drm_vs_best_static_pairs"] == pytest.approx(
        [a / b for a, b in zip(res["drm_throughputs_after_10"], res["best_static_alternated"])])
    assert len(res["drm_trace"]) == 12
    # prefetching: R runs with and R without, at the best split, medians of each
    assert len(res["prefetch_walls"]) == 3 and len(res["no_prefetch_walls"]) == 3
    assert res["prefetch_wall_per_iteration"] == np.median(res["prefetch_walls"])
    assert res["no_prefetch_wall_per_iteration"] == np.median(res["no_prefetch_walls"])
    assert res["prefetch_speedup"] == pytest.approx(
        res["no_prefetch_wall_per_iteration"] / res["prefetch_wall_per_iteration"])
    # ... and R rounds of none / processes / threads on the narrow (loader-bound) run
    lb = res["prefetch_loader_bound"]
    assert (lb["features"], lb["hidden"], lb["workers"]) == (16, 128, 1)
    assert all(len(lb["walls"][k]) == 3 for k in ("none", "none_pooled", "processes", "threads"))
    assert lb["speedup_over_pooled"] == pytest.approx(np.median(lb["walls"]["none_pooled"])
                                                      / np.median(lb["walls"]["processes"]))
    for k in ("none_pooled", "processes", "threads"):
        assert lb["speedup"][k] == pytest.approx(np.median(lb["walls"]["none"])
                                                 / np.median(lb["walls"][k]))
    st = lb["stage_s_without_prefetching"]
    assert 0 < lb["trainers_host_s"] < np.median(lb["walls"]["none"])
    assert lb["loader_bound"] == ((st["T_SC"] + st["T_SA"] + st["T_Load"]) / lb["workers"]
                                  > lb["trainers_host_s"])


def test_run_batches_are_every_epochs_batches_in_order():
    """The run-long batch sequence equals epoch_batches epoch by epoch (a merged tail batch
    included), indexed across epochs in any order."""
    from moagcn.host.hyscale.train import _RunBatches
    from moagcn.host.hyscale.trainers import epoch_batches
    for n, batch, k in ((40, 13, 3), (100, 10, 2), (7, 7, 1), (41, 20, 2)):
        ids = np.arange(1000, 1000 + n)
        run = _RunBatches(ids, batch, 5, 4, k)
        want = [b for e in range(4) for b in epoch_batches(ids, batch, 5, e, k)]
        assert len(run) == len(want)
        for i in [*range(len(want)), *reversed(range(len(want)))]:
            assert np.array_equal(run[i], want[i])
            e, j = run.position(i)
            assert np.array_equal(epoch_batches(ids, batch, 5, e, k)[j], want[i])
