"""HyScale-GNN FPGA kernels: scatter-gather aggregation, systolic update, fused layer.

The configuration (:mod:`.config`) and the host-visible protocol (:mod:`.protocol`) are plain
Python; the gateware (:class:`HyScaleLayer`, :class:`HyScaleSystem`) is imported on first use.
"""

from moagcn.hw.hyscale.config import PRESETS, HyScaleConfig, preset

__all__ = ["PRESETS", "HyScaleConfig", "HyScaleLayer", "HyScaleSystem", "preset"]


def __getattr__(name):
    if name in ("HyScaleLayer", "HyScaleSystem"):
        # lazy: keeps the gateware (amaranth) out of this module's import
        from moagcn.hw.hyscale import layer
        return getattr(layer, name)
    raise AttributeError(name)
