"""The S-SpMM sparse accelerator of MixGCN: ``Z = (A H) ⊙ M``."""

from .config import PRESETS, SSpmmConfig, preset

__all__ = ["PRESETS", "SSpmmConfig", "preset"]

from .top import COUNTERS, SSpmmAccelerator  # noqa: E402

__all__ += ["COUNTERS", "SSpmmAccelerator"]
