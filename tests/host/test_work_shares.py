"""The vGNN share solver (``work_shares("vgnn")``, host/vgnn/fleet.py) against hand values.

The performance model is replaced by an affine one written here (seconds = a + b x width x
kept fraction x work, the work of a graph its entries plus twice its largest row), so that
every input of the solver changes its answer: the operator (A + I has more entries than A),
the transposed operator of the backward aggregations (a hub's out-degree is not its
in-degree), the forward and backward kept fractions, every width, the iterations and, under
partition parallelism, the partition. The rule (docs: fleet.py's docstring): shares start at
the predicted rates ``1 / Σ_w t_i(all columns)`` and are refined ``share_i <- share_i /
t_i(share_i)`` (normalised), ``t_i`` a forward aggregation per width plus a backward one per
width after the first, at the columns the worker would get (``max(1, round(share x width))``
under MoP) or the rows the partitioner gives it.
"""

import numpy as np
import pytest

from moagcn.host.graphs.generators import rmat
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.graphs.partition import partition_nodes
from moagcn.host.vgnn.augment import worker_block
from moagcn.host.vgnn.fleet import fleet, work_shares

SPECS = fleet("sspmm:lanes=32,sspmm:lanes=8,sspmm:lanes=8:clock_mhz=100", "model")[0]


def work(g) -> int:
    """Entries plus twice the largest row (not the same for a hub's rows and its column)."""
    return int(g.nnz + 2 * np.diff(g.indptr).max())


class Affine:
    """``a + b x width x keep x work(graph)`` seconds per aggregation, per device key."""

    def __init__(self, coef: dict):
        self.coef = coef
        self.calls = 0

    def require(self, specs, where=""):
        for s in specs:
            assert s.key in self.coef, s.key

    def predict(self, graph, width, device, keep=1.0):
        self.calls += 1
        a, b = self.coef[device.key]
        return a + b * width * keep * work(graph)


MODEL = Affine({SPECS[0].key: (1.0, 0.01), SPECS[1].key: (0.5, 0.04), SPECS[2].key: (0.2, 0.08)})


def hub_graph():
    """Node 0 sends to 1..5 (out-degree 5), a ring 1 -> 2 -> ... -> 5 -> 0 (in-degrees 1-2)."""
    return CSRGraph.from_edges([0, 0, 0, 0, 0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 2, 3, 4, 5, 0], 6)


def test_two_devices_one_iteration_by_hand():
    """Widths 4 and 2, forward keep 0.5, backward keep 0.25, the operator A + I.

    work(A + I) = 16 + 2 x 6 = 28, work((A + I)ᵀ) = 16 + 2 x 3 = 22 (work(A) = 20: without the
    operator the answer changes). Start: full_1 = (1 + 0.01·4·0.5·28) + (1 + 0.01·2·0.5·28) =
    1.56 + 1.28 = 2.84, full_2 = (0.5 + 2.24) + (0.5 + 1.12) = 4.36, so s = (4.36, 2.84) / 7.2
    = (0.60556, 0.39444). Columns: round(0.60556·4) = 2, round(0.60556·2) = 1; round(1.578) = 2,
    round(0.789) = 1. Times: t_1 = 1.28 + 1.14 (forward) + 1 + 0.01·1·0.25·22 = 1.055 (backward,
    width 2 only) = 3.475; t_2 = 1.62 + 1.06 + 0.5 + 0.04·0.25·22 = 0.72, 3.40. New shares
    ∝ 0.60556 / 3.475 = 0.174261 and 0.39444 / 3.40 = 0.116013: (0.600332, 0.399668)."""
    g = hub_graph()
    op = g.with_self_loops()
    assert (work(op), work(op.transpose()), work(g)) == (28, 22, 20)
    s = work_shares("vgnn", SPECS[:2], g, [4, 2], "mop", MODEL, iterations=1, operator=op,
                    keep=0.5, back_keep=0.25)
    s0 = np.array([4.36, 2.84]) / 7.2
    t = np.array([1.28 + 1.14 + 1.055, 1.62 + 1.06 + 0.72])
    want = s0 / t / (s0 / t).sum()
    np.testing.assert_allclose(s, want, rtol=1e-12)
    np.testing.assert_allclose(s, [0.600332, 0.399668], atol=1e-6)
    # no iteration: the start itself
    s = work_shares("vgnn", SPECS[:2], g, [4, 2], "mop", MODEL, iterations=0, operator=op,
                    keep=0.5, back_keep=0.25)
    np.testing.assert_allclose(s, s0, rtol=1e-12)


def by_hand(specs, op, widths, keep, back_keep, iterations, blocks_of=None):
    """The rule, one worker at a time: start at the rates, refine ``iterations`` times."""
    def t(block, cols, spec):
        fwd = sum(MODEL.predict(block, c, spec, keep) for c in cols)
        back = sum(MODEL.predict(block.transpose(), c, spec, back_keep) for c in cols[1:])
        return fwd + back

    full = np.array([sum(MODEL.predict(op, w, s, keep) for w in widths) for s in specs])
    shares = (1 / full) / (1 / full).sum()
    for _ in range(iterations):
        if blocks_of is None:
            times = [t(op, [max(1, int(round(f * w))) for w in widths], s)
                     for f, s in zip(shares, specs)]
        else:
            times = [t(b, widths, s) for b, s in zip(blocks_of(shares), specs)]
        shares = shares / np.array(times)
        shares = shares / shares.sum()
    return shares


def test_three_devices_mop_by_hand():
    """Three devices, three widths, six iterations (the default), on the hub graph's A + I."""
    g = hub_graph()
    op = g.with_self_loops()
    s = work_shares("vgnn", SPECS, g, [40, 20, 7], "mop", MODEL, operator=op, keep=0.5,
                    back_keep=0.25)
    want = by_hand(SPECS, op, [40, 20, 7], 0.5, 0.25, 6)
    np.testing.assert_allclose(s, want, rtol=1e-12)
    # what the solver is for: the predicted times at the shares are nearly equal
    times = [sum(MODEL.predict(op, max(1, round(f * w)), sp, 0.5) for w in (40, 20, 7))
             + sum(MODEL.predict(op.transpose(), max(1, round(f * w)), sp, 0.25)
                   for w in (20, 7)) for f, sp in zip(s, SPECS)]
    assert max(times) / min(times) < 1.1, times
    # back_keep None: the forward keep for the backward aggregations too
    np.testing.assert_allclose(work_shares("vgnn", SPECS, g, [40, 20, 7], "mop", MODEL,
                                           operator=op, keep=0.5),
                               by_hand(SPECS, op, [40, 20, 7], 0.5, 0.5, 6), rtol=1e-12)


@pytest.mark.parametrize("partition", ["contiguous", "rcm"])
def test_two_devices_partition_parallelism_by_hand(partition):
    """Under partition parallelism a worker's time is every width on its rows' block (its
    rows and their halo, from the partition those shares give), forward and backward."""
    g = rmat(scale=7, seed=3).graph
    op = g.with_self_loops()

    def blocks_of(shares):
        return [worker_block(op, p) for p in partition_nodes(g, 2, partition, shares)]

    s = work_shares("vgnn", SPECS[:2], g, [16, 8], "partition", MODEL, iterations=3,
                    partition=partition, operator=op, keep=0.5, back_keep=0.25)
    np.testing.assert_allclose(s, by_hand(SPECS[:2], op, [16, 8], 0.5, 0.25, 3, blocks_of),
                               rtol=1e-12)
