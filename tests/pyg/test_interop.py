"""moagcn.interop: PyG Data / edge_index to and from moagcn graphs and datasets."""

import sys

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_scipy_sparse_matrix

from moagcn import interop
from moagcn.errors import UserError
from moagcn.host.graphs.data import load_npz
from moagcn.host.graphs.generators import sbm

from .graphs import CORA, awkward_graph


def test_edge_index_direction_and_repeats_match_pyg():
    edge_index, n = awkward_graph()
    g = interop.from_edge_index(edge_index, n)
    # PyG's own sparse matrix of edge_index is A[source, target]; moagcn's rows are targets
    A = to_scipy_sparse_matrix(edge_index, num_nodes=n).toarray()   # duplicates summed
    assert np.array_equal(g.to_scipy(np.float64).toarray(), A.T)
    assert g.nnz == edge_index.shape[1]                               # nothing merged
    back = interop.to_edge_index(g)
    assert sorted(map(tuple, back.t().tolist())) == sorted(map(tuple, edge_index.t().tolist()))


def test_num_nodes_defaults_to_largest_id_plus_one_and_keeps_trailing_isolated_nodes():
    ei = torch.tensor([[0, 2], [1, 1]])
    assert interop.from_edge_index(ei).n_nodes == 3
    assert interop.from_edge_index(ei, num_nodes=6).n_nodes == 6
    assert interop.from_edge_index(torch.zeros((2, 0), dtype=torch.long), 4).nnz == 0


def test_dataset_round_trip_keeps_features_labels_and_masks():
    d = load_npz(CORA)
    data = interop.to_pyg(d)
    assert isinstance(data, Data) and data.num_nodes == d.n_nodes
    assert data.edge_index.shape == (2, d.graph.nnz)
    back = interop.from_pyg(data, name="cora")
    assert back.graph == d.graph
    assert np.array_equal(back.features, d.features)
    assert np.array_equal(back.labels, d.labels)
    for k in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(back, k), getattr(d, k))
        assert getattr(data, k).dtype == torch.bool


def test_from_pyg_accepts_column_labels_and_graph_only_data():
    d = sbm(n_nodes=80, n_val=10, n_test=10, seed=1)
    data = interop.to_pyg(d)
    data.y = data.y.view(-1, 1)
    assert np.array_equal(interop.from_pyg(data).labels, d.labels)
    g = interop.graph_from_pyg(Data(edge_index=data.edge_index, num_nodes=80))
    assert g == d.graph
    assert interop.to_pyg(g).num_nodes == 80


@pytest.mark.parametrize("mutate,match", [
    (lambda d: delattr(d, "x"), r"data has no x \(node features\).*graph_from_pyg"),
    (lambda d: delattr(d, "y"), r"data has no y"),
    (lambda d: delattr(d, "val_mask"), r"data has no val_mask; set data.val_mask"),
    (lambda d: setattr(d, "train_mask", d.train_mask.view(-1, 1).repeat(1, 3)),
     r"one column per split; pick one"),
    (lambda d: setattr(d, "y", torch.randn(d.num_nodes, 3, generator=torch.Generator().manual_seed(0))), r"single-label"),
    (lambda d: setattr(d, "edge_index", d.edge_index.t().contiguous()),
     r"data.edge_index has shape \(\d+, 2\).*transpose"),
])
def test_from_pyg_errors_name_the_field_and_the_fix(mutate, match):
    data = interop.to_pyg(sbm(n_nodes=60, n_val=10, n_test=10, seed=2))
    mutate(data)
    with pytest.raises(ValueError, match=match):
        interop.from_pyg(data)


@pytest.mark.parametrize("ei,n,match", [
    (torch.tensor([[0, 1, 2]]), None, r"shape \(1, 3\); expected \(2, E\)"),
    (torch.tensor([[0, 1], [1, 2.0]]), None, "dtype.*integers"),
    (torch.tensor([[0, 1], [1, 5]]), 4, r"edge_index\[1, 1\] = 5 is out of range for "
                                        r"num_nodes = 4"),
    (torch.tensor([[0, -1], [1, 2]]), None, r"edge_index\[0, 1\] = -1"),
    (np.array([[True], [False]]), None, "dtype bool"),
    ([[0, 1], [1, 0]], None, "torch tensor or numpy array"),
])
def test_bad_edge_index(ei, n, match):
    with pytest.raises(UserError, match=match):
        interop.from_edge_index(ei, n)


def test_a_missing_torch_geometric_is_named_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_geometric", None)   # import now raises ImportError
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    with pytest.raises(UserError, match=r"pip install moagcn\[pyg\]"):
        interop.to_pyg(sbm(n_nodes=40, n_val=5, n_test=5))
    # the conversions that need no PyG still work
    assert interop.from_edge_index(torch.tensor([[0], [1]])).nnz == 1
