"""Sparse devices (S-SpMM: ``Z = (A H) ⊙ M``) and dense workers, selected by name.

Every sparse backend implements :class:`SparseDevice`: ``sspmm(csr, H, M) -> Z`` plus counters
that accumulate over calls (work, cycles, wall time). The host cannot tell the backends apart
except by speed and by whether cycles are counted:

- ``cpu``: torch sparse CSR matmul, then the mask. No cycles.
- ``model``: the bit-exact golden model (``moagcn.sim.golden.sspmm``) for Z and the analytic cycle
  model (``moagcn.sim.sspmm_model.estimate``) for cycles, per buffer-sized tile.
- ``rtl``: the simulated accelerator, registered lazily as :data:`RTL_FACTORY` (a
  :class:`TiledDevice` subclass in the simulation package); until that module exists, asking
  for ``rtl`` is a clear error (see ``docs/runtime.md``).

Jobs larger than the accelerator's buffers (``SSpmmConfig.max_nodes``, ``max_edges``,
``max_feature_width``) are cut into tiles by :func:`plan_tiles` (defined in
``moagcn.sim.sspmm_tiling``, which the S-SpMM driver shares); each tile is a square job the
accelerator can hold. Tiling never changes the result: every output element is still one
sequential sum in ascending global column order.
"""

from __future__ import annotations

import importlib
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.hw.sspmm.config import SSpmmConfig, preset
from moagcn.sim.golden import sspmm as golden
from moagcn.sim.sspmm_model import estimate
from moagcn.sim.sspmm_tiling import Tile, plan_tiles  # noqa: F401 (re-exported)

from .graph import CSRGraph


# -- counters ------------------------------------------------------------------------------------

@dataclass
class DeviceCounters:
    """What a sparse device did since the last :meth:`reset` (sums over calls).

    ``work_adds`` is the S-SpMM work ``W = Σ_v deg(v) |S_v|`` (every backend counts it);
    ``spmm_adds = nnz(A) · F`` is the work of the same product without the output mask (what
    the job was assigned); cycles are accelerator cycles (0 for backends without them).
    """

    calls: int = 0
    tiles: int = 0
    work_adds: int = 0
    spmm_adds: int = 0
    elements: int = 0
    unmasked: int = 0
    cycles_load: int = 0
    cycles_compute: int = 0
    cycles_output: int = 0
    wall_s: float = 0.0
    lanes: int = 0

    @property
    def cycles_total(self) -> int:
        return self.cycles_load + self.cycles_compute + self.cycles_output

    @property
    def utilization(self) -> float:
        """``work_adds / (lanes * cycles_compute)`` (0 without cycles)."""
        if not self.cycles_compute or not self.lanes:
            return 0.0
        return self.work_adds / (self.lanes * self.cycles_compute)

    def add(self, other: "DeviceCounters") -> None:
        """Accumulate ``other`` into this one."""
        for f in ("calls", "tiles", "work_adds", "spmm_adds", "elements", "unmasked", "cycles_load",
                  "cycles_compute", "cycles_output", "wall_s"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.lanes = self.lanes or other.lanes

    def copy(self) -> "DeviceCounters":
        return DeviceCounters(**asdict(self))

    def minus(self, earlier: "DeviceCounters") -> "DeviceCounters":
        """Counts accumulated since the snapshot ``earlier``."""
        out = self.copy()
        for f in ("calls", "tiles", "work_adds", "spmm_adds", "elements", "unmasked", "cycles_load",
                  "cycles_compute", "cycles_output", "wall_s"):
            setattr(out, f, getattr(self, f) - getattr(earlier, f))
        return out

    def as_dict(self) -> dict:
        d = asdict(self)
        d["cycles_total"] = self.cycles_total
        d["utilization"] = self.utilization
        return d


# -- sparse devices ------------------------------------------------------------------------------

def _as_numpy(x, what: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class SparseDevice(ABC):
    """A sparse accelerator (or a stand-in for one) computing S-SpMM.

    Subclasses implement :meth:`_compute`; :meth:`sspmm` validates the operands, converts between
    torch and numpy, and updates :attr:`counters`.

    Parameters
    ----------
    config : SSpmmConfig, optional
        The accelerator configuration (buffer sizes, lanes, clock); default preset ``default``.
    """

    #: registry name of the backend
    name: str = "?"
    #: whether :attr:`counters` holds accelerator cycles
    counts_cycles: bool = False

    def __init__(self, config: SSpmmConfig | None = None):
        self.config = config if config is not None else preset("default")
        self.counters = DeviceCounters(lanes=self.config.lanes)

    def sspmm(self, csr: CSRGraph, H, M=None):
        """``Z = (A H) ⊙ M``: ``csr`` is A (N x K), ``H`` K x F float32, ``M`` N x F bool or None.

        ``H`` may be a torch tensor (Z comes back as a float32 tensor on H's device) or a numpy
        array (Z is a numpy array). Masked elements of Z are +0.
        """
        as_torch = isinstance(H, torch.Tensor)
        Hn = _as_numpy(H, "H")
        if Hn.ndim != 2 or Hn.shape[0] != csr.n_cols:
            raise UserError(f"S-SpMM: features have shape {Hn.shape}; the adjacency is "
                            f"{csr.n_rows} x {csr.n_cols}, so H needs {csr.n_cols} rows")
        Hn = np.ascontiguousarray(Hn, dtype=np.float32)
        shape = (csr.n_rows, Hn.shape[1])
        if M is None:
            Mn = np.ones(shape, dtype=bool)
        else:
            Mn = _as_numpy(M, "M").astype(bool, copy=False)
            if Mn.shape != shape:
                raise UserError(f"S-SpMM: mask has shape {Mn.shape}; expected {shape} "
                                "(one bit per output element)")
        t0 = time.perf_counter()
        Z, counts = self._compute(csr, Hn, Mn)
        counts.wall_s = time.perf_counter() - t0
        counts.calls = 1
        counts.elements = Mn.size
        counts.unmasked = int(Mn.sum())
        counts.work_adds = golden.work_adds(csr.indptr, Mn)
        counts.spmm_adds = csr.nnz * Mn.shape[1]
        self.counters.add(counts)
        if as_torch:
            return torch.from_numpy(np.ascontiguousarray(Z, dtype=np.float32)).to(H.device)
        return Z

    @abstractmethod
    def _compute(self, csr: CSRGraph, H: np.ndarray, M: np.ndarray
                 ) -> tuple[np.ndarray, DeviceCounters]:
        """Return Z (float32) and the cycle counters of this call."""

    def reset(self) -> None:
        """Zero the counters."""
        self.counters = DeviceCounters(lanes=self.config.lanes)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class CpuDevice(SparseDevice):
    """S-SpMM on torch: ``torch.sparse_csr`` matmul, then the mask (no cycle count)."""

    name = "cpu"

    def _compute(self, csr, H, M):
        key = "torch_csr"
        if key not in csr._cache:
            with warnings.catch_warnings():  # "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                csr._cache[key] = torch.sparse_csr_tensor(
                    torch.from_numpy(csr.indptr.copy()), torch.from_numpy(csr.indices.copy()),
                    torch.ones(csr.nnz, dtype=torch.float32), size=csr.shape,
                    check_invariants=False)  # CSRGraph already validated the structure
        if H.shape[1] == 0 or csr.n_rows == 0:
            Z = np.zeros((csr.n_rows, H.shape[1]), dtype=np.float32)
        else:
            Z = (csr._cache[key] @ torch.from_numpy(H)).numpy()
        return np.where(M, Z, np.float32(0.0)), DeviceCounters(lanes=self.config.lanes)


class TiledDevice(SparseDevice):
    """A device that runs one job per :func:`plan_tiles` tile and stitches Z back together.

    Subclasses implement :meth:`run_job` (one square job that fits the buffers). This is the
    base an RTL backend plugs into.
    """

    counts_cycles = True

    @abstractmethod
    def run_job(self, indptr, indices, H, M) -> tuple[np.ndarray, DeviceCounters]:
        """Run one job that fits the buffers; return Z (size x F) and its cycles."""

    def _compute(self, csr, H, M):
        Z = np.zeros(M.shape, dtype=np.float32)
        total = DeviceCounters(lanes=self.config.lanes)
        for tile in plan_tiles(csr, H.shape[1], self.config):
            Zt, counts = self.run_job(*tile.job(H, M))
            Z[tile.rows_start:tile.rows_stop, tile.feat_start:tile.feat_stop] = \
                Zt[:tile.rows_stop - tile.rows_start]
            counts.tiles = 1
            total.add(counts)
        return Z, total


def _cycles(est) -> DeviceCounters:
    return DeviceCounters(cycles_load=est.cycles_load, cycles_compute=est.cycles_compute,
                          cycles_output=est.cycles_output, lanes=est.lanes)


class ModelDevice(TiledDevice):
    """Golden model for Z (bit-exact with the RTL) and the cycle model for cycles, per tile.

    Z is computed on the whole job at once (equal to the tiled result, since tiling keeps every
    element's summation order); cycles are the sum of :func:`estimate` over the tiles.
    """

    name = "model"

    def run_job(self, indptr, indices, H, M):
        return (golden.sspmm(indptr, indices, H, M),
                _cycles(estimate(indptr, M, H.shape[1], self.config)))

    def _compute(self, csr, H, M):
        Z = golden.sspmm(csr.indptr, csr.indices, H, M)
        total = DeviceCounters(lanes=self.config.lanes)
        for tile in plan_tiles(csr, H.shape[1], self.config):
            counts = _cycles(estimate(tile.indptr, tile.mask(M),
                                      tile.feat_stop - tile.feat_start, self.config))
            counts.tiles = 1
            total.add(counts)
        return Z, total


# -- registry ------------------------------------------------------------------------------------

@dataclass
class _Backend:
    factory: Callable[..., SparseDevice] | str
    description: str = ""
    extra: dict = field(default_factory=dict)


_REGISTRY: dict[str, _Backend] = {}


def register_backend(name: str, factory: Callable[..., SparseDevice] | str, *,
                     description: str = "", replace: bool = False) -> None:
    """Make a sparse backend available to :func:`make_device` (and ``--backend NAME``).

    ``factory`` is a callable ``factory(config=None, **options) -> SparseDevice`` or a string
    ``"module:attribute"`` naming one; a string is imported on first use, so registering costs
    nothing and a missing module becomes a clear error only when the backend is asked for.
    """
    if name in _REGISTRY and not replace:
        raise ValueError(f"sparse backend {name!r} is already registered (pass replace=True)")
    _REGISTRY[name] = _Backend(factory, description)


def backend_names() -> list[str]:
    """Registered backend names."""
    return list(_REGISTRY)


def backend_available(name: str) -> bool:
    """True if ``make_device(name)`` would find a factory (imports a lazy one to check)."""
    try:
        _resolve(name)
    except UserError:
        return False
    return True


def _resolve(name: str) -> Callable[..., SparseDevice]:
    if name not in _REGISTRY:
        raise UserError(f"unknown sparse backend {name!r}; available: {', '.join(_REGISTRY)}")
    entry = _REGISTRY[name]
    if isinstance(entry.factory, str):
        module, _, attr = entry.factory.partition(":")
        try:
            entry.factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise UserError(f"sparse backend {name!r} cannot be loaded from {module}:{attr} "
                            f"({exc}); choose another --backend") from None
    return entry.factory


def make_device(name: str, config: SSpmmConfig | None = None, **options) -> SparseDevice:
    """A new sparse device of backend ``name`` (``cpu``, ``model``, or a registered one)."""
    return _resolve(name)(config=config, **options)


#: where the RTL backend lives: a TiledDevice subclass whose run_job drives the simulated
#: accelerator (see docs/runtime.md); imported only when ``rtl`` is asked for
RTL_FACTORY = "moagcn.sim.sspmm_device:RtlDevice"

register_backend("cpu", CpuDevice, description="torch sparse CSR matmul, then the mask")
register_backend("model", ModelDevice,
                 description="bit-exact golden model + analytic cycle model of the S-SpMM")
register_backend("rtl", RTL_FACTORY, description="the S-SpMM RTL on a simulator (Verilator)")


# -- dense workers -------------------------------------------------------------------------------

def dense_device(prefer: str = "auto") -> torch.device:
    """The torch device of the dense workers: CUDA when available (``auto``), else CPU."""
    if prefer == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if prefer == "cuda" and not torch.cuda.is_available():
        raise UserError("dense device 'cuda' requested but torch sees no CUDA GPU; use 'cpu'")
    if prefer not in ("cpu", "cuda"):
        raise UserError(f"dense device {prefer!r} is not one of auto, cpu, cuda")
    return torch.device(prefer)
