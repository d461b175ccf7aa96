"""One record of what an accelerator did: :class:`Counters`.

Every path that runs an accelerator (the cycle model, the RTL through any simulator, the
``model`` / ``rtl`` / ``cpu`` sparse devices, the benchmarks, the CLI reports) returns this type,
and every derived figure (total cycles, utilisation, simulation speed) is computed here and
nowhere else.

Definitions (independent of the microarchitecture; see docs/architecture.md):

- ``work_adds``: the useful additions of the job. For an aggregation ``Z = (A H) ⊙ M`` it is
  ``W = Σ_v deg(v) · |S_v|`` (S_v: the unmasked features of row v) on every device; a design
  whose job is more than an aggregation (the HyScale fused layer) counts its own operations.
- ``lanes``: operations the datapath can start per cycle (S-SpMM: adders; HyScale: S-PEs).
- ``cycles_load`` / ``cycles_compute`` / ``cycles_output``: filling the buffers, computing,
  streaming the result out. ``cycles_total`` is always their sum.
- ``utilization = work_adds / (lanes · cycles_compute)``: the one meaning of ``utilization`` in
  every report. A report that also gives the figure over the whole job (loads and output
  included, e.g. ``sspmm estimate``, the baselines' models) names it ``utilization_total =
  work_adds / (lanes · cycles_total)``.
- ``bytes_read`` / ``bytes_written``: what crosses the accelerator's host or memory interface.
- ``extra``: the design's own counters (stall reasons, rows fetched, ...), summed like the rest.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

#: fields that add up over calls and tiles
_SUMMED = ("calls", "tiles", "work_adds", "spmm_adds", "elements", "unmasked", "cycles_load",
           "cycles_compute", "cycles_output", "bytes_read", "bytes_written", "sim_cycles",
           "wall_s", "sim_wall_s")


def work_adds(indptr, mask) -> int:
    """The aggregation work ``W = Σ_v deg(v) · |S_v|`` (S_v: unmasked features of row v)."""
    deg = np.diff(np.asarray(indptr, dtype=np.int64))
    return int(np.dot(deg, np.asarray(mask, dtype=bool).sum(axis=1)))


@dataclass
class Counters:
    """What an accelerator (or a device standing in for one) did, summed over calls."""

    calls: int = 0
    tiles: int = 0
    work_adds: int = 0
    #: ``nnz(A) · F``: the work of the same product without the output mask
    spmm_adds: int = 0
    elements: int = 0
    unmasked: int = 0
    cycles_load: int = 0
    cycles_compute: int = 0
    cycles_output: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    #: cycles the simulator ran (RTL only; includes handshakes the accelerator does not count)
    sim_cycles: int = 0
    #: host wall time of the calls, and the part spent inside a simulator
    wall_s: float = 0.0
    sim_wall_s: float = 0.0
    lanes: int = 0
    clock_mhz: float = 0.0
    extra: dict = field(default_factory=dict)

    # -- derived figures: computed here only --------------------------------------------------

    @property
    def cycles_total(self) -> int:
        """Load + compute + output cycles."""
        return self.cycles_load + self.cycles_compute + self.cycles_output

    @property
    def utilization(self) -> float:
        """``work_adds / (lanes · cycles_compute)`` (0 without cycles)."""
        if not self.cycles_compute or not self.lanes:
            return 0.0
        return self.work_adds / (self.lanes * self.cycles_compute)

    @property
    def sim_cycles_per_s(self) -> float:
        """Simulated cycles per second of simulator wall time (0 without a simulation)."""
        return self.sim_cycles / self.sim_wall_s if self.sim_wall_s > 0 else 0.0

    # -- arithmetic ----------------------------------------------------------------------------

    def add(self, other: "Counters") -> "Counters":
        """Accumulate ``other`` into this record (returns self)."""
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for key, value in other.extra.items():
            self.extra[key] = self.extra.get(key, 0) + value
        self.lanes = self.lanes or other.lanes
        self.clock_mhz = self.clock_mhz or other.clock_mhz
        return self

    @classmethod
    def total(cls, records) -> "Counters":
        """The sum of several records."""
        out = cls()
        for r in records:
            out.add(r)
        return out

    def as_dict(self) -> dict:
        """A flat JSON-able dict: the fields, the design counters and the derived figures."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        d.update(self.extra)
        d["cycles_total"] = self.cycles_total
        d["utilization"] = self.utilization
        return d
