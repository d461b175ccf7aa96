"""Host driver of the S-SpMM accelerator: pack a job, run it on a backend, unpack Z.

``SSpmmDriver(config, backend).run(indptr, indices, H, M)`` returns Z (float32) and the
accelerator's counters. Backends: ``pysim``, ``verilator``, ``icarus`` (the RTL) and ``model``
(golden model plus cycle model). Each row of the adjacency is sorted before loading, which is
the accumulation order the golden model documents. A job larger than the configuration's
buffers runs as several accelerator jobs (:mod:`moagcn.sim.sspmm_tiling`), bit for bit the same Z.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from moagcn.errors import UserError
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.sparse import sort_rows, validate_csr

from .golden import sspmm as golden
from .golden.fp32 import as_bits, as_float
from .sspmm_model import estimate, output_counts, streamed_elements
from .sspmm_tiling import plan_tiles
from .stream_tb import beat_ints, int_words, stream_job

STREAMS = ("indptr_in", "indices_in", "mask_in", "feat_in")


@dataclass
class PackedJob:
    """Stream beats of one job: per load stream a (beats, 32-bit words) uint32 array."""

    n_rows: int
    n_features: int
    streams: dict[str, np.ndarray]
    out_beats: int

    def beat_ints(self, name: str) -> list[int]:
        """The beats of one stream as Python integers (word 0 in the low bits)."""
        return beat_ints(self.streams[name])


def pack_beats(words: np.ndarray, per_beat: int) -> np.ndarray:
    """``words`` as (beats, per_beat), the last beat zero-padded."""
    out = np.zeros(-(-words.size // per_beat) * per_beat, dtype=np.uint32)
    out[:words.size] = words
    return out.reshape(-1, per_beat)


def pack_job(indptr, indices, H, mask, config: SSpmmConfig) -> PackedJob:
    """Check a job against the configuration's buffers and pack its load streams."""
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
    lw = config.load_width
    beats_per_row = -(-F // lw)
    feat = np.zeros((n, beats_per_row * lw), dtype=np.uint32)
    feat[:, :F] = as_bits(H).reshape(n, F)
    mask_words = -(-config.max_feature_width // 32)
    bits = np.zeros((n, mask_words * 32), dtype=np.uint8)
    bits[:, :F] = np.asarray(mask, dtype=bool)
    packed_mask = np.packbits(bits.reshape(n, mask_words, 32), axis=2, bitorder="little")
    return PackedJob(n, F, {
        "indptr_in": pack_beats(np.asarray(indptr, dtype=np.uint32), lw),
        "indices_in": pack_beats(sort_rows(indptr, indices).astype(np.uint32), lw),
        "mask_in": packed_mask.view("<u4").reshape(n, mask_words),
        "feat_in": feat.reshape(n * beats_per_row, lw),
    }, int((-(-output_counts(indptr, mask, F) // config.lanes)).sum()))


async def run_job(io, job: PackedJob, lanes: int, idle_every: int = 0,
                  stall_every: int = 0, reset_after: int | None = None) -> dict:
    """Testbench: load the buffers, start, wait for done, read Z and the counters.

    The accelerator's stream protocol run by :func:`~moagcn.sim.stream_tb.stream_job` (idle load
    cycles, output backpressure, a reset ``reset_after`` cycles after start, then the job again).
    """
    return await stream_job(io, _protocol(), job.streams,
                            {"n_rows": job.n_rows, "n_features": job.n_features},
                            idle_every, stall_every, reset_after)


def beats_to_z(words: np.ndarray, indptr, mask, n_features: int, lanes: int) -> np.ndarray:
    """Z (float32, n_rows x n_features) from the compressed output beats as (beats, lanes)
    uint32 words: each row's computed elements in feature order, padded to whole beats."""
    keep = streamed_elements(indptr, mask, n_features)
    n = keep.shape[0]
    counts = keep.sum(axis=1)
    per_row = -(-counts // lanes) * lanes
    flat = np.asarray(words, dtype=np.uint32).reshape(-1)
    if flat.size != int(per_row.sum()):
        from moagcn.errors import SimulationError
        raise SimulationError(f"the accelerator streamed {flat.size // lanes} beats, "
                              f"{int(per_row.sum()) // lanes} were expected")
    start = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    rank = np.cumsum(keep, axis=1) - 1
    bits = np.zeros((n, n_features), dtype=np.uint32)
    rows, cols = np.nonzero(keep)
    bits[rows, cols] = flat[start[rows] + rank[rows, cols]]
    return as_float(bits)


def unpack_output(beats: list[int], indptr, mask, n_features: int, lanes: int) -> np.ndarray:
    """Z from the output beats as Python integers (word 0 in the low bits)."""
    return beats_to_z(int_words(beats, lanes), indptr, mask, n_features, lanes)


def _check_flags(counters: dict) -> None:
    # the host validated the job, so a flag here means the hardware and the host disagree
    if counters.get("err_index") or counters.get("err_indptr"):
        from moagcn.errors import SimulationError
        raise SimulationError(f"the accelerator stopped with an error flag on a validated job: "
                              f"err_index={counters.get('err_index')}, "
                              f"err_indptr={counters.get('err_indptr')}")


@dataclass
class SSpmmResult:
    """Z and the report figures of one job."""

    Z: np.ndarray
    counters: dict
    backend: str
    sim_wall_s: float = 0.0
    #: accelerator jobs the driver ran (1 when the job fits the buffers)
    tiles: int = 1


class _Csr(NamedTuple):
    """A validated CSR structure as :func:`plan_tiles` reads it."""

    indptr: np.ndarray
    indices: np.ndarray
    n_rows: int
    n_cols: int


def _tile_waves(waves, k: int):
    """The waveform file of tile ``k``: ``FILE.tileK.SUFFIX`` (None: no waveform)."""
    if waves is None:
        return None
    path = Path(waves)
    return path.with_name(f"{path.stem}.tile{k}{path.suffix}")


def _protocol():
    """The accelerator's stream protocol, for the lean Verilator harness."""
    from moagcn.hw.sspmm.top import COUNTERS

    from .lean import StreamProtocol
    return StreamProtocol(loads=STREAMS, output="out", scalars=("n_rows", "n_features"),
                          counters=COUNTERS, flags=("err_index", "err_indptr"))


class SSpmmDriver:
    """Run S-SpMM jobs on one backend of one configuration.

    ``verilator`` runs the host-driven lean harness (:mod:`moagcn.sim.lean`: Python asleep while
    the design runs) unless a waveform or a mid-job reset is asked for, which need the cocotb
    testbench; ``pysim`` and ``icarus`` run the same cocotb-style testbench as the tests.
    """

    def __init__(self, config: SSpmmConfig, backend: str = "verilator"):
        self.config = config
        self.backend = backend

    def run(self, indptr, indices, H, mask=None, *, idle_every: int = 0, stall_every: int = 0,
            waves=None, reset_after: int | None = None, per_cycle: bool = False,
            progress: bool = False) -> SSpmmResult:
        """Compute ``Z = (A H) ⊙ M`` and return it with the counters.

        ``per_cycle`` runs a ``verilator`` job through the per-cycle cocotb testbench instead of
        the lean harness (as waveforms and mid-job resets do), e.g. to compare their speeds.

        A job larger than the buffers runs as the tiles of :func:`plan_tiles` (rows and feature
        columns, never part of a row), one accelerator job each; Z is stitched together and the
        counters are summed over the tiles. With several tiles, ``waves`` names one waveform per
        tile (``FILE.tileK.vcd``) and the other options apply to every tile.
        ``progress`` shows a progress bar over the tiles (on stderr) when there are several.
        """
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
        options = dict(idle_every=idle_every, stall_every=stall_every, reset_after=reset_after,
                       per_cycle=per_cycle)
        tiles = plan_tiles(_Csr(indptr, indices, n, n), H.shape[1], self.config)
        if len(tiles) == 1:   # the job fits: run it as it is
            return self._run_job(indptr, indices, H, mask, waves=waves, **options)
        Z = np.zeros(H.shape, dtype=np.float32)
        counters: dict = {}
        wall = 0.0
        steps = enumerate(tiles)
        if progress:
            from tqdm import tqdm
            steps = tqdm(steps, total=len(tiles), desc=f"sspmm on {self.backend}", unit="tile")
        for k, tile in steps:
            res = self._run_job(*tile.job(H, mask), waves=_tile_waves(waves, k), **options)
            Z[tile.rows_start:tile.rows_stop, tile.feat_start:tile.feat_stop] = \
                res.Z[:tile.rows_stop - tile.rows_start]
            for key, value in res.counters.items():
                if key in ("lanes", "utilization"):
                    counters[key] = value
                else:
                    counters[key] = counters.get(key, 0) + value
            wall += res.sim_wall_s
        if "utilization" in counters:
            compute = counters["cycles_compute"]
            counters["utilization"] = (counters["work_adds"] / (counters["lanes"] * compute)
                                       if compute else 0.0)
        return SSpmmResult(Z, counters, self.backend, wall, tiles=len(tiles))

    def _run_job(self, indptr, indices, H, mask, *, idle_every: int, stall_every: int,
                 waves, reset_after: int | None, per_cycle: bool = False) -> SSpmmResult:
        """Run one validated job that fits the buffers."""
        n = indptr.size - 1
        if self.backend == "model":
            t0 = time.perf_counter()
            Z = golden.sspmm(indptr, indices, H, mask)
            cycles = estimate(indptr, mask, H.shape[1], self.config)
            return SSpmmResult(Z, cycles.as_dict(), "model", time.perf_counter() - t0)
        from moagcn.hw.designs import get_design

        from .backends import run
        job = pack_job(indptr, indices, H, mask, self.config)
        # a generous bound: a design that stops making progress fails instead of hanging
        bound = estimate(indptr, mask, H.shape[1], self.config)
        max_cycles = 4 * bound.cycles_total + 8 * (len(job.streams["feat_in"]) + n) + 10_000
        if self.backend == "verilator" and waves is None and reset_after is None and not per_cycle:
            return self._run_lean(job, indptr, mask, idle_every, stall_every, max_cycles)
        t0 = time.perf_counter()
        res = run(get_design("sspmm"), self.config, run_job, self.backend, waves=waves,
                  job=job, lanes=self.config.lanes, idle_every=idle_every,
                  stall_every=stall_every, reset_after=reset_after, max_cycles=max_cycles)
        wall = time.perf_counter() - t0
        out = res.value
        _check_flags(out)
        Z = unpack_output(out.pop("beats"), indptr, mask, H.shape[1], self.config.lanes)
        out["sim_cycles"] = res.cycles
        out["sim_testbench_s"] = res.wall_s
        return SSpmmResult(Z, out, self.backend, wall)

    def _run_lean(self, job: PackedJob, indptr, mask, idle_every: int, stall_every: int,
                  max_cycles: int) -> SSpmmResult:
        from moagcn.hw.designs import get_design

        from .build import generate_verilog
        from .lean import build_lean, run_lean
        proto = _protocol()
        t0 = time.perf_counter()
        exe = build_lean(generate_verilog(get_design("sspmm"), self.config), proto)
        words = self.config.lanes
        res = run_lean(exe, proto, job.streams, {"n_rows": job.n_rows,
                                                 "n_features": job.n_features},
                       words, idle_every=idle_every, stall_every=stall_every,
                       max_cycles=max_cycles)
        wall = time.perf_counter() - t0
        out = dict(res.values)
        _check_flags(out)
        Z = beats_to_z(res.beats, indptr, mask, job.n_features, words)
        out["sim_cycles"] = res.cycles
        out["sim_testbench_s"] = res.wall_s
        return SSpmmResult(Z, out, "verilator", wall)
