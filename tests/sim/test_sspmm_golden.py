"""The S-SpMM golden model: order, float64 bound, work and the cycle model's arithmetic."""

import numpy as np
import pytest
import scipy.sparse as sp

from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.golden import float64_bound, sspmm, work_adds
from moagcn.sim.sspmm.model import estimate

from ..hw.sspmm.graphs import power_law_job


def loop_reference(indptr, indices, H, M):
    n, F = H.shape
    Z = np.zeros((n, F), np.float32)
    for v in range(n):
        for f in range(F):
            if M[v, f]:
                acc = np.float32(0.0)
                for u in sorted(indices[indptr[v]:indptr[v + 1]]):
                    acc = np.float32(acc + H[u, f])
                Z[v, f] = acc
    return Z


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_golden_equals_sequential_loop_bit_for_bit(seed):
    indptr, indices, H, M = power_law_job(40, 5, seed, max_deg=30)
    Z = sspmm(indptr, indices, H, M)
    assert np.array_equal(Z.view(np.uint32), loop_reference(indptr, indices, H, M).view(np.uint32))


def test_golden_within_float64_bound():
    indptr, indices, H, M = power_law_job(300, 16, 7, hub=200)
    Z = sspmm(indptr, indices, H, M)
    n = indptr.size - 1
    A = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n, n))
    exact = (A @ H.astype(np.float64)) * M
    err = np.abs(Z.astype(np.float64) - exact)
    assert np.all(err <= float64_bound(indptr, indices, H, M))
    assert err.max() > 0  # the bound is exercised, not vacuous


def test_masked_and_empty_rows_are_positive_zero():
    indptr = np.array([0, 0, 2, 3])
    indices = np.array([1, 2, 0])
    H = np.full((3, 2), -0.0, np.float32)
    M = np.array([[1, 1], [1, 0], [1, 1]], bool)
    Z = sspmm(indptr, indices, H, M)
    # (+0) + (-0) + (-0) = +0: sums start from +0 as the hardware does
    assert np.all(Z.view(np.uint32) == 0)


def test_work_and_cycle_model_counts():
    indptr = np.array([0, 3, 3, 5])
    M = np.array([[1] * 10, [1] * 10, [1, 0] * 5], bool)
    assert work_adds(indptr, M) == 3 * 10 + 0 + 2 * 5
    cfg = preset("tiny")                       # 4 lanes in 2 groups: W = 2
    cycles = estimate(indptr, M, 10, cfg)
    assert cycles.extra["jobs"] == 5 + 0 + 3            # ceil(10/2) + ceil(5/2)
    assert cycles.extra["turns"] == 3 * 5 + 2 * 3
    assert cycles.work_adds == 40


def test_golden_order_holds_on_adversarial_values():
    """Subnormals, infinities, NaNs, huge cancellations, duplicate and unsorted columns, a hub:
    every element equals the plain sequential loop (NaN anywhere there, canonical NaN here,
    also where the loop keeps an input NaN's sign and payload)."""
    rng = np.random.default_rng(11)
    n, F = 60, 7
    rows = np.sort(rng.integers(0, n, 500))
    indices = rng.integers(0, n, rows.size)
    indices[rows == 3] = 5                                   # duplicates
    indices[:120] = 0                                        # row(s) with a hub column
    indptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int64)
    H = (rng.standard_normal((n, F)) * np.exp2(rng.integers(-140, 120, (n, F)))).astype(np.float32)
    H[rng.random(H.shape) < 0.05] = np.float32(3e-45)        # subnormal
    H[4, 1], H[8, 2], H[9, 2] = np.inf, -np.inf, np.inf
    H[10, 3] = np.uint32(0xFFC00001).view(np.float32)        # a NaN with sign and payload
    M = rng.random((n, F)) < 0.8
    Z = sspmm(indptr, indices, H, M)
    ref = loop_reference(indptr, indices, H, M)
    nan = np.isnan(ref)
    assert nan.any() and np.isinf(ref).any() and (np.abs(ref[~nan]) < 1e-38).any()
    assert np.all(ref.view(np.uint32)[nan] == 0xFFC00001)    # numpy keeps it: the test can tell
    assert np.array_equal(np.isnan(Z), nan)
    assert np.all(Z.view(np.uint32)[nan] == 0x7FC00000)
    assert np.array_equal(Z.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])


def _pieces_reference(indptr, indices, H, M, split, cap=0):
    """Plain loops: pieces of ``split`` sorted neighbours (with ``cap`` slices, of
    ``ceil(deg / cap)`` if that is more), each summed from +0, the sums added in order."""
    ref = np.zeros((indptr.size - 1, H.shape[1]), dtype=np.float32)
    for v in range(indptr.size - 1):
        cols = sorted(indices[indptr[v]:indptr[v + 1]])
        size = split
        if cap and len(cols) > split:
            while size * cap < len(cols):
                size += 1
        cuts = list(range(0, len(cols), size))
        bounds = cuts[1:] + [len(cols)]
        for f in range(H.shape[1]):
            if not M[v, f]:
                continue
            sums = []
            for a, b in zip(cuts, bounds):
                acc = np.float32(0.0)
                for u in cols[a:b]:
                    acc = np.float32(acc + H[u, f])
                sums.append(acc)
            total = sums[0] if sums else np.float32(0.0)
            for s in sums[1:]:
                total = np.float32(total + s)
            ref[v, f] = total
    return ref


def test_split_rows_are_summed_in_pieces_then_folded():
    """``split``: each row's sorted neighbours in pieces of ``split``, every piece from +0, the
    pieces added in order; rows no longer than ``split`` are unchanged."""
    indptr, indices, H, M = power_law_job(60, 5, 4, hub=45)
    split = 4
    Z = sspmm(indptr, indices, H, M, split=split)
    ref = _pieces_reference(indptr, indices, H, M, split)
    assert np.array_equal(Z.view(np.uint32), ref.view(np.uint32))
    assert not np.array_equal(Z.view(np.uint32), sspmm(indptr, indices, H, M).view(np.uint32))
    short = np.diff(indptr) <= split
    assert np.array_equal(Z[short].view(np.uint32), sspmm(indptr, indices, H, M)[short].view(np.uint32))


def test_split_pieces_capped_at_the_slices():
    """``pieces``: at most that many pieces per row (one per slice), longer pieces where the
    row needs them; one piece is no split at all."""
    indptr, indices, H, M = power_law_job(60, 5, 4, hub=45)
    assert np.diff(indptr).max() > 3 * 4
    Z = sspmm(indptr, indices, H, M, split=4, pieces=3)
    ref = _pieces_reference(indptr, indices, H, M, 4, cap=3)
    assert np.array_equal(Z.view(np.uint32), ref.view(np.uint32))
    assert not np.array_equal(Z.view(np.uint32), sspmm(indptr, indices, H, M, split=4).view(np.uint32))
    assert np.array_equal(sspmm(indptr, indices, H, M, split=4, pieces=1).view(np.uint32),
                          sspmm(indptr, indices, H, M).view(np.uint32))


def _buffer_reference(indptr, indices, H, M, max_edges, max_nodes):
    """Plain loops: a row with more than ``max_edges`` entries or ``max_nodes`` distinct
    neighbours is summed in pieces of min(max_edges, max_nodes) sorted neighbours, each from
    +0, the pieces added in order; NaN canonical, masked +0."""
    n, F = indptr.size - 1, H.shape[1]
    size = min(max_edges, max_nodes)
    Z = np.zeros((n, F), np.float32)
    for v in range(n):
        cols = sorted(indices[indptr[v]:indptr[v + 1]].tolist())
        long = len(cols) > max_edges or len(set(cols)) > max_nodes
        runs = [cols[i:i + size] for i in range(0, len(cols), size)] if long else [cols]
        for f in range(F):
            if not M[v, f]:
                continue
            total = None
            with np.errstate(all="ignore"):
                for run in runs:
                    acc = np.float32(0.0)
                    for u in run:
                        acc = np.float32(acc + H[u, f])
                    total = acc if total is None else np.float32(total + acc)
            Z[v, f] = np.float32(0.0) if total is None else total
    bits = Z.view(np.uint32)
    bits[np.isnan(Z)] = 0x7FC00000
    return Z


def test_rows_longer_than_the_buffers_are_summed_in_pieces():
    """``buffer``: rows beyond ``max_edges`` entries or ``max_nodes`` distinct neighbours in
    pieces, the rest whole; one piece +inf and a later one -inf gives the canonical NaN; a row
    of many entries over few columns is not cut for its length in distinct neighbours."""
    rng = np.random.default_rng(3)
    n, F = 50, 3
    deg = rng.integers(0, 4, n)
    deg[[3, 10, 20]] = (30, 45, 60)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1]))
    indices[indptr[3]:indptr[4]] = np.arange(30)                   # 30 distinct: cut (> 16)
    indices[indptr[10]:indptr[11]] = rng.integers(0, 5, 45)         # 45 entries, 5 distinct
    H = rng.standard_normal((n, F)).astype(np.float32)
    H[0:8, 0], H[16:24, 0] = np.float32(3e38), np.float32(-3e38)    # inf in piece 0, -inf in 1
    M = rng.random((n, F)) < 0.8
    M[3, 0] = True
    Z = sspmm(indptr, indices, H, M, buffer=(40, 16))
    ref = _buffer_reference(indptr, indices, H, M, 40, 16)
    assert np.array_equal(Z.view(np.uint32), ref.view(np.uint32))
    assert Z.view(np.uint32)[3, 0] == 0x7FC00000
    whole = sspmm(indptr, indices, H, M)
    differ = np.flatnonzero((Z.view(np.uint32) != whole.view(np.uint32)).any(axis=1))
    assert set(differ.tolist()) <= {3, 10, 20} and 3 in differ
    # row 10 (45 entries > max_edges = 40) is cut though it has 5 distinct neighbours
    cut = sspmm(indptr, indices, H, M, buffer=(1000, 16))
    assert np.array_equal(cut[10].view(np.uint32), whole[10].view(np.uint32))
