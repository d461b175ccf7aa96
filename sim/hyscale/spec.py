"""The HyScale-GNN fused layer as a spec: ``Y = act((A X) W + b)`` (HyScale-GNN Sec. IV-C).

A job's CSR row ``v`` lists ``v``'s in-neighbours (sources: rows of ``X``); ``data`` holds the
edge weights (``None``: GCN normalisation of the given edges,
:func:`~moagcn.sim.hyscale.golden.gcn_weights`, computed once on the whole job). A job larger
than the buffers is split by destination rows (:func:`moagcn.core.tiling.plan_tiles`, sources
renumbered in ascending order, so every destination keeps its summation order and the split
job is bit for bit the whole one). An aggregation job (``aggregate_only``: ``W`` = I, no bias,
no activation, unit edge weights) also splits by feature columns, which is how the host's
sparse devices run aggregations on this design.

Counters: ``cycles_compute`` = aggregate + update cycles (the layer runs them in turn; with
``pipelined`` they overlap and it is the layer's busy span, ``cycles_total``),
``cycles_output`` = 0 (rows of Y leave during the update), ``work_adds`` = ``edges · f_in``
(the S-PE additions), ``lanes`` = S-PEs; the report adds the per-kernel utilisations.
The model device's cycles are the kernel cycle model
(:func:`~moagcn.sim.hyscale.model.kernel_cycles`); the report gives it (``model_cycles``,
against ``cycles_total``) and the paper's Eq. 11 + 12 (``paper_model_cycles``, against
``cycles_compute``) side by side.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import validate_csr
from moagcn.core.memo import ArrayMemo
from moagcn.core.spec import AcceleratorSpec, Packed, Part, StreamProtocol, overlap_loads
from moagcn.core.tiling import TileLimits, plan_tiles
from moagcn.errors import SimulationError, UserError
from moagcn.hw.hyscale import protocol
from moagcn.hw.hyscale.config import HyScaleConfig

from moagcn.sim.hyscale import model as hyscale_model
from moagcn.sim.hyscale import golden
from moagcn.sim.arith.golden import as_bits, as_float


#: long-row cuts of read-only graphs (training aggregates the same adjacency every step)
_PIECES = ArrayMemo()


def long_row_pieces(indptr, indices, config: HyScaleConfig):
    """:func:`~moagcn.sim.hyscale.golden.row_pieces` with ``config``'s buffers, as
    ``(piece_ptr, cols, order, first, count)`` with ``cols = indices[order]`` (None: every
    row fits); remembered for read-only arrays (a checked job's), and returned read-only so
    that the pieced job's tile plans are remembered too (:func:`~moagcn.core.tiling.plan_tiles`)."""
    def compute():
        cut = golden.row_pieces(indptr, indices, config.max_edges, config.max_sources)
        if cut is None:
            return None
        piece_ptr, order, first, count = cut
        cut = (piece_ptr, np.asarray(indices, dtype=np.int64)[order], order, first, count)
        for arr in cut:
            arr.flags.writeable = False
        return cut
    return _PIECES.get((indptr, indices), (config.max_edges, config.max_sources), compute)


@dataclass
class HyScaleJob:
    """One fused layer: ``Y = act((A X) W + b)`` over the CSR ``indptr`` / ``indices``."""

    indptr: np.ndarray
    indices: np.ndarray
    X: np.ndarray
    #: None for an aggregation job (``aggregate_only``): the layer runs with W = I
    W: np.ndarray | None
    b: np.ndarray | None = None
    relu: bool = False
    data: np.ndarray | None = None
    #: an aggregation ``Y = A X``: W is the identity and feature columns may be split
    aggregate_only: bool = False

    @property
    def n_dst(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def edges(self) -> int:
        return int(self.indices.size)

    @property
    def f_in(self) -> int:
        return int(self.X.shape[1] if self.W is None else self.W.shape[0])

    @property
    def f_out(self) -> int:
        return int(self.X.shape[1] if self.W is None else self.W.shape[1])

    @functools.cached_property
    def distinct_sources(self) -> int:
        """Source rows the edges name (each is read from memory once)."""
        return int(np.unique(self.indices).size)

    def weight(self) -> np.ndarray:
        """W as the layer takes it (the identity for an aggregation job)."""
        return np.eye(self.f_in, dtype=np.float32) if self.W is None else self.W


@dataclass
class PackContext:
    """What unpacking the output of a packed job needs."""

    row_of: np.ndarray          # hardware row of each destination (see balance_banks)


def check_job(indptr, indices, X, W, b, data, config: HyScaleConfig, what: str = "graph"):
    """Validate a job's shapes and dtypes; returns normalised ``(indptr, indices, data, X, W,
    b)``. ``what`` names the graph in error messages (``--graph G.npz`` from the CLI).

    Buffer limits are the split's business, except the feature widths, which a layer cannot
    split: they must fit ``max_feature_width``.
    """
    X = np.asarray(X)
    W = np.asarray(W)
    for name, arr in (("features", X), ("weight", W)):
        if arr.ndim != 2 or arr.dtype != np.float32:
            raise UserError(f"{name} must be a 2-D float32 array, got {arr.dtype} {arr.shape}")
    indptr, indices = validate_csr(indptr, indices, n_cols=X.shape[0], what=what)
    f_in, f_out = W.shape
    if X.shape[1] != f_in:
        raise UserError(f"features have {X.shape[1]} columns but the weight has {f_in} rows; "
                        "they must match")
    if f_in < 1 or f_out < 1:
        raise UserError(f"feature widths must be >= 1 (got f_in={f_in}, f_out={f_out})")
    if b is not None:
        b = np.asarray(b)
        if b.dtype != np.float32 or b.shape != (f_out,):
            raise UserError(f"bias must be float32 of shape ({f_out},), got {b.dtype} {b.shape}")
    if data is None:
        data = golden.gcn_weights(indptr, indices, X.shape[0])
    else:
        data = np.asarray(data)
        if data.dtype != np.float32 or data.shape != indices.shape:
            raise UserError(f"edge weights (data) must be float32 with one entry per edge "
                            f"({indices.size}), got {data.dtype} {data.shape}")
    for name, value in (("input features", f_in), ("output features", f_out)):
        if value > config.max_feature_width:
            raise UserError(f"the job has {value} {name} but this configuration holds "
                            f"{config.max_feature_width}; use a larger preset or "
                            "--param max_feature_width=...")
    return indptr, indices, data, X, W, b


def balance_banks(in_degree: np.ndarray, banks: int) -> np.ndarray:
    """Hardware row of each destination so that the G-PE banks get even edge counts.

    Row ``r`` lives in bank ``r mod banks``. Destinations go, largest in-degree first, to the
    bank with the fewest edges that still has a free row (longest-processing-time greedy); rows
    stay ``0 .. n - 1``, so the result is a permutation. A destination's accumulation order does
    not depend on its row, so the outputs are unchanged.
    """
    n = in_degree.size
    free_rows = [list(range(b, n, banks)) for b in range(banks)]
    load = np.zeros(banks, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    for v in np.argsort(-in_degree, kind="stable"):
        open_banks = [b for b in range(banks) if free_rows[b]]
        b = min(open_banks, key=lambda k: (load[k], k))
        row_of[v] = free_rows[b].pop(0)
        load[b] += in_degree[v]
    return row_of


def rows_by_completion(last_edge: np.ndarray, in_degree: np.ndarray, banks: int) -> np.ndarray:
    """Hardware row of each destination for a pipelined layer, whose update takes rows in
    order as their aggregation completes: destinations in the order their last in-edge comes
    (those without in-edges first: they are complete from the start), cut into windows of
    ``banks``; within a window, largest in-degree first to the bank with the fewest edges so
    far (the greedy of :func:`balance_banks`, one row per bank per window). Rows then complete
    nearly in order and the banks' edge counts stay close. A permutation, like
    :func:`balance_banks`'s; the outputs do not depend on it."""
    n = in_degree.size
    order = np.lexsort((np.arange(n), last_edge))
    load = np.zeros(banks, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    for w0 in range(0, n, banks):
        window = order[w0:w0 + banks]
        free = list(range(window.size))       # the last window may be short
        for v in window[np.argsort(-in_degree[window], kind="stable")]:
            b = min(free, key=lambda k: (load[k], k))
            free.remove(b)
            row_of[v] = w0 + b
            load[b] += in_degree[v]
    return row_of


def pack_job(indptr, indices, data, X, W, b, relu: bool, config: HyScaleConfig) -> Packed:
    """The load streams of a validated job that fits the buffers (see
    :class:`~moagcn.hw.hyscale.layer.HyScaleLayer`). Destinations are renumbered by
    :func:`hardware_rows`; :func:`unpack_y` undoes it."""
    n_dst = indptr.size - 1
    limits = (("destinations (graph rows)", n_dst, config.max_destinations, "max_destinations"),
              ("feature rows", X.shape[0], config.max_sources, "max_sources"),
              ("edges", indices.size, config.max_edges, "max_edges"))
    for what, value, limit, param in limits:
        if value > limit:
            raise UserError(f"the job has {value} {what} but this configuration holds {limit}; "
                            f"use a larger preset or --param {param}=...")
    sched = golden.edge_schedule(indptr, indices, data)
    last, last_at = last_edges(sched.dst, n_dst)
    row_of = hardware_rows(sched.dst, np.diff(np.asarray(indptr, dtype=np.int64)), config,
                           last_at)
    nonempty = np.zeros(n_dst, dtype=bool)
    nonempty[row_of] = sched.nonempty
    f_in, f_out = W.shape
    words = config.mem_words_per_cycle
    fmax = config.max_feature_width
    feat = np.zeros((X.shape[0], fmax), dtype=np.uint32)
    feat[:, :f_in] = as_bits(X)
    # the words' fields where protocol.SOURCE_WORD / EDGE_WORD put them (the edge word as two
    # 32-bit columns: the weight below, the destination and the flags above)
    src_at = protocol.field_offsets(protocol.SOURCE_WORD)
    edge_at = {name: at - 32 for name, at in protocol.field_offsets(protocol.EDGE_WORD).items()}
    src = ((sched.sources.astype(np.uint64) << src_at["index"])
           | (sched.counts.astype(np.uint64) << src_at["count"]))
    edge = np.zeros((sched.src.size, 2), dtype=np.uint32)
    edge[:, 0] = as_bits(sched.weight)
    edge[:, 1] = ((row_of[sched.dst].astype(np.uint32) << edge_at["dst"])
                  | (last.astype(np.uint32) << edge_at["last"])
                  | (sched.first.astype(np.uint32) << edge_at["first"]))
    M = config.macs
    groups = -(-f_out // M)
    wb = np.zeros((f_in + 1, groups * M), dtype=np.uint32)
    wb[:f_in, :f_out] = as_bits(W)
    if b is not None:
        wb[f_in, :f_out] = as_bits(b)
    weight = np.concatenate([wb[:, g * M:(g + 1) * M] for g in range(groups)])
    return Packed(
        {"feat_in": feat.reshape(-1, words),
         "src_in": src.astype(np.uint32).reshape(-1, 1),
         "edge_in": edge,
         "dst_in": nonempty.astype(np.uint32).reshape(-1, 1),
         "weight_in": np.ascontiguousarray(weight)},
        {"n_dst": n_dst, "f_in": f_in, "f_out": f_out, "relu": int(relu)},
        PackContext(row_of))


def unpack_y(beats: np.ndarray, packed: Packed, n_dst: int, f_out: int,
             config: HyScaleConfig) -> np.ndarray:
    """``Y`` from the output beats, (beats, mem_words_per_cycle) uint32: row-major,
    ``ceil(f_out / mem_words_per_cycle)`` beats per row."""
    words = config.mem_words_per_cycle
    per_row = -(-f_out // words)
    beats = np.asarray(beats, dtype=np.uint32).reshape(-1, words)
    if beats.shape[0] != n_dst * per_row:
        raise SimulationError(f"the layer sent {beats.shape[0]} output beats, expected "
                              f"{n_dst * per_row} ({n_dst} rows x {per_row})")
    rows = beats.reshape(n_dst, per_row * words)[:, :f_out]
    return as_float(np.ascontiguousarray(rows[packed.context.row_of]))


def kernel_schedule(indptr, indices, config: HyScaleConfig, with_rows: bool = False):
    """What :func:`~moagcn.sim.hyscale.model.aggregate_kernel_cycles` replays: for each edge in
    the kernel's order (sorted by source), the position of its source in the source list and
    the G-PE bank of its destination's hardware row (:func:`hardware_rows`); with
    ``with_rows`` also that row."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    dst = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    src = indices[order]
    row_of = hardware_rows(dst[order], np.diff(indptr), config)
    rows = row_of[dst[order]]
    banks = rows % config.spes
    position = np.cumsum(np.r_[False, src[1:] != src[:-1]]) if src.size else src
    if with_rows:
        return position.tolist(), banks.tolist(), rows.tolist()
    return position.tolist(), banks.tolist()


def last_edges(edge_dst: np.ndarray, n_dst: int) -> tuple[np.ndarray, np.ndarray]:
    """For edges in kernel order with destinations ``edge_dst``: a flag on the last edge into
    each destination, and each destination's last edge (-1: none)."""
    flag = np.zeros(edge_dst.size, dtype=np.uint32)
    at = np.full(n_dst, -1, dtype=np.int64)
    if edge_dst.size:
        _, from_end = np.unique(edge_dst[::-1], return_index=True)
        pos = edge_dst.size - 1 - from_end
        flag[pos] = 1
        at[edge_dst[pos]] = pos
    return flag, at


def hardware_rows(edge_dst: np.ndarray, in_degree: np.ndarray, config: HyScaleConfig,
                  last_at: np.ndarray | None = None):
    """Each destination's hardware row: :func:`rows_by_completion` on a pipelined layer (on
    ``last_at``, :func:`last_edges`' second result, when the caller has it), :func:`balance_banks`
    otherwise."""
    if config.pipelined:
        if last_at is None:
            last_at = last_edges(edge_dst, in_degree.size)[1]
        return rows_by_completion(last_at, in_degree, config.spes)
    return balance_banks(in_degree, config.spes)


def paper_model_cycles(edges: int, n_dst: int, f_in: int, f_out: int,
                       config: HyScaleConfig) -> dict:
    """Eq. 11 and 12 of HyScale-GNN in cycles of ``config``; a single job runs them in turn
    (a destination row is final only after the last source, so its update cannot start
    earlier). Compare with ``cycles_compute`` (no load phase)."""
    agg = hyscale_model.aggregate_cycles(edges, f_in, config)
    upd = hyscale_model.update_cycles(n_dst, f_in, f_out, config)
    return {"paper_model_cycles_aggregate": agg, "paper_model_cycles_update": upd,
            "paper_model_cycles": agg + upd}


def job_kernel_cycles(job: "HyScaleJob", config: HyScaleConfig, replay: bool = True) -> dict:
    """:func:`~moagcn.sim.hyscale.model.kernel_cycles` of one job that fits the buffers (its
    edge schedule replayed, or with ``replay=False`` the closed-form aggregate bound on its
    per-bank edge counts; its feature rows loaded)."""
    sources, banks, rows = kernel_schedule(job.indptr, job.indices, config, with_rows=True)
    return hyscale_model.kernel_cycles(
        config, edges=job.edges, distinct_sources=job.distinct_sources, destinations=job.n_dst,
        f_in=job.f_in, f_out=job.f_out, schedule=(sources, banks) if replay else None,
        bank_edges=np.bincount(banks, minlength=config.spes).tolist(),
        feature_rows=int(job.X.shape[0]), edge_rows=rows if replay else None)


class HyScaleSpec(AcceleratorSpec):
    name = "hyscale"
    capabilities = frozenset({"dense"})
    protocol = StreamProtocol.of(protocol)

    def lanes(self, config: HyScaleConfig) -> int:
        return config.spes

    def loads_overlap(self, config: HyScaleConfig) -> bool:
        return config.load_banks == 2

    def output_words(self, config: HyScaleConfig) -> int:
        return config.mem_words_per_cycle

    def job(self, indptr, indices, X, W, b=None, *, relu: bool = False, data=None) -> HyScaleJob:
        return HyScaleJob(indptr, indices, X, W, b, relu, data)

    # -- jobs -----------------------------------------------------------------------------------

    def check(self, job: HyScaleJob, config, what: str = "graph") -> HyScaleJob:
        if job.aggregate_only:
            X = np.asarray(job.X)
            if X.ndim != 2 or X.dtype != np.float32:
                raise UserError(f"features must be a 2-D float32 array, got {X.dtype} {X.shape}")
            indptr, indices = validate_csr(job.indptr, job.indices, n_cols=X.shape[0], what=what)
            return self._aggregation(indptr, indices, np.ascontiguousarray(X))
        indptr, indices, data, X, W, b = check_job(job.indptr, job.indices, job.X, job.W, job.b,
                                                   job.data, config, what)
        return HyScaleJob(indptr, indices, X, W, b, bool(job.relu), data)

    def expand(self, job: HyScaleJob, config: HyScaleConfig):
        """An aggregation job's rows longer than any job holds (more than ``max_edges`` edges
        or ``max_sources`` distinct sources) as pieces of ``min(max_edges, max_sources)``
        edges, each a row of the job the accelerator runs, and the function that adds each
        row's pieces on the host, in order (:func:`~moagcn.sim.hyscale.golden.row_pieces`,
        the golden model's ``buffer`` rule). A fused layer's update needs a row's whole
        aggregate: such a layer runs as two jobs (:meth:`passes`)."""
        if not job.aggregate_only:
            return job, None
        cut = long_row_pieces(job.indptr, job.indices, config)
        if cut is None:
            return job, None
        piece_ptr, cols, order, first, count = cut
        data = np.ones(cols.size, np.float32) if job.data is None else \
            np.asarray(job.data, np.float32)[order]

        def merge(out: np.ndarray) -> np.ndarray:
            return golden.sum_pieces(out, first, count)

        return HyScaleJob(piece_ptr, cols, job.X, None, data=data, aggregate_only=True), merge

    def passes(self, job: HyScaleJob, config: HyScaleConfig):
        """A fused layer with a row longer than any job holds runs as two jobs: its
        aggregation (whose long rows :meth:`expand` runs in pieces), then the update of the
        aggregates as a dense job (:meth:`dense_job`, with the layer's bias and ReLU), so the
        systolic array gets each row's whole aggregate; None for any other job."""
        if job.aggregate_only or long_row_pieces(job.indptr, job.indices, config) is None:
            return None
        n = job.n_dst
        data = golden.gcn_weights(job.indptr, job.indices, job.X.shape[0]) \
            if job.data is None else job.data       # (check's default, for an unchecked job)
        first = HyScaleJob(job.indptr, job.indices, job.X, None, data=data, aggregate_only=True)

        def second(Z: np.ndarray) -> HyScaleJob:
            return HyScaleJob(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64),
                              np.ascontiguousarray(Z, dtype=np.float32), job.W, job.b,
                              job.relu, np.ones(n, np.float32))
        return first, second

    def limits(self, job: HyScaleJob, config: HyScaleConfig) -> TileLimits:
        width = config.max_feature_width if job.aggregate_only else max(job.f_in, 1)
        return TileLimits(config.max_destinations, config.max_sources, config.max_edges, width,
                          square=False, rows_param="max_destinations",
                          cols_param="max_sources")

    def split(self, job: HyScaleJob, config) -> list[Part]:
        tiles = plan_tiles(job.indptr, job.indices, job.n_dst, job.X.shape[0], job.f_in,
                           self.limits(job, config))
        if len(tiles) == 1 and tiles[0].cols.size == job.X.shape[0] \
                and tiles[0].width == job.f_in:
            return [Part(job)]

        def part_job(t):
            lo = int(job.indptr[t.rows_start])
            data = job.data[lo:lo + t.indices.size]
            if job.aggregate_only:
                return HyScaleJob(t.indptr, t.indices, t.features(job.X), None, data=data,
                                  aggregate_only=True)
            return HyScaleJob(t.indptr, t.indices, np.ascontiguousarray(job.X[t.cols]), job.W,
                              job.b, job.relu, data)
        return [Part(tile=t, make=lambda t=t: part_job(t)) for t in tiles]

    def empty_output(self, job: HyScaleJob) -> np.ndarray:
        return np.zeros((job.n_dst, job.f_out), dtype=np.float32)

    def place(self, out, part: Part, part_out) -> None:
        part_out = part.in_job_order(part_out)
        if part.tile is None:
            out[...] = part_out
        elif part.job.aggregate_only:
            part.tile.place(out, part_out)
        else:
            out[part.tile.rows_start:part.tile.rows_stop] = part_out

    def work(self, job: HyScaleJob, config) -> Counters:
        return Counters(work_adds=job.edges * job.f_in, elements=job.n_dst * job.f_out,
                        unmasked=job.n_dst * job.f_out)

    def traffic(self, job: HyScaleJob, config: HyScaleConfig) -> tuple[int, int]:
        """Bytes read (distinct source rows from memory, the edge list, the weights) and
        written (Y) by one part."""
        M = config.macs
        weight_words = (job.f_in + 1) * -(-job.f_out // M) * M
        edge_words = 2 * job.edges + job.distinct_sources + job.n_dst
        feature_words = job.distinct_sources * job.f_in
        return 4 * (feature_words + edge_words + weight_words), 4 * job.n_dst * job.f_out

    # -- models ---------------------------------------------------------------------------------

    def golden(self, job: HyScaleJob, config) -> np.ndarray:
        if job.aggregate_only:
            # the layer's update with W = I, no bias, no ReLU returns Z bit for bit: each output
            # adds z * 1 = z to +0, then products z' * 0 = +-0, which change neither a finite z
            # (an aggregate is never -0: it starts from +0) nor the canonical NaN. Skipping it
            # saves f_in^2 emulated multiply-adds per row. A row longer than the buffers is the
            # sum of its pieces (:meth:`expand`).
            cut = long_row_pieces(job.indptr, job.indices, config)
            data = np.ones(job.edges, np.float32) if job.data is None else job.data
            return golden.aggregate_cut(job.indptr, job.indices, data, job.X,
                                        None if cut is None else (cut[0], *cut[2:]))
        # a fused layer with a long row: the aggregation in pieces, then the update (passes)
        return golden.layer(job.indptr, job.indices, job.data, job.X, job.W, job.b, job.relu,
                            buffer=(config.max_edges, config.max_sources))

    def cycles(self, job: HyScaleJob, config: HyScaleConfig) -> Counters:
        """The kernel cycle model (:func:`job_kernel_cycles`): what the RTL's counters read
        with no idle load cycles and no output backpressure."""
        k = job_kernel_cycles(job, config)
        agg, upd = k["aggregate"], k["update"]
        c = Counters(cycles_load=k["load"], cycles_compute=k["compute"],
                     extra={"cycles_aggregate": agg, "cycles_update": upd,
                            "feature_reads": job.distinct_sources,
                            "words_read": job.distinct_sources * job.f_in,
                            "words_written": job.n_dst * job.f_out})
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        return c

    # -- the hardware ---------------------------------------------------------------------------

    def pack(self, job: HyScaleJob, config) -> Packed:
        return pack_job(job.indptr, job.indices, job.data, job.X, job.weight(), job.b,
                        job.relu, config)

    def unpack(self, words, packed: Packed, job: HyScaleJob, config) -> np.ndarray:
        return unpack_y(words, packed, job.n_dst, job.f_out, config)

    def hardware_counters(self, raw, job: HyScaleJob, config) -> Counters:
        """The layer's counters of one job. ``cycles_load`` is the load time the job added:
        its load cycles less those overlapped with the previous job
        (``extra["cycles_load_hidden"]``, non-zero only when jobs run back to back on two
        load banks)."""
        mapped = ("cycles_total", "cycles_load")
        c = Counters(cycles_load=int(raw["cycles_load"]) - int(raw.get("cycles_load_hidden", 0)),
                     cycles_compute=(int(raw["cycles_total"]) if config.pipelined else
                                     int(raw["cycles_aggregate"]) + int(raw["cycles_update"])),
                     extra={k: int(raw[k]) for k in self.protocol.counters if k not in mapped})
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        return c

    def max_cycles(self, job: HyScaleJob, packed: Packed, config) -> int:
        model = job_kernel_cycles(job, config)["total"]
        loads = sum(len(v) for v in packed.streams.values())
        return int(4 * model) + 4 * loads + 20_000

    # -- dense products ---------------------------------------------------------------------------

    def dense_job(self, X, W, b=None) -> HyScaleJob:
        """``Y = X W + b`` as a fused-layer job whose aggregation is the identity (one edge of
        weight 1 per row: each row's aggregate is its own features, bit for bit), so the
        systolic array computes the product: what a trainer's update and its two backward
        products run as (:meth:`moagcn.sim.device.AcceleratorDevice.linear`)."""
        n = int(np.shape(X)[0])
        return HyScaleJob(np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64), X, W,
                          b, False, np.ones(n, np.float32))

    # -- aggregation ----------------------------------------------------------------------------

    def aggregation_job(self, indptr, indices, H, M, config) -> HyScaleJob:
        return self._aggregation(indptr, indices, H)

    @staticmethod
    def _aggregation(indptr, indices, X) -> HyScaleJob:
        """A checked aggregation job: unit edge weights, W = I, no bias, no activation."""
        return HyScaleJob(indptr, indices, X, None, data=np.ones(indices.size, np.float32),
                          aggregate_only=True)

    def aggregation_output(self, out, job, M) -> np.ndarray:
        return np.where(M, out, np.float32(0.0))

    # -- report ---------------------------------------------------------------------------------

    def kernel_model(self, job: HyScaleJob, config: HyScaleConfig, replay: bool = True) -> dict:
        """The kernel cycle model of a checked job, summed over the parts it runs as:
        ``model_cycles_load`` (exposed), ``model_cycles_load_hidden``, ``_aggregate``,
        ``_update``, ``_compute`` and ``model_cycles`` (exposed loads + compute, the
        prediction of ``cycles_total``); ``replay``: see :func:`job_kernel_cycles`. With two
        load banks each part's loads overlap the part before, as in
        :func:`~moagcn.core.spec.overlap_loads`."""
        two = self.passes(job, config)
        if two is not None:     # the two jobs' models added (the second's shape is known)
            a = self.kernel_model(two[0], config, replay)
            b = self.kernel_model(two[1](self.empty_output(two[0])), config, replay)
            return {k: a[k] + b[k] for k in a}
        total = {"load": 0, "hidden": 0, "aggregate": 0, "update": 0, "compute": 0}
        previous = None
        for part in self.split(self.expand(job, config)[0], config):
            k = job_kernel_cycles(part.job, config, replay)
            c = Counters(cycles_load=k["load"], cycles_compute=k["compute"])
            if self.loads_overlap(config):
                c = overlap_loads(previous, c)
            previous = c
            total["load"] += c.cycles_load
            total["hidden"] += c.extra.get("cycles_load_hidden", 0)
            for key in ("aggregate", "update", "compute"):
                total[key] += k[key]
        return {"model_cycles_load": total["load"], "model_cycles_load_hidden": total["hidden"],
                "model_cycles_aggregate": total["aggregate"],
                "model_cycles_update": total["update"], "model_cycles_compute": total["compute"],
                "model_cycles": total["load"] + total["compute"]}

    def report(self, result, job: HyScaleJob, config: HyScaleConfig) -> dict:
        """The figures of one layer run: counters, the kernel cycle model and the paper's Eq.
        11-12 model beside them, the per-kernel utilisations."""
        c = result.counters
        model = self.kernel_model(job, config)
        paper = paper_model_cycles(job.edges, job.n_dst, job.f_in, job.f_out, config)
        agg = c.extra.get("cycles_aggregate", 0)
        upd = c.extra.get("cycles_update", 0)
        compute = c.cycles_compute
        return {
            **c.as_dict(),
            "edges": job.edges,
            "distinct_sources": job.distinct_sources,
            "destinations": job.n_dst,
            "f_in": job.f_in,
            "f_out": job.f_out,
            **model,
            "model_error": (c.cycles_total / model["model_cycles"] - 1
                            if model["model_cycles"] else 0.0),
            "model_error_compute": (compute / model["model_cycles_compute"] - 1
                                    if model["model_cycles_compute"] else 0.0),
            **paper,
            "paper_model_error": (compute / paper["paper_model_cycles"] - 1
                                  if paper["paper_model_cycles"] else 0.0),
            "spe_utilization": job.edges * job.f_in / (config.spes * agg) if agg else 0.0,
            "mac_utilization": (job.n_dst * job.f_in * job.f_out / (config.macs * upd)
                                if upd else 0.0),
            "sim_cycles_per_s": c.sim_cycles_per_s if result.device == "rtl" else None,
            "device": result.device,
            "simulator": result.simulator,
            "config": asdict(config),
        }


SPEC = HyScaleSpec()
