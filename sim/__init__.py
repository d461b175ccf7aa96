"""Golden and cycle models, accelerator specs, the driver, simulators and the build cache
(``import moagcn.sim``)."""

from moagcn.core.names import SIMULATORS
from moagcn.sim.rtl.io import CycleLimitExceeded, SimIO

__all__ = ["SIMULATORS", "RunResult", "run", "SimIO", "CycleLimitExceeded"]


def __getattr__(name):
    # the simulator backends load on first use (the host runtime needs no HDL stack)
    if name in ("RunResult", "run"):
        # lazy: keeps the gateware (amaranth) out of this module's import
        from moagcn.sim.rtl import backends
        return getattr(backends, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
