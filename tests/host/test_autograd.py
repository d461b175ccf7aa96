"""Aggregation autograd: forward and backward on the sparse device against float64 formulas
(the operators built here from the graph's entries, tests/host/plain_gnn.py) and torch."""

import numpy as np
import pytest
import torch

from moagcn.errors import UserError
from moagcn.host.nn.autograd import AggregationOp, PhaseTimer, aggregate, reference_aggregate
from moagcn.host.devices.select import make_device
from moagcn.host.graphs.ops import CSRGraph

from . import plain_gnn


def directed_graph(n=60, m=300, seed=0):
    rng = np.random.default_rng(seed)
    return CSRGraph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n)


OPS = {"gcn": AggregationOp.gcn, "mean": AggregationOp.mean, "sum": AggregationOp.sum_with_self}
#: fixed graph seeds (a hash of the name would change with PYTHONHASHSEED)
GRAPH_SEEDS = {"gcn": 11, "mean": 12, "sum": 13}


@pytest.mark.parametrize("backend", ["model", "cpu"])
@pytest.mark.parametrize("kind", list(OPS))
@pytest.mark.parametrize("relu_input", [False, True])
def test_forward_and_backward_match_float64(backend, kind, relu_input):
    g = directed_graph(seed=GRAPH_SEEDS[kind])  # not symmetric: a missing transpose would show
    assert not g.is_symmetric()
    op = OPS[kind](g)
    rng = np.random.default_rng(1)
    P = rng.standard_normal((60, 9)).astype(np.float32)
    M = rng.random((60, 9)) < 0.5
    R = rng.standard_normal((60, 9)).astype(np.float32)
    s = 2.0
    dev = make_device(backend)
    timer = PhaseTimer()
    Pt = torch.from_numpy(P).requires_grad_(True)
    Z = aggregate(op, Pt, dev, torch.from_numpy(M), s, relu_input=relu_input, timer=timer)
    (Z * torch.from_numpy(R)).sum().backward()

    A = plain_gnn.operator(kind, g)   # from the formula, not from the operator under test
    H = np.maximum(P, 0) if relu_input else P
    Z64 = s * (A @ H.astype(np.float64)) * M
    dP64 = A.T @ (s * R.astype(np.float64) * M)
    if relu_input:
        dP64 = dP64 * (P > 0)
    np.testing.assert_allclose(Z.detach().numpy(), Z64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Pt.grad.numpy(), dP64, rtol=1e-5, atol=1e-5)
    assert (Z.detach().numpy()[~M] == 0).all()
    # one forward and one backward product ran on the device
    assert dev.counters.calls == 2
    assert timer.seconds["aggregate"] > 0

    Pr = torch.from_numpy(P).requires_grad_(True)
    Zr = reference_aggregate(op, Pr, torch.from_numpy(M), s, relu_input=relu_input)
    (Zr * torch.from_numpy(R)).sum().backward()
    np.testing.assert_allclose(Z.detach().numpy(), Zr.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Pt.grad.numpy(), Pr.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_backward_masks_are_the_relu_mask_and_no_grad_skips_the_device():
    g = directed_graph()
    op = AggregationOp.sum_with_self(g)
    dev = make_device("model")
    P = torch.randn(60, 5, generator=torch.Generator().manual_seed(3))
    Z = aggregate(op, P, dev, None)  # input without grad: no backward product
    assert not Z.requires_grad and dev.counters.calls == 1
    P.requires_grad_(True)
    Z = aggregate(op, P, dev, None, relu_input=True)
    Z.sum().backward()
    assert (P.grad[P.detach() <= 0] == 0).all()
    # the backward job's mask was the ReLU mask: its work counts only unmasked outputs
    before = dev.counters.work_adds
    P.grad = None
    aggregate(op, P, dev, None, relu_input=True).sum().backward()
    expected_bwd = int(np.dot(g.transpose().with_self_loops().degrees(),
                              (P.detach().numpy() > 0).sum(axis=1)))
    fwd = int(op.adj.nnz * 5)
    assert dev.counters.work_adds - before == fwd + expected_bwd


def test_gcn_operator_is_symmetric_normalisation():
    g = CSRGraph.from_edges([0, 1, 1, 2], [1, 0, 2, 1], 3)
    A = AggregationOp.gcn(g).dense()
    d = np.array([2, 3, 2.0])
    expected = (np.eye(3) + g.to_scipy().toarray()) / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(A, expected)
    np.testing.assert_allclose(AggregationOp.mean(g).dense().sum(1), 1.0)


def test_shape_errors():
    op = AggregationOp.gcn(directed_graph())
    with pytest.raises(UserError, match="the operator needs 60 rows"):
        aggregate(op, torch.zeros(5, 2), make_device("cpu"))
    with pytest.raises(UserError, match="mask has shape"):
        aggregate(op, torch.zeros(60, 2), make_device("cpu"), torch.ones(60, 3, dtype=bool))
    with pytest.raises(UserError, match="row_scale has shape"):
        AggregationOp(directed_graph(), np.ones(3, np.float32))
