"""Mixture of Parallelism (MixGCN Alg. 2) and the partition-parallel baseline (Alg. 1).

Both runtimes are written once against a :class:`Communicator`, whose ``all_to_all`` is
differentiable (the backward pass sends gradients back the way the features came):

- :class:`LocalComm` runs all ``m`` workers in this process (blocks change hands, bytes counted);
- ``moagcn.host.parallel.launch.DistComm`` runs one worker per torch.distributed process.

**MoP** (:class:`MoPRuntime`), per layer ``l`` with aggregation width ``d_l``: sparse device ``i``
aggregates feature columns ``[d_l i / m, d_l (i+1) / m)`` for all N nodes; an all-to-all
regroups by node; dense worker ``j`` updates nodes ``[N j / m, N (j+1) / m)`` with the full
weights; an all-to-all sends the new pre-activations back as feature slices. The input features
are split by columns once, before training. Work is balanced by construction (Prop. 3.3) and the
bytes of an all-to-all of width ``w`` are ``4 (N w - Σ_i n_i w_i)`` whatever the graph
(Prop. 3.4), so they approach ``4 N w`` as ``m`` grows.

**Partition parallelism** (:class:`PartitionRuntime`): worker ``j`` owns a node set ``P_j``
(``contiguous`` id ranges; ``rcm``: equal runs of the reverse Cuthill-McKee order, a
locality-aware partition; ``kway``: that split refined by greedy k-way boundary moves) and
aggregates and updates only those rows; before every layer after the first it receives the rows of its remote neighbours ``R_j`` (the halo; the input features of the
halo are loaded once), and the backward pass returns their gradients. Bytes per exchange of width
``w``: ``4 w Σ_j |R_j|``, which grows with ``m``; work follows the partition's edges.

In a single process the weights are shared by the workers (autograd sums their gradients); across
processes they are replicas whose gradients are all-reduced.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import numpy as np
import torch

from moagcn.core.counters import Counters
from moagcn.errors import UserError

from moagcn.host.nn.autograd import AggregationOp, PhaseTimer, aggregate
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph, contiguous_ranges
from moagcn.host.nn.models import GNN
from moagcn.host.vgnn.fleet import weighted_ranges, work_ranges
from moagcn.host.devices.moa import MixtureOfAccelerators

PARALLELISMS = ("mop", "partition")
PARTITION_METHODS = ("contiguous", "rcm", "kway", "metis")
#: where dropout acts: on the aggregation output (MixGCN Eq. 4) or on the layer input (PyG)
DROPOUT_PLACES = ("aggregate", "input")
#: how cut entries are aggregated (:mod:`moagcn.host.supergcn.prepost`) and message widths
AGGREGATIONS = ("post", "pre", "prepost")
COMM_BITS = (32, 16, 8, 4, 2)
FLOAT_BYTES = 4


# -- communication -------------------------------------------------------------------------------

@dataclass
class CommCounters:
    """Bytes that crossed worker boundaries (a worker's own block is not counted)."""

    bytes_forward: int = 0
    bytes_backward: int = 0
    exchanges: int = 0
    #: of the bytes above, the quantiser's per-row parameters (zero point and scale)
    param_bytes_forward: int = 0
    param_bytes_backward: int = 0

    @property
    def bytes_total(self) -> int:
        return self.bytes_forward + self.bytes_backward

    def as_dict(self) -> dict:
        d = asdict(self)
        d["bytes_total"] = self.bytes_total
        return d


class Communicator(ABC):
    """Collective operations between the ``world`` workers; this process runs ``local``."""

    def __init__(self, world: int, local: list[int], timer: PhaseTimer | None = None):
        self.world = world
        self.local = local
        self.counters = CommCounters()
        self.timer = timer
        self.bits = 32
        self.wire_seed = 0
        self._wire_calls = 0    # all-to-alls so far (never reset): seeds the rounding draws

    def set_wire(self, bits: int = 32, seed: int = 0) -> None:
        """Quantise every block that crosses a worker boundary to ``bits`` (32: fp32 as is;
        16: bf16; 8/4/2: per-row zero point and scale, stochastic rounding; see
        :mod:`moagcn.host.parallel.quant`), in both directions. ``seed`` fixes the rounding draws: the
        draw of block ``i -> j`` of the ``k``-th all-to-all depends on ``(seed, k, i, j)``
        only, so every process of a distributed run draws what the in-process run draws."""
        from moagcn.host.parallel.quant import BITS
        if bits not in BITS:
            raise UserError(f"--comm-bits {bits}: choose one of {', '.join(map(str, BITS))}")
        self.bits, self.wire_seed = int(bits), int(seed)

    def _generator(self, call: int, src: int, dst: int, backward: bool) -> torch.Generator:
        state = np.random.SeedSequence([self.wire_seed, call, src, dst, int(backward)])
        return torch.Generator().manual_seed(int(state.generate_state(1, np.uint64)[0] >> 1))

    def _wire(self, x: torch.Tensor, call: int, src: int, dst: int, backward: bool
              ) -> torch.Tensor:
        """``x`` as the receiver sees it after the wire (quantised and back), counted."""
        if self.bits == 32:
            data, params, y = x.numel() * x.element_size(), 0, x.view_as(x)
        else:
            from moagcn.host.parallel.quant import dequantize, quantize
            packet = quantize(x.detach().float().cpu(), self.bits,
                              self._generator(call, src, dst, backward))
            data, params = packet.data_bytes, packet.param_bytes
            y = dequantize(packet).to(x.device)
        self._count(data, params, backward)
        return y

    def _count(self, data: int, params: int, backward: bool) -> None:
        """Count bytes that crossed a worker boundary (``params``: the quantiser's part)."""
        c = self.counters
        if backward:
            c.bytes_backward += data + params
            c.param_bytes_backward += params
        else:
            c.bytes_forward += data + params
            c.param_bytes_forward += params

    @abstractmethod
    def all_to_all(self, send: dict[int, list[torch.Tensor]],
                   recv_shapes: dict[int, list[tuple[int, int]]]) -> dict[int, list[torch.Tensor]]:
        """Differentiable all-to-all: ``send[i][j]`` goes from worker i to j.

        Returns ``recv`` with ``recv[j][i] = send[i][j]`` for every local worker ``j``;
        ``recv_shapes[j][i]`` is the shape worker ``j`` expects from ``i``.
        """

    def all_reduce_grads(self, params) -> None:
        """Sum the gradients of replicated parameters over the workers (no-op in process)."""

    def sum(self, values):
        """Sum a number or numpy array over the processes (identity in one process)."""
        return values

    def gather(self, obj) -> list:
        """The ``obj`` of every process, in process order (``[obj]`` in one process)."""
        return [obj]

    def _time(self, seconds: float) -> None:
        if self.timer is not None:
            self.timer.add("communicate", seconds)


class _Transfer(torch.autograd.Function):
    """Block ``src -> dst`` through the wire (the identity at 32 bits, else quantised), counted
    as sent (forward); its gradient goes back through the wire the other way (backward)."""

    @staticmethod
    def forward(ctx, x, comm, call, src, dst):
        ctx.comm, ctx.call, ctx.src, ctx.dst = comm, call, src, dst
        return comm._wire(x, call, src, dst, backward=False)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm._wire(g, ctx.call, ctx.dst, ctx.src, backward=True), None, None, None, \
            None


class LocalComm(Communicator):
    """All ``world`` workers in this process: blocks change hands without copies."""

    def __init__(self, world: int, timer: PhaseTimer | None = None):
        super().__init__(world, list(range(world)), timer)

    def all_to_all(self, send, recv_shapes):
        t0 = time.perf_counter()
        m = self.world
        recv = {j: [None] * m for j in range(m)}
        for i in range(m):
            for j in range(m):
                block = send[i][j]
                if tuple(block.shape) != tuple(recv_shapes[j][i]):
                    raise RuntimeError(f"all_to_all: block {i}->{j} has shape "
                                       f"{tuple(block.shape)}, expected {recv_shapes[j][i]}")
                recv[j][i] = _Transfer.apply(block, self, self._wire_calls, i, j) \
                    if i != j else block
        self.counters.exchanges += 1
        self._wire_calls += 1
        self._time(time.perf_counter() - t0)
        return recv


# -- runtimes ------------------------------------------------------------------------------------

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


def _width(r) -> int:
    return r[1] - r[0]


class MoPRuntime(Runtime):
    """Mixture of Parallelism (Alg. 2): feature slices to sparse devices, node slices to dense
    workers, all-to-all in between. See the module docstring."""

    name = "mop"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        X = self.features
        self.node_ranges = contiguous_ranges(self.n, self.m)
        # sparse device i aggregates its share of every layer's columns
        self.feat_ranges = [contiguous_ranges(d, self.m) if self.shares is None
                            else weighted_ranges(d, self.shares) for d in self.widths]
        # the input features are split by columns once (Alg. 2 line 1); SAGE's self term needs
        # the worker's own rows as well
        self.X_cols = {i: torch.from_numpy(np.ascontiguousarray(X[:, slice(*fr)]))
                       for i, fr in enumerate(self.feat_ranges[0]) if i in self.local}
        self.X_rows = {j: torch.from_numpy(X[slice(*self.node_ranges[j])]).to(self.dense)
                       for j in self.local} if self.model.uses_self else {}

    def rows(self, j):
        return np.arange(*self.node_ranges[j])

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        model, m, L = self.model, self.m, self.model.n_layers
        nr = self.node_ranges
        H_cols = dict(self.X_cols)
        H_self = dict(self.X_rows)
        self._dynamic_input = inputs is not None
        if inputs is not None:
            extra = inputs(np.arange(self.n))
            fr0 = self.feat_ranges[0]
            H_cols = {i: H_cols[i] + extra[:, slice(*fr0[i])].cpu() for i in self.local}
            H_self = {j: H_self[j] + extra[slice(*nr[j])].to(self.dense) for j in H_self}
        P = {}
        for layer in range(L):
            fr = self.feat_ranges[layer]
            mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
            # the square operator's input and output rows are the same nodes: one slice
            cols = {i: None if mask is None else mask[:, slice(*fr[i])] for i in self.local}
            Z_cols = {i: self._aggregate(self.op, H_cols[i], i, cols[i], out_scale, layer,
                                         in_mask=cols[i]) for i in self.local}
            recv = self.comm.all_to_all(
                {i: [Z_cols[i][slice(*nr[j])] for j in range(m)] for i in self.local},
                {j: [(_width(nr[j]), _width(fr[i])) for i in range(m)] for j in self.local})
            for j in self.local:
                Z_rows = torch.cat([t.to(self.dense) for t in recv[j]], dim=1)
                P[j] = model.update(layer, Z_rows, H_self.get(j))
                if count_ops:
                    self.dense_macs[j] += model.update_macs(layer, _width(nr[j]), layer > 0)
                if model.uses_self:
                    H_self[j] = torch.relu(P[j])
            if layer < L - 1:
                fr2 = self.feat_ranges[layer + 1]
                recv = self.comm.all_to_all(
                    {j: [P[j][:, slice(*fr2[i])] for i in range(m)] for j in self.local},
                    {i: [(_width(nr[j]), _width(fr2[i])) for j in range(m)] for i in self.local})
                H_cols = {i: torch.cat([t.cpu() for t in recv[i]], dim=0) for i in self.local}
        return P

    def _exchange_bytes(self, w: int) -> int:
        """``4 (N w - Σ_i n_i w_i)``: an all-to-all of width w without the diagonal blocks."""
        own = sum(_width(n) * _width(f) for n, f in zip(self.node_ranges,
                                                        contiguous_ranges(w, self.m)))
        return FLOAT_BYTES * (self.n * w - own)

    def comm_bytes_analytic(self, backward=True):
        d, L = self.model.dims, self.model.n_layers
        fwd = sum(self._exchange_bytes(d[l]) for l in range(L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        if not backward:
            return fwd
        # no gradient flows into the first aggregation (its input is the data)
        bwd = sum(self._exchange_bytes(d[l]) for l in range(1, L)) \
            + sum(self._exchange_bytes(d[l + 1]) for l in range(L - 1))
        return fwd + bwd

    def feature_bytes(self):
        d, L = self.model.dims, self.model.n_layers
        out = []
        for i in range(self.m):
            n_i = _width(self.node_ranges[i])
            b = 0
            for l in range(L):
                w_i = _width(self.feat_ranges[l][i])
                b += 2 * self.n * w_i              # sparse side: input slice and Z slice
                b += n_i * (d[l] + d[l + 1])       # dense side: Z rows and P rows
                if self.model.uses_self:
                    b += n_i * d[l]
            out.append(FLOAT_BYTES * b)
        return out


def partition_nodes(graph: CSRGraph, parts: int, method: str = "contiguous",
                    shares=None) -> list[np.ndarray]:
    """Split the nodes into ``parts`` sets of (almost) equal size, or with ``shares`` into sets
    whose aggregation work -- ``Σ (deg(v) + 1)`` over their rows -- is proportional to the
    shares (``contiguous``, ``rcm`` and ``metis``; ``kway`` balances equal parts only).

    ``contiguous``: id ranges; ``rcm``: consecutive runs of the reverse Cuthill-McKee order, so
    that neighbours tend to share a part; ``kway``: the ``rcm`` split refined by greedy k-way
    boundary moves (:func:`refine_kway`, the refinement step of METIS without its coarsening);
    ``metis``: multilevel k-way METIS (pymetis) on the symmetrised graph without self loops
    (:func:`metis_owner`). Each set is sorted.
    """
    n = graph.n_nodes
    if shares is not None and method == "kway":
        raise UserError("--partition kway balances equal parts only; use --partition metis "
                        "(target part weights) or contiguous/rcm with a non-uniform --balance")
    work = None if shares is None else graph.degrees().astype(np.int64) + 1
    if method == "metis":
        owner = metis_owner(graph, parts, weights=work, targets=shares)
        return [np.nonzero(owner == j)[0] for j in range(parts)]
    if method == "contiguous":
        order = np.arange(n)
    elif method in ("rcm", "kway"):
        order = graph.rcm_order()
    else:
        raise UserError(f"unknown partition method {method!r}; choose one of "
                        f"{', '.join(PARTITION_METHODS)}")
    ranges = contiguous_ranges(n, parts) if shares is None else work_ranges(work[order], shares)
    sets = [np.sort(order[a:b]) for a, b in ranges]
    if method == "kway" and parts > 1:
        owner = np.empty(n, dtype=np.int64)
        for j, p in enumerate(sets):
            owner[p] = j
        owner = refine_kway(graph.symmetrized(), owner, parts)
        sets = [np.nonzero(owner == j)[0] for j in range(parts)]
    return sets


def metis_owner(graph: CSRGraph, parts: int, weights=None, targets=None) -> np.ndarray:
    """The part of every node from METIS's multilevel k-way partitioner (pymetis).

    METIS needs a symmetric graph without self loops, so it partitions ``A + Aᵀ`` with the
    diagonal removed; ``weights`` (one non-negative int per node) balance a node load other than
    the node count; ``targets`` (one fraction per part) are METIS's target part weights
    (``tpwgts``). Deterministic: METIS runs with its fixed default seed.
    """
    n = graph.n_nodes
    if parts < 1:
        raise UserError(f"cannot split {n} nodes into {parts} parts; use at least 1 part")
    if parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    try:
        import pymetis
    except ImportError:
        raise UserError("--partition metis needs pymetis (a dependency of moagcn: reinstall "
                        "with `pip install -e .`, or `make test`)") from None
    sym = graph.symmetrized().without_self_loops()
    if sym.nnz == 0:  # no edges: METIS has nothing to cut; split the ids evenly
        owner = np.empty(n, dtype=np.int64)
        ranges = contiguous_ranges(n, parts) if targets is None else \
            weighted_ranges(n, targets)
        for j, (a, b) in enumerate(ranges):
            owner[a:b] = j
        return owner
    kw = {}
    if targets is not None:
        t = np.asarray(targets, dtype=np.float64)
        kw["tpwgts"] = (t / t.sum()).tolist()
    if weights is not None:
        kw["vweights"] = np.asarray(weights, dtype=np.int64).tolist()
    adjacency = pymetis.CSRAdjacency(sym.indptr.tolist(), sym.indices.tolist())
    _, membership = pymetis.part_graph(parts, adjacency, **kw)
    return np.asarray(membership, dtype=np.int64)


def partition_quality(graph: CSRGraph, parts: list[np.ndarray]) -> dict:
    """Edge cut (stored entries between parts, both directions of an edge counted) and balance
    (largest part over the mean part) of a node partition."""
    owner = np.empty(graph.n_nodes, dtype=np.int64)
    for j, p in enumerate(parts):
        owner[p] = j
    sizes = [int(p.size) for p in parts]
    return {"edge_cut": edge_cut(graph, owner), "entries": graph.nnz,
            "cut_fraction": edge_cut(graph, owner) / max(graph.nnz, 1),
            "part_sizes": sizes, "balance": imbalance(sizes)}


def edge_cut(graph: CSRGraph, owner: np.ndarray) -> int:
    """Stored entries whose two ends lie in different parts."""
    return int(np.count_nonzero(owner[graph.row_ids()] != owner[graph.indices]))


def refine_kway(graph: CSRGraph, owner: np.ndarray, parts: int, imbalance: float = 0.03,
                passes: int = 10) -> np.ndarray:
    """Greedy k-way refinement of a partition of a symmetric graph.

    Each pass visits the boundary nodes in order of decreasing gain and moves a node to the
    neighbouring part that holds most of its neighbours when that strictly lowers the edge cut
    and keeps every part within ``(1 +- imbalance) n / parts`` nodes. Stops after ``passes``
    passes or a pass without a move; the cut never grows.
    """
    owner = np.asarray(owner, dtype=np.int64).copy()
    n = owner.size
    indptr, indices = graph.indptr, graph.indices
    size = np.bincount(owner, minlength=parts)
    hi = int(np.floor((1 + imbalance) * n / parts))
    lo = int(np.ceil((1 - imbalance) * n / parts))
    for _ in range(passes):
        rows = graph.row_ids()
        # links[v, p]: neighbours of v in part p (dense: parts is small)
        links = np.zeros((n, parts), dtype=np.int64)
        np.add.at(links, (rows, owner[indices]), 1)
        internal = links[np.arange(n), owner]
        best = links.copy()
        best[np.arange(n), owner] = -1
        target = best.argmax(axis=1)
        gain = best.max(axis=1) - internal
        moved = 0
        for v in np.argsort(-gain, kind="stable"):
            if gain[v] <= 0:
                break
            a = owner[v]
            nbrs = indices[indptr[v]:indptr[v + 1]]
            counts = np.bincount(owner[nbrs], minlength=parts)
            counts_own = counts[a]
            counts[a] = -1
            b = int(counts.argmax())
            if counts[b] - counts_own <= 0 or size[b] + 1 > hi or size[a] - 1 < lo:
                continue
            owner[v] = b
            size[a] -= 1
            size[b] += 1
            moved += 1
        if moved == 0:
            break
    return owner


class PartitionRuntime(Runtime):
    """Partition parallelism (Alg. 1): each worker owns a node set and exchanges its halo.

    Extra parameters: ``partition``: ``contiguous``, ``rcm``, ``kway`` or ``metis`` (see
    :func:`partition_nodes`); ``aggregation``: how the cut entries of every layer after the
    first are aggregated (SuperGCN Sec. 5, :mod:`moagcn.host.supergcn.prepost`): ``post`` (the halo
    exchange: sources sent as rows, summed at the receiver), ``pre`` (partial sums computed on
    the sender's device and sent per destination) or ``prepost`` (a minimum vertex cover of
    each pair's cut entries decides, so the fewest rows cross). The first layer aggregates its
    input features, loaded once with the halo, without communication.
    """

    name = "partition"

    def __init__(self, *args, partition: str = "contiguous", aggregation: str = "post",
                 **kwargs):
        super().__init__(*args, **kwargs)
        from moagcn.host.supergcn.prepost import MODES
        if aggregation not in MODES:
            raise UserError(f"--aggregation {aggregation!r}: choose one of {', '.join(MODES)}")
        X = self.features
        self.partition = partition
        self.aggregation = aggregation
        self.parts = partition_nodes(self.graph, self.m, partition, self.shares)
        owner = np.empty(self.n, dtype=np.int64)
        for j, p in enumerate(self.parts):
            owner[p] = j
        adj = self.op.adj
        row_owner = owner[adj.row_ids()]
        self.halo, self.local_cols, self.ops = [], [], {}
        self.send_idx = [[None] * self.m for _ in range(self.m)]  # [i][j]: rows of P_i for j
        self.assemble = {}
        for j, own in enumerate(self.parts):
            used = np.unique(adj.indices[row_owner == j])
            halo = np.setdiff1d(used, own)
            cols = np.union1d(own, halo)
            self.halo.append(halo)
            self.local_cols.append(cols)
            for i in range(self.m):
                from_i = halo[owner[halo] == i] if i != j else own[:0]
                self.send_idx[i][j] = np.searchsorted(self.parts[i], from_i)
            if j in self.local:
                self.ops[j] = self.op.block(own, cols)
                ids = np.concatenate([own] + [self.parts[i][self.send_idx[i][j]]
                                              for i in range(self.m)])
                # received rows arrive grouped by sender; put them in ascending global order
                self.assemble[j] = torch.from_numpy(np.argsort(ids, kind="stable"))
        self.X_local = {j: torch.from_numpy(X[self.local_cols[j]]) for j in self.local}
        self.X_rows = {j: torch.from_numpy(X[self.parts[j]]).to(self.dense)
                       for j in self.local} if self.model.uses_self else {}
        self._send_t = {(i, j): torch.from_numpy(self.send_idx[i][j]).to(self.dense)
                        for i in self.local for j in range(self.m)}
        self._plan_exchange(owner)

    def _plan_exchange(self, owner) -> None:
        """The exchange of the layers after the first: which rows cross as rows (post) and which
        as partial sums (pre), the operators of both, and where received rows go."""
        from moagcn.host.supergcn.prepost import plan_prepost
        m, op = self.m, self.op
        self.plan = plan = plan_prepost(op.adj, owner, m, self.aggregation)
        r = op.row_scale
        c = op.col_scale
        self.n_post = [[int(plan.post_src[i][j].size) for j in range(m)] for i in range(m)]
        self.n_pre = [[int(plan.pre_dst[i][j].size) for j in range(m)] for i in range(m)]
        self.xops, self.xcols, self.xassemble = {}, {}, {}
        self.pre_ops, self.pre_at = {}, {}
        for j in self.local:
            own = self.parts[j]
            if self.aggregation == "post":   # the first layer's operator: every entry is local
                self.xops[j], self.xcols[j] = self.ops[j], self.local_cols[j]
                self.xassemble[j] = self.assemble[j]
            else:
                block, cols = plan.local_block(j)
                self.xops[j] = AggregationOp(block, None if r is None else r[own],
                                             None if c is None else c[cols], op.kind)
                self.xcols[j] = cols
                ids = np.concatenate([own] + [plan.post_src[i][j] for i in range(m)])
                self.xassemble[j] = torch.from_numpy(np.argsort(ids, kind="stable"))
            self.pre_at[j] = {i: torch.from_numpy(plan.pre_index(i, j)) for i in range(m)
                              if self.n_pre[i][j]}
        for i in self.local:
            self._send_t.update({(i, j): torch.from_numpy(plan.send_index(i, j)).to(self.dense)
                                 for j in range(m)})
            for j in range(m):
                if self.n_pre[i][j]:
                    dst = plan.pre_dst[i][j]
                    self.pre_ops[i, j] = AggregationOp(
                        plan.pre_block(i, j), None if r is None else r[dst],
                        None if c is None else c[self.parts[i]], op.kind)

    def exchange_summary(self) -> dict:
        """Rows sent per exchange (one layer, one direction) and how the cut entries split."""
        s = self.plan.summary()
        return {"aggregation": self.aggregation, "rows_sent": s["rows_sent"],
                "post_rows": s["post_rows"], "pre_rows": s["pre_rows"],
                "vertex_cover": s["cover_size"], "cut_entries": s["cut_entries"],
                "pre_entries": s["pre_entries"], "post_entries": s["post_entries"],
                "rows_if_post": s["rows_if_post"], "rows_if_pre": s["rows_if_pre"]}

    def rows(self, j):
        return self.parts[j]

    def forward(self, mask_fn=None, out_scale=1.0, count_ops=True, inputs=None):
        model, m, L = self.model, self.m, self.model.n_layers
        H_local = dict(self.X_local)
        H_self = dict(self.X_rows)
        self._dynamic_input = inputs is not None
        if inputs is not None:
            H_local = {j: H_local[j] + inputs(self.local_cols[j]).cpu() for j in self.local}
            H_self = {j: H_self[j] + inputs(self.parts[j]).to(self.dense) for j in H_self}
        P = {}
        def rows(mask, ids):
            return None if mask is None else mask[torch.from_numpy(ids)]

        for layer in range(L):
            mask = mask_fn(layer, (self.n, self.widths[layer])) if mask_fn else None
            partial = {j: [] for j in self.local}
            ops, cols = self.ops, self.local_cols
            if layer > 0:
                ops, cols = self.xops, self.xcols
                H_local, partial = self._exchange(P, mask, out_scale, layer)
            for j in self.local:
                own = self.parts[j]
                Z = self._aggregate(ops[j], H_local[j], j, rows(mask, own), out_scale, layer,
                                    in_mask=rows(mask, cols[j]))
                for at, Zp in partial[j]:   # partial sums aggregated on the senders
                    Z = Z.index_add(0, at, Zp.to(Z.device))
                P[j] = model.update(layer, Z.to(self.dense), H_self.get(j))
                if count_ops:
                    self.dense_macs[j] += model.update_macs(layer, own.size, layer > 0)
                if model.uses_self:
                    H_self[j] = torch.relu(P[j])
        return P

    def _exchange(self, P, mask, out_scale, layer):
        """Send every worker's post rows and pre partial sums of ``layer``'s input (the previous
        pre-activations ``P``) in one all-to-all; return the receivers' input rows (own and
        post, in column order) and their partial sums with the rows they add to."""
        m, w = self.m, self.widths[layer]
        if self.layer_norm:   # normalise the rows, then activate, before they are sent or summed
            P = {i: torch.relu(self.model.norms[str(layer)](p)) for i, p in P.items()}
        send = {}
        for i in self.local:
            blocks = []
            for j in range(m):
                post = P[i][self._send_t[i, j]]
                if self.n_pre[i][j]:
                    dst = self.plan.pre_dst[i][j]
                    Zp = self._aggregate(
                        self.pre_ops[i, j], P[i].cpu(), i,
                        None if mask is None else mask[torch.from_numpy(dst)], out_scale,
                        layer, in_mask=None if mask is None else
                        mask[torch.from_numpy(self.parts[i])])
                    post = torch.cat([post, Zp.to(post.device)], dim=0)
                blocks.append(post)
            send[i] = blocks
        shapes = {j: [(self.n_post[i][j] + self.n_pre[i][j], w) for i in range(m)]
                  for j in self.local}
        recv = self.comm.all_to_all(send, shapes)
        H_local, partial = {}, {}
        for j in self.local:
            got = [recv[j][i][:self.n_post[i][j]] for i in range(m)]
            H_local[j] = torch.cat([P[j]] + got, dim=0).cpu()[self.xassemble[j]]
            partial[j] = [(self.pre_at[j][i], recv[j][i][self.n_post[i][j]:])
                          for i in range(m) if self.n_pre[i][j]]
        return H_local, partial

    def quality(self) -> dict:
        """The partition's method, edge cut and balance (:func:`partition_quality`)."""
        return {"method": self.partition, **partition_quality(self.graph, self.parts)}

    def halo_sizes(self) -> list[int]:
        """|R_j|: remote neighbours of every worker."""
        return [int(h.size) for h in self.halo]

    def comm_bytes_analytic(self, backward=True):
        """Bytes from the plan's row counts and the wire format alone: every layer after the
        first sends ``rows_sent`` rows of its width forward and as many gradient rows back."""
        from moagcn.host.parallel.quant import wire_bytes
        d, L = self.model.dims, self.model.n_layers
        rows = int(self.plan.rows_matrix().sum())
        fwd = sum(sum(wire_bytes(rows, d[l + 1], self.comm.bits)) for l in range(L - 1))
        return 2 * fwd if backward else fwd

    def feature_bytes(self):
        d, L = self.model.dims, self.model.n_layers
        out = []
        for j in range(self.m):
            own, cols = self.parts[j].size, self.local_cols[j].size
            b = 0
            for l in range(L):
                b += cols * d[l] + own * d[l]       # input with halo, Z
                b += own * d[l + 1]                 # P
                if self.model.uses_self:
                    b += own * d[l]
            out.append(FLOAT_BYTES * b)
        return out


def make_runtime(parallelism: str, *args, partition: str = "contiguous",
                 aggregation: str = "post", pipeline: str = "none", stages: int | None = None,
                 **kwargs) -> Runtime:
    """``mop`` -> :class:`MoPRuntime` (with ``pipeline`` off / natural / rcm:
    :class:`~moagcn.host.mixgcn.pipeline_exec.PipelinedMoP`), ``partition`` ->
    :class:`PartitionRuntime`."""
    if pipeline != "none" and parallelism != "mop":
        raise UserError(f"--pipeline {pipeline} needs --parallelism mop (the fine-grain pipeline "
                        "overlaps MoP's sparse devices and dense workers)")
    if parallelism == "mop":
        if pipeline != "none":
            from moagcn.host.mixgcn.pipeline_exec import PipelinedMoP
            return PipelinedMoP(*args, pipeline=pipeline, stages=stages, **kwargs)
        if aggregation != "post":
            raise UserError(f"--aggregation {aggregation} needs --parallelism partition: under "
                            "mop no aggregation crosses a worker boundary (workers exchange "
                            "feature slices, not cut edges)")
        return MoPRuntime(*args, **kwargs)
    if parallelism == "partition":
        return PartitionRuntime(*args, partition=partition, aggregation=aggregation,
                                **kwargs)
    raise UserError(f"unknown parallelism {parallelism!r}; choose one of "
                    f"{', '.join(PARALLELISMS)}")


def imbalance(values) -> float:
    """max / mean of per-worker loads (1.0 = perfectly balanced)."""
    v = np.asarray(list(values), dtype=np.float64)
    return float(v.max() / v.mean()) if v.size and v.mean() > 0 else 1.0
