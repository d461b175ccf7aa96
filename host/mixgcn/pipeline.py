"""Fine-grain pipeline between a sparse accelerator and a dense worker (MixGCN Sec. 3.2.2).

The nodes, in processing order, are cut into ``s`` equal batches. For every layer the sparse unit
aggregates batch after batch and the dense unit updates each batch as soon as its aggregation is
done. Aggregating batch ``k`` of layer ``l + 1`` needs the updated features of every neighbour,
i.e. the dense unit must have finished batch ``dep[k]`` of layer ``l``, where ``dep[k]`` is the
last batch holding a neighbour of a node in batch ``k``. With the graph bandwidth
``b = max over edges |p_u - p_v|`` this is at most ``k + ceil(b / (n / s))``; the first batch of a
layer waits for nothing iff it depends only on the first ``s - 1`` batches, which for equal batch
times gives Prop. 3.5: no idleness when ``(n - b) / 2n >= 1 / s``, i.e. with at least
``ceil(2n / (n - b))`` stages. Reverse Cuthill-McKee ordering lowers ``b``.

:func:`simulate` runs the two units as an event timeline from per-batch cycle counts: sparse
batches from the design's cycle model through the driver (each batch's aggregation job with all
of its neighbours' feature rows, tiled to the buffers as a device tiles it; output mask of the
configured density), dense batches from a measured torch update time (or a given rate) at the
accelerator clock. It reports the makespan, each unit's busy and stall cycles, and
``idle_fraction``: the share of the makespan during which the bottleneck unit (the one with more
busy cycles) does not work. A perfect pipeline leaves only the fill (or drain) of one batch; every
dependency stall that delays the bottleneck adds to it.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.core.spec import get_spec
from moagcn.sim.driver import Driver

from moagcn.host.graphs.ops import CSRGraph, contiguous_ranges


def stages_prop35(n: int, b: int) -> int:
    """Fewest batches ``s`` with ``(n - b) / 2n >= 1 / s`` (Prop. 3.5): ``ceil(2n / (n - b))``."""
    if not 0 <= b < n:
        raise UserError(f"bandwidth b = {b} must be in 0..n-1 for n = {n} nodes")
    return math.ceil(2 * n / (n - b))


def prop35_holds(n: int, b: int, s: int) -> bool:
    """Prop. 3.5's condition ``(n - b) / 2n >= 1 / s`` (in exact integer arithmetic)."""
    return (n - b) * s >= 2 * n


def batch_dependencies(adj: CSRGraph, s: int) -> np.ndarray:
    """``dep[k]``: the last batch holding a column used by a row of batch ``k`` (``k`` if none)."""
    n = adj.n_nodes
    ranges = contiguous_ranges(n, s)
    starts = np.array([a for a, _ in ranges])
    col_batch = np.searchsorted(starts, adj.indices, side="right") - 1
    row_batch = np.searchsorted(starts, adj.row_ids(), side="right") - 1
    dep = np.arange(s)
    np.maximum.at(dep, row_batch, col_batch)
    return dep


@dataclass
class Timeline:
    """Start and end cycle of every batch on both units: ``[layer][batch]``."""

    sparse_start: list[list[int]]
    sparse_end: list[list[int]]
    dense_start: list[list[int]]
    dense_end: list[list[int]]

    @property
    def makespan(self) -> int:
        return self.dense_end[-1][-1]

    def busy(self, unit: str) -> int:
        s, e = (self.sparse_start, self.sparse_end) if unit == "sparse" else \
            (self.dense_start, self.dense_end)
        return int(sum(b - a for ls, le in zip(s, e) for a, b in zip(ls, le)))

    def stall(self, unit: str) -> int:
        """Cycles ``unit`` waits between its first and its last batch.

        The sparse unit waits for dense outputs its next batch depends on; the dense unit waits
        for the aggregation of its next batch. Pipeline fill and drain are not stalls.
        """
        s, e = (self.sparse_start, self.sparse_end) if unit == "sparse" else \
            (self.dense_start, self.dense_end)
        starts = [x for layer in s for x in layer]
        ends = [x for layer in e for x in layer]
        return int(sum(max(0, b - a) for a, b in zip(ends[:-1], starts[1:])))

    def sparse_stall(self) -> int:
        """:meth:`stall` of the sparse unit (dependency waits)."""
        return self.stall("sparse")


def simulate(sparse_cycles, dense_cycles, dep) -> Timeline:
    """Event timeline of ``L`` layers x ``s`` batches on one sparse and one dense unit.

    ``sparse_cycles[l][k]`` and ``dense_cycles[l][k]`` are batch durations; ``dep[k]`` the last
    batch of the previous layer's dense output that batch ``k`` needs. Both units take batches
    in order; layer 0 depends on the input features only.
    """
    L, s = len(sparse_cycles), len(dep)
    ss = [[0] * s for _ in range(L)]
    se = [[0] * s for _ in range(L)]
    ds = [[0] * s for _ in range(L)]
    de = [[0] * s for _ in range(L)]
    sparse_free = dense_free = 0
    for layer in range(L):
        for k in range(s):
            ready = de[layer - 1][dep[k]] if layer else 0
            ss[layer][k] = max(sparse_free, ready)
            se[layer][k] = sparse_free = ss[layer][k] + int(sparse_cycles[layer][k])
            ds[layer][k] = max(dense_free, se[layer][k])
            de[layer][k] = dense_free = ds[layer][k] + int(dense_cycles[layer][k])
    return Timeline(ss, se, ds, de)


def sparse_batch_cycles(adj: CSRGraph, s: int, width: int, config,
                        mask_density: float = 0.5, seed: int = 0,
                        design: str = "sspmm") -> list[int]:
    """Accelerator cycles (load + compute + output) of every batch's rows at ``width`` features.

    Each batch is the aggregation job of its rows (all their neighbours' feature rows), run
    through the design's cycle model by the driver, so jobs larger than the buffers are tiled
    exactly as a device would tile them. The output mask is random with ``mask_density`` ones
    (dropout keeps about half).
    """
    rng = np.random.default_rng(seed)
    spec = get_spec(design)
    driver = Driver(spec, config, device="model")
    H = np.zeros((adj.n_cols, width), dtype=np.float32)
    out = []
    for a, b in contiguous_ranges(adj.n_nodes, s):
        indptr = adj.indptr[a:b + 1] - adj.indptr[a]
        indices = adj.indices[adj.indptr[a]:adj.indptr[b]]
        mask = rng.random((b - a, width)) < mask_density
        job = spec.aggregation_job(indptr, indices, H, mask, config)
        out.append(driver.estimate(job).cycles_total)
    return out


@functools.lru_cache(maxsize=None)
def measure_dense_seconds_per_mac(d_in: int, d_out: int, rows: int = 4096, repeats: int = 7,
                                  device: torch.device | None = None) -> float:
    """Median seconds per multiply-accumulate of a torch ``relu(Z W)`` of this shape.

    Measured once per shape and process, so that orders compared in one run share the figure.
    """
    device = device or torch.device("cpu")
    Z = torch.randn(rows, d_in, device=device)
    W = torch.randn(d_in, d_out, device=device)
    times = []
    for _ in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.relu(Z @ W)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:])) / (rows * d_in * d_out)


@dataclass
class PipelineReport:
    """Figures of one pipeline configuration (see the module docstring)."""

    n: int
    batches: int
    reorder: str
    bandwidth: int
    stages_prop35: int
    prop35_holds: bool
    min_granularity: float
    makespan_cycles: int
    idle_fraction: float
    bottleneck: str
    sparse_stall_cycles: int
    dense_stall_cycles: int
    sparse_busy_cycles: int
    dense_busy_cycles: int
    sparse_utilization: float
    dense_utilization: float
    first_batch_dependency: int
    widths: list[int]
    dense_cycles_source: str
    sparse_cycles: list[list[int]] = field(repr=False)
    dense_cycles: list[list[int]] = field(repr=False)
    dependencies: list[int] = field(repr=False)

    def timeline(self) -> Timeline:
        """The simulated timeline (recomputed from the stored batch cycles)."""
        return simulate(self.sparse_cycles, self.dense_cycles, self.dependencies)

    def as_dict(self) -> dict:
        return asdict(self)


def analyze(graph: CSRGraph, batches: int, widths: list[int], config,
            reorder: str = "none", self_loops: bool = True, mask_density: float = 0.5,
            dense_macs_per_cycle: float | None = None, seed: int = 0,
            dense_device: torch.device | None = None) -> PipelineReport:
    """Simulate the forward pass of a GNN with aggregation widths ``widths[:-1]`` and update
    widths ``widths[l] -> widths[l+1]`` on ``graph`` cut into ``batches`` batches.

    ``reorder``: ``none`` (the given order) or ``rcm``. ``dense_macs_per_cycle``: dense speed in
    multiply-accumulates per accelerator cycle; default: measured with torch on this machine.
    """
    n = graph.n_nodes
    if not 1 <= batches <= n:
        raise UserError(f"--batches {batches}: must be in 1..{n} (the node count)")
    if len(widths) < 2 or min(widths) < 1:
        raise UserError(f"widths {widths}: need at least an input and an output width >= 1")
    if reorder == "rcm":
        graph = graph.permute(graph.rcm_order())
    elif reorder != "none":
        raise UserError(f"--reorder {reorder!r}: choose rcm or none")
    adj = graph.with_self_loops() if self_loops else graph
    b = graph.bandwidth()
    dep = batch_dependencies(adj, batches)
    layers = len(widths) - 1
    sparse = [sparse_batch_cycles(adj, batches, widths[l], config, mask_density, seed + l)
              for l in range(layers)]
    rows = np.array([q - p for p, q in contiguous_ranges(n, batches)])
    hz = config.clock_mhz * 1e6
    dense = []
    for l in range(layers):
        macs = rows * widths[l] * widths[l + 1]
        if dense_macs_per_cycle is not None:
            cyc = np.ceil(macs / dense_macs_per_cycle)
        else:
            spm = measure_dense_seconds_per_mac(widths[l], widths[l + 1], device=dense_device)
            cyc = np.ceil(macs * spm * hz)
        dense.append([int(c) for c in np.maximum(cyc, 1)])
    tl = simulate(sparse, dense, dep)
    span = tl.makespan
    busy = {u: tl.busy(u) for u in ("sparse", "dense")}
    bottleneck = max(busy, key=busy.get)
    return PipelineReport(
        n=n, batches=batches, reorder=reorder, bandwidth=b, stages_prop35=stages_prop35(n, b),
        prop35_holds=prop35_holds(n, b, batches), min_granularity=(n - b) / (2 * n),
        makespan_cycles=span, idle_fraction=1.0 - busy[bottleneck] / span if span else 0.0,
        bottleneck=bottleneck, sparse_stall_cycles=tl.stall("sparse"),
        dense_stall_cycles=tl.stall("dense"), sparse_busy_cycles=busy["sparse"],
        dense_busy_cycles=busy["dense"],
        sparse_utilization=busy["sparse"] / span if span else 0.0,
        dense_utilization=busy["dense"] / span if span else 0.0,
        first_batch_dependency=int(dep[0]), widths=list(widths),
        dense_cycles_source=("given" if dense_macs_per_cycle is not None
                             else f"measured torch on {dense_device or 'cpu'}"),
        sparse_cycles=sparse, dense_cycles=dense, dependencies=[int(x) for x in dep])
