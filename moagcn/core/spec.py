"""What a design tells the rest of moagcn: :class:`AcceleratorSpec`, and the registry of specs.

An accelerator is one spec beside its gateware. The spec holds everything that is particular to
the design: its configuration dataclass and presets (importable without the gateware), the
stream protocol of its top level, how a job is checked, split into tiles, packed into stream
beats and unpacked again, its bit-exact golden model, its cycle model and its error flags.
Everything else is generic and written once against this interface: the driver
(:class:`moagcn.sim.driver.Driver`: any spec on its model or on pysim / Verilator / Icarus), the
sparse device the host runtime holds (:class:`moagcn.sim.device.AcceleratorDevice`), tiling
(:mod:`moagcn.core.tiling`), the counters (:class:`~moagcn.core.counters.Counters`), the
benchmarks and the CLI. docs/architecture.md walks through adding a design.

A spec is registered with its design in :mod:`moagcn.core.registry` as a ``"module:attribute"``
string, so the registry costs nothing to import and a spec module is loaded only when its design
is asked for.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.registry import accelerator_names, design_names, get_design, resolve_name
from moagcn.core.tiling import Tile, TileLimits
from moagcn.errors import UserError


@dataclass(frozen=True)
class StreamProtocol:
    """Port names of a load / start / stream-out / done top level.

    The host fills every ``loads`` stream (valid/ready, all in parallel), holds the ``scalars``,
    pulses ``start``, takes beats from ``output`` until ``done``, then reads ``counters`` and
    ``flags`` (1-bit error outputs; a job that raises one stops cleanly).
    """

    loads: tuple[str, ...]
    output: str
    scalars: tuple[str, ...]
    counters: tuple[str, ...]
    flags: tuple[str, ...]
    start: str = "start"
    done: str = "done"
    #: jobs may follow one another without a reset (``start`` again after ``done``)
    restartable: bool = False
    #: the design samples its scalars at ``start``, so the next job's are set as soon as a job
    #: has started (its loads may depend on them); otherwise once the job is done
    scalars_at_start: bool = False

    @classmethod
    def of(cls, protocol) -> "StreamProtocol":
        """The protocol a design's plain-Python protocol module states (``STREAMS``,
        ``OUTPUT``, ``SCALARS``, ``COUNTERS``, ``FLAGS``)."""
        return cls(loads=protocol.STREAMS, output=protocol.OUTPUT, scalars=protocol.SCALARS,
                   counters=protocol.COUNTERS, flags=protocol.FLAGS,
                   restartable=getattr(protocol, "RESTARTABLE", False),
                   scalars_at_start=getattr(protocol, "SCALARS_AT_START", False))


@dataclass
class Packed:
    """One job as the hardware takes it: per load stream a (beats, 32-bit words) uint32 array,
    the scalar inputs, and whatever the spec needs to unpack the output (``context``)."""

    streams: dict[str, np.ndarray]
    scalars: dict[str, int]
    context: Any = None

    @property
    def load_words(self) -> int:
        """32-bit words on the load streams (padding included)."""
        return int(sum(s.size for s in self.streams.values()))


class Part:
    """One accelerator job of a larger one, and where its output goes (``tile``; None when the
    job runs whole).

    A split part's job is built on first use (``make()``): the cycle model of a part needs only
    its structure (see :meth:`AcceleratorSpec.part_cycles`), so the model device never copies
    feature rows it does not simulate.

    ``order``: where the part's job has its rows in another order than the job's (or the
    tile's) own, row ``i`` of the part's output is row ``order[i]`` of theirs
    (:meth:`AcceleratorSpec.place` puts it back).
    """

    def __init__(self, job=None, tile: Tile | None = None, make: Callable[[], Any] | None = None,
                 order: np.ndarray | None = None):
        if (job is None) == (make is None):
            raise ValueError("a Part takes a job or a function that makes it, not both")
        self._job, self._make, self.tile, self.order = job, make, tile, order

    def in_job_order(self, part_out: np.ndarray) -> np.ndarray:
        """``part_out`` (rows in the order this part ran them) with its rows back in the job's
        (or the tile's) order."""
        if self.order is None:
            return part_out
        restored = np.empty_like(part_out)
        restored[self.order] = part_out
        return restored

    @property
    def job(self):
        if self._job is None:
            self._job = self._make()
        return self._job


class AcceleratorSpec(ABC):
    """The design-specific half of an accelerator; subclass once per design.

    The design's configuration type and presets are its registry entry's
    (:class:`moagcn.core.registry.Design`): one path for every command. Everything the driver,
    the sparse device and the CLI call is declared here, with one signature; what only some
    designs can do is declared in :attr:`capabilities`, not detected.

    Class attributes
    ----------------
    name : str
        The registry name (``sspmm``), used by every command (``--design``, ``--devices``,
        ``hw generate``, ``synth``, the benches).
    protocol : StreamProtocol
        The top level's streams, scalars, counters and flags.
    capabilities : frozenset of str
        Optional abilities: ``"dense"``: the design runs dense products ``X W + b``
        (:meth:`dense_job`), so a sparse device of this design runs the updates too.
    """

    name: str = "?"
    capabilities: frozenset = frozenset()
    protocol: StreamProtocol

    # -- configuration: one path for every command ---------------------------------------------

    @property
    def registered(self):
        """This design's :class:`~moagcn.core.registry.Design`."""
        return get_design(self.name)

    @property
    def description(self) -> str:
        return self.registered.description

    @property
    def config_type(self) -> type:
        return self.registered.config_type

    @property
    def presets(self) -> Mapping[str, Any]:
        return self.registered.preset_table

    @property
    def default_preset(self) -> str:
        return self.registered.default_preset

    def config(self, preset: str | None = None, params: Mapping[str, str] | None = None) -> Any:
        """``presets[preset]`` (default: :attr:`default_preset`) with ``KEY=VALUE`` overrides
        converted to the field types; unknown presets, keys and bad values are a UserError
        (:meth:`moagcn.core.registry.Design.configure`)."""
        return self.registered.configure(preset, params)

    def gateware(self):
        """The top level the simulators run (:class:`moagcn.core.registry.Gateware`)."""
        return self.registered.gateware_top(simulate=True)

    @abstractmethod
    def lanes(self, config) -> int:
        """Operations the datapath starts per cycle (the utilisation denominator)."""

    def clock_mhz(self, config) -> float:
        return float(getattr(config, "clock_mhz", 0.0))

    def simulable(self, config) -> bool:
        """Whether the configuration can run as RTL (paper-scale presets are model-only)."""
        return bool(getattr(config, "simulate", True))

    # -- jobs -----------------------------------------------------------------------------------

    @abstractmethod
    def job(self, *operands, **options):
        """A job of this design from its operands (arrays), unchecked: S-SpMM
        ``job(indptr, indices, H, M=None)``, HyScale ``job(indptr, indices, X, W, b=None, *,
        relu=False, data=None)``. :meth:`check` validates it."""

    @abstractmethod
    def limits(self, job, config) -> TileLimits:
        """The buffer limits a part of ``job`` must fit (:func:`moagcn.core.tiling.plan_tiles`)."""

    @abstractmethod
    def check(self, job, config):
        """Validate a job at the boundary (shapes, dtypes, CSR) and return it normalised.

        Buffer limits are not checked here: jobs larger than the buffers are split by
        :meth:`split`.
        """

    @abstractmethod
    def split(self, job, config) -> list[Part]:
        """The job as accelerator jobs that fit the buffers (one part when it fits)."""

    @abstractmethod
    def empty_output(self, job) -> np.ndarray:
        """The output array the parts are placed into."""

    def parts_cycles(self, parts, job, config) -> list:
        """:meth:`part_cycles` of every part, in order (a spec may model many parts at once)."""
        return [self.part_cycles(part, job, config) for part in parts]

    def expand(self, job, config):
        """The job the accelerator runs for ``job`` and a function from that job's output to
        ``job``'s, where the design cannot run ``job``'s rows as they are (S-SpMM: rows longer
        than any job holds, cut into pieces); ``(job, None)`` otherwise (the default)."""
        return job, None

    def passes(self, job, config):
        """None (the default), or ``(first, second)`` where the design runs ``job`` as two
        jobs: ``first``, then ``second(output of first)``, whose output is ``job``'s (HyScale:
        a fused layer with a row longer than any job holds, aggregated in pieces, then
        updated as a dense job)."""
        return None

    def place(self, out: np.ndarray, part: Part, part_out: np.ndarray) -> None:
        """Put one part's output in place (the whole output when the job was not split), its
        rows back in their order where the part ran them in another."""
        part_out = part.in_job_order(part_out)
        if part.tile is None:
            out[...] = part_out
        else:
            part.tile.place(out, part_out)

    @abstractmethod
    def work(self, job, config) -> Counters:
        """The whole job's work and element counts (no cycles, no bytes): the same on every
        device."""

    # -- models ---------------------------------------------------------------------------------

    @abstractmethod
    def golden(self, job, config) -> np.ndarray:
        """Bit-exact output of the job (a whole job: tiling never changes the result)."""

    @abstractmethod
    def cycles(self, job, config) -> Counters:
        """Cycle model of one part that fits the buffers: load, compute and output cycles,
        bytes, and design counters in ``extra``."""

    def part_cycles(self, part: Part, job, config) -> Counters:
        """:meth:`cycles` of one part of ``job``; a spec may override it to avoid building the
        part's whole job (the model device's hot path)."""
        return self.cycles(part.job, config)

    @abstractmethod
    def traffic(self, job, config) -> tuple[int, int]:
        """Bytes the job reads from and writes to external memory: ``(read, written)``."""

    def report(self, result, job, config) -> dict:
        """What ``moagcn <design> run`` reports of a finished job beyond its counters (a
        design adds its own model's figures)."""
        return {}

    def dense_job(self, X, W, b=None):
        """A job computing ``X W + b`` on the design (capability ``"dense"``)."""
        raise UserError(f"design {self.name!r} cannot run dense products; its capabilities: "
                        f"{', '.join(sorted(self.capabilities)) or 'none'}")

    def loads_overlap(self, config) -> bool:
        """Whether the next part's loads overlap the running part (ping-pong load buffers):
        then a part's loads hide behind the busy cycles of the part before it, and only the
        rest adds to the time (:func:`overlap_loads`)."""
        return False

    # -- the hardware ---------------------------------------------------------------------------

    @abstractmethod
    def pack(self, job, config) -> Packed:
        """Load streams and scalars of one part that fits the buffers."""

    @abstractmethod
    def unpack(self, words: np.ndarray, packed: Packed, job, config) -> np.ndarray:
        """The output from the output beats, a (beats, words) uint32 array."""

    def output_words(self, config) -> int:
        """32-bit words per output beat."""
        return self.lanes(config)

    @abstractmethod
    def hardware_counters(self, raw: Mapping[str, int], job, config) -> Counters:
        """Counters from the registers the RTL exposes at the end of a job."""

    def max_cycles(self, job, packed: Packed, config) -> int:
        """A generous bound on a part's simulated cycles: a design that stops making progress
        fails instead of hanging."""
        model = self.cycles(job, config)
        beats = sum(len(s) for s in packed.streams.values())
        return 4 * model.cycles_total + 8 * beats + 20_000

    # -- aggregation: how the host's sparse devices use the design ------------------------------

    def aggregation_job(self, indptr, indices, H, M, config):
        """The job computing the aggregation ``Z = (A H) ⊙ M`` on this design, already in the
        form :meth:`check` returns: the operands come validated from
        :meth:`~moagcn.core.device.SparseDevice.sspmm` (int64 CSR, contiguous float32 H, bool
        M). A design that cannot aggregate raises UserError."""
        raise UserError(f"design {self.name!r} cannot compute an aggregation; choose another "
                        "--design")

    def aggregation_output(self, out: np.ndarray, job, M: np.ndarray) -> np.ndarray:
        """Z from the output of :meth:`aggregation_job`'s job."""
        return out

    # -- per-entry operations (``SparseDevice.entry_ops``): weighted aggregation, SDDMM --------

    #: per-entry operation -> the ``--param`` that gives a configuration of this design it
    #: (``{"weighted": "weighted=true"}``); the device's refusal names it
    entry_op_params: Mapping[str, str] = {}

    def entry_ops(self, config) -> frozenset:
        """The per-entry operations a configuration runs (``"weighted"``:
        :meth:`weighted_job`; ``"sddmm"``: :meth:`sddmm_jobs`); none by default."""
        return frozenset()

    def weighted_job(self, indptr, indices, values, H, M, config):
        """The job computing ``Z = (A_w H) ⊙ M`` (``values``: one float32 per stored entry, in
        stored order) on a configuration whose :meth:`entry_ops` hold ``"weighted"``, in the
        form :meth:`check` returns (the operands come validated from
        :meth:`~moagcn.core.device.SparseDevice.spmm_weighted`)."""
        raise UserError(f"design {self.name!r} cannot compute a weighted aggregation")

    def sddmm_jobs(self, indptr, indices, Q, K, mask, config) -> list:
        """The jobs computing ``S[k, h] = <Q[row_k, h], K[col_k, h]>`` (``Q``: ``n_rows x
        heads x D``, ``K``: ``n_cols x heads x D``, float32; ``mask``: ``nnz x heads`` bool or
        None) on a configuration whose :meth:`entry_ops` hold ``"sddmm"``, as ``(h0, h1, job)``:
        the job computes heads ``h0:h1`` (its output ``nnz x (h1 - h0)``), in the form
        :meth:`check` returns (the operands come validated from
        :meth:`~moagcn.core.device.SparseDevice.sddmm`)."""
        raise UserError(f"design {self.name!r} cannot compute an SDDMM")


# -- the registry's accelerators --------------------------------------------------------------

def spec_names() -> list[str]:
    """Names of the registered designs that are accelerators (have a spec)."""
    return accelerator_names()


def get_spec(name: str) -> AcceleratorSpec:
    """The spec of the design registered as ``name``; an unknown name or a design without a
    spec lists the accelerators."""
    if resolve_name(name) not in design_names():
        raise UserError(f"unknown accelerator design {name!r}; available: "
                        f"{', '.join(accelerator_names())}")
    return get_design(name).accelerator()


def overlap_loads(previous: Counters | None, part: Counters) -> Counters:
    """``part``'s counters with its loads overlapped behind ``previous`` (the part before it,
    on a design whose next loads go into the other half of its buffers while it runs): the
    loads start with the previous part and run beside its ``cycles_compute +
    cycles_output``; those cycles move from ``cycles_load`` to ``extra["cycles_load_hidden"]``.
    What the RTL counts when the parts run back to back and every load beat is taken at once."""
    if previous is None:
        return part
    hidden = min(part.cycles_load, previous.cycles_compute + previous.cycles_output)
    part.cycles_load -= hidden
    part.extra["cycles_load_hidden"] = part.extra.get("cycles_load_hidden", 0) + hidden
    return part


def back_to_back(parts, overlap: bool, previous: Counters | None = None
                 ) -> tuple[Counters, Counters | None]:
    """The counters of ``parts`` (an iterable of :class:`Counters`, one per part) run back to
    back, summed; with ``overlap`` (ping-pong load buffers) each part's loads beside the part
    before (:func:`overlap_loads`; ``previous``: the part before the first, if any). Returns
    the sum and the last part's counters."""
    total = Counters()
    for c in parts:
        if overlap:
            c = overlap_loads(previous, c)
        total.add(c)
        previous = c
    return total, previous
