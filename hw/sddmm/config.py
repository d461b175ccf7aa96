"""Configuration of the SDDMM accelerator (docs/attention.md): plain Python, no gateware."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

LANE_CHOICES = (2, 4, 8, 16, 32)
#: the binary32 units' natural stages (``moagcn.hw.arith``: ``MULTIPLIER_STAGES``,
#: ``ADDER_STAGES``), written here so that the configuration loads without the gateware
UNIT_STAGES = 7


@dataclass(frozen=True)
class SddmmConfig:
    """Parameters of :class:`~moagcn.hw.sddmm.top.SddmmAccelerator`.

    Parameters
    ----------
    lanes : int
        P, binary32 multipliers feeding one binary adder tree of ``P - 1`` adders (2, 4, 8, 16
        or 32): one chunk of P feature columns of one (entry, head) per cycle.
    max_rows, max_cols : int
        Rows of Q (output rows) and of K (feature rows) one job holds (at most 65,536 each).
    max_edges : int
        Stored entries one job holds.
    max_chunks : int
        Chunks of P words one row of Q or K holds in the buffers: a job's ``heads x
        ceil(width / heads / P)`` must not exceed it (a power of two).
    max_heads : int
        Heads a job may have (mask bits per entry, at most 32).
    mul_latency, add_latency : int
        Pipeline latencies of the binary32 multipliers and adders (at least 1). The
        accumulating adder's latency is also the number of (entry, head) pairs interleaved
        chunk by chunk (docs/attention.md, "Hardware").
    clock_mhz : float
        The clock the cycle counts are converted at.
    simulate : bool
        The configuration can be built and simulated (every preset here can).
    """

    lanes: int = 16
    max_rows: int = 512
    max_cols: int = 512
    max_edges: int = 4096
    max_chunks: int = 8
    max_heads: int = 8
    mul_latency: int = UNIT_STAGES
    add_latency: int = UNIT_STAGES
    clock_mhz: float = 100.0
    simulate: bool = True

    #: fields the gateware does not read (``moagcn.config.gateware_view``)
    HOST_FIELDS: ClassVar[tuple[str, ...]] = ("clock_mhz",)

    def __post_init__(self):
        if self.lanes not in LANE_CHOICES:
            raise ValueError(f"lanes={self.lanes!r}: use one of {LANE_CHOICES}")
        for name in ("max_rows", "max_cols", "max_edges", "max_chunks", "max_heads",
                     "mul_latency", "add_latency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: use an integer of at least 1")
        for name in ("max_rows", "max_cols"):
            if getattr(self, name) > 1 << 16:
                raise ValueError(f"{name}={getattr(self, name)}: at most 65536 (16-bit indices)")
        if self.max_chunks & (self.max_chunks - 1):
            raise ValueError(f"max_chunks={self.max_chunks}: use a power of two")
        if self.max_heads > 32:
            raise ValueError(f"max_heads={self.max_heads}: at most 32 (one mask word per entry)")
        if self.mul_latency > 32 or self.add_latency > 32:
            raise ValueError("mul_latency and add_latency: at most 32")
        if not self.clock_mhz > 0:
            raise ValueError(f"clock_mhz={self.clock_mhz!r}: use a positive clock")

    @property
    def max_width(self) -> int:
        """The widest Q and K rows one job holds with one head."""
        return self.max_chunks * self.lanes


PRESETS = {
    # pysim-sized: short pipelines, small buffers
    "tiny": SddmmConfig(lanes=4, max_rows=16, max_cols=16, max_edges=64, max_chunks=4,
                        max_heads=4, mul_latency=2, add_latency=2),
    # the synthesis configuration (docs/attention.md, "Synthesis"): the arithmetic units at
    # their default latencies, small buffers
    "small": SddmmConfig(lanes=4, max_rows=64, max_cols=64, max_edges=512, max_chunks=4,
                         max_heads=4),
    "default": SddmmConfig(),
}
