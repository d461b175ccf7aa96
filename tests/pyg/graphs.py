"""Graphs for the interop tests, built with plain numpy (no moagcn code)."""

from pathlib import Path

import numpy as np
import torch

CORA = Path(__file__).resolve().parents[2] / "moagcn" / "data" / "cora.npz"


def awkward_graph(n=60, seed=3):
    """edge_index with a hub, isolated nodes, self loops (one node with two), repeated edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 5, size=4 * n)          # nodes n-5..n-1 never send
    dst = rng.integers(0, n - 8, size=4 * n)          # nodes n-8..n-1 never receive
    hub = np.full(n - 10, 1)                           # node 1 receives from almost everyone
    loops = np.array([2, 2, 3, 7])                     # node 2 has two self loops
    rep = np.array([10, 10, 10])                        # edge 11 -> 10 three times
    src = np.concatenate([src, np.arange(n - 10), loops, np.full(3, 11)])
    dst = np.concatenate([dst, hub, loops, rep])
    isolated = n - 1                                    # no edge touches the last node
    keep = (src != isolated) & (dst != isolated)
    return torch.from_numpy(np.stack([src[keep], dst[keep]]).astype(np.int64)), n


def cora():
    """Cora's edge_index (both directions) and row-normalised features (from the .npz)."""
    with np.load(CORA) as z:
        indptr, indices, X = z["indptr"], z["indices"], z["features"].astype(np.float32)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    X = X / np.maximum(X.sum(1, keepdims=True), 1)
    return torch.from_numpy(np.stack([indices, rows]).astype(np.int64)), torch.from_numpy(X)
