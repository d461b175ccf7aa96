"""HyScale-GNN FPGA kernels: scatter-gather aggregation, systolic update, fused layer."""

from .config import PRESETS, HyScaleConfig, preset

__all__ = ["PRESETS", "HyScaleConfig", "HyScaleLayer", "preset"]


def __getattr__(name):
    # the gateware is imported on first use, so that the configuration stays light
    if name == "HyScaleLayer":
        from .layer import HyScaleLayer
        return HyScaleLayer
    raise AttributeError(name)
