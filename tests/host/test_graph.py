"""Graph layer: CSR validation, self loops, scaling, permutations, RCM and bandwidth."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from moagcn.errors import UserError
from moagcn.host.graphs.ops import (CSRGraph, contiguous_ranges, gcn_scaling, inverse_permutation,
                               mean_scaling, row_normalize)


def path_graph(n):
    src = np.concatenate([np.arange(n - 1), np.arange(1, n)])
    dst = np.concatenate([np.arange(1, n), np.arange(n - 1)])
    return CSRGraph.from_edges(src, dst, n)


@st.composite
def graphs(draw, max_nodes=30):
    n = draw(st.integers(1, max_nodes))
    m = draw(st.integers(0, 4 * n))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    return CSRGraph.from_edges(src + dst, dst + src, n)


def test_validation_names_position_and_problem():
    with pytest.raises(UserError, match=r"indices\[2\] = 7 is out of range for 3 nodes"):
        CSRGraph([0, 1, 3, 3], [1, 0, 7])
    with pytest.raises(UserError, match="not non-decreasing"):
        CSRGraph([0, 2, 1, 3], [0, 1, 2])
    with pytest.raises(UserError, match="indptr\\[-1\\] = 2 but indices has 3"):
        CSRGraph([0, 1, 2], [0, 1, 1])
    with pytest.raises(UserError, match="1-D"):
        CSRGraph(np.zeros((2, 2), dtype=int), [0])
    with pytest.raises(UserError, match="src\\[1\\] = 5 is out of range"):
        CSRGraph.from_edges([0, 5], [1, 1], 3)
    with pytest.raises(UserError, match="2 source ids but 1"):
        CSRGraph.from_edges([0, 1], [1], 3)


def test_arrays_are_int64_and_read_only():
    g = CSRGraph(np.array([0, 1, 2], dtype=np.int32), np.array([1, 0], dtype=np.int16))
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int64
    with pytest.raises(ValueError):
        g.indices[0] = 1


def test_from_edges_dedupes_and_sorts():
    g = CSRGraph.from_edges([2, 0, 0, 0], [1, 2, 1, 2], 3)
    assert g.indptr.tolist() == [0, 2, 2, 3]
    assert g.indices.tolist() == [1, 2, 1]


def test_self_loops_added_once():
    g = CSRGraph.from_edges([0, 1, 1, 2], [1, 0, 1, 1], 3)  # node 1 already has a loop
    lg = g.with_self_loops()
    assert lg.has_self_loops().all()
    assert (lg.to_scipy().diagonal() == 1).all()
    assert lg.nnz == g.nnz + 2
    assert lg.without_self_loops().nnz == g.nnz - 1


def test_gcn_scaling_matches_dense_formula():
    g = path_graph(5)
    looped, d = gcn_scaling(g)
    A = g.to_scipy().toarray() + np.eye(5)
    deg = A.sum(1)
    expected = np.diag(deg ** -0.5) @ A @ np.diag(deg ** -0.5)
    got = np.diag(d) @ looped.to_scipy().toarray() @ np.diag(d)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert d[0] == pytest.approx(1 / np.sqrt(2)) and d[2] == pytest.approx(1 / np.sqrt(3))


def test_mean_scaling_zero_for_isolated_rows():
    g = CSRGraph([0, 2, 2, 3], [1, 2, 0])
    assert mean_scaling(g).tolist() == [0.5, 0.0, 1.0]


def test_row_normalize():
    X = np.array([[1, 3], [0, 0], [2, 2]], dtype=np.float32)
    out = row_normalize(X)
    np.testing.assert_allclose(out, [[0.25, 0.75], [0, 0], [0.5, 0.5]])
    with pytest.raises(UserError, match="2-D"):
        row_normalize(np.zeros(3))


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_transpose_and_permute_match_scipy(g):
    A = g.to_scipy().toarray()
    np.testing.assert_array_equal(g.transpose().to_scipy().toarray(), A.T)
    assert g.is_symmetric()
    perm = np.random.default_rng(g.nnz).permutation(g.n_nodes)
    P = g.permute(perm).to_scipy().toarray()
    np.testing.assert_array_equal(P, A[np.ix_(perm, perm)])
    pos = inverse_permutation(perm)
    assert (pos[perm] == np.arange(g.n_nodes)).all()


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_bandwidth_definition_and_rcm_never_worse_than_n(g):
    rows, cols = np.nonzero(g.to_scipy().toarray())
    expected = int(np.abs(rows - cols).max()) if rows.size else 0
    assert g.bandwidth() == expected
    order = g.rcm_order()
    assert sorted(order.tolist()) == list(range(g.n_nodes))
    assert g.bandwidth(order) == g.permute(order).bandwidth()


def test_rcm_recovers_a_shuffled_path():
    g = path_graph(200)
    perm = np.random.default_rng(0).permutation(200)
    shuffled = g.permute(perm)
    assert shuffled.bandwidth() > 100
    assert shuffled.bandwidth(shuffled.rcm_order()) == 1


def test_permutation_errors():
    g = path_graph(4)
    with pytest.raises(UserError, match="node 1 appears twice"):
        g.permute([0, 1, 1, 2])
    with pytest.raises(UserError, match="expected 4 integer node ids"):
        g.permute([0, 1])


def test_block_keeps_column_order_and_checks_columns():
    g = path_graph(6)
    b = g.block([1, 2], [0, 1, 2, 3])
    assert b.shape == (2, 4)
    np.testing.assert_array_equal(b.to_scipy().toarray(),
                                  g.to_scipy().toarray()[np.ix_([1, 2], [0, 1, 2, 3])])
    with pytest.raises(UserError, match="missing from cols"):
        g.block([1, 2], [0, 1, 2])


def test_from_scipy_and_rectangular():
    m = sp.random(5, 7, density=0.4, random_state=1, format="csr")
    g = CSRGraph.from_scipy(m)
    assert g.shape == (5, 7)
    np.testing.assert_array_equal(g.to_scipy().toarray() > 0, m.toarray() != 0)
    with pytest.raises(UserError, match="not a graph on one node set"):
        g.n_nodes


def test_contiguous_ranges_cover_everything():
    r = contiguous_ranges(10, 4)
    assert r == [(0, 2), (2, 5), (5, 7), (7, 10)]
    with pytest.raises(UserError):
        contiguous_ranges(10, 0)
