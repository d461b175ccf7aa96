"""Tile planning and row sorting against plain-loop references."""

import numpy as np
import pytest

from moagcn.core.graph import row_sort_order, sort_rows
from moagcn.core.tiling import TileLimits, plan_tiles, plan_tiles_uncached


def greedy_blocks(indptr, indices, n_rows, limits):
    """The documented rule, row by row: extend a block while rows, entries and distinct
    columns fit."""
    blocks, start = [], 0
    while start < n_rows:
        stop, cols = start, set()
        while stop < n_rows:
            row = indices[indptr[stop]:indptr[stop + 1]]
            if (stop - start + 1 > limits.max_rows
                    or indptr[stop + 1] - indptr[start] > limits.max_edges
                    or len(cols | set(row.tolist())) > limits.max_cols):
                break
            cols |= set(row.tolist())
            stop += 1
        blocks.append((start, stop))
        start = stop
    return blocks


def power_law(n, e, seed):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n + 1); p /= p.sum()
    rows = np.sort(rng.integers(0, n, e))
    indices = rng.choice(n, e, p=p)              # hubs, duplicates, unsorted rows
    indices[rows == 3] = 3                       # a self loop, repeated
    indptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int64)
    return indptr, indices


@pytest.mark.parametrize("seed,max_rows,max_cols,max_edges",
                         [(0, 64, 48, 300), (1, 500, 120, 10_000), (2, 37, 500, 97)])
def test_row_blocks_follow_the_greedy_rule(seed, max_rows, max_cols, max_edges):
    indptr, indices = power_law(400, 3000, seed)
    deg = np.diff(indptr)
    distinct = np.array([np.unique(indices[a:b]).size for a, b in zip(indptr[:-1], indptr[1:])])
    # rows no tile can hold are refused before blocking; keep the graph within the limits
    keep = (deg <= max_edges) & (distinct <= max_cols)
    indices = np.concatenate([indices[a:b] for a, b, k in
                              zip(indptr[:-1], indptr[1:], keep) if k]).astype(np.int64)
    indptr2 = np.concatenate([[0], np.cumsum(np.where(keep, deg, 0))]).astype(np.int64)
    limits = TileLimits(max_rows, max_cols, max_edges, 16)
    tiles = plan_tiles_uncached(indptr2, indices, 400, 400, 16, limits)
    got = [(t.rows_start, t.rows_stop) for t in tiles]
    assert got == greedy_blocks(indptr2, indices, 400, limits)
    assert len(got) > 2
    for t in tiles:                              # each tile's columns: its block's, ascending
        lo, hi = indptr2[t.rows_start], indptr2[t.rows_stop]
        assert np.array_equal(t.cols[t.indices], indices[lo:hi])
        assert np.all(np.diff(t.cols) > 0)


def test_plans_of_read_only_graphs_are_reused_and_others_are_not():
    indptr, indices = power_law(300, 2000, 4)
    limits = TileLimits(64, 200, 500, 8)
    first = plan_tiles(indptr, indices, 300, 300, 8, limits)
    again = plan_tiles(indptr, indices, 300, 300, 8, limits)
    assert first[0] is not again[0]              # writeable arrays: planned afresh
    indptr.flags.writeable = indices.flags.writeable = False
    first = plan_tiles(indptr, indices, 300, 300, 8, limits)
    again = plan_tiles(indptr, indices, 300, 300, 8, limits)
    assert first[0] is again[0] and len(first) == len(again)


@pytest.mark.parametrize("seed", [0, 1])
def test_sort_rows_equals_a_per_row_sort(seed):
    indptr, indices = power_law(200, 1500, seed)
    indptr[50:60] = indptr[50]                   # empty rows
    indptr[60:] = np.maximum(indptr[60:], indptr[50])
    ref = np.concatenate([np.sort(indices[a:b]) for a, b in zip(indptr[:-1], indptr[1:])])
    got = sort_rows(indptr, indices[:indptr[-1]])
    assert np.array_equal(got, ref)
    assert np.array_equal(sort_rows(indptr, ref), ref)      # sorted input: the fast path
    # few entries among many ids: sorted by keys rather than by counting per id
    big = indices[:indptr[-1]] * 10 ** 6
    ref = np.concatenate([np.sort(big[a:b]) for a, b in zip(indptr[:-1], indptr[1:])])
    assert np.array_equal(sort_rows(indptr, big), ref)


def test_sorted_columns_remembered_only_for_read_only_graphs():
    from moagcn.sim.sspmm.spec import sorted_columns
    rng = np.random.default_rng(4)
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 6, 50))]).astype(np.int64)
    indices = rng.integers(0, 50, int(indptr[-1])).astype(np.int64)
    want = sort_rows(indptr, indices)
    loose = sorted_columns(indptr, indices)
    assert np.array_equal(loose, want) and loose.flags.writeable
    indptr.flags.writeable = indices.flags.writeable = False
    first = sorted_columns(indptr, indices)
    assert np.array_equal(first, want) and not first.flags.writeable
    assert sorted_columns(indptr, indices) is first


def testprevious_occurrence_against_a_loop():
    from moagcn.core.tiling import previous_occurrence
    rng = np.random.default_rng(5)
    cases = [np.zeros(0, np.int64), np.array([7]), np.array([2, 2, 2, 2]),
             np.array([5, 0, 5, 1, 0, 5]),
             np.array([10 ** 7, 3, 10 ** 7, 5, 3])]   # few entries, large ids: the other sort
    cases += [rng.integers(0, hi, size) for hi, size in ((3, 40), (50, 200), (1000, 300))]
    for indices in cases:
        last, want = {}, []
        for k, c in enumerate(indices.tolist()):
            want.append(last.get(c, -1))
            last[c] = k
        assert previous_occurrence(indices).tolist() == want


@pytest.mark.parametrize("scale", [1, 10 ** 6])     # counting sort; few entries, large ids
def test_row_sort_order_is_stable_per_row(scale):
    indptr, indices = power_law(200, 1500, 3)
    indices = indices * scale
    want = [k for a, b in zip(indptr[:-1], indptr[1:])
            for k in sorted(range(a, b), key=lambda k: (indices[k], k))]
    assert row_sort_order(indptr, indices).tolist() == want


def test_array_memo_keeps_results_of_read_only_arrays_only():
    from moagcn.core.memo import ArrayMemo
    memo, calls = ArrayMemo(kept=2), []

    def compute(value):
        calls.append(value)
        return value
    loose = np.arange(3)
    assert memo.get((loose,), (), lambda: compute(None)) is None
    assert memo.get((loose,), (), lambda: compute(None)) is None and len(calls) == 2
    frozen = [np.arange(k + 1) for k in range(3)]
    for a in frozen:
        a.flags.writeable = False
    assert memo.get((frozen[0],), (1,), lambda: compute(None)) is None   # None is a result
    assert memo.get((frozen[0],), (1,), lambda: compute("x")) is None and len(calls) == 3
    assert memo.get((frozen[0],), (2,), lambda: compute("y")) == "y"     # other parameters
    memo.get((frozen[1],), (1,), lambda: compute("z"))                   # evicts the oldest
    assert memo.get((frozen[0],), (1,), lambda: compute("w")) == "w" and len(calls) == 6
