"""The SDDMM accelerator as an accelerator spec (docs/attention.md): ``S[e, h] = Σ_f Q[v, hD + f]
K[u, hD + f]`` for every stored entry ``e = (v, u)`` and head ``h``, optionally masked per
(entry, head), with its cycle model.

A job larger than the buffers is cut into parts by entries (each entry is its own dot product,
so a row may be cut anywhere): consecutive unmasked entries while their entries, distinct Q rows
and distinct K rows fit ``max_edges``, ``max_rows`` and ``max_cols``; a part's Q and K hold only
the rows its entries name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import validate_csr
from moagcn.core.spec import AcceleratorSpec, Packed, Part, StreamProtocol
from moagcn.core.tiling import TileLimits, previous_occurrence
from moagcn.errors import SimulationError, UserError
from moagcn.hw.sddmm import protocol
from moagcn.hw.sddmm.config import SddmmConfig
from moagcn.sim.sddmm.golden import chunked, sddmm


@dataclass
class SddmmJob:
    """``S = SDDMM(A, Q, K)``: a CSR pattern ``A`` (Q rows x K rows), float32 ``Q`` and ``K``
    of one width F, ``heads`` dividing F, and an optional (entries x heads) bool ``mask``."""

    indptr: np.ndarray
    indices: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    heads: int = 1
    mask: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return self.indptr.size - 1

    @property
    def width(self) -> int:
        return self.Q.shape[1]

    def pair_mask(self) -> np.ndarray:
        """(entries x heads) bool: the pairs computed."""
        if self.mask is None:
            return np.ones((self.indices.size, self.heads), dtype=bool)
        return self.mask


@dataclass
class EntryPlace:
    """Where a part's output goes: its rows are the entries ``positions`` of the job."""

    positions: np.ndarray

    def place(self, out: np.ndarray, part_out: np.ndarray) -> None:
        out[self.positions] = part_out


def chunks_per_head(width: int, heads: int, lanes: int) -> int:
    """C: chunks of ``lanes`` columns of one head (at least one)."""
    return max(-(-(width // heads) // lanes), 1)


def compute_cycles(pairs: int, chunks: int, config: SddmmConfig) -> int:
    """Cycles from start to done of a part computing ``pairs`` (entry, head) pairs of ``chunks``
    chunks each: groups of ``L = add_latency`` pairs, each ``chunks x L`` cycles, the last
    group's idle slots after its last pair not waited for, then the pipeline drains
    (docs/attention.md, "Cycle model")."""
    if pairs == 0:
        return protocol.EMPTY_CYCLES
    L = config.add_latency
    groups = -(-pairs // L)
    idle = groups * L - pairs                  # slots of the last group without a pair
    return protocol.START_CYCLES + groups * chunks * L - idle + \
        protocol.pipeline_latency(config) + protocol.DRAIN_CYCLES


def part_counters(entries: int, rows: int, cols: int, pairs: int, chunks: int, heads: int,
                  config: SddmmConfig) -> Counters:
    """The cycle model of one part from its counts: ``entries`` kept entries, ``rows`` Q rows
    and ``cols`` K rows loaded, ``pairs`` pairs computed."""
    row_chunks = heads * chunks
    c = Counters(cycles_load=max(entries, rows * row_chunks, cols * row_chunks),
                 cycles_compute=compute_cycles(pairs, chunks, config))
    c.bytes_read = 4 * (2 * entries + (rows + cols) * row_chunks * config.lanes)
    c.bytes_written = 4 * pairs
    c.extra = {"chunks_issued": pairs * chunks, "pairs_done": pairs}
    return c


def plan_parts(rows: np.ndarray, cols: np.ndarray, kept: np.ndarray, config: SddmmConfig
               ) -> list[np.ndarray]:
    """The job's kept entries (``kept``: bool per entry) cut greedily into parts: per part the
    positions of its entries, consecutive kept entries while they number at most ``max_edges``
    and name at most ``max_rows`` distinct Q rows (``rows``, ascending) and ``max_cols`` distinct
    K rows (``cols``)."""
    pos = np.flatnonzero(kept)
    # prev[t]: the last kept position before t naming the same K row (-1: none), so the K rows
    # of window [i, t] number the entries e in it with prev[e] < i (no sort per part)
    prev = previous_occurrence(np.asarray(cols)[pos])
    parts, i = [], 0
    while i < pos.size:
        j = min(pos.size, i + config.max_edges)
        r = rows[pos[i:j]]
        change = np.flatnonzero(r[1:] != r[:-1]) + 1          # first entries of new rows
        if change.size >= config.max_rows:
            j = i + int(change[config.max_rows - 1])
        new = np.flatnonzero(prev[i:j] < i)                    # first entries of new K rows
        if new.size > config.max_cols:
            j = i + int(new[config.max_cols])
        parts.append(pos[i:j])
        i = j
    return parts


class SddmmSpec(AcceleratorSpec):
    name = "sddmm"
    protocol = StreamProtocol.of(protocol)

    def lanes(self, config: SddmmConfig) -> int:
        return config.lanes

    # -- jobs -----------------------------------------------------------------------------------

    def job(self, indptr, indices, Q, K, heads: int = 1, mask=None) -> SddmmJob:
        return SddmmJob(indptr, indices, Q, K, heads, mask)

    def limits(self, job, config: SddmmConfig) -> TileLimits:
        return TileLimits(config.max_rows, config.max_cols, config.max_edges,
                          config.max_width, square=False, rows_param="max_rows",
                          cols_param="max_cols")

    def check(self, job: SddmmJob, config, what: str = "graph") -> SddmmJob:
        """Shapes, dtypes, finiteness, heads and the CSR; a bad input is one UserError naming
        it, the problem and the valid range."""
        heads = job.heads
        if isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1:
            raise UserError(f"heads={heads!r}: use a whole number of at least 1")
        heads = int(heads)
        Q, K = np.asarray(job.Q), np.asarray(job.K)
        for name, X in (("Q", Q), ("K", K)):
            if X.ndim != 2 or X.dtype != np.float32:
                raise UserError(f"{name} must be a 2-D float32 array, got {X.dtype} with shape "
                                f"{X.shape}")
        if Q.shape[1] != K.shape[1]:
            raise UserError(f"Q has {Q.shape[1]} columns but K has {K.shape[1]}; Q and K must "
                            "have the same width")
        if Q.shape[1] == 0:
            raise UserError("Q and K have no columns; the width must be at least 1")
        if Q.shape[1] % heads:
            raise UserError(f"heads={heads} does not divide the width {Q.shape[1]}; use a "
                            f"divisor of {Q.shape[1]}")
        for name, X in (("Q", Q), ("K", K)):
            bad = ~np.isfinite(X)
            if bad.any():
                r, f = (int(x) for x in np.argwhere(bad)[0])
                raise UserError(f"{name}[{r}, {f}] = {X[r, f]}; Q and K must be finite")
        n_rows = np.asarray(job.indptr).size - 1
        if Q.shape[0] != n_rows:
            raise UserError(f"Q has {Q.shape[0]} rows but the graph has {n_rows} rows; Q needs "
                            "one row per graph row")
        indptr, indices = validate_csr(job.indptr, job.indices, n_cols=K.shape[0], what=what)
        mask = job.mask
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype not in (np.bool_, np.uint8):
                raise UserError(f"the mask has dtype {mask.dtype}; expected bool or 0/1 uint8")
            if mask.shape == (indices.size,):
                mask = np.repeat(mask[:, None], heads, axis=1)
            if mask.shape != (indices.size, heads):
                raise UserError(f"the mask has shape {mask.shape}; expected ({indices.size}, "
                                f"{heads}) (entries x heads) or ({indices.size},)")
            if mask.dtype == np.uint8 and mask.size and mask.max() > 1:
                raise UserError("the mask holds a value other than 0 and 1")
            mask = np.ascontiguousarray(mask.astype(bool))
        return SddmmJob(indptr, indices, np.ascontiguousarray(Q), np.ascontiguousarray(K),
                        heads, mask)

    def _fits(self, job: SddmmJob, config: SddmmConfig) -> int:
        """C of the job; a width or head count no configuration of this size holds is a
        UserError naming the parameter."""
        if job.heads > config.max_heads:
            raise UserError(f"heads={job.heads} but this configuration holds at most "
                            f"max_heads={config.max_heads}; use --param max_heads=...")
        C = chunks_per_head(job.width, job.heads, config.lanes)
        if job.heads * C > config.max_chunks:
            raise UserError(
                f"width {job.width} in {job.heads} head(s) takes {job.heads * C} chunks of "
                f"{config.lanes} columns per row but this configuration holds "
                f"max_chunks={config.max_chunks}; use --param max_chunks=... (a power of two)")
        return C

    def split(self, job: SddmmJob, config: SddmmConfig) -> list[Part]:
        self._fits(job, config)
        kept = job.pair_mask().any(axis=1)
        if (kept.all() and job.n_rows <= config.max_rows and job.K.shape[0] <= config.max_cols
                and job.indices.size <= config.max_edges):
            return [Part(job)]
        rows = np.repeat(np.arange(job.n_rows, dtype=np.int64), np.diff(job.indptr))
        return [Part(tile=EntryPlace(p), make=lambda p=p: self._part_job(job, rows, p))
                for p in plan_parts(rows, job.indices, kept, config)]

    @staticmethod
    def _part_job(job: SddmmJob, rows: np.ndarray, positions: np.ndarray) -> SddmmJob:
        """The entries ``positions`` as a job of their own: Q and K cut to the rows they name."""
        r_ids, r_local = np.unique(rows[positions], return_inverse=True)
        c_ids, c_local = np.unique(job.indices[positions], return_inverse=True)
        indptr = np.zeros(r_ids.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(r_local, minlength=r_ids.size), out=indptr[1:])
        return SddmmJob(indptr, c_local.astype(np.int64), job.Q[r_ids], job.K[c_ids],
                        job.heads, job.pair_mask()[positions])

    # -- the host's per-entry operation (``SparseDevice.sddmm``) --------------------------------

    def entry_ops(self, config: SddmmConfig) -> frozenset:
        return frozenset({"sddmm"})

    def sddmm_jobs(self, indptr, indices, Q, K, mask, config: SddmmConfig) -> list:
        """``(h0, h1, job)`` for consecutive groups of heads, each as many as one job holds
        (at most ``max_heads``, and ``heads x C <= max_chunks``): a job's Q and K are the
        group's heads side by side (``n x (h1 - h0) D``), its mask the group's columns. A head
        wider than ``max_chunks`` chunks is refused naming the parameter (a dot product is
        never cut)."""
        n_rows, heads, D = Q.shape
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        one = SddmmJob(indptr, indices, Q[:1, 0, :], K[:1, 0, :], 1)
        C = self._fits(one, config)                    # one head must fit
        group = max(1, min(heads, config.max_heads, config.max_chunks // C))
        out = []
        for h0 in range(0, heads, group):
            h1 = min(heads, h0 + group)
            g = h1 - h0
            Qg = np.ascontiguousarray(Q[:, h0:h1, :].reshape(n_rows, g * D), dtype=np.float32)
            Kg = np.ascontiguousarray(K[:, h0:h1, :].reshape(K.shape[0], g * D),
                                      dtype=np.float32)
            Mg = None if mask is None else np.ascontiguousarray(mask[:, h0:h1], dtype=bool)
            out.append((h0, h1, SddmmJob(indptr, indices, Qg, Kg, g, Mg)))
        return out

    def empty_output(self, job: SddmmJob) -> np.ndarray:
        return np.zeros((job.indices.size, job.heads), dtype=np.float32)

    def work(self, job: SddmmJob, config) -> Counters:
        """Useful multiply-adds: ``D = F / heads`` per computed (entry, head) pair."""
        pairs = int(job.pair_mask().sum())
        D = job.width // job.heads
        return Counters(work_adds=pairs * D, elements=job.indices.size * job.heads,
                        unmasked=pairs)

    def traffic(self, job: SddmmJob, config: SddmmConfig) -> tuple[int, int]:
        c = self.cycles(job, config)
        return c.bytes_read, c.bytes_written

    # -- models ---------------------------------------------------------------------------------

    def golden(self, job: SddmmJob, config: SddmmConfig) -> np.ndarray:
        return sddmm(job.indptr, job.indices, job.Q, job.K, job.heads, config.lanes, job.mask)

    def parts_cycles(self, parts, job: SddmmJob, config: SddmmConfig) -> list:
        """:meth:`cycles` of every part from its entries' counts alone (kept entries, distinct
        Q and K rows, pairs), without building the parts' jobs (their Q and K cut): the model
        device's hot path; the same counts :meth:`cycles` takes from a part's own job."""
        if len(parts) == 1 and parts[0].tile is None:
            return [self.cycles(job, config)]
        C = self._fits(job, config)
        pairs = job.pair_mask()
        rows = np.repeat(np.arange(job.n_rows, dtype=np.int64), np.diff(job.indptr))
        out = []
        for part in parts:
            p = part.tile.positions
            r = rows[p]
            n_rows = int(np.count_nonzero(r[1:] != r[:-1])) + 1 if p.size else 0
            n_cols = int(np.unique(job.indices[p]).size)
            out.append(part_counters(int(pairs[p].any(axis=1).sum()), n_rows, n_cols,
                                     int(pairs[p].sum()), C, job.heads, config))
        return out

    def cycles(self, job: SddmmJob, config: SddmmConfig) -> Counters:
        """One part: loads (the longest load stream), compute (:func:`compute_cycles`)."""
        C = self._fits(job, config)
        pairs = job.pair_mask()
        return part_counters(int(pairs.any(axis=1).sum()), job.n_rows, job.K.shape[0],
                             int(pairs.sum()), C, job.heads, config)

    def report(self, result, job, config) -> dict:
        C = chunks_per_head(job.width, job.heads, config.lanes)
        return {"chunks_per_head": C, "head_width": job.width // job.heads}

    # -- the hardware ---------------------------------------------------------------------------

    def pack(self, job: SddmmJob, config: SddmmConfig) -> Packed:
        C = self._fits(job, config)
        pairs = job.pair_mask()
        kept = pairs.any(axis=1)
        for what, value, limit, param in (
                ("Q rows", job.n_rows, config.max_rows, "max_rows"),
                ("K rows", job.K.shape[0], config.max_cols, "max_cols"),
                ("entries", int(kept.sum()), config.max_edges, "max_edges")):
            if value > limit:
                raise UserError(f"the job has {value} {what} but this configuration holds "
                                f"{limit}; use --param {param}=...")
        rows = np.repeat(np.arange(job.n_rows, dtype=np.int64), np.diff(job.indptr))
        bits = (pairs.astype(np.uint64) << np.arange(job.heads, dtype=np.uint64)).sum(axis=1)
        entries = np.stack([(rows | (job.indices << 16)).astype(np.uint32),
                            bits.astype(np.uint32)], axis=1)[kept]
        P = config.lanes
        return Packed(streams={
            "entries_in": np.ascontiguousarray(entries),
            "q_in": chunked(job.Q, job.heads, P).reshape(-1, P).view(np.uint32),
            "k_in": chunked(job.K, job.heads, P).reshape(-1, P).view(np.uint32)},
            scalars={"n_entries": int(kept.sum()), "n_rows": job.n_rows,
                     "n_cols": job.K.shape[0], "heads": job.heads, "chunks": C,
                     "row_chunks": job.heads * C})

    def unpack(self, words, packed: Packed, job: SddmmJob, config) -> np.ndarray:
        values = np.ascontiguousarray(np.asarray(words, dtype=np.uint32).reshape(-1))
        S = self.empty_output(job)
        pairs = job.pair_mask()
        if values.size != int(pairs.sum()):
            raise SimulationError(f"the accelerator returned {values.size} scores for "
                            f"{int(pairs.sum())} pairs")
        S[pairs] = values.view(np.float32)
        return S

    def output_words(self, config) -> int:
        return 1

    def hardware_counters(self, raw, job: SddmmJob, config) -> Counters:
        c = Counters(cycles_load=int(raw["cycles_load"]),
                     cycles_compute=int(raw["cycles_compute"]))
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        c.extra = {"chunks_issued": int(raw["chunks_issued"]),
                   "pairs_done": int(raw["pairs_done"])}
        return c


SPEC = SddmmSpec()


def estimate_graph(indptr, indices, n_cols: int, width: int, heads: int, mask,
                   config: SddmmConfig) -> Counters:
    """The cycle model of a whole job from its structure alone (no Q and K values): cut into
    parts exactly as :meth:`SddmmSpec.split` cuts it, each part's counters summed, with the
    job's work. ``mask``: (entries x heads) bool or None."""
    spec = SPEC
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    n_rows = indptr.size - 1
    dummy = SddmmJob(indptr, indices, np.empty((n_rows, width), np.float32),
                     np.empty((n_cols, width), np.float32), heads, mask)
    C = spec._fits(dummy, config)
    pairs = dummy.pair_mask()
    kept = pairs.any(axis=1)
    total = spec.work(dummy, config)
    total.calls, total.lanes, total.clock_mhz = 1, config.lanes, config.clock_mhz
    if (kept.all() and n_rows <= config.max_rows and n_cols <= config.max_cols
            and indices.size <= config.max_edges):
        plans = [(indices.size, n_rows, n_cols, int(pairs.sum()))]
    else:
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
        plans = [(p.size, np.unique(rows[p]).size, np.unique(indices[p]).size,
                  int(pairs[p].sum())) for p in plan_parts(rows, indices, kept, config)]
    for entries, r, k, n in plans:
        total.add(part_counters(entries, r, k, n, C, heads, config))
    total.tiles = len(plans)
    return total
