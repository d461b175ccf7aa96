"""The S-SpMM sparse accelerator of MixGCN: ``Z = (A H) ⊙ M``."""

from .config import PRESETS, SSpmmConfig, preset

__all__ = ["PRESETS", "SSpmmConfig", "preset"]
