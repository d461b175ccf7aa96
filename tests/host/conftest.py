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
