"""Cycle model of the S-SpMM accelerator.

Work is split into *jobs*: one per (row v, chunk of W = lanes / groups unmasked features), for rows
with at least one neighbour and one unmasked feature. A job takes one *turn* per neighbour; a
turn adds one neighbour's W selected features into W accumulators. Each of the G groups takes
one turn per cycle, interleaving ``adder_latency`` jobs so that an accumulator's previous sum
leaves the adder exactly when its next operand arrives. The fetcher reads each neighbour row
once per *pass* (up to G jobs of a row, one per group, multicast down the distribution tree)
and reads ``fetch_rows`` rows per cycle. Hence

    turns          = sum_v deg(v) * ceil(|S_v| / W)
    rows fetched   = sum_v deg(v) * ceil(ceil(|S_v| / W) / G)
    cycles_compute ~ max(turns / G, (rows fetched + a charge per pass where a read's round
                         trip exceeds the ring, :func:`~moagcn.sim.sspmm.passes.pass_read_cost`) / fetch_rows,
                         jobs bound at one per cycle,
                         a pass-by-pass replay of the context binding and the fetcher)
                     + pipeline fill and drain
    utilisation    = work_adds / (S * lanes * cycles_compute)

With S slices the scheduler still walks one row per cycle (a row can start no earlier than its
index), the row dispatcher's choice is replayed exactly (:func:`~moagcn.sim.sspmm.passes.dispatch`: each row with work
to the slice with the fewest turns assigned so far), each slice's rows are estimated as above
with their own rates, and the job ends with the slowest slice (one more cycle of latency for
the slice queues).

The fourth term (:func:`~moagcn.sim.sspmm.passes.slice_schedule`) follows the passes through the contexts: a job takes
one turn per ring period of L = ``adder_latency`` cycles, so a hub row of degree d needs d * L
cycles however idle the other contexts are, and it starts only when contexts in the groups its
passes need come free, which the rows before it (and its own earlier passes) hold. A local
buffer too shallow for its ring (see :func:`~moagcn.sim.sspmm.passes.turn_gap`) stretches the ring period, and both the
turn rate and the row latency with it.

Load cycles: the four load streams fill in parallel (row pointers, column indices and feature
words ``load_width`` per beat, one mask row per beat), so the longest stream sets them. Output
cycles: two per row to read its element count k_v from the count buffer, then ``ceil(k_v /
lanes)`` beats of its computed elements (none for a row without neighbours); masked elements
never move.
The RTL comparison and the remaining error are documented in docs/sspmm.md.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import degrees, permute_rows
from moagcn.hw.sspmm.config import LONG_ROW_FACTOR, SSpmmConfig
from moagcn.sim.sspmm.crossbar import drawn_sequences, pass_sequence, read_weights
from moagcn.sim.sspmm.golden import normalise_mask
from moagcn.sim.sspmm.passes import (SEQUENCE_LIMIT, FetchTiming, dispatch, fill_cycles,
                                     or_uniform, pass_read_cost, replayed_fetch, row_passes,
                                     rows_of, schedules, slice_issues, split_rows, turn_gap)


def streamed_elements(indptr, mask, n_features: int) -> np.ndarray:
    """Which elements of Z the output stream carries (bool, n_rows x n_features): the unmasked
    features below ``n_features`` of rows with at least one neighbour, in row-major order."""
    indptr = np.asarray(indptr)
    n = indptr.size - 1
    keep = np.asarray(mask, dtype=bool)[:n, :n_features]
    return keep & (np.diff(indptr) > 0)[:, None]


def output_counts(indptr, mask, n_features: int) -> np.ndarray:
    """Per row, the words the output stream carries (see :func:`streamed_elements`)."""
    return streamed_elements(indptr, mask, n_features).sum(axis=1)


def estimate(indptr, mask, n_features: int, config: SSpmmConfig,
             n_cols: int | None = None, indices=None) -> Counters:
    """Predicted cycles of a job that fits ``config`` (mask ``None``: all ones); ``n_cols``: the
    feature rows loaded (default: as many as rows, a square job).

    The one cycle model of the design: throughput bounds and :func:`~moagcn.sim.sspmm.passes.slice_schedule`, the
    pass-by-pass replay of the context binding (compiled, :mod:`moagcn.sim.sspmm.schedule`).
    The model device, ``sspmm estimate`` / ``compare``, the benchmarks and the performance
    model's measurements all come from it; docs/sspmm.md gives its error against the RTL.

    ``indices``: the column indices, for the shared node buffer's crossbar (``node_banks`` >
    0: which rows the slices ask for; without them every feature row is taken as read
    equally often, see :func:`estimate_rows`).

    Load, compute and output cycles and the work; ``extra`` holds the model's ``turns``,
    ``jobs`` and ``rows_fetched`` (the last equals the RTL's counter exactly), and ``rows_read``
    and ``stall_bank`` (the crossbar's, see :mod:`moagcn.sim.sspmm.crossbar`).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    mask = normalise_mask(mask, (n, n_features))
    return estimate_rows(degrees(indptr), mask.sum(axis=1), int(indptr[-1]), n_features, config,
                         n_cols=n_cols,
                         columns=None if indices is None else (indptr, indices))


def row_order(deg, config: SSpmmConfig) -> np.ndarray | None:
    """The order in which the driver gives a job's rows to the accelerator
    (``config.row_order``): for ``long_first`` the rows of more than ``LONG_ROW_FACTOR`` times
    the mean degree of the rows that have neighbours, longest first (ties in the graph's
    order), then the others in the graph's order; ``None`` where that is the graph's order
    (``given``, or no long row out of place). Empty rows do not lower the bar: a tile that is
    mostly empty rows would otherwise call most of its other rows long, which approaches a
    sort by degree. Applying it to a job already in this order gives the same order."""
    deg = np.asarray(deg, dtype=np.int64)
    if config.row_order == "given" or deg.size < 2:
        return None
    busy = deg[deg > 0]
    if busy.size == 0:
        return None
    long = np.flatnonzero(deg > LONG_ROW_FACTOR * busy.mean())
    if long.size == 0:
        return None
    long = long[np.argsort(-deg[long], kind="stable")]
    if np.array_equal(long, np.arange(long.size)):
        return None
    rest = np.ones(deg.size, dtype=bool)
    rest[long] = False
    return np.concatenate([long, np.flatnonzero(rest)])


def estimate_rows(deg, unmasked, n_edges: int, n_features: int,
                  config: SSpmmConfig, n_cols: int | None = None,
                  columns=None, order="auto") -> Counters:
    """:func:`estimate` from per-row figures: the degrees and the unmasked features (below
    ``n_features``) of the job's rows, and its stored entries. Tiles are estimated from slices
    of the whole job's figures, without copying their masks.

    ``columns``: the job's ``(indptr, indices)``, only used with ``node_banks``. The model
    then replays the crossbar with the rows each slice asks for, in the order its pass
    table asks (rows not split, at most ``SEQUENCE_LIMIT`` requests), or else with rows drawn
    with the job's read frequencies; without ``columns`` every feature row is taken as read
    equally often. Beyond ``SEQUENCE_LIMIT`` requests every slice asks every cycle
    (:func:`~moagcn.sim.sspmm.crossbar.replay`).

    The rows are taken in the graph's order rearranged by :func:`row_order`, as the driver
    gives them to the accelerator (``order``: that order when the caller has it, e.g. a
    tile's, remembered across calls)."""
    deg = np.asarray(deg, dtype=np.int64)
    unmasked = np.asarray(unmasked, dtype=np.int64)
    if isinstance(order, str):
        order = row_order(deg, config)      # the rows as the driver gives them
    if order is not None:
        deg, unmasked = deg[order], unmasked[order]
        if columns is not None and config.node_banks:
            columns = permute_rows(*columns, order)
    n = deg.size
    jobs = np.where(deg > 0, -(-unmasked // config.group_lanes), 0)
    k_cols = n if n_cols is None else n_cols
    weights = None          # per feature row, how often the job reads it (node_banks)
    if config.node_banks and config.slices > 1 and columns is not None:
        weights = read_weights(*columns, row_passes(unmasked, config), k_cols)
    # the scheduler walks every row, walk_rows per cycle, before any slice can take it
    arrival = np.arange(n, dtype=np.int64) // config.walk_rows
    row_deg, piece = deg, None
    pieces = np.ones(n, dtype=np.int64)
    if config.split_degree and deg.size and deg.max() > config.split_degree:
        deg, jobs, arrival, piece, pieces = split_rows(deg, jobs, arrival, config.split_degree,
                                                       config.slices, config.walk_rows)
    turns = int(np.dot(deg, jobs))
    n_jobs = int(jobs.sum())
    passes = -(-jobs // config.groups)
    reads = int(np.dot(deg, passes))
    if config.slices == 1:
        fetch = FetchTiming(config)
        issue = slice_issues([(deg, jobs, passes, arrival)], config, [fetch])[0]
    else:
        # each slice works on the rows the dispatcher gives it; its queue is deep enough that
        # the dispatcher practically never waits (see hw/sspmm/scheduler.py)
        owner = dispatch(deg * jobs, config.slices, piece)
        slice_rows = list(rows_of(owner, config.slices))
        parts = [(deg[rows], jobs[rows], passes[rows], arrival[rows]) for rows in slice_rows]
        fetches = None
        if config.node_banks:
            # the shared node buffer: each slice's rate from a replay of the crossbar with
            # the slices' own reads (a slice left alone at the end fetches at full rate)
            if reads <= SEQUENCE_LIMIT:
                if columns is not None and piece is None:
                    # passes open at a time: the contexts over the members of a pass (a pass
                    # has one job in each of up to G groups)
                    in_flight = max(1, round(config.contexts * int(passes.sum())
                                             / max(n_jobs, 1)))
                    seqs = [pass_sequence(rows, *columns, passes, in_flight)
                            for rows in slice_rows]
                else:
                    seqs = drawn_sequences(or_uniform(weights, k_cols),
                                           [int(np.dot(d, p)) for d, _, p, _ in parts])
                fetches = replayed_fetch(config, parts, seqs)
        if fetches is None:
            fetches = [FetchTiming(config, weights, k_cols)] * len(parts)
        fetch = fetches[0] if fetches else FetchTiming(config)
        issue = max(slice_issues(parts, config, fetches), default=0)
    # the scheduler walks every row, those without work too, before the job can end
    issue = max(issue, -(-n // config.walk_rows))
    fill = fill_cycles(config, fetch)
    compute = issue + (int(np.ceil(fill)) if n_jobs else 0) + 1
    # the load streams fill in parallel, one beat per stream per cycle: the longest one counts
    lw = config.load_width
    k = n if n_cols is None else n_cols
    load = max(-(-(n + 1) // lw), -(-n_edges // lw), n, k * -(-n_features // lw))
    counts = np.where(row_deg > 0, unmasked, 0)
    # per row: read its element count, decide; then its beats. A row in pieces is merged beat
    # by beat: the operands' register, an add of L cycles per further piece, the sum's register
    beats = -(-counts // config.lanes)
    merge = int(np.dot(beats, (pieces - 1) * config.adder_latency + 2 * (pieces > 1)))
    output = 2 * n + int(beats.sum()) + merge
    work = int(np.dot(row_deg, unmasked))
    return Counters(work_adds=work, cycles_load=load, cycles_compute=compute,
                    cycles_output=output, lanes=config.adders, clock_mhz=config.clock_mhz,
                    extra={"turns": turns, "jobs": n_jobs, "rows_fetched": reads,
                           "rows_read": int(round(reads * (1 - fetch.shared))),
                           "stall_bank": int(round(reads * fetch.wait)),
                           "merge_cycles": merge, "max_pieces": int(pieces.max(initial=1))})


def tiles_at_once(config: SSpmmConfig) -> bool:
    """Whether :func:`estimate_tiles` models ``config`` (one slice, no split rows, no shared
    node buffer: the default preset's kind)."""
    return config.slices == 1 and not config.split_degree and not config.node_banks


def estimate_tiles(deg, unmasked, bounds, n_edges, n_features, n_cols,
                   config: SSpmmConfig, orders) -> list[Counters]:
    """:func:`estimate_rows` of many tiles at once, the same counters to the cycle (the model
    device's path: a large graph is hundreds of tiles per call; the throughput bounds are a few
    numpy passes over all their rows and the replay one call of the compiled loop). Tile ``i``
    is rows ``bounds[i]:bounds[i + 1]`` of ``deg`` and ``unmasked`` (in the tile's own order),
    with ``n_edges[i]`` entries, ``n_features[i]`` features and ``n_cols[i]`` feature rows;
    ``orders[i]`` its :func:`row_order` (None: as it is). Only for :func:`tiles_at_once`
    configurations."""
    if not tiles_at_once(config):
        raise ValueError("estimate_tiles models one slice without split rows or a shared "
                         "node buffer; use estimate_rows")
    deg = np.asarray(deg, dtype=np.int64)
    unmasked = np.asarray(unmasked, dtype=np.int64)
    bounds = np.asarray(bounds, dtype=np.int64)
    m = bounds.size - 1
    size = np.diff(bounds)
    if (size < 1).any():
        raise ValueError("estimate_tiles: every tile needs at least one row")
    seg = np.repeat(np.arange(m), size)             # each row's tile
    # the rows as the driver gives them: each tile's own order
    perm = np.arange(deg.size)
    for i, order in enumerate(orders):
        if order is not None:
            perm[bounds[i]:bounds[i + 1]] = bounds[i] + np.asarray(order, dtype=np.int64)
    row_deg, row_unmasked = deg, unmasked
    d, u = deg[perm], unmasked[perm]
    jobs = np.where(d > 0, -(-u // config.group_lanes), 0)
    passes = -(-jobs // config.groups)
    turns = d * jobs
    reads = d * passes
    pos = np.arange(deg.size) - bounds[seg]         # a row's place in its tile
    arrival = pos // config.walk_rows

    def per_tile(x):                                 # the sum over each tile's rows
        return np.add.reduceat(x, bounds[:-1]) if x.size else np.zeros(m, dtype=x.dtype)

    fetch = FetchTiming(config)
    G, R, L = config.groups, fetch.rate, config.adder_latency
    gap = turn_gap(config, fetch.issue_to_root)
    t_turns, t_jobs, t_reads = per_tile(turns), per_tile(jobs), per_tile(reads)
    port = t_reads + pass_read_cost(config, fetch) * per_tile(passes)
    issue = np.maximum(np.maximum(np.ceil(t_turns * gap / (L * G)).astype(np.int64),
                                  np.ceil(port / R).astype(np.int64)), t_jobs)
    ends = schedules(bounds, d, jobs, arrival, config, [fetch] * m)
    busy = t_jobs > 0
    latency = np.where(busy, np.ceil(ends), 0).astype(np.int64)
    issue = np.where(busy, np.maximum(issue, latency), 0)
    issue = np.maximum(issue, -(-size // config.walk_rows))
    compute = issue + np.where(busy, int(np.ceil(fill_cycles(config, fetch))), 0) + 1
    lw = config.load_width
    n_edges, n_features = np.asarray(n_edges, np.int64), np.asarray(n_features, np.int64)
    n_cols = np.asarray(n_cols, np.int64)
    load = np.maximum(np.maximum(-(-(size + 1) // lw), -(-n_edges // lw)),
                      np.maximum(size, n_cols * -(-n_features // lw)))
    counts = np.where(row_deg > 0, row_unmasked, 0)
    output = 2 * size + per_tile(-(-counts // config.lanes))
    return [Counters(work_adds=0, cycles_load=int(load[i]), cycles_compute=int(compute[i]),
                     cycles_output=int(output[i]), lanes=config.adders,
                     clock_mhz=config.clock_mhz,
                     extra={"turns": int(t_turns[i]), "jobs": int(t_jobs[i]),
                            "rows_fetched": int(t_reads[i]), "rows_read": int(t_reads[i]),
                            "stall_bank": 0, "merge_cycles": 0, "max_pieces": 1})
            for i in range(m)]


