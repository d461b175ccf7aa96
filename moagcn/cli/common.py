"""What every ``moagcn`` command shares: file helpers and the accelerator options.

Files are checked here, once, at the boundary: a missing or unreadable input and an output path
that cannot be written are one-line errors naming the option, before any work starts. The
accelerator options are the same on every command that runs one:

- ``--device cpu|model|rtl``: what computes (``rtl``, the simulated accelerator, by default);
- ``--simulator verilator|icarus|pysim``: what runs the RTL;
- ``--design NAME`` (where a command can use several), ``--preset NAME`` and repeatable
  ``--param KEY=VALUE`` on top of it, for every field of the design's configuration.

Older spellings (``--backend``, ``--lanes``, ``--spes``, ``--macs``) still work and print one
deprecation line naming the new option.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from moagcn.config import parse_params
from moagcn.core.names import DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR, DEVICE_KINDS, \
    SIMULATORS
from moagcn.core.options import add_accelerator_flags, deprecated, field_params
from moagcn.errors import UserError
from moagcn.sim.driver import Driver

# -- files ---------------------------------------------------------------------------------------

def load_array(path: str, what: str) -> np.ndarray:
    """A .npy array; a missing or unreadable file is a :class:`UserError` naming ``what``."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} {path}: no such file")
    try:
        return np.load(p, allow_pickle=False)
    except Exception:  # numpy raises several types for a bad file
        raise UserError(f"{what} {path}: not a .npy array file (write it with numpy.save)") \
            from None


def load_float32(path: str, what: str, ndim: int | None = None) -> np.ndarray:
    """A float32 .npy array (of ``ndim`` dimensions when given)."""
    arr = load_array(path, what)
    if arr.dtype != np.float32 or (ndim is not None and arr.ndim != ndim):
        want = f"a {ndim}-D float32 array" if ndim is not None else "float32"
        raise UserError(f"{what} {path}: expected {want}, got {arr.dtype} with shape "
                        f"{arr.shape} (convert with arr.astype(np.float32))")
    return arr


def load_graph(path: str, undirected: bool = False, weights: bool = False):
    """``(indptr, indices, n_cols, data)`` of the ``--graph`` file, in any format of
    :mod:`moagcn.host.graphs.formats` (by suffix): an .npz CSR (``indptr``, ``indices``, optional
    ``shape`` and float32 ``data``), Matrix Market, an edge list or a PyG ``.pt``.

    ``n_cols`` is None for an .npz without ``shape``; ``data`` (float32 edge weights, one per
    entry) is None when the file has none. For an .npz the arrays and row pointers are checked
    here and the column range once the caller knows the columns (the spec's check names
    ``--graph PATH`` in its messages); the other formats are fully checked. ``undirected``
    stores every edge in both directions (:func:`moagcn.host.graphs.formats.make_undirected`).
    ``weights``: an edge list's lines are ``src dst weight`` (a weighted S-SpMM's input).
    Warnings (an attribute not read) are printed as one line each.
    """
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs import formats
    what = f"--graph {path}"
    p = Path(path)
    with one_line_warnings():
        if p.exists() and not p.is_dir() and formats.file_format(p, what)[0] == "npz":
            indptr, indices, n_cols, data = formats.read_npz_csr(p, what)
            if not undirected:
                return indptr, indices, n_cols, data
            g = formats.read(p, what=what, undirected=True, weights=weights)
        else:
            g = formats.read(p, what=what, undirected=undirected, weights=weights)
    return g.graph.indptr, g.graph.indices, g.graph.n_cols, g.data


@contextlib.contextmanager
def one_line_warnings():
    """Print the :class:`~moagcn.host.graphs.formats.FormatWarning` and other ``UserWarning`` s raised
    inside as ``moagcn: warning: ...`` lines on stderr (no source lines)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            yield
        finally:
            for w in caught:
                if issubclass(w.category, UserWarning):
                    print(f"moagcn: warning: {w.message}", file=sys.stderr)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def add_undirected_arg(parser: argparse.ArgumentParser) -> None:
    """``--undirected``, on every command that reads a ``--graph`` or ``--dataset`` file."""
    parser.add_argument("--undirected", action="store_true",
                        help="store every edge in both directions (for an edge list with one "
                             "line per undirected edge): adds each missing reverse entry; a "
                             "symmetric graph is unchanged (docs/formats.md)")


def output_path(path: str | None, what: str) -> Path | None:
    """Make ``path``'s folder and check that the file can be written, before any work is done,
    so a long run never ends with its result unsaved."""
    if path is None:
        return None
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot create its folder ({exc.strerror})") from None
    if p.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be written ({exc.strerror})") from None
    if not existed:
        p.unlink()
    return p


def report_path(path: str) -> Path:
    """A ``--report`` path: a .json file whose folder can be made."""
    if Path(path).suffix.lower() != ".json":
        raise UserError(f"--report {path}: the report is a JSON file; give a path ending in .json")
    return output_path(path, "--report")


def output_paths(args, *options: str) -> None:
    """:func:`output_path` for each named option of ``args`` (``"out"`` -> ``--out``)."""
    for name in options:
        output_path(getattr(args, name, None), f"--{name.replace('_', '-')}")


def write_json(path, report: dict) -> None:
    """A JSON report, indented, with a final newline."""
    try:
        Path(path).write_text(json.dumps(report, indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"cannot write the report {path}: {exc.strerror or exc}") from None


def add_simulator_arg(parser: argparse.ArgumentParser) -> None:
    """``--simulator`` alone, for commands that always run RTL (``--backend``: deprecated)."""
    parser.add_argument("--simulator", default=None, choices=SIMULATORS,
                        help="what runs the RTL (default verilator)")
    parser.add_argument("--backend", default=None, choices=SIMULATORS, help=argparse.SUPPRESS)


def simulator(args) -> str:
    """The simulator ``--simulator`` (or the deprecated ``--backend``) names."""
    if args.backend is not None:
        deprecated(f"--backend {args.backend}", f"--simulator {args.backend}")
        return args.simulator or args.backend
    return args.simulator or DEFAULT_SIMULATOR


# -- accelerator options -------------------------------------------------------------------------

def add_accelerator_args(parser: argparse.ArgumentParser, *, design: str | None = None,
                         devices=DEVICE_KINDS, legacy: dict | None = None) -> None:
    """``--device``, ``--simulator``, ``--preset``, ``--param`` (and ``--design`` when the
    command takes any design: ``design=None``) from
    :func:`~moagcn.core.options.add_accelerator_flags`, with the benches' names and help text,
    and the hidden, deprecated ``--backend``.

    :func:`accelerator_choice` applies the defaults (``--device`` and ``--simulator`` are None
    when not given: an old ``--backend`` may fill them) and checks ``--design`` where it looks
    the design up. ``legacy`` maps an old option (``--lanes``) to the configuration field it
    set.
    """
    add_accelerator_flags(parser, designs=None if design is None else (design,),
                          design=design, devices=devices, design_flag=design is None,
                          unset=True, refuse_at_parse=False, legacy=legacy)
    parser.set_defaults(design_name=design)
    parser.add_argument("--backend", default=None, help=argparse.SUPPRESS)


def job_driver(args):
    """``(choice, spec, config, driver)`` of a command that runs one accelerator job; the
    output files are checked before anything runs."""
    choice = accelerator_choice(args)
    if choice.device == "cpu":
        raise UserError("--device cpu has no accelerator to run; use --device rtl or model")
    spec, config = choice.spec, choice.config()
    output_paths(args, "out", "report", "vcd")
    return choice, spec, config, Driver(spec, config, choice.device, choice.simulator)


def accelerator_choice(args):
    """The :class:`~moagcn.host.devices.select.AcceleratorChoice` the options of ``args`` name."""
    # lazy: keeps the host runtime, torch out of this module's import
    from moagcn.host.devices.select import AcceleratorChoice

    device, simulator = args.device, args.simulator
    if args.backend is not None:
        old = args.backend
        if old in SIMULATORS:
            deprecated(f"--backend {old}", f"--device rtl --simulator {old}")
            device, simulator = device or "rtl", simulator or old
        elif old in ("cpu", "model", "rtl"):
            deprecated(f"--backend {old}", f"--device {old}")
            device = device or old
        else:
            raise UserError(f"--backend {old!r}: use --device cpu|model|rtl and --simulator "
                            f"{'|'.join(SIMULATORS)}")
    params = field_params(args, parse_params(args.param))
    design = args.design_name or getattr(args, "design", DEFAULT_DESIGN)
    return AcceleratorChoice(device or DEFAULT_DEVICE, design, args.preset, params,
                             simulator or DEFAULT_SIMULATOR)
