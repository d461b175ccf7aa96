"""Host driver of the S-SpMM accelerator: pack a job, run it on a backend, unpack Z.

``SSpmmDriver(config, backend).run(indptr, indices, H, M)`` returns Z (float32) and the
accelerator's counters. Backends: ``pysim``, ``verilator``, ``icarus`` (the RTL) and ``model``
(golden model plus cycle model). Each row of the adjacency is sorted before loading, which is
the accumulation order the golden model documents.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from moagcn.errors import UserError
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.sparse import sort_rows, validate_csr

from .golden import sspmm as golden
from .golden.fp32 import as_bits, as_float

STREAMS = ("indptr_in", "indices_in", "mask_in", "feat_in")


@dataclass
class PackedJob:
    """Stream payloads of one job, as Python integers."""

    n_rows: int
    n_features: int
    streams: dict[str, list[int]]
    out_beats: int


def pack_job(indptr, indices, H, mask, config: SSpmmConfig) -> PackedJob:
    """Validate a job against the configuration and pack its load streams."""
    H = np.asarray(H)
    n = indptr.size - 1
    F = H.shape[1]
    if n > config.max_nodes:
        raise UserError(f"the job has {n} rows but this configuration holds {config.max_nodes}; "
                        "use a larger preset or --param max_nodes")
    if indices.size > config.max_edges:
        raise UserError(f"the job has {indices.size} edges but the index buffer holds "
                        f"{config.max_edges}; use a larger preset or --param max_edges")
    if F > config.max_feature_width:
        raise UserError(f"feature width {F} exceeds max_feature_width={config.max_feature_width}")
    lw, lanes = config.load_width, config.lanes
    bits = as_bits(H).astype(np.uint64).astype(object)
    feat = []
    beats_per_row = -(-F // lw)
    padded = np.zeros((n, beats_per_row * lw), dtype=object)
    padded[:, :F] = bits
    for row in padded:
        for b in range(beats_per_row):
            word = 0
            for k in range(lw):
                word |= int(row[b * lw + k]) << (32 * k)
            feat.append(word)
    weights = 1 << np.arange(F, dtype=object)
    masks = [int(np.dot(r.astype(object), weights)) if F else 0 for r in mask]
    return PackedJob(n, F, {
        "indptr_in": [int(x) for x in indptr],
        "indices_in": [int(x) for x in sort_rows(indptr, indices)],
        "mask_in": masks,
        "feat_in": feat,
    }, n * -(-F // lanes))


async def run_job(io, job: PackedJob, lanes: int, idle_every: int = 0,
                  stall_every: int = 0, reset_after: int | None = None) -> dict:
    """Testbench: load the buffers, start, wait for done, read Z and the counters.

    ``idle_every = k``: every k-th cycle the load streams are idle; ``stall_every = k``: every
    k-th cycle the output is not ready (backpressure). ``reset_after = c``: reset the design
    ``c`` cycles after start and run the whole job again (checks recovery mid-job).
    """
    io.set("n_rows", job.n_rows)
    io.set("n_features", job.n_features)
    for attempt in range(2 if reset_after is not None else 1):
        pos = {name: 0 for name in STREAMS}
        cycle = 0
        while any(pos[s] < len(job.streams[s]) for s in STREAMS):
            idle = idle_every and cycle % idle_every == idle_every - 1
            valid = {}
            for s in STREAMS:
                valid[s] = not idle and pos[s] < len(job.streams[s])
                if valid[s]:
                    io.set(f"{s}__payload", job.streams[s][pos[s]])
                io.set(f"{s}__valid", int(valid[s]))
            ready = {s: await io.get(f"{s}__ready") for s in STREAMS if valid[s]}
            await io.tick()
            cycle += 1
            for s, r in ready.items():
                pos[s] += r
        for s in STREAMS:
            io.set(f"{s}__valid", 0)
        io.set("start", 1)
        await io.tick()
        io.set("start", 0)
        if attempt == 0 and reset_after is not None:
            await io.tick(reset_after)
            await io.reset(1)
            continue
    # Z streams out once aggregation is done; done rises after the last beat (or on an error)
    beats = []
    cycle = 0
    while not await io.get("done"):
        ready = not (stall_every and cycle % stall_every == stall_every - 1)
        io.set("out__ready", int(ready))
        valid = await io.get("out__valid")
        payload = await io.get("out__payload") if valid else None
        await io.tick()
        cycle += 1
        if valid and ready:
            beats.append(payload)
    io.set("out__ready", 0)
    from moagcn.hw.sspmm.top import COUNTERS
    result = {name: await io.get(name) for name in COUNTERS}
    result["err_index"] = await io.get("err_index")
    result["err_indptr"] = await io.get("err_indptr")
    result["beats"] = beats
    return result


def unpack_output(beats: list[int], n_rows: int, n_features: int, lanes: int) -> np.ndarray:
    """Z (float32, n_rows x n_features) from the output beats."""
    per_row = -(-n_features // lanes)
    words = np.zeros(n_rows * per_row * lanes, dtype=np.uint32)
    mask32 = (1 << 32) - 1
    for i, beat in enumerate(beats):
        for k in range(lanes):
            words[i * lanes + k] = (beat >> (32 * k)) & mask32
    return as_float(words).reshape(n_rows, per_row * lanes)[:, :n_features].copy()


@dataclass
class SSpmmResult:
    """Z and the report figures of one job."""

    Z: np.ndarray
    counters: dict
    backend: str
    sim_wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


class SSpmmDriver:
    """Run S-SpMM jobs on one backend of one configuration."""

    def __init__(self, config: SSpmmConfig, backend: str = "verilator"):
        self.config = config
        self.backend = backend

    def run(self, indptr, indices, H, mask=None, *, idle_every: int = 0, stall_every: int = 0,
            waves=None, reset_after: int | None = None) -> SSpmmResult:
        """Compute ``Z = (A H) ⊙ M`` and return it with the counters."""
        H = np.asarray(H)
        if H.ndim != 2 or H.dtype != np.float32:
            raise UserError(f"features must be a 2-D float32 array, got {H.dtype} {H.shape}")
        indptr, indices = validate_csr(indptr, indices, n_cols=H.shape[0])
        n = indptr.size - 1
        if H.shape[0] != n:
            raise UserError(f"features have {H.shape[0]} rows but the graph has {n} nodes")
        mask = golden.normalise_mask(mask, H.shape)
        if mask.shape != H.shape:
            raise UserError(f"mask has shape {mask.shape}; expected {H.shape} like the features")
        if self.backend == "model":
            from .sspmm_model import estimate
            t0 = time.perf_counter()
            Z = golden.sspmm(indptr, indices, H, mask)
            cycles = estimate(indptr, mask, H.shape[1], self.config)
            return SSpmmResult(Z, cycles.as_dict(), "model", time.perf_counter() - t0)
        from moagcn.hw.designs import get_design

        from .backends import run
        job = pack_job(indptr, indices, H, mask, self.config)
        # a generous bound: a design that stops making progress fails instead of hanging
        from .sspmm_model import estimate
        bound = estimate(indptr, mask, H.shape[1], self.config)
        max_cycles = 4 * bound.cycles_total + 8 * (len(job.streams["feat_in"]) + n) + 10_000
        t0 = time.perf_counter()
        res = run(get_design("sspmm"), self.config, run_job, self.backend, waves=waves,
                  job=job, lanes=self.config.lanes, idle_every=idle_every,
                  stall_every=stall_every, reset_after=reset_after, max_cycles=max_cycles)
        wall = time.perf_counter() - t0
        out = res.value
        Z = unpack_output(out.pop("beats"), n, H.shape[1], self.config.lanes)
        out["sim_cycles"] = res.cycles
        out["sim_testbench_s"] = res.wall_s
        return SSpmmResult(Z, out, self.backend, wall)
