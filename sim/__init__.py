"""Golden models, simulation backends and the build cache (``import moagcn.sim``)."""

from .backends import BACKENDS, RunResult, run
from .io import CycleLimitExceeded, SimIO

__all__ = ["BACKENDS", "RunResult", "run", "SimIO", "CycleLimitExceeded"]
