"""Building blocks shared by the accelerators: pipelines, memories, buffer loaders, status
counters."""

from moagcn.hw.common.pipeline import StagedPipeline, place_registers

__all__ = ["StagedPipeline", "place_registers"]
