"""The gather-sum unit as an accelerator spec: ``Y = A X`` (a test-only design,
docs/architecture.md's worked example)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import validate_csr
from moagcn.core.spec import AcceleratorSpec, Packed, Part, StreamProtocol
from moagcn.core.tiling import TileLimits, plan_tiles
from moagcn.errors import UserError

from tests.gsum import protocol
from tests.gsum.config import GSumConfig
from tests.gsum.golden import gather_sum


@dataclass
class GSumJob:
    """``Y = A X``: a CSR ``A`` (rows x feature rows) and float32 ``X``."""

    indptr: np.ndarray
    indices: np.ndarray
    X: np.ndarray

    @property
    def n_rows(self) -> int:
        return self.indptr.size - 1


def _words(X: np.ndarray, lanes: int) -> np.ndarray:
    padded = np.zeros((X.shape[0], lanes), dtype=np.float32)
    padded[:, :X.shape[1]] = X
    return padded.view(np.uint32)


class GSumSpec(AcceleratorSpec):
    name = "gsum"
    protocol = StreamProtocol.of(protocol)

    def lanes(self, config: GSumConfig) -> int:
        return config.lanes

    # -- jobs -----------------------------------------------------------------------------------

    def job(self, indptr, indices, X) -> GSumJob:
        return GSumJob(indptr, indices, X)

    def limits(self, job, config: GSumConfig) -> TileLimits:
        return TileLimits(config.max_rows, config.max_cols, config.max_edges, config.lanes,
                          square=False, rows_param="max_rows", cols_param="max_cols")

    def check(self, job: GSumJob, config, what: str = "graph") -> GSumJob:
        X = np.asarray(job.X)
        if X.ndim != 2 or X.dtype != np.float32:
            raise UserError(f"features must be a 2-D float32 array, got {X.dtype} {X.shape}")
        indptr, indices = validate_csr(job.indptr, job.indices, n_cols=X.shape[0], what=what)
        return GSumJob(indptr, indices, np.ascontiguousarray(X))

    def split(self, job: GSumJob, config) -> list[Part]:
        tiles = plan_tiles(job.indptr, job.indices, job.n_rows, job.X.shape[0], job.X.shape[1],
                           self.limits(job, config))
        if len(tiles) == 1 and tiles[0].cols.size == job.X.shape[0] \
                and tiles[0].width == job.X.shape[1]:
            return [Part(job)]
        return [Part(tile=t, make=lambda t=t: GSumJob(t.indptr, t.indices, t.features(job.X)))
                for t in tiles]

    def empty_output(self, job: GSumJob) -> np.ndarray:
        return np.zeros((job.n_rows, job.X.shape[1]), dtype=np.float32)

    def work(self, job: GSumJob, config) -> Counters:
        return Counters(work_adds=int(job.indices.size) * job.X.shape[1],
                        spmm_adds=int(job.indices.size) * job.X.shape[1])

    def traffic(self, job: GSumJob, config: GSumConfig) -> tuple[int, int]:
        beats_in = job.indptr.size + job.indices.size + job.X.shape[0] * config.lanes
        return 4 * beats_in, 4 * job.n_rows * config.lanes

    # -- models ---------------------------------------------------------------------------------

    def golden(self, job: GSumJob, config) -> np.ndarray:
        return gather_sum(job.indptr, job.indices, job.X)

    def cycles(self, job: GSumJob, config: GSumConfig) -> Counters:
        """Loads: the longest load stream (one beat per stream per cycle); compute: per row
        :data:`~tests.gsum.protocol.ROW_CYCLES`, per edge ``EDGE_CYCLES + adder_latency``."""
        c = Counters(cycles_load=max(job.indptr.size, job.indices.size, job.X.shape[0]),
                     cycles_compute=protocol.ROW_CYCLES * job.n_rows + job.indices.size * (
                         protocol.EDGE_CYCLES + config.adder_latency))
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        return c

    # -- the hardware ---------------------------------------------------------------------------

    def pack(self, job: GSumJob, config: GSumConfig) -> Packed:
        for what, value, limit, param in (
                ("rows", job.n_rows, config.max_rows, "max_rows"),
                ("feature rows", job.X.shape[0], config.max_cols, "max_cols"),
                ("entries", job.indices.size, config.max_edges, "max_edges"),
                ("feature columns", job.X.shape[1], config.lanes, "lanes")):
            if value > limit:
                raise UserError(f"the job has {value} {what} but this configuration holds "
                                f"{limit}; use --param {param}=...")
        return Packed(streams={
            "indptr_in": job.indptr.astype(np.uint32).reshape(-1, 1),
            "indices_in": job.indices.astype(np.uint32).reshape(-1, 1),
            "feat_in": _words(job.X, config.lanes)},
            scalars={"n_rows": job.n_rows, "n_cols": job.X.shape[0]})

    def unpack(self, words, packed: Packed, job: GSumJob, config: GSumConfig) -> np.ndarray:
        rows = np.ascontiguousarray(np.asarray(words, dtype=np.uint32).reshape(-1, config.lanes))
        return rows.view(np.float32)[:, :job.X.shape[1]].copy()

    def output_words(self, config: GSumConfig) -> int:
        return config.lanes

    def hardware_counters(self, raw, job: GSumJob, config) -> Counters:
        c = Counters(cycles_load=int(raw["cycles_load"]),
                     cycles_compute=int(raw["cycles_compute"]))
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        return c

    # -- aggregation: Z = (A H) ⊙ M, the mask applied to the output -----------------------------

    def aggregation_job(self, indptr, indices, H, M, config) -> GSumJob:
        return GSumJob(indptr, indices, H)

    def aggregation_output(self, out: np.ndarray, job, M: np.ndarray) -> np.ndarray:
        return np.where(M, out, np.float32(0))


SPEC = GSumSpec()
