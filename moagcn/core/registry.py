"""The one registry of designs: every command finds a design here, by one name.

A :class:`Design` names, as ``"module:attribute"`` strings loaded on first use (so the registry
costs nothing to import and the gateware is elaborated only when a command needs it):

- its configuration dataclass and named presets (``hw/<design>/config.py``, importable without
  the gateware);
- its gateware: the top level that ``moagcn hw generate`` writes and ``moagcn synth``
  synthesises, and, where simulation needs more around it (a model of external memory), the
  top level the simulators run;
- for an accelerator, its spec (:class:`moagcn.core.spec.AcceleratorSpec`): what the driver, the
  sparse devices, training (``--design``, ``--devices``) and the benches use. The arithmetic
  units have gateware and no spec.

``design_names()`` lists them; ``get_design(name)`` returns one (an unknown name lists the known
ones; a name from an earlier release works with a one-line notice). A test or a user adds a
design with :func:`register` (docs/architecture.md, "Adding a design").
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from moagcn.config import apply_params, lookup_preset
from moagcn.errors import UserError


def load(ref: str) -> Any:
    """The object a ``"module:attribute"`` string names."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Gateware:
    """One top level of a design's gateware, as the build, simulation and synthesis flows see it.

    Members
    -------
    name : str
        The name of the top level; the Verilog module is the name with ``-`` turned into ``_``.
    config_type : type
        Frozen dataclass of parameters.
    build : callable
        ``build(config) -> amaranth.lib.wiring.Component``.
    description : str
    presets : mapping
        Named configurations (empty for designs without presets).
    placer : str
        nextpnr's placer for ``moagcn synth`` unless ``--placer`` names another.
    """

    name: str
    config_type: type
    build: Callable[[Any], Any]
    description: str
    presets: Mapping[str, Any] = field(default_factory=dict)
    placer: str = "heap"

    @property
    def toplevel(self) -> str:
        """Verilog module name of the top level."""
        return self.name.replace("-", "_")

    def default_config(self) -> Any:
        """The configuration every command starts from (see :meth:`Design.config`)."""
        return self.presets.get("default", self.config_type()) if self.presets else \
            self.config_type()


@dataclass(frozen=True)
class Design:
    """A registered design: configuration, presets, gateware and (for accelerators) spec.

    Parameters
    ----------
    name : str
        The one name every command uses (``sspmm``, ``hyscale``, ``fp32-add``).
    description : str
        One line for ``moagcn hw list``.
    config : str
        ``"module:Class"`` of the configuration dataclass.
    gateware : str
        ``"module:callable"`` building the top level that is generated and synthesised.
    top : str, optional
        Name of that top level (Verilog module ``top`` with ``-`` as ``_``); default ``name``.
    presets : str, optional
        ``"module:PRESETS"``, a mapping of named configurations.
    spec : str, optional
        ``"module:SPEC"``, the accelerator spec; None for designs that are not accelerators.
    sim_gateware, sim_top : str, optional
        The top level the simulators run when it differs from ``gateware`` (HyScale's fused
        layer with a model of its external memory).
    placer : str, optional
        nextpnr's placer for ``moagcn synth`` (``heap``, nextpnr's own default, or ``static``,
        its electrostatic placer: the one that places the HyScale layer's 44,000 LUTs with
        the shortest wires and the fastest clock, docs/hyscale.md).
    """

    name: str
    description: str
    config: str
    gateware: str
    top: str | None = None
    presets: str | None = None
    spec: str | None = None
    sim_gateware: str | None = None
    sim_top: str | None = None
    placer: str = "heap"

    # -- configuration: the one path every command takes ----------------------------------------

    @property
    def config_type(self) -> type:
        return load(self.config)

    @property
    def preset_table(self) -> Mapping[str, Any]:
        """The named configurations (empty when the design has none)."""
        return load(self.presets) if self.presets else {}

    @property
    def default_preset(self) -> str | None:
        """The preset commands start from: ``default`` where the design has presets."""
        table = self.preset_table
        return "default" if "default" in table else (next(iter(table)) if table else None)

    def configure(self, preset: str | None = None, params: Mapping[str, str] | None = None
                  ) -> Any:
        """``presets[preset]`` (default: :attr:`default_preset`; the dataclass defaults for a
        design without presets) with ``KEY=VALUE`` overrides converted to the field types.
        Unknown presets, keys and bad values are a :class:`~moagcn.errors.UserError`."""
        table = self.preset_table
        if preset is None:
            base = lookup_preset(table, self.default_preset, self.name) if table else \
                self.config_type()
        elif not table:
            raise UserError(f"--preset {preset}: design {self.name!r} has no presets; set its "
                            "parameters with --param KEY=VALUE")
        else:
            base = lookup_preset(table, preset, self.name)
        return apply_params(base, params or {})

    # -- gateware --------------------------------------------------------------------------------

    def gateware_top(self, simulate: bool = False) -> Gateware:
        """The top level that is generated and synthesised, or (``simulate``) the one the
        simulators run."""
        ref, top = self.gateware, self.top or self.name
        if simulate and self.sim_gateware:
            ref, top = self.sim_gateware, self.sim_top or self.name
        return Gateware(top, self.config_type, load(ref), self.description, self.preset_table,
                        self.placer)

    # -- the accelerator spec --------------------------------------------------------------------

    @property
    def is_accelerator(self) -> bool:
        return self.spec is not None

    def accelerator(self):
        """The design's :class:`~moagcn.core.spec.AcceleratorSpec`."""
        if self.spec is None:
            raise UserError(f"design {self.name!r} is not an accelerator (it has gateware, no "
                            f"spec); accelerators: {', '.join(accelerator_names())}")
        return load(self.spec)


_DESIGNS: dict[str, Design] = {}
#: names of an earlier release -> the current name
_RENAMED: dict[str, str] = {}


def register(design: Design, *, replace: bool = False) -> Design:
    """Add a design under its name (a second design under a taken name is an error unless
    ``replace``)."""
    if design.name in _DESIGNS and not replace:
        raise ValueError(f"a design named {design.name!r} is already registered")
    _DESIGNS[design.name] = design
    return design


def unregister(name: str) -> None:
    """Remove a design (tests that register their own)."""
    _DESIGNS.pop(name, None)


def design_names() -> list[str]:
    """Names of every registered design."""
    return list(_DESIGNS)


def accelerator_names() -> list[str]:
    """Names of the registered designs that are accelerators (have a spec)."""
    return [n for n, d in _DESIGNS.items() if d.is_accelerator]


def resolve_name(name: str) -> str:
    """``name`` itself, or the current name of a renamed design (with a one-line notice)."""
    if name not in _DESIGNS and name in _RENAMED:
        new = _RENAMED[name]
        print(f"moagcn: design {name!r} is now called {new!r}; the old name will be removed",
              file=sys.stderr)
        return new
    return name


def get_design(name: str) -> Design:
    """The design registered as ``name``; an unknown name lists the known ones."""
    try:
        return _DESIGNS[resolve_name(name)]
    except KeyError:
        raise UserError(f"unknown design {name!r}; available designs: "
                        f"{', '.join(_DESIGNS)}") from None


register(Design(
    "fp32-add", "pipelined IEEE-754 binary32 adder (round to nearest even, subnormals)",
    config="moagcn.hw.arith.adder:Fp32AddConfig", gateware="moagcn.hw.arith.adder:Fp32Adder"))
register(Design(
    "fp32-mul", "pipelined IEEE-754 binary32 multiplier (round to nearest even, subnormals)",
    config="moagcn.hw.arith.multiplier:Fp32MulConfig",
    gateware="moagcn.hw.arith.multiplier:Fp32Multiplier"))
register(Design(
    "fp32-muladd", "binary32 multiply-add a*b+c from the multiplier and the adder (two roundings)",
    config="moagcn.hw.arith.muladd:Fp32MulAddConfig",
    gateware="moagcn.hw.arith.muladd:Fp32MulAdd"))
register(Design(
    "sspmm", "MixGCN S-SpMM sparse accelerator: Z = (A H) * M with CSR and bitmap buffers",
    config="moagcn.hw.sspmm.config:SSpmmConfig", presets="moagcn.hw.sspmm.config:PRESETS",
    gateware="moagcn.hw.sspmm.top:SSpmmAccelerator", spec="moagcn.sim.sspmm.spec:SPEC"))
register(Design(
    "hyscale", "HyScale-GNN fused layer: scatter-gather aggregation + systolic update",
    config="moagcn.hw.hyscale.config:HyScaleConfig", presets="moagcn.hw.hyscale.config:PRESETS",
    gateware="moagcn.hw.hyscale.layer:HyScaleLayer", top="hyscale-layer",
    sim_gateware="moagcn.hw.hyscale.layer:HyScaleSystem", sim_top="hyscale-system",
    spec="moagcn.sim.hyscale.spec:SPEC", placer="static"))
register(Design(
    "sddmm", "SDDMM: S = (Q K^T) at the stored entries, per head, through a binary adder tree",
    config="moagcn.hw.sddmm.config:SddmmConfig", presets="moagcn.hw.sddmm.config:PRESETS",
    gateware="moagcn.hw.sddmm.top:SddmmAccelerator", spec="moagcn.sim.sddmm.spec:SPEC"))
_RENAMED.update({"hyscale-layer": "hyscale", "hyscale-system": "hyscale"})
#: earlier names that meant a design's simulation top level (``hw generate`` keeps writing it)
_SIMULATION_NAMES = {"hyscale-system"}


def names_simulation_top(name: str) -> bool:
    """Whether ``name`` is an earlier name of a design's simulation top level
    (``hyscale-system``: the fused layer with its memory model)."""
    return name in _SIMULATION_NAMES


def gateware(name: str, simulate: bool = False) -> Gateware:
    """The top level of design ``name`` that is generated and synthesised, or (``simulate``)
    the one the simulators run."""
    return get_design(name).gateware_top(simulate)
