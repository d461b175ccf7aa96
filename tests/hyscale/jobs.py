"""Random fused-layer jobs for the tests: sampled mini-batches, hub sources, shared destinations."""

import numpy as np

from moagcn.core.generators import power_law_graph
from moagcn.host.graphs.minibatch import NeighborSampler
from moagcn.host.graphs.ops import CSRGraph
from moagcn.sim.hyscale.minibatch import layer_jobs


def sampled_job(seed, n_targets, fanouts, f_in, f_out, n_graph=300, layer=0):
    """One layer of a sampled mini-batch with random X, W, b (float32, a few signed zeros)."""
    rng = np.random.default_rng(seed)
    indptr, indices = power_law_graph(n_graph, seed)
    targets = rng.choice(n_graph, n_targets, replace=False)
    job = layer_jobs(NeighborSampler(CSRGraph(indptr, indices), fanouts, seed).sample(targets))[layer]
    X = rng.standard_normal((job.sources.size, f_in)).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = -0.0
    W = (rng.standard_normal((f_in, f_out)) / np.sqrt(f_in)).astype(np.float32)
    b = rng.standard_normal(f_out).astype(np.float32)
    return job.indptr, job.indices, X, W, b


def hub_job(seed, n_dst, n_src, f_in, f_out, hub_edges, shared_dst_edges):
    """Explicit weights; one source feeds ``hub_edges`` destinations (duplicates included), one
    destination receives ``shared_dst_edges`` edges, some destinations have no edge."""
    rng = np.random.default_rng(seed)
    rows = [list(rng.integers(0, n_src, rng.integers(0, 4))) for _ in range(n_dst)]
    for k in range(hub_edges):
        rows[k % n_dst].append(0)                 # source 0 is a hub (wraps: duplicates)
    rows[1].extend(rng.integers(0, n_src, shared_dst_edges))
    rows[2] = []                                  # an empty destination
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.array([u for r in rows for u in r], dtype=np.int64)
    data = rng.standard_normal(indices.size).astype(np.float32)
    X = rng.standard_normal((n_src, f_in)).astype(np.float32)
    W = rng.standard_normal((f_in, f_out)).astype(np.float32)
    b = rng.standard_normal(f_out).astype(np.float32)
    return indptr, indices, data, X, W, b
