"""The sparse device of the host runtime for any accelerator spec: :class:`AcceleratorDevice`.

``AcceleratorDevice(spec, config, device="model"|"rtl", simulator=...)`` computes aggregations
``Z = (A H) ⊙ M`` through :meth:`AcceleratorSpec.aggregation_job` and the one
:class:`~moagcn.sim.driver.Driver` (which tiles every job once), and accumulates the driver's
:class:`~moagcn.core.counters.Counters`. ``model`` gives the bit-exact golden model's output with
the cycle model's cycles; ``rtl`` runs the design's RTL (Verilator's lean harness by default).
Designs with a dense datapath (HyScale's systolic update: ``spec.dense_job``) also compute
dense products ``X W + b`` (:meth:`AcceleratorDevice.linear`).
"""

from __future__ import annotations

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.device import SparseDevice
from moagcn.core.spec import AcceleratorSpec
from moagcn.errors import UserError

from moagcn.sim.driver import Driver


class AcceleratorDevice(SparseDevice):
    """Aggregation on an accelerator spec, as its model or its simulated RTL."""

    def __init__(self, spec: AcceleratorSpec, config=None, device: str = "model",
                 simulator: str = "verilator"):
        self.spec = spec
        self.config = config if config is not None else spec.config()
        self.kind = device
        self.driver = Driver(spec, self.config, device, simulator)
        self.lanes = spec.lanes(self.config)
        self.clock_mhz = spec.clock_mhz(self.config)
        # the per-entry operations this configuration runs (a weighted S-SpMM's
        # ``spmm_weighted``), and the parameter that would give it the others
        self.entry_ops = spec.entry_ops(self.config)
        self.entry_op_params = dict(spec.entry_op_params)
        super().__init__()

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.spec.name}"

    def _compute(self, csr, H, M):
        if csr.n_rows == 0 or H.shape[1] == 0:       # nothing to aggregate: no job runs
            return np.zeros(M.shape, dtype=np.float32), Counters()
        # CSRGraph validated the structure and SparseDevice.sspmm the operands: the job is
        # built checked, not validated again on every call
        job = self.spec.aggregation_job(csr.indptr, csr.indices, H, M, self.config)
        res = self.driver.run(job, checked=True)
        Z = self.spec.aggregation_output(res.output, job, M)
        return Z, res.counters

    def _spmm_weighted(self, csr, values, X, mask=None):
        """One weighted job per head, ``Z[:, h] = (A_w[h] X[:, h]) ⊙ M[:, h]`` (``mask``
        None: every element computed), through the driver like an aggregation; the jobs'
        cycles and bytes go to :attr:`counters` (their work is counted by
        :meth:`spmm_weighted`)."""
        import torch  # lazy: the device's callers pass torch tensors; this module needs none

        vals = np.ascontiguousarray(values.cpu().numpy(), dtype=np.float32)
        Xn = np.ascontiguousarray(X.cpu().numpy(), dtype=np.float32)
        heads, width = Xn.shape[1], Xn.shape[2]
        Z = np.zeros((csr.n_rows, heads, width), dtype=np.float32)
        Mn = None if mask is None else mask.cpu().numpy()
        if csr.n_rows and width and csr.nnz:
            ones = np.ones((csr.n_rows, width), dtype=bool)
            for h in range(heads):
                M = ones if Mn is None else np.ascontiguousarray(Mn[:, h, :])
                job = self.spec.weighted_job(csr.indptr, csr.indices, vals[:, h],
                                             np.ascontiguousarray(Xn[:, h, :]), M, self.config)
                res = self.driver.run(job, checked=True)
                Z[:, h, :] = res.output
                self._add_job_cycles(res.counters)     # the work: counted by spmm_weighted
        return torch.from_numpy(Z).to(X.device)

    def _add_job_cycles(self, counts) -> None:
        """Add a job's cycles and bytes to :attr:`counters`; its work, calls, elements and wall
        time are left out (the :class:`SparseDevice` method that called the job counts them
        once for the whole call)."""
        counts.calls = counts.work_adds = counts.spmm_adds = 0
        counts.elements = counts.unmasked = 0
        counts.wall_s = 0.0
        self.counters.add(counts)

    def _sddmm(self, csr, Q, K, mask=None):
        """The SDDMM as the spec's jobs (:meth:`AcceleratorSpec.sddmm_jobs`: groups of heads
        that fit one job), through the driver; masked pairs are +0 and not computed. The
        jobs' cycles and bytes go to :attr:`counters` (their work is counted by
        :meth:`sddmm`)."""
        import torch  # lazy: the device's callers pass torch tensors; this module needs none

        heads = Q.shape[1]
        S = np.zeros((csr.nnz, heads), dtype=np.float32)
        if csr.nnz and heads and Q.shape[2]:
            Qn = np.ascontiguousarray(Q.cpu().numpy(), dtype=np.float32)
            Kn = np.ascontiguousarray(K.cpu().numpy(), dtype=np.float32)
            Mn = None if mask is None else mask.cpu().numpy()
            for h0, h1, job in self.spec.sddmm_jobs(csr.indptr, csr.indices, Qn, Kn, Mn,
                                                    self.config):
                res = self.driver.run(job, checked=True)
                S[:, h0:h1] = res.output
                self._add_job_cycles(res.counters)     # the work: counted by sddmm
        return torch.from_numpy(S).to(Q.device)

    @property
    def has_dense(self) -> bool:
        """Whether the design computes dense products (:meth:`linear`)."""
        return "dense" in self.spec.capabilities

    def linear(self, X, W, b=None) -> np.ndarray:
        """``Y = X W + b`` (float32) on the design's dense datapath, as jobs of at most
        ``max_feature_width`` inner and output columns: the output columns are cut into
        independent jobs; the inner dimension into chunks whose partial products are summed
        here in ascending order (float32, the bias in the first chunk's job), a fixed order
        the bit-exact model and the RTL share. Rows beyond the buffers are the driver's tiles.
        The jobs' counters are added to :attr:`counters` (``extra["dense_macs"]`` counts the
        multiply-adds)."""
        if not self.has_dense:
            raise UserError(f"the {self.spec.name} design has no dense datapath: dense products "
                            "run on the host")
        X = np.ascontiguousarray(X, dtype=np.float32)
        W = np.ascontiguousarray(W, dtype=np.float32)
        if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[0]:
            raise UserError(f"linear: X {X.shape} and W {W.shape} do not multiply")
        n, k = X.shape
        f = W.shape[1]
        Y = np.zeros((n, f), dtype=np.float32)
        if b is not None:
            b = np.asarray(b, dtype=np.float32)
        if n == 0 or f == 0 or k == 0:       # no product: the bias alone
            return Y + (0 if b is None else b)
        step = self.config.max_feature_width
        chunks, jobs = [], []
        for c0 in range(0, f, step):
            c1 = min(f, c0 + step)
            for k0 in range(0, k, step):     # partial products, summed in ascending order
                k1 = min(k, k0 + step)
                bias = b[c0:c1].copy() if b is not None and k0 == 0 else None
                chunks.append((c0, c1, k0, k1))
                jobs.append(self.spec.dense_job(np.ascontiguousarray(X[:, k0:k1]),
                                                np.ascontiguousarray(W[k0:k1, c0:c1]), bias))
        # the jobs go to the accelerator as one queue: on ping-pong load buffers each one's
        # loads overlap the one before
        for (c0, c1, k0, k1), res in zip(chunks, self.driver.run_many(jobs)):
            counts = res.counters
            counts.extra["dense_macs"] = n * (k1 - k0) * (c1 - c0)
            counts.lanes, counts.clock_mhz = self.lanes, self.clock_mhz
            self.counters.add(counts)
            Y[:, c0:c1] = res.output if k0 == 0 else Y[:, c0:c1] + res.output
        return Y
