"""How the driver orders a job's rows (``SSpmmConfig.row_order``): long rows first, the others
in the graph's order; the cycle model follows the same order."""

import dataclasses

import numpy as np
import pytest

from moagcn.core.graph import permute_rows
from moagcn.hw.sspmm import preset
from moagcn.sim.sspmm.model import estimate, row_order
from moagcn.sim.sspmm.spec import SPEC

DEFAULT = preset("default")
GIVEN = dataclasses.replace(DEFAULT, row_order="given")


def _expected_order(deg):
    """By hand: rows above four times the mean degree of the non-empty rows, longest first
    (ties by position), then the rest in place."""
    busy = [d for d in deg if d > 0]
    mean = sum(busy) / len(busy)
    long = sorted((i for i, d in enumerate(deg) if d > 4 * mean), key=lambda i: (-deg[i], i))
    return long + [i for i in range(len(deg)) if i not in long]


@pytest.mark.parametrize("seed", range(6))
def test_long_rows_go_first_longest_first_the_others_keep_their_order(seed):
    rng = np.random.default_rng(seed)
    deg = (rng.pareto(1.1, 300) * 3).astype(int)
    deg[rng.integers(300, size=3)] = int(deg.max()) + 5        # ties among the longest
    order = row_order(deg, DEFAULT)
    expected = _expected_order(deg.tolist())
    if expected == list(range(deg.size)):
        assert order is None
    else:
        assert order.tolist() == expected
        again = row_order(deg[order], DEFAULT)                    # already in order: kept
        assert again is None
    assert row_order(deg, GIVEN) is None


def test_empty_rows_do_not_make_ordinary_rows_long():
    """A tile of mostly empty rows: the bar is four times the mean of the rows that have
    neighbours, so rows of ordinary length keep their place."""
    deg = np.zeros(400, dtype=int)
    deg[::10] = np.arange(3, 43) % 7 + 3               # 40 rows of 3-9 neighbours
    assert row_order(deg, DEFAULT) is None
    deg[395] = 200
    assert row_order(deg, DEFAULT).tolist() == [395] + [i for i in range(400) if i != 395]
    assert row_order(np.zeros(30, dtype=int), DEFAULT) is None


def test_no_reordering_without_long_rows_or_when_they_lead_already():
    assert row_order(np.full(50, 7), DEFAULT) is None
    assert row_order(np.array([100, 90] + [1] * 60), DEFAULT) is None
    assert row_order(np.array([90, 100] + [1] * 60), DEFAULT).tolist() == [1, 0] + list(
        range(2, 62))
    assert row_order(np.array([], dtype=int), DEFAULT) is None


def test_permute_rows_takes_whole_rows_in_the_new_order():
    rng = np.random.default_rng(4)
    deg = rng.integers(0, 6, 40)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    indices = rng.integers(0, 40, int(indptr[-1]))
    order = rng.permutation(40)
    ptr, idx = permute_rows(indptr, indices, order)
    rows = [indices[indptr[r]:indptr[r + 1]].tolist() for r in order]
    assert [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(40)] == rows
    ptr, idx = permute_rows([0, 0, 0], [], [1, 0])          # empty rows, empty index list
    assert ptr.tolist() == [0, 0, 0] and idx.size == 0 and idx.dtype.kind == "i"


def test_a_hub_at_the_end_costs_less_when_it_goes_first():
    """A 600-neighbour row as the last of 2,000 (average degree 8): in the graph's order its
    jobs run on alone at the end (one turn per adder_latency cycles in each context); first,
    they overlap every other row. Both estimates are of the same work."""
    rng = np.random.default_rng(1)
    deg = np.minimum((rng.pareto(1.5, 2000) * 4).astype(int) + 1, 60)
    deg[-1] = 600
    indptr = np.concatenate([[0], np.cumsum(deg)])
    M = rng.random((2000, 64)) < 0.5
    first = estimate(indptr, M, 64, DEFAULT)
    given = estimate(indptr, M, 64, GIVEN)
    assert first.work_adds == given.work_adds
    assert first.cycles_compute < 0.95 * given.cycles_compute
    # the spec's parts carry the order, and the model of the reordered job is the same
    job = SPEC.check(SPEC.job(indptr, rng.integers(0, 2000, int(indptr[-1])),
                              np.zeros((2000, 64), np.float32), M), DEFAULT)
    (part,) = SPEC.split(job, DEFAULT)
    assert part.order[0] == 1999 and part.job.n_rows == 2000
    assert np.array_equal(np.diff(part.job.indptr), deg[part.order])
    assert estimate(part.job.indptr, part.job.M, 64, DEFAULT).cycles_compute == \
        first.cycles_compute
