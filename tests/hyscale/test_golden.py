"""The fused layer's golden model: order, signs, NaNs, and agreement with float64."""

import numpy as np
import pytest

from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits

from .jobs import hub_job, sampled_job


def reference_loops(indptr, indices, data, X, W, b, relu):
    """The documented order written as plain scalar float32 loops, from the documented rule
    alone (no code shared with the golden model or the driver): destination v adds its stored
    in-edges in ascending source order, edges with the same source in stored order."""
    n_dst = len(indptr) - 1
    Z = np.zeros((n_dst, X.shape[1]), np.float32)
    for v in range(n_dst):
        edges = list(range(int(indptr[v]), int(indptr[v + 1])))
        for k in sorted(edges, key=lambda k: (int(indices[k]), k)):
            for i in range(X.shape[1]):
                Z[v, i] = np.float32(Z[v, i] + np.float32(np.float32(data[k]) * X[indices[k], i]))
    return reference_update(Z, W, b, relu)


def reference_update(Z, W, b, relu):
    """``Y[v, c]`` from ``b[c]``, adding ``float32(Z[v, i] * W[i, c])`` for i = 0, 1, ... in
    float32 scalars, then the ReLU (a result with its sign bit set is +0)."""
    Y = np.empty((Z.shape[0], W.shape[1]), np.float32)
    for v in range(Z.shape[0]):
        for c in range(W.shape[1]):
            acc = np.float32(b[c])
            for i in range(W.shape[0]):
                acc = np.float32(acc + np.float32(Z[v, i] * W[i, c]))
            Y[v, c] = np.float32(0) if relu and np.signbit(acc) else acc
    return Y


def test_golden_keeps_duplicate_edges_in_stored_order():
    """Destination 0 has source 2 three times (weights 0.75, 3e7, -3e7 in stored order) between
    sources 1 and 3: the documented order adds 0.3 (source 1), then 0.75, 3e7, -3e7 (source 2,
    stored order: 1.05 + 3e7 rounds to 30000002), then 0.1 (source 3), giving 2.1; the reverse
    order of the duplicates gives 0.85."""
    indptr = np.array([0, 5, 6])
    indices = np.array([3, 2, 1, 2, 2, 0])
    data = np.array([1.0, 0.75, 1.0, 3.0e7, -3.0e7, 1.0], np.float32)
    X = np.array([[1.0], [0.3], [1.0], [0.1]], np.float32)
    W = np.ones((1, 1), np.float32)
    got = golden.layer(indptr, indices, data, X, W)
    want = reference_loops(indptr, indices, data, X, W, np.zeros(1, np.float32), False)
    assert np.array_equal(as_bits(got), as_bits(want))
    assert got[0, 0] == np.float32(2.1)
    swapped = reference_loops(indptr, indices, data[[0, 4, 2, 3, 1, 5]], X, W,
                              np.zeros(1, np.float32), False)
    assert not np.array_equal(as_bits(want), as_bits(swapped))   # the test can tell


@pytest.mark.parametrize("relu", [False, True])
def test_golden_matches_the_documented_order(relu):
    indptr, indices, data, X, W, b = hub_job(3, 12, 9, 5, 6, hub_edges=15, shared_dst_edges=10)
    got = golden.layer(indptr, indices, data, X, W, b, relu)
    want = reference_loops(indptr, indices, data, X, W, b, relu)
    assert np.array_equal(as_bits(got), as_bits(want))
    assert np.all(got[2] == (np.maximum(b, 0) if relu else b))   # the empty destination


def test_edge_schedule_sorts_by_source_and_marks_first_edges():
    indptr, indices, data, *_ = hub_job(4, 10, 7, 3, 3, hub_edges=12, shared_dst_edges=6)
    s = golden.edge_schedule(indptr, indices, data)
    assert np.all(np.diff(s.src) >= 0)
    assert s.src.size == indices.size
    # first flags: exactly one per destination with edges, and it is its earliest edge
    assert s.first.sum() == np.unique(s.dst).size
    for v in np.unique(s.dst):
        assert np.nonzero(s.dst == v)[0][0] == np.nonzero((s.dst == v) & s.first)[0][0]
    assert np.array_equal(s.counts, np.bincount(indices)[s.sources])
    assert not s.nonempty[2] and s.nonempty.sum() == np.unique(s.dst).size


def test_relu_zeroes_negative_zero_and_keeps_nan():
    indptr = np.array([0, 1, 2])
    indices = np.array([0, 1])
    data = np.ones(2, np.float32)
    X = np.array([[-0.0], [np.nan]], np.float32)
    W = np.ones((1, 1), np.float32)
    b = np.array([-0.0], np.float32)
    Y = golden.layer(indptr, indices, data, X, W, b, relu=True)
    assert as_bits(Y)[0, 0] == 0                    # -0 + -0*1 = -0 -> +0
    assert as_bits(Y)[1, 0] == 0x7FC00000           # canonical NaN passes ReLU


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_golden_agrees_with_float64_within_the_bound(seed):
    indptr, indices, X, W, b = sampled_job(seed, 16, (25, 10), 32, 24, layer=0)
    data = golden.gcn_weights(indptr, indices, X.shape[0])
    Y = golden.layer(indptr, indices, data, X, W, b, relu=False)
    Y64, bound = golden.float64_layer(indptr, indices, data, X, W, b)
    err = np.abs(Y.astype(np.float64) - Y64)
    assert np.all(err <= bound)
    assert err.max() > 0                           # the comparison is not vacuous


def test_gcn_weights_are_symmetric_normalisation():
    indptr = np.array([0, 2, 3])
    indices = np.array([0, 1, 1])
    w = golden.gcn_weights(indptr, indices, 2)
    # d_in = (2, 1); d_out = (1, 2)
    assert np.allclose(w, [1 / np.sqrt(2 * 1), 1 / np.sqrt(2 * 2), 1 / np.sqrt(1 * 2)])


def test_bank_balancing_is_a_permutation_with_even_loads():
    from moagcn.sim.hyscale.spec import balance_banks
    deg = np.array([26, 1, 1, 3, 26, 2, 9, 9, 1, 5, 14, 0, 7])
    row_of = balance_banks(deg, 4)
    assert sorted(row_of) == list(range(deg.size))
    loads = np.bincount(row_of % 4, weights=deg, minlength=4)
    naive = np.bincount(np.arange(deg.size) % 4, weights=deg, minlength=4)
    assert loads.max() <= naive.max() and loads.max() - loads.min() <= deg.max()
