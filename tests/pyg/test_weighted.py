"""moagcn.nn.GCNConv with edge weights against PyTorch Geometric's GCNConv (its gcn_norm:
weighted degrees, remaining self loops of weight 1, a node's own loop keeping its weight): the
same outputs and gradients of the input, the parameters and the weights themselves, on a graph
with a hub, isolated nodes, self loops (one node with two, of different weights) and repeated
edges, and on Cora; the accelerator devices refuse weights in one line."""

import pytest
import torch
import torch_geometric.nn as pyg_nn

from moagcn import nn as mnn

from .graphs import awkward_graph, cora
from .test_nn import close, run_pair


def weights(edge_index, seed=6, low=0.1):
    g = torch.Generator().manual_seed(seed)
    return low + torch.rand(edge_index.shape[1], generator=g) * 2


@pytest.mark.parametrize("kw", [dict(), dict(add_self_loops=False), dict(normalize=False),
                                dict(bias=False)],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "defaults")
def test_weighted_gcn_equals_pyg(kw):
    edge_index, n = awkward_graph()
    w = weights(edge_index)
    x = torch.randn(n, 9, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    theirs = pyg_nn.GCNConv(9, 5, **kw)
    ours = mnn.GCNConv(9, 5, **kw)
    ours.load_state_dict(theirs.state_dict())
    wa, wb = w.clone().requires_grad_(True), w.clone().requires_grad_(True)
    run_pair(ours, theirs, x, edge_index,
             forward=lambda m, x: m(x, edge_index, wa if m is ours else wb))
    close(wa.grad, wb.grad, "gradient of the edge weights")


def test_the_loop_weights_are_pyg_s():
    """Node 2 has two loops: PyG keeps the last one's weight; a node without one gets 1."""
    edge_index, n = awkward_graph()
    w = weights(edge_index)
    loops = (edge_index[0] == 2) & (edge_index[1] == 2)
    assert int(loops.sum()) == 2
    w[torch.nonzero(loops)[0]] = 5.0                  # the first loop differs from the last
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(3))
    theirs = pyg_nn.GCNConv(4, 3)
    ours = mnn.GCNConv(4, 3)
    ours.load_state_dict(theirs.state_dict())
    close(ours(x, edge_index, w), theirs(x, edge_index, w), "output")


def test_unit_weights_equal_the_unweighted_layer():
    edge_index, X = cora()
    conv = mnn.GCNConv(X.shape[1], 7)
    close(conv(X, edge_index, torch.ones(edge_index.shape[1])), conv(X, edge_index),
          "unit weights against no weights")


def test_weighted_two_layer_gcn_equals_pyg_on_cora():
    edge_index, X = cora()
    w = weights(edge_index)
    torch.manual_seed(0)
    p1, p2 = pyg_nn.GCNConv(X.shape[1], 16), pyg_nn.GCNConv(16, 7)
    o1 = mnn.GCNConv(X.shape[1], 16)
    o2 = mnn.GCNConv(16, 7, device=o1.sparse_device)
    o1.load_state_dict(p1.state_dict())
    o2.load_state_dict(p2.state_dict())
    ya = o2(torch.relu(o1(X, edge_index, w)), edge_index, w)
    yb = p2(torch.relu(p1(X, edge_index, w)), edge_index, w)
    close(ya, yb, "output")


@pytest.mark.parametrize("device", ["model"])
def test_the_accelerator_devices_refuse_weights_in_one_line(device):
    edge_index, n = awkward_graph()
    conv = mnn.GCNConv(4, 3, device=device)
    with pytest.raises(ValueError) as exc:
        conv(torch.randn(n, 4), edge_index, weights(edge_index))
    msg = str(exc.value)
    assert "\n" not in msg
    assert "device model:sspmm" in msg and "edge weights" in msg and "--device cpu" in msg


@pytest.mark.parametrize("bad,match", [
    (lambda w: w[:-1], r"edge_weight has shape \(\d+,\); expected \(\d+,\)"),
    (lambda w: w.reshape(-1, 1), "edge_weight has shape"),
    (lambda w: torch.where(torch.arange(w.numel()) == 3, float("nan"), w), r"edge_weight\[3\].*not finite"),
    (lambda w: torch.where(torch.arange(w.numel()) == 0, float("inf"), w), r"edge_weight\[0\].*not finite"),
    (lambda w: w.long(), "float tensor"),
    (lambda w: -w, r"weighted in-degree .* \(< 0\)"),
])
def test_bad_weights_are_one_line_errors(bad, match):
    edge_index, n = awkward_graph()
    with pytest.raises(ValueError, match=match) as exc:
        mnn.GCNConv(4, 3)(torch.randn(n, 4), edge_index, bad(weights(edge_index)))
    assert "\n" not in str(exc.value)
