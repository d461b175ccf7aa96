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
    cycles_compute ~ max(turns / G, rows fetched / fetch_rows, jobs bound at one per cycle,
                         max_v start(v) + deg(v) * L * ceil(passes_v / L))
                     + pipeline fill and drain
    utilisation    = work_adds / (S * lanes * cycles_compute)

With S slices the scheduler still walks one row per cycle (a row can start no earlier than its
index), the row dispatcher's choice is replayed exactly (:func:`dispatch`: each row with work
to the slice with the fewest turns assigned so far), each slice's rows are estimated as above
with their own rates, and the job ends with the slowest slice (one more cycle of latency for
the slice queues).

The fourth term is the latency of a long row: a job takes one turn per ring period of L =
``adder_latency`` cycles, so a hub row of degree d needs d * L cycles however idle the other
contexts are; start(v) is when the rows before v have been issued at the three rates before
it. A local buffer too shallow for its ring (see :func:`turn_gap`) stretches the ring period,
and both the turn rate and the row latency with it.

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
from moagcn.core.graph import degrees
from moagcn.hw.sspmm.config import SSpmmConfig
from moagcn.hw.sspmm.protocol import FRONT_END_LATENCY, ISSUE_TO_ROOT, tree_depth

from .golden.sspmm import normalise_mask


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


def turn_gap(config: SSpmmConfig) -> float:
    """Average cycles between two turns of one job context.

    A context takes a turn every ring period (L = ``adder_latency`` cycles) if an entry is in
    its local buffer. An entry's credit comes back ``round_trip`` cycles after the fetcher
    issued the entry that frees it: the issue, the index and row reads (``ISSUE_TO_ROOT``), the
    tree, the local-buffer write, the turn, the credit. With ``local_depth`` D entries in flight
    a context therefore takes D turns per ``max(D * L, ceil(round_trip / L) * L)`` cycles: a
    buffer too shallow for a short ring (D * L < round trip) slows every turn.
    """
    L, D = config.adder_latency, config.local_depth
    round_trip = ISSUE_TO_ROOT + tree_depth(config.groups, config.tree_radix) + 2
    return max(D * L, -(-round_trip // L) * L) / D


def estimate(indptr, mask, n_features: int, config: SSpmmConfig,
             n_cols: int | None = None) -> Counters:
    """Predicted cycles of a job that fits ``config`` (mask ``None``: all ones); ``n_cols``: the
    feature rows loaded (default: as many as rows, a square job).

    Load, compute and output cycles and the work; ``extra`` holds the model's ``turns``,
    ``jobs`` and ``rows_fetched`` (the last equals the RTL's counter exactly).
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    mask = normalise_mask(mask, (n, n_features))
    return estimate_rows(degrees(indptr), mask.sum(axis=1), int(indptr[-1]), n_features, config,
                         n_cols=n_cols)


def estimate_rows(deg, unmasked, n_edges: int, n_features: int,
                  config: SSpmmConfig, n_cols: int | None = None) -> Counters:
    """:func:`estimate` from per-row figures: the degrees and the unmasked features (below
    ``n_features``) of the job's rows, and its stored entries. Tiles are estimated from slices
    of the whole job's figures, without copying their masks."""
    deg = np.asarray(deg, dtype=np.int64)
    unmasked = np.asarray(unmasked, dtype=np.int64)
    n = deg.size
    w = config.group_lanes
    jobs = np.where(deg > 0, -(-unmasked // w), 0)
    # the scheduler walks every row, walk_rows per cycle, before any slice can take it
    arrival = np.arange(n, dtype=np.int64) // config.walk_rows
    row_deg, merges = deg, 0
    if config.split_degree and deg.size and deg.max() > config.split_degree:
        deg, jobs, arrival, merges = split_rows(deg, jobs, arrival, config.split_degree)
    turns = int(np.dot(deg, jobs))
    n_jobs = int(jobs.sum())
    passes = -(-jobs // config.groups)
    reads = int(np.dot(deg, passes))
    if config.slices == 1:
        issue = _slice_issue(deg, jobs, passes, arrival, config)
    else:
        # each slice works on the rows the dispatcher gives it; its queue is deep enough that
        # the dispatcher practically never waits (see hw/sspmm/scheduler.py)
        owner = dispatch(deg * jobs, config.slices)
        issue = max((_slice_issue(deg[rows], jobs[rows], passes[rows], arrival[rows], config)
                     for rows in _rows_of(owner, config.slices)), default=0)
    # the scheduler walks every row, those without work too, before the job can end
    issue = max(issue, -(-n // config.walk_rows))
    # fill and drain: a row read's way to a local buffer, the wait for its context's turn
    # (half a ring on average), the buffer read, the adders, the write
    fill = (ISSUE_TO_ROOT + tree_depth(config.groups, config.tree_radix) + 1
            + config.adder_latency // 2 + FRONT_END_LATENCY + config.adder_latency + 1
            + (1 if config.slices > 1 else 0))        # the dispatcher's slice queues
    # merging a split row's pieces, in order: one add (L cycles) per further piece
    merge = config.adder_latency * (merges - 1) if merges else 0
    compute = issue + (fill if n_jobs else 0) + 1 + merge
    # the load streams fill in parallel, one beat per stream per cycle: the longest one counts
    lw = config.load_width
    k = n if n_cols is None else n_cols
    load = max(-(-(n + 1) // lw), -(-n_edges // lw), n, k * -(-n_features // lw))
    counts = np.where(row_deg > 0, unmasked, 0)
    # per row: read its element count, decide; then its beats
    output = 2 * n + int((-(-counts // config.lanes)).sum())
    work = int(np.dot(row_deg, unmasked))
    return Counters(work_adds=work, cycles_load=load, cycles_compute=compute,
                    cycles_output=output, lanes=config.adders, clock_mhz=config.clock_mhz,
                    extra={"turns": turns, "jobs": n_jobs, "rows_fetched": reads})


def split_rows(deg, jobs, arrival, split: int):
    """Rows longer than ``split`` as pieces of at most ``split`` neighbours, in place of the row
    (same jobs, same arrival); returns the per-piece arrays and the most pieces of one row."""
    pieces = np.maximum(-(-deg // split), 1)
    rep = np.repeat(np.arange(deg.size), pieces)
    first = np.concatenate([[0], np.cumsum(pieces)[:-1]])
    k = np.arange(rep.size) - np.repeat(first, pieces)          # piece index within its row
    piece_deg = np.minimum(deg[rep] - k * split, split)
    piece_deg = np.where(deg[rep] == 0, 0, piece_deg)
    return piece_deg, jobs[rep], arrival[rep], int(pieces.max())


def dispatch(turns, slices: int) -> np.ndarray:
    """The slice each row goes to (-1: a row without work), as the row dispatcher decides:
    rows in order, each to the slice with the fewest turns assigned so far (lowest index on a
    tie)."""
    import heapq
    turns = np.asarray(turns, dtype=np.int64)
    owner = np.full(turns.size, -1, dtype=np.int64)
    heap = [(0, k) for k in range(slices)]
    for v in np.flatnonzero(turns > 0).tolist():
        work, k = heap[0]
        owner[v] = k
        heapq.heapreplace(heap, (work + int(turns[v]), k))
    return owner


def _rows_of(owner: np.ndarray, slices: int):
    """Per slice, its rows in order."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(slices + 1))
    for k in range(slices):
        yield order[bounds[k]:bounds[k + 1]]


def _slice_issue(deg, jobs, passes, arrival, config: SSpmmConfig) -> int:
    """Cycles until one slice (or the whole engine, with one slice) has issued its last turn:
    the largest of its turn rate, its fetch rate, one job per cycle, and its longest row's
    latency from when the row can start.

    A job takes one turn per ``gap`` cycles (a ring period when its local buffer is deep
    enough), so a long row bounds the job: its passes run side by side, at most L per group (the
    contexts), and it starts once the rows before it have been issued at the engine's rates and
    the scheduler has walked to it.
    """
    G, R, L = config.groups, config.fetch_rows, config.adder_latency
    gap = turn_gap(config)
    turns = deg * jobs
    has = jobs > 0
    if not has.any():
        return 0

    def before(x):      # per row, the sum over the rows before it
        return np.cumsum(x) - x

    issue = max(int(np.ceil(turns.sum() * gap / (L * G))), -(-int(np.dot(deg, passes)) // R),
                int(jobs.sum()))
    row_time = deg * gap * -(-passes // L)
    start = np.maximum(np.maximum(before(turns) * gap / (L * G), before(deg * passes) / R),
                       np.maximum(before(jobs), arrival))
    return max(issue, int(np.ceil((start + row_time)[has].max())))

