"""Registry of the top-level designs that the CLI can generate, simulate and synthesise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from amaranth.lib import wiring

from moagcn.errors import UserError
from moagcn.hw.arith import (Fp32AddConfig, Fp32Adder, Fp32MulAdd, Fp32MulAddConfig, Fp32MulConfig,
                             Fp32Multiplier)
from moagcn.hw.hyscale import PRESETS as HYSCALE_PRESETS, HyScaleConfig
from moagcn.hw.hyscale.layer import HyScaleLayer, HyScaleSystem
from moagcn.hw.sspmm import PRESETS as SSPMM_PRESETS, SSpmmConfig
from moagcn.hw.sspmm.top import SSpmmAccelerator


@dataclass(frozen=True)
class Design:
    """A named top-level design.

    Parameters
    ----------
    name : str
        CLI name (``fp32-add``); the Verilog module is the name with ``-`` turned into ``_``.
    config_type : type
        Frozen dataclass of parameters; its defaults are the design's default configuration.
    build : callable
        ``build(config) -> wiring.Component``.
    description : str
        One line for ``moagcn hw list``.
    presets : mapping
        Named configurations (``--preset``); empty for designs without presets.
    """

    name: str
    config_type: type
    build: Callable[[Any], wiring.Component]
    description: str
    presets: Mapping[str, Any] = field(default_factory=dict)

    @property
    def toplevel(self) -> str:
        """Verilog module name of the top level."""
        return self.name.replace("-", "_")

    def default_config(self) -> Any:
        """The configuration with every parameter at its default."""
        return self.config_type()


def _registry() -> dict[str, Design]:
    # imported here so that importing the registry does not elaborate anything


    designs = [
        Design("fp32-add", Fp32AddConfig, Fp32Adder,
               "pipelined IEEE-754 binary32 adder (round to nearest even, subnormals)"),
        Design("fp32-mul", Fp32MulConfig, Fp32Multiplier,
               "pipelined IEEE-754 binary32 multiplier (round to nearest even, subnormals)"),
        Design("fp32-muladd", Fp32MulAddConfig, Fp32MulAdd,
               "binary32 multiply-add a*b+c from the multiplier and the adder (two roundings)"),
        Design("sspmm", SSpmmConfig, SSpmmAccelerator,
               "MixGCN S-SpMM sparse accelerator: Z = (A H) * M with CSR and bitmap buffers",
               SSPMM_PRESETS),
        Design("hyscale-layer", HyScaleConfig, HyScaleLayer,
               "HyScale-GNN fused layer: scatter-gather aggregation + systolic update",
               HYSCALE_PRESETS),
        Design("hyscale-system", HyScaleConfig, HyScaleSystem,
               "the HyScale-GNN fused layer with a model of its external memory (simulation)",
               HYSCALE_PRESETS),
    ]
    return {d.name: d for d in designs}


def design_names() -> list[str]:
    """Names of all registered designs."""
    return list(_registry())


def get_design(name: str) -> Design:
    """Look a design up by name; an unknown name lists the known ones."""
    designs = _registry()
    try:
        return designs[name]
    except KeyError:
        raise UserError(
            f"unknown design {name!r}; available designs: {', '.join(designs)}") from None
