"""Host tests run torch on one intra-op thread: their tensors are small, and with two threads on
a busy two-core machine every small op waits for the other thread (several times slower)."""

import torch

torch.set_num_threads(1)
