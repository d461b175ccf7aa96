"""The interface the host runtime computes aggregations through: :class:`SparseDevice`.

A sparse device computes ``Z = (A H) ⊙ M`` (A a binary :class:`~moagcn.core.graph.CSRGraph`,
H float32 features, M an output mask) and keeps :class:`~moagcn.core.counters.Counters`. The
host cannot tell devices apart except by speed and by whether cycles are counted:

- ``cpu``: :class:`CpuDevice`, torch sparse CSR matmul, then the mask. No cycles.
- ``model`` / ``rtl``: :class:`moagcn.sim.device.AcceleratorDevice`, any registered accelerator
  spec on its bit-exact golden and cycle models, or on its RTL in a simulator.
"""

from __future__ import annotations

import time
import warnings
from abc import ABC, abstractmethod

import numpy as np
import torch

from moagcn.errors import UserError

from moagcn.core.counters import Counters, work_adds
from moagcn.core.graph import CSRGraph
from moagcn.core.names import DEVICE_KINDS  # noqa: F401 (re-exported)


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(
        torch.bfloat16).to(torch.float32).numpy()


def _as_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class SparseDevice(ABC):
    """Something that computes S-SpMM for the host runtime.

    Subclasses implement :meth:`_compute`; :meth:`sspmm` validates the operands once, converts
    between torch and numpy, and accumulates :attr:`counters` (the aggregation's work is counted
    here, the same way for every device).
    """

    #: ``cpu``, ``model`` or ``rtl``
    kind: str = "?"
    #: whether :meth:`_compute` takes ``M = None`` for "no mask" (else it gets all ones)
    takes_no_mask: bool = False
    #: the device's peak operations per cycle (0: not an accelerator)
    lanes: int = 0
    clock_mhz: float = 0.0

    def __init__(self):
        self.counters = self._fresh()

    @property
    def name(self) -> str:
        """Short label for reports (``model:sspmm``, ``cpu``)."""
        return self.kind

    def _fresh(self) -> Counters:
        return Counters(lanes=self.lanes, clock_mhz=self.clock_mhz)

    def sspmm(self, csr: CSRGraph, H, M=None):
        """``Z = (A H) ⊙ M``: ``csr`` is A (N x K), ``H`` K x F float32, ``M`` N x F bool or None.

        ``H`` may be a torch tensor (Z comes back as a float32 tensor on H's device) or a numpy
        array (Z is a numpy array). Masked elements of Z are +0.
        """
        as_torch = isinstance(H, torch.Tensor)
        Hn = _as_numpy(H)
        if Hn.ndim != 2 or Hn.shape[0] != csr.n_cols:
            raise UserError(f"S-SpMM: features have shape {Hn.shape}; the adjacency is "
                            f"{csr.n_rows} x {csr.n_cols}, so H needs {csr.n_cols} rows")
        Hn = np.ascontiguousarray(Hn, dtype=np.float32)
        shape = (csr.n_rows, Hn.shape[1])
        if M is None:
            Mn = None if self.takes_no_mask else np.ones(shape, dtype=bool)
        else:
            Mn = _as_numpy(M).astype(bool, copy=False)
            if Mn.shape != shape:
                raise UserError(f"S-SpMM: mask has shape {Mn.shape}; expected {shape} "
                                "(one bit per output element)")
        t0 = time.perf_counter()
        Z, counts = self._compute(csr, Hn, Mn)
        counts.wall_s = time.perf_counter() - t0
        counts.calls = 1
        counts.elements = shape[0] * shape[1]
        if Mn is None:   # every output computed: W = nnz · F
            counts.unmasked = counts.elements
            counts.work_adds = csr.nnz * shape[1]
        else:
            counts.unmasked = int(Mn.sum())
            counts.work_adds = work_adds(csr.indptr, Mn)
        counts.spmm_adds = csr.nnz * shape[1]
        counts.lanes, counts.clock_mhz = self.lanes, self.clock_mhz
        self.counters.add(counts)
        if as_torch:
            return torch.from_numpy(np.ascontiguousarray(Z, dtype=np.float32)).to(H.device)
        return Z

    @abstractmethod
    def _compute(self, csr: CSRGraph, H: np.ndarray, M: np.ndarray
                 ) -> tuple[np.ndarray, Counters]:
        """Return Z (float32) and the counters of this call (cycles, tiles, bytes)."""

    # -- per-entry operations: weighted aggregation and SDDMM ------------------------------------
    #
    # A weighted graph (GCN with edge weights) and attention (GAT) need two more products, one
    # value per stored entry and head: ``Z[v, h] = sum_k values[k, h] X[col_k, h]`` (a weighted
    # SpMM) and ``S[k, h] = <Q[row_k, h], K[col_k, h]>`` (an SDDMM). A device that runs them
    # names them in ``entry_ops``; the others refuse in one line (the binary S-SpMM has no
    # multipliers), never falling back silently.

    #: the per-entry operations this device runs: ``"weighted"`` (:meth:`spmm_weighted`),
    #: ``"sddmm"`` (:meth:`sddmm`)
    entry_ops: frozenset = frozenset()

    #: per-entry operation -> the ``--param`` that configures this device's design for it
    #: (an accelerator device's; the refusal names it)
    entry_op_params: dict = {}

    def cannot(self, op: str, what: str) -> UserError:
        """The one-line refusal of ``op`` (``weighted`` or ``sddmm``) on this device; ``what``
        says what asked for it (``edge weights``, ``GAT attention``)."""
        product = {"weighted": "a weighted aggregation (one value per edge)",
                   "sddmm": "per-edge attention scores (an SDDMM)"}[op]
        param = self.entry_op_params.get(op)
        fix = (f"configure it with --param {param} (a weighted S-SpMM), or use the cpu device"
               if param else "use the cpu device")
        return UserError(f"device {self.name}: {what} need {product}, which this device "
                         "cannot run (its S-SpMM multiplies by a binary adjacency); "
                         f"{fix} (--device cpu, or device='cpu')")

    def spmm_weighted(self, csr: CSRGraph, values: torch.Tensor, X: torch.Tensor,
                      what: str = "edge weights", mask: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """``Z[v, h, :] = sum over row v's entries k of values[k, h] X[col_k, h, :]``.

        ``values`` is ``nnz x heads`` (one value per stored entry in CSR order and head),
        ``X`` is ``n_cols x heads x C``; returns ``n_rows x heads x C`` (float32, torch, no
        autograd: callers wrap it). ``mask`` (bool, ``n_rows x heads x C``; None: every
        output) is the output mask of ``Z = (A_w X) ⊙ M``: a masked output is +0, and an
        accelerator skips its work as the S-SpMM does (the counters' ``work_adds``)."""
        if "weighted" not in self.entry_ops:
            raise self.cannot("weighted", what)
        if values.dim() != 2 or values.shape[0] != csr.nnz:
            raise UserError(f"weighted SpMM: values have shape {tuple(values.shape)}; expected "
                            f"({csr.nnz}, heads), one per stored entry")
        if X.dim() != 3 or X.shape[0] != csr.n_cols or X.shape[1] != values.shape[1]:
            raise UserError(f"weighted SpMM: features have shape {tuple(X.shape)}; expected "
                            f"({csr.n_cols}, {values.shape[1]}, C)")
        shape = (csr.n_rows,) + tuple(X.shape[1:])
        if mask is not None:
            mask = torch.as_tensor(mask, dtype=torch.bool)
            if tuple(mask.shape) != shape:
                raise UserError(f"weighted SpMM: mask has shape {tuple(mask.shape)}; expected "
                                f"{shape}, one bit per output element")
        t0 = time.perf_counter()
        Z = self._spmm_weighted(csr, values.detach(), X.detach(), mask)
        adds = csr.nnz * X.shape[1] * X.shape[2]
        if mask is None:
            self._count(adds, Z.numel(), t0)
        else:
            Mn = mask.detach().cpu().numpy()
            self._count(sum(work_adds(csr.indptr, Mn[:, h, :]) for h in range(shape[1])),
                        Z.numel(), t0, spmm_adds=adds, unmasked=int(Mn.sum()))
        return Z

    def sddmm(self, csr: CSRGraph, Q: torch.Tensor, K: torch.Tensor,
              what: str = "GAT attention", mask: torch.Tensor | None = None) -> torch.Tensor:
        """``S[k, h] = <Q[row_k, h, :], K[col_k, h, :]>`` for every stored entry ``k``.

        ``Q`` is ``n_rows x heads x D``, ``K`` is ``n_cols x heads x D``; returns
        ``nnz x heads`` (float32, torch, no autograd). ``mask`` (bool, ``nnz x heads``; None:
        every pair): a masked (entry, head) pair is +0 and not computed (an accelerator skips
        it; ``work_adds`` counts the computed pairs' ``D`` multiply-adds)."""
        if "sddmm" not in self.entry_ops:
            raise self.cannot("sddmm", what)
        if Q.dim() != 3 or K.dim() != 3 or Q.shape[0] != csr.n_rows \
                or K.shape[0] != csr.n_cols or Q.shape[1:] != K.shape[1:]:
            raise UserError(f"SDDMM: operands of shape {tuple(Q.shape)} and "
                            f"{tuple(K.shape)}; expected ({csr.n_rows}, heads, D) and "
                            f"({csr.n_cols}, heads, D)")
        shape = (csr.nnz, Q.shape[1])
        if mask is not None:
            mask = torch.as_tensor(mask, dtype=torch.bool)
            if tuple(mask.shape) != shape:
                raise UserError(f"SDDMM: mask has shape {tuple(mask.shape)}; expected {shape}, "
                                "one bit per (entry, head)")
        t0 = time.perf_counter()
        S = self._sddmm(csr, Q.detach(), K.detach(), mask)
        pairs = S.numel() if mask is None else int(mask.sum())
        self._count(pairs * Q.shape[2], S.numel(), t0, spmm_adds=S.numel() * Q.shape[2],
                    unmasked=pairs)
        return S

    def _count(self, adds: int, elements: int, t0: float, spmm_adds: int | None = None,
               unmasked: int | None = None) -> None:
        counts = Counters(calls=1, work_adds=adds,
                          spmm_adds=adds if spmm_adds is None else spmm_adds,
                          elements=elements,
                          unmasked=elements if unmasked is None else unmasked,
                          lanes=self.lanes, clock_mhz=self.clock_mhz)
        counts.wall_s = time.perf_counter() - t0
        self.counters.add(counts)

    def _spmm_weighted(self, csr, values, X, mask=None):
        raise self.cannot("weighted", "edge weights")

    def _sddmm(self, csr, Q, K, mask=None):
        raise self.cannot("sddmm", "GAT attention")

    def reset(self) -> None:
        """Zero the counters."""
        self.counters = self._fresh()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class CpuDevice(SparseDevice):
    """S-SpMM on torch: ``torch.sparse_csr`` matmul, then the mask (no cycle count).

    ``fmt="bf16"``: features and results are stored and moved as bfloat16 (rounded to
    nearest even on the way in and out), the sums accumulated in fp32 -- torch on the CPU has
    no bfloat16 sparse product, so this is the storage format's numerics, not a faster kernel.
    """

    kind = "cpu"
    takes_no_mask = True
    entry_ops = frozenset({"weighted", "sddmm"})

    def __init__(self, fmt: str = "fp32"):
        if fmt not in ("fp32", "bf16"):
            raise UserError(f"cpu device format {fmt!r}: use fp32 or bf16")
        self.fmt = fmt
        super().__init__()

    @property
    def name(self) -> str:
        return "cpu" if self.fmt == "fp32" else "cpu:bf16"

    def _compute(self, csr, H, M):
        if self.fmt == "bf16":
            H = _bf16(H)
            Z, counts = self._compute_fp32(csr, H, M)
            return _bf16(Z), counts
        return self._compute_fp32(csr, H, M)

    def _compute_fp32(self, csr, H, M):
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
        return (Z if M is None else np.where(M, Z, np.float32(0.0))), Counters()

    def _rows_cols(self, csr):
        if "coo_t" not in csr._cache:
            csr._cache["coo_t"] = (torch.from_numpy(csr.row_ids().copy()),
                                   torch.from_numpy(csr.indices.copy()))
        return csr._cache["coo_t"]

    def _spmm_weighted(self, csr, values, X, mask=None):
        rows, cols = self._rows_cols(csr)
        if self.fmt == "bf16":
            X = X.to(torch.bfloat16).to(torch.float32)
        Z = X.new_zeros((csr.n_rows,) + tuple(X.shape[1:]))
        Z.index_add_(0, rows.to(X.device), values.unsqueeze(-1) * X[cols.to(X.device)])
        if mask is not None:
            Z = torch.where(mask.to(Z.device), Z, torch.zeros((), dtype=Z.dtype))
        return Z.to(torch.bfloat16).to(torch.float32) if self.fmt == "bf16" else Z

    def _sddmm(self, csr, Q, K, mask=None):
        rows, cols = self._rows_cols(csr)
        S = (Q[rows.to(Q.device)] * K[cols.to(K.device)]).sum(-1)
        if mask is not None:
            S = torch.where(mask.to(S.device), S, torch.zeros((), dtype=S.dtype))
        return S
