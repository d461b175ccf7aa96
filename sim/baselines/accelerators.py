"""Cycle models of MixGCN's baseline aggregation accelerators, and the comparison with the SPU.

MixGCN Sec. 4.4.1 compares its sparse accelerator (the SPU, :mod:`moagcn.sim.sspmm.memory`)
with HyGCN (Yan et al., HPCA 2020) and AWB-GCN (Geng et al., MICRO 2020) "with identical
computational resources (16,384 units) and on-chip SRAM size (100MB), while setting a uniform
HBM bandwidth of 1024GB/s", at the baselines' own clocks: 1 GHz for HyGCN, 330 MHz for AWB-GCN.
The models here are event-count models driven by the graph's CSR (per-row degrees, the rows of
every tile, the distinct sources a tile names, the load of every processing element); no
feature values are needed. Every one reports the same counters: ``cycles``, ``time_s``,
``adds`` (and ``mults``), ``sram_read_bytes``, ``sram_write_bytes``, ``hbm_bytes`` and
``utilization_total`` (useful additions / (units x cycles), over the whole job: these models
give no compute-only cycle count to divide by).

**Memory system, the same for all three** (:class:`MemorySystem`, taken from the SPU's
configuration so the comparison is iso-SRAM and iso-bandwidth): a 32 MB feature (input)
buffer, a 32 MB output (aggregation) buffer and a 32 MB index (edge) buffer; the SPU's 4 MB mask
buffer has no counterpart in the baselines and is left unused by them. The graph is tiled as
the SPU tiles it (output-stationary 2-D tiles: destination blocks that fill the output buffer,
source blocks that fill half the feature buffer, loads double-buffered against compute, a
block's write-back and the next block's first load not overlapped), so that the systems differ
by their datapaths and what they can skip, not by a different memory schedule.

**What each can skip.** The SPU skips masked outputs (neither adds nor data movement for an
output element whose mask bit is 0; its feature-row fetch is whole, so the fetches are those of
its cycle model), and loads from HBM only the distinct source rows a tile names. Neither
baseline knows the output mask (both are inference accelerators, MixGCN Sec. 2.4/3.2.1): they
compute and write all F features of every row with neighbours. HyGCN skips source rows outside
each window's first..last used row (window sliding and shrinking) but loads the unused rows in
between; AWB-GCN balances work over its PEs and is charged for the distinct source rows, like
the SPU.

**HyGCN** (:func:`hygcn`; Yan et al. HPCA 2020: aggregation engine of 32 SIMD16 cores at 1 GHz,
vertex-disperse processing, interval-shard partitioning, window sliding and shrinking):

- the 16,384 lanes are 1,024 SIMD16 cores; as in HyGCN's vertex-disperse mode the F features of
  one vertex are spread over ``ceil(F / 16)`` cores (a *vertex group*), which adds one
  neighbour's feature row per cycle; there are ``16,384 // (16 ceil(F/16))`` groups (128 at
  F = 128). Lanes beyond F in a group idle;
- a destination block (HyGCN's *interval*) meets the sources in *windows* of at most half the
  feature buffer's rows (HyGCN's shards, double-buffered): a window *slides* down to the first
  source row any edge of the interval names, and *shrinks* its bottom up to the last such row
  below its height; the rows from first to last are loaded (4F bytes each, used or not), plus
  the window's edges (4 B each) and row pointers (4 B per interval row per edge-buffer piece).
  ``window="slide"`` does not shrink (loads the full height), ``"fixed"`` neither slides nor
  shrinks (fixed shards, every shard with an edge loaded whole);
- a window's compute is ``max(ceil(E_w / groups), max_v deg_w(v)) + pipeline``: destination
  vertices are dealt to free groups, one edge per cycle each, so the window ends no earlier
  than its total work spread over the groups and than its longest vertex. This is a lower
  bound of list scheduling (favourable to HyGCN), and it ignores the accumulator's adder
  latency (a group adding into the same vertex every cycle) and the edge scheduler's limits;
- SRAM: every edge reads its neighbour's F features and its index; each (vertex, window) with
  edges reads (after the first) and writes the vertex's F partial sums in the aggregation
  buffer; the write-back reads the outputs; HBM loads are written into the buffers.

**AWB-GCN** (:func:`awbgcn`; Geng et al. MICRO 2020: SpMM on a PE array by column-wise product,
one column of the dense operand per *round*, 4K PEs at 330 MHz on an Intel D5005 FPGA, runtime
rebalancing by distribution smoothing, remote switching and evil-row remapping):

- 16,384 PEs, each a binary32 MAC (AWB-GCN multiplies by A's values: a normalised adjacency in
  GCN inference; here A is binary but the datapath still multiplies: ``mults = adds``). A tile
  is processed in F rounds; in a round every entry of the tile is one MAC on the PE that owns
  its row, rows dealt to PEs round-robin (row ``i`` to PE ``i mod N``); a round lasts as long
  as the most loaded PE's work;
- *distribution smoothing* lets a PE hand work to PEs up to ``smoothing_hops`` away (2 by
  default; AWB-GCN's design shares with near neighbours). Modelled as fluid sharing: a round
  lasts the largest ``(work of PEs a..b) / (PEs within hops of a..b)`` over intervals a..b
  (interval lengths on a geometric grid, so the bound is a lower bound: favourable to AWB-GCN);
- *remote switching* (rows exchanged between the most and least loaded PEs, tuned over rounds
  and kept once converged) is modelled by its converged state: rows dealt largest first to the
  least loaded PEs (LPT, in batches of N); *evil-row remapping* splits rows longer than the
  ideal load ``ceil(tile entries / N)`` into pieces of at most that length on separate PEs,
  whose partial sums cost one extra add per further piece and round. The first
  ``tune_rounds`` rounds of every tile (2) run with smoothing only (the tuner's profiling);
  the converged configuration is used for the rest (never worse than smoothing alone);
- SRAM: every round reads each entry of the tile (index and value, 8 B) and each distinct
  source's element of the round's column (4 B); partial sums and loads as for HyGCN. HBM: the
  tile's entries (8 B), row pointers, the distinct sources' rows (4F B).

The SPU (:func:`spu`) is :func:`moagcn.sim.sspmm.memory.estimate_graph` plus the SRAM traffic
of its cycle model (:func:`spu_sram_traffic`), which that report does not give.
:func:`compare` puts the three beside the CPU baselines of :mod:`moagcn.sim.baselines.cpu`
with energies from :mod:`moagcn.sim.baselines.energy`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from moagcn.errors import UserError
from moagcn.sim.baselines import cpu as cpu_baseline
from moagcn.sim.baselines.energy import TECH_28NM, EnergyModel, average_power, energy
from moagcn.sim.sspmm.memory import estimate_graph

MIB = 1 << 20
#: adders / SIMD lanes / PEs of every accelerator in MixGCN Sec. 4.4.1
PAPER_UNITS = 16384
#: the SPU's power in MixGCN Sec. 4.1 (28 nm, 500 MHz, Design Compiler), for a cross-check
PAPER_SPU_POWER_W = 38.96
#: the systems :func:`compare` knows
SYSTEMS = ("spu", "hygcn", "awbgcn", "cpu", "cpu-roofline")
WINDOWS = ("slide_shrink", "slide", "fixed")


@dataclass(frozen=True)
class MemorySystem:
    """On-chip buffers and HBM shared by the three accelerators (module docstring)."""

    feature_buffer_bytes: int = 32 * MIB
    output_buffer_bytes: int = 32 * MIB
    index_buffer_bytes: int = 32 * MIB
    hbm_gb_per_s: float = 1024.0

    def __post_init__(self):
        for k in ("feature_buffer_bytes", "output_buffer_bytes", "index_buffer_bytes"):
            if getattr(self, k) < 8:
                raise ValueError(f"{k}={getattr(self, k)} must be at least 8 bytes")
        if not self.hbm_gb_per_s > 0:
            raise ValueError(f"hbm_gb_per_s={self.hbm_gb_per_s} must be > 0")

    def plan(self, width: int, entry_bytes: int = 4) -> tuple[int, int, int]:
        """(destination rows, source rows, index entries per half buffer) at ``width``."""
        dst = max(1, self.output_buffer_bytes // (4 * width))
        src = max(1, self.feature_buffer_bytes // (4 * width) // 2)
        half = max(1, self.index_buffer_bytes // entry_bytes // 2)
        return dst, src, half

    def bytes_per_cycle(self, clock_mhz: float) -> float:
        return self.hbm_gb_per_s * 1e9 / (clock_mhz * 1e6)


def memory_of(spu_config) -> MemorySystem:
    """The SPU configuration's buffers and HBM, for the baselines (iso-SRAM, iso-bandwidth)."""
    if not spu_config.hbm_gb_per_s > 0:
        raise UserError("the comparison needs an SPU configuration with HBM (--preset paper): "
                        "the baselines are modelled at its units, buffers and HBM bandwidth")
    words = spu_config.max_nodes * spu_config.max_feature_width
    return MemorySystem(feature_buffer_bytes=4 * words, output_buffer_bytes=4 * words,
                        index_buffer_bytes=4 * spu_config.max_edges,
                        hbm_gb_per_s=spu_config.hbm_gb_per_s)


@dataclass(frozen=True)
class HyGCNConfig:
    """HyGCN's aggregation engine at MixGCN's scale (module docstring)."""

    units: int = PAPER_UNITS          # SIMD lanes (MixGCN Sec. 4.4.1)
    simd_width: int = 16              # HyGCN: SIMD16 cores
    clock_mhz: float = 1000.0         # HyGCN's clock, kept by MixGCN
    window: str = "slide_shrink"
    pipeline: int = 8                 # fill and drain per window, cycles
    memory: MemorySystem = field(default_factory=MemorySystem)

    def __post_init__(self):
        if self.units < 1 or self.simd_width < 1 or self.units % self.simd_width:
            raise ValueError(f"units={self.units} must be a positive multiple of "
                             f"simd_width={self.simd_width}")
        if self.window not in WINDOWS:
            raise ValueError(f"window={self.window!r}: choose one of {', '.join(WINDOWS)}")
        if not self.clock_mhz > 0 or self.pipeline < 0:
            raise ValueError("clock_mhz must be > 0 and pipeline >= 0")


@dataclass(frozen=True)
class AWBGCNConfig:
    """AWB-GCN's SpMM engine at MixGCN's scale (module docstring)."""

    pes: int = PAPER_UNITS            # MAC PEs (MixGCN Sec. 4.4.1)
    clock_mhz: float = 330.0          # AWB-GCN's clock on the D5005, kept by MixGCN
    smoothing_hops: int = 2           # 0: no distribution smoothing
    remote_switching: bool = True
    evil_rows: bool = True
    tune_rounds: int = 2              # rounds per tile before the tuned configuration applies
    pipeline: int = 8                 # fill and drain per tile, cycles
    memory: MemorySystem = field(default_factory=MemorySystem)

    def __post_init__(self):
        if self.pes < 1:
            raise ValueError(f"pes={self.pes} must be >= 1")
        if self.smoothing_hops < 0 or self.tune_rounds < 0 or self.pipeline < 0:
            raise ValueError("smoothing_hops, tune_rounds and pipeline must be >= 0")
        if not self.clock_mhz > 0:
            raise ValueError(f"clock_mhz={self.clock_mhz} must be > 0")

    @property
    def rebalancing(self) -> bool:
        return self.remote_switching or self.evil_rows


# -- shared tiling -------------------------------------------------------------------------------

def _check(indptr, indices, width: int):
    indptr = np.asarray(indptr, dtype=np.int64)
    if width < 1:
        raise UserError(f"--width {width} must be >= 1")
    if indptr.ndim != 1 or indptr.size < 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise UserError("the graph's row pointers must start at 0 and never decrease")
    if int(indptr[-1]) != len(indices):
        raise UserError(f"the graph's row pointers end at {int(indptr[-1])} but it has "
                        f"{len(indices)} column indices")
    return indptr


def _blocks(indptr, indices, dst_rows: int, progress=None):
    """Destination blocks: (r0, r1, degrees, row of every entry, columns)."""
    n = indptr.size - 1
    blocks = [(s, min(n, s + dst_rows)) for s in range(0, n, dst_rows)]
    for r0, r1 in (blocks if progress is None else progress(blocks)):
        deg = np.diff(indptr[r0:r1 + 1])
        cols = np.asarray(indices[int(indptr[r0]):int(indptr[r1])], dtype=np.int64)
        row_of = np.repeat(np.arange(r1 - r0, dtype=np.int64), deg)
        yield r0, r1, deg, row_of, cols


def _block_timeline(out_prev: float, comp, mem) -> float:
    """The SPU's schedule of one block (moagcn.sim.sspmm.memory): the previous block's
    write-back and this block's first load, then loads overlapped with compute."""
    comp = np.asarray(comp, dtype=np.float64)
    mem = np.asarray(mem, dtype=np.float64)
    return out_prev + mem[0] + float(np.maximum(comp[:-1], mem[1:]).sum()) + comp[-1]


def _result(system, clock_mhz, units, cycles_total, comp_total, mem_total, adds, mults, sram_r,
            sram_w, hbm, useful, **extra) -> dict:
    cycles = int(np.ceil(cycles_total))
    return {"system": system, "clock_mhz": clock_mhz, "units": units, "cycles": cycles,
            "cycles_compute": int(np.ceil(comp_total)), "cycles_memory": int(np.ceil(mem_total)),
            "time_s": cycles / (clock_mhz * 1e6), "adds": int(adds), "mults": int(mults),
            "sram_read_bytes": int(sram_r), "sram_write_bytes": int(sram_w),
            "hbm_bytes": int(hbm),
            "utilization_total": useful / (units * cycles) if cycles else 0.0,
            "bound": "memory" if mem_total > comp_total else "compute", **extra}


# -- HyGCN ---------------------------------------------------------------------------------------

def hygcn_windows(sources, height: int, n: int, mode: str = "slide_shrink"):
    """(first row, rows loaded) of every window over the sorted distinct ``sources`` of one
    interval: sliding to the first used row, shrinking to the last used row below the height
    (``"slide_shrink"``), sliding only (``"slide"``: full height), or fixed shards."""
    sources = np.asarray(sources, dtype=np.int64)
    if mode == "fixed":
        starts = np.unique(sources // height) * height
        return starts, np.minimum(height, n - starts)
    starts, loaded = [], []
    i = 0
    while i < sources.size:
        s = int(sources[i])
        j = int(np.searchsorted(sources, s + height, side="left"))
        starts.append(s)
        loaded.append(int(sources[j - 1]) - s + 1 if mode == "slide_shrink"
                      else min(height, n - s))
        i = j
    return np.asarray(starts, dtype=np.int64), np.asarray(loaded, dtype=np.int64)


def hygcn(indptr, indices, width: int, config: HyGCNConfig = HyGCNConfig(),
          progress=None) -> dict:
    """HyGCN's aggregation engine on ``Z = A H`` (all F features of every row with
    neighbours: it cannot skip masked outputs); see the module docstring."""
    indptr = _check(indptr, indices, width)
    n = indptr.size - 1
    per_vertex = -(-width // config.simd_width)
    groups = config.units // (config.simd_width * per_vertex)
    if groups < 1:
        raise UserError(f"--width {width}: a vertex needs {per_vertex} SIMD{config.simd_width} "
                        f"cores but HyGCN has {config.units // config.simd_width}")
    mem = config.memory
    dst_rows, height, half_edges = mem.plan(width)
    bpc = mem.bytes_per_cycle(config.clock_mhz)
    F4 = 4 * width
    timeline = comp_total = mem_total = out_prev = 0.0
    hbm = feature_hbm = sram_r = sram_w = 0
    windows = pairs_total = 0
    edges = int(indptr[-1])
    for r0, r1, deg, row_of, cols in _blocks(indptr, indices, dst_rows, progress):
        rows = r1 - r0
        active = int(np.count_nonzero(deg))
        out_b = F4 * active
        hbm += out_b
        if not cols.size:
            out_prev += out_b / bpc
            continue
        starts, loaded = hygcn_windows(np.unique(cols), height, n, config.window)
        nw = starts.size
        wid = np.searchsorted(starts, cols, side="right") - 1
        e_w = np.bincount(wid, minlength=nw)
        jobs = np.bincount(wid * rows + row_of, minlength=nw * rows).reshape(nw, rows)
        longest = jobs.max(axis=1)
        pairs = int(np.count_nonzero(jobs))
        pieces = -(-e_w // half_edges)
        ptr_b = 4 * (rows + 1) * pieces
        load_b = F4 * loaded + 4 * e_w + ptr_b
        comp = np.maximum(-(-e_w // groups), longest) + config.pipeline
        timeline += _block_timeline(out_prev, comp, load_b / bpc)
        out_prev = out_b / bpc
        comp_total += comp.sum()
        mem_total += load_b.sum() / bpc + out_b / bpc
        hbm += int(load_b.sum())
        feature_hbm += int(F4 * loaded.sum())
        # SRAM: features and an index per edge, pointers per window, partial sums per
        # (vertex, window), the write-back; every HBM load is written into a buffer
        sram_r += int(cols.size) * (F4 + 4) + int(ptr_b.sum()) + F4 * (pairs - active) + out_b
        sram_w += int(load_b.sum()) + F4 * pairs
        windows += nw
        pairs_total += pairs
    timeline += out_prev
    adds = edges * width
    return _result("hygcn", config.clock_mhz, config.units, timeline, comp_total, mem_total,
                   adds, 0, sram_r, sram_w, hbm, adds, windows=windows,
                   vertex_groups=groups, feature_hbm_bytes=feature_hbm,
                   window=config.window, window_rows=height, interval_rows=dst_rows,
                   vertex_window_pairs=pairs_total,
                   skips="source rows outside each window's first..last used row; "
                         "no output-mask skipping")


# -- AWB-GCN -------------------------------------------------------------------------------------

def smoothed_max(loads, hops: int) -> int:
    """Cycles of a round whose PE loads ``loads`` are smoothed over ``hops`` neighbours each
    side: the largest ``work(a..b) / PEs within hops of a..b`` over intervals a..b (lengths on
    a geometric grid: a lower bound of the exact figure, exact for a single overloaded PE)."""
    loads = np.asarray(loads, dtype=np.float64)
    n = loads.size
    if not n or not loads.any():
        return 0
    if hops == 0:
        return int(np.ceil(loads.max() - 1e-9))
    c = np.concatenate([[0.0], np.cumsum(loads)])
    best = 0.0
    for length in np.unique(np.geomspace(1, n, num=48).astype(np.int64)):
        a = np.arange(0, n - length + 1)
        span = np.minimum(a + length - 1 + hops, n - 1) - np.maximum(a - hops, 0) + 1
        best = max(best, float(((c[a + length] - c[a]) / span).max()))
    return int(np.ceil(best - 1e-9))


def _lpt(items, loads):
    """Deal ``items`` (any order) largest first to the least loaded PEs, a batch of N at a
    time (remote switching's converged state)."""
    loads = np.asarray(loads, dtype=np.float64).copy()
    items = np.sort(np.asarray(items, dtype=np.float64))[::-1]
    n = loads.size
    for lo in range(0, items.size, n):
        chunk = items[lo:lo + n]
        loads[np.argsort(loads, kind="stable")[:chunk.size]] += chunk
    return loads


def _split(items, ideal: int):
    """Evil rows (longer than ``ideal``) cut into ``ceil(d / ideal)`` near-equal pieces:
    (pieces, merges = sum of pieces - 1)."""
    items = np.asarray(items, dtype=np.int64)
    k = -(-items // ideal)
    q, r = items // k, items % k
    big = np.repeat(q + 1, r)
    small = np.repeat(q, k - r)
    return np.concatenate([big, small]), int((k - 1).sum())


def awbgcn_tile(deg, width: int, config: AWBGCNConfig) -> dict:
    """Cycles of one tile whose rows have ``deg`` entries: ``width`` rounds (module
    docstring). Returns ``cycles``, per-round ``base``, ``smoothed``, ``tuned`` cycles and the
    ``merge_adds`` of evil rows' pieces."""
    deg = np.asarray(deg, dtype=np.int64)
    N = config.pes
    pe_of = np.arange(deg.size) % N
    base_loads = np.bincount(pe_of, weights=deg, minlength=N)
    base = int(base_loads.max()) if deg.size else 0
    smooth = smoothed_max(base_loads, config.smoothing_hops)
    tuned, merges = smooth, 0
    total = int(deg.sum())
    if config.rebalancing and total:
        ideal = max(1, -(-total // N))
        evil = (deg > ideal) if config.evil_rows else np.zeros(deg.size, dtype=bool)
        pieces, merges = _split(deg[evil], ideal) if evil.any() else (np.zeros(0, np.int64), 0)
        if config.remote_switching:
            stay = deg[~evil]
            loads = _lpt(np.concatenate([stay[stay > 0], pieces]), np.zeros(N))
        else:       # evil rows remapped to the least loaded PEs, the others where they were
            loads = _lpt(pieces, np.bincount(pe_of[~evil], weights=deg[~evil], minlength=N))
        tuned = min(smooth, smoothed_max(loads, config.smoothing_hops))
        if tuned == smooth:     # the tuner keeps the smoothing-only configuration
            merges = 0
    t = min(config.tune_rounds, width) if config.rebalancing else width
    cycles = t * smooth + (width - t) * tuned + (config.pipeline if total else 0)
    return {"cycles": cycles, "base": base, "smoothed": smooth, "tuned": tuned,
            "merge_adds": (width - t) * merges}


def awbgcn(indptr, indices, width: int, config: AWBGCNConfig = AWBGCNConfig(),
           progress=None) -> dict:
    """AWB-GCN's SpMM engine on ``Z = A H`` (all F features: no output-mask skipping); see
    the module docstring."""
    indptr = _check(indptr, indices, width)
    n = indptr.size - 1
    mem = config.memory
    dst_rows, src_rows, half_entries = mem.plan(width, entry_bytes=8)
    n_src = -(-n // src_rows)
    bpc = mem.bytes_per_cycle(config.clock_mhz)
    F4 = 4 * width
    timeline = comp_total = mem_total = out_prev = 0.0
    hbm = sram_r = sram_w = merge_adds = 0
    tiles = 0
    base_cycles = 0
    edges = int(indptr[-1])
    for r0, r1, deg, row_of, cols in _blocks(indptr, indices, dst_rows, progress):
        rows = r1 - r0
        active = int(np.count_nonzero(deg))
        out_b = F4 * active
        hbm += out_b
        if not cols.size:
            out_prev += out_b / bpc
            continue
        src = cols // src_rows
        by_src = np.argsort(src, kind="stable")
        edges_k = np.bincount(src, minlength=n_src)
        bounds = np.concatenate([[0], np.cumsum(edges_k)])
        present = np.zeros(n, dtype=bool)
        present[cols] = True
        distinct_k = np.bincount(np.flatnonzero(present) // src_rows, minlength=n_src)
        comps, mems = [], []
        pairs = 0
        for k in np.flatnonzero(edges_k):
            deg_t = np.bincount(row_of[by_src[bounds[k]:bounds[k + 1]]], minlength=rows)
            e, distinct = int(edges_k[k]), int(distinct_k[k])
            r = awbgcn_tile(deg_t, width, config)
            pieces = -(-e // half_entries)
            load_b = 8 * e + 4 * (rows + 1) * pieces + F4 * distinct
            comps.append(r["cycles"])
            mems.append(load_b / bpc)
            base_cycles += width * r["base"]
            merge_adds += r["merge_adds"]
            pairs += int(np.count_nonzero(deg_t))
            hbm += load_b
            sram_r += width * (8 * e + 4 * distinct) + 4 * (rows + 1) * pieces
            sram_w += load_b
        timeline += _block_timeline(out_prev, comps, mems)
        out_prev = out_b / bpc
        comp_total += float(np.sum(comps))
        mem_total += float(np.sum(mems)) + out_b / bpc
        sram_r += F4 * (pairs - active) + out_b
        sram_w += F4 * pairs
        tiles += len(comps)
    timeline += out_prev
    adds = edges * width
    return _result("awbgcn", config.clock_mhz, config.pes, timeline, comp_total, mem_total,
                   adds + merge_adds, adds, sram_r, sram_w, hbm, adds, tiles=tiles,
                   merge_adds=merge_adds, cycles_compute_unbalanced=base_cycles,
                   rebalancing={"smoothing_hops": config.smoothing_hops,
                                "remote_switching": config.remote_switching,
                                "evil_rows": config.evil_rows,
                                "tune_rounds": config.tune_rounds},
                   skips="nothing of the output mask; loads only the sources a tile names")


# -- SPU -----------------------------------------------------------------------------------------

def spu_sram_traffic(indptr, indices, width: int, unmasked, config, hbm_bytes: int) -> dict:
    """SRAM bytes of the SPU's cycle model (``estimate_graph`` reports HBM bytes only).

    Reads: every fetch of a neighbour row (one per entry and *pass*, the model's
    ``rows_fetched``: ``deg(v) * ceil(ceil(|S_v| / W) / G)``) reads the whole row (4F B, the
    node buffer's port is a row; the output-mask MUXes select after it) and its column index
    (4 B); per (row, source tile) with work, its row pointer (4 B), its mask row (F/8 B) and,
    after the row's first tile, its |S_v| partial sums; the write-back reads the outputs.
    Writes: every HBM load into a buffer, and the partial sums per (row, source tile).
    ``sram_read_bytes_pass_words``: the same if a fetch read only its jobs' W words each (a
    narrower node-buffer port than the model's; for the energy's sensitivity)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    um = np.minimum(np.asarray(unmasked, dtype=np.int64), width)
    deg = np.diff(indptr)
    work = (deg > 0) & (um > 0)
    jobs = np.where(work, -(-um // config.group_lanes), 0)
    passes = -(-jobs // config.groups)
    fetches = int(np.dot(deg, passes))
    words = config.max_nodes * config.max_feature_width
    dst_rows = max(1, words // width)
    src_rows = max(1, words // width // 2)
    n_src = -(-n // src_rows)
    tiles_of_row = np.zeros(n, dtype=np.int64)
    for r0, r1, _, row_of, cols in _blocks(indptr, indices, dst_rows):
        if cols.size:
            key = np.unique(row_of * n_src + cols // src_rows)
            tiles_of_row[r0:r1] = np.bincount(key // n_src, minlength=r1 - r0)
    tiles_of_row = np.where(work, tiles_of_row, 0)
    pairs = int(tiles_of_row.sum())
    out_b = 4 * int(np.where(deg > 0, um, 0).sum())
    partial = 4 * int(np.dot(tiles_of_row, um))
    first = 4 * int(um[work].sum())
    mask_row = -(-width // 8)
    rest = fetches * 4 + pairs * (4 + mask_row) + (partial - first) + out_b
    reads = fetches * 4 * width + rest
    # the variant where a fetch reads only the words of its pass's jobs (W each)
    turns = int(np.dot(deg, jobs))
    reads_pass = turns * 4 * config.group_lanes + rest
    writes = (int(hbm_bytes) - out_b) + partial
    return {"sram_read_bytes": reads, "sram_write_bytes": writes, "rows_fetched": fetches,
            "row_tile_pairs": pairs, "sram_read_bytes_pass_words": reads_pass}


def spu(indptr, indices, width: int, unmasked, config, progress=None) -> dict:
    """The SPU: :func:`moagcn.sim.sspmm.memory.estimate_graph` in the common counters."""
    indptr = _check(indptr, indices, width)
    r = estimate_graph(indptr, indices, width, unmasked, config, progress)
    t = spu_sram_traffic(indptr, indices, width, unmasked, config, r["hbm_bytes"])
    cycles = r["cycles_total"]
    return {"system": "spu", "clock_mhz": config.clock_mhz, "units": config.adders,
            "cycles": cycles, "cycles_compute": r["cycles_compute"],
            "cycles_memory": r["cycles_memory"], "time_s": r["time_s"],
            "adds": r["work_adds"], "mults": 0, "sram_read_bytes": t["sram_read_bytes"],
            "sram_write_bytes": t["sram_write_bytes"], "hbm_bytes": r["hbm_bytes"],
            "utilization_total": r["utilization_total"], "bound": r["bound"], "tiles": r["tiles"],
            "rows_fetched": t["rows_fetched"],
            "sram_read_bytes_pass_words": t["sram_read_bytes_pass_words"],
            "skips": "masked outputs (adds and movement); loads only the sources a tile names"}


# -- the comparison ------------------------------------------------------------------------------

DESCRIPTIONS = {
    "spu": "MixGCN S-SpMM accelerator (cycle model)",
    "hygcn": "HyGCN aggregation engine (model)",
    "awbgcn": "AWB-GCN SpMM engine (model)",
    "cpu": "torch CSR on this machine (measured)",
    "cpu-roofline": "2x Xeon Platinum 8462Y+ (roofline)",
}


def parse_systems(text) -> list[str]:
    """``"spu,hygcn"`` -> the names, in :data:`SYSTEMS` order; unknown names are a
    :class:`UserError` that lists the known ones."""
    if isinstance(text, str):
        names = [t.strip().lower() for t in text.split(",") if t.strip()]
    else:
        names = [str(t).strip().lower() for t in text]
    bad = [t for t in names if t not in SYSTEMS]
    if bad or not names:
        raise UserError(f"--systems {text if isinstance(text, str) else ','.join(text)!r}: "
                        f"unknown system {', '.join(bad) if bad else '(none given)'}; choose "
                        f"from {', '.join(SYSTEMS)} (comma-separated)")
    return [s for s in SYSTEMS if s in names]


def _ratio(a, b):
    return a / b if (a is not None and b) else None


def compare(indptr, indices, width: int, unmasked, spu_config, systems=SYSTEMS, *,
            repeats: int = 5, threads: int | None = None,
            energy_model: EnergyModel = TECH_28NM, hygcn_config: HyGCNConfig | None = None,
            awbgcn_config: AWBGCNConfig | None = None, progress=None) -> dict:
    """One row per system with ``time_s``, ``energy_j``, ``speedup_vs_cpu`` (over the
    measured CPU: the faster of one thread and all threads), ``speedup_vs_server`` (over the
    server roofline), ``spu_speedup`` (this system's time over the SPU's) and
    ``spu_energy_gain`` (its energy over the SPU's).

    The baselines take the SPU configuration's units, buffers and HBM (:func:`memory_of`);
    ``progress(name)`` (optional) is called before each system; the SPU's figures are the
    S-SpMM cycle model's (:func:`moagcn.sim.sspmm.memory.estimate_graph`)."""
    systems = parse_systems(systems)
    indptr = _check(indptr, indices, width)
    n = indptr.size - 1
    nnz = int(indptr[-1])
    memory = memory_of(spu_config)
    hy = hygcn_config or HyGCNConfig(units=spu_config.adders, memory=memory)
    awb = awbgcn_config or AWBGCNConfig(pes=spu_config.adders, memory=memory)
    rows = []
    for name in systems:
        if progress:
            progress(name)
        if name == "spu":
            r = spu(indptr, indices, width, unmasked, spu_config)
        elif name == "hygcn":
            r = hygcn(indptr, indices, width, hy)
        elif name == "awbgcn":
            r = awbgcn(indptr, indices, width, awb)
        elif name == "cpu":
            m = cpu_baseline.measure(indptr, indices, width, repeats=repeats, threads=threads)
            r = {"system": "cpu", **{k: m[k] for k in (
                "time_s", "adds", "energy_j", "power_w", "threads_used", "time_s_1thread",
                "time_s_all_threads", "threads", "times_s", "power_note")}}
        else:
            m = cpu_baseline.roofline(n, nnz, width)
            r = {"system": "cpu-roofline", **{k: m[k] for k in (
                "time_s", "adds", "energy_j", "power_w", "bound", "dram_bytes",
                "time_s_compulsory", "time_memory_s", "time_compute_s", "llc_miss_fraction",
                "server")}}
        if "energy_j" not in r:
            r.update(energy(r, energy_model))
            r["power_w"] = average_power(r["energy_j"], r["time_s"])
        if name == "spu":
            r["energy_j_pass_words"] = energy(
                {**r, "sram_read_bytes": r["sram_read_bytes_pass_words"]},
                energy_model)["energy_j"]
            r["energy_j_paper_power"] = r["time_s"] * PAPER_SPU_POWER_W
        r["what"] = DESCRIPTIONS[name]
        rows.append(r)
    by = {r["system"]: r for r in rows}
    cpu_t = by["cpu"]["time_s"] if "cpu" in by else None
    server_t = by["cpu-roofline"]["time_s"] if "cpu-roofline" in by else None
    spu_r = by.get("spu")
    for r in rows:
        r["speedup_vs_cpu"] = _ratio(cpu_t, r["time_s"])
        r["speedup_vs_server"] = _ratio(server_t, r["time_s"])
        r["spu_speedup"] = _ratio(r["time_s"], spu_r["time_s"]) if spu_r else None
        r["spu_energy_gain"] = _ratio(r["energy_j"], spu_r["energy_j"]) if spu_r else None
    return {"rows": rows, "nodes": n, "entries": nnz, "width": width,
            "work_adds_unmasked": nnz * width,
            "energy_model": energy_model.as_dict(),
            "configs": {"hygcn": asdict(hy), "awbgcn": asdict(awb),
                        "memory": asdict(memory)}}


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def format_table(rows) -> str:
    """The comparison as a text table (one line per system)."""
    head = (f"{'system':13s} {'time_s':>11s} {'energy_j':>11s} {'power_w':>8s} {'util':>6s} "
            f"{'vs cpu':>9s} {'vs server':>9s} {'spu faster':>10s} {'spu energy':>10s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['system']:13s} {r['time_s']:11.4g} {r['energy_j']:11.4g} "
                     f"{_fmt(r.get('power_w'), '8.1f')} {_fmt(r.get('utilization_total'), '6.3f')} "
                     f"{_fmt(r['speedup_vs_cpu'], '9.2f')} "
                     f"{_fmt(r['speedup_vs_server'], '9.2f')} "
                     f"{_fmt(r['spu_speedup'], '10.2f')} {_fmt(r['spu_energy_gain'], '10.2f')}")
    return "\n".join(lines)
