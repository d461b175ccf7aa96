"""The S-SpMM accelerator as a spec: ``Z = (A H) ⊙ M`` (MixGCN Eq. 4).

A job is A (``indptr``, ``indices``: N x K, binary), H (K x F float32) and M (N x F bool). Each
row of A is sorted before it is loaded: ascending column order is the accumulation order the
golden model (:mod:`moagcn.sim.sspmm.golden`) documents, and it makes tiling exact. A job
larger than the buffers is cut by :func:`moagcn.core.tiling.plan_tiles` into square jobs.

Weighted (``SSpmmConfig.weighted``): the job also holds one float32 value per stored entry
(``values``), ``Z = (A_w H) ⊙ M``. A checked weighted job has each row's entries sorted, the
values moved with their entries, so that every later cut (a long row's pieces, tiles, a
part's row order) carries each value with its column index by the same rule; a weighted
configuration given no values multiplies by 1 (``round(1 · h) = h``: the unweighted sums, bit
for bit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moagcn.core.counters import Counters, work_adds
from moagcn.core.graph import degrees, permute_rows, row_sort_order, sort_rows, validate_csr
from moagcn.core.memo import ArrayMemo, read_only
from moagcn.core.spec import AcceleratorSpec, Packed, Part, StreamProtocol, back_to_back
from moagcn.core.tiling import TileLimits, plan_tiles
from moagcn.errors import SimulationError, UserError
from moagcn.hw.sspmm import protocol
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.protocol import index_beat_words

from moagcn.sim.sspmm import golden
from moagcn.sim.arith.golden import as_bits, as_float
from moagcn.sim.sspmm.model import (estimate_rows, estimate_tiles, row_order, streamed_elements,
                                    tiles_at_once)


@dataclass
class SSpmmJob:
    """``Z = (A H) ⊙ M``: A is ``indptr`` / ``indices`` (N x K), H is K x F, M is N x F;
    ``values``: with a weighted configuration, one float32 per stored entry of A (None: all
    ones, the binary A)."""

    indptr: np.ndarray
    indices: np.ndarray
    H: np.ndarray
    M: np.ndarray | None = None
    values: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(np.asarray(self.indptr).size - 1)

    @property
    def n_features(self) -> int:
        return int(self.H.shape[1])


def pack_beats(words: np.ndarray, per_beat: int) -> np.ndarray:
    """``words`` as (beats, per_beat), the last beat zero-padded."""
    out = np.zeros(-(-words.size // per_beat) * per_beat, dtype=np.uint32)
    out[:words.size] = words
    return out.reshape(-1, per_beat)


def load_words(n: int, nnz: int, n_features: int, config: SSpmmConfig,
               n_cols: int | None = None) -> int:
    """32-bit words the load streams carry for a job of ``n`` rows and ``n_cols`` feature rows
    (default ``n``), beat padding included (with ``weighted``, the index beats' values)."""
    lw = config.load_width
    k = n if n_cols is None else n_cols
    mask_words = -(-config.max_feature_width // 32)
    return (-(-(n + 1) // lw) * lw + -(-nnz // lw) * index_beat_words(config)
            + n * mask_words + k * -(-n_features // lw) * lw)


def check_values(values, nnz: int, what: str = "edge values") -> np.ndarray:
    """``values`` as a read-only float32 array of ``nnz`` finite values, or a one-line
    :class:`UserError` naming ``what``, the problem and the fix."""
    v = np.asarray(values)
    if v.dtype.kind not in "fiub":
        raise UserError(f"{what}: values of type {v.dtype}; give one number per stored entry")
    if v.ndim != 1 or v.size != nnz:
        raise UserError(f"{what}: {v.size} values in shape {v.shape} for {nnz} stored entries; "
                        "give one value per stored entry, in CSR order")
    with np.errstate(all="ignore"):
        v = v.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        raise UserError(f"{what}: entry {int(bad[0])} is {float(v[bad[0]])} ({bad.size} not "
                        "finite, after rounding to float32); the weighted S-SpMM takes finite "
                        "edge values: fix or drop those entries")
    return read_only_copy(v)


def read_only_copy(a: np.ndarray) -> np.ndarray:
    """A read-only copy of ``a`` (a checked job's arrays are never written)."""
    out = np.array(a)
    out.flags.writeable = False
    return out


def _sorted_entries(indptr, indices, values):
    """``(indices, values)`` with each row's entries in ascending column order (stably), the
    values moved with their entries; as they are when already sorted."""
    order = row_sort_order(indptr, indices)
    if (order == np.arange(order.size)).all():
        return indices, values
    return read_only_copy(np.asarray(indices)[order]), read_only_copy(values[order])


def beats_to_z(words: np.ndarray, indptr, mask, n_features: int, lanes: int) -> np.ndarray:
    """Z (float32, n_rows x n_features) from the compressed output beats as (beats, lanes)
    uint32 words: each row's computed elements in feature order, padded to whole beats."""
    keep = streamed_elements(indptr, mask, n_features)
    n = keep.shape[0]
    counts = keep.sum(axis=1)
    per_row = -(-counts // lanes) * lanes
    flat = np.asarray(words, dtype=np.uint32).reshape(-1)
    if flat.size != int(per_row.sum()):
        raise SimulationError(f"the accelerator streamed {flat.size // lanes} beats, "
                              f"{int(per_row.sum()) // lanes} were expected")
    start = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    rank = np.cumsum(keep, axis=1) - 1
    bits = np.zeros((n, n_features), dtype=np.uint32)
    rows, cols = np.nonzero(keep)
    bits[rows, cols] = flat[start[rows] + rank[rows, cols]]
    return as_float(bits)


def _traffic(deg, unmasked, n_edges: int, n_features: int, n_cols: int,
             config: SSpmmConfig) -> tuple[int, int]:
    """Bytes in (load streams) and out (the computed elements, whole output beats) of a job of
    ``deg.size`` rows and ``n_cols`` feature rows."""
    out_words = int((-(-np.where(deg > 0, unmasked, 0) // config.lanes)).sum()) * config.lanes
    return 4 * load_words(deg.size, n_edges, n_features, config, n_cols), 4 * out_words


def _reordered(job: SSpmmJob, order) -> SSpmmJob:
    """``job`` with its rows (pointers, indices, mask rows, and the values with their
    entries) in ``order`` (None: as it is)."""
    if order is None:
        return job
    indptr, indices = permute_rows(job.indptr, job.indices, order)
    values = None
    if job.values is not None:
        values = permute_rows(job.indptr, job.values, order)[1].astype(np.float32, copy=False)
    return SSpmmJob(indptr, indices, job.H, np.asarray(job.M)[order], values)


def _tile_values(job: SSpmmJob, t):
    """The values of tile ``t``'s entries (a tile is a block of the job's rows: its entries are
    the job's between the block's row pointers, in order); None for an unweighted job."""
    if job.values is None:
        return None
    ptr = np.asarray(job.indptr)
    return job.values[int(ptr[t.rows_start]):int(ptr[t.rows_stop])]


#: read-only graphs' rows sorted and long-row pieces (training aggregates one adjacency every
#: step)
_SORTED = ArrayMemo()
_PIECES = ArrayMemo()


def sorted_columns(indptr, indices) -> np.ndarray:
    """``indices`` with each row sorted (:func:`~moagcn.core.graph.sort_rows`), remembered
    (and returned read-only) for a read-only graph: the golden model sorts rows on every call
    otherwise."""
    def compute():
        cols = sort_rows(indptr, indices)
        cols.flags.writeable = not read_only(indptr, indices)
        return cols
    return _SORTED.get((indptr, indices), (), compute)


def long_row_pieces(indptr, indices, config: SSpmmConfig):
    """:func:`~moagcn.sim.sspmm.golden.buffer_pieces` of the graph with each row sorted, as
    ``(piece_ptr, cols, rep, first, count)`` (None: every row fits), remembered for read-only
    arrays, and returned read-only so that the tile plans of the pieced graph are remembered
    too (:func:`~moagcn.core.tiling.plan_tiles`)."""
    def compute():
        deg = np.diff(np.asarray(indptr, dtype=np.int64))
        if not ((deg > config.max_edges) | (deg > config.max_nodes)).any():
            return None                     # no row can be too long: nothing to sort
        cols = sorted_columns(indptr, indices)
        pieces = golden.buffer_pieces(indptr, cols, config.max_edges, config.max_nodes)
        if pieces is None:
            return None
        cut = (pieces[0], cols, *pieces[1:])
        for arr in cut:
            arr.flags.writeable = False
        return cut
    return _PIECES.get((indptr, indices), (config.max_edges, config.max_nodes), compute)


def _tile_order(t, config: SSpmmConfig):
    """:func:`~moagcn.sim.sspmm.model.row_order` of tile ``t``'s rows, remembered on the tile
    (tile plans of read-only graphs are reused call after call)."""
    memo = t.__dict__.setdefault("_row_orders", {})
    key = (config.row_order,)
    if key not in memo:
        memo[key] = row_order(np.diff(t.indptr), config)
    return memo[key]


class SSpmmSpec(AcceleratorSpec):
    name = "sspmm"
    protocol = StreamProtocol.of(protocol)

    def lanes(self, config: SSpmmConfig) -> int:
        return config.adders            # S x P adders (utilisation is over all of them)

    def loads_overlap(self, config: SSpmmConfig) -> bool:
        return config.load_banks == 2

    def output_words(self, config: SSpmmConfig) -> int:
        return config.lanes             # one slice's P words per output beat

    def job(self, indptr, indices, H, M=None, values=None) -> SSpmmJob:
        return SSpmmJob(indptr, indices, H, M, values)

    # -- jobs -----------------------------------------------------------------------------------

    def check(self, job: SSpmmJob, config, what: str = "graph") -> SSpmmJob:
        H = np.asarray(job.H)
        if H.ndim != 2 or H.dtype != np.float32:
            raise UserError(f"features must be a 2-D float32 array, got {H.dtype} {H.shape}")
        indptr, indices = validate_csr(job.indptr, job.indices, n_cols=H.shape[0], what=what)
        shape = (indptr.size - 1, H.shape[1])
        mask = golden.normalise_mask(job.M, shape)
        if mask.shape != shape:
            raise UserError(f"mask has shape {mask.shape}; expected {shape} (one bit per output "
                            "element: graph rows x feature columns)")
        values = None
        if job.values is not None:
            if not config.weighted:
                raise UserError(f"{what}: edge values need a weighted S-SpMM (this "
                                "configuration multiplies by a binary adjacency); use "
                                "--param weighted=true, or drop the values")
            values = check_values(job.values, indices.size, f"{what} edge values")
            indices, values = _sorted_entries(indptr, indices, values)
        return SSpmmJob(indptr, indices, np.ascontiguousarray(H), mask, values)

    def expand(self, job: SSpmmJob, config: SSpmmConfig):
        """Rows longer than any job holds (more than ``max_edges`` entries or ``max_nodes``
        distinct neighbours) as pieces of ``min(max_edges, max_nodes)`` neighbours, each a row
        of the job the accelerator runs, and the function that adds each row's pieces on the
        host, in order (:func:`~moagcn.sim.sspmm.golden.buffer_pieces`, the golden model's
        ``buffer`` rule). ``(job, None)`` when every row fits."""
        cut = long_row_pieces(job.indptr, job.indices, config)
        if cut is None:
            return job, None
        piece_ptr, cols, rep, first, count = cut
        mask = np.asarray(job.M, dtype=bool)

        def merge(out: np.ndarray) -> np.ndarray:
            return golden.merge_pieces(out, first, count, mask)

        # the pieces keep the entries' order (a checked weighted job's rows are sorted): the
        # values go with them as they are
        return SSpmmJob(piece_ptr, cols, job.H, mask[rep], job.values), merge

    def limits(self, job: SSpmmJob | None, config: SSpmmConfig) -> TileLimits:
        return TileLimits(config.max_nodes, config.max_nodes, config.max_edges,
                          config.max_feature_width, square=False)

    def split(self, job: SSpmmJob, config) -> list[Part]:
        """The job as the accelerator runs it: tiles where it does not fit, and in each part
        the rows in ``config.row_order`` (:func:`~moagcn.sim.sspmm.model.row_order`, which
        the cycle model follows too)."""
        n, k = job.n_rows, job.H.shape[0]
        tiles = plan_tiles(job.indptr, job.indices, n, k, job.n_features, self.limits(job, config))
        if len(tiles) == 1 and k <= config.max_nodes:
            order = row_order(degrees(job.indptr), config)
            if order is None:
                return [Part(job)]      # the job fits as it is
            return [Part(make=lambda: _reordered(job, order), order=order)]
        parts = []
        for t in tiles:
            order = _tile_order(t, config)
            parts.append(Part(tile=t, order=order, make=lambda t=t, order=order: _reordered(
                SSpmmJob(t.indptr, t.indices, t.features(job.H), t.mask(job.M),
                         _tile_values(job, t)), order)))
        return parts

    def part_cycles(self, part: Part, job: SSpmmJob, config) -> Counters:
        """The cycle model of one part (:func:`moagcn.sim.sspmm.model.estimate`)."""
        t = part.tile
        if t is None:
            return self.cycles(job, config)
        # the model reads the tile's slice of the job's mask counts: no feature rows or mask
        # copied
        return self.tile_cycles(t, np.count_nonzero(
            job.M[t.rows_start:t.rows_stop, t.feat_start:t.feat_stop], axis=1), config)

    def parts_cycles(self, parts, job: SSpmmJob, config: SSpmmConfig) -> list[Counters]:
        """:meth:`part_cycles` of every part; a tiled job on a configuration
        :func:`~moagcn.sim.sspmm.model.estimate_tiles` covers in one pass over all its tiles'
        rows, the same counters."""
        tiles = [p.tile for p in parts]
        if (len(parts) < 2 or any(t is None or t.indptr.size < 2 for t in tiles)
                or not tiles_at_once(config)):        # (a job of no rows: tiles of none)
            return super().parts_cycles(parts, job, config)
        M = np.asarray(job.M, dtype=bool)
        chunks: dict = {}                    # unmasked counts per feature chunk, every row
        deg, unmasked, bounds = [], [], [0]
        for t in tiles:
            key = (t.feat_start, t.feat_stop)
            if key not in chunks:
                chunks[key] = np.count_nonzero(M[:, t.feat_start:t.feat_stop], axis=1)
            deg.append(np.diff(t.indptr))
            unmasked.append(chunks[key][t.rows_start:t.rows_stop])
            bounds.append(bounds[-1] + t.indptr.size - 1)
        cycles = estimate_tiles(
            np.concatenate(deg), np.concatenate(unmasked), bounds,
            [t.indices.size for t in tiles], [t.width for t in tiles],
            [t.cols.size for t in tiles], config, [_tile_order(t, config) for t in tiles])
        for c, t, d, u in zip(cycles, tiles, deg, unmasked):
            c.bytes_read, c.bytes_written = _traffic(d, u, int(t.indices.size), t.width,
                                                     int(t.cols.size), config)
        return cycles

    def replayed_cycles(self, job: SSpmmJob, config: SSpmmConfig) -> Counters:
        """The cycle model of ``job`` as the RTL runs it: split into the same parts as the
        driver splits it, each part modelled, the counters summed, with the job's work (the
        model device's counters of the same job, without computing Z).

        This is what an RTL run's counters compare with. :func:`estimate` of a job that does
        not fit the buffers models one job the hardware never runs: a graph with rows of
        hundreds of neighbours on the ``tiny`` preset runs as five tiles, and its untiled
        estimate is 8-42 % below the RTL's cycles where the tiles' sum is within 3 %."""
        job = self.check(job, config)
        counters = self.work(job, config)
        run_job, _ = self.expand(job, config)
        parts = self.split(run_job, config)
        counters.tiles = len(parts)
        cycles, _ = back_to_back(self.parts_cycles(parts, run_job, config),
                                 self.loads_overlap(config))
        counters.add(cycles)
        return counters

    def tile_cycles(self, t, unmasked, config: SSpmmConfig) -> Counters:
        """The cycle model of tile ``t`` whose rows have ``unmasked`` features in its chunk
        (:func:`moagcn.sim.sspmm.model.estimate`)."""
        return self._modelled(np.diff(t.indptr), unmasked, int(t.indices.size), t.width,
                              int(t.cols.size), config, (t.indptr, t.indices),
                              _tile_order(t, config))

    def empty_output(self, job: SSpmmJob) -> np.ndarray:
        return np.zeros((job.n_rows, job.n_features), dtype=np.float32)

    def work(self, job: SSpmmJob, config) -> Counters:
        return Counters(work_adds=work_adds(job.indptr, job.M),
                        spmm_adds=int(job.indices.size) * job.n_features,
                        elements=int(job.M.size), unmasked=int(job.M.sum()))

    def traffic(self, job: SSpmmJob, config: SSpmmConfig) -> tuple[int, int]:
        """Bytes in (load streams) and out (output beats) of one part."""
        return _traffic(np.diff(np.asarray(job.indptr, dtype=np.int64)),
                        np.count_nonzero(np.asarray(job.M, dtype=bool), axis=1),
                        int(job.indices.size), job.n_features, int(job.H.shape[0]), config)

    # -- models ---------------------------------------------------------------------------------

    def golden(self, job: SSpmmJob, config) -> np.ndarray:
        """``golden.sspmm(..., buffer=(max_edges, max_nodes))`` with the configuration's split;
        a long row's pieces come from :func:`long_row_pieces` (remembered for a read-only
        graph, as :meth:`expand` uses them), each piece summed by the golden model and the
        pieces merged as the driver merges the accelerator's."""
        if job.values is not None:
            # the same cut on the (sorted) columns, the values summed with their entries
            return golden.sspmm_weighted(job.indptr, job.indices, job.values, job.H, job.M,
                                         split=config.split_degree, pieces=config.slices,
                                         buffer=(config.max_edges, config.max_nodes))
        cut = long_row_pieces(job.indptr, job.indices, config)
        if cut is None:
            return golden.sspmm(job.indptr, sorted_columns(job.indptr, job.indices), job.H,
                                job.M, split=config.split_degree, pieces=config.slices)
        piece_ptr, cols, rep, first, count = cut
        mask = np.asarray(job.M, dtype=bool)
        part = golden.sspmm(piece_ptr, cols, job.H, mask[rep], split=config.split_degree,
                            pieces=config.slices)
        return golden.merge_pieces(part, first, count, mask)

    def cycles(self, job: SSpmmJob, config: SSpmmConfig) -> Counters:
        return self._modelled(np.diff(np.asarray(job.indptr, dtype=np.int64)),
                              np.count_nonzero(np.asarray(job.M, dtype=bool), axis=1),
                              int(job.indices.size), job.n_features, int(job.H.shape[0]), config,
                              (job.indptr, job.indices))

    def _modelled(self, deg, unmasked, n_edges: int, n_features: int, n_cols: int,
                  config, columns=None, order="auto") -> Counters:
        """The cycle model's counters with the part's traffic (the driver counts the work once,
        for the whole job); ``columns``: the part's ``(indptr, indices)``, for the shared node
        buffer's crossbar."""
        c = estimate_rows(deg, unmasked, n_edges, n_features, config, n_cols=n_cols,
                          columns=columns, order=order)
        c.bytes_read, c.bytes_written = _traffic(deg, unmasked, n_edges, n_features, n_cols,
                                                 config)
        c.work_adds = 0
        return c

    # -- the hardware ---------------------------------------------------------------------------

    def pack(self, job: SSpmmJob, config: SSpmmConfig) -> Packed:
        indptr, H, n, F = job.indptr, job.H, job.n_rows, job.n_features
        k = int(H.shape[0])
        limits = (("rows", n, config.max_nodes, "max_nodes"),
                  ("feature rows", k, config.max_nodes, "max_nodes"),
                  ("edges", int(job.indices.size), config.max_edges, "max_edges"),
                  ("features", F, config.max_feature_width, "max_feature_width"))
        for what, value, limit, param in limits:
            if value > limit:
                raise UserError(f"the job has {value} {what} but this configuration holds "
                                f"{limit}; use a larger preset or --param {param}=...")
        lw = config.load_width
        beats_per_row = -(-F // lw)
        feat = np.zeros((k, beats_per_row * lw), dtype=np.uint32)
        feat[:, :F] = as_bits(H).reshape(k, F)
        mask_words = -(-config.max_feature_width // 32)
        bits = np.zeros((n, mask_words * 32), dtype=np.uint8)
        bits[:, :F] = np.asarray(job.M, dtype=bool)
        packed_mask = np.packbits(bits.reshape(n, mask_words, 32), axis=2, bitorder="little")
        if config.weighted:
            # each beat: LW column indices, then their LW values (1.0 for a binary job)
            nnz = int(np.asarray(job.indices).size)
            values = (np.ones(nnz, dtype=np.float32) if job.values is None
                      else np.asarray(job.values, dtype=np.float32))
            order = row_sort_order(indptr, job.indices)
            index_beats = np.hstack([
                pack_beats(np.asarray(job.indices)[order].astype(np.uint32), lw),
                pack_beats(as_bits(values[order]).reshape(-1), lw)])
        else:
            index_beats = pack_beats(sort_rows(indptr, job.indices).astype(np.uint32), lw)
        return Packed({
            "indptr_in": pack_beats(np.asarray(indptr, dtype=np.uint32), lw),
            "indices_in": index_beats,
            "mask_in": packed_mask.view("<u4").reshape(n, mask_words),
            "feat_in": feat.reshape(k * beats_per_row, lw),
        }, {"n_rows": n, "n_cols": k, "n_features": F})

    def unpack(self, words, packed: Packed, job: SSpmmJob, config) -> np.ndarray:
        return beats_to_z(words, job.indptr, job.M, job.n_features, config.lanes)

    def hardware_counters(self, raw, job: SSpmmJob, config: SSpmmConfig) -> Counters:
        """The part's counters; ``cycles_load`` the loads it exposed (those that overlapped the
        part before, with two load banks, go to ``extra["cycles_load_hidden"]``)."""
        mapped = ("cycles_total", "cycles_load", "cycles_compute", "cycles_output")
        c = Counters(cycles_load=int(raw["cycles_load"]) - int(raw.get("cycles_load_hidden", 0)),
                     cycles_compute=int(raw["cycles_compute"]),
                     cycles_output=int(raw["cycles_output"]),
                     extra={k: int(raw[k]) for k in self.protocol.counters if k not in mapped})
        c.bytes_read, c.bytes_written = self.traffic(job, config)
        return c

    def max_cycles(self, job: SSpmmJob, packed: Packed, config) -> int:
        bound = self.cycles(job, config)
        return 4 * bound.cycles_total + 8 * (len(packed.streams["feat_in"]) + job.n_rows) + 10_000

    # -- aggregation ----------------------------------------------------------------------------

    def aggregation_job(self, indptr, indices, H, M, config) -> SSpmmJob:
        return SSpmmJob(indptr, indices, H, M)

    entry_op_params = {"weighted": "weighted=true"}

    def entry_ops(self, config: SSpmmConfig) -> frozenset:
        return frozenset({"weighted"}) if config.weighted else frozenset()

    def weighted_job(self, indptr, indices, values, H, M, config) -> SSpmmJob:
        """``Z = (A_w H) ⊙ M`` as a checked job: the values checked (finite, one per entry)
        and each row's entries sorted with their values (:meth:`check`'s form)."""
        values = check_values(values, int(np.asarray(indices).size))
        indices, values = _sorted_entries(indptr, indices, values)
        return SSpmmJob(indptr, indices, H, M, values)


SPEC = SSpmmSpec()

