"""The ``rtl`` sparse device: the S-SpMM accelerator's RTL behind the host's device interface.

:class:`moagcn.host.devices.TiledDevice` cuts a job into tiles that fit the buffers; each tile
runs on the simulated accelerator through :class:`~moagcn.sim.sspmm_driver.SSpmmDriver` (the
lean Verilator harness by default), and the RTL's own counters become the device's cycles.
"""

from __future__ import annotations

from moagcn.host.devices import DeviceCounters, TiledDevice

from .sspmm_driver import SSpmmDriver


class RtlDevice(TiledDevice):
    """Aggregation on the simulated S-SpMM RTL (``sim_backend``: verilator, icarus or pysim)."""

    name = "rtl"

    def __init__(self, config=None, sim_backend: str = "verilator"):
        super().__init__(config)
        self.driver = SSpmmDriver(self.config, sim_backend)

    def run_job(self, indptr, indices, H, M):
        res = self.driver.run(indptr, indices, H, M)
        c = res.counters
        return res.Z, DeviceCounters(cycles_load=int(c["cycles_load"]),
                                     cycles_compute=int(c["cycles_compute"]),
                                     cycles_output=int(c["cycles_output"]),
                                     lanes=self.config.lanes)
