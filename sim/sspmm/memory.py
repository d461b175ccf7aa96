"""The S-SpMM accelerator on graphs larger than its buffers: tiles through HBM.

:func:`estimate_graph` runs the cycle model (:func:`moagcn.sim.sspmm.model.estimate_rows`) on
any graph, without feature values, in bounded memory, for every preset, ``paper`` included: the
one cycle model, the one the bit-exact model device counts with and docs/sspmm.md checks
against the RTL.

*Configurations without HBM* (``hbm_gb_per_s = 0``: every configuration that can be built) are
fed by the host through the load streams, as the RTL is: a graph that does not fit is cut into
the driver's row tiles (:func:`moagcn.core.tiling.plan_tiles`) and the tiles run back to back,
each computing and streaming out in turn; with two load banks (``load_banks = 2``, the
default) a tile's loads run beside the tile before it
(:func:`moagcn.core.spec.overlap_loads`), with one they follow it. Exactly what ``moagcn sspmm
run`` simulates.

*Configurations with HBM* (the ``paper`` preset; model only) tile the graph in two dimensions,
output-stationary:

- a *destination block* is a run of rows whose outputs fill the output buffer;
- each destination block meets the *source blocks*, runs of node ids whose feature rows fit half
  the node buffer, in ascending order, so that every output element is still one sum in
  ascending column order (the partial sums stay in the output buffer between source blocks);
- a tile (destination block x source block) loads its column indices (with ``weighted`` and
  their edge values) and row pointers (4 bytes each) and the feature rows of the distinct
  sources its entries name (4 F bytes each), plus the block's mask rows with its first tile;
  a block's outputs (its computed elements, 4 bytes each) are written back after its last
  tile;
- the node and index buffers are double-buffered (hence the halves): a tile's loads overlap the
  previous tile's compute. The output buffer is not (a whole buffer per block halves the
  feature reloads, which dominate the traffic): a block's write-back and the next block's first
  loads come before that block computes. Per block, ``write-back_prev + load_0 + sum_k
  max(compute_k, load_{k+1}) + compute_last``; the job is ``memory``-bound when its HBM cycles
  exceed its compute cycles.

Rows are processed a destination block at a time, so beyond the graph itself the memory used
is a block's entries, not the graph's.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.spec import back_to_back
from moagcn.core.tiling import plan_tiles
from moagcn.errors import UserError
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.sim.sspmm.model import estimate_rows
from moagcn.sim.sspmm.spec import SPEC, long_row_pieces


def unmasked_counts(n_rows: int, width: int, density: float | None, mask=None,
                    seed: int = 0, block: int = 1 << 16) -> np.ndarray:
    """Per row, the unmasked features: from ``mask`` (rows x width, read a block at a time, so
    a memory-mapped .npy works) or drawn for a random mask of ``density``."""
    if mask is not None:
        out = np.empty(n_rows, dtype=np.int64)
        for lo in range(0, n_rows, block):
            out[lo:lo + block] = np.count_nonzero(np.asarray(mask[lo:lo + block]), axis=1)
        return out
    d = 1.0 if density is None else float(density)
    if not 0.0 <= d <= 1.0:
        raise UserError(f"--mask-density {density} must be in [0, 1]")
    if d == 1.0:
        return np.full(n_rows, width, dtype=np.int64)
    return np.random.default_rng(seed).binomial(width, d, n_rows).astype(np.int64)


def hbm_bytes_per_cycle(config: SSpmmConfig) -> float:
    return config.hbm_gb_per_s * 1e9 / (config.clock_mhz * 1e6)


def estimate_graph(indptr, indices, width: int, unmasked, config: SSpmmConfig,
                   progress=None) -> dict:
    """The cycle model of ``Z = (A H) ⊙ M`` on a graph of any size (see the module docstring).

    ``unmasked``: per row, its unmasked features (:func:`unmasked_counts`). Returns the report's
    figures: ``cycles_total``, ``cycles_compute``, ``cycles_memory`` (with the load streams
    also ``cycles_memory_hidden``), ``cycles_output``,
    ``work_adds``, ``adders``, ``utilization`` (over ``cycles_compute``, as
    :class:`~moagcn.core.counters.Counters` defines it), ``utilization_total`` (over
    ``cycles_total``), ``hbm_bytes``, ``bound``, ``time_s``,
    ``tiles``, ``model`` (``replay``: the one cycle model).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    if width < 1:
        raise UserError(f"--width {width} must be >= 1")
    if width > config.max_feature_width:
        raise UserError(f"--width {width} is wider than this configuration's buffers "
                        f"(max_feature_width={config.max_feature_width}); set --param "
                        f"max_feature_width={width} or more")
    unmasked = np.minimum(np.asarray(unmasked, dtype=np.int64), width)
    deg = np.diff(indptr)
    work = int(np.dot(deg, unmasked))
    if config.hbm_gb_per_s > 0:
        r = _tiled_hbm(indptr, indices, width, unmasked, config, progress)
    else:
        r = _tiled_streams(indptr, indices, width, unmasked, config)
    r["model"] = "replay"
    r["work_adds"] = work
    r["adders"] = config.adders
    r["utilization"] = work / (config.adders * r["cycles_compute"]) if r["cycles_compute"] \
        else 0.0
    r["utilization_total"] = work / (config.adders * r["cycles_total"]) if r["cycles_total"] \
        else 0.0
    r["time_s"] = r["cycles_total"] / (config.clock_mhz * 1e6)
    return r


def _tiled_streams(indptr, indices, width, unmasked, config: SSpmmConfig) -> dict:
    """Row tiles fed by the load streams, back to back (what the RTL does): with two load
    banks each tile's loads beside the tile before. ``cycles_memory`` is every load cycle,
    ``cycles_memory_hidden`` those that ran beside a tile's compute and output."""
    n = indptr.size - 1
    cut = long_row_pieces(indptr, indices, config)
    if cut is not None:
        # rows longer than any job holds run as pieces, each a row (added on the host)
        indptr, indices, rep = cut[0], cut[1], cut[2]
        unmasked = np.asarray(unmasked)[rep]
    tiles = plan_tiles(indptr, np.asarray(indices, dtype=np.int64), indptr.size - 1, n, width,
                       SPEC.limits(None, config))
    overlap = SPEC.loads_overlap(config)
    total, _ = back_to_back((SPEC.tile_cycles(t, np.minimum(unmasked[t.rows_start:t.rows_stop],
                                                            t.width), config)
                             for t in tiles), overlap)
    hidden = total.extra.get("cycles_load_hidden", 0)
    loads = total.cycles_load + hidden
    busy = total.cycles_compute + total.cycles_output
    return {"cycles_total": total.cycles_load + busy,
            "cycles_compute": total.cycles_compute, "cycles_memory": loads,
            "cycles_memory_hidden": hidden, "cycles_output": total.cycles_output,
            "hbm_bytes": total.bytes_read + total.bytes_written,
            "bound": "compute" if total.cycles_compute >= loads else "memory",
            **{key: int(total.extra.get(key, 0))
               for key in ("rows_fetched", "rows_read", "stall_bank")},
            "memory": ("load streams, each tile's beside the tile before (two load banks)"
                       if overlap else "load streams (one load bank: after each tile)"),
            "tiles": len(tiles)}


def _tiled_hbm(indptr, indices, width, unmasked, config: SSpmmConfig, progress) -> dict:
    """Output-stationary 2-D tiles through HBM (module docstring)."""
    n = indptr.size - 1
    words = config.max_nodes * config.max_feature_width        # node (and output) buffer
    dst_rows = max(1, words // width)                          # the whole output buffer
    src_rows = max(1, words // width // 2)                     # half the node buffer
    half_edges = max(1, config.max_edges // 2)
    mask_bytes_per_row = -(-width // 8)
    bpc = hbm_bytes_per_cycle(config)
    n_src = -(-n // src_rows)
    blocks = [(s, min(n, s + dst_rows)) for s in range(0, n, dst_rows)]
    steps = blocks if progress is None else progress(blocks)
    timeline = 0.0
    comp_total = mem_total = out_total = 0.0
    reads = {"rows_fetched": 0, "rows_read": 0, "stall_bank": 0}
    hbm = 0
    tiles = 0
    out_prev = 0.0
    for r0, r1 in steps:
        lo, hi = int(indptr[r0]), int(indptr[r1])
        rows = r1 - r0
        cols = np.asarray(indices[lo:hi], dtype=np.int64)
        row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(indptr[r0:r1 + 1]))
        # the block's entries grouped by source block (memory: the block's entries, never
        # rows x source blocks), and each source block's distinct columns
        src = (cols // src_rows).astype(np.uint16 if n_src < 1 << 16 else np.int64)
        by_src = np.argsort(src, kind="stable")     # a radix sort for 16-bit keys
        edges_k = np.bincount(src, minlength=n_src)
        bounds = np.concatenate([[0], np.cumsum(edges_k)])
        present = np.zeros(n, dtype=bool)
        present[cols] = True
        distinct_k = np.bincount(np.flatnonzero(present) // src_rows, minlength=n_src)
        um = unmasked[r0:r1]
        comps, mems = [], []
        for j, k in enumerate(np.flatnonzero(edges_k)):
            deg = np.bincount(row_of[by_src[bounds[k]:bounds[k + 1]]], minlength=rows)
            distinct = int(distinct_k[k])
            e = int(edges_k[k])
            # a tile with more entries than half the index buffer is loaded in pieces, each
            # overlapped like a tile of its own: the same bytes and the same compute
            pieces = -(-e // half_edges)
            # (with ``weighted`` each entry's value beside its column index)
            b = 4 * (e * (2 if config.weighted else 1) + (rows + 1) * pieces) \
                + 4 * width * distinct
            if j == 0:
                b += mask_bytes_per_row * rows
            # split rows: the output stays on chip between tiles, so the RTL's merge as it
            # streams out does not apply; assumed is a reduction network that adds a row's
            # pieces as they finish, pipelined, costing its latency once per tile (see
            # docs/sspmm.md, paper scale)
            columns = None
            if config.node_banks:
                # the tile's entries (row by row: the sort by source block is stable) in its
                # source rows, for the crossbar's model
                ent = by_src[bounds[k]:bounds[k + 1]]
                columns = (np.concatenate([[0], np.cumsum(deg)]), cols[ent] - k * src_rows)
            tile = estimate_rows(deg, um, e, width, config, n_cols=src_rows, columns=columns)
            comps.append(tile.cycles_compute
                         + config.adder_latency * (tile.extra["max_pieces"] - 1))
            for key in reads:
                reads[key] += tile.extra[key]
            mems.append(b / bpc)
            hbm += b
        out_b = 4 * int(np.where(np.diff(indptr[r0:r1 + 1]) > 0, um, 0).sum())
        hbm += out_b
        if not comps:
            out_prev += out_b / bpc
            continue
        # the previous block's write-back and this block's first loads before any compute
        # (the output buffer is not free before), then loads overlapped with compute
        comp = np.asarray(comps, dtype=np.float64)
        mem = np.asarray(mems)
        timeline += out_prev + mem[0] + float(np.maximum(comp[:-1], mem[1:]).sum()) + comp[-1]
        comp_total += comp.sum()
        mem_total += mem.sum()
        out_total += out_b / bpc
        out_prev = out_b / bpc
        tiles += len(comps)
    timeline += out_prev
    memory = mem_total + out_total
    return {"cycles_total": int(np.ceil(timeline)), "cycles_compute": int(np.ceil(comp_total)),
            "cycles_memory": int(np.ceil(memory)), "cycles_output": int(np.ceil(out_total)),
            "hbm_bytes": int(hbm), "bound": "memory" if memory > comp_total else "compute",
            "tiles": tiles, "hbm_bytes_per_cycle": bpc, **reads,
            "memory": "HBM, output-stationary 2-D tiles, loads double-buffered",
            "destination_blocks": len(blocks), "source_blocks": n_src,
            "destination_rows": dst_rows, "source_rows": src_rows}
