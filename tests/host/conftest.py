"""Host tests run torch on one intra-op thread: their tensors are small, and with two threads on
a busy two-core machine every small op waits for the other thread (several times slower)."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def gat_small():
    """A 40-node graph small enough for quick Verilator runs of GAT on the tiny presets (still
    many parts); GAT training tests share it."""
    from moagcn.host.graphs.generators import sbm
    return sbm(n_nodes=40, n_features=12, n_classes=3, train_per_class=5, n_val=10, n_test=15,
               seed=7)


@pytest.fixture(scope="session")
def gat_awkward():
    """A 50-node awkward graph (hub, isolated nodes, self loops, a repeated edge;
    ``test_deal.awkward``) with 6 random features, 3 classes and the splits every third node:
    GAT runtime and balance tests share it."""
    import numpy as np

    from moagcn.host.graphs.data import Dataset

    from .test_deal import awkward
    g = awkward(50, seed=4)
    rng = np.random.default_rng(3)
    n = g.n_rows
    masks = [np.zeros(n, bool) for _ in range(3)]
    for k, m in enumerate(masks):
        m[k::3] = True
    return Dataset("awkward", g, rng.standard_normal((n, 6)).astype(np.float32),
                   rng.integers(0, 3, n), *masks)
