"""Host driver of the HyScale-GNN fused layer: pack a job, run it on a backend, unpack ``Y``.

``HyScaleDriver(config, backend).run(indptr, indices, X, W, b, relu=..., data=...)`` returns
``Y = act((A X) W + b)`` (float32, one row per CSR row) and the report figures. The CSR's row
``v`` lists ``v``'s in-neighbours (sources: rows of ``X``); ``data`` holds the edge weights
(``None``: GCN normalisation of the given edges, see :func:`~moagcn.sim.golden.hyscale.gcn_weights`).
Backends: ``verilator`` (the lean harness; cocotb when waveforms or a mid-job reset are asked
for), ``icarus``, ``pysim`` (the RTL) and ``model`` (golden model plus performance model).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from moagcn.errors import SimulationError, UserError
from moagcn.hw.hyscale.config import HyScaleConfig
from moagcn.sparse import validate_csr

from . import hyscale_model
from .golden import hyscale as golden
from .golden.fp32 import as_bits, as_float


@dataclass
class HyScaleJob:
    """The load streams and scalars of one job, and what is needed to unpack ``Y``."""

    streams: dict[str, np.ndarray]
    scalars: dict[str, int]
    n_dst: int
    f_in: int
    f_out: int
    edges: int
    distinct_sources: int
    row_of: np.ndarray          # hardware row of each destination (see balance_banks)


def _protocol():
    from moagcn.hw.hyscale.layer import COUNTERS, FLAGS, STREAMS

    from .lean import StreamProtocol
    return StreamProtocol(loads=STREAMS, output="out", scalars=("n_dst", "f_in", "f_out", "relu"),
                          counters=COUNTERS, flags=FLAGS)


def check_job(indptr, indices, X, W, b, data, config: HyScaleConfig, what: str = "graph"):
    """Validate a job against its shapes and the configuration; returns normalised arrays.

    ``what`` names the graph in error messages (``--graph G.npz`` from the CLI).
    """
    X = np.asarray(X)
    W = np.asarray(W)
    for name, arr in (("features", X), ("weight", W)):
        if arr.ndim != 2 or arr.dtype != np.float32:
            raise UserError(f"{name} must be a 2-D float32 array, got {arr.dtype} {arr.shape}")
    indptr, indices = validate_csr(indptr, indices, n_cols=X.shape[0], what=what)
    n_dst = indptr.size - 1
    f_in, f_out = W.shape
    if X.shape[1] != f_in:
        raise UserError(f"features have {X.shape[1]} columns but the weight has {f_in} rows; "
                        "they must match")
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
    limits = (("destinations (graph rows)", n_dst, config.max_destinations, "max_destinations"),
              ("feature rows", X.shape[0], config.max_sources, "max_sources"),
              ("edges", indices.size, config.max_edges, "max_edges"),
              ("input features", f_in, config.max_feature_width, "max_feature_width"),
              ("output features", f_out, config.max_feature_width, "max_feature_width"))
    for what, value, limit, param in limits:
        if value > limit:
            raise UserError(f"the job has {value} {what} but this configuration holds {limit}; "
                            f"use a larger preset or --param {param}=...")
    if f_in < 1 or f_out < 1:
        raise UserError(f"feature widths must be >= 1 (got f_in={f_in}, f_out={f_out})")
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


def pack_job(indptr, indices, data, X, W, b, relu: bool, config: HyScaleConfig) -> HyScaleJob:
    """The load streams of a validated job (see :class:`~moagcn.hw.hyscale.layer.HyScaleLayer`).

    Destinations are renumbered by :func:`balance_banks`; :func:`unpack_y` undoes it.
    """
    sched = golden.edge_schedule(indptr, indices, data)
    n_dst = indptr.size - 1
    row_of = balance_banks(np.diff(np.asarray(indptr, dtype=np.int64)), config.spes)
    nonempty = np.zeros(n_dst, dtype=bool)
    nonempty[row_of] = sched.nonempty
    f_in, f_out = W.shape
    words = config.mem_words_per_cycle
    fmax = config.max_feature_width
    feat = np.zeros((X.shape[0], fmax), dtype=np.uint32)
    feat[:, :f_in] = as_bits(X)
    src = (sched.sources.astype(np.uint64) | (sched.counts.astype(np.uint64) << 16))
    edge = np.zeros((sched.src.size, 2), dtype=np.uint32)
    edge[:, 0] = as_bits(sched.weight)
    edge[:, 1] = row_of[sched.dst].astype(np.uint32) | (sched.first.astype(np.uint32) << 31)
    M = config.macs
    groups = -(-f_out // M)
    wb = np.zeros((f_in + 1, groups * M), dtype=np.uint32)
    wb[:f_in, :f_out] = as_bits(W)
    if b is not None:
        wb[f_in, :f_out] = as_bits(b)
    weight = np.concatenate([wb[:, g * M:(g + 1) * M] for g in range(groups)])
    return HyScaleJob(
        streams={"feat_in": feat.reshape(-1, words),
                 "src_in": src.astype(np.uint32).reshape(-1, 1),
                 "edge_in": edge,
                 "dst_in": nonempty.astype(np.uint32).reshape(-1, 1),
                 "weight_in": np.ascontiguousarray(weight)},
        scalars={"n_dst": n_dst, "f_in": f_in, "f_out": f_out, "relu": int(relu)},
        n_dst=n_dst, f_in=f_in, f_out=f_out, edges=int(sched.src.size),
        distinct_sources=int(sched.sources.size), row_of=row_of)


def unpack_y(beats: np.ndarray, job: HyScaleJob, config: HyScaleConfig) -> np.ndarray:
    """``Y`` from the output beats, (beats, mem_words_per_cycle) uint32: row-major,
    ``ceil(f_out / mem_words_per_cycle)`` beats per row."""
    words = config.mem_words_per_cycle
    per_row = -(-job.f_out // words)
    beats = np.asarray(beats, dtype=np.uint32).reshape(-1, words)
    if beats.shape[0] != job.n_dst * per_row:
        raise SimulationError(f"the layer sent {beats.shape[0]} output beats, expected "
                              f"{job.n_dst * per_row} ({job.n_dst} rows x {per_row})")
    rows = beats.reshape(job.n_dst, per_row * words)[:, :job.f_out]
    return as_float(np.ascontiguousarray(rows[job.row_of]))


def model_cycles(job_edges: int, n_dst: int, f_in: int, f_out: int,
                 config: HyScaleConfig) -> dict:
    """Eq. 11 and 12 of HyScale-GNN in cycles of ``config``; a single job runs them in turn
    (a destination row is final only after the last source, so its update cannot start
    earlier)."""
    agg = hyscale_model.aggregate_cycles(job_edges, f_in, config)
    upd = hyscale_model.update_cycles(n_dst, f_in, f_out, config)
    return {"model_cycles_aggregate": agg, "model_cycles_update": upd,
            "model_cycles": agg + upd}


@dataclass
class HyScaleResult:
    """``Y`` and the report of one job."""

    Y: np.ndarray
    report: dict


class HyScaleDriver:
    """Run fused-layer jobs on one backend of one configuration."""

    def __init__(self, config: HyScaleConfig, backend: str = "verilator"):
        if not config.simulate and backend != "model":
            raise UserError("this configuration is for the performance model only; use "
                            "--backend model or another preset")
        self.config = config
        self.backend = backend

    def run(self, indptr, indices, X, W, b=None, *, relu: bool = False, data=None,
            idle_every: int = 0, stall_every: int = 0, waves=None,
            reset_after: int | None = None, what: str = "graph") -> HyScaleResult:
        """Compute the layer and return ``Y`` with the report figures."""
        cfg = self.config
        indptr, indices, data, X, W, b = check_job(indptr, indices, X, W, b, data, cfg, what)
        job = pack_job(indptr, indices, data, X, W, b, relu, cfg)
        model = model_cycles(job.edges, job.n_dst, job.f_in, job.f_out, cfg)
        t0 = time.perf_counter()
        if self.backend == "model":
            Y = golden.layer(indptr, indices, data, X, W, b, relu)
            counters = {"cycles_aggregate": model["model_cycles_aggregate"],
                        "cycles_update": model["model_cycles_update"],
                        "cycles_total": model["model_cycles"],
                        "feature_reads": job.distinct_sources,
                        "words_read": job.distinct_sources * job.f_in,
                        "words_written": job.n_dst * job.f_out}
            sim_s = time.perf_counter() - t0
        else:
            counters, beats, sim_s = self._run_rtl(job, idle_every, stall_every, waves,
                                                   reset_after, model["model_cycles"])
            Y = unpack_y(beats, job, cfg)
        wall = time.perf_counter() - t0
        return HyScaleResult(Y, self._report(job, counters, model, wall, sim_s))

    def _run_rtl(self, job, idle_every, stall_every, waves, reset_after, model_total):
        from moagcn.hw.designs import get_design

        from .backends import run
        from .build import generate_verilog
        from .stream_tb import int_words, stream_job
        proto = _protocol()
        design = get_design("hyscale-system")
        loads = sum(len(v) for v in job.streams.values())
        max_cycles = int(8 * model_total) + 4 * loads + 20_000
        words = self.config.mem_words_per_cycle
        if self.backend == "verilator" and waves is None and reset_after is None:
            from .lean import build_lean, run_lean
            exe = build_lean(generate_verilog(design, self.config), proto)
            res = run_lean(exe, proto, job.streams, job.scalars, words, idle_every=idle_every,
                           stall_every=stall_every, max_cycles=max_cycles)
            counters, beats, sim_s = dict(res.values), res.beats, res.wall_s
            counters["sim_cycles"] = res.cycles
        else:
            res = run(design, self.config, stream_job, self.backend, waves=waves,
                      max_cycles=max_cycles, proto=proto, streams=job.streams,
                      scalars=job.scalars, idle_every=idle_every, stall_every=stall_every,
                      reset_after=reset_after)
            counters = dict(res.value)
            beats = int_words(counters.pop("beats"), words)
            sim_s = res.wall_s
            counters["sim_cycles"] = res.cycles
        flags = {f: counters.get(f) for f in proto.flags}
        if any(flags.values()):
            # the host validated the job, so a flag means the hardware and the host disagree
            raise SimulationError(f"the layer stopped with an error flag on a validated job: "
                                  f"{flags}")
        return counters, beats, sim_s

    def _report(self, job: HyScaleJob, counters: dict, model: dict, wall: float,
                sim_s: float) -> dict:
        cfg = self.config
        agg = counters["cycles_aggregate"]
        upd = counters["cycles_update"]
        total = counters["cycles_total"]
        report = {
            **counters,
            "edges": job.edges,
            "distinct_sources": job.distinct_sources,
            "destinations": job.n_dst,
            "f_in": job.f_in,
            "f_out": job.f_out,
            **model,
            "model_error": total / model["model_cycles"] - 1 if model["model_cycles"] else 0.0,
            "spe_utilization": job.edges * job.f_in / (cfg.spes * agg) if agg else 0.0,
            "mac_utilization": (job.n_dst * job.f_in * job.f_out / (cfg.macs * upd)
                                if upd else 0.0),
            "sim_wall_s": wall,
            "sim_cycles_per_s": (counters.get("sim_cycles", total) / sim_s
                                 if sim_s > 0 and self.backend != "model" else None),
            "backend": self.backend,
            "config": asdict(cfg),
        }
        return report
