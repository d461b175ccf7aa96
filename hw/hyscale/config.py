"""Configuration of the HyScale-GNN kernels (HyScale-GNN Sec. IV-C, Table IV).

One frozen dataclass parameterises the gateware, the golden model and the performance
model. Presets: ``tiny`` (fast tests), ``default`` (n = 4 scatter-gather PEs, m = 16 MACs) and
``u250`` (the paper's Alveo U250 design point: n = 8, m = 2048, 300 MHz, 77 GB/s DDR; for the
performance model only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from moagcn.config import lookup_preset


@dataclass(frozen=True)
class HyScaleConfig:
    """Parameters of the HyScale-GNN kernels.

    Parameters
    ----------
    spes : int
        n, scatter-gather PEs of the aggregate kernel (1, 2, 4, 8).
    macs : int
        m, multiply-accumulate units of the systolic update kernel.
    max_feature_width : int
        Widest feature vector a layer may take or produce.
    mem_words_per_cycle : int
        32-bit words the external memory port delivers per cycle (its bandwidth in cycles).
    clock_mhz : float
        Kernel clock.
    ddr_gbps : float
        Effective external-memory bandwidth, GB/s (Eq. 7 and 11 of the paper).
    pcie_gbps : float
        Effective host link bandwidth, GB/s (Eq. 8 and 13).
    max_sources : int
        Feature rows of one job in external memory (so also its distinct sources).
    max_edges : int
        Edges of one job (the on-chip edge list).
    max_destinations : int
        Destination (output) rows of one job; a multiple of ``spes``.
    feature_slots : int
        Feature rows each S-PE's local memory holds (the duplicator's prefetch ring).
    edge_queue : int
        Edges each PE's queue holds (the dispatcher's lookahead past a busy bank).
    add_latency, mul_latency : int
        Pipeline depth of the binary32 adders and multipliers (>= 1).
    load_banks : int
        1 or 2. With 2 the load buffers (sources, edges, destinations, weights, and the
        feature memory of the simulated system) are ping-pong pairs: the next job's loads go
        into one half while the running job reads the other, so loads overlap compute. With 1
        the next job loads once the running one is done.
    pipelined : bool
        Aggregate and update overlap within a job: the update kernel starts with the
        aggregation and opens each block of rows as soon as those rows' aggregation is
        complete (the G-PEs report every row's last write; rows without in-edges are complete
        from the start); the default. False: the update starts when the aggregation has ended.
    simulate : bool
        False for configurations that only the performance model may use.
    """

    spes: int = 4
    macs: int = 16
    max_feature_width: int = 64
    mem_words_per_cycle: int = 4
    clock_mhz: float = 200.0
    ddr_gbps: float = 12.8
    pcie_gbps: float = 12.0
    max_sources: int = 4096
    max_edges: int = 4096
    max_destinations: int = 256
    feature_slots: int = 32
    edge_queue: int = 8
    add_latency: int = 7
    mul_latency: int = 7
    load_banks: int = 2
    pipelined: bool = True
    simulate: bool = True

    #: fields the gateware does not read (``moagcn.config.gateware_view``): the clock and the
    #: link rates are the model's
    HOST_FIELDS: ClassVar[tuple[str, ...]] = ("clock_mhz", "ddr_gbps", "pcie_gbps")

    def __post_init__(self):
        if self.spes not in (1, 2, 4, 8):
            raise ValueError(f"spes={self.spes} is not supported; choose 1, 2, 4 or 8")
        if self.macs < 1:
            raise ValueError(f"macs={self.macs} must be >= 1")
        if self.simulate and self.macs not in (4, 16, 64):
            raise ValueError(f"macs={self.macs}: a simulated update kernel has 4, 16 or 64 MACs")
        if self.max_feature_width < 1 or self.mem_words_per_cycle < 1:
            raise ValueError("max_feature_width and mem_words_per_cycle must be >= 1")
        if min(self.clock_mhz, self.ddr_gbps, self.pcie_gbps) <= 0:
            raise ValueError("clock_mhz, ddr_gbps and pcie_gbps must be positive")
        for name in ("max_feature_width", "mem_words_per_cycle", "feature_slots"):
            value = getattr(self, name)
            if self.simulate and (value < 1 or value & (value - 1)):
                raise ValueError(f"{name}={value} must be a power of two")
        if self.simulate and self.mem_words_per_cycle > self.macs:
            raise ValueError(f"mem_words_per_cycle={self.mem_words_per_cycle} must not exceed "
                             f"macs={self.macs} (an output beat holds columns of one MAC group)")
        if self.max_feature_width % self.mem_words_per_cycle:
            raise ValueError(f"max_feature_width={self.max_feature_width} must be a multiple of "
                             f"mem_words_per_cycle={self.mem_words_per_cycle}")
        if min(self.max_sources, self.max_edges, self.max_destinations) < 1:
            raise ValueError("max_sources, max_edges and max_destinations must be >= 1")
        if self.max_destinations % self.spes:
            raise ValueError(f"max_destinations={self.max_destinations} must be a multiple of "
                             f"spes={self.spes} (destination rows are banked over the G-PEs)")
        if max(self.max_sources, self.max_edges, self.max_destinations) >= 1 << 16:
            raise ValueError("max_sources, max_edges and max_destinations must be < 65536")
        if self.edge_queue < 1:
            raise ValueError(f"edge_queue={self.edge_queue} must be >= 1")
        if self.feature_slots < 2:
            raise ValueError(f"feature_slots={self.feature_slots} must be >= 2")
        if self.load_banks not in (1, 2):
            raise ValueError(f"load_banks={self.load_banks} is not supported; choose 1 or 2")
        if not (1 <= self.add_latency <= 32 and 1 <= self.mul_latency <= 32):
            raise ValueError("add_latency and mul_latency must be 1..32")

    @property
    def beats_per_row(self) -> int:
        """External-memory words (of ``mem_words_per_cycle`` elements) per feature row."""
        return self.max_feature_width // self.mem_words_per_cycle

    @property
    def gather_slot(self) -> int:
        """Fewest cycles between two edges entering one G-PE (the read-add-write distance: the
        read, the operand register, the adder, the write)."""
        return self.add_latency + 3

    @property
    def rows_per_block(self) -> int:
        """Rows the update kernel interleaves: one per adder stage, so accumulations never wait."""
        return self.add_latency


PRESETS = {
    "tiny": HyScaleConfig(spes=2, macs=4, max_feature_width=16, mem_words_per_cycle=2,
                          max_sources=512, max_edges=1024, max_destinations=64, feature_slots=4,
                          edge_queue=4),
    "default": HyScaleConfig(),
    # HyScale-GNN Table II / IV: Alveo U250, n = 8, m = 2048 at 300 MHz, 77 GB/s DDR. The paper
    # gives no PCIe figure; 16 GB/s is the nominal rate of PCIe 3.0 x16 (an assumption)
    "u250": HyScaleConfig(spes=8, macs=2048, max_feature_width=1024,
                          mem_words_per_cycle=64, clock_mhz=300.0, ddr_gbps=77.0,
                          pcie_gbps=16.0, simulate=False),
}


def preset(name: str, **overrides):
    """A preset with optional field overrides; unknown names list the presets."""
    return lookup_preset(PRESETS, name, "HyScale", **overrides)
