"""Configuration of the HyScale-GNN kernels (HyScale-GNN Sec. IV-C, Table IV).

One frozen dataclass parameterises the gateware (to come), the golden model and the performance
model. Presets: ``tiny`` (fast tests), ``default`` (n = 4 scatter-gather PEs, m = 16 MACs) and
``u250`` (the paper's Alveo U250 design point: n = 8, m = 2048, 300 MHz, 77 GB/s DDR; for the
performance model only).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    simulate: bool = True

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


PRESETS = {
    "tiny": HyScaleConfig(spes=2, macs=4, max_feature_width=16, mem_words_per_cycle=2),
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
