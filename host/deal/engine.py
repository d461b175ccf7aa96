"""DEAL: distributed all-node inference (seed 004), on the sparse devices.

A trained GCN / GraphSAGE / GIN / GAT embeds every node of a graph layer by layer:

1. **Sampling with shared state** (Sec. 3.2): each layer's 1-hop graph is sampled once for all
   nodes (:class:`~moagcn.host.graphs.sampling.LayerSampler`, whose per-row state is built once and
   reused for every layer); every node's projection and aggregation is computed once and shared
   by all nodes that depend on it.
2. **P x M co-partitioning** (Sec. 3.3): the nodes are cut 1-D into ``P`` contiguous row ranges;
   the features of each range are split by columns across ``M`` processes. Process
   ``r = p M + m`` holds the sampled in-edges of range ``p`` and columns ``m`` of its rows.
3. **GEMM by ring exchange** (Sec. 3.4, Table 1): the ``M`` processes of a range swap row tiles
   (``M - 1`` ring stages) so each holds ``n_p / M`` whole rows, applies the layer's row-wise
   transform (linear map, MLP, LayerNorm) with the replicated weights, and swaps the result back
   into column blocks: ``2 N D (M - 1) / (P M^2)`` entries received per process when the input and
   output widths are both ``D``. The baseline ``cagnet`` multiplies each column block by its
   rows of the weights and reduce-scatters the ``N / P x D'`` partial products: ``N D' (M - 1) /
   (P M)`` entries and an intermediate of ``N D' / P``.
4. **SpMM by fetching only the needed rows** (Sec. 3.4-3.5, Table 2): a process sends the ids
   of the remote columns its rows use to their owners (the process of the same feature group in
   the owning range) and gets exactly those rows back, in ``groups`` sub-groups per owner; the
   local columns form group 0. With ``pipeline`` the rows of sub-group ``s + 1`` are in flight
   while sub-group ``s`` is aggregated (and the local group covers the pipeline fill, Fig.
   12c); without, each sub-group is fetched, then aggregated. The aggregation of every group is
   S-SpMM work on the process's sparse device (``cpu``, ``model`` or ``rtl``); the groups'
   results are summed per row.

Processes talk through a :class:`~moagcn.host.parallel.comm.Communicator` (rounds of
point-to-point messages): :class:`~moagcn.host.parallel.comm.LocalComm` runs all ``P M``
processes in this one (blocks change hands, bytes counted the same way),
:class:`~moagcn.host.parallel.launch.DistComm` one per
torch.distributed process with point-to-point ``isend``/``irecv``. Every process counts the
bytes it receives (``gemm``, ``spmm_ids``, ``spmm_rows``) and the feature bytes it holds
(:class:`MemTracker`: its column blocks, the gathered rows of the GEMM, the sub-group buffers,
the rows it serves).

Layer ``l`` of each model, with ``act(P) = relu(P)`` (``relu(LayerNorm(P))`` with layer norm)
for ``l > 0`` and the input features for ``l = 0``; SAGE's self term uses ``relu(P)``::

    gcn:  Y = act(P) Wᵀ (GEMM);   P = Â Y + b (SpMM)
    sage: [Yn, Ys] = act(P) [W_n, W_s]ᵀ (one GEMM);   P = mean(Yn) + Ys + b
    gin:  Z = (A + I) act(P) (SpMM);   P = MLP(Z) (GEMM)
    gat:  h = elu(P) Wᵀ (GEMM);   α = softmax(LeakyReLU(s_v + t_u)) (SDDMM,
          :mod:`moagcn.host.deal.sddmm`);   P = Σ_u α_vu h_u + b (weighted SpMM, per head)

The reference (:func:`layerwise_forward`) is the model's own aggregate-then-update forward with
plain torch sparse products over the same sampled graphs.

One module: the engine's GEMM and SpMM share the partition plan, the per-process statistics
and the communicator's rounds, which every process must post in the same order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from moagcn.core.names import GEMMS  # noqa: F401 (the vocabulary; re-exported)
from moagcn.errors import UserError
from moagcn.host.deal import sddmm
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph, contiguous_ranges
from moagcn.host.graphs.sampling import LayerSampler
from moagcn.host.nn.attention import head_segments, spmm_segments
from moagcn.host.nn.layerwise import AGGREGATION_KIND, local_operator
from moagcn.host.nn.models import GNN
from moagcn.host.parallel.comm import Communicator

#: what the GAT attention's SDDMM receives, by kind (:mod:`moagcn.host.deal.sddmm`)
SDDMM_CATEGORIES = ("sddmm_ids", "sddmm_dest", "sddmm_src", "sddmm_scores")

FLOAT_BYTES = 4
ID_BYTES = 8


# -- bookkeeping ---------------------------------------------------------------------------------

class MemTracker:
    """Feature bytes a process holds: :meth:`hold` when a tensor is made, :meth:`drop` when it
    is released; :attr:`peak` is the largest total."""

    def __init__(self):
        self.live = 0
        self.peak = 0

    def hold(self, *tensors) -> None:
        for t in tensors:
            self.live += _nbytes(t)
        self.peak = max(self.peak, self.live)

    def drop(self, *tensors) -> None:
        for t in tensors:
            self.live -= _nbytes(t)


def _nbytes(t) -> int:
    if t is None:
        return 0
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    return int(np.asarray(t).nbytes)


@dataclass
class RankStats:
    """What one process did: bytes received by kind, peak feature bytes, seconds by phase."""

    rank: int
    partition: int
    group: int
    bytes_received: dict = field(default_factory=lambda: dict.fromkeys(
        ("gemm", "spmm_ids", "spmm_rows") + SDDMM_CATEGORIES, 0))
    mem: MemTracker = field(default_factory=MemTracker)
    seconds: dict = field(default_factory=dict)
    rows: int = 0
    columns: int = 0
    device: dict = field(default_factory=dict)

    def add_time(self, phase: str, s: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + s

    def as_dict(self) -> dict:
        return {"rank": self.rank, "partition": self.partition, "feature_group": self.group,
                "rows": self.rows, "columns": self.columns,
                "gemm_bytes_received": self.bytes_received["gemm"],
                "spmm_bytes_received": (self.bytes_received["spmm_ids"]
                                        + self.bytes_received["spmm_rows"]),
                "spmm_id_bytes_received": self.bytes_received["spmm_ids"],
                "spmm_row_bytes_received": self.bytes_received["spmm_rows"],
                "sddmm_bytes_received": sum(self.bytes_received[k] for k in SDDMM_CATEGORIES),
                **{f"{k}_bytes_received": self.bytes_received[k] for k in SDDMM_CATEGORIES},
                "peak_feature_bytes": self.mem.peak,
                "time_s": dict(self.seconds), "device": self.device}


# -- the layer graphs of a row range (operators: moagcn.host.nn.layerwise) -------------------------------------------------------------


@dataclass
class SpmmPlan:
    """Who sends which rows to whom for one layer graph of one process (Sec. 3.5's groups).

    ``need[q]``: sorted global ids of range ``q``'s rows this process uses; round ``s`` fetches
    chunk ``s`` of every ``need[q]`` (``np.array_split`` into ``groups`` chunks) into one buffer;
    ``local`` is the binary sub-matrix of the local columns (columns: positions in the own
    block), ``rounds[s]`` that of round ``s`` as ``(matrix, rows)``: only the rows with an entry
    in the round (columns: positions in the round's buffer), added into those output rows.
    """

    local: CSRGraph
    rounds: list
    need: dict
    round_sizes: list
    #: the layer graph's entry of each entry of ``local`` and of each round's matrix (their
    #: values, when the aggregation is weighted)
    local_entries: np.ndarray = None
    round_entries: list = None


def _plan(adj: CSRGraph, p: int, bounds: list[tuple[int, int]], groups: int) -> SpmmPlan:
    lo, hi = bounds[p]
    n = adj.n_rows
    cols = adj.indices.astype(np.int64)
    rows = adj.row_ids()
    starts = np.array([b[0] for b in bounds])
    owner = np.searchsorted(starts, cols, side="right") - 1
    is_local = owner == p
    lsel = np.nonzero(is_local)[0]
    local = CSRGraph(np.r_[0, np.cumsum(np.bincount(rows[lsel], minlength=n))].astype(np.int64),
                     cols[lsel] - lo, n_cols=hi - lo, what="local group")
    rsel = np.nonzero(~is_local)[0]
    needed = np.unique(cols[rsel])                  # ascending, so grouped by owner
    nowner = np.searchsorted(starts, needed, side="right") - 1
    need, chunk_of, slot_of = {}, np.zeros(needed.size, np.int64), np.zeros(needed.size, np.int64)
    round_sizes = [0] * groups
    for q in range(len(bounds)):
        if q == p:
            continue
        seg = np.nonzero(nowner == q)[0]
        need[q] = needed[seg]
        pos = 0
        for s, chunk in enumerate(np.array_split(np.arange(seg.size), groups)):
            chunk_of[seg[chunk]] = s
            slot_of[seg[chunk]] = round_sizes[s] + np.arange(chunk.size)
            round_sizes[s] += chunk.size
            pos += chunk.size
    where = np.searchsorted(needed, cols[rsel])
    rround, rslot, rrows = chunk_of[where], slot_of[where], rows[rsel]
    rounds, entries = [], []
    for s in range(groups):
        sel = rround == s
        # only the rows this sub-group adds to: the device's output is that many rows
        active, counts = np.unique(rrows[sel], return_counts=True)
        indptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
        rounds.append((CSRGraph(indptr, rslot[sel], n_cols=round_sizes[s], what="sub-group"),
                       torch.from_numpy(active)))
        entries.append(torch.from_numpy(rsel[sel]))
    return SpmmPlan(local, rounds, need, round_sizes, torch.from_numpy(lsel), entries)


# -- the engine ----------------------------------------------------------------------------------

def ring_gemm(model: GNN, cfg: "InferConfig", layer: int) -> bool:
    """Whether layer ``layer``'s GEMM is DEAL's ring exchange (else CAGNET's reduce-scatter):
    as configured, or with ``auto`` whichever receives fewer bytes -- the ring ``(D_in + Σ
    D_out) (M - 1) / M^2`` entries per row, the reduce-scatter ``Σ D_out (M - 1) / M`` (the
    ring on a tie, and whenever LayerNorm needs whole rows)."""
    if cfg.gemm != "auto":
        return cfg.gemm == "deal"
    M = cfg.feature_groups
    d_in, d_out = model.dims[layer], model.dims[layer + 1]
    if model.norms is not None:
        return True
    if model.kind == "gin":
        outs, cag = [d_out], model.updates[layer][0].out_features + d_out
    else:
        outs = [d_out] * (2 if model.kind == "sage" else 1)
        cag = sum(outs)
    return d_in + sum(outs) <= cag * M


@dataclass
class InferConfig:
    """System choices of one inference run."""

    partitions: int = 1
    feature_groups: int = 1
    #: per layer: neighbours sampled per node (None: all)
    fanout: list | None = None
    gemm: str = "deal"
    pipeline: bool = True
    #: SpMM sub-groups per owning range
    groups: int = 4
    seed: int = 0

    def validate(self, n_nodes: int | None = None, width: int | None = None) -> "InferConfig":
        if self.partitions < 1 or self.feature_groups < 1:
            raise UserError(f"--partitions {self.partitions} x --feature-groups "
                            f"{self.feature_groups}: both must be at least 1")
        if self.gemm not in GEMMS:
            raise UserError(f"--gemm {self.gemm!r}: choose one of {', '.join(GEMMS)}")
        if self.groups < 1:
            raise UserError(f"--subgroups {self.groups}: use at least 1 sub-group per owner")
        if n_nodes is not None and self.partitions > n_nodes:
            raise UserError(f"--partitions {self.partitions} is more than the graph's "
                            f"{n_nodes} nodes; use at most {n_nodes}")
        if width is not None and self.feature_groups > width:
            raise UserError(f"--feature-groups {self.feature_groups} is more than the narrowest "
                            f"layer width {width}; use at most {width}")
        return self

    @property
    def processes(self) -> int:
        return self.partitions * self.feature_groups


class DealEngine:
    """All-node inference of ``model`` on ``graph`` with input features ``X`` (N x D, the model's
    input: normalised, labels embedded), for the processes in ``comm.local``."""

    def __init__(self, model: GNN, graph: CSRGraph, X: np.ndarray, cfg: InferConfig,
                 comm: Communicator, choice: AcceleratorChoice | None = None):
        model.eval()
        self.model, self.graph, self.cfg, self.comm = model, graph, cfg, comm
        self.P, self.M = cfg.partitions, cfg.feature_groups
        if comm.world != self.P * self.M:
            raise UserError(f"--partitions {self.P} x --feature-groups {self.M} = "
                            f"{self.P * self.M} processes, but the run has {comm.world}")
        self.fanout = cfg.fanout if cfg.fanout is not None else [None] * model.n_layers
        if len(self.fanout) != model.n_layers:
            raise UserError(f"fanout {self.fanout} has {len(self.fanout)} entries for a "
                            f"{model.n_layers}-layer model; give one per layer")
        cfg.validate(graph.n_rows, min(model.dims))
        if cfg.gemm == "cagnet" and model.norms is not None:  # (auto keeps the ring there)
            raise UserError("--gemm cagnet: the feature-partitioned GEMM cannot apply LayerNorm "
                            "(it needs whole rows); use --gemm deal for this checkpoint")
        self.bounds = contiguous_ranges(graph.n_rows, self.P)
        self.X = X
        self.choice = choice or AcceleratorChoice("cpu")
        self.local = comm.local
        self.stats = {r: RankStats(r, r // self.M, r % self.M) for r in self.local}
        if model.kind == "gat":
            for conv in model.convs:
                if not conv.concat and conv.heads > 1:
                    raise UserError(f"GAT layer {conv}: heads averaged (concat=False) over "
                                    f"{conv.heads} heads are not supported by DEAL's "
                                    "feature-partitioned SpMM (a head's columns lie in other "
                                    "processes); use concat=True or one head")
                if getattr(conv, "res", None) is not None:
                    raise UserError(f"GAT layer {conv}: residual=True is not supported by "
                                    "all-node inference; train without it")
        self.devices = {r: self._make_device() for r in self.local}
        #: per process, every SpMM step: ``(kind, layer, group, seconds, device cycles)`` with
        #: kind ``wait`` (a sub-group's rows arriving) or ``compute`` (group -1: the local one)
        self.trace: dict[int, list] = {r: [] for r in self.local}

    def _make_device(self):
        """The process's sparse device; a GAT on an accelerator gets the weighted S-SpMM paired
        with the SDDMM (:func:`~moagcn.host.devices.pair.attention_device`)."""
        if self.model.kind == "gat" and self.choice.device != "cpu":
            # lazy: the pair is needed only for attention on an accelerator
            from moagcn.host.devices.pair import attention_device
            return attention_device(self.choice)   # (refuses a binary S-SpMM before a build)
        return self.choice.make()

    # -- geometry --------------------------------------------------------------------------------

    def pm(self, r: int) -> tuple[int, int]:
        return r // self.M, r % self.M

    def rank(self, p: int, m: int) -> int:
        return p * self.M + m

    def cols(self, width: int, m: int) -> tuple[int, int]:
        return contiguous_ranges(width, self.M)[m]

    def rsub(self, p: int) -> list[tuple[int, int]]:
        lo, hi = self.bounds[p]
        return contiguous_ranges(hi - lo, self.M)

    def _timed(self, r, phase, t0):
        self.stats[r].add_time(phase, time.perf_counter() - t0)

    # -- communication: rounds of the communicator, the bytes received counted by kind ----------

    def _counting(self, category: str):
        def count(received: dict) -> None:
            for (src, dst), t in received.items():
                if src != dst:
                    self.stats[dst].bytes_received[category] += _nbytes(t)
        return count

    def _exchange(self, sends: dict, expect: dict, category: str) -> dict:
        return self.comm.exchange(sends, expect, self._counting(category))

    # -- GEMM --------------------------------------------------------------------------------------

    def rowwise(self, blocks: dict, width: int, fn, widths: list[int]) -> list[dict]:
        """DEAL's GEMM: ring-exchange the column blocks (of a ``width``-wide tensor) into whole
        row tiles, apply ``fn`` (row tile -> list of outputs of ``widths``), ring-exchange the
        outputs back into column blocks. Consumes ``blocks``."""
        M = self.M
        tiles = {}
        for r, X in blocks.items():
            p, m = self.pm(r)
            a, b = self.rsub(p)[m]
            if M == 1:          # the block is already whole rows: no tile, no copy
                tiles[r] = X
                continue
            R = torch.empty(b - a, width)
            c0, c1 = self.cols(width, m)
            R[:, c0:c1] = X[a:b]
            tiles[r] = R
            self.stats[r].mem.hold(R)
        for t in range(1, M):
            sends, expect = {}, {}
            for r, X in blocks.items():
                p, m = self.pm(r)
                dst, src = (m + t) % M, (m - t) % M
                a, b = self.rsub(p)[dst]
                sends[(r, self.rank(p, dst))] = X[a:b].contiguous()
                a, b = self.rsub(p)[m]
                s0, s1 = self.cols(width, src)
                expect[(self.rank(p, src), r)] = ((b - a, s1 - s0), torch.float32)
            got = self._exchange(sends, expect, "gemm")
            for (src_r, r), piece in got.items():
                s0, s1 = self.cols(width, self.pm(src_r)[1])
                tiles[r][:, s0:s1] = piece
        for r in list(blocks):
            X = blocks.pop(r)
            if M > 1:       # (with M = 1 the tile is the block and is dropped below)
                self.stats[r].mem.drop(X)
        outs = [{} for _ in widths]
        for r, R in tiles.items():
            t0 = time.perf_counter()
            with torch.no_grad():
                F = fn(R)
            self._timed(r, "gemm", t0)
            self.stats[r].mem.hold(*F)
            self.stats[r].mem.drop(R)
            tiles[r] = F
            p, m = self.pm(r)
            lo, hi = self.bounds[p]
            a, b = self.rsub(p)[m]
            for k, w in enumerate(widths):
                c0, c1 = self.cols(w, m)
                out = torch.empty(hi - lo, c1 - c0)
                out[a:b] = F[k][:, c0:c1]
                outs[k][r] = out
                self.stats[r].mem.hold(out)
        for t in range(1, M):
            sends, expect = {}, {}
            for r, F in tiles.items():
                p, m = self.pm(r)
                dst, src = (m + t) % M, (m - t) % M
                a, b = self.rsub(p)[src]
                for k, w in enumerate(widths):
                    d0, d1 = self.cols(w, dst)
                    sends[(r, self.rank(p, dst), k)] = F[k][:, d0:d1].contiguous()
                    c0, c1 = self.cols(w, m)
                    expect[(self.rank(p, src), r, k)] = ((b - a, c1 - c0), torch.float32)
            got = self._exchange_multi(sends, expect, "gemm")
            for (src_r, r, k), piece in got.items():
                a, b = self.rsub(self.pm(r)[0])[self.pm(src_r)[1]]
                outs[k][r][a:b] = piece
        for r, F in tiles.items():
            self.stats[r].mem.drop(*F)
        return outs

    def _exchange_multi(self, sends, expect, category):
        """One round of several messages per pair (keys ``(src, dst, k)``)."""
        ks = sorted({k for *_, k in expect} | {k for *_, k in sends})
        out = {}
        for k in ks:   # one round per message kind keeps the tags in step everywhere
            got = self._exchange({(s, d): t for (s, d, kk), t in sends.items() if kk == k},
                                       {(s, d): v for (s, d, kk), v in expect.items() if kk == k},
                                       category)
            out.update({(s, d, k): t for (s, d), t in got.items()})
        return out

    def cagnet_linear(self, blocks: dict, weight: torch.Tensor, bias) -> dict:
        """CAGNET's GEMM: ``X[:, cols_m] W[:, cols_m]ᵀ`` on every process, then a reduce-scatter
        of the ``n_p x D'`` partial products among the range's ``M`` processes."""
        M, d_out, d_in = self.M, weight.shape[0], weight.shape[1]
        partial, outs = {}, {}
        for r, X in blocks.items():
            p, m = self.pm(r)
            c0, c1 = self.cols(d_in, m)
            t0 = time.perf_counter()
            with torch.no_grad():
                Y = X @ weight[:, c0:c1].T
            self._timed(r, "gemm", t0)
            partial[r] = Y
            o0, o1 = self.cols(d_out, m)
            outs[r] = Y[:, o0:o1].clone()
            self.stats[r].mem.hold(Y, outs[r])
        for t in range(1, M):
            sends, expect = {}, {}
            for r, Y in partial.items():
                p, m = self.pm(r)
                dst, src = (m + t) % M, (m - t) % M
                d0, d1 = self.cols(d_out, dst)
                sends[(r, self.rank(p, dst))] = Y[:, d0:d1].contiguous()
                o0, o1 = self.cols(d_out, m)
                expect[(self.rank(p, src), r)] = ((Y.shape[0], o1 - o0), torch.float32)
            got = self._exchange(sends, expect, "gemm")
            for (_, r), piece in got.items():
                self.stats[r].mem.hold(piece)
                outs[r] += piece
                self.stats[r].mem.drop(piece)
        for r in list(partial):
            self.stats[r].mem.drop(partial.pop(r))
        if bias is not None:
            for r in outs:
                o0, o1 = self.cols(d_out, self.pm(r)[1])
                outs[r] += bias[o0:o1]
        return outs

    # -- SpMM --------------------------------------------------------------------------------------

    def prepare_layer(self, layer: int, samplers: dict) -> None:
        """Sample layer ``layer``'s graph of every local range, build its operator and plan, and
        tell the owners which rows will be needed (ids, once per layer)."""
        kind = AGGREGATION_KIND[self.model.kind]
        made = {}
        for r in self.local:
            p, m = self.pm(r)
            t0 = time.perf_counter()
            if p not in made:
                rows = samplers[p].sample(self.fanout[layer], layer)
                lo, hi = self.bounds[p]
                adj, rs, cs = local_operator(kind, rows, np.arange(lo, hi))
                made[p] = (adj, rs, cs, _plan(adj, p, self.bounds, self.cfg.groups))
            self._timed(r, "sample", t0)
        self._ops[layer] = made
        # ids: counts first (the owner does not know how many), then the ids themselves
        sends, expect = {}, {}
        for r in self.local:
            p, m = self.pm(r)
            plan = made[p][3]
            for q in range(self.P):
                if q != p:
                    sends[(r, self.rank(q, m))] = torch.tensor([plan.need[q].size])
                    expect[(self.rank(q, m), r)] = ((1,), torch.int64)
        counts = self._exchange(sends, expect, "spmm_ids")
        if self.model.kind == "gat":   # the attention's source ids (its own round, first)
            sddmm.prepare(self, layer)
        sends, expect = {}, {}
        for r in self.local:
            p, m = self.pm(r)
            plan = made[p][3]
            for q in range(self.P):
                if q != p:
                    sends[(r, self.rank(q, m))] = torch.from_numpy(plan.need[q])
                    expect[(self.rank(q, m), r)] = ((int(counts[(self.rank(q, m), r)][0]),),
                                                    torch.int64)
        got = self._exchange(sends, expect, "spmm_ids")
        lo = {r: self.bounds[self.pm(r)[0]][0] for r in self.local}
        self._serve[layer] = {
            r: {src: [c - lo[r] for c in np.array_split(ids.numpy(), self.cfg.groups)]
                for (src, dst), ids in got.items() if dst == r and src != r}
            for r in self.local}

    def spmm(self, layer: int, blocks: dict, values: dict | None = None,
             heads: int | None = None) -> dict:
        """``Â`` times the column-split ``blocks`` (each process's own rows, columns ``m``);
        with ``values`` (``{r: nnz x k_m}``, per entry of the range's layer graph and per head
        of the block, :func:`~moagcn.host.nn.attention.head_segments` of ``heads`` heads) the
        weighted aggregation ``Σ_u values_vu Y_u`` of each head's columns instead."""
        S, pipeline = self.cfg.groups, self.cfg.pipeline
        made = self._ops[layer]
        Ys, outs = {}, {}
        for r, Y in blocks.items():
            p, _ = self.pm(r)
            cs = made[p][2]
            Ys[r] = Y * torch.from_numpy(cs)[:, None] if cs is not None else Y
            if cs is not None:
                self.stats[r].mem.hold(Ys[r])
            outs[r] = torch.zeros(made[p][0].n_rows, Y.shape[1])
            self.stats[r].mem.hold(outs[r])

        def start(s):
            sends, expect = {}, {}
            for r in self.local:
                p, m = self.pm(r)
                for src, chunks in self._serve[layer][r].items():
                    sends[(r, src)] = Ys[r][torch.from_numpy(chunks[s])]
                    self.stats[r].mem.hold(sends[(r, src)])
                plan = made[p][3]
                for q in range(self.P):
                    if q != p:
                        n_q = np.array_split(plan.need[q], S)[s].size
                        expect[(self.rank(q, m), r)] = ((n_q, Ys[r].shape[1]), torch.float32)
            t0 = time.perf_counter()
            h = self.comm.start(sends, expect, self._counting("spmm_rows"))
            for r in self.local:
                self._timed(r, "spmm_comm", t0)
            return h, sends

        def finish(h, sends, s):
            t0 = time.perf_counter()
            got = h.wait()
            dt = time.perf_counter() - t0
            for r in self.local:
                self._timed(r, "spmm_comm", t0)
                self.trace[r].append(("wait", layer, s, dt, 0))
            for (r, _), t in sends.items():
                self.stats[r].mem.drop(t)
            return got

        def product(r, csr, H, entries):
            if values is None:
                return self.devices[r].sspmm(csr, H)
            width = self.model.dims[layer + 1]
            segs = head_segments(width // heads, *self.cols(width, self.pm(r)[1]))
            return spmm_segments(csr, values[r][entries], H, segs, self.devices[r])

        def compute(r, csr, H, s=-1, rows=None):
            if csr.nnz == 0:
                self.trace[r].append(("compute", layer, s, 0.0, 0))
                return
            t0 = time.perf_counter()
            c0 = self.devices[r].counters.cycles_total
            plan = made[self.pm(r)[0]][3]
            entries = plan.local_entries if s < 0 else plan.round_entries[s]
            if rows is None:
                outs[r] += product(r, csr, H, entries)
            else:
                outs[r].index_add_(0, rows, product(r, csr, H, entries))
            self._timed(r, "spmm", t0)
            self.trace[r].append(("compute", layer, s, time.perf_counter() - t0,
                                  self.devices[r].counters.cycles_total - c0))

        def compute_round(s, got):
            for r in self.local:
                p, m = self.pm(r)
                parts = [got[(self.rank(q, m), r)] for q in range(self.P) if q != p]
                buf = torch.cat(parts) if parts else torch.zeros(0, Ys[r].shape[1])
                self.stats[r].mem.hold(buf)
                sub, rows = made[p][3].rounds[s]
                compute(r, sub, buf, s, rows)
                self.stats[r].mem.drop(buf)

        if self.P == 1:
            for r in self.local:
                compute(r, made[self.pm(r)[0]][3].local, Ys[r])
        elif pipeline:
            pending = start(0)
            for r in self.local:          # the local group covers the pipeline fill
                compute(r, made[self.pm(r)[0]][3].local, Ys[r])
            for s in range(S):
                got = finish(*pending, s)
                if s + 1 < S:
                    pending = start(s + 1)
                compute_round(s, got)
        else:
            for r in self.local:
                compute(r, made[self.pm(r)[0]][3].local, Ys[r])
            for s in range(S):
                compute_round(s, finish(*start(s), s))
        for r in list(blocks):
            p, _ = self.pm(r)
            rs = made[p][1]
            if rs is not None:
                outs[r] *= torch.from_numpy(rs)[:, None]
            if made[p][2] is not None:
                self.stats[r].mem.drop(Ys[r])
            self.stats[r].mem.drop(blocks.pop(r))
        return outs

    # -- the model ---------------------------------------------------------------------------------

    def _act(self, layer: int):
        norm = self.model.norms[str(layer)] if (self.model.norms is not None
                                                 and layer > 0) else None
        if layer == 0:
            return lambda R: R
        if norm is not None:
            return lambda R: torch.relu(norm(R))
        return torch.relu

    def run(self) -> dict:
        """Embed every node; returns ``{rank: (rows (lo, hi), cols (c0, c1), block)}``."""
        model, cfg = self.model, self.cfg
        self._ops, self._serve, self._scores = {}, {}, {}
        t_start = time.perf_counter()
        samplers = {}
        for r in self.local:
            p, m = self.pm(r)
            t0 = time.perf_counter()
            if p not in samplers:
                lo, hi = self.bounds[p]
                samplers[p] = LayerSampler(self.graph, lo, hi, cfg.seed)
            self._timed(r, "sample", t0)
        self.samplers = samplers
        P = {}
        d0 = model.dims[0]
        for r in self.local:
            p, m = self.pm(r)
            lo, hi = self.bounds[p]
            c0, c1 = self.cols(d0, m)
            P[r] = torch.from_numpy(np.ascontiguousarray(self.X[lo:hi, c0:c1], np.float32))
            self.stats[r].mem.hold(P[r])
            self.stats[r].rows, self.stats[r].columns = hi - lo, c1 - c0
        for layer in range(model.n_layers):
            self.prepare_layer(layer, samplers)
            P = self._layer(layer, P)
        for r in self.local:
            self.stats[r].add_time("total", time.perf_counter() - t_start)
            self.stats[r].device = self.devices[r].counters.as_dict()
        out = {}
        for r, block in P.items():
            p, m = self.pm(r)
            out[r] = (self.bounds[p], self.cols(model.dims[-1], m), block)
        return out

    def _map(self, blocks: dict, fn) -> dict:
        """``fn`` applied to every block (element-wise work on column blocks); consumes."""
        out = {}
        for r in list(blocks):
            out[r] = fn(blocks[r])
            self.stats[r].mem.hold(out[r])
            self.stats[r].mem.drop(blocks.pop(r))
        return out

    def _drop(self, blocks: dict) -> None:
        for r in list(blocks):
            self.stats[r].mem.drop(blocks.pop(r))

    def _gat_layer(self, layer: int, P: dict, deal: bool) -> dict:
        """``h = act(P) Wᵀ`` (GEMM), the attention weights (:func:`sddmm.attention`), then
        ``Σ_u α_vu h_u`` per head (the weighted SpMM) plus the bias; ``act``: ELU after the
        first layer."""
        conv = self.model.convs[layer]
        d_in, d_out = self.model.dims[layer], self.model.dims[layer + 1]
        act = (lambda R: R) if layer == 0 else torch.nn.functional.elu
        with torch.no_grad():
            W = conv.lin.weight
            if deal:
                Y = self.rowwise(P, d_in, lambda R: [act(R) @ W.T], [d_out])[0]
            else:
                A = self._map(P, act)
                Y = self.cagnet_linear(A, W, None)
                self._drop(A)
            alpha = sddmm.attention(self, layer, Y, conv)
            Z = self.spmm(layer, Y, alpha, conv.heads)
            for r, z in Z.items():
                self.stats[r].mem.drop(alpha.pop(r))
                if conv.bias is not None:
                    c0, c1 = self.cols(d_out, self.pm(r)[1])
                    z += conv.bias[c0:c1]
        return Z

    def _layer(self, layer: int, P: dict) -> dict:
        model, kind, deal = self.model, self.model.kind, ring_gemm(self.model, self.cfg, layer)
        if kind == "gat":
            return self._gat_layer(layer, P, deal)
        act = self._act(layer)
        self_act = (lambda R: R) if layer == 0 else torch.relu   # SAGE's self term: relu(P)
        d_in, d_out = model.dims[layer], model.dims[layer + 1]
        with torch.no_grad():
            if kind in ("gcn", "sage"):
                lin = model.updates[layer]
                W = lin.weight
                Ws = model.selfs[layer].weight if kind == "sage" else None
                if deal:
                    fn = ((lambda R: [act(R) @ W.T]) if Ws is None else
                          (lambda R: [act(R) @ W.T, self_act(R) @ Ws.T]))
                    Ys = self.rowwise(P, d_in, fn, [d_out] * (1 if Ws is None else 2))
                else:
                    A = self._map(P, act)
                    Ys = [self.cagnet_linear(A, W, None)]
                    if Ws is not None:
                        Ys.append(self.cagnet_linear(A, Ws, None))
                    self._drop(A)
                Z = self.spmm(layer, Ys[0])
                for r, z in Z.items():
                    c0, c1 = self.cols(d_out, self.pm(r)[1])
                    if lin.bias is not None:
                        z += lin.bias[c0:c1]
                    if Ws is not None:
                        z += Ys[1][r]
                if Ws is not None:
                    self._drop(Ys[1])
                return Z
            # gin: aggregate first, then the MLP on whole rows
            if layer > 0:
                if model.norms is not None:
                    P = self.rowwise(P, d_in, lambda R: [act(R)], [d_in])[0]
                else:
                    P = self._map(P, torch.relu)
            Z = self.spmm(layer, P)
            mlp = model.updates[layer]
            if deal:
                return self.rowwise(Z, d_in, lambda R: [mlp(R)], [d_out])[0]
            T = self.cagnet_linear(Z, mlp[0].weight, mlp[0].bias)
            self._drop(Z)
            T2 = self._map(T, torch.relu)
            out = self.cagnet_linear(T2, mlp[2].weight, mlp[2].bias)
            self._drop(T2)
            return out


def assemble(parts: list[dict], n: int, width: int) -> np.ndarray:
    """The N x width embedding matrix from every process's ``(rows, cols, block)``."""
    out = np.empty((n, width), dtype=np.float32)
    filled = np.zeros((n, width), dtype=bool)
    for part in parts:
        for (lo, hi), (c0, c1), block in part.values():
            out[lo:hi, c0:c1] = np.asarray(block)
            filled[lo:hi, c0:c1] = True
    if not filled.all():
        raise RuntimeError("DEAL: the processes' blocks do not cover the embedding matrix")
    return out


# -- references ----------------------------------------------------------------------------------


