"""Sparse devices and dense workers, selected by name.

``--device`` says what computes an aggregation: ``cpu`` (torch,
:class:`~moagcn.core.device.CpuDevice`), ``model`` (an accelerator spec's bit-exact golden model
and cycle model) or ``rtl`` (the spec's RTL on ``--simulator verilator|icarus|pysim``); both
accelerator kinds are :class:`~moagcn.sim.device.AcceleratorDevice`. ``--design`` picks the
accelerator spec (``sspmm``, ``hyscale``), ``--preset`` and ``--param KEY=VALUE`` its
configuration. :class:`AcceleratorChoice` carries those choices as one value, written
``design[:preset][:key=value...]`` where a command takes several (``--devices``).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch

from moagcn.core.device import CpuDevice, SparseDevice
from moagcn.core.names import (DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR, DEVICE_KINDS,
                               SIMULATORS)
from moagcn.core.spec import accelerator_names, get_spec
from moagcn.errors import UserError
from moagcn.sim.device import AcceleratorDevice

_CPU_CAPABILITY: dict[str, float] = {}


def measure_cpu_adds_per_s(repeats: int = 15, size: int = 1 << 16) -> float:
    """Float32 additions per second torch sustains on this machine (cached per process).

    An in-cache vector add (``size`` elements, so the L2 cache holds the operands) on one
    thread, median of ``repeats``, times torch's thread count. This is the rate the CPU
    device's adds can reach, measured rather than stated: a datasheet peak (cores x SIMD width
    x clock) is not known portably and overstates what torch's sparse kernels get by an order
    of magnitude. One thread is timed because a multi-threaded op on a busy machine can wait a
    scheduler quantum for its other threads (a thousand times slower, at random).
    """
    import torch
    threads = torch.get_num_threads()
    if "thread" not in _CPU_CAPABILITY:
        a = torch.ones(size, dtype=torch.float32)
        b = torch.ones(size, dtype=torch.float32)
        out = torch.empty_like(a)
        torch.set_num_threads(1)
        try:
            torch.add(a, b, out=out)                  # warm-up: page in, pick the kernel
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(16):
                    torch.add(a, b, out=out)
                times.append((time.perf_counter() - t0) / 16)
        finally:
            torch.set_num_threads(threads)
        _CPU_CAPABILITY["thread"] = size / statistics.median(times)
    return _CPU_CAPABILITY["thread"] * threads


def _canonical(params) -> tuple[tuple[str, str], ...]:
    items = params.items() if isinstance(params, Mapping) else params
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True)
class AcceleratorChoice:
    """Which accelerator, with which configuration, computes the aggregations: one value.

    Written ``design[:preset][:key=value...]`` (:meth:`parse`; ``--devices`` takes a comma
    list), or given as ``--device``, ``--design``, ``--preset``, ``--param KEY=VALUE`` and
    ``--simulator``. ``cpu`` (torch) takes ``format=fp32|bf16`` and, for the performance
    model, ``adds_per_s`` (a stated capability instead of the measured one).

    Members
    -------
    device : str
        ``cpu``, ``model`` (the spec's bit-exact golden model and cycle model) or ``rtl`` (its
        RTL on ``simulator``).
    design : str
        A registered accelerator (``sspmm``, ``hyscale``); ignored for ``cpu``.
    preset : str or None
        The design's preset (None: its default preset).
    params : tuple of (str, str)
        ``KEY=VALUE`` fields on top of the preset, sorted (a mapping is accepted and sorted).
    simulator : str
    text : str
        How the user wrote it (for messages); not part of equality.
    """

    device: str = DEFAULT_DEVICE
    design: str = DEFAULT_DESIGN
    preset: str | None = None
    params: tuple = ()
    simulator: str = DEFAULT_SIMULATOR
    text: str = field(default="", compare=False)

    def __post_init__(self):
        object.__setattr__(self, "params", _canonical(self.params))
        if self.device not in DEVICE_KINDS:
            raise UserError(f"--device {self.device!r}: choose one of {', '.join(DEVICE_KINDS)}")
        if self.simulator not in SIMULATORS:
            raise UserError(f"--simulator {self.simulator!r}: choose one of "
                            f"{', '.join(SIMULATORS)}")

    # -- the one syntax ------------------------------------------------------------------------

    @classmethod
    def parse(cls, item: str, device: str = "model",
              simulator: str = DEFAULT_SIMULATOR) -> "AcceleratorChoice":
        """``design[:preset][:key=value...]``: ``cpu``, ``cpu:adds_per_s=2e10``, ``sspmm``,
        ``sspmm:multi``, ``sspmm:lanes=8:clock_mhz=150``, ``sspmm:multi:lanes=8``
        (``preset=NAME`` is accepted too). An accelerator runs on ``device`` (``model`` or
        ``rtl``). The result is canonical: the default preset and values equal to the
        preset's are left out, the rest spelled as the configuration holds them, so
        ``sspmm:clock_mhz=150`` and ``sspmm:clock_mhz=150.0`` are one choice and
        ``sspmm:lanes=16`` is ``sspmm``."""
        text = str(item).strip()
        design, *fields = [p.strip() for p in text.split(":")] if text else [""]
        if not design or "=" in design:
            raise _choice_error(item, "expected DESIGN[:PRESET][:KEY=VALUE...] (e.g. "
                                      "sspmm:lanes=32 or cpu)")
        params: dict[str, str] = {}
        preset = bare = None
        for i, f in enumerate(fields):
            key, eq, value = f.partition("=")
            key, value = key.strip(), value.strip()
            if not eq and i == 0 and key:          # a bare second field is the preset
                key, value, bare = "preset", key, key
            elif not eq or not key or not value:
                raise _choice_error(item, f"{f!r} is not KEY=VALUE (e.g. {design}:lanes=32)")
            if key in params or (key == "preset" and preset is not None):
                raise _choice_error(item, f"{key} is given twice; give each parameter once")
            if key == "preset":
                preset = value
            else:
                params[key] = value
        if design == "cpu":
            return _cpu_choice(item, preset, params, simulator)
        if design not in accelerator_names():
            raise _choice_error(item, f"unknown design {design!r}; use cpu or one of "
                                      f"{', '.join(accelerator_names())} (e.g. sspmm:lanes=32)")
        spec = get_spec(design)
        if bare is not None and bare not in spec.presets:
            raise _choice_error(item, f"{bare!r} is not a preset of {design} "
                                      f"({', '.join(spec.presets)}) and is not KEY=VALUE (e.g. "
                                      f"{design}:lanes=32)")
        try:
            base = spec.config(preset)
            config = spec.config(preset, params)
        except UserError as exc:
            problem = str(exc).replace("--param ", "")
            raise _choice_error(item, f"{problem}; fix or drop that parameter") from None
        if preset == spec.default_preset:
            preset = None
        canon = tuple(sorted((k, str(getattr(config, k))) for k in params
                             if getattr(config, k) != getattr(base, k)))
        lanes, clock = spec.lanes(config), spec.clock_mhz(config)
        if lanes <= 0 or clock <= 0:
            raise _choice_error(item, f"capability is {lanes} lanes x {clock} MHz; a device "
                                      "needs lanes > 0 and clock_mhz > 0")
        return cls(device if device != "cpu" else "model", design, preset, canon, simulator,
                   text)

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def key(self) -> str:
        """Stable name of the configuration: ``design[:preset=P][:key=value...]`` (``cpu...``
        for the CPU), in the canonical form :meth:`parse` gives."""
        parts = ["cpu" if self.is_cpu else self.design] + (
            [f"preset={self.preset}"] if self.preset and not self.is_cpu else [])
        return ":".join(parts + [f"{k}={v}" for k, v in self.params])

    def param(self, key: str, default: str | None = None) -> str | None:
        return dict(self.params).get(key, default)

    # -- what it is and what it makes ----------------------------------------------------------

    @property
    def spec(self):
        return get_spec(self.design)

    def config(self) -> Any:
        """The design's configuration (None for the CPU; a UserError names a bad preset or
        parameter)."""
        if self.is_cpu:
            return None
        return self.spec.config(self.preset, dict(self.params))

    def capability(self) -> float:
        """Peak additions per second: lanes x clock for an accelerator (its adders, or S-PEs,
        each starting one add per cycle); for the CPU the stated ``adds_per_s`` or
        :func:`measure_cpu_adds_per_s`."""
        if self.is_cpu:
            stated = self.param("adds_per_s")
            return float(stated) if stated is not None else measure_cpu_adds_per_s()
        spec, config = self.spec, self.config()
        return float(spec.lanes(config)) * spec.clock_mhz(config) * 1e6

    def on(self, device: str) -> "AcceleratorChoice":
        """The same choice on another device kind (the CPU stays the CPU)."""
        if self.is_cpu or device == self.device:
            return self
        if device not in ("model", "rtl"):
            raise UserError(f"device kind {device!r} cannot run {self.key}: use model (cycle "
                            "model) or rtl (simulated RTL)")
        return replace(self, device=device)

    def make(self, config=None) -> SparseDevice:
        """A new sparse device (``config``: a configuration object instead of preset and
        params)."""
        if self.is_cpu:     # its parameter: the storage format (fp32, bf16)
            return CpuDevice(self.param("format", "fp32"))
        return AcceleratorDevice(self.spec, config if config is not None else self.config(),
                                 self.device, self.simulator)

    def describe(self) -> dict:
        """JSON form: what :meth:`from_describe` needs, and the key."""
        return {"key": self.key, "device": self.device, "design": self.design,
                "preset": self.preset, "params": dict(self.params), "simulator": self.simulator}

    @classmethod
    def from_describe(cls, d: Mapping[str, Any]) -> "AcceleratorChoice":
        design = str(d["design"])
        device = str(d.get("device", "cpu" if design == "cpu" else "model"))
        if design == "cpu":
            design, device = DEFAULT_DESIGN, "cpu"
        return cls(device, design, d.get("preset"), d.get("params", {}),
                   str(d.get("simulator", DEFAULT_SIMULATOR)), str(d.get("key", "")))


def _choice_error(item: str, problem: str) -> UserError:
    return UserError(f"--devices {item!r}: {problem}")


def _cpu_choice(item: str, preset: str | None, params: dict[str, str],
                simulator: str) -> AcceleratorChoice:
    if preset is not None:
        raise _choice_error(item, "the cpu device has no presets; drop the preset")
    unknown = sorted(set(params) - {"adds_per_s", "format"})
    if unknown:
        raise _choice_error(item, f"the cpu device has no parameter {unknown[0]!r}; its "
                                  "parameters are adds_per_s (a stated capability, e.g. "
                                  "cpu:adds_per_s=2e10) and format (fp32 or bf16)")
    fmt = params.pop("format", "fp32")
    if fmt not in ("fp32", "bf16"):
        raise _choice_error(item, f"format={fmt}: the cpu device stores fp32 or bf16")
    canon: tuple[tuple[str, str], ...] = ()
    if "adds_per_s" in params:
        try:
            rate = float(params["adds_per_s"])
        except ValueError:
            raise _choice_error(item, f"adds_per_s={params['adds_per_s']} is not a number "
                                      "(e.g. cpu:adds_per_s=2e10)") from None
        if not (rate > 0 and math.isfinite(rate)):
            raise _choice_error(item, f"adds_per_s={params['adds_per_s']}: the capability "
                                      "must be a positive number of additions per second")
        canon = (("adds_per_s", repr(rate)),)
    if fmt != "fp32":
        canon = tuple(sorted(canon + (("format", fmt),)))
    return AcceleratorChoice("cpu", DEFAULT_DESIGN, None, canon, simulator, str(item).strip())


def parse_device(item: str, device: str = "model") -> AcceleratorChoice:
    """One ``--devices`` item (:meth:`AcceleratorChoice.parse`)."""
    return AcceleratorChoice.parse(item, device)


def parse_devices(text: str, device: str = "model") -> list[AcceleratorChoice]:
    """Comma-separated choices (:meth:`AcceleratorChoice.parse`); each device at most once."""
    items = str(text).split(",")
    if not str(text).strip():
        raise UserError("--devices is empty: give one or more specs, e.g. "
                        "--devices sspmm:lanes=32,cpu")
    out: list[AcceleratorChoice] = []
    seen: dict[str, str] = {}
    for item in items:
        if not item.strip():
            raise UserError(f"--devices {text!r}: an empty spec between commas; remove the "
                            "extra comma")
        dev = AcceleratorChoice.parse(item, device)
        if dev.key in seen:
            raise _choice_error(item, f"the same device as {seen[dev.key]!r} ({dev.key}); "
                                      "list each device once")
        seen[dev.key] = item.strip()
        out.append(dev)
    return out


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
