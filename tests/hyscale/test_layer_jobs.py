"""Sampled blocks as HyScale layer jobs: each destination's row is itself, then its sampled
neighbours, all as positions in the block's sources (checked on global ids, by plain loops)."""

import numpy as np

from moagcn.core.generators import power_law_graph
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.sim.hyscale.minibatch import layer_jobs


def test_jobs_hold_self_then_sampled_neighbours_of_every_destination():
    indptr, indices = power_law_graph(400, 3)
    graph = CSRGraph(indptr, indices)
    batch = NeighborSampler(graph, [6, 3], seed=5).sample(np.array([7, 1, 250, 31]), salt=2)
    jobs = layer_jobs(batch)
    assert len(jobs) == 2
    for job, block in zip(jobs, batch.blocks):
        assert list(job.destinations) == list(block.targets)
        assert list(job.sources) == sorted(set(job.sources))
        for r, v in enumerate(job.destinations):
            row = [int(job.sources[i]) for i in job.indices[job.indptr[r]:job.indptr[r + 1]]]
            sampled = [int(block.src[i]) for i in
                       block.graph.indices[block.graph.indptr[r]:block.graph.indptr[r + 1]]]
            assert row == [int(v)] + sampled
            whole = set(int(u) for u in indices[indptr[v]:indptr[v + 1]])
            assert set(sampled) <= whole
    # the input layer's destinations are the output layer's sources
    assert list(jobs[0].destinations) == list(jobs[1].sources)
    # without self loops the rows are the block's own
    plain = layer_jobs(batch, self_loops=False)
    assert all(np.array_equal(p.indices, b.graph.indices) for p, b in zip(plain, batch.blocks))
