"""Building blocks shared by the accelerators: pipelines, streams, memories."""

from .pipeline import StagedPipeline, place_registers

__all__ = ["StagedPipeline", "place_registers"]
