"""The accelerator specs (see :class:`moagcn.core.spec.AcceleratorSpec`): one module per design.

- :mod:`.sspmm`: the MixGCN S-SpMM accelerator (``Z = (A H) ⊙ M``);
- :mod:`.hyscale`: the HyScale-GNN fused layer (``Y = act((A X) W + b)``).

They are registered by name in :mod:`moagcn.core.spec` and loaded on first use.
"""
