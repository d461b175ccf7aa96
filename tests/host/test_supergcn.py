"""SuperGCN in the partition runtime: pre / prepost aggregation and quantised messages.

The post runtime (the halo exchange) is checked against one device and plain torch in
test_mop.py; here pre and prepost must give its logits and gradients, move exactly the bytes
the plan predicts, and never more than post or pre."""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.datasets import load_dataset, sbm
from moagcn.host.graph import CSRGraph
from moagcn.host.models import GNN, DropoutMasks
from moagcn.host.mop import PartitionRuntime
from moagcn.host.train import TrainConfig, train

from .test_mop import run


def power_law_graph(n, seed):
    """A directed graph with hubs, self loops, repeated entries and isolated nodes."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n + 1) ** 1.1
    src = rng.choice(n, 6 * n, p=w / w.sum())
    dst = rng.integers(0, n - 3, 6 * n)
    return CSRGraph.from_edges(np.r_[dst, 4, 4], np.r_[src, 4, 4], n, dedupe=False)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
@pytest.mark.parametrize("dropout_at", ["aggregate", "input"])
def test_pre_and_prepost_equal_post(kind, dropout_at):
    g = power_law_graph(70, seed=3)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((70, 6)).astype(np.float32)
    y = torch.from_numpy(rng.integers(0, 3, 70))
    torch.manual_seed(0)
    model = GNN(kind, 6, 5, 3, 3)
    drop = DropoutMasks(0.3, 2)
    for m in (2, 3, 4):
        out, sent = {}, {}
        for agg in ("post", "pre", "prepost"):
            logits, grads, rt = run(PartitionRuntime, model, g, X, y, m, drop,
                                    partition="metis", aggregation=agg, dropout_at=dropout_at)
            out[agg] = (logits, grads)
            sent[agg] = rt.comm.counters.bytes_total
            assert sent[agg] == rt.comm_bytes_analytic(backward=True)
        for agg in ("pre", "prepost"):
            np.testing.assert_allclose(out[agg][0], out["post"][0], rtol=1e-5, atol=1e-5)
            for a, b in zip(out[agg][1], out["post"][1]):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        assert sent["prepost"] <= min(sent["post"], sent["pre"])
    assert sent["prepost"] < sent["post"]           # a directed power-law graph: strictly


def test_cora_prepost_cuts_rows_and_keeps_the_loss_curve():
    d = load_dataset("cora")
    reports = {agg: train(d, TrainConfig(epochs=5, workers=4, parallelism="partition",
                                         partition="metis", aggregation=agg,
                                         device="model")).report()
               for agg in ("post", "prepost")}
    post, pp = reports["post"], reports["prepost"]
    np.testing.assert_allclose(pp["train_loss"], post["train_loss"], rtol=1e-5)
    ex = pp["exchange"]
    assert ex["rows_sent"] == ex["vertex_cover"] < ex["rows_if_post"] == \
        post["exchange"]["rows_sent"]
    assert ex["pre_entries"] + ex["post_entries"] == ex["cut_entries"] > 0
    assert pp["comm_bytes"] == pp["comm_bytes_analytic"] < post["comm_bytes"]


@pytest.mark.parametrize("bits", [16, 8, 4, 2])
def test_quantised_messages_bytes_and_accuracy(bits):
    d = sbm(n_nodes=400, n_features=32, n_val=100, n_test=200, seed=4)
    cfg = dict(epochs=40, workers=3, parallelism="partition", partition="metis",
               aggregation="prepost", device="cpu", hidden=32, lr=0.02)
    full = train(d, TrainConfig(**cfg)).report()
    q = train(d, TrainConfig(comm_bits=bits, **cfg)).report()
    rows = q["exchange"]["rows_sent"]
    data_row = -(-32 * bits // 8)                  # one 32-wide hidden row at `bits`
    params = 8 if bits <= 8 else 0                 # fp32 zero point and scale per row
    # one exchange (2 layers -> 1), forward and backward
    assert q["comm_bytes_per_epoch"]["data"] == 2 * rows * data_row
    assert q["comm_bytes_per_epoch"]["params"] == 2 * rows * params
    assert q["comm_bytes"] == q["comm_bytes_analytic"]
    assert full["comm_bytes"] == 2 * rows * 32 * 4
    # quantised halo rows, same model: it still learns (fp32 reaches ~0.9 here)
    assert q["test_acc"] > full["test_acc"] - 0.08
    if bits < 16:
        assert q["train_loss"] != full["train_loss"]
    again = train(d, TrainConfig(comm_bits=bits, **cfg)).report()
    assert again["train_loss"] == q["train_loss"]  # the rounding draws are seeded


def test_bad_options_are_one_line():
    d = sbm(n_nodes=60, n_val=10, n_test=10)
    for cfg, words in ((TrainConfig(aggregation="prepost"), "needs --parallelism partition"),
                       (TrainConfig(comm_bits=3), "--comm-bits 3: choose one of"),
                       (TrainConfig(aggregation="both", parallelism="partition"),
                        "--aggregation 'both'")):
        with pytest.raises(UserError, match=words):
            train(d, cfg)
