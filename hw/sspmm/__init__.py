"""The S-SpMM sparse accelerator of MixGCN: ``Z = (A H) ⊙ M``.

The configuration (:mod:`.config`) and the host-visible protocol (:mod:`.protocol`) are plain
Python; the gateware (:class:`SSpmmAccelerator`) is imported on first use.
"""

from moagcn.hw.sspmm.config import PRESETS, SSpmmConfig, preset
from moagcn.hw.sspmm.protocol import COUNTERS

__all__ = ["COUNTERS", "PRESETS", "SSpmmAccelerator", "SSpmmConfig", "preset"]


def __getattr__(name):
    if name == "SSpmmAccelerator":
        # lazy: keeps the gateware (amaranth) out of this module's import
        from moagcn.hw.sspmm.top import SSpmmAccelerator
        return SSpmmAccelerator
    raise AttributeError(name)
