"""`moagcn train` on a weighted graph against PyTorch Geometric: a dataset's edge weights
(.npz data, .pt edge_weight) reach the GCN as PyG's gcn_norm uses them; the runtimes that
support them agree; a binary accelerator configuration and the unsupported options refuse in
one line."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from moagcn.cli.main import main
from moagcn.errors import UserError
from moagcn.host.graphs.data import Dataset, save_npz
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.pyg import from_edge_index, from_pyg, to_edge_index, to_pyg, weights_to_csr
from moagcn.host.nn.autograd import AggregationOp
from moagcn.host.nn.models import GNN
from moagcn.host.training.config import TrainConfig
from moagcn.host.training.fullgraph import train

from .graphs import awkward_graph


@pytest.fixture(scope="module")
def data():
    ds = sbm(n_nodes=240, n_features=32, n_val=60, n_test=100, seed=5)
    rng = np.random.default_rng(1)
    w = (0.1 + 2 * rng.random(ds.graph.nnz)).astype(np.float32)
    return Dataset("wsbm", ds.graph, ds.features, ds.labels, ds.train_mask, ds.val_mask,
                   ds.test_mask, w)


def pyg_losses(ds, cfg):
    """The same 2-layer GCN and Adam written with PyG's GCNConv and edge_weight (dropout 0:
    then aggregating first or transforming first is the same model)."""
    torch.manual_seed(cfg.seed)
    init = GNN("gcn", ds.n_features, cfg.hidden, ds.n_classes, 2)   # moagcn's initial weights
    convs = [pyg_nn.GCNConv(ds.n_features, cfg.hidden), pyg_nn.GCNConv(cfg.hidden, ds.n_classes)]
    for conv, lin in zip(convs, init.updates):
        conv.lin.weight.data.copy_(lin.weight.data)
        conv.bias.data.copy_(lin.bias.data)
    ei = to_edge_index(ds.graph)
    w = torch.from_numpy(ds.edge_weight)        # CSR order = to_edge_index's order
    X = torch.from_numpy(row_normalize(ds.features))
    y = torch.from_numpy(ds.labels)
    tr = torch.from_numpy(np.nonzero(ds.train_mask)[0])
    params = [p for c in convs for p in c.parameters()]
    opt = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    losses = []
    for _ in range(cfg.epochs):
        opt.zero_grad()
        out = convs[1](torch.relu(convs[0](X, ei, w)), ei, w)
        loss = F.cross_entropy(out[tr], y[tr])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def test_the_operator_is_pyg_s_gcn_norm():
    """Hub, isolated nodes, a node with two loops of different weights, repeated edges."""
    ei, n = awkward_graph()
    w = 0.1 + torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(3))
    w[torch.nonzero((ei[0] == 2) & (ei[1] == 2))[0]] = 7.0    # PyG keeps the last loop's
    op = AggregationOp.gcn_weighted(from_edge_index(ei, n), weights_to_csr(ei, w, n))
    e2, w2 = gcn_norm(ei, w, n, add_self_loops=True)
    A = torch.zeros(n, n, dtype=torch.float64).index_put_((e2[1], e2[0]), w2.double(),
                                                          accumulate=True)
    np.testing.assert_allclose(op.dense(), A.numpy(), rtol=1e-6, atol=1e-7)


BASE = TrainConfig(model="gcn", epochs=6, device="cpu", dropout=0.0, lr=0.05)


def test_weighted_training_follows_pyg(data):
    ours = train(data, BASE).train_loss
    np.testing.assert_allclose(ours, pyg_losses(data, BASE), rtol=1e-4, atol=1e-5)
    unweighted = dataclasses.replace(data, edge_weight=None)
    assert abs(train(unweighted, BASE).train_loss[1] - ours[1]) > 1e-3   # the weights matter


@pytest.mark.parametrize("kw", [dict(workers=2), dict(parallelism="partition", workers=2),
                                dict(reorder="rcm"), dict(dropout=0.5, workers=2)],
                         ids=["mop2", "partition2", "rcm", "dropout-mop2"])
def test_runtimes_agree_on_a_weighted_graph(data, kw):
    one = train(data, dataclasses.replace(BASE, dropout=kw.get("dropout", 0.0)))
    other = train(data, dataclasses.replace(BASE, **kw))
    np.testing.assert_allclose(other.train_loss, one.train_loss, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw,match", [
    (dict(device="model"), r"--device model: dataset wsbm has edge weights.*--device cpu"),
    (dict(device="rtl"), r"--device rtl: .*binary adjacency.*--device cpu"),
    (dict(model="sage"), r"--model sage: .*takes none"),
    (dict(model="gin"), r"--model gin: "),
    (dict(pipeline="off"), r"--pipeline off: weighted graphs"),
    (dict(parallelism="partition", workers=2, aggregation="pre"), r"--aggregation pre"),
])
def test_what_cannot_train_weights_is_refused_in_one_line(data, kw, match):
    with pytest.raises(UserError, match=match) as exc:
        train(data, dataclasses.replace(BASE, **kw))
    assert "\n" not in str(exc.value)


def test_weights_survive_the_files_and_interop(data, tmp_path):
    save_npz(data, tmp_path / "w.npz")
    back = load_dataset(str(tmp_path / "w.npz"))
    np.testing.assert_array_equal(back.edge_weight, data.edge_weight)
    pyg = to_pyg(data)
    assert torch.equal(pyg.edge_weight, torch.from_numpy(data.edge_weight))
    # edges shuffled: from_pyg puts the weights back in CSR order with their edges
    perm = torch.randperm(pyg.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    pyg.edge_index, pyg.edge_weight = pyg.edge_index[:, perm], pyg.edge_weight[perm]
    again = from_pyg(pyg)
    np.testing.assert_array_equal(again.edge_weight, data.edge_weight)
    torch.save(pyg, tmp_path / "w.pt")
    np.testing.assert_array_equal(load_dataset(str(tmp_path / "w.pt")).edge_weight,
                                  data.edge_weight)
    und = load_dataset(str(tmp_path / "w.npz"), undirected=True)
    assert und.edge_weight.shape == (und.graph.nnz,)


def test_bad_weights_in_a_dataset_are_one_line_errors(data, tmp_path):
    bad = data.edge_weight.copy()
    bad[4] = np.nan
    with pytest.raises(UserError, match=r"edge weight 4 is nan"):
        dataclasses.replace(data, edge_weight=bad)
    with pytest.raises(UserError, match=r"edge weights have shape \(3,\)"):
        dataclasses.replace(data, edge_weight=bad[:3])


def test_cli_train_on_a_weighted_dataset(data, tmp_path, capsys):
    path = str(tmp_path / "w.npz")
    save_npz(data, path)
    assert main(["train", "--dataset", path, "--device", "model", "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--device cpu" in err
    rc = main(["train", "--dataset", path, "--device", "cpu", "--epochs", "2",
               "--report", str(tmp_path / "r.json")])
    assert rc in (0, None)
    assert "(weighted)" in capsys.readouterr().out


def test_infer_says_it_does_not_use_the_weights(data, tmp_path, capsys):
    path, ckpt = str(tmp_path / "w.npz"), str(tmp_path / "c.pt")
    save_npz(data, path)
    assert main(["train", "--dataset", path, "--device", "cpu", "--epochs", "1", "--quiet",
                 "--save", ckpt, "--report", str(tmp_path / "r.json")]) in (0, None)
    capsys.readouterr()
    assert main(["infer", "--dataset", path, "--checkpoint", ckpt, "--device", "cpu",
                 "--quiet", "--report", str(tmp_path / "i.json"),
                 "--out", str(tmp_path / "e.npy")]) in (0, None)
    assert "the edge weights are not used; moagcn infer" in capsys.readouterr().err


def test_graph_from_pyg_says_where_the_weights_go(data):
    from moagcn.interop import graph_from_pyg
    with pytest.warns(UserWarning, match="weights_to_csr"):
        graph_from_pyg(to_pyg(data))
