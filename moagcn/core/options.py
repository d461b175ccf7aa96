"""One command-line vocabulary: the option names every ``moagcn`` command shares, and the old
spellings that still work for one release.

A flag name means one thing in every command (the CLI, every ``moagcn bench NAME`` and every
``moagcn experiment NAME``; ``tests/cli/test_vocabulary.py`` checks it):

- ``--rmat-scale K``: an R-MAT graph of 2^K nodes; ``--scale X``: a size multiplier (a fraction
  of a paper dataset's nodes and entries);
- ``--seeds N``: N seeds, 0..N-1 (a count); ``--seed-list A,B,...``: the seeds themselves;
- ``--fanout K1,K2,...``: neighbours per node and layer, input layer first;
- ``--batch-size B``: targets per mini-batch; ``--repeats R``: runs of a measurement;
- ``--features H.npy``: an input file of features; ``--width F``: a count of feature columns;
  ``--width-list A,B,...``: the widths of a sweep;
- ``--workers M``: a count of workers; ``--worker-list A,B,...``: the counts of a sweep;
- ``--model``: the GNN (gcn, sage, gin); ``--perf-model M.json``: a performance-model file;
- ``--grid PxM[,PxM...]``: DEAL's P row ranges x M feature groups; ``--subgroups S``: DEAL's
  SpMM sub-groups per owning range (``groups`` is a field of S-SpMM's configuration);
- ``--device``, ``--simulator``, ``--design``, ``--preset``, ``--param KEY=VALUE``: the
  accelerator (:func:`add_accelerator_flags` on every command, bench and experiment that runs
  one, with one help text; the commands through ``moagcn.cli.common``); a field of its
  configuration is set with ``--param`` (a bench that sweeps a field takes a comma list:
  ``--param spes=2,4,8``), not with a flag of its own (:func:`add_field_flags` keeps the old
  ``--lanes``, ``--spes``, ... working).

An old name (``--scale`` where it meant 2^K nodes, ``--seeds`` as a list, ``--batch``,
``--fanouts``, ``--repeat``, ``--reps``, ``--train-scale``, ``--features`` as a count,
``--workers`` as a list, ``--widths``, DEAL's ``--groups``, ``perfmodel predict --model``) is a
hidden alias of the new one (:func:`add_renamed`) and prints one line on stderr when used:
``moagcn: --scale is now --rmat-scale; the old name will be removed``. An old form whose value
changes shape (``--lanes 8`` for ``--param lanes=8``, ``--clock-mhz 20`` for ``--param
clock_mhz=20``, ``--split-degree 32`` for ``--param split_degree=32``, ``--partitions 2
--feature-groups 2`` for ``--grid 2x2``, ``--pipeline none`` for ``--pipeline layers``)
prints :func:`deprecated`'s line.

Plain Python and argparse: the benches and experiments (below the CLI) use it too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from moagcn.config import parse_params
from moagcn.core.names import DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR, DEVICE_KINDS, \
    SIMULATORS
from moagcn.errors import UserError


def renamed(old: str, new: str) -> None:
    """The one line an old option name prints when it is used."""
    print(f"moagcn: {old} is now {new}; the old name will be removed", file=sys.stderr)


def deprecated(old: str, new: str) -> None:
    """The one line an old spelling whose value changes form prints (``--lanes 8`` ->
    ``--param lanes=8``)."""
    print(f"moagcn: {old} is deprecated; use {new}", file=sys.stderr)


class _Renamed(argparse.Action):
    """An old option name: prints :func:`renamed`'s line, then acts as the new option."""

    def __init__(self, option_strings, dest, new: str, target: argparse.Action, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new, self.target = new, target

    def __call__(self, parser, namespace, values, option_string=None):
        renamed(option_string, self.new)
        self.target(parser, namespace, values, self.new)


def add_renamed(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept ``old`` as a hidden alias of the option ``new`` already on ``parser``: the same
    value, type and destination, with one notice on stderr when it is used.

    A required ``new`` goes in a required mutually exclusive group, and ``parser`` is that
    group (``g = p.add_mutually_exclusive_group(required=True)``; ``g.add_argument(new, ...)``;
    ``add_renamed(g, old, new)``): argparse would otherwise still ask for ``new`` when ``old``
    is given."""
    target = parser._option_string_actions[new]
    parser.add_argument(old, action=_Renamed, new=new, target=target, dest=target.dest,
                        nargs=target.nargs, type=target.type, choices=target.choices,
                        metavar=target.metavar, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def is_renamed(action: argparse.Action) -> bool:
    """Whether ``action`` is an old name added by :func:`add_renamed` (for the vocabulary
    test)."""
    return isinstance(action, _Renamed)


# -- configuration fields: --param KEY=VALUE, never a flag of their own ---------------------------

def add_field_flags(parser: argparse.ArgumentParser, fields: dict[str, str], type=int) -> None:
    """Old flags that each set one configuration field (``{"--lanes": "lanes"}``), hidden;
    :func:`field_params` turns what they were given into ``--param`` values."""
    for option, field in fields.items():
        parser.add_argument(option, type=type, default=None, dest=f"legacy_{field}",
                            help=argparse.SUPPRESS)


def field_params(args, params: dict[str, str]) -> dict[str, str]:
    """``params`` (``--param`` parsed) with the value of every old field flag of ``args``
    (:func:`add_field_flags`) that was used, one :func:`deprecated` line each; a field
    ``--param`` also sets keeps the ``--param`` value."""
    for key, value in vars(args).items():
        if key.startswith("legacy_") and value is not None:
            field = key[len("legacy_"):]
            deprecated(f"--{field.replace('_', '-')}", f"--param {field}={value}")
            params.setdefault(field, str(value))
    return params


# -- the accelerator of a command, a bench or an experiment ---------------------------------------

#: the flags every command, bench and experiment that runs an accelerator (its model or its
#: RTL) takes
ACCELERATOR_FLAGS = ("--device", "--simulator", "--design", "--preset", "--param")


class _OneOf(argparse.Action):
    """One of the names the command takes (``accepted``): any other is refused at once in one
    line (a :class:`UserError`: ``moagcn: error: ...``, exit status 2) saying ``why`` (by
    default, the names it takes). ``resolve`` maps an old name to its new one first."""

    def __init__(self, option_strings, dest, accepted, why=None, resolve=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.accepted, self.why, self.resolve = tuple(accepted), why, resolve

    def __call__(self, parser, namespace, value, option_string=None):
        if self.resolve is not None:
            value = self.resolve(value)
        if value not in self.accepted:
            reason = self.why or f"choose from {', '.join(self.accepted)}"
            raise UserError(f"{option_string} {value}: {reason}")
        setattr(namespace, self.dest, value)


def _help(text: str, note: str | None) -> str:
    return f"{text}; {note}" if note else text


def _design_name(name: str) -> str:
    # lazy: the registry is only needed when --design is given
    from moagcn.core.registry import resolve_name
    return resolve_name(name)


def _choice(accepted, why: str | None, refuse_at_parse: bool, resolve=None) -> dict:
    """How a flag checks its value: at once, in one line (:class:`_OneOf`), or with argparse's
    ``choices`` (usage and error, exit status 2; ``accepted=None``: not at all)."""
    if refuse_at_parse:
        return dict(action=_OneOf, accepted=accepted, why=why, resolve=resolve)
    return dict(choices=accepted) if accepted is not None else {}


def add_accelerator_flags(parser: argparse.ArgumentParser, *, designs=None,
                          design: str | None = None, devices=DEVICE_KINDS,
                          device: str = DEFAULT_DEVICE, simulators=SIMULATORS,
                          preset: str | None = None, why: dict | None = None,
                          notes: dict | None = None, param_metavar: str = "KEY=VALUE",
                          legacy: dict | None = None, legacy_type=int,
                          design_flag: bool = True, unset: bool = False,
                          refuse_at_parse: bool = True) -> None:
    """``--device``, ``--simulator``, ``--design``, ``--preset`` and ``--param`` of every command,
    bench and experiment that runs an accelerator: the same names, meanings and help text
    everywhere.

    ``designs``: the designs it takes (None: every accelerator of the registry), ``design`` the
    default (None: the one design, or sspmm); a bench about one design passes
    ``designs=("sspmm",)``, and any other design is refused in one line naming the design the
    bench measures. ``devices`` / ``device``: the
    devices it takes and the default; one it does not take is refused in one line with
    ``why["--device"]`` (say why: "compares the model with the RTL, so it always runs both").
    ``simulators`` likewise (``why["--simulator"]``). ``preset``: the default preset (None: the
    design's own default). ``notes``: a flag -> one more clause of its help (what the flag
    means in this bench: ``--device model`` skips the RTL, ``--param spes=2,4,8`` sweeps).
    ``legacy``: old flags that each set one configuration field (:func:`add_field_flags`).

    The ``moagcn`` commands (:func:`moagcn.cli.common.add_accelerator_args`) differ in three
    ways, each a keyword. ``design_flag=False``: no ``--design`` (a command about one design,
    ``moagcn sspmm run``). ``unset``: ``--device`` and ``--simulator`` are None when not given,
    so that the command can tell (its help still names ``device`` and the default simulator,
    which the command applies). ``refuse_at_parse=False``: the commands parse before
    ``moagcn``'s error handler, so argparse refuses a device or simulator outside its choices
    (usage and error, exit status 2) and ``--design`` is checked where the design is looked up
    (the registry's error, a renamed design's notice).

    :func:`accelerator` reads them back, old flags and all."""
    why, notes = dict(why or {}), dict(notes or {})
    if designs is None:
        # lazy: the registry's names, only for the help text
        from moagcn.core.registry import accelerator_names
        designs = tuple(accelerator_names())
    prog = parser.prog
    if design is None:
        design = designs[0] if len(designs) == 1 else DEFAULT_DESIGN
    if len(designs) == 1:
        why.setdefault("--design", f"{prog} measures the {designs[0]} design")
    parser.add_argument("--device", **_choice(devices, why.get("--device"), refuse_at_parse),
                        default=None if unset else device,
                        metavar="{" + ",".join(devices) + "}",
                        help=_help(f"what computes: {', '.join(devices)} (default {device})",
                                   notes.get("--device")))
    parser.add_argument("--simulator",
                        **_choice(simulators, why.get("--simulator"), refuse_at_parse),
                        default=None if unset else DEFAULT_SIMULATOR,
                        metavar="{" + ",".join(simulators) + "}",
                        help=_help(f"what runs the RTL with --device rtl: "
                                   f"{', '.join(simulators)} (default {DEFAULT_SIMULATOR})",
                                   notes.get("--simulator")))
    if design_flag:
        parser.add_argument("--design", **_choice(designs if refuse_at_parse else None,
                                                  why.get("--design"), refuse_at_parse,
                                                  resolve=_design_name),
                            default=design, metavar="NAME",
                            help=_help(f"the accelerator: {', '.join(designs)} "
                                       f"(default {design})", notes.get("--design")))
    parser.add_argument("--preset", default=preset, metavar="NAME",
                        help=_help("the design's named configuration (default "
                                   + (f"'{preset}')" if preset else "the design's own)"),
                                   notes.get("--preset")))
    parser.add_argument("--param", action="append", metavar=param_metavar,
                        help=_help("set one configuration field on top of --preset "
                                   "(repeatable)", notes.get("--param")))
    add_field_flags(parser, legacy or {}, type=legacy_type)


@dataclass(frozen=True)
class Accelerator:
    """What :func:`add_accelerator_flags`' flags chose: ``params`` are ``--param`` parsed
    (``KEY -> VALUE`` strings, in order) with the old field flags' values."""

    device: str
    simulator: str
    design: str
    preset: str | None
    params: dict = field(default_factory=dict)


def accelerator(args) -> Accelerator:
    """The :class:`Accelerator` of a bench's or an experiment's parsed ``args`` (one
    :func:`deprecated` line per old field flag used)."""
    return Accelerator(args.device, args.simulator, args.design, args.preset,
                       field_params(args, parse_params(args.param)))


def missing_accelerator_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The :data:`ACCELERATOR_FLAGS` that ``parser`` lacks (for the vocabulary test)."""
    have = {o for a in parser._actions for o in a.option_strings}
    return [f for f in ACCELERATOR_FLAGS if f not in have]
