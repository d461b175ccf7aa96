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
                         trip exceeds the ring, :func:`_pass_read_cost`) / fetch_rows,
                         jobs bound at one per cycle,
                         a pass-by-pass replay of the context binding and the fetcher)
                     + pipeline fill and drain
    utilisation    = work_adds / (S * lanes * cycles_compute)

With S slices the scheduler still walks one row per cycle (a row can start no earlier than its
index), the row dispatcher's choice is replayed exactly (:func:`dispatch`: each row with work
to the slice with the fewest turns assigned so far), each slice's rows are estimated as above
with their own rates, and the job ends with the slowest slice (one more cycle of latency for
the slice queues).

The fourth term (:func:`slice_schedule`) follows the passes through the contexts: a job takes
one turn per ring period of L = ``adder_latency`` cycles, so a hub row of degree d needs d * L
cycles however idle the other contexts are, and it starts only when contexts in the groups its
passes need come free, which the rows before it (and its own earlier passes) hold. A local
buffer too shallow for its ring (see :func:`turn_gap`) stretches the ring period, and both the
turn rate and the row latency with it.

Load cycles: the four load streams fill in parallel (row pointers, column indices and feature
words ``load_width`` per beat, one mask row per beat), so the longest stream sets them. Output
cycles: two per row to read its element count k_v from the count buffer, then ``ceil(k_v /
lanes)`` beats of its computed elements (none for a row without neighbours); masked elements
never move.
The RTL comparison and the remaining error are documented in docs/sspmm.md.
"""

from __future__ import annotations

import functools
import heapq

import numpy as np

from moagcn.core.counters import Counters
from moagcn.core.graph import degrees, permute_rows
from moagcn.hw.sspmm.config import LONG_ROW_FACTOR, SSpmmConfig
from moagcn.hw.sspmm.protocol import (FRONT_END_LATENCY, ISSUE_TO_ROOT_SHARED,
                                      ROW_CHECK_LATENCY, ROW_HEAD_LATENCY, tree_depth)
from moagcn.hw.sspmm.protocol import issue_to_root as issue_to_root_of

from moagcn.sim.sspmm.golden import normalise_mask, piece_sizes
from moagcn.sim.sspmm.crossbar import CrossbarRates, drawn_sequences, pass_sequence, read_weights
from moagcn.sim.sspmm.crossbar import replay as crossbar_replay
from moagcn.sim.sspmm.crossbar import replay_sequences as crossbar_sequences
from moagcn.sim.sspmm.schedule import slice_schedules


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


def turn_gap(config: SSpmmConfig, issue_to_root: float | None = None) -> float:
    """Average cycles between two turns of one job context.

    A context takes a turn every ring period (L = ``adder_latency`` cycles) if an entry is in
    its local buffer. An entry's credit comes back ``round_trip`` cycles after the fetcher
    issued the entry that frees it: the issue, the index and row reads
    (:func:`~moagcn.hw.sspmm.protocol.issue_to_root`), the tree, the local-buffer write, the
    turn, the credit. With ``local_depth`` D entries in flight
    a context therefore takes D turns per ``max(D * L, ceil(round_trip / L) * L)`` cycles: a
    buffer too shallow for a short ring (D * L < round trip) slows every turn.
    ``issue_to_root``: the read's cycles to the tree when not the configuration's own (the
    shared node buffer's, with its mean wait for a grant).
    """
    L, D = config.adder_latency, config.local_depth
    if issue_to_root is None:
        issue_to_root = issue_to_root_of(config)
    round_trip = issue_to_root + tree_depth(config.groups, config.tree_radix) + 2
    return max(D * L, -(-round_trip // L) * L) / D


def estimate(indptr, mask, n_features: int, config: SSpmmConfig,
             n_cols: int | None = None, indices=None) -> Counters:
    """Predicted cycles of a job that fits ``config`` (mask ``None``: all ones); ``n_cols``: the
    feature rows loaded (default: as many as rows, a square job).

    The one cycle model of the design: throughput bounds and :func:`slice_schedule`, the
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
    table asks (rows not split, at most ``_SEQUENCE_LIMIT`` requests), or else with rows drawn
    with the job's read frequencies; without ``columns`` every feature row is taken as read
    equally often. Beyond ``_SEQUENCE_LIMIT`` requests every slice asks every cycle
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
        fetch = _FetchTiming(config)
        issue = _slice_issues([(deg, jobs, passes, arrival)], config, [fetch])[0]
    else:
        # each slice works on the rows the dispatcher gives it; its queue is deep enough that
        # the dispatcher practically never waits (see hw/sspmm/scheduler.py)
        owner = dispatch(deg * jobs, config.slices, piece)
        slice_rows = list(_rows_of(owner, config.slices))
        parts = [(deg[rows], jobs[rows], passes[rows], arrival[rows]) for rows in slice_rows]
        fetches = None
        if config.node_banks:
            # the shared node buffer: each slice's rate from a replay of the crossbar with
            # the slices' own reads (a slice left alone at the end fetches at full rate)
            if reads <= _SEQUENCE_LIMIT:
                if columns is not None and piece is None:
                    # passes open at a time: the contexts over the members of a pass (a pass
                    # has one job in each of up to G groups)
                    in_flight = max(1, round(config.contexts * int(passes.sum())
                                             / max(n_jobs, 1)))
                    seqs = [pass_sequence(rows, *columns, passes, in_flight)
                            for rows in slice_rows]
                else:
                    seqs = drawn_sequences(_or_uniform(weights, k_cols),
                                           [int(np.dot(d, p)) for d, _, p, _ in parts])
                fetches = _replayed_fetch(config, parts, seqs)
        if fetches is None:
            fetches = [_FetchTiming(config, weights, k_cols)] * len(parts)
        fetch = fetches[0] if fetches else _FetchTiming(config)
        issue = max(_slice_issues(parts, config, fetches), default=0)
    # the scheduler walks every row, those without work too, before the job can end
    issue = max(issue, -(-n // config.walk_rows))
    fill = _fill(config, fetch)
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

    fetch = _FetchTiming(config)
    G, R, L = config.groups, fetch.rate, config.adder_latency
    gap = turn_gap(config, fetch.issue_to_root)
    t_turns, t_jobs, t_reads = per_tile(turns), per_tile(jobs), per_tile(reads)
    port = t_reads + _pass_read_cost(config, fetch) * per_tile(passes)
    issue = np.maximum(np.maximum(np.ceil(t_turns * gap / (L * G)).astype(np.int64),
                                  np.ceil(port / R).astype(np.int64)), t_jobs)
    ends = _schedules(bounds, d, jobs, arrival, config, [fetch] * m)
    busy = t_jobs > 0
    latency = np.where(busy, np.ceil(ends), 0).astype(np.int64)
    issue = np.where(busy, np.maximum(issue, latency), 0)
    issue = np.maximum(issue, -(-size // config.walk_rows))
    compute = issue + np.where(busy, int(np.ceil(_fill(config, fetch))), 0) + 1
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


def _fill(config: SSpmmConfig, fetch: "_FetchTiming") -> float:
    """Fill and drain: a row's check stage and the emitter's head register, a row read's way
    to a local buffer, the wait for its context's turn (half a ring on average), the buffer
    read and the operand register, the adders, the write."""
    return (ROW_CHECK_LATENCY + ROW_HEAD_LATENCY + fetch.issue_to_root
            + tree_depth(config.groups, config.tree_radix) + 1 + config.adder_latency // 2
            + FRONT_END_LATENCY + config.adder_latency + 1
            + (1 if config.slices > 1 else 0)         # the dispatcher's slice queues
            + (1 if config.split_degree else 0))      # and its row register when it splits


def split_rows(deg, jobs, arrival, split: int, slices: int, rate: int = 1):
    """Rows longer than ``split`` as the dispatcher cuts them: pieces of ``max(split,
    ceil(deg / slices))`` neighbours (:func:`~moagcn.sim.sspmm.golden.piece_sizes`) in place of
    the row, with its jobs; the dispatcher sends ``rate`` pieces a cycle (so a split row delays
    the rows after it too). Returns the
    per-piece degrees, jobs and arrivals, each piece's index within its row, and the pieces
    of each row."""
    size, pieces = piece_sizes(deg, split, slices)
    rep = np.repeat(np.arange(deg.size), pieces)
    first = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    k = np.arange(rep.size) - np.repeat(first, pieces)          # piece index within its row
    piece_deg = np.minimum(deg[rep] - k * size[rep], size[rep])
    piece_deg = np.where(deg[rep] == 0, 0, piece_deg)
    # the dispatcher sends ``rate`` records a cycle (the RTL's one; as many as the scheduler
    # walks rows): in units of 1 / rate cycles a record with work leaves no earlier than its
    # row arrives and one unit after the record before it (u_i = max(rate * a_i, u_{i-1} + 1),
    # i.e. u_i - i is the running maximum of rate * a_i - i), so a split row delays the rows
    # after it
    p_jobs = jobs[rep]
    when = arrival[rep].astype(np.int64)
    work = np.flatnonzero((piece_deg > 0) & (p_jobs > 0))
    if work.size:
        i = np.arange(work.size)
        when[work] = (np.maximum.accumulate(rate * when[work] - i) + i) // rate
    return piece_deg, p_jobs, when, k, pieces


def dispatch(turns, slices: int, piece=None) -> np.ndarray:
    """The slice each row (or piece) goes to (-1: a row without work), as the row dispatcher
    decides: rows in order, each to the slice with the fewest turns assigned so far (lowest
    index on a tie); ``piece``: each record's index among its row's pieces, piece k > 0 going
    to the slice after piece k - 1's."""
    turns = np.asarray(turns, dtype=np.int64)
    owner = np.full(turns.size, -1, dtype=np.int64)
    if piece is None:
        heap = [(0, k) for k in range(slices)]
        for v in np.flatnonzero(turns > 0).tolist():
            w, k = heap[0]
            owner[v] = k
            heapq.heapreplace(heap, (w + int(turns[v]), k))
        return owner
    # with pieces the next slice is not always the least loaded: a plain argmin per row
    work = np.zeros(slices, dtype=np.int64)
    prev = 0
    piece = np.asarray(piece)
    for v in np.flatnonzero(turns > 0).tolist():
        k = int(np.argmin(work)) if piece[v] == 0 else (prev + 1) % slices
        owner[v] = prev = k
        work[k] += int(turns[v])
    return owner


def row_passes(unmasked, config: SSpmmConfig) -> np.ndarray:
    """Per row, how often the fetcher reads each of its neighbours' rows: once per pass of up
    to ``groups`` of its ``ceil(unmasked / group_lanes)`` jobs."""
    jobs = -(-np.asarray(unmasked, dtype=np.int64) // config.group_lanes)
    return -(-jobs // config.groups)


def _or_uniform(weights, n_cols: int) -> np.ndarray:
    """``weights``, or every one of ``n_cols`` rows read equally often when not known."""
    return weights if weights is not None else np.ones(max(n_cols, 1))


class _FetchTiming:
    """A slice's neighbour reads: rows per cycle (``rate``), cycles from an issue to the tree
    (``issue_to_root``), and with the shared node buffer (``node_banks``) the crossbar's mean
    wait per request (``wait``, in ``issue_to_root``) and the share of its grants served by
    another slice's read (``shared``); see :mod:`moagcn.sim.sspmm.crossbar`."""

    def __init__(self, config: SSpmmConfig, reads=None, n_cols: int = 0):
        self.rate, self.issue_to_root = float(config.fetch_rows), float(issue_to_root_of(config))
        self.wait = self.shared = 0.0
        if not config.node_banks:
            return
        self.issue_to_root = float(ISSUE_TO_ROOT_SHARED)
        if config.slices == 1:
            return          # one slice never meets another at a bank
        if reads is None:
            # every row read equally often: only the rows' number matters (how often two
            # slices ask for the same one), to a power of two
            rates = _uniform_crossbar(config.slices, config.node_banks,
                                      1 << max(n_cols - 1, 0).bit_length())
        else:
            rates = crossbar_replay(reads, config.slices, config.node_banks)
        self.rate = config.fetch_rows * rates.grant_rate
        self.wait, self.shared = rates.wait, rates.shared
        self.issue_to_root = ISSUE_TO_ROOT_SHARED + rates.wait


#: the most row requests the model replays in order, request by request (beyond, draws: the
#: replay's cost per cycle grows with the slices; docs/sim.md, "Why these options")
_SEQUENCE_LIMIT = 1_000_000


def _replayed_fetch(config: SSpmmConfig, parts, seqs) -> list:
    """Per slice, its fetch timing from the crossbar replayed with each slice asking for its
    rows ``seqs[k]`` every cycle until they are done
    (:func:`~moagcn.sim.sspmm.crossbar.replay_sequences`): rows granted per cycle from its
    first request, the mean wait, the share served by another slice's read."""
    reads = [len(q) for q in seqs]
    # a slice asks from its first row's arrival (the dispatcher hands out a row a cycle)
    starts = np.array([int(a.min()) if a.size else 0 for _, _, _, a in parts])
    finish, wait, shared = crossbar_sequences(seqs, config.node_banks, starts)
    fetch = []
    for r, end, start in zip(reads, finish.tolist(), starts.tolist()):
        f = _FetchTiming(config)
        # the rate over the cycles the slice was asking (its pass replay waits for the rows'
        # arrival itself)
        f.rate = config.fetch_rows * (min(1.0, r / max(end - start, 1.0)) if r else 1.0)
        f.wait, f.shared = wait, shared
        f.issue_to_root = ISSUE_TO_ROOT_SHARED + wait
        fetch.append(f)
    return fetch


@functools.lru_cache(maxsize=64)
def _uniform_crossbar(slices: int, banks: int, n_cols: int) -> CrossbarRates:
    """The crossbar's rates when every feature row is read equally often."""
    return crossbar_replay(np.ones(n_cols), slices, banks)


def _rows_of(owner: np.ndarray, slices: int):
    """Per slice, its rows in order."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(slices + 1))
    for k in range(slices):
        yield order[bounds[k]:bounds[k + 1]]


def _slice_issues(parts, config: SSpmmConfig, fetches) -> list[int]:
    """Per slice (``parts``: each slice's degrees, jobs, passes and arrivals; ``fetches``: its
    read timing), the cycles until it has issued its last turn: the larger of the throughput
    bounds (turns over the contexts, reads over the fetcher's R reads per cycle, one job per
    cycle) and :func:`slice_schedule`, which replays how the slice's contexts are bound to
    passes and how the passes share the fetcher: a hub row, or a row queued behind one, can
    only start when contexts in the groups its passes need come free (see there)."""
    if not parts:
        return []
    bounds = np.concatenate([[0], np.cumsum([p[0].size for p in parts])])
    cat = [np.concatenate([p[k] for p in parts]) for k in range(4)]
    ends = _schedules(bounds, cat[0], cat[1], cat[3], config, fetches)
    out = []
    for (deg, jobs, passes, _), fetch, end in zip(parts, fetches, ends.tolist()):
        if not (jobs > 0).any():
            out.append(0)
            continue
        G, R, L = config.groups, fetch.rate, config.adder_latency
        gap = turn_gap(config, fetch.issue_to_root)
        reads = int(np.dot(deg, passes)) + _pass_read_cost(config, fetch) * int(passes.sum())
        issue = max(int(np.ceil(int(np.dot(deg, jobs)) * gap / (L * G))),
                    int(np.ceil(reads / R)), int(jobs.sum()))
        out.append(max(issue, int(np.ceil(end))))
    return out


#: read-port cycles a pass costs beyond its reads, per cycle by which a row read's round trip
#: (issue to the turn that frees its entry) exceeds the ring period, over that period: fitted on
#: 24 jobs of the tiny preset (ring 3, round trip 6; seeds 800-823 of
#: ``validate_sspmm.held_out_job``), checked on its held-out jobs (docs/sspmm.md, "Cycle
#: model"). Zero where the round trip fits in a ring (multi, paper), 0.05 on the default preset
PASS_PORT_LOSS = 0.35


def _pass_read_cost(config: SSpmmConfig, fetch: "_FetchTiming") -> float:
    """Read-port cycles each pass costs beyond its reads (:data:`PASS_PORT_LOSS`): with a ring
    shorter than a read's round trip a pass that starts cannot keep its contexts' turns fed
    from its first reads, and when the port is what bounds the slice (one read per cycle, every
    pass at its ring's pace) the port idles for part of a cycle at each pass's start."""
    L = config.adder_latency
    round_trip = fetch.issue_to_root + tree_depth(config.groups, config.tree_radix) + 2
    return PASS_PORT_LOSS * max(0.0, round_trip - L) / L


def _schedule_terms(config: SSpmmConfig, fetch: "_FetchTiming") -> tuple[float, float, float]:
    """The replay's rates for a slice with read timing ``fetch``: reads per cycle, the turn
    rate of one pass (neighbours per cycle) and the hold (:func:`slice_schedule`)."""
    cap = 1.0 / turn_gap(config, fetch.issue_to_root)
    hold = (fetch.issue_to_root + tree_depth(config.groups, config.tree_radix) + 1) * cap
    return fetch.rate, cap, hold


def _schedules(bounds, deg, jobs, arrival, config: SSpmmConfig, fetches,
               compiled: bool = True) -> np.ndarray:
    """:func:`slice_schedule` of each segment ``s`` (rows ``bounds[s]:bounds[s + 1]``) with
    read timing ``fetches[s]``: the compiled loop (:mod:`moagcn.sim.sspmm.schedule`), or the
    Python one where it is not available (or ``compiled`` is False); the same numbers."""
    bounds = np.asarray(bounds, dtype=np.int64)
    terms = np.array([_schedule_terms(config, f) for f in fetches], dtype=np.float64
                     ).reshape(-1, 3)
    if compiled:
        ends = slice_schedules(bounds, deg, jobs, arrival, config.groups, config.adder_latency,
                               terms[:, 0], config.local_depth, terms[:, 1], terms[:, 2])
        if ends is not None:
            return ends
    return np.array([slice_schedule(deg[lo:hi], jobs[lo:hi], arrival[lo:hi], config, f)
                     for lo, hi, f in zip(bounds[:-1].tolist(), bounds[1:].tolist(), fetches)],
                    dtype=np.float64)


def slice_schedule(deg, jobs, arrival, config: SSpmmConfig,
                   fetch: "_FetchTiming | None" = None) -> float:
    """When a slice issues its last turn, from a replay of its context binding and fetching.
    This is the reference loop in Python; :mod:`moagcn.sim.sspmm.schedule` compiles the same
    loop, which :func:`estimate_rows` runs (tests/sim/test_cycle_model.py: equal results).

    The design (``hw/sspmm/fetch.py``), at the granularity of passes:

    - *binding*: the emitter offers the slice's jobs in row order, one per cycle and none before
      the scheduler has walked to its row; the binder puts each on a free context in a group
      its pass does not use yet (the group after the last one used if it has a free context,
      else the lowest), and a row's next job waits, holding the pass's contexts, until such a
      context comes free (no job overtakes it: ``stall_no_context``);
    - *issue*: a closed pass reads its neighbours' rows; the passes in flight share the R reads
      per cycle (round robin) and each takes at most one turn per ``turn_gap`` cycles in each
      of its contexts, so k passes each progress at ``min(1 / gap, R / k)`` neighbours per cycle;
    - *release*: a context is free for the next job once its pass's last entry is in its local
      buffer: the pass issues that entry ``local_depth`` turns before its last when the adders
      set the pace (a short pass issues all of its entries one per cycle, a cycle after its
      bind), and the entry reaches the buffer ``issue_to_root + tree depth + 1`` cycles after
      its issue (with two-entry buffers and short jobs those cycles decide how long contexts
      stay bound); the next job's turns follow the old job's in the same context (the double
      buffer), so a pass starts when every member's previous pass has finished.

    The rest of a slice's time (a row read's way to the adders, the adders, the write) is the
    fill that :func:`estimate_rows` adds. Events are pass releases and completions, so the cost
    is a few microseconds per job.
    """
    fetch = fetch or _FetchTiming(config)
    G, L = config.groups, config.adder_latency
    lead = config.local_depth
    # a context is released when its pass's last entry reaches its local buffer: the issue's
    # way there after the last issue, in turns at the adders' pace
    R, cap, hold = _schedule_terms(config, fetch)
    # per group, the contexts free to bind, each as (pass, member) it last served (None: none)
    pool = [[None] * L for _ in range(G)]
    done = {}               # (pass, member) -> when that context's last turn of it was
    members = []            # per pass, its groups
    left = []               # per pass, members still taking turns
    waiting = {}            # pass -> [contexts it still waits for, neighbours, bound, prior]
    dependents = {}         # (pass, member) -> passes waiting for that context
    events = []             # (progress, kind, pass, member): 0 = release, 1 = member finishes
    state = {"t": 0.0, "progress": 0.0, "active": 0, "end": 0.0}

    def rate():             # neighbours per cycle of each pass in flight
        k = state["active"]
        return min(cap, R / k) if k else 0.0

    def advance(t):
        state["progress"] += (t - state["t"]) * rate()
        state["t"] = t

    def next_event() -> float:
        if not events:
            return float("inf")
        r = rate()
        ahead = events[0][0] - state["progress"]
        return state["t"] + max(ahead, 0.0) / r if r else state["t"]

    def activate(p: int, d: int, t_bound: float, prior: list):
        # the slowest member's previous turns end now (or the pass was bound now); the others
        # take the pass's rows as they come, up to ``lead`` entries before it
        now, v = state["t"], state["progress"]
        t_issue = max(t_bound, max(prior) - lead / cap)
        state["active"] += 1
        # the pass issues once bound (a cycle to set up), its last ``lead`` entries (or all of
        # a short pass's) one per cycle; its last entry then takes ``hold`` to arrive
        setup = (d if d <= lead else 1) * cap
        heapq.heappush(events, (v + max(d - lead, 0) + setup + hold, 0, p, 0))
        for i, f in enumerate(prior):
            heapq.heappush(events, (v + d + (max(f, t_issue) - now) * cap, 1, p, i))

    def pop_event():
        _, kind, p, i = heapq.heappop(events)
        if kind == 0:
            for j, g in enumerate(members[p]):
                pool[g].append((p, j))
            return
        done[(p, i)] = state["t"]
        left[p] -= 1
        if not left[p]:
            state["active"] -= 1
            state["end"] = max(state["end"], state["t"])
        for q in dependents.pop((p, i), ()):
            wait = waiting[q]
            wait[0].discard((p, i))
            if not wait[0]:
                del waiting[q]
                activate(q, wait[1], wait[2], [done.get(c, -1e18) for c in wait[3]])

    bound = -1.0            # when the last job was bound
    nxt = 0                 # the group the binder tries first
    for v in np.flatnonzero(jobs > 0).tolist():
        d, rest, a = int(deg[v]), int(jobs[v]), float(arrival[v])
        while rest:
            m = min(G, rest)
            rest -= m
            used, prev = [], []
            for _ in range(m):
                while True:
                    free = [g for g in range(G) if pool[g] and g not in used]
                    t_bind = max(bound + 1, a, state["t"])
                    t_event = next_event()
                    if free and t_bind <= t_event:
                        advance(t_bind)
                        break
                    advance(t_event)
                    pop_event()
                g = nxt if nxt in free else free[0]
                ctxs = pool[g]
                prev.append(ctxs.pop(ctxs.index(None) if None in ctxs else 0))
                used.append(g)
                nxt = (g + 1) % G
                bound = state["t"]
            p = len(members)
            members.append(used)
            left.append(m)
            busy = {c for c in prev if c is not None and c not in done}
            if busy:
                waiting[p] = [busy, d, bound, prev]
                for c in busy:
                    dependents.setdefault(c, []).append(p)
            else:
                activate(p, d, bound, [done.get(c, -1e18) if c is not None else -1e18
                                       for c in prev])
    while events:
        advance(next_event())
        pop_event()
    return state["end"]
