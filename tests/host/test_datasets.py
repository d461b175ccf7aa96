"""Datasets: SBM, R-MAT, and the .npz format."""


import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.graphs.data import NPZ_KEYS, load_npz, save_npz
from moagcn.host.graphs.datasets import load_dataset
from moagcn.host.graphs.generators import rmat, sbm

# the public Planetoid split as plain arrays, present beside the project on development machines


def test_sbm_structure_and_homophily():
    d = sbm(n_nodes=600, n_classes=4, avg_degree=10, homophily=0.8, seed=3)
    g = d.graph
    assert g.is_symmetric() and not g.has_self_loops().any()
    assert d.n_classes == 4 and d.features.shape == (600, 64)
    assert 8.5 < g.nnz / 600 < 11.5
    same = d.labels[g.row_ids()] == d.labels[g.indices]
    assert 0.74 < same.mean() < 0.86
    assert d.train_mask.sum() == 80 and not (d.train_mask & d.test_mask).any()
    # class-correlated features: a class's mean feature vector is closer to its own nodes
    centroids = np.stack([d.features[d.labels == c].mean(0) for c in range(4)])
    pred = np.argmax(d.features @ centroids.T, axis=1)
    assert (pred == d.labels).mean() > 0.5


def test_sbm_is_deterministic_per_seed():
    a, b, c = sbm(n_nodes=300, seed=1), sbm(n_nodes=300, seed=1), sbm(n_nodes=300, seed=2)
    assert a.graph == b.graph and np.array_equal(a.features, b.features)
    assert not a.graph == c.graph


def test_rmat_power_law_and_labels():
    d = rmat(scale=10, edge_factor=8, seed=0)
    deg = d.graph.degrees()
    assert d.graph.is_symmetric() and not d.graph.has_self_loops().any()
    assert deg.max() > 10 * np.median(deg[deg > 0])  # heavy tail
    same = d.labels[d.graph.row_ids()] == d.labels[d.graph.indices]
    assert same.mean() > 0.4  # well above 1/4: labels are graph regions
    assert np.bincount(d.labels).min() > 200


def test_npz_round_trip(tmp_path):
    d = sbm(n_nodes=200, seed=0)
    p = save_npz(d, tmp_path / "g.npz")
    e = load_npz(p)
    assert e.graph == d.graph and np.array_equal(e.features, d.features)
    assert np.array_equal(e.test_mask, d.test_mask) and e.name == "g"
    assert load_dataset(str(p)).n_nodes == 200


def test_cora_loads_from_any_path():
    from moagcn.host.graphs.data import bundled_path
    d = load_npz(str(bundled_path("cora")))      # the .npz reader, given a plain path
    assert (d.n_nodes, d.n_features, d.n_classes) == (2708, 1433, 7)
    assert d.train_mask.sum() == 140 and d.val_mask.sum() == 500 and d.test_mask.sum() == 1000


def _write(tmp_path, **overrides):
    d = sbm(n_nodes=50, n_val=10, n_test=10, seed=0)
    arrays = dict(indptr=d.graph.indptr, indices=d.graph.indices, features=d.features,
                  labels=d.labels, train_mask=d.train_mask, val_mask=d.val_mask,
                  test_mask=d.test_mask)
    arrays.update(overrides)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    p = tmp_path / "bad.npz"
    np.savez(p, **arrays)
    return p, d


def test_npz_errors_name_the_problem(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_npz(tmp_path / "nope.npz")
    p, _ = _write(tmp_path, labels=None, val_mask=None)
    with pytest.raises(UserError, match="missing key\\(s\\) labels, val_mask"):
        load_npz(p)
    p, d = _write(tmp_path, features=np.zeros((49, 3), np.float32))
    with pytest.raises(UserError, match=r"features have shape \(49, 3\); expected \(50, F\)"):
        load_npz(p)
    bad = d.graph.indices.copy()
    bad[3] = 50
    p, _ = _write(tmp_path, indices=bad)
    with pytest.raises(UserError, match=r"indices\[3\] = 50 is out of range for 50 nodes"):
        load_npz(p)
    labels = d.labels.copy()
    labels[np.argmax(d.train_mask)] = -1
    p, _ = _write(tmp_path, labels=labels)
    with pytest.raises(UserError, match="train_mask selects node .* no label"):
        load_npz(p)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(UserError, match="not a readable .npz"):
        load_npz(tmp_path / "junk.npz")
    with pytest.raises(UserError, match="unknown dataset 'pubmed'"):
        load_dataset("pubmed")


def test_bundled_planetoid_datasets():
    """Cora and CiteSeer ship with the package, with the public split (counts from
    Yang et al. 2016: 20 per class for training, 500 validation, 1,000 test)."""
    for name, n, classes, feats in (("cora", 2708, 7, 1433), ("citeseer", 3327, 6, 3703)):
        d = load_dataset(name)
        assert (d.n_nodes, d.n_classes, d.n_features) == (n, classes, feats)
        assert int(d.train_mask.sum()) == 20 * classes
        assert (int(d.val_mask.sum()), int(d.test_mask.sum())) == (500, 1000)
        assert d.graph.is_symmetric() and not d.graph.has_self_loops().any()


def test_keys_constant():
    assert NPZ_KEYS == ("indptr", "indices", "features", "labels", "train_mask", "val_mask",
                        "test_mask")
