"""moagcn.nn.GATConv against PyTorch Geometric's GATConv (the reference shares no code with
moagcn): PyG's weights loaded, the same outputs, attention weights and gradients of every
parameter and of the input within 1e-5 relative, on graphs with a hub, isolated nodes, self
loops (one node with two), repeated edges, and on Cora; and the refusals."""

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from moagcn import nn as mnn
from moagcn.host.devices.select import AcceleratorChoice

from .graphs import awkward_graph, cora
from .test_nn import close, run_pair


def gat_pair(f_in, f_out, seed=0, **kw):
    torch.manual_seed(seed)
    theirs = pyg_nn.GATConv(f_in, f_out, **kw)
    ours = mnn.GATConv(f_in, f_out, **kw)
    ours.load_state_dict(theirs.state_dict())   # PyG's parameter names
    return ours, theirs


OPTIONS = [dict(), dict(heads=3), dict(heads=4, concat=False), dict(heads=2, bias=False),
           dict(heads=2, add_self_loops=False), dict(heads=2, negative_slope=0.05),
           dict(heads=2, residual=True), dict(heads=3, concat=False, residual=True)]


@pytest.mark.parametrize("kw", OPTIONS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
                         or "defaults")
def test_gat_equals_pyg_on_an_awkward_graph(kw):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 11, generator=torch.Generator().manual_seed(2))
    ours, theirs = gat_pair(11, 5, **kw)            # widths not multiples of any lane count
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    run_pair(ours, theirs, x, edge_index)


def test_attention_weights_are_pyg_s_edge_for_edge():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 7, generator=torch.Generator().manual_seed(4))
    for loops in (True, False):
        ours, theirs = gat_pair(7, 3, heads=2, add_self_loops=loops)
        ya, (ea, aa) = ours(x, edge_index, return_attention_weights=True)
        yb, (eb, ab) = theirs(x, edge_index, return_attention_weights=True)
        assert torch.equal(ea, eb)                   # the same edges, in PyG's order
        close(aa, ab, "attention weights")
        close(ya, yb, "output")
        # every target's weights sum to 1 (per head); a node with no incoming edge has none
        sums = torch.zeros(n, 2).index_add(0, ea[1], aa)
        has = torch.zeros(n, dtype=torch.bool)
        has[ea[1]] = True
        assert torch.allclose(sums[has], torch.ones_like(sums[has]), atol=1e-5)
        assert loops or not has.all()                # isolated targets without loops
    assert not isinstance(ours(x, edge_index, return_attention_weights=False), tuple)


def test_two_layer_gat_equals_pyg_on_cora():
    edge_index, X = cora()
    torch.manual_seed(0)

    class GAT(torch.nn.Module):
        def __init__(self, lib):
            super().__init__()
            self.conv1 = lib.GATConv(X.shape[1], 8, heads=8)
            self.conv2 = lib.GATConv(64, 7, heads=1, concat=False)

        def forward(self, x, e):
            return self.conv2(torch.nn.functional.elu(self.conv1(x, e)), e)

    theirs, ours = GAT(pyg_nn), GAT(mnn)
    ours.load_state_dict(theirs.state_dict())
    run_pair(ours, theirs, X, edge_index)


def test_attention_dropout_draws_pyg_s_masks():
    """In training mode with the same seed, the same attention weights are dropped."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(5))
    ours, theirs = gat_pair(6, 4, heads=2, dropout=0.5)
    torch.manual_seed(11)
    ya, (_, aa) = ours(x, edge_index, return_attention_weights=True)
    torch.manual_seed(11)
    yb, (_, ab) = theirs(x, edge_index, return_attention_weights=True)
    assert torch.equal(aa == 0, ab == 0) and bool((aa == 0).any())
    close(ya, yb, "output with attention dropout")
    ours.eval()
    theirs.eval()
    close(ours(x, edge_index), theirs(x, edge_index), "output in eval mode")


def test_the_sparse_products_run_on_the_device():
    """Forward: one SDDMM (scores) and one weighted SpMM; backward: the transposes."""
    edge_index, n = awkward_graph()
    conv = mnn.GATConv(5, 3, heads=2)
    x = torch.randn(n, 5, requires_grad=True)
    conv(x, edge_index).sum().backward()
    c = conv.sparse_device.counters
    # forward: SDDMM + SpMM; backward: SDDMM (dα) + SpMMᵀ (dh) + SpMM (dQ) + SpMMᵀ (dK)
    assert c.calls == 6 and c.work_adds > 0


@pytest.mark.parametrize("device", ["model"])
def test_devices_without_per_edge_products_refuse_in_one_line(device):
    edge_index, n = awkward_graph()
    conv = mnn.GATConv(5, 3, heads=2, device=device)
    with pytest.raises(ValueError) as exc:
        conv(torch.randn(n, 5), edge_index)
    msg = str(exc.value)
    assert "\n" not in msg and "device model:sspmm" in msg and "--device cpu" in msg
    assert "SDDMM" in msg


@pytest.mark.parametrize("make,match", [
    (lambda: mnn.GATConv(4, 2, heads=0), r"heads=0.*positive int"),
    (lambda: mnn.GATConv(4, 2, heads=-2), r"heads=-2"),
    (lambda: mnn.GATConv(4, 2, heads=1.5), r"heads=1.5"),
    (lambda: mnn.GATConv(4, 2, edge_dim=3), "edge_dim=3"),
    (lambda: mnn.GATConv(4, 2, fill_value=0.0), "fill_value=0.0"),
    (lambda: mnn.GATConv(4, 2, fill_value="add"), "fill_value='add'"),
    (lambda: mnn.GATConv((4, 3), 2), "bipartite"),
    (lambda: mnn.GATConv(-1, 2), "lazy"),
    (lambda: mnn.GATConv(4, 2, dropout=1.5), "dropout=1.5"),
    (lambda: mnn.GATConv(4, 2, aggr="mean"), "aggr='mean'"),
    (lambda: mnn.GATConv(4, 2, flow="target_to_source"), "flow"),
])
def test_unsupported_options_are_refused(make, match):
    with pytest.raises(ValueError, match=match) as exc:
        make()
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("call,match", [
    (lambda c, x, e: c(x, e, torch.ones(e.shape[1], 3)), "edge_attr"),
    (lambda c, x, e: c(x, e, size=(3, 3)), "size"),
    (lambda c, x, e: c((x, x), e), "bipartite"),
    (lambda c, x, e: c(x, e.t()), r"shape \(\d+, 2\).*transpose"),
    (lambda c, x, e: c(x[:10], e), "out of range for num_nodes = 10"),
])
def test_bad_calls_name_the_argument_and_the_fix(call, match):
    edge_index, n = awkward_graph()
    with pytest.raises(ValueError, match=match):
        call(mnn.GATConv(4, 2), torch.randn(n, 4), edge_index)


def test_a_gat_checkpoint_does_not_load_into_a_gcn_and_back():
    gat, gcn = mnn.GATConv(4, 2, heads=2), mnn.GCNConv(4, 2)
    with pytest.raises(RuntimeError, match="att_src"):
        gcn.load_state_dict(gat.state_dict())
    with pytest.raises(RuntimeError, match="lin.weight|att_src"):
        gat.load_state_dict(gcn.state_dict())
    # a PyG GAT state into a GAT of other heads: the shapes are named
    with pytest.raises(RuntimeError, match="att_src"):
        mnn.GATConv(4, 2, heads=3).load_state_dict(pyg_nn.GATConv(4, 2, heads=2).state_dict())
