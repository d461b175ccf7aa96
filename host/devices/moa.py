"""The Mixture of Accelerators (MixGCN Sec. 3.1): sparse devices next to dense workers.

A :class:`MixtureOfAccelerators` is the fleet a parallel runtime trains on: one sparse device
per local worker (what aggregates: an accelerator spec's model or RTL, or torch on the CPU) and
the torch device of the dense workers (what updates: CUDA when present). Devices may differ from
worker to worker: different designs, configurations and clocks (pass one
:class:`~moagcn.host.devices.select.AcceleratorChoice` per worker). The runtimes of
:mod:`moagcn.host.mixgcn.mop` hold one and ask it for devices and counters.
"""

from __future__ import annotations

from typing import Sequence

import torch

from moagcn.core.counters import Counters
from moagcn.core.device import SparseDevice
from moagcn.errors import UserError

from moagcn.host.devices.select import AcceleratorChoice


class MixtureOfAccelerators:
    """Sparse devices of the local workers, and the dense workers' torch device.

    Parameters
    ----------
    workers : sequence of int
        Ids of the local workers (one sparse device each).
    choice : AcceleratorChoice, a sequence of them, or a device kind
        One choice for every worker, or one per worker of ``workers`` (a mixed fleet); a
        device kind (``"model"``) is that device of the default design.
    dense : torch.device
        Where the dense workers compute.
    """

    def __init__(self, workers: Sequence[int],
                 choice: AcceleratorChoice | Sequence[AcceleratorChoice] | str | None = None,
                 dense: torch.device | None = None):
        workers = list(workers)
        if choice is None or isinstance(choice, str):
            choice = AcceleratorChoice() if choice is None else AcceleratorChoice(choice)
        choices = [choice] * len(workers) if isinstance(choice, AcceleratorChoice) else list(choice)
        if len(choices) != len(workers):
            raise UserError(f"{len(choices)} device choices for {len(workers)} workers; give one "
                            "for every worker or a single one for all")
        self.choices = dict(zip(workers, choices))
        self.sparse: dict[int, SparseDevice] = {i: c.make() for i, c in self.choices.items()}
        self.dense = dense if dense is not None else torch.device("cpu")

    def __getitem__(self, worker: int) -> SparseDevice:
        return self.sparse[worker]

    @property
    def workers(self) -> list[int]:
        return list(self.sparse)

    def counters(self) -> dict[int, Counters]:
        """Each sparse device's counters."""
        return {i: d.counters for i, d in self.sparse.items()}

    def total(self) -> Counters:
        """The counters of the whole fleet, summed."""
        return Counters.total(self.counters().values())

    def reset(self) -> None:
        for d in self.sparse.values():
            d.reset()

    def describe(self) -> dict:
        """What the fleet is made of, for reports."""
        return {"dense": str(self.dense),
                "sparse": {i: {**c.describe(), "name": self.sparse[i].name}
                           for i, c in self.choices.items()}}
