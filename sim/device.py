"""The sparse device of the host runtime for any accelerator spec: :class:`AcceleratorDevice`.

``AcceleratorDevice(spec, config, device="model"|"rtl", simulator=...)`` computes aggregations
``Z = (A H) ⊙ M`` through :meth:`AcceleratorSpec.aggregation_job` and the one
:class:`~moagcn.sim.driver.Driver` (which tiles every job once), and accumulates the driver's
:class:`~moagcn.core.counters.Counters`. ``model`` gives the bit-exact golden model's output with
the cycle model's cycles; ``rtl`` runs the design's RTL (Verilator's lean harness by default).
"""

from __future__ import annotations

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.device import SparseDevice
from moagcn.core.spec import AcceleratorSpec

from .driver import Driver


class AcceleratorDevice(SparseDevice):
    """Aggregation on an accelerator spec, as its model or its simulated RTL."""

    def __init__(self, spec: AcceleratorSpec, config=None, device: str = "model",
                 simulator: str = "verilator"):
        self.spec = spec
        self.config = config if config is not None else spec.config()
        self.kind = device
        self.driver = Driver(spec, self.config, device, simulator)
        self.lanes = spec.lanes(self.config)
        self.clock_mhz = spec.clock_mhz(self.config)
        super().__init__()

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.spec.name}"

    def _compute(self, csr, H, M):
        if csr.n_rows == 0 or H.shape[1] == 0:       # nothing to aggregate: no job runs
            return np.zeros(M.shape, dtype=np.float32), Counters()
        # CSRGraph validated the structure and SparseDevice.sspmm the operands: the job is
        # built checked, not validated again on every call
        job = self.spec.aggregation_job(csr.indptr, csr.indices, H, M, self.config)
        res = self.driver.run(job, checked=True)
        Z = self.spec.aggregation_output(res.output, job, M)
        return Z, res.counters
