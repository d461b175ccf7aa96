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
  accelerator (``moagcn.cli.common``); a field of its configuration is set with ``--param``
  (a bench that sweeps a field takes a comma list: ``--param spes=2,4,8``), not with a flag of
  its own (:func:`add_field_flags` keeps the old ``--lanes``, ``--spes``, ... working).

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
