"""moagcn.host.benches: the host benches (``moagcn bench NAME``), and what several share."""

from __future__ import annotations

import argparse

from moagcn.core.options import add_accelerator_flags


def add_trainer_accelerator_flags(ap: argparse.ArgumentParser) -> None:
    """The five accelerator flags of a HyScale system bench: they choose the accelerator
    trainers' accelerator, as ``moagcn hyscale train`` takes it (its cycle model by default;
    the RTL only on Verilator)."""
    add_accelerator_flags(ap, devices=("model", "rtl"), device="model",
                          simulators=("verilator",),
                          why={"--simulator": "the accelerator trainers run the RTL on "
                                              "verilator"},
                          notes={"--device": "the accelerator trainers' device, as moagcn "
                                             "hyscale train takes it"})
