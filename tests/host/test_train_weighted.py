"""Weighted GCN training with the aggregation on the accelerator's weighted S-SpMM
(``--param weighted=true``): the operator against a reference written from the formula, the
training against a dense torch model built from that reference, ``model`` against ``rtl`` bit
for bit, ``model`` against ``cpu`` within fp32 tolerance, and the refusal of a binary
configuration (one line, exit status 2)."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset, save_npz
from moagcn.host.graphs.generators import sbm
from moagcn.host.nn.autograd import AggregationOp
from moagcn.host.nn.models import GNN
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train

WEIGHTED = {"weighted": "true"}


def weighted_dataset(n_nodes, n_features, seed, **kw):
    ds = sbm(n_nodes=n_nodes, n_features=n_features, seed=seed, **kw)
    w = (0.1 + 2 * np.random.default_rng(seed + 1).random(ds.graph.nnz)).astype(np.float32)
    return Dataset("wsbm", ds.graph, ds.features, ds.labels, ds.train_mask, ds.val_mask,
                   ds.test_mask, w)


@pytest.fixture(scope="module")
def data():
    return weighted_dataset(160, 24, 3, n_val=40, n_test=60)


@pytest.fixture(scope="module")
def small():
    """Small enough for a quick Verilator run on the tiny preset (still cut into tiles)."""
    return weighted_dataset(80, 16, 5, train_per_class=4, n_val=20, n_test=30)


def formula_operator(n, edges):
    """``D^-1/2 (A_w + I) D^-1/2`` from the formula, one edge at a time, in float64.

    ``edges``: ``(dst, src, w)`` triples (row = target, as the CSR rows). As PyG's
    ``gcn_norm``: every self loop is dropped and each node gets one loop of weight 1, or, where
    it had loops, the weight of its last one; repeated edges add up; ``d[v]`` is the sum of the
    weights in row ``v`` (loop included); the coefficient of ``(v, u)`` is
    ``w / sqrt(d[v] d[u])``, and 0 where a degree is 0."""
    loop = [1.0] * n
    A = [[0.0] * n for _ in range(n)]
    for v, u, w in edges:
        if v == u:
            loop[v] = float(w)
        else:
            A[v][u] += float(w)
    for v in range(n):
        A[v][v] += loop[v]
    deg = [sum(A[v]) for v in range(n)]
    out = np.zeros((n, n))
    for v in range(n):
        for u in range(n):
            if A[v][u] != 0.0 and deg[v] > 0 and deg[u] > 0:
                out[v, u] = A[v][u] / (deg[v] ** 0.5 * deg[u] ** 0.5)
    return out


def edges_of(ds):
    g = ds.graph
    rows = np.repeat(np.arange(g.n_rows), np.diff(g.indptr))
    return list(zip(rows.tolist(), g.indices.tolist(), ds.edge_weight.tolist()))


def test_the_weighted_operator_follows_the_formula():
    """Self loops (two on one node, the last weight kept), a repeated edge, an isolated node
    and weights far from 1: the degrees are weighted sums, not counts."""
    from moagcn.core.graph import CSRGraph
    dst = np.array([0, 0, 1, 1, 2, 2, 2, 3, 0], dtype=np.int64)
    src = np.array([1, 2, 0, 1, 2, 2, 0, 0, 1], dtype=np.int64)
    w = np.array([3.0, 0.5, 3.0, 4.0, 2.0, 7.0, 0.5, 0.25, 1.5], dtype=np.float32)
    order = np.lexsort((src, dst))
    g = CSRGraph.from_edges(dst, src, 5, dedupe=False)
    edges = list(zip(dst[order].tolist(), src[order].tolist(), w[order].tolist()))
    op = AggregationOp.gcn_weighted(g, w[order])
    np.testing.assert_allclose(op.dense(), formula_operator(5, edges), rtol=1e-6, atol=1e-7)


def dense_reference_losses(ds, cfg):
    """The run's model (same initial weights, dropout 0) in dense torch with the formula's
    operator: ``logits = Â relu(Â X W1 + b1) W2 + b2`` -- aggregation first, as the runtime."""
    torch.manual_seed(cfg.seed)
    model = GNN("gcn", ds.n_features, cfg.hidden, ds.n_classes, 2)
    A = torch.from_numpy(formula_operator(ds.n_nodes, edges_of(ds))).float()
    X = ds.features / np.maximum(ds.features.sum(1, keepdims=True), 1e-12)
    X = torch.from_numpy(X.astype(np.float32))
    y = torch.from_numpy(ds.labels)
    tr = torch.from_numpy(np.nonzero(ds.train_mask)[0])
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    l1, l2 = model.updates
    losses = []
    for _ in range(cfg.epochs):
        opt.zero_grad()
        out = l2(A @ torch.relu(l1(A @ X)))
        loss = F.cross_entropy(out[tr], y[tr])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_training_on_the_model_device_follows_the_formula(data):
    """Forward and the transposed backward on the weighted S-SpMM's golden model: the losses
    follow a dense model built from the formula's operator, and the devices worked."""
    cfg = TrainConfig(epochs=6, device="model", params=WEIGHTED, dropout=0.0, lr=0.05)
    run = train(data, cfg)
    np.testing.assert_allclose(run.train_loss, dense_reference_losses(data, cfg),
                               rtol=1e-4, atol=1e-5)
    assert run.history[-1].sim_cycles > 0
    assert run.device_counters[0]["work_adds"] > 0


def test_model_and_cpu_agree_with_dropout_and_two_workers(data):
    """The dropout mask is the weighted job's output mask: the accelerator skips the masked
    outputs' work; the losses equal the cpu device's within fp32 tolerance (other orders)."""
    cfg = TrainConfig(epochs=5, device="model", params=WEIGHTED, workers=2)
    acc = train(data, cfg)
    cpu = train(data, dataclasses.replace(cfg, device="cpu", params={}))
    np.testing.assert_allclose(acc.train_loss, cpu.train_loss, rtol=1e-5, atol=1e-6)
    unmasked = train(data, dataclasses.replace(cfg, dropout=0.0))
    assert acc.history[-1].sim_cycles < unmasked.history[-1].sim_cycles


def test_partition_parallelism_on_the_model_device(data):
    cfg = TrainConfig(epochs=4, device="model", params=WEIGHTED, parallelism="partition",
                      workers=2, dropout=0.0)
    acc = train(data, cfg)
    cpu = train(data, dataclasses.replace(cfg, device="cpu", params={}))
    np.testing.assert_allclose(acc.train_loss, cpu.train_loss, rtol=1e-5, atol=1e-6)


def test_rtl_reproduces_the_model_losses_bit_for_bit(small):
    """The weighted S-SpMM's RTL (lean Verilator harness, tiny preset: several tiles) gives
    the model's losses and accuracies bit for bit; the cpu device's within fp32 tolerance."""
    cfg = TrainConfig(epochs=3, device="model", preset="tiny", params=WEIGHTED, workers=2)
    model = train(small, cfg)
    rtl = train(small, dataclasses.replace(cfg, device="rtl"))
    assert rtl.train_loss == model.train_loss
    assert [h.val_acc for h in rtl.history] == [h.val_acc for h in model.history]
    assert rtl.device_counters[0]["tiles"] > 1
    cpu = train(small, dataclasses.replace(cfg, device="cpu", preset=None, params={}))
    np.testing.assert_allclose(cpu.train_loss, model.train_loss, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw,match", [
    (dict(device="model"), r"^--device model: dataset wsbm has edge weights.*add --param "
                           r"weighted=true.*--device cpu$"),
    (dict(device="rtl", preset="tiny"), r"^--device rtl: .*add --param weighted=true"),
    (dict(device="model", design="hyscale"), r"hyscale accelerator has no weighted "
                                             r"aggregation.*--param weighted=true"),
    (dict(device="model", devices="sspmm:tiny,cpu", workers=2),
     r"^--devices sspmm:tiny,cpu: .*sspmm:tiny:weighted=true"),
])
def test_a_binary_configuration_is_refused(small, kw, match):
    with pytest.raises(UserError, match=match) as exc:
        train(small, TrainConfig(epochs=1, **kw))
    assert "\n" not in str(exc.value)


def test_cli_refuses_a_binary_configuration_in_one_line(small, tmp_path, capsys):
    path = str(tmp_path / "w.npz")
    save_npz(small, path)
    assert main(["train", "--dataset", path, "--device", "model", "--preset", "tiny",
                 "--epochs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--param weighted=true" in err and "--device cpu" in err
    rc = main(["train", "--dataset", path, "--device", "model", "--preset", "tiny",
               "--param", "weighted=true", "--epochs", "2", "--quiet",
               "--report", str(tmp_path / "r.json")])
    assert rc in (0, None)


def test_spmm_weighted_takes_an_output_mask():
    """``Z = (A_w X) ⊙ M`` on the weighted S-SpMM's model and on cpu: masked outputs +0, the
    others a plain loop's sums; the work counts only the unmasked outputs."""
    from moagcn.core.graph import CSRGraph
    from moagcn.host.devices.select import AcceleratorChoice
    rng = np.random.default_rng(4)
    n, width = 12, 5
    dst = rng.integers(0, n, 40)
    src = rng.integers(0, n, 40)
    g = CSRGraph.from_edges(dst, src, n, dedupe=True)
    vals = rng.uniform(-2, 2, (g.nnz, 1)).astype(np.float32)
    X = rng.standard_normal((n, 1, width)).astype(np.float32)
    M = rng.random((n, 1, width)) < 0.6
    rows = np.repeat(np.arange(n), np.diff(g.indptr))
    want = np.zeros((n, width))
    for k in range(g.nnz):
        want[rows[k]] += float(vals[k, 0]) * X[g.indices[k], 0].astype(np.float64)
    want[~M[:, 0]] = 0.0
    for choice in (AcceleratorChoice("model", "sspmm", "tiny", {"weighted": "true"}),
                   AcceleratorChoice("cpu")):
        dev = choice.make()
        Z = dev.spmm_weighted(g, torch.from_numpy(vals), torch.from_numpy(X),
                              mask=torch.from_numpy(M)).numpy()
        np.testing.assert_allclose(Z[:, 0], want, rtol=1e-5, atol=1e-5)
        assert not np.signbit(Z[~M]).any() and (Z[~M] == 0).all()
        deg = np.diff(g.indptr)
        assert dev.counters.work_adds == int((deg[:, None] * M[:, 0]).sum())
    with pytest.raises(UserError, match=r"mask has shape \(12, 5\); expected \(12, 1, 5\)"):
        dev.spmm_weighted(g, torch.from_numpy(vals), torch.from_numpy(X),
                          mask=torch.from_numpy(M[:, 0]))
