"""Golden and cycle models, accelerator specs, the driver, simulators and the build cache
(``import moagcn.sim``)."""

from moagcn.core.names import SIMULATORS

from .backends import RunResult, run
from .io import CycleLimitExceeded, SimIO

__all__ = ["SIMULATORS", "RunResult", "run", "SimIO", "CycleLimitExceeded"]
