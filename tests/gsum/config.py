"""Configuration of the gather-sum unit (a test-only design, docs/architecture.md's worked
example): plain Python, no gateware."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GSumConfig:
    """Parameters of :class:`~tests.gsum.top.GSumTop`.

    Parameters
    ----------
    lanes : int
        Binary32 adders, one per feature column: a job has at most ``lanes`` feature columns.
    max_rows, max_cols, max_edges : int
        Output rows, feature rows and stored entries one job holds.
    adder_latency : int
        Cycles of each adder (at least 1).
    clock_mhz : float
        The clock the cycle counts are converted at.
    """

    lanes: int = 4
    max_rows: int = 64
    max_cols: int = 64
    max_edges: int = 512
    adder_latency: int = 2
    clock_mhz: float = 100.0

    def __post_init__(self):
        for name in ("lanes", "max_rows", "max_cols", "max_edges", "adder_latency"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: use an integer of at least 1")
        if not self.clock_mhz > 0:
            raise ValueError(f"clock_mhz={self.clock_mhz!r}: use a positive clock")


PRESETS = {
    "tiny": GSumConfig(lanes=2, max_rows=16, max_cols=16, max_edges=64),
    "default": GSumConfig(),
}
