"""moagcn.nn's conv layers against PyTorch Geometric's own (the reference shares no code with
moagcn): same weights, same outputs and gradients within 1e-5 relative, on Cora and on a graph
with a hub, isolated nodes, self loops and repeated edges."""

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from moagcn import nn as mnn
from moagcn.host.devices.select import AcceleratorChoice

from .graphs import awkward_graph, cora

RTOL = 1e-5


def close(a, b, what):
    """Equal within RTOL of the larger tensor's largest magnitude (fp32 sums in another order)."""
    a, b = a.detach(), b.detach()
    scale = max(float(b.abs().max()), 1e-30)
    err = float((a - b).abs().max())
    assert err <= RTOL * scale, f"{what}: max |diff| {err:.3g} > {RTOL} x {scale:.3g}"


def grads(module):
    return {k: p.grad.clone() for k, p in module.named_parameters()}


def run_pair(ours, theirs, x, edge_index, forward=None):
    """Forward both, backward a fixed random functional of the output, compare everything."""
    forward = forward or (lambda m, x: m(x, edge_index))
    xa = x.clone().requires_grad_(True)
    xb = x.clone().requires_grad_(True)
    ya, yb = forward(ours, xa), forward(theirs, xb)
    close(ya, yb, "output")
    w = torch.randn(yb.shape, generator=torch.Generator().manual_seed(1))
    (ya * w).sum().backward()
    (yb * w).sum().backward()
    close(xa.grad, xb.grad, "input gradient")
    ga, gb = grads(ours), grads(theirs)
    assert ga.keys() == gb.keys()
    for k in gb:
        close(ga[k], gb[k], f"gradient of {k}")
    return ya


class TwoLayer(torch.nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.conv1, self.conv2 = c1, c2

    def forward(self, x, edge_index):
        return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)


def gcn_pair(f_in, hidden, f_out, device):
    torch.manual_seed(0)
    theirs = TwoLayer(pyg_nn.GCNConv(f_in, hidden), pyg_nn.GCNConv(hidden, f_out))
    dev = AcceleratorChoice(device, preset="tiny" if device == "rtl" else None).make()
    ours = TwoLayer(mnn.GCNConv(f_in, hidden, device=dev), mnn.GCNConv(hidden, f_out, device=dev))
    ours.load_state_dict(theirs.state_dict())   # same parameter names as PyG
    return ours, theirs, dev


@pytest.mark.parametrize("device", ["cpu", "model"])
def test_two_layer_gcn_equals_pyg_on_cora(device):
    edge_index, X = cora()
    ours, theirs, dev = gcn_pair(X.shape[1], 16, 7, device)
    run_pair(ours, theirs, X, edge_index)
    if device == "model":
        # forward and backward of both layers ran on the accelerator model
        assert dev.counters.calls == 4 and dev.counters.cycles_compute > 0


@pytest.mark.parametrize("device", ["cpu", "model"])
def test_two_layer_gcn_equals_pyg_on_an_awkward_graph(device):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 11, generator=torch.Generator().manual_seed(2))
    ours, theirs, _ = gcn_pair(11, 13, 5, device)   # widths not multiples of any lane count
    y = run_pair(ours, theirs, x, edge_index)
    assert y[n - 1].abs().sum() > 0                  # the isolated node still sees itself


@pytest.mark.parametrize("kw", [dict(), dict(add_self_loops=False), dict(normalize=False),
                                dict(bias=False)])
def test_gcn_options_equal_pyg(kw):
    edge_index, n = awkward_graph(seed=5)
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(3))
    torch.manual_seed(1)
    theirs = pyg_nn.GCNConv(6, 4, **kw)
    ours = mnn.GCNConv(6, 4, device="model", **kw)
    ours.load_state_dict(theirs.state_dict())
    run_pair(ours, theirs, x, edge_index)


@pytest.mark.parametrize("kw", [dict(), dict(aggr="sum"), dict(root_weight=False),
                                dict(normalize=True), dict(project=True), dict(bias=False)])
def test_sage_equals_pyg(kw):
    edge_index, n = awkward_graph(seed=7)
    x = torch.randn(n, 9, generator=torch.Generator().manual_seed(4))
    torch.manual_seed(2)
    theirs = pyg_nn.SAGEConv(9, 6, **kw)
    ours = mnn.SAGEConv(9, 6, device="model", **kw)
    ours.load_state_dict(theirs.state_dict())
    run_pair(ours, theirs, x, edge_index)


@pytest.mark.parametrize("eps,train_eps", [(0.0, False), (0.3, True)])
def test_gin_equals_pyg(eps, train_eps):
    edge_index, n = awkward_graph(seed=9)
    x = torch.randn(n, 7, generator=torch.Generator().manual_seed(5))

    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(7, 10), torch.nn.ReLU(),
                                   torch.nn.Linear(10, 3))
    torch.manual_seed(3)
    theirs = pyg_nn.GINConv(mlp(), eps=eps, train_eps=train_eps)
    ours = mnn.GINConv(mlp(), eps=eps, train_eps=train_eps, device="model")
    ours.load_state_dict(theirs.state_dict())
    run_pair(ours, theirs, x, edge_index)
    if train_eps:
        assert ours.eps.grad is not None and ours.eps.grad.abs() > 0


@pytest.mark.xdist_group("verilator-sspmm")
def test_gcn_on_the_rtl_equals_pyg_and_the_model_bit_for_bit():
    """The aggregation of both layers, forward and backward, on the tiny preset's RTL."""
    edge_index, n = awkward_graph(n=24, seed=11)
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(6))
    ours, theirs, dev = gcn_pair(5, 6, 3, "rtl")
    y_rtl = run_pair(ours, theirs, x, edge_index)
    model, _, _ = gcn_pair(5, 6, 3, "model")
    model.load_state_dict(theirs.state_dict())
    assert torch.equal(model(x, edge_index), y_rtl.detach())
    assert dev.counters.calls == 4 and dev.counters.sim_cycles > 0


def test_the_operator_is_reused_until_edge_index_changes():
    edge_index, n = awkward_graph()
    conv = mnn.GCNConv(4, 2, device="cpu")
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(7))
    conv(x, edge_index)
    op = conv._op
    conv(x, edge_index)
    assert conv._op is op
    edge_index[0, 0] = (edge_index[0, 0] + 1) % n      # modified in place: rebuilt
    torch.manual_seed(0)
    ref = pyg_nn.GCNConv(4, 2)
    conv.load_state_dict(ref.state_dict())
    y = conv(x, edge_index)
    assert conv._op is not op
    close(y, ref(x, edge_index), "output after an in-place edit")


@pytest.mark.parametrize("make,call,match", [
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c(x, e.t()), r"shape \(\d+, 2\).*transpose"),
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c(x, e.float()), "dtype.*long"),
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c(x[:10], e), r"out of range for num_nodes = 10"),
    (lambda: mnn.SAGEConv(4, 2), lambda c, x, e: c(x, e, torch.ones(e.shape[1])),
     "edge_weight is not supported.*PyG's SAGEConv takes none"),
    (lambda: mnn.GINConv(torch.nn.Identity()), lambda c, x, e: c(x, e, torch.ones(e.shape[1])),
     "edge_weight is not supported.*PyG's GINConv takes none"),
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c((x, x), e), "bipartite"),
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c(x.long(), e), "float"),
    (lambda: mnn.GCNConv(4, 2), lambda c, x, e: c(x, e.to_sparse()), "sparse"),
])
def test_bad_calls_name_the_argument_and_the_fix(make, call, match):
    edge_index, n = awkward_graph()
    with pytest.raises(ValueError, match=match):
        call(make(), torch.randn(n, 4, generator=torch.Generator().manual_seed(8)), edge_index)


@pytest.mark.parametrize("make,match", [
    (lambda: mnn.GCNConv(4, 2, improved=True), "improved=True"),
    (lambda: mnn.GCNConv(-1, 2), "lazy"),
    (lambda: mnn.GCNConv(4, 2, normalize=False, add_self_loops=True), "normalize=True"),
    (lambda: mnn.GCNConv(4, 2, flow="target_to_source"), "flow"),
    (lambda: mnn.GCNConv(4, 2, device="cuda"), r"device='cuda'.*\.to\('cuda'\)"),
    (lambda: mnn.GCNConv(4, 2, device="model", params={"lanes": "3"}), "lanes"),
    (lambda: mnn.SAGEConv(4, 2, aggr="max"), "aggr='max'"),
    (lambda: mnn.SAGEConv((4, 3), 2), "bipartite"),
    (lambda: mnn.GINConv("mlp"), "torch module"),
])
def test_unsupported_options_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_layers_share_one_device_and_count_its_work():
    edge_index, n = awkward_graph()
    dev = AcceleratorChoice("model").make()
    c1, c2 = mnn.GCNConv(5, 8, device=dev), mnn.GCNConv(8, 3, device=dev)
    assert c1.sparse_device is c2.sparse_device is dev
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(9))
    c2(torch.relu(c1(x, edge_index)), edge_index).sum().backward()
    # A + I of the layer (one loop per node): entries times width, forward and backward
    src, dst = edge_index.numpy()
    nnz = int((src != dst).sum()) + n
    assert dev.counters.spmm_adds == 2 * nnz * 8 + 2 * nnz * 3
    assert np.isclose(dev.counters.calls, 4)


def test_training_pyg_s_gcn_example_with_moagcn_layers_follows_pyg():
    """PyG's examples/gcn.py model (dropout, conv, relu, dropout, conv) on Cora, trained with
    PyG's layers and with moagcn's on the `model` device from the same seed: the same loss
    curve (same weights, same dropout draws) and the same predictions."""
    from moagcn.host.benches.pyg import bundled, run_conv_model
    d = bundled("cora")
    curves = {}
    for kind in ("pyg", "nn:model"):
        curves[kind] = run_conv_model(kind, d, seed=2, epochs=40, record=True)
    a, b = curves["pyg"], curves["nn:model"]
    np.testing.assert_allclose(b["loss_curve"], a["loss_curve"], rtol=1e-4)
    assert b["loss_curve"][-1] < 0.75 * b["loss_curve"][0]         # it did learn
    assert b["test_acc"] == pytest.approx(a["test_acc"], abs=2e-3)  # at most 2 of 1,000 flip
