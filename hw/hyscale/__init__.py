"""HyScale-GNN FPGA kernels: scatter-gather aggregation, systolic update, fused layer."""

from .config import PRESETS, HyScaleConfig, preset

__all__ = ["PRESETS", "HyScaleConfig", "preset"]
