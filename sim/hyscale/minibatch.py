"""Sampled mini-batches as fused-layer jobs for the HyScale kernels.

The sampling itself is the toolkit's one neighbour sampler
(:class:`moagcn.host.graphs.minibatch.NeighborSampler`); :func:`layer_jobs` turns the blocks it
draws into one :class:`LayerJob` per layer, input layer first. A job's destinations are a
block's targets and its sources (the rows of its ``X``) the block's sources, which hold the
destinations themselves: with ``self_loops`` each destination's row starts with its own position
(the self term of GCN), then its sampled neighbours in the sampler's order.

The blocks are read by their fields (``graph.indptr``, ``graph.indices``, ``src``, ``dst_pos``),
so this module, below the host in the layering, does not import the sampler.
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


def layer_job(block, self_loops: bool = True) -> LayerJob:
    """The fused-layer job of one sampled block (see the module docstring)."""
    indptr = np.asarray(block.graph.indptr, dtype=np.int64)
    indices = np.asarray(block.graph.indices, dtype=np.int64)
    dst_pos = np.asarray(block.dst_pos, dtype=np.int64)
    src = np.asarray(block.src, dtype=np.int64)
    if self_loops:
        deg = np.diff(indptr) + 1
        job_indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        job_indices = np.empty(int(job_indptr[-1]), dtype=np.int64)
        job_indices[job_indptr[:-1]] = dst_pos
        rest = np.ones(job_indices.size, dtype=bool)
        rest[job_indptr[:-1]] = False
        job_indices[rest] = indices
    else:
        job_indptr, job_indices = indptr.copy(), indices.copy()
    return LayerJob(job_indptr, job_indices, src[dst_pos], src)


def layer_jobs(batch, self_loops: bool = True) -> list[LayerJob]:
    """The jobs of every layer of a sampled mini-batch (its ``blocks``), input layer first."""
    return [layer_job(b, self_loops) for b in batch.blocks]
