"""The interface every full-graph parallel runtime implements: :class:`Runtime`.

A runtime holds ``m`` sparse devices (a Mixture of Accelerators, :mod:`moagcn.host.devices.moa`)
and ``m`` dense workers and runs a GNN's forward pass across them through a
:class:`~moagcn.host.parallel.comm.Communicator`; autograd runs the backward pass back through
the same exchanges. The runtimes themselves belong to the systems that define them: MixGCN's
Mixture of Parallelism (:class:`moagcn.host.mixgcn.mop.MoPRuntime`, Alg. 2) and partition
parallelism with SuperGCN's exchange plans (:class:`moagcn.host.supergcn.partition.PartitionRuntime`,
MixGCN's Alg. 1 baseline). :mod:`moagcn.host.training.runtimes` picks one by name.

In a single process the weights are shared by the workers (autograd sums their gradients); across
processes they are replicas whose gradients are all-reduced.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch

from moagcn.core.counters import Counters
from moagcn.errors import UserError
from moagcn.host.devices.moa import MixtureOfAccelerators
from moagcn.host.devices.pair import attention_device
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.nn.autograd import PhaseTimer, aggregate
from moagcn.host.nn.models import GNN
from moagcn.host.parallel.comm import CommCounters, Communicator, LocalComm

#: where dropout acts: on the aggregation output (MixGCN Eq. 4) or on the layer input (PyG)
DROPOUT_PLACES = ("aggregate", "input")


class Runtime(ABC):
    """One parallel training runtime: ``m`` sparse devices and ``m`` dense workers.

    Parameters
    ----------
    model : GNN
    graph : CSRGraph
    features : numpy.ndarray
        N x F float32 input features (already row-normalised if wanted).
    workers : int
        m, the number of sparse devices and of dense workers.
    accelerators : AcceleratorChoice, a list of them, or a device kind (``model``)
        What aggregates on every worker (``--device``, ``--design``, ``--preset``, ``--param``,
        ``--simulator``); one per worker for a mixed fleet.
    comm : Communicator, optional
        Default: :class:`LocalComm` (all workers in this process).
    dense : torch.device
        Where the dense workers compute (CPU or CUDA).
    """

    name = "?"

    def __init__(self, model: GNN, graph: CSRGraph, features: np.ndarray, workers: int = 1,
                 accelerators: AcceleratorChoice | list | None = None,
                 comm: Communicator | None = None, dense: torch.device | None = None,
                 timer: PhaseTimer | None = None, dropout_at: str = "aggregate",
                 layer_norm: bool = False, shares=None):
        if shares is not None and len(shares) != workers:
            raise UserError(f"{len(shares)} work shares for {workers} workers")
        #: each worker's fraction of the work (None: equal; vGNN's non-uniform split)
        self.shares = None if shares is None else np.asarray(shares, dtype=np.float64)
        if layer_norm and self.name != "partition":
            raise UserError("--layer-norm needs --parallelism partition: it normalises whole "
                            "rows before they are sent, and MoP's sparse devices hold column "
                            "slices")
        self.layer_norm = bool(layer_norm)
        self._dynamic_input = False
        if dropout_at not in DROPOUT_PLACES:
            raise UserError(f"dropout_at = {dropout_at!r}: choose one of "
                            f"{', '.join(DROPOUT_PLACES)}")
        self.dropout_at = dropout_at
        if workers < 1:
            raise UserError(f"workers = {workers}; use at least 1")
        n = graph.n_nodes
        if workers > n:
            raise UserError(f"workers = {workers} exceeds the {n} nodes of the graph")
        X = np.asarray(features, dtype=np.float32)
        if X.shape != (n, model.dims[0]):
            raise UserError(f"features have shape {X.shape}; the model expects ({n}, "
                            f"{model.dims[0]})")
        self.model = model
        self.graph = graph
        self.features = X
        self.m = workers
        self.n = n
        self.timer = timer
        self.comm = comm if comm is not None else LocalComm(workers, timer)
        if self.comm.world != workers:
            raise UserError(f"the communicator has {self.comm.world} workers, not {workers}")
        self.comm.timer = timer
        self.local = self.comm.local
        self.dense = dense if dense is not None else torch.device("cpu")
        self.op = model.aggregation(graph)
        choices = accelerators
        if isinstance(accelerators, list) and len(accelerators) == workers:
            choices = [accelerators[i] for i in self.local]   # this process's workers
        self.moa = MixtureOfAccelerators(self.local, choices, self.dense)
        self.devices = self.moa.sparse
        self.dense_macs = {i: 0 for i in self.local}
        self.widths = model.dims[:-1]  # aggregation width of every layer
        #: evaluation's first-layer products of the fixed input, by (worker, operator)
        self._first_layer_eval: dict[tuple, torch.Tensor] = {}
        if model.kind == "gat":     # attention: each accelerator paired with the SDDMM
            for i in self.local:
                dev = self.devices[i]
                if dev.kind != "cpu" and "sddmm" not in dev.entry_ops:
                    self.moa.sparse[i] = attention_device(self.moa.choices[i], aggregate=dev)

    # the node rows each dense worker holds, and the forward pass

    @abstractmethod
    def rows(self, j: int) -> np.ndarray:
        """Global ids of the nodes dense worker ``j`` updates (its logits' rows)."""

    @abstractmethod
    def forward(self, mask_fn=None, out_scale: float = 1.0, count_ops: bool = True,
                inputs=None) -> dict[int, torch.Tensor]:
        """Logits of every local dense worker's rows.

        ``mask_fn(layer, (N, d))`` returns the global dropout keep-mask of a layer (or ``None``
        for no dropout); ``out_scale`` is the inverted-dropout factor. ``inputs(rows)``, when
        given, returns a tensor added to the input features of those global rows (masked
        label propagation's label embeddings; differentiable).
        """

    @abstractmethod
    def comm_bytes_analytic(self, backward: bool = True) -> int:
        """Bytes one forward (and backward) pass moves between workers, from the sizes alone."""

    @abstractmethod
    def feature_bytes(self) -> list[int]:
        """Feature and activation bytes each worker holds during one forward pass."""

    # counters

    def device_counters(self) -> dict[int, Counters]:
        """The sparse devices' counters (local workers)."""
        return self.moa.counters()

    def worker_ops(self) -> dict[int, dict]:
        """Per local worker, both passes: ``sparse_adds`` (S-SpMM additions performed under the
        masks), ``spmm_adds`` (additions assigned: nnz(A) times the slice width) and
        ``dense_macs`` (multiply-accumulates of the node updates)."""
        return {i: {"sparse_adds": self.devices[i].counters.work_adds,
                    "spmm_adds": self.devices[i].counters.spmm_adds,
                    "dense_macs": self.dense_macs[i]} for i in self.local}

    def reset_counters(self) -> None:
        self.moa.reset()
        self.dense_macs = {i: 0 for i in self.local}
        self.comm.counters = CommCounters()

    def _aggregate(self, op, H, i, mask, out_scale, layer, in_mask=None, device=None):
        """``op`` on the sparse device of worker ``i`` (or on ``device``); ``mask`` /
        ``in_mask``: the layer's dropout mask on the output rows / on the input rows, one of
        which is used (``dropout_at``)."""
        if H.shape[1] == 0:  # a worker with no feature columns (d < m) has nothing to do
            return H.new_zeros((op.adj.n_rows, 0)).requires_grad_(H.requires_grad)
        args = self._aggregation_args(mask, in_mask, out_scale, layer)
        # evaluation repeats the first layer's unmasked product of the fixed input features:
        # compute it once per run
        cacheable = (layer == 0 and args["mask"] is None and args["in_mask"] is None
                     and not torch.is_grad_enabled() and not self._dynamic_input)
        if cacheable and (i, op) in self._first_layer_eval:
            return self._first_layer_eval[(i, op)]
        Z = aggregate(op, H, device if device is not None else self.devices[i],
                      timer=self.timer, **args)
        if cacheable:
            self._first_layer_eval[(i, op)] = Z
        return Z

    def _aggregation_args(self, mask, in_mask, out_scale, layer) -> dict:
        """The masks, scales and input ReLU of layer ``layer``'s aggregation: ``mask`` /
        ``in_mask`` are its dropout mask on the output rows / on the input rows, of which
        ``dropout_at`` keeps one."""
        if self.dropout_at == "input":
            mask = None
        else:
            in_mask = None
        return {"mask": mask, "out_scale": out_scale if mask is not None else 1.0,
                "relu_input": layer > 0 and not self.layer_norm, "in_mask": in_mask,
                "in_scale": out_scale if in_mask is not None else 1.0}
