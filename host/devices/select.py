"""Sparse devices and dense workers, selected by name.

``--device`` says what computes an aggregation: ``cpu`` (torch,
:class:`~moagcn.core.device.CpuDevice`), ``model`` (an accelerator spec's bit-exact golden model
and cycle model) or ``rtl`` (the spec's RTL on ``--simulator verilator|icarus|pysim``); both
accelerator kinds are :class:`~moagcn.sim.device.AcceleratorDevice`. ``--design`` picks the
accelerator spec (``sspmm``, ``hyscale``), ``--preset`` and ``--param KEY=VALUE`` its
configuration. :class:`AcceleratorChoice` carries those choices as one value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from moagcn.core.device import CpuDevice, SparseDevice
from moagcn.core.names import (DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR, DEVICE_KINDS,
                               SIMULATORS)
from moagcn.core.spec import get_spec
from moagcn.errors import UserError
from moagcn.sim.device import AcceleratorDevice


@dataclass(frozen=True)
class AcceleratorChoice:
    """What computes the aggregations: a device kind, a design, its configuration, a simulator.

    ``params`` are ``KEY=VALUE`` strings applied on top of ``preset`` (the design's default
    preset when None), exactly as ``--param`` does on every command.
    """

    device: str = DEFAULT_DEVICE
    design: str = DEFAULT_DESIGN
    preset: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    simulator: str = DEFAULT_SIMULATOR

    def __post_init__(self):
        if self.device not in DEVICE_KINDS:
            raise UserError(f"--device {self.device!r}: choose one of {', '.join(DEVICE_KINDS)}")
        if self.simulator not in SIMULATORS:
            raise UserError(f"--simulator {self.simulator!r}: choose one of "
                            f"{', '.join(SIMULATORS)}")

    @property
    def spec(self):
        return get_spec(self.design)

    def config(self) -> Any:
        """The design's configuration (a UserError names a bad preset or parameter)."""
        return self.spec.config(self.preset, self.params)

    def make(self, config=None) -> SparseDevice:
        """A new sparse device (``config``: a configuration object instead of preset and
        params)."""
        if self.device == "cpu":     # its one parameter: the storage format (fp32, bf16)
            return CpuDevice(self.params.get("format", "fp32"))
        return AcceleratorDevice(self.spec, config if config is not None else self.config(),
                                 self.device, self.simulator)

    def describe(self) -> dict:
        return {"device": self.device, "design": self.design, "preset": self.preset,
                "params": dict(self.params), "simulator": self.simulator}


def make_device(device: str = DEFAULT_DEVICE, design: str = DEFAULT_DESIGN, config=None,
                simulator: str = DEFAULT_SIMULATOR) -> SparseDevice:
    """A new sparse device: ``cpu``, or ``model`` / ``rtl`` of ``design`` with ``config``
    (default: the design's default preset)."""
    return AcceleratorChoice(device, design, simulator=simulator).make(config)


def dense_device(prefer: str = "auto") -> torch.device:
    """The torch device of the dense workers: CUDA when available (``auto``), else CPU."""
    if prefer == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if prefer == "cuda" and not torch.cuda.is_available():
        raise UserError("dense device 'cuda' requested but torch sees no CUDA GPU; use 'cpu'")
    if prefer not in ("cpu", "cuda"):
        raise UserError(f"dense device {prefer!r} is not one of auto, cpu, cuda")
    return torch.device(prefer)
