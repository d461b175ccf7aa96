"""PyG interop tests: torch on one thread (small tensors; see tests/host/conftest.py), and
torch-geometric imported once with its import-time FutureWarning silenced."""

import warnings

import torch

torch.set_num_threads(1)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script, from its import
    import torch_geometric  # noqa: F401  (installed by `make test`: the `pyg` extra)
