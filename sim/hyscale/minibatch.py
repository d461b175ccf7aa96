"""Neighbour-sampled mini-batches (GraphSAGE style) as fused-layer jobs for the HyScale kernels.

``sample_layers(indptr, indices, targets, fanouts, rng)`` samples, from the output layer
backwards, up to ``fanouts[l]`` in-neighbours of every node of the current frontier (without
replacement; all of them when there are fewer) and returns one :class:`LayerJob` per layer, input
layer first. A job's destinations are its frontier, its sources (the rows of its ``X``) the next
frontier, which also holds the destinations themselves (the self loops of GCN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LayerJob:
    """One layer of a sampled mini-batch, in local indices.

    ``indptr``/``indices``: row ``v`` (a destination) lists its sampled in-neighbours as indices
    into ``sources`` (global node ids, the rows of ``X``).
    """

    indptr: np.ndarray
    indices: np.ndarray
    destinations: np.ndarray
    sources: np.ndarray

    @property
    def edges(self) -> int:
        return int(self.indices.size)


def sample_layer(indptr, indices, frontier: np.ndarray, fanout: int,
                 rng: np.random.Generator, self_loops: bool = True) -> LayerJob:
    """Sample up to ``fanout`` in-neighbours of each node of ``frontier``."""
    picked = []
    for v in frontier:
        nbrs = indices[indptr[v]:indptr[v + 1]]
        if nbrs.size > fanout:
            nbrs = rng.choice(nbrs, fanout, replace=False)
        if self_loops:
            nbrs = np.concatenate([[v], nbrs])
        picked.append(np.asarray(nbrs, dtype=np.int64))
    sources = np.unique(np.concatenate([frontier, *picked]) if picked else frontier)
    local = [np.searchsorted(sources, p) for p in picked]
    deg = np.array([p.size for p in local], dtype=np.int64)
    job_indptr = np.concatenate([[0], np.cumsum(deg)])
    job_indices = np.concatenate(local) if local else np.zeros(0, np.int64)
    return LayerJob(job_indptr, job_indices, np.asarray(frontier), sources)


def sample_layers(indptr, indices, targets, fanouts, rng: np.random.Generator,
                  self_loops: bool = True) -> list[LayerJob]:
    """Jobs of every layer, input layer first; ``fanouts`` lists the output layer last."""
    jobs = []
    frontier = np.asarray(targets, dtype=np.int64)
    for fanout in reversed(list(fanouts)):
        job = sample_layer(indptr, indices, frontier, fanout, rng, self_loops)
        jobs.append(job)
        frontier = job.sources
    return jobs[::-1]
