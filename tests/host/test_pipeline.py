"""Fine-grain pipeline: Prop. 3.5 against the simulated timeline, RCM against the given order."""

import numpy as np
import pytest

from moagcn.errors import UserError
from moagcn.host.graphs.generators import sbm
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.mixgcn.pipeline import (analyze, batch_dependencies, prop35_holds, simulate,
                                         stages_prop35)
from moagcn.hw.sspmm.config import preset


def banded(n, b):
    """Path plus the edges (i, i + b): bandwidth exactly b."""
    src = list(range(n - 1)) + list(range(n - b))
    dst = list(range(1, n)) + list(range(b, n))
    return CSRGraph.from_edges(src + dst, dst + src, n)


def test_stages_formula():
    assert stages_prop35(100, 0) == 2 and stages_prop35(100, 50) == 4
    assert stages_prop35(2708, 690) == 3 and stages_prop35(2708, 2657) == 107
    assert prop35_holds(100, 50, 4) and not prop35_holds(100, 50, 3)
    with pytest.raises(UserError):
        stages_prop35(10, 10)


@pytest.mark.parametrize("layers", [2, 3])
def test_idleness_vanishes_exactly_when_prop_3_5_holds(layers):
    n = 60
    for b in range(1, n, 3):
        adj = banded(n, b).with_self_loops()
        assert banded(n, b).bandwidth() == b
        for s in (2, 3, 4, 5, 6, 10, 12, 15, 20, 30):
            dep = batch_dependencies(adj, s)
            equal = [[100] * s for _ in range(layers)]
            tl = simulate(equal, equal, dep)
            assert (tl.sparse_stall() == 0) == prop35_holds(n, b, s), (b, s)
            assert tl.busy("sparse") == tl.busy("dense") == 100 * s * layers
            if prop35_holds(n, b, s):  # only the one-batch fill is left
                assert tl.makespan == 100 * (s * layers + 1)
            else:
                assert tl.makespan > 100 * (s * layers + 1)


def test_dependencies_and_timeline_by_hand():
    # 4 nodes, 2 batches: node 0 needs node 3, so layer 1 waits for the whole dense layer 0
    g = CSRGraph.from_edges([0, 3], [3, 0], 4).with_self_loops()
    dep = batch_dependencies(g, 2)
    assert dep.tolist() == [1, 1]
    tl = simulate([[10, 10], [10, 10]], [[5, 5], [5, 5]], dep)
    assert tl.sparse_start == [[0, 10], [25, 35]] and tl.dense_end == [[15, 25], [40, 50]]
    assert tl.sparse_stall() == 5 and tl.makespan == 50


def test_rcm_lowers_bandwidth_and_idle_on_sbm():
    d = sbm(n_nodes=1000, seed=3)
    cfg = preset("default")
    kw = dict(widths=[d.n_features, 128, 128, d.n_classes], config=cfg,
              dense_macs_per_cycle=64.0)
    none = analyze(d.graph, 8, reorder="none", **kw)
    rcm = analyze(d.graph, 8, reorder="rcm", **kw)
    assert rcm.bandwidth < none.bandwidth
    assert rcm.stages_prop35 < none.stages_prop35
    assert rcm.idle_fraction < none.idle_fraction
    assert rcm.makespan_cycles < none.makespan_cycles
    # same work, only the order changed
    assert sum(map(sum, rcm.dense_cycles)) == sum(map(sum, none.dense_cycles))
    assert rcm.prop35_holds == (rcm.batches >= rcm.stages_prop35)


def test_dense_bound_pipeline_loses_time_at_layer_boundaries_without_reordering():
    # the dense unit is 4x slower: without reordering it waits for the first aggregation of
    # every layer, with a small bandwidth the sparse unit has it ready
    d = sbm(n_nodes=600, seed=1)
    kw = dict(widths=[d.n_features, 64, 64, d.n_classes], config=preset("default"))
    slow = analyze(d.graph, 12, reorder="none", dense_macs_per_cycle=4.0, **kw)
    assert slow.bottleneck == "dense" and slow.dense_stall_cycles > 0
    band = banded(600, 40)
    none = analyze(band.permute(np.random.default_rng(0).permutation(600)), 12, [32, 32, 32, 4],
                   preset("default"), dense_macs_per_cycle=4.0)
    rcm = analyze(band, 12, [32, 32, 32, 4], preset("default"), dense_macs_per_cycle=4.0)
    assert rcm.bottleneck == none.bottleneck == "dense"
    assert rcm.dense_stall_cycles == 0 < none.dense_stall_cycles
    assert rcm.idle_fraction < none.idle_fraction


def test_errors():
    g = banded(10, 2)
    with pytest.raises(UserError, match="--batches 11"):
        analyze(g, 11, [4, 2], preset("tiny"))
    with pytest.raises(UserError, match="--reorder 'metis'"):
        analyze(g, 2, [4, 2], preset("tiny"), reorder="metis")
